//! Convolutions and pooling over channels-first tensors (N, C, spatial...),
//! with ONNX semantics (Conv, ConvTranspose, MaxPool, AveragePool,
//! GlobalAveragePool, GlobalMaxPool).
//!
//! Every windowed op reduces to one question: for a position on one side
//! of the window (an output position for gathers, an input position for the
//! scatter of `conv_transpose`), which positions on the other side does each
//! kernel offset touch? [`Window::taps`] answers it once per position, and
//! the kernels loop over batch and channels around that answer.

use super::*;

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("conv", conv),
    ("conv_transpose", conv_transpose),
    ("max_pool", max_pool),
    ("avg_pool", avg_pool),
    ("global_avg_pool", global_avg_pool),
    ("global_max_pool", global_max_pool),
];

/// Spatial parameters of a windowed op. Read with the rules of the op's
/// type rule (rlx-ir `Window::read`, which is private to that crate): an
/// empty or absent list means strides 1, dilations 1, pads 0; `pads` is
/// `[begins..., ends...]`. Only the begin pads matter here: the output
/// extent, which the end pads decide, is already in the inferred type.
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<usize>,
}

impl Window {
    fn read(cx: &KernelCx, kernel: Vec<usize>) -> Result<Window, CpuError> {
        let n = kernel.len();
        let strides = list_or(cx, "strides", n, 1)?;
        let dilations = list_or(cx, "dilations", n, 1)?;
        let pads = list_or(cx, "pads", 2 * n, 0)?;
        Ok(Window {
            kernel,
            strides,
            dilations,
            pads_begin: pads[..n].to_vec(),
        })
    }

    /// Number of kernel offsets.
    fn size(&self) -> usize {
        self.kernel.iter().product()
    }

    /// For base position `q` (flat index over `base` dims), the kernel
    /// offsets that land inside `dst` dims, as (flat kernel offset, flat
    /// `dst` index) pairs. Coordinate on axis a: `q·stride + k·dilation −
    /// pad_begin`; offsets landing in the padding are skipped, which is
    /// what makes padding contribute zero to sums and never win a max.
    fn taps(&self, q: usize, base: &[usize], dst: &[usize]) -> Vec<(usize, usize)> {
        let qc = unravel(q, base);
        let mut out = Vec::with_capacity(self.size());
        'offsets: for k in 0..self.size() {
            let kc = unravel(k, &self.kernel);
            let mut flat = 0usize;
            for a in 0..dst.len() {
                let c = (qc[a] * self.strides[a] + kc[a] * self.dilations[a]) as i64
                    - self.pads_begin[a] as i64;
                if c < 0 || c >= dst[a] as i64 {
                    continue 'offsets;
                }
                flat = flat * dst[a] + c as usize;
            }
            out.push((k, flat));
        }
        out
    }
}

/// An optional list attribute with `fill` as the default for every axis.
fn list_or(cx: &KernelCx, name: &str, n: usize, fill: usize) -> Result<Vec<usize>, CpuError> {
    let v: &[i64] = if cx.attrs.get(name).is_some() {
        cx.ints(name)?
    } else {
        &[]
    };
    if v.is_empty() {
        return Ok(vec![fill; n]);
    }
    if v.len() != n || v.iter().any(|&x| x < 0) {
        return Err(cx.fail(format!(
            "`{name}` must list {n} non-negative values, got {v:?}"
        )));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// The optional bias (input 2) as `cout` values; zeros when absent.
fn bias(cx: &KernelCx, cout: usize) -> Result<Vec<f64>, CpuError> {
    match cx.inputs.get(2) {
        Some(b) => floats(b),
        None => Ok(vec![0.0; cout]),
    }
}

/// What `conv` and `conv_transpose` both read: shapes, groups, the window,
/// and the elements of x, w and the bias. The output channel count comes
/// from the inferred output type (it is w's axis 0 for conv, axis 1 ×
/// groups for conv_transpose).
struct Geometry<'a> {
    xd: &'a [usize],
    od: &'a [usize],
    win: Window,
    cout: usize,
    cin_g: usize,
    cout_g: usize,
    in_sp: usize,
    out_sp: usize,
    xs: Vec<f64>,
    ws: Vec<f64>,
    bs: Vec<f64>,
}

impl<'a> Geometry<'a> {
    fn read(cx: &'a KernelCx) -> Result<Self, CpuError> {
        let (x, w) = (cx.input(0), cx.input(1));
        let (xd, wd) = (x.shape().dims(), w.shape().dims());
        let od = cx.out_type(0).shape.dims();
        let groups = cx.int("groups")? as usize;
        let cout = od[1];
        Ok(Geometry {
            xd,
            od,
            win: Window::read(cx, wd[2..].to_vec())?,
            cout,
            cin_g: xd[1] / groups,
            cout_g: cout / groups,
            in_sp: xd[2..].iter().product(),
            out_sp: od[2..].iter().product(),
            xs: floats(x)?,
            ws: floats(w)?,
            bs: bias(cx, cout)?,
        })
    }
}

/// ONNX Conv (a cross-correlation): x (N, C, in...), w (M, C/groups, k...),
/// y[n, m, o] = b[m] + Σ_{c, k} x[n, group(m)·C/groups + c, o·s + k·d − p] · w[m, c, k].
fn conv(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let g = Geometry::read(cx)?;
    let (xd, od, win) = (g.xd, g.od, &g.win);
    let (batch, cin, cout, cin_g, cout_g) = (xd[0], xd[1], g.cout, g.cin_g, g.cout_g);
    let (in_sp, out_sp, k_sp) = (g.in_sp, g.out_sp, win.size());
    let (xs, ws, bs) = (g.xs, g.ws, g.bs);
    let out = cx.out_type(0);
    let mut y = vec![0.0; out.shape.numel()];
    for p in 0..out_sp {
        let taps = win.taps(p, &od[2..], &xd[2..]);
        for b in 0..batch {
            for m in 0..cout {
                let first_c = (m / cout_g) * cin_g;
                let mut acc = bs[m];
                for c in 0..cin_g {
                    let xbase = (b * cin + first_c + c) * in_sp;
                    let wbase = (m * cin_g + c) * k_sp;
                    for &(k, i) in &taps {
                        acc += xs[xbase + i] * ws[wbase + k];
                    }
                }
                y[(b * cout + m) * out_sp + p] = acc;
            }
        }
    }
    Ok(vec![from_floats(out, y)?])
}

/// ONNX ConvTranspose: the adjoint of `conv`. x (N, Cin, in...),
/// w (Cin, Cout/groups, k...); every input element scatters
/// x[n, ci, i] · w[ci, oc, k] to output position i·s + k·d − p_begin of
/// channel group(ci)·Cout/groups + oc. Positions that fall outside the
/// output (cut by pads, or beyond it) are dropped; output_padding only
/// lengthens the output, which the inferred type already says.
fn conv_transpose(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let g = Geometry::read(cx)?;
    let (xd, od, win) = (g.xd, g.od, &g.win);
    let (batch, cin, cout, cin_g, cout_g) = (xd[0], xd[1], g.cout, g.cin_g, g.cout_g);
    let (in_sp, out_sp, k_sp) = (g.in_sp, g.out_sp, win.size());
    let (xs, ws, bs) = (g.xs, g.ws, g.bs);
    let out = cx.out_type(0);
    let mut y = vec![0.0; out.shape.numel()];
    for (plane, v) in y.chunks_mut(out_sp.max(1)).enumerate() {
        v.fill(bs[plane % cout]);
    }
    for p in 0..in_sp {
        let taps = win.taps(p, &xd[2..], &od[2..]);
        for b in 0..batch {
            for ci in 0..cin {
                let xv = xs[(b * cin + ci) * in_sp + p];
                let first_m = (ci / cin_g) * cout_g;
                for oc in 0..cout_g {
                    let wbase = (ci * cout_g + oc) * k_sp;
                    let ybase = (b * cout + first_m + oc) * out_sp;
                    for &(k, o) in &taps {
                        y[ybase + o] += xv * ws[wbase + k];
                    }
                }
            }
        }
    }
    Ok(vec![from_floats(out, y)?])
}

/// Runs `reduce` over the in-bounds elements of every pooling window, for
/// every (batch, channel) plane. `reduce` gets the plane and the input
/// indices (within the plane) of one window.
fn pool_planes<T: Copy>(
    src: &[T],
    in_dims: &[usize],
    out_dims: &[usize],
    win: &Window,
    mut reduce: impl FnMut(&[T], &[usize]) -> T,
) -> Vec<T> {
    let in_sp: usize = in_dims[2..].iter().product();
    let out_sp: usize = out_dims[2..].iter().product();
    let planes = out_dims[0] * out_dims[1];
    let mut out = Vec::with_capacity(planes * out_sp);
    let taps: Vec<Vec<usize>> = (0..out_sp)
        .map(|p| {
            win.taps(p, &out_dims[2..], &in_dims[2..])
                .into_iter()
                .map(|(_, i)| i)
                .collect()
        })
        .collect();
    for plane in 0..planes {
        let xs = &src[plane * in_sp..(plane + 1) * in_sp];
        for t in &taps {
            out.push(reduce(xs, t));
        }
    }
    out
}

/// Max that propagates NaN: once a NaN is seen it is the result.
fn nan_max(acc: f64, v: f64) -> f64 {
    if acc.is_nan() || v.is_nan() {
        f64::NAN
    } else {
        acc.max(v)
    }
}

/// The smallest value of an integer dtype: the max over an empty window.
fn int_lowest(d: DType) -> i64 {
    match d {
        DType::I8 => i8::MIN as i64,
        DType::U8 => 0,
        DType::I16 => i16::MIN as i64,
        DType::I32 => i32::MIN as i64,
        _ => i64::MIN,
    }
}

/// Max over windows; padding never wins. A window that lies entirely in
/// the padding (possible with large pads) yields −inf (floats) or the
/// dtype's minimum (integers). Integers are compared as i64 so large i64
/// values stay exact.
fn max_pool(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let kernel: Vec<usize> = cx
        .ints("kernel")?
        .iter()
        .map(|&k| k.max(0) as usize)
        .collect();
    let win = Window::read(cx, kernel)?;
    let out = cx.out_type(0);
    let (xd, od) = (x.shape().dims(), out.shape.dims());
    if is_float_domain(x.dtype()) {
        let y = pool_planes(&floats(x)?, xd, od, &win, |xs, t| {
            t.iter().fold(f64::NEG_INFINITY, |m, &i| nan_max(m, xs[i]))
        });
        Ok(vec![from_floats(out, y)?])
    } else {
        let lowest = int_lowest(x.dtype());
        let y = pool_planes(&ints(x)?, xd, od, &win, |xs, t| {
            t.iter().fold(lowest, |m, &i| m.max(xs[i]))
        });
        Ok(vec![from_ints(out, y)?])
    }
}

/// Mean over windows. With count_include_pad the divisor is the whole
/// kernel (every window lies within the padded input, as there is no
/// ceil mode); without it, only the in-bounds elements count, so a window
/// entirely in the padding is 0/0 = NaN.
fn avg_pool(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let kernel: Vec<usize> = cx
        .ints("kernel")?
        .iter()
        .map(|&k| k.max(0) as usize)
        .collect();
    let win = Window::read(cx, kernel)?;
    let include_pad = cx.bool("count_include_pad")?;
    let out = cx.out_type(0);
    let full = win.size() as f64;
    let y = pool_planes(
        &floats(x)?,
        x.shape().dims(),
        out.shape.dims(),
        &win,
        |xs, t| {
            let sum: f64 = t.iter().map(|&i| xs[i]).sum();
            sum / if include_pad { full } else { t.len() as f64 }
        },
    );
    Ok(vec![from_floats(out, y)?])
}

/// Each (batch, channel) plane of `x` as a slice, for the global pools.
fn planes<'a, T>(v: &'a [T], dims: &[usize]) -> impl Iterator<Item = &'a [T]> {
    let sp: usize = dims[2..].iter().product();
    let n = dims[0] * dims[1];
    (0..n).map(move |k| &v[k * sp..(k + 1) * sp])
}

/// Mean over all spatial axes (an empty plane gives NaN).
fn global_avg_pool(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let xs = floats(x)?;
    let y = planes(&xs, x.shape().dims())
        .map(|p| p.iter().sum::<f64>() / p.len() as f64)
        .collect();
    Ok(vec![from_floats(cx.out_type(0), y)?])
}

/// Max over all spatial axes; NaN propagates.
fn global_max_pool(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    if is_float_domain(x.dtype()) {
        let xs = floats(x)?;
        let y = planes(&xs, dims)
            .map(|p| p.iter().fold(f64::NEG_INFINITY, |m, &v| nan_max(m, v)))
            .collect();
        Ok(vec![from_floats(cx.out_type(0), y)?])
    } else {
        let xs = ints(x)?;
        let lowest = int_lowest(x.dtype());
        let y = planes(&xs, dims)
            .map(|p| p.iter().fold(lowest, |m, &v| m.max(v)))
            .collect();
        Ok(vec![from_ints(cx.out_type(0), y)?])
    }
}

#[cfg(test)]
mod tests {
    use rlx_ir::HostTensor;

    /// Parse a one-node graph and run it on the CPU backend.
    fn run(src: &str, inputs: &[HostTensor]) -> Vec<HostTensor> {
        let g = rlx_ir::text::parse(src).unwrap();
        crate::run_graph(&g, inputs).unwrap()
    }

    fn f32s(t: &HostTensor) -> Vec<f32> {
        t.to_vec::<f32>().unwrap()
    }

    #[test]
    fn conv_1d_by_hand() {
        // x = [1 2 3 4], w = [1 0 -1], pad 1 each side, bias 10:
        // y[o] = 10 + x[o-1] - x[o+1] → [8, 8, 8, 13].
        let src = "graph @g(%x: f32[1,1,4], %w: f32[1,1,3], %b: f32[1]) {\n  %3 = conv(%x, %w, %b) {pads=[1, 1]}\n  return %3\n}";
        let x = HostTensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [1, 1, 4]).unwrap();
        let w = HostTensor::from_slice(&[1.0f32, 0.0, -1.0], [1, 1, 3]).unwrap();
        let b = HostTensor::from_slice(&[10.0f32], [1]).unwrap();
        assert_eq!(f32s(&run(src, &[x, w, b])[0]), vec![8.0, 8.0, 8.0, 13.0]);
    }

    #[test]
    fn conv_strided_dilated_grouped() {
        // Two groups of one channel each; channel 1 is scaled by its weight.
        // Stride 2, dilation 2, kernel 2: y[o] = x[2o]·w0 + x[2o+2]·w1.
        let src = "graph @g(%x: f32[1,2,5], %w: f32[2,1,2]) {\n  %2 = conv(%x, %w) {strides=[2], dilations=[2], groups=2}\n  return %2\n}";
        let x = HostTensor::from_slice(
            &[0.0f32, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0, 13.0, 14.0],
            [1, 2, 5],
        )
        .unwrap();
        let w = HostTensor::from_slice(&[1.0f32, 1.0, 1.0, -1.0], [2, 1, 2]).unwrap();
        // channel 0: [0+2, 2+4]; channel 1: [10-12, 12-14]
        assert_eq!(f32s(&run(src, &[x, w])[0]), vec![2.0, 6.0, -2.0, -2.0]);
    }

    #[test]
    fn conv_transpose_scatters() {
        // x = [1 2], w = [1 10 100], stride 2 → y = [1 10 102 20 200],
        // pads [1, 0] cut the first element, output_padding 1 adds a zero.
        let src = "graph @g(%x: f32[1,1,2], %w: f32[1,1,3]) {\n  %2 = conv_transpose(%x, %w) {strides=[2], pads=[1, 0], output_padding=[1]}\n  return %2\n}";
        let x = HostTensor::from_slice(&[1.0f32, 2.0], [1, 1, 2]).unwrap();
        let w = HostTensor::from_slice(&[1.0f32, 10.0, 100.0], [1, 1, 3]).unwrap();
        assert_eq!(
            f32s(&run(src, &[x, w])[0]),
            vec![10.0, 102.0, 20.0, 200.0, 0.0]
        );
    }

    #[test]
    fn pools_skip_padding_and_propagate_nan() {
        let x = HostTensor::from_slice(&[-1.0f32, -2.0, f32::NAN, 4.0], [1, 1, 4]).unwrap();
        let max = "graph @g(%x: f32[1,1,4]) {\n  %1 = max_pool(%x) {kernel=[2], pads=[1, 1], strides=[2]}\n  return %1\n}";
        let y = f32s(&run(max, std::slice::from_ref(&x))[0]);
        assert_eq!(y[0], -1.0); // the pad never wins over -1
        assert!(y[1].is_nan());
        assert_eq!(y[2], 4.0);
        let avg = "graph @g(%x: f32[1,1,4]) {\n  %1 = avg_pool(%x) {kernel=[2], pads=[1, 1], strides=[2], count_include_pad=true}\n  return %1\n}";
        let x2 = HostTensor::from_slice(&[2.0f32, 4.0, 6.0, 8.0], [1, 1, 4]).unwrap();
        assert_eq!(f32s(&run(avg, &[x2])[0]), vec![1.0, 5.0, 4.0]);
    }

    #[test]
    fn global_pools_and_int_max() {
        let x = HostTensor::from_slice(&[3i32, -7, 5, 1], [1, 2, 2]).unwrap();
        let src = "graph @g(%x: i32[1,2,2]) {\n  %1 = global_max_pool(%x)\n  return %1\n}";
        assert_eq!(run(src, &[x])[0].to_vec::<i32>().unwrap(), vec![3, 5]);
        let x = HostTensor::from_slice(&[1.0f32, 2.0, 3.0, 6.0], [1, 1, 2, 2]).unwrap();
        let src = "graph @g(%x: f32[1,1,2,2]) {\n  %1 = global_avg_pool(%x)\n  return %1\n}";
        assert_eq!(f32s(&run(src, &[x])[0]), vec![3.0]);
    }

    #[test]
    fn conv_transpose_is_the_adjoint_of_conv() {
        // <conv(x, w), y> = <x, conv_transpose(y, w)> for the same weights
        // and window, with output_padding chosen so the shapes line up.
        let fill = |n: usize, seed: u64| -> Vec<f64> {
            (0..n as u64)
                .map(|i| ((i * 2654435761 + seed * 97) % 1000) as f64 / 500.0 - 1.0)
                .collect()
        };
        let (x, w, y) = (
            fill(4 * 7 * 6, 1),
            fill(6 * 2 * 3 * 2, 2),
            fill(6 * 3 * 5, 3),
        );
        let attrs = "strides=[2, 1], dilations=[1, 2], pads=[1, 0, 0, 1], groups=2";
        let src = format!("graph @g(%x: f64[1,4,7,6], %w: f64[6,2,3,2], %y: f64[1,6,3,5]) {{\n  %3 = conv(%x, %w) {{{attrs}}}\n  %4 = conv_transpose(%y, %w) {{{attrs}, output_padding=[1, 0]}}\n  return %3, %4\n}}");
        let ins = [
            HostTensor::from_slice(&x, [1, 4, 7, 6]).unwrap(),
            HostTensor::from_slice(&w, [6, 2, 3, 2]).unwrap(),
            HostTensor::from_slice(&y, [1, 6, 3, 5]).unwrap(),
        ];
        let out = run(&src, &ins);
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
        let lhs = dot(&out[0].to_f64_vec().unwrap(), &y);
        let rhs = dot(&x, &out[1].to_f64_vec().unwrap());
        assert!(
            (lhs - rhs).abs() < 1e-9 && lhs.abs() > 1e-3,
            "{lhs} vs {rhs}"
        );
    }
}
