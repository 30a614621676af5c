//! 16-bit float storage: f16 and bf16 values are kept as their bits (`u16`)
//! and widened to f32 for compute, narrowed back (round to nearest even)
//! when stored.
//!
//! f16 goes through `half`'s slice conversions, which use F16C on x86-64
//! (detected at run time) and a portable bit-twiddling loop elsewhere
//! (wasm32 included). bf16 is the top half of an f32, so both directions
//! are plain integer loops that LLVM vectorizes on every target.

use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
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
            Raw::Half(v, _) => f16::from_bits(v[i]).to_f32(),
        }
    }
}

/// `dst[i] = src[i]` widened from `fmt` (f16 or bf16 bits) to f32.
pub fn widen(src: &[u16], fmt: Fmt, dst: &mut [f32]) {
    match fmt {
        Fmt::BF16 => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f32::from_bits((s as u32) << 16);
            }
        }
        _ => src.reinterpret_cast::<f16>().convert_to_f32_slice(dst),
    }
}

/// `dst[i] = src[i]` rounded (to nearest, ties to even) to `fmt` bits.
pub fn narrow(src: &[f32], fmt: Fmt, dst: &mut [u16]) {
    match fmt {
        Fmt::BF16 => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = to_bf16(s);
            }
        }
        _ => dst
            .reinterpret_cast_mut::<f16>()
            .convert_from_f32_slice(src),
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
        Fmt::F16 => f16::from_f32(x).to_f32(),
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
