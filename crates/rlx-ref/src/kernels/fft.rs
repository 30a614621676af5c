//! Discrete Fourier transforms along an axis: fft, ifft, rfft, irfft
//! (cargo feature `fft`).

use super::signal::{assemble, lanes};
use super::*;

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("fft", fft),
    ("ifft", ifft),
    ("rfft", rfft),
    ("irfft", irfft),
];

type C = [f64; 2];

/// cos and sin of 2π·m/n for m in 0..n. The DFT indexes this table with
/// (j·k) mod n, which keeps the angles small and exact instead of letting
/// j·k·2π/n grow and lose precision.
fn twiddles(n: usize) -> Vec<C> {
    (0..n)
        .map(|m| {
            let a = 2.0 * std::f64::consts::PI * m as f64 / n as f64;
            [a.cos(), a.sin()]
        })
        .collect()
}

/// X[k] = Σ_j x[j]·e^{∓2πi·jk/n} for k in 0..bins: a direct O(n·bins) DFT
/// in f64 (`inverse` flips the sign of the exponent; no scaling here).
/// A signal of length n is periodic, so any bin count works.
fn dft(x: &[C], bins: usize, inverse: bool) -> Vec<C> {
    let n = x.len();
    let tw = twiddles(n);
    let sign = if inverse { 1.0 } else { -1.0 };
    (0..bins)
        .map(|k| {
            let mut acc = [0.0, 0.0];
            for (j, v) in x.iter().enumerate() {
                let [c, s] = tw[(j * k) % n];
                let s = sign * s;
                acc[0] += v[0] * c - v[1] * s;
                acc[1] += v[0] * s + v[1] * c;
            }
            acc
        })
        .collect()
}

/// Complex → complex transform of every lane along `axis`.
fn complex_dft(cx: &KernelCx, inverse: bool) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let v = x.to_c64_vec()?;
    let per_lane = lanes(dims, axis).map(|l| {
        let lane: Vec<C> = l.iter().map(|&i| v[i]).collect();
        let n = lane.len();
        let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
        dft(&lane, n, inverse)
            .into_iter()
            .map(|[re, im]| [re * scale, im * scale])
            .collect()
    });
    let out = cx.out_type(0);
    Ok(vec![HostTensor::from_c64(
        out.shape.clone(),
        assemble(out.shape.dims(), axis, per_lane),
    )?])
}

fn fft(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    complex_dft(cx, false)
}
fn ifft(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    complex_dft(cx, true)
}

/// Real signal of n samples → bins 0..=n/2 of its DFT (the rest are their
/// conjugates).
fn rfft(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let v = floats(x)?;
    let out = cx.out_type(0);
    let bins = out.shape.dims()[axis];
    let per_lane = lanes(dims, axis).map(|l| {
        let lane: Vec<C> = l.iter().map(|&i| [v[i], 0.0]).collect();
        dft(&lane, bins, false)
    });
    Ok(vec![HostTensor::from_c64(
        out.shape.clone(),
        assemble(out.shape.dims(), axis, per_lane),
    )?])
}

/// Inverse of rfft to n real samples: the spectrum is extended
/// Hermitian-symmetrically from bins 0..=n/2 (extra bins are ignored), so
///   x[t] = (1/n)·(Re X₀ + Σ_{0<k<n/2} 2·Re(X_k·e^{2πi·kt/n}) + [n even] Re X_{n/2}·(−1)^t),
/// which ignores the imaginary parts of the DC and Nyquist bins, as
/// NumPy/pocketfft do.
fn irfft(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let axis = cx.axis("axis", dims.len())?;
    let v = x.to_c64_vec()?;
    let out = cx.out_type(0);
    let n = out.shape.dims()[axis];
    let tw = twiddles(n);
    let per_lane = lanes(dims, axis).map(|l| {
        let spec: Vec<C> = l.iter().take(n / 2 + 1).map(|&i| v[i]).collect();
        (0..n)
            .map(|t| {
                let mut acc = spec[0][0];
                for (k, xk) in spec.iter().enumerate().skip(1) {
                    if 2 * k == n {
                        acc += xk[0] * if t % 2 == 0 { 1.0 } else { -1.0 };
                    } else {
                        let [c, s] = tw[(k * t) % n];
                        acc += 2.0 * (xk[0] * c - xk[1] * s);
                    }
                }
                acc / n as f64
            })
            .collect()
    });
    Ok(vec![from_floats(
        out,
        assemble(out.shape.dims(), axis, per_lane),
    )?])
}
