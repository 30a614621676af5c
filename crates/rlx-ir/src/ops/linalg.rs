//! Contractions (matmul, dot_general), convolutions, pooling, and the
//! recurrent cells. Layouts are channels-first (N, C, spatial...), weights
//! as in PyTorch/ONNX.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::op::{Arity::*, Category as C, Grad::*};

/// NumPy `matmul`: 1-D operands are promoted and the promoted axis dropped;
/// batch axes broadcast.
fn matmul(cx: &InferCx) -> R {
    let (a, b) = (&cx.inputs[0], &cx.inputs[1]);
    expect_same_dtype(cx, 1)?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err("matmul needs operands of rank >= 1".into());
    }
    let ad: Vec<usize> = if a.rank() == 1 {
        vec![1, a.dims()[0]]
    } else {
        a.dims().to_vec()
    };
    let bd: Vec<usize> = if b.rank() == 1 {
        vec![b.dims()[0], 1]
    } else {
        b.dims().to_vec()
    };
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let (k2, n) = (bd[bd.len() - 2], bd[bd.len() - 1]);
    if k != k2 {
        return Err(format!(
            "contraction mismatch: {} @ {} (inner dims {k} vs {k2})",
            a.shape, b.shape
        ));
    }
    let batch = broadcast_shapes(
        &Shape(ad[..ad.len() - 2].to_vec()),
        &Shape(bd[..bd.len() - 2].to_vec()),
    )
    .map_err(|e| format!("batch dims: {e}"))?;
    let mut dims = batch.0;
    if a.rank() > 1 {
        dims.push(m);
    }
    if b.rank() > 1 {
        dims.push(n);
    }
    one(TensorType::new(a.dtype, dims))
}

/// XLA-style general dot: output = batch dims, then lhs free, then rhs free.
fn dot_general(cx: &InferCx) -> R {
    let (a, b) = (&cx.inputs[0], &cx.inputs[1]);
    expect_same_dtype(cx, 1)?;
    let lb = axes_attr(cx, "lhs_batch", a.rank())?;
    let rb = axes_attr(cx, "rhs_batch", b.rank())?;
    let lc = axes_attr(cx, "lhs_contract", a.rank())?;
    let rc = axes_attr(cx, "rhs_contract", b.rank())?;
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err("lhs and rhs must list as many batch and contracting axes".into());
    }
    for (x, y) in lb.iter().zip(&rb).chain(lc.iter().zip(&rc)) {
        if a.dims()[*x] != b.dims()[*y] {
            return Err(format!(
                "axis {x} of lhs ({}) and axis {y} of rhs ({}) must match",
                a.dims()[*x],
                b.dims()[*y]
            ));
        }
    }
    if lb.iter().any(|x| lc.contains(x)) || rb.iter().any(|x| rc.contains(x)) {
        return Err("an axis cannot be both batch and contracting".into());
    }
    let mut dims: Vec<usize> = lb.iter().map(|&i| a.dims()[i]).collect();
    dims.extend(
        (0..a.rank())
            .filter(|i| !lb.contains(i) && !lc.contains(i))
            .map(|i| a.dims()[i]),
    );
    dims.extend(
        (0..b.rank())
            .filter(|i| !rb.contains(i) && !rc.contains(i))
            .map(|i| b.dims()[i]),
    );
    one(TensorType::new(a.dtype, dims))
}

/// Spatial parameters of a windowed op, with defaults filled.
pub struct Window {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Padding at the start of each spatial axis, then at the end.
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
}

fn list_or(attrs: &Attrs, name: &str, n: usize, fill: i64) -> Result<Vec<usize>, String> {
    let v = attrs.ints(name).map_err(|e| e.to_string())?;
    let v = if v.is_empty() {
        vec![fill; n]
    } else {
        v.to_vec()
    };
    if v.iter().any(|&x| x < 0) {
        return Err(format!("`{name}` must be non-negative, got {v:?}"));
    }
    Ok(v.into_iter().map(|x| x as usize).collect())
}

impl Window {
    /// Read strides/dilations/pads for `n` spatial axes and a given kernel.
    pub fn read(attrs: &Attrs, kernel: Vec<usize>) -> Result<Window, String> {
        let n = kernel.len();
        let strides = list_or(attrs, "strides", n, 1)?;
        let dilations = if attrs.get("dilations").is_some() {
            list_or(attrs, "dilations", n, 1)?
        } else {
            vec![1; n]
        };
        let pads = list_or(attrs, "pads", 2 * n, 0)?;
        if strides.len() != n || dilations.len() != n || pads.len() != 2 * n {
            return Err(format!(
                "expected {n} strides and dilations and {} pads",
                2 * n
            ));
        }
        if strides.contains(&0) || dilations.contains(&0) {
            return Err("strides and dilations must be >= 1".into());
        }
        Ok(Window {
            kernel,
            strides,
            dilations,
            pads_begin: pads[..n].to_vec(),
            pads_end: pads[n..].to_vec(),
        })
    }

    /// Output extent of each spatial axis for a forward window.
    pub fn out_dims(&self, input: &[usize]) -> Result<Vec<usize>, String> {
        (0..self.kernel.len())
            .map(|i| {
                let span = self.dilations[i]
                    .saturating_mul(self.kernel[i].max(1) - 1)
                    .saturating_add(1);
                let padded = input[i]
                    .saturating_add(self.pads_begin[i])
                    .saturating_add(self.pads_end[i]);
                if padded < span {
                    return Err(format!(
                        "spatial axis {i}: window {span} is larger than the padded input {padded}"
                    ));
                }
                Ok((padded - span) / self.strides[i] + 1)
            })
            .collect()
    }
}

const CONV: &[AttrSpec] = &[
    attr("strides", K::Ints, D::Ints(&[])),
    attr("pads", K::Ints, D::Ints(&[])),
    attr("dilations", K::Ints, D::Ints(&[])),
    attr("groups", K::Int, D::Int(1)),
];
const CONV_T: &[AttrSpec] = &[
    attr("strides", K::Ints, D::Ints(&[])),
    attr("pads", K::Ints, D::Ints(&[])),
    attr("dilations", K::Ints, D::Ints(&[])),
    attr("groups", K::Int, D::Int(1)),
    attr("output_padding", K::Ints, D::Ints(&[])),
];

fn conv_common(cx: &InferCx) -> Result<(usize, usize), String> {
    let (x, w) = (&cx.inputs[0], &cx.inputs[1]);
    expect_same_dtype(cx, 1)?;
    if !(3..=5).contains(&x.rank()) || w.rank() != x.rank() {
        return Err(format!(
            "expects x as (N, C, d1[, d2[, d3]]) and w of the same rank; got {} and {}",
            x.shape, w.shape
        ));
    }
    let g = int(cx, "groups")?;
    if g < 1 {
        return Err("groups must be >= 1".into());
    }
    Ok((x.rank() - 2, g as usize))
}

fn conv(cx: &InferCx) -> R {
    let (n, g) = conv_common(cx)?;
    let (x, w) = (&cx.inputs[0], &cx.inputs[1]);
    let (cin, cout) = (x.dims()[1], w.dims()[0]);
    if cin % g != 0 || cout % g != 0 || w.dims()[1] * g != cin {
        return Err(format!(
            "channels: x has {cin}, w is {} with groups={g} (w must be (Cout, Cin/groups, k...))",
            w.shape
        ));
    }
    check_bias(cx, cout)?;
    let win = Window::read(cx.attrs, w.dims()[2..].to_vec())?;
    let mut dims = vec![x.dims()[0], cout];
    dims.extend(win.out_dims(&x.dims()[2..])?);
    debug_assert_eq!(dims.len(), n + 2);
    one(TensorType::new(x.dtype, dims))
}

fn conv_transpose(cx: &InferCx) -> R {
    let (n, g) = conv_common(cx)?;
    let (x, w) = (&cx.inputs[0], &cx.inputs[1]);
    let cin = x.dims()[1];
    if w.dims()[0] != cin || cin % g != 0 {
        return Err(format!(
            "channels: x has {cin}, w is {} (w must be (Cin, Cout/groups, k...))",
            w.shape
        ));
    }
    let cout = w.dims()[1] * g;
    check_bias(cx, cout)?;
    let win = Window::read(cx.attrs, w.dims()[2..].to_vec())?;
    let out_pad = list_or(cx.attrs, "output_padding", n, 0)?;
    if out_pad.len() != n {
        return Err(format!(
            "output_padding must give {n} values, got {out_pad:?}"
        ));
    }
    let mut dims = vec![x.dims()[0], cout];
    for (i, &op) in out_pad.iter().enumerate() {
        let full = (x.dims()[2 + i].max(1) - 1)
            .saturating_mul(win.strides[i])
            .saturating_add(win.dilations[i].saturating_mul(win.kernel[i].saturating_sub(1)))
            .saturating_add(1)
            .saturating_add(op);
        let pads = win.pads_begin[i].saturating_add(win.pads_end[i]);
        if full < pads {
            return Err(format!(
                "spatial axis {i}: padding {pads} exceeds the output extent {full}"
            ));
        }
        dims.push(full - pads);
    }
    one(TensorType::new(x.dtype, dims))
}

fn check_bias(cx: &InferCx, cout: usize) -> Result<(), String> {
    if let Some(b) = cx.inputs.get(2) {
        expect_same_dtype(cx, 2)?;
        if b.dims() != [cout] {
            return Err(format!("bias must be ({cout}), got {}", b.shape));
        }
    }
    Ok(())
}

const POOL: &[AttrSpec] = &[
    attr("kernel", K::Ints, D::Required),
    attr("strides", K::Ints, D::Ints(&[])),
    attr("pads", K::Ints, D::Ints(&[])),
    attr("dilations", K::Ints, D::Ints(&[])),
];
const AVG_POOL: &[AttrSpec] = &[
    attr("kernel", K::Ints, D::Required),
    attr("strides", K::Ints, D::Ints(&[])),
    attr("pads", K::Ints, D::Ints(&[])),
    attr("count_include_pad", K::Bool, D::Bool(false)),
];

fn pool(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let k: Vec<usize> = ints(cx, "kernel")?
        .iter()
        .map(|&v| v.max(0) as usize)
        .collect();
    if x.rank() != k.len() + 2 || k.contains(&0) {
        return Err(format!(
            "kernel {k:?} must give one positive extent per spatial axis of {}",
            x.shape
        ));
    }
    let win = Window::read(cx.attrs, k)?;
    let mut dims = x.dims()[..2].to_vec();
    dims.extend(win.out_dims(&x.dims()[2..])?);
    one(TensorType::new(x.dtype, dims))
}

fn global_pool(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    if x.rank() < 3 {
        return Err(format!("expects (N, C, spatial...), got {}", x.shape));
    }
    let mut dims = x.dims()[..2].to_vec();
    dims.extend(std::iter::repeat_n(1, x.rank() - 2));
    one(TensorType::new(x.dtype, dims))
}

/// Checks shared by the cells: x (B, I), h (B, H), w_ih (G·H, I),
/// w_hh (G·H, H), biases (G·H).
fn cell(cx: &InferCx, gates: usize, state_inputs: usize) -> Result<TensorType, String> {
    let x = &cx.inputs[0];
    let h = &cx.inputs[1];
    if x.rank() != 2 || h.rank() != 2 || x.dims()[0] != h.dims()[0] {
        return Err(format!(
            "x must be (B, I) and h (B, H); got {} and {}",
            x.shape, h.shape
        ));
    }
    let (b, i, hd) = (x.dims()[0], x.dims()[1], h.dims()[1]);
    let want = |k: usize| -> Vec<usize> {
        match k {
            0 => vec![gates * hd, i],
            1 => vec![gates * hd, hd],
            _ => vec![gates * hd],
        }
    };
    for k in 1..cx.inputs.len() {
        expect_same_dtype(cx, k)?;
    }
    for s in 1..state_inputs {
        if cx.inputs[s].dims() != [b, hd] {
            return Err(format!(
                "state input {s} must be ({b}, {hd}), got {}",
                cx.inputs[s].shape
            ));
        }
    }
    for (k, t) in cx.inputs[state_inputs..].iter().enumerate() {
        if t.dims() != want(k).as_slice() {
            return Err(format!(
                "weight input {} must be {:?}, got {}",
                state_inputs + k,
                want(k),
                t.shape
            ));
        }
    }
    Ok(h.clone())
}

fn rnn_cell(cx: &InferCx) -> R {
    let nl = string(cx, "nonlinearity")?;
    if nl != "tanh" && nl != "relu" {
        return Err(format!(
            "nonlinearity must be \"tanh\" or \"relu\", got {nl:?}"
        ));
    }
    one(cell(cx, 1, 2)?)
}
fn lstm_cell(cx: &InferCx) -> R {
    let h = cell(cx, 4, 3)?;
    Ok(vec![h.clone(), h])
}
fn gru_cell(cx: &InferCx) -> R {
    one(cell(cx, 3, 2)?)
}

pub static LINALG: &[OpDef] = &[
    def("matmul", C::Linalg, Exact(2), NUMERIC, &[], matmul, None, Differentiable,
        "NumPy matmul: (..., m, k) @ (..., k, n), batch axes broadcast, 1-D operands promoted"),
    def("dot_general", C::Linalg, Exact(2), NUMERIC,
        &[attr("lhs_batch", K::Ints, D::Ints(&[])), attr("rhs_batch", K::Ints, D::Ints(&[])),
          attr("lhs_contract", K::Ints, D::Required), attr("rhs_contract", K::Ints, D::Required)],
        dot_general, None, Differentiable,
        "general contraction; output axes are batch, lhs free, rhs free"),
    def("conv", C::Conv, Between(2, 3), FLOAT, CONV, conv, None, Differentiable,
        "1-D/2-D/3-D convolution (cross-correlation) of (N, C, ...) by (Cout, Cin/groups, k...), optional bias"),
    def("conv_transpose", C::Conv, Between(2, 3), FLOAT, CONV_T, conv_transpose, None, Differentiable,
        "transposed convolution; w is (Cin, Cout/groups, k...)"),
    def("max_pool", C::Pool, Exact(1), NUMERIC, POOL, pool, None, Differentiable,
        "max over windows; padding never wins"),
    def("avg_pool", C::Pool, Exact(1), FLOAT, AVG_POOL, pool, None, Differentiable,
        "mean over windows; padding counted only if count_include_pad"),
    def("global_avg_pool", C::Pool, Exact(1), FLOAT, &[], global_pool, None, Differentiable,
        "mean over all spatial axes, kept as size 1"),
    def("global_max_pool", C::Pool, Exact(1), NUMERIC, &[], global_pool, None, Differentiable,
        "max over all spatial axes, kept as size 1"),
    def("rnn_cell", C::Recurrent, Exact(6), FLOAT, &[attr("nonlinearity", K::Str, D::Str("tanh"))], rnn_cell, None,
        Differentiable, "h' = act(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh); inputs x, h, w_ih, w_hh, b_ih, b_hh"),
    def("lstm_cell", C::Recurrent, Exact(7), FLOAT, &[], lstm_cell, None, Differentiable,
        "PyTorch LSTMCell (gates i, f, g, o); inputs x, h, c, w_ih, w_hh, b_ih, b_hh; outputs h', c'"),
    def("gru_cell", C::Recurrent, Exact(6), FLOAT, &[], gru_cell, None, Differentiable,
        "PyTorch GRUCell (gates r, z, n); inputs x, h, w_ih, w_hh, b_ih, b_hh"),
];
