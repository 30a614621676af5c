//! 16-bit float storage: f16 and bf16 values are kept as their bits (`u16`)
//! and widened to f32 for compute, narrowed back (round to nearest even)
//! when stored.
//!
//! Both directions are branch-free bit manipulation (plus one float
//! multiply or add that lets the FPU do subnormals and rounding), in
//! [`simd_fn!`] loops: LLVM vectorizes them for AVX-512 / AVX2 on x86-64
//! and for simd128 in the wasm build (`half`'s slice conversions use F16C
//! on x86 but through a call per 8 elements, and scalar code on wasm32).
//! bf16 is the top half of an f32: a shift one way, a rounding add the
//! other.

use super::par;
use super::simd::simd_fn;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rlx_ir::{DType, Element, HostTensor};

/// How a value's elements are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fmt {
    F32,
    F16,
    BF16,
}

impl Fmt {
    /// The storage of a float dtype the engine computes in f32.
    pub fn of(d: DType) -> Option<Fmt> {
        match d {
            DType::F32 => Some(Fmt::F32),
            DType::F16 => Some(Fmt::F16),
            DType::BF16 => Some(Fmt::BF16),
            _ => None,
        }
    }
}

/// Whether the engine runs values of dtype `d` (computing in f32).
pub fn is_float(d: DType) -> bool {
    Fmt::of(d).is_some()
}

/// Stored elements, whatever their width.
#[derive(Clone, Copy, Debug)]
pub enum Raw<'a> {
    F32(&'a [f32]),
    /// f16 or bf16 bits.
    Half(&'a [u16], Fmt),
}

impl<'a> Raw<'a> {
    /// The elements of a graph input (empty for dtypes the engine never
    /// reads as floats).
    pub fn of_input(t: &'a HostTensor) -> Raw<'a> {
        if let Some(v) = f32::unwrap(t.data()) {
            Raw::F32(v)
        } else if let Some(v) = f16::unwrap(t.data()) {
            Raw::Half(v.reinterpret_cast(), Fmt::F16)
        } else if let Some(v) = bf16::unwrap(t.data()) {
            Raw::Half(v.reinterpret_cast(), Fmt::BF16)
        } else {
            Raw::F32(&[])
        }
    }

    /// Widen elements `start..start + dst.len()` into `dst`.
    pub fn load(&self, start: usize, dst: &mut [f32]) {
        let r = start..start + dst.len();
        match *self {
            Raw::F32(v) => dst.copy_from_slice(&v[r]),
            Raw::Half(v, fmt) => widen(&v[r], fmt, dst),
        }
    }

    /// Element `i` as f32.
    pub fn get(&self, i: usize) -> f32 {
        match *self {
            Raw::F32(v) => v[i],
            Raw::Half(v, Fmt::BF16) => f32::from_bits((v[i] as u32) << 16),
            Raw::Half(v, _) => f16_to_f32(v[i]),
        }
    }
}

/// f16 bits → f32, exact. Normals and subnormals: the exponent and
/// mantissa shifted into f32 position and scaled by 2^112 (the exponent
/// bias difference; a subnormal f16 lands on an f32 subnormal that the
/// multiply normalizes); inf/NaN get the f32 all-ones exponent.
#[inline(always)]
fn f16_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let scaled = f32::from_bits(em << 13) * f32::from_bits(0x7780_0000);
    let special = f32::from_bits((em << 13) | 0x7f80_0000);
    let v = if em >= 0x7c00 { special } else { scaled };
    f32::from_bits(v.to_bits() | sign)
}

/// f32 → f16 bits, round to nearest even. Three cases, all computed and
/// one selected: |x| ≥ 65536 (or inf/NaN) → inf (NaN stays a quiet NaN);
/// |x| < 2^-14 → subnormal, rounded by the FPU in an add of 0.5 (which
/// puts the f16 subnormal's last bit at the f32's); otherwise rebias the
/// exponent and round the 13 dropped mantissa bits (add 0xfff plus the
/// kept last bit: ties to even; a carry rounds up into the exponent, up to
/// inf).
#[inline(always)]
fn f32_to_f16(x: f32) -> u16 {
    let f = x.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7fff_ffff;
    let big = if a > 0x7f80_0000 {
        0x7e00 | ((a >> 13) & 0x3ff)
    } else {
        0x7c00
    };
    const HALF: u32 = 126 << 23; // 0.5
    let sub = (f32::from_bits(a) + f32::from_bits(HALF))
        .to_bits()
        .wrapping_sub(HALF);
    let odd = (a >> 13) & 1;
    let norm = a.wrapping_add(0xc800_0fff).wrapping_add(odd) >> 13;
    let o = if a >= 0x4780_0000 {
        big
    } else if a < 0x3880_0000 {
        sub
    } else {
        norm
    };
    (o | sign) as u16
}

simd_fn! {
    fn widen_f16(src: &[u16], dst: &mut [f32]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f16_to_f32(s);
        }
    }
}

simd_fn! {
    fn widen_bf16(src: &[u16], dst: &mut [f32]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits((s as u32) << 16);
        }
    }
}

simd_fn! {
    fn narrow_f16(src: &[f32], dst: &mut [u16]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f32_to_f16(s);
        }
    }
}

simd_fn! {
    fn narrow_bf16(src: &[f32], dst: &mut [u16]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = to_bf16(s);
        }
    }
}

/// `dst[i] = src[i]` widened from `fmt` (f16 or bf16 bits) to f32.
pub fn widen(src: &[u16], fmt: Fmt, dst: &mut [f32]) {
    match fmt {
        Fmt::BF16 => widen_bf16(src, dst),
        _ => widen_f16(src, dst),
    }
}

/// `dst[i] = src[i]` rounded (to nearest, ties to even) to `fmt` bits.
pub fn narrow(src: &[f32], fmt: Fmt, dst: &mut [u16]) {
    match fmt {
        Fmt::BF16 => narrow_bf16(src, dst),
        _ => narrow_f16(src, dst),
    }
}

/// f32 → bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
/// Branch-free so the loops around it vectorize.
#[inline(always)]
fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    let nan = (b >> 16) | 0x40;
    (if x.is_nan() { nan } else { rounded }) as u16
}

/// `x` rounded through `fmt` and back (a cast to a 16-bit type inside an
/// f32 register program).
#[inline(always)]
pub fn round_through(x: f32, fmt: Fmt) -> f32 {
    match fmt {
        Fmt::F32 => x,
        Fmt::BF16 => f32::from_bits((to_bf16(x) as u32) << 16),
        Fmt::F16 => f16_to_f32(f32_to_f16(x)),
    }
}

/// A host tensor of `dtype` (f32, f16 or bf16) from f32 elements.
pub fn host_from_f32(
    dtype: DType,
    shape: rlx_ir::Shape,
    v: Vec<f32>,
) -> Result<HostTensor, rlx_ir::IrError> {
    let data = match dtype {
        DType::F16 => v
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect::<Vec<_>>()
            .into(),
        DType::BF16 => v
            .iter()
            .map(|&x| bf16::from_bits(to_bf16(x)))
            .collect::<Vec<_>>()
            .into(),
        _ => v.into(),
    };
    HostTensor::new(dtype, shape, data)
}

/// The f16 / bf16 bits of a host tensor, if it is one.
pub fn half_bits(t: &HostTensor) -> Option<&[u16]> {
    match Raw::of_input(t) {
        Raw::Half(v, _) => Some(v),
        Raw::F32(_) => None,
    }
}

/// dst = src widened to f32, across threads.
pub fn widen_into(dst: &mut [f32], src: Raw) {
    let chunk = par::chunk_len(dst.len(), 1024, 64 * 1024);
    par::for_chunks(dst, chunk, |ci, d| src.load(ci * chunk, d));
}

/// dst = src rounded to `fmt` (f16/bf16 bits), across threads.
pub fn narrow_into(dst: &mut [u16], src: &[f32], fmt: Fmt) {
    let chunk = par::chunk_len(dst.len(), 1024, 64 * 1024);
    par::for_chunks(dst, chunk, |ci, d| {
        narrow(&src[ci * chunk..ci * chunk + d.len()], fmt, d)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even_like_half() {
        let xs = [
            0.0f32,
            -0.0,
            1.0,
            1.0 + 2f32.powi(-8), // halfway between two bf16: ties down to even
            1.0 + 3.0 * 2f32.powi(-8), // halfway: ties up to even
            std::f32::consts::PI,
            -std::f32::consts::E,
            1e-40,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            65504.0,
        ];
        for x in xs {
            assert_eq!(to_bf16(x), bf16::from_f32(x).to_bits(), "{x}");
        }
        assert!(bf16::from_bits(to_bf16(f32::NAN)).is_nan());
    }

    /// Every f16 bit pattern widens exactly as `half` does.
    #[test]
    fn f16_widening_matches_half_exhaustively() {
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        let mut got = vec![0f32; bits.len()];
        widen(&bits, Fmt::F16, &mut got);
        for (&b, &g) in bits.iter().zip(&got) {
            let want = f16::from_bits(b).to_f32();
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "{b:#06x}: {g} vs {want}"
            );
        }
    }

    /// f32 → f16 rounding matches `half` on 2^21 f32 bit patterns spread
    /// over the whole space (every exponent, subnormals, inf, NaN) and on
    /// the halfway points around every f16 exponent.
    #[test]
    fn f16_narrowing_matches_half() {
        let mut xs: Vec<f32> = (0..1u32 << 21)
            .map(|i| f32::from_bits(i.wrapping_mul(2047) ^ (i << 11)))
            .collect();
        for e in -26..17 {
            let p = 2f32.powi(e);
            for k in 0..8 {
                let x = p * (1.0 + k as f32 / 1024.0 + 1.0 / 2048.0);
                xs.extend([x, -x, x.next_up(), x.next_down()]);
            }
        }
        xs.extend([65504.0, 65519.99, 65520.0, 65536.0, f32::INFINITY, f32::NAN]);
        let mut got = vec![0u16; xs.len()];
        narrow(&xs, Fmt::F16, &mut got);
        for (&x, &g) in xs.iter().zip(&got) {
            let want = f16::from_f32(x);
            assert!(
                g == want.to_bits() || (f16::from_bits(g).is_nan() && want.is_nan()),
                "{x:e} ({:#010x}): {g:#06x} vs {:#06x}",
                x.to_bits(),
                want.to_bits()
            );
        }
    }

    #[test]
    fn widen_and_narrow_round_trip() {
        let xs: Vec<f32> = (0..40).map(|i| (i as f32 - 20.0) * 0.37).collect();
        for fmt in [Fmt::F16, Fmt::BF16] {
            let mut bits = vec![0u16; xs.len()];
            narrow(&xs, fmt, &mut bits);
            let mut back = vec![0f32; xs.len()];
            widen(&bits, fmt, &mut back);
            for (&x, &y) in xs.iter().zip(&back) {
                let want = match fmt {
                    Fmt::F16 => f16::from_f32(x).to_f32(),
                    _ => bf16::from_f32(x).to_f32(),
                };
                assert_eq!(y, want);
                assert_eq!(round_through(x, fmt), want);
            }
        }
    }
}
