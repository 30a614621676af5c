//! Statically quantized dense layers as integer products: the layer input
//! quantized to i8 on its calibrated grid, the i8 weight read as stored
//! (in, out), and `matmul_integer_scaled` — exact int32 sums brought back
//! to f32 by `s_x · s_w` (per tensor or per output channel) in the
//! product's epilogue, with the layer's bias. A backend with an integer
//! GEMM (the fast CPU engine) runs the product in 8 bits; the others run
//! its decomposition.

use super::rewrite::SitePlan;
use crate::Error;
use rlx_ir::{Attrs, DType, GraphBuilder, HostTensor, ValueId};

/// `x` on the grid `q` as i8: `clamp(round(x / s) + z, qmin, qmax)`.
pub(super) fn quantize_input(
    b: &mut GraphBuilder,
    x: ValueId,
    q: &super::QParams,
) -> Result<ValueId, Error> {
    let s = b.scalar(q.scale as f64, DType::F32)?;
    let mut t = b.binary("div", x, s)?;
    t = b.unary("round", t)?;
    if q.zero_point != 0 {
        let z = b.scalar(q.zero_point as f64, DType::F32)?;
        t = b.binary("add", t, z)?;
    }
    let bounds = Attrs::new()
        .with("min", q.qmin as f64)
        .with("max", q.qmax as f64);
    t = b.op1("clamp", &[t], bounds)?;
    Ok(b.op1("cast", &[t], Attrs::new().with("dtype", DType::I8))?)
}

/// `x` quantized at run time over its own range (u8, as ONNX Runtime's
/// dynamic quantization): `dynamic_quantize_linear`'s y, scale, zero point.
pub(super) fn quantize_dynamic(b: &mut GraphBuilder, x: ValueId) -> Result<[ValueId; 3], Error> {
    let op = rlx_ir::Op::named("dynamic_quantize_linear")?;
    match b.push(op, &[x], Attrs::new())?[..] {
        [y, s, z] => Ok([y, s, z]),
        _ => Err(Error::Quant(
            "dynamic_quantize_linear gave other than 3 outputs".into(),
        )),
    }
}

/// The weight scales as a graph value: one, or one per output channel.
fn weight_scales(b: &mut GraphBuilder, p: &SitePlan, times: f32) -> Result<ValueId, Error> {
    let n = p.dims[p.out_axis];
    let scale: Vec<f32> = p.weight.scales.iter().map(|&v| times * v).collect();
    Ok(if scale.len() == 1 {
        b.scalar(scale[0] as f64, DType::F32)?
    } else {
        b.constant(HostTensor::from_slice(&scale, vec![n])?)?
    })
}

/// The dense node `op` (`matmul`, `matmul_bias_act`, `matmul_residual`;
/// inputs `ins` as mapped, attributes `attrs`) on the quantized input `xq`
/// and the i8 (in, out) weight `w`: the integer product with its bias,
/// then the node's activation, then its residual.
pub(super) fn dense(
    b: &mut GraphBuilder,
    op: &str,
    attrs: &Attrs,
    ins: &[ValueId],
    xq: ValueId,
    w: ValueId,
    p: &SitePlan,
) -> Result<ValueId, Error> {
    let q = p
        .activation
        .ok_or_else(|| Error::Quant(format!("`{}` has no activation grid", p.name)))?;
    // The product of the two scales, per output channel or one.
    let scale = weight_scales(b, p, q.scale)?;
    let za = b.scalar(q.zero_point as f64, DType::I8)?;
    product(b, op, attrs, ins, [xq, w, za], scale)
}

/// [`dense`] on an input quantized at run time (`q` from
/// [`quantize_dynamic`]): the scale is the run's `s_x` times the weight's.
pub(super) fn dense_dynamic(
    b: &mut GraphBuilder,
    op: &str,
    attrs: &Attrs,
    ins: &[ValueId],
    q: [ValueId; 3],
    w: ValueId,
    p: &SitePlan,
) -> Result<ValueId, Error> {
    let [y, sx, zp] = q;
    let ws = weight_scales(b, p, 1.0)?;
    let scale = b.binary("mul", sx, ws)?;
    product(b, op, attrs, ins, [y, w, zp], scale)
}

/// `matmul_integer_scaled(x_q, w, z_x, 0, scale, [bias])`, then the node's
/// activation and residual.
fn product(
    b: &mut GraphBuilder,
    op: &str,
    attrs: &Attrs,
    ins: &[ValueId],
    [xq, w, za]: [ValueId; 3],
    scale: ValueId,
) -> Result<ValueId, Error> {
    let zb = b.scalar(0.0, DType::I8)?;
    let mut args = vec![xq, w, za, zb, scale];
    let (bias, residual) = match op {
        "matmul_bias_act" => (ins.get(2).copied(), None),
        "matmul_residual" => (ins.get(3).copied(), ins.get(2).copied()),
        _ => (None, None),
    };
    args.extend(bias);
    let mut y = b.op1("matmul_integer_scaled", &args, Attrs::new())?;
    match attrs.str("activation") {
        Ok("none") | Err(_) => {}
        Ok(act) => y = b.unary(act, y)?,
    }
    if let Some(r) = residual {
        y = b.binary("add", y, r)?;
    }
    Ok(y)
}
