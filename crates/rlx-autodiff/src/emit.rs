//! Small builders the rules share: typed scalar constants, zeros,
//! un-broadcasting a cotangent back to an operand's shape, and inlining one
//! graph into another.

use crate::error::Result;
use rlx_ir::{Attrs, Graph, GraphBuilder, HostTensor, Shape, TensorType, ValueId};

pub type B = GraphBuilder;

fn dims_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// A scalar constant of `like`'s dtype.
pub fn sc(b: &mut B, v: f64, like: ValueId) -> Result<ValueId> {
    let dt = b.dtype(like);
    Ok(b.scalar(v, dt)?)
}

/// Zeros of type `ty` (a scalar broadcast, so no large literal is stored).
pub fn zeros(b: &mut B, ty: &TensorType) -> Result<ValueId> {
    let z = b.constant(HostTensor::from_f64(ty.dtype, Shape::scalar(), vec![0.0])?)?;
    broadcast_to(b, z, ty.dims())
}

pub fn zeros_like(b: &mut B, v: ValueId) -> Result<ValueId> {
    let ty = b.ty(v).clone();
    zeros(b, &ty)
}

pub fn broadcast_to(b: &mut B, v: ValueId, dims: &[usize]) -> Result<ValueId> {
    if b.shape(v).dims() == dims {
        return Ok(v);
    }
    Ok(b.op1(
        "broadcast",
        &[v],
        Attrs::new().with("shape", dims_i64(dims)),
    )?)
}

pub fn reshape(b: &mut B, v: ValueId, dims: &[usize]) -> Result<ValueId> {
    if b.shape(v).dims() == dims {
        return Ok(v);
    }
    Ok(b.op1("reshape", &[v], Attrs::new().with("shape", dims_i64(dims)))?)
}

pub fn permute(b: &mut B, v: ValueId, perm: &[usize]) -> Result<ValueId> {
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(v);
    }
    Ok(b.op1("permute", &[v], Attrs::new().with("perm", dims_i64(perm)))?)
}

/// The inverse of a permutation.
pub fn inverse_perm(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

pub fn sum(b: &mut B, v: ValueId, axes: &[usize], keep: bool) -> Result<ValueId> {
    Ok(b.op1(
        "reduce_sum",
        &[v],
        Attrs::new()
            .with("axes", dims_i64(axes))
            .with("keepdim", keep),
    )?)
}

/// Sum a cotangent of a broadcast result back to the operand's shape
/// (NumPy rules: leading axes added, size-1 axes stretched).
pub fn unbroadcast(b: &mut B, g: ValueId, dims: &[usize]) -> Result<ValueId> {
    let gd = b.shape(g).dims().to_vec();
    if gd == dims {
        return Ok(g);
    }
    let lead = gd.len() - dims.len();
    let mut axes: Vec<usize> = (0..lead).collect();
    for (i, &d) in dims.iter().enumerate() {
        if d == 1 && gd[lead + i] != 1 {
            axes.push(lead + i);
        }
    }
    let s = if axes.is_empty() {
        g
    } else {
        sum(b, g, &axes, true)?
    };
    reshape(b, s, dims)
}

pub fn mul(b: &mut B, x: ValueId, y: ValueId) -> Result<ValueId> {
    Ok(b.binary("mul", x, y)?)
}
pub fn add(b: &mut B, x: ValueId, y: ValueId) -> Result<ValueId> {
    Ok(b.binary("add", x, y)?)
}
pub fn sub(b: &mut B, x: ValueId, y: ValueId) -> Result<ValueId> {
    Ok(b.binary("sub", x, y)?)
}
pub fn div(b: &mut B, x: ValueId, y: ValueId) -> Result<ValueId> {
    Ok(b.binary("div", x, y)?)
}
pub fn neg(b: &mut B, x: ValueId) -> Result<ValueId> {
    Ok(b.unary("neg", x)?)
}
pub fn un(b: &mut B, op: &str, x: ValueId) -> Result<ValueId> {
    Ok(b.unary(op, x)?)
}
/// `x * c` for a scalar constant c.
pub fn scale(b: &mut B, x: ValueId, c: f64) -> Result<ValueId> {
    let k = sc(b, c, x)?;
    mul(b, x, k)
}
/// A value with no gradient (used for masks and slopes inside rules so
/// that higher derivatives treat them as constants where that is exact).
pub fn stop(b: &mut B, x: ValueId) -> Result<ValueId> {
    Ok(b.unary("stop_gradient", x)?)
}
/// `cond ? a : 0`, with a and the zero broadcast to the condition's shape.
pub fn select(b: &mut B, cond: ValueId, a: ValueId) -> Result<ValueId> {
    let z = sc(b, 0.0, a)?;
    Ok(b.op1("where", &[cond, a, z], Attrs::new())?)
}

/// Replay `g`'s nodes into `b` with its inputs bound to `inputs`; returns
/// the id in `b` of every value of `g`.
pub fn inline(b: &mut B, g: &Graph, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
    let mut map = vec![ValueId(u32::MAX); g.values.len()];
    for (k, &v) in g.inputs.iter().enumerate() {
        map[v.index()] = inputs[k];
    }
    for n in &g.nodes {
        let ins: Vec<ValueId> = n.inputs.iter().map(|v| map[v.index()]).collect();
        b.set_origin(n.origin.clone());
        let outs = b.push(n.op, &ins, n.attrs.clone())?;
        for (o, v) in n.outputs.iter().zip(outs) {
            map[o.index()] = v;
        }
    }
    b.set_origin(None);
    Ok(map)
}

/// A scalar constant of `dtype`.
pub fn sc_of(b: &mut B, v: f64, dtype: rlx_ir::DType) -> Result<ValueId> {
    Ok(b.scalar(v, dtype)?)
}
