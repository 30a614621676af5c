//! Convolutions and pools, direct: one thread per output element, the
//! window's taps in loops over constant bounds (every shape, stride, pad
//! and dilation is baked into the kernel). `conv` and `conv_act` (bias and
//! activation applied before the one store), grouped and depthwise
//! included, over 1 to 3 spatial axes; `conv_transpose` (each output
//! gathers the inputs that scatter onto it); `max_pool` (f32, f16, i32;
//! padding never wins, a NaN in the window is the result) and `avg_pool` (count_include_pad or
//! the in-bounds taps), as the reference computes them.
//!
//! Not tiled: a first GPU form that runs the vision models natively; the
//! CPU engine's Winograd and GEMM paths are far ahead of it on big maps.

use super::expr::apply;
use super::{flat_entry, grid, unravel, Builder, Kernel, WG};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_ir::ops::linalg::Window;
use rlx_ir::{Attrs, DType};
use std::fmt::Write;

fn unsupported(op: &str, why: String) -> WgpuError {
    WgpuError::Unsupported { op: op.into(), why }
}

/// The entry of a one-thread-per-output kernel: its code so far (the
/// output index unravelled into `o0..`), those names, and the grid.
fn per_output(out: &TensorRef) -> (String, Vec<String>, [u32; 3]) {
    let n = out.numel();
    let grid_ = grid(n, WG);
    let mut s = flat_entry(n, grid_);
    let (u, o) = unravel("idx", &out.dims, "o");
    s.push_str(&u);
    (s, o, grid_)
}

/// Opens one loop per spatial axis over the window's taps, with the input
/// position `i{d}` of each, skipping taps in the padding. Returns the
/// code and how many braces to close.
fn taps(s: &mut String, win: &Window, out_sp: &[String], in_dims: &[usize]) -> usize {
    for (d, o) in out_sp.iter().enumerate() {
        let _ = writeln!(
            s,
            "for (var k{d}: u32 = 0u; k{d} < {}u; k{d} = k{d} + 1u) {{\n\
             let i{d}: i32 = i32({o}) * {} - {} + i32(k{d}) * {};\n\
             if (i{d} < 0 || i{d} >= {}) {{ continue; }}",
            win.kernel[d], win.strides[d], win.pads_begin[d], win.dilations[d], in_dims[d]
        );
    }
    out_sp.len()
}

/// Opens one loop per spatial axis over a transposed conv's taps: the
/// input position `i{d}` whose scatter lands on output `o` (`o + pad =
/// i·stride + k·dilation`), skipping taps that land between inputs.
fn transposed_taps(s: &mut String, win: &Window, out_sp: &[String], in_dims: &[usize]) -> usize {
    for (d, o) in out_sp.iter().enumerate() {
        let st = win.strides[d];
        let _ = writeln!(
            s,
            "for (var k{d}: u32 = 0u; k{d} < {}u; k{d} = k{d} + 1u) {{\n\
             let t{d}: i32 = i32({o}) + {} - i32(k{d}) * {};\n\
             if (t{d} < 0 || t{d} % {st} != 0 || t{d} / {st} >= {}) {{ continue; }}\n\
             let i{d}: i32 = t{d} / {st};",
            win.kernel[d], win.pads_begin[d], win.dilations[d], in_dims[d]
        );
    }
    out_sp.len()
}

/// A convolution: `act(conv(x, w) + bias)` with `x` (N, C, spatial…) and
/// `w` (M, C/groups, k…), or (`transpose`) `conv_transpose(x, w) + bias`
/// with `w` (C, M/groups, k…).
pub struct Conv<'a> {
    pub x: &'a TensorRef,
    pub w: &'a TensorRef,
    pub bias: Option<&'a TensorRef>,
    pub out: &'a TensorRef,
    pub win: &'a Window,
    pub groups: usize,
    pub act: &'a str,
    pub transpose: bool,
}

pub fn conv(name: &str, c: &Conv) -> Result<Kernel, WgpuError> {
    let (x, w, out) = (c.x, c.w, c.out);
    let (mut s, o, grid_) = per_output(out);
    let mut b = Builder::default();
    let g = c.groups.max(1);
    let (cin_g, cout_g) = if c.transpose {
        (x.dims[1] / g, w.dims[1])
    } else {
        (w.dims[1], out.dims[1] / g)
    };
    let _ = writeln!(
        s,
        "let g: u32 = o1 / {cout_g}u;\nvar acc: f32 = 0.0;\n\
         for (var cj: u32 = 0u; cj < {cin_g}u; cj = cj + 1u) {{\nlet ci: u32 = g * {cin_g}u + cj;"
    );
    let close = if c.transpose {
        transposed_taps(&mut s, c.win, &o[2..], &x.dims[2..])
    } else {
        taps(&mut s, c.win, &o[2..], &x.dims[2..])
    };
    let mut xi = vec![o[0].clone(), "ci".to_string()];
    let mut wi = if c.transpose {
        vec!["ci".to_string(), format!("o1 % {cout_g}u")]
    } else {
        vec![o[1].clone(), "cj".to_string()]
    };
    for d in 0..o.len() - 2 {
        xi.push(format!("u32(i{d})"));
        wi.push(format!("k{d}"));
    }
    let lx = b.load(x, &Builder::addr(x, &xi));
    let lw = b.load(w, &Builder::addr(w, &wi));
    let _ = writeln!(s, "acc = acc + {lx} * {lw};");
    s.push_str(&"}\n".repeat(close + 1));
    if let Some(bias) = c.bias {
        let lb = b.load(bias, &Builder::addr(bias, std::slice::from_ref(&o[1])));
        let _ = writeln!(s, "acc = acc + {lb};");
    }
    let y = match c.act {
        "none" => "acc".to_string(),
        a => apply(a, &["acc".into()], &[DType::F32], DType::F32, &Attrs::new())
            .ok_or_else(|| unsupported("conv_act", format!("activation `{a}` has no WGSL form")))?,
    };
    let st = b.store(out, &format!("{} + i32(idx)", out.offset), &y);
    let _ = writeln!(s, "{st}\n}}");
    Ok(b.finish(name.to_string(), s, grid_))
}

/// `max_pool` / `avg_pool` over `win` (`count_include_pad` for the mean).
pub fn pool(
    name: &str,
    op: &str,
    x: &TensorRef,
    out: &TensorRef,
    win: &Window,
    count_include_pad: bool,
) -> Result<Kernel, WgpuError> {
    let (mut s, o, grid_) = per_output(out);
    let mut b = Builder::default();
    let max = op == "max_pool";
    // i32 (max_pool only): the lowest value, as the reference starts.
    let int = x.dtype == DType::I32;
    s.push_str(if int {
        "var acc: i32 = i32(-2147483647) - 1;\n"
    } else if max {
        // −inf: padding never wins; an all-padding window stays −inf.
        "var acc: f32 = bits_(0xff800000u);\nvar nan: bool = false;\n"
    } else {
        "var acc: f32 = 0.0;\nvar cnt: u32 = 0u;\n"
    });
    let close = taps(&mut s, win, &o[2..], &x.dims[2..]);
    let mut xi = vec![o[0].clone(), o[1].clone()];
    xi.extend((0..o.len() - 2).map(|d| format!("u32(i{d})")));
    let lx = b.load(x, &Builder::addr(x, &xi));
    let _ = writeln!(s, "let v: {} = {lx};", if int { "i32" } else { "f32" });
    s.push_str(if int {
        "acc = max(acc, v);\n"
    } else if max {
        "if (nan_(v)) { nan = true; }\nacc = max(acc, v);\n"
    } else {
        "acc = acc + v;\ncnt = cnt + 1u;\n"
    });
    s.push_str(&"}\n".repeat(close));
    // Non-finite values through `bits_` (a constant-evaluated bitcast to
    // them is a shader-creation error in WebGPU).
    let nan = "bits_(0x7fc00000u)";
    let y = if int {
        "acc".to_string()
    } else if max {
        format!("select(acc, {nan}, nan)")
    } else if count_include_pad {
        let full: usize = win.kernel.iter().product();
        format!("acc / {full}.0")
    } else {
        // No tap in bounds: 0/0, NaN as the reference gives.
        format!("select(acc / f32(cnt), {nan}, cnt == 0u)")
    };
    let st = b.store(out, &format!("{} + i32(idx)", out.offset), &y);
    let _ = writeln!(s, "{st}\n}}");
    Ok(b.finish(name.to_string(), s, grid_))
}

/// The window of a conv (kernel from the weight) or pool (`kernel` attr).
pub fn window(op: &str, attrs: &Attrs, kernel: Vec<usize>) -> Result<Window, WgpuError> {
    Window::read(attrs, kernel).map_err(|e| unsupported(op, e))
}
