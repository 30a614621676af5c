//! Convolutions and pools, direct: one thread per output element over
//! contiguous operands, the window's taps in loops with constant bounds
//! (shapes, strides, pads and dilations are in the text). `conv` /
//! `conv_act` (bias and activation before the one store; groups and
//! depthwise included), `conv_transpose` (each output gathers the inputs
//! whose scatter lands on it), `max_pool` (padding never wins, NaN
//! propagates) and `avg_pool` (count_include_pad or the in-bounds taps),
//! over 1 to 3 spatial axes, computing in the dtype's compute type. The
//! same arithmetic as the WGSL kernels of `rlx-wgpu` (`wgsl/conv.rs`).
//! Not tiled: a first native form; cuDNN-class speed is not claimed.

use super::{st, unravel};
use crate::codegen::expr;
use crate::ctype::{compute, lit, load, store};
use rlx_ir::ops::linalg::Window;
use rlx_ir::DType;
use std::fmt::Write;

/// The grid-stride loop header over `total` outputs, `c0..` unravelled.
fn head(params: &str, total: usize, out_dims: &[usize]) -> String {
    format!(
        "extern \"C\" __global__ void @NAME@({params}) {{\n  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {total}LL; i += (long long)gridDim.x * blockDim.x) {{\n    {}\n",
        unravel(out_dims, "i")
    )
}

/// Row-major flat index of `idx` over `dims` (Horner).
fn flat(idx: &[String], dims: &[usize]) -> String {
    let mut s = idx[0].clone();
    for (i, &n) in idx.iter().zip(dims).skip(1) {
        s = format!("({s}) * {n}LL + {i}");
    }
    s
}

/// Loops over the window's taps, input position `i{d}` of each, skipping
/// padding; returns how many braces to close.
fn forward_taps(s: &mut String, win: &Window, in_sp: &[usize]) -> usize {
    for (d, &n) in in_sp.iter().enumerate() {
        let _ = writeln!(
            s,
            "    for (long long k{d} = 0; k{d} < {}; ++k{d}) {{ long long i{d} = c{} * {} - {} + k{d} * {}; if (i{d} < 0 || i{d} >= {n}) continue;",
            win.kernel[d],
            d + 2,
            win.strides[d],
            win.pads_begin[d],
            win.dilations[d]
        );
    }
    in_sp.len()
}

/// `act(conv(x, w) + bias)` (`op` conv / conv_act) or `conv_transpose(x,
/// w) + bias`; `None` for an activation without a CUDA form.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    op: &str,
    d: DType,
    x_dims: &[usize],
    w_dims: &[usize],
    bias: bool,
    out_dims: &[usize],
    win: &Window,
    groups: usize,
    act: &str,
) -> Option<String> {
    let (s_, a) = (st(d), compute(d));
    let sp = out_dims.len() - 2;
    let mut params = format!("const {s_}* __restrict__ in0, const {s_}* __restrict__ in1");
    if bias {
        let _ = write!(params, ", const {s_}* __restrict__ in2");
    }
    let _ = write!(params, ", {s_}* __restrict__ out0");
    let total: usize = out_dims.iter().product();
    let mut s = head(&params, total, out_dims);
    let g = groups.max(1);
    let transpose = op == "conv_transpose";
    let (cin_g, cout_g) = if transpose {
        (x_dims[1] / g, w_dims[1])
    } else {
        (w_dims[1], out_dims[1] / g)
    };
    let _ = writeln!(
        s,
        "    long long g = c1 / {cout_g}; {a} acc = 0;\n    for (long long cj = 0; cj < {cin_g}; ++cj) {{ long long ci = g * {cin_g} + cj;"
    );
    let close = if transpose {
        for dd in 0..sp {
            let _ = writeln!(
                s,
                "    for (long long k{dd} = 0; k{dd} < {}; ++k{dd}) {{ long long t{dd} = c{} + {} - k{dd} * {}; if (t{dd} < 0 || t{dd} % {} != 0 || t{dd} / {} >= {}) continue; long long i{dd} = t{dd} / {};",
                win.kernel[dd],
                dd + 2,
                win.pads_begin[dd],
                win.dilations[dd],
                win.strides[dd],
                win.strides[dd],
                x_dims[dd + 2],
                win.strides[dd]
            );
        }
        sp
    } else {
        forward_taps(&mut s, win, &x_dims[2..])
    };
    let mut xi = vec!["c0".to_string(), "ci".to_string()];
    let mut wi = if transpose {
        vec!["ci".to_string(), format!("(c1 % {cout_g})")]
    } else {
        vec!["c1".to_string(), "cj".to_string()]
    };
    for dd in 0..sp {
        xi.push(format!("i{dd}"));
        wi.push(format!("k{dd}"));
    }
    let _ = writeln!(
        s,
        "      acc += {} * {};",
        load(d, &format!("in0[{}]", flat(&xi, x_dims))),
        load(d, &format!("in1[{}]", flat(&wi, w_dims)))
    );
    s.push_str(&"    }\n".repeat(close + 1));
    if bias {
        let _ = writeln!(s, "    acc += {};", load(d, "in2[c1]"));
    }
    let y = match act {
        "none" => "acc".to_string(),
        a => expr::unary(
            a,
            if d == DType::F64 {
                DType::F64
            } else {
                DType::F32
            },
            "acc",
        )?,
    };
    let _ = writeln!(s, "    out0[i] = {};\n  }}\n}}", store(d, &y));
    Some(s)
}

/// `max_pool` / `avg_pool` over `win` of contiguous `x`.
pub fn pool(
    op: &str,
    d: DType,
    x_dims: &[usize],
    out_dims: &[usize],
    win: &Window,
    count_include_pad: bool,
) -> String {
    let (s_, a) = (st(d), compute(d));
    let params = format!("const {s_}* __restrict__ in0, {s_}* __restrict__ out0");
    let total: usize = out_dims.iter().product();
    let mut s = head(&params, total, out_dims);
    let max = op == "max_pool";
    if max {
        let _ = writeln!(
            s,
            "    {a} acc = {}; bool nan = false;",
            lit(d, f64::NEG_INFINITY)
        );
    } else {
        let _ = writeln!(s, "    {a} acc = 0; long long cnt = 0;");
    }
    let close = forward_taps(&mut s, win, &x_dims[2..]);
    let mut xi = vec!["c0".to_string(), "c1".to_string()];
    xi.extend((0..out_dims.len() - 2).map(|dd| format!("i{dd}")));
    let _ = writeln!(
        s,
        "      {a} v = {};",
        load(d, &format!("in0[{}]", flat(&xi, x_dims)))
    );
    s.push_str(if max {
        "      if (v != v) nan = true; else if (v > acc) acc = v;\n"
    } else {
        "      acc += v; ++cnt;\n"
    });
    s.push_str(&"    }\n".repeat(close));
    let nan = lit(d, f64::NAN);
    let y = if max {
        format!("(nan ? {nan} : acc)")
    } else if count_include_pad {
        let full: usize = win.kernel.iter().product();
        format!("(acc / ({a}){full})")
    } else {
        // No tap in bounds: 0/0, NaN as the reference gives.
        format!("(cnt == 0 ? {nan} : acc / ({a})cnt)")
    };
    let _ = writeln!(s, "    out0[i] = {};\n  }}\n}}", store(d, &y));
    s
}
