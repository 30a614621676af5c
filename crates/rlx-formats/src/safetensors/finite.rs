//! Finding the first NaN or ±infinity in loaded float data.
//!
//! Loading refuses non-finite weights by default (see
//! [`FormatError::NonFinite`](crate::FormatError::NonFinite)), so this scan
//! runs over every float tensor loaded — all of MiniLM's 90 MB each time it
//! loads. It tests the exponent bits (all ones means inf or NaN) and ORs the
//! results over fixed chunks with no early exit inside one, which the
//! compiler vectorizes; only a chunk that has a hit is searched again for
//! the index.

use half::{bf16, f16};
use rlx_ir::TensorData;

const CHUNK: usize = 4096;

/// Index of the first element where `bad` holds.
fn first<T: Copy>(v: &[T], bad: impl Fn(T) -> bool + Copy) -> Option<usize> {
    for (c, chunk) in v.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(false, |a, &x| a | bad(x)) {
            return chunk.iter().position(|&x| bad(x)).map(|i| c * CHUNK + i);
        }
    }
    None
}

fn bad_f32(x: f32) -> bool {
    x.to_bits() & 0x7f80_0000 == 0x7f80_0000
}

/// The first non-finite element of float (or complex) data: its flat index
/// and value. `None` for finite data and for non-float dtypes.
pub(crate) fn first_non_finite(data: &TensorData) -> Option<(usize, f64)> {
    match data {
        TensorData::F32(v) => first(v, bad_f32).map(|i| (i, f64::from(v[i]))),
        TensorData::F64(v) => first(v, |x: f64| {
            x.to_bits() & 0x7ff0_0000_0000_0000 == 0x7ff0_0000_0000_0000
        })
        .map(|i| (i, v[i])),
        TensorData::F16(v) => {
            first(v, |x: f16| x.to_bits() & 0x7c00 == 0x7c00).map(|i| (i, v[i].to_f64()))
        }
        TensorData::BF16(v) => {
            first(v, |x: bf16| x.to_bits() & 0x7f80 == 0x7f80).map(|i| (i, v[i].to_f64()))
        }
        TensorData::C64(v) => first(v, |[re, im]: [f32; 2]| bad_f32(re) | bad_f32(im)).map(|i| {
            let [re, im] = v[i];
            (i, f64::from(if bad_f32(re) { re } else { im }))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_bad_element_of_each_float_type() {
        let mut v = vec![1.0f32; 3 * CHUNK];
        assert_eq!(first_non_finite(&v.clone().into()), None);
        v[2 * CHUNK + 5] = f32::NEG_INFINITY;
        v[2 * CHUNK + 9] = f32::NAN;
        assert_eq!(
            first_non_finite(&v.into()),
            Some((2 * CHUNK + 5, f64::NEG_INFINITY))
        );
        // The largest finite values are not flagged.
        let d: TensorData = vec![f64::MAX, f64::MIN_POSITIVE, f64::NAN].into();
        assert!(matches!(first_non_finite(&d), Some((2, x)) if x.is_nan()));
        let h: TensorData = vec![f16::MAX, f16::INFINITY].into();
        assert_eq!(first_non_finite(&h), Some((1, f64::INFINITY)));
        let b: TensorData = vec![bf16::MAX, bf16::from_f32(f32::NAN)].into();
        assert!(matches!(first_non_finite(&b), Some((1, x)) if x.is_nan()));
        let c: TensorData = vec![[0.0f32, 1.0], [2.0, f32::INFINITY]].into();
        assert_eq!(first_non_finite(&c), Some((1, f64::INFINITY)));
        let i: TensorData = vec![i32::MAX].into();
        assert_eq!(first_non_finite(&i), None);
    }
}
