//! Scans (cumsum, cumprod), sorting (sort, argsort, topk) and the complex
//! helpers (complex, real, imag). The DFTs are in `fft.rs`.
//!
//! All of them work lane by lane: a lane is the run of elements along the
//! op's axis at one (outer, inner) position, see [`lanes`].

use super::*;
use std::cmp::Ordering;

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("cumsum", cumsum),
    ("cumprod", cumprod),
    ("sort", sort),
    ("argsort", argsort),
    ("topk", topk),
    ("complex", complex),
    ("real", real),
    ("imag", imag),
];

/// Flat indices of every lane along `axis` of a tensor of shape `dims`,
/// in row-major order of the (outer, inner) positions. An output that
/// replaces the axis extent by another keeps the same lane order, so lane
/// `l` of the input maps to lane `l` of the output.
pub(super) fn lanes(dims: &[usize], axis: usize) -> impl Iterator<Item = Vec<usize>> {
    let (outer, len, inner) = around(dims, axis);
    (0..outer * inner).map(move |l| {
        let (o, i) = (l / inner, l % inner);
        (0..len).map(|j| (o * len + j) * inner + i).collect()
    })
}

/// Scatter per-lane results into a row-major output of shape `dims`
/// (whose axis extent is the lanes' length).
pub(super) fn assemble<T: Copy + Default>(
    dims: &[usize],
    axis: usize,
    per_lane: impl Iterator<Item = Vec<T>>,
) -> Vec<T> {
    let mut out = vec![T::default(); dims.iter().product()];
    for (idx, vals) in lanes(dims, axis).zip(per_lane) {
        for (i, v) in idx.into_iter().zip(vals) {
            out[i] = v;
        }
    }
    out
}

// ------------------------------------------------------------------ scans

/// Running fold of one lane. Exclusive scans start from `init` and omit
/// the lane's last element (first, when reversed); reversed scans run
/// from the end.
fn scan_lane<T: Copy>(
    v: &[T],
    exclusive: bool,
    reverse: bool,
    init: T,
    f: impl Fn(T, T) -> T,
) -> Vec<T> {
    let n = v.len();
    let mut out = vec![init; n];
    let mut acc = init;
    for step in 0..n {
        let j = if reverse { n - 1 - step } else { step };
        if exclusive {
            out[j] = acc;
            acc = f(acc, v[j]);
        } else {
            acc = f(acc, v[j]);
            out[j] = acc;
        }
    }
    out
}

/// cumsum / cumprod: floats in f64, integers in i64 with wrapping (the
/// narrowing to the output dtype wraps too, so the result is the
/// two's-complement answer of the dtype's width).
fn scan(cx: &KernelCx, product: bool) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let (exclusive, reverse) = (cx.bool("exclusive")?, cx.bool("reverse")?);
    let out = cx.out_type(0);
    if is_float_domain(x.dtype()) {
        let v = floats(x)?;
        let (init, f): (f64, fn(f64, f64) -> f64) = if product {
            (1.0, |a, b| a * b)
        } else {
            (0.0, |a, b| a + b)
        };
        let lanes_out = lanes(dims, axis).map(|l| {
            let vals: Vec<f64> = l.iter().map(|&i| v[i]).collect();
            scan_lane(&vals, exclusive, reverse, init, f)
        });
        Ok(vec![from_floats(out, assemble(dims, axis, lanes_out))?])
    } else {
        let v = ints(x)?;
        let (init, f): (i64, fn(i64, i64) -> i64) = if product {
            (1, i64::wrapping_mul)
        } else {
            (0, i64::wrapping_add)
        };
        let lanes_out = lanes(dims, axis).map(|l| {
            let vals: Vec<i64> = l.iter().map(|&i| v[i]).collect();
            scan_lane(&vals, exclusive, reverse, init, f)
        });
        Ok(vec![from_ints(out, assemble(dims, axis, lanes_out))?])
    }
}

fn cumsum(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    scan(cx, false)
}
fn cumprod(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    scan(cx, true)
}

// ---------------------------------------------------------------- sorting

/// Sort keys of a tensor: floats compared as f64 with NaN above every
/// number (all NaNs equal), integers as i64 (exact for all of i64).
enum Keys {
    Float(Vec<f64>),
    Int(Vec<i64>),
}

impl Keys {
    fn of(t: &HostTensor) -> Result<Keys, CpuError> {
        Ok(if is_float_domain(t.dtype()) {
            Keys::Float(floats(t)?)
        } else {
            Keys::Int(ints(t)?)
        })
    }

    /// Ascending order of elements `a` and `b`; -0.0 and 0.0 are equal.
    fn cmp(&self, a: usize, b: usize) -> Ordering {
        match self {
            Keys::Int(v) => v[a].cmp(&v[b]),
            Keys::Float(v) => match (v[a].is_nan(), v[b].is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => v[a].partial_cmp(&v[b]).unwrap_or(Ordering::Equal),
            },
        }
    }
}

/// Each lane's flat indices, stably sorted: ascending puts NaN last;
/// descending compares the other way round (so NaN comes first) and, being
/// stable, keeps equal elements in their original order.
fn sorted_lanes(
    x: &HostTensor,
    axis: usize,
    descending: bool,
) -> Result<Vec<Vec<usize>>, CpuError> {
    let keys = Keys::of(x)?;
    Ok(lanes(x.shape().dims(), axis)
        .map(|mut lane| {
            lane.sort_by(|&a, &b| {
                if descending {
                    keys.cmp(b, a)
                } else {
                    keys.cmp(a, b)
                }
            });
            lane
        })
        .collect())
}

/// Position of flat index `i` along `axis` (its coordinate on that axis).
fn axis_pos(i: usize, dims: &[usize], axis: usize) -> i64 {
    let inner: usize = dims[axis + 1..].iter().product();
    ((i / inner) % dims[axis]) as i64
}

/// The values are gathered from the input, so they keep their exact bits.
fn sort(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let order = sorted_lanes(x, axis, cx.bool("descending")?)?;
    let src = assemble(dims, axis, order.into_iter());
    Ok(vec![x.take(&src, cx.out_type(0).shape.clone())?])
}

fn argsort(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let order = sorted_lanes(x, axis, cx.bool("descending")?)?;
    let pos = order
        .into_iter()
        .map(|l| l.into_iter().map(|i| axis_pos(i, dims, axis)).collect());
    Ok(vec![from_ints(cx.out_type(0), assemble(dims, axis, pos))?])
}

/// The first k of each lane sorted descending (largest) or ascending
/// (smallest); stability gives ties to the lower index, and NaN, the
/// largest key, comes first for largest and last for smallest.
fn topk(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let k = cx.int("k")? as usize;
    let order = sorted_lanes(x, axis, cx.bool("largest")?)?;
    let picked: Vec<Vec<usize>> = order
        .into_iter()
        .map(|mut l| {
            l.truncate(k);
            l
        })
        .collect();
    let od = cx.out_type(0).shape.dims();
    let pos = picked
        .iter()
        .map(|l| l.iter().map(|&i| axis_pos(i, dims, axis)).collect());
    let indices = from_ints(cx.out_type(1), assemble(od, axis, pos))?;
    let src = assemble(od, axis, picked.into_iter());
    Ok(vec![x.take(&src, cx.out_type(0).shape.clone())?, indices])
}

// ---------------------------------------------------------- complex parts

fn complex(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (re, im) = (floats(cx.input(0))?, floats(cx.input(1))?);
    let v = re.into_iter().zip(im).map(|(a, b)| [a, b]).collect();
    Ok(vec![HostTensor::from_c64(cx.out_type(0).shape.clone(), v)?])
}

/// Component `k` (0 = real, 1 = imaginary) of a c64 tensor.
fn part(cx: &KernelCx, k: usize) -> Result<Vec<HostTensor>, CpuError> {
    let v = cx
        .input(0)
        .to_c64_vec()?
        .into_iter()
        .map(|c| c[k])
        .collect();
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

fn real(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    part(cx, 0)
}
fn imag(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    part(cx, 1)
}

#[cfg(test)]
mod tests {
    use rlx_ir::HostTensor;

    fn run(src: &str, inputs: &[HostTensor]) -> Vec<HostTensor> {
        let g = rlx_ir::text::parse(src).unwrap();
        crate::run_graph(&g, inputs).unwrap()
    }

    #[test]
    fn scans_exclusive_reverse_and_wrapping() {
        let x = HostTensor::from_slice(&[1i8, 2, 3, 100], [4]).unwrap();
        let src = "graph @g(%x: i8[4]) {\n  %1 = cumsum(%x) {axis=0, exclusive=true, reverse=true}\n  return %1\n}";
        assert_eq!(
            run(src, &[x])[0].to_vec::<i8>().unwrap(),
            vec![105, 103, 100, 0]
        );
        let x = HostTensor::from_slice(&[2u8, 3, 50], [3]).unwrap();
        let src = "graph @g(%x: u8[3]) {\n  %1 = cumprod(%x) {axis=0}\n  return %1\n}";
        assert_eq!(run(src, &[x])[0].to_vec::<u8>().unwrap(), vec![2, 6, 44]); // 300 mod 256
    }

    #[test]
    fn sort_nan_and_ties() {
        let x = HostTensor::from_slice(&[3.0f32, f32::NAN, 1.0, 3.0, -1.0], [5]).unwrap();
        let asc = "graph @g(%x: f32[5]) {\n  %1 = argsort(%x)\n  return %1\n}";
        assert_eq!(
            run(asc, std::slice::from_ref(&x))[0]
                .to_vec::<i64>()
                .unwrap(),
            vec![4, 2, 0, 3, 1]
        );
        let desc = "graph @g(%x: f32[5]) {\n  %1 = argsort(%x) {descending=true}\n  return %1\n}";
        assert_eq!(
            run(desc, std::slice::from_ref(&x))[0]
                .to_vec::<i64>()
                .unwrap(),
            vec![1, 0, 3, 2, 4]
        );
        let top =
            "graph @g(%x: f32[5]) {\n  %1, %2 = topk(%x) {k=2, largest=false}\n  return %1, %2\n}";
        let out = run(top, &[x]);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![-1.0, 1.0]);
        assert_eq!(out[1].to_vec::<i64>().unwrap(), vec![4, 2]);
    }

    #[test]
    fn sort_along_first_axis() {
        let x = HostTensor::from_slice(&[5i32, 1, 2, 7], [2, 2]).unwrap();
        let src = "graph @g(%x: i32[2,2]) {\n  %1 = sort(%x) {axis=0}\n  return %1\n}";
        assert_eq!(run(src, &[x])[0].to_vec::<i32>().unwrap(), vec![2, 1, 5, 7]);
    }

    #[test]
    #[cfg(feature = "fft")]
    fn fft_of_a_delta_is_flat_and_round_trips() {
        let x = HostTensor::from_c64([4], vec![[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
            .unwrap();
        let src = "graph @g(%x: c64[4]) {\n  %1 = fft(%x)\n  %2 = ifft(%1)\n  return %1, %2\n}";
        let out = run(src, std::slice::from_ref(&x));
        // δ[t-1] → e^{-iπk/2} = 1, -i, -1, i
        let want = [[1.0, 0.0], [0.0, -1.0], [-1.0, 0.0], [0.0, 1.0]];
        for (got, w) in out[0].to_c64_vec().unwrap().iter().zip(want) {
            assert!(
                (got[0] - w[0]).abs() < 1e-6 && (got[1] - w[1]).abs() < 1e-6,
                "{got:?} vs {w:?}"
            );
        }
        for (got, w) in out[1]
            .to_c64_vec()
            .unwrap()
            .iter()
            .zip(x.to_c64_vec().unwrap())
        {
            assert!((got[0] - w[0]).abs() < 1e-6 && (got[1] - w[1]).abs() < 1e-6);
        }
    }

    #[test]
    #[cfg(feature = "fft")]
    fn rfft_irfft_round_trip_odd_length() {
        let x = HostTensor::from_slice(&[1.0f32, 2.0, 0.5, -1.0, 3.0], [5]).unwrap();
        let src =
            "graph @g(%x: f32[5]) {\n  %1 = rfft(%x)\n  %2 = irfft(%1) {n=5}\n  return %1, %2\n}";
        let out = run(src, std::slice::from_ref(&x));
        assert_eq!(out[0].shape().dims(), &[3]);
        assert!((out[0].to_c64_vec().unwrap()[0][0] - 5.5).abs() < 1e-6);
        for (a, b) in out[1]
            .to_f64_vec()
            .unwrap()
            .iter()
            .zip(x.to_f64_vec().unwrap())
        {
            assert!((a - b).abs() < 1e-6);
        }
    }

    #[test]
    #[cfg(feature = "fft")]
    fn empty_axis_gives_empty_output() {
        let x = HostTensor::from_c64([2, 0], vec![]).unwrap();
        let src = "graph @g(%x: c64[2,0]) {\n  %1 = fft(%x)\n  return %1\n}";
        assert_eq!(run(src, &[x])[0].numel(), 0);
    }
}
