//! Complex numbers and Fourier transforms. A complex cotangent is
//! `∂L/∂Re z + i·∂L/∂Im z` (L real), so for a complex-linear y = A·x the
//! VJP is Aᴴ·ȳ; for real inputs it is the real part of that. All of these
//! ops are linear, so their JVP is the op on the tangents.

use super::{Jvp, NodeCx, Rule};
use crate::emit::*;
use crate::error::{AdError, Result};
use rlx_ir::{Attrs, ValueId};

type Out = Result<Vec<Option<ValueId>>>;

fn re(b: &mut B, z: ValueId) -> Result<ValueId> {
    un(b, "real", z)
}
fn im(b: &mut B, z: ValueId) -> Result<ValueId> {
    un(b, "imag", z)
}
fn cplx(b: &mut B, r: ValueId, i: ValueId) -> Result<ValueId> {
    Ok(b.binary("complex", r, i)?)
}
fn conj(b: &mut B, z: ValueId) -> Result<ValueId> {
    let r = re(b, z)?;
    let i = im(b, z)?;
    let ni = neg(b, i)?;
    cplx(b, r, ni)
}

fn vjp_complex(b: &mut B, _: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    Ok(vec![Some(re(b, g)?), Some(im(b, g)?)])
}
fn vjp_real(b: &mut B, _: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let z = zeros_like(b, g)?;
    Ok(vec![Some(cplx(b, g, z)?)])
}
fn vjp_imag(b: &mut B, _: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let z = zeros_like(b, g)?;
    Ok(vec![Some(cplx(b, z, g)?)])
}
/// fftᴴ = conj ∘ fft ∘ conj (the DFT matrix is symmetric); the same for
/// ifft with ifft.
fn vjp_fft(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let c = conj(b, g)?;
    let f = b.op1(n.op, &[c], n.attrs.clone())?;
    Ok(vec![Some(conj(b, f)?)])
}
fn axis(b: &B, n: &NodeCx) -> Result<usize> {
    let r = b.shape(n.inputs[0]).rank() as i64;
    let a = n.attrs.int("axis")?;
    Ok((if a < 0 { a + r } else { a }) as usize)
}
/// x̄_t = Re Σ_k conj(ȳ_k)·ω^{kt}: zero-extend conj(ȳ) to n bins, fft,
/// take the real part.
fn vjp_rfft(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let ax = axis(b, n)?;
    let len = b.shape(n.inputs[0]).dims()[ax];
    let bins = b.shape(g).dims()[ax];
    let rank = b.shape(g).rank();
    let mut pads = vec![0i64; 2 * rank];
    pads[rank + ax] = (len - bins) as i64;
    let gr = re(b, g)?;
    let gi = im(b, g)?;
    let gi = neg(b, gi)?;
    let pr = b.op1("pad", &[gr], Attrs::new().with("pads", pads.clone()))?;
    let pi = b.op1("pad", &[gi], Attrs::new().with("pads", pads))?;
    let v = cplx(b, pr, pi)?;
    let f = b.op1("fft", &[v], Attrs::new().with("axis", ax as i64))?;
    Ok(vec![Some(re(b, f)?)])
}
/// x_t = (1/n)[Re z_0 + 2 Σ Re(z_k e^{2πikt/n}) + Re z_{n/2}(−1)^t], so
/// ∂x_t/∂Re z_k = (2/n) cos, ∂x_t/∂Im z_k = −(2/n) sin, i.e.
/// z̄_k = s_k/n · rfft(x̄)_k with s = 2, except 1 for the real part and 0
/// for the imaginary part at DC and Nyquist (which do not enter).
fn vjp_irfft(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let ax = axis(b, n)?;
    let len = b.shape(g).dims()[ax];
    let bins = b.shape(n.inputs[0]).dims()[ax];
    if bins != len / 2 + 1 {
        return Err(AdError::Unsupported {
            op: n.op.into(),
            msg: format!(
                "gradient only when the input has n/2+1 = {} bins (it has {bins})",
                len / 2 + 1
            ),
        });
    }
    let f = b.op1("rfft", &[g], Attrs::new().with("axis", ax as i64))?;
    let rank = b.shape(g).rank();
    let mut sd = vec![1; rank];
    sd[ax] = bins;
    let nyq = len.is_multiple_of(2);
    let sre: Vec<f64> = (0..bins)
        .map(|k| if k == 0 || (nyq && k == bins - 1) { 1.0 } else { 2.0 } / len as f64)
        .collect();
    let sim: Vec<f64> = (0..bins)
        .map(|k| if k == 0 || (nyq && k == bins - 1) { 0.0 } else { 2.0 } / len as f64)
        .collect();
    let dt = b.dtype(g);
    let sre = b.constant(rlx_ir::HostTensor::from_f64(dt, sd.clone(), sre)?)?;
    let sim = b.constant(rlx_ir::HostTensor::from_f64(dt, sd, sim)?)?;
    let fr = re(b, f)?;
    let fi = im(b, f)?;
    let r = mul(b, fr, sre)?;
    let i = mul(b, fi, sim)?;
    Ok(vec![Some(cplx(b, r, i)?)])
}

pub static RULES: &[(&str, Rule)] = &[
    (
        "complex",
        Rule::General {
            vjp: vjp_complex,
            jvp: Jvp::Linear,
        },
    ),
    (
        "real",
        Rule::General {
            vjp: vjp_real,
            jvp: Jvp::Linear,
        },
    ),
    (
        "imag",
        Rule::General {
            vjp: vjp_imag,
            jvp: Jvp::Linear,
        },
    ),
    (
        "fft",
        Rule::General {
            vjp: vjp_fft,
            jvp: Jvp::Linear,
        },
    ),
    (
        "ifft",
        Rule::General {
            vjp: vjp_fft,
            jvp: Jvp::Linear,
        },
    ),
    (
        "rfft",
        Rule::General {
            vjp: vjp_rfft,
            jvp: Jvp::Linear,
        },
    ),
    (
        "irfft",
        Rule::General {
            vjp: vjp_irfft,
            jvp: Jvp::Linear,
        },
    ),
];
