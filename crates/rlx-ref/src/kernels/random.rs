//! Seeded random generation: random_uniform, random_normal, bernoulli.
//!
//! # The generator
//! A counter-based SplitMix64 (Steele, Lea & Flood, "Fast splittable
//! pseudorandom number generators", 2014). Draw number `i` of seed `s` is
//!
//! ```text
//!   key    = mix64(s)                           (decorrelates nearby seeds)
//!   bits_i = mix64(key + (i + 1)·0x9E3779B97F4A7C15)   (mod 2^64)
//! ```
//!
//! where `mix64` is SplitMix64's finalizer (xor-shift-multiply, below).
//! For a fixed key this is exactly the i-th output of a SplitMix64 stream,
//! but any draw can be computed on its own, so results depend only on
//! (seed, element index): not on evaluation order, threading or chunking.
//! Any backend that wants to agree with this one implements these few lines.
//!
//! * uniform: `u_i = (bits_i >> 11)·2⁻⁵³` in [0, 1) (the top 53 bits), then
//!   `low + (high − low)·u_i`; a value that rounds up to `high` in the
//!   output dtype is moved to the largest representable value below it, so
//!   the output really lies in [low, high).
//! * normal: element i uses draws 2i and 2i+1 (Box–Muller, cosine branch):
//!   `z = sqrt(−2·ln(1 − u_2i))·cos(2π·u_2i+1)`, output `mean + std·z`
//!   (1 − u is in (0, 1], so the logarithm is finite).
//! * bernoulli: element i is 1 when `u_i < p_i`, else 0.

use super::*;
use half::{bf16, f16};

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("random_uniform", random_uniform),
    ("random_normal", random_normal),
    ("bernoulli", bernoulli),
];

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (Stafford's "Mix13" variant).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draws of one seed, addressable by index.
struct Stream {
    key: u64,
}

impl Stream {
    fn new(seed: i64) -> Stream {
        Stream {
            key: mix64(seed as u64),
        }
    }
    fn bits(&self, i: u64) -> u64 {
        mix64(self.key.wrapping_add(i.wrapping_add(1).wrapping_mul(GAMMA)))
    }
    /// Uniform in [0, 1) with 53 random bits.
    fn uniform(&self, i: u64) -> f64 {
        (self.bits(i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Standard normal by Box–Muller from draws 2i and 2i+1.
    fn normal(&self, i: u64) -> f64 {
        let (u1, u2) = (self.uniform(2 * i), self.uniform(2 * i + 1));
        (-2.0 * (1.0 - u1).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// `v` rounded to the nearest value of float dtype `d`.
fn round_to(d: DType, v: f64) -> f64 {
    match d {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v,
    }
}

/// The next value of float dtype `d` below `v` (which is representable
/// in `d` and finite).
fn next_below(d: DType, v: f64) -> f64 {
    // For 16-bit floats, stepping the bit pattern moves by one ulp: down
    // for positive values, up in magnitude for negative ones.
    fn step16(bits: u16) -> u16 {
        match bits {
            0x0000 => 0x8001, // +0 → the smallest negative subnormal
            b if b & 0x8000 == 0 => b - 1,
            b => b + 1,
        }
    }
    match d {
        DType::F16 => f16::from_bits(step16(f16::from_f64(v).to_bits())).to_f64(),
        DType::BF16 => bf16::from_bits(step16(bf16::from_f64(v).to_bits())).to_f64(),
        DType::F32 => (v as f32).next_down() as f64,
        _ => v.next_down(),
    }
}

/// Uniform in [low, high): see the module docs.
fn random_uniform(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let out = cx.out_type(0);
    let (low, high) = (cx.float("low")?, cx.float("high")?);
    let s = Stream::new(cx.int("seed")?);
    let v = (0..out.shape.numel() as u64)
        .map(|i| {
            let mut r = round_to(out.dtype, low + (high - low) * s.uniform(i));
            // Rounding into a narrow dtype may reach `high`; step back
            // below it, but never below `low`.
            while r >= high && high > low && r.is_finite() {
                let below = next_below(out.dtype, r);
                if below < low {
                    break;
                }
                r = below;
            }
            r
        })
        .collect();
    Ok(vec![from_floats(out, v)?])
}

fn random_normal(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let out = cx.out_type(0);
    let (mean, std) = (cx.float("mean")?, cx.float("std")?);
    let s = Stream::new(cx.int("seed")?);
    let v = (0..out.shape.numel() as u64)
        .map(|i| mean + std * s.normal(i))
        .collect();
    Ok(vec![from_floats(out, v)?])
}

/// 1 with probability p (elementwise), in the dtype of p. p ≤ 0 (or NaN)
/// always gives 0, p ≥ 1 always 1.
fn bernoulli(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let p = floats(cx.input(0))?;
    let s = Stream::new(cx.int("seed")?);
    let v = p
        .iter()
        .enumerate()
        .map(|(i, &p)| if s.uniform(i as u64) < p { 1.0 } else { 0.0 })
        .collect();
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &str, inputs: &[HostTensor]) -> Vec<f64> {
        let g = rlx_ir::text::parse(src).unwrap();
        crate::run_graph(&g, inputs).unwrap()[0]
            .to_f64_vec()
            .unwrap()
    }

    #[test]
    fn splitmix_matches_the_published_stream() {
        // SplitMix64 seeded with 0 starts 0xE220A8397B1DCDAF (the reference
        // C implementation's first output): that is mix64(1·GAMMA).
        assert_eq!(mix64(GAMMA), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn uniform_is_deterministic_in_range_with_the_right_mean() {
        let src = "graph @g() {\n  %0 = random_uniform() {shape=[4000], low=-1.0, high=3.0, seed=7}\n  return %0\n}";
        let a = run(src, &[]);
        assert_eq!(a, run(src, &[]));
        assert!(a.iter().all(|&v| (-1.0..3.0).contains(&v)));
        let mean = a.iter().sum::<f64>() / a.len() as f64;
        assert!((mean - 1.0).abs() < 0.1, "mean {mean}");
        let other = run(&src.replace("seed=7", "seed=8"), &[]);
        assert_ne!(a, other);
    }

    #[test]
    fn normal_moments() {
        let src = "graph @g() {\n  %0 = random_normal() {shape=[20000], dtype=f64, mean=2.0, std=0.5, seed=1}\n  return %0\n}";
        let v = run(src, &[]);
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
        assert!(
            (m - 2.0).abs() < 0.02 && (var - 0.25).abs() < 0.02,
            "{m} {var}"
        );
    }

    #[test]
    fn uniform_never_reaches_high_in_f16() {
        assert_eq!(next_below(DType::F16, 1.0), 1.0 - 2f64.powi(-11));
        assert_eq!(next_below(DType::BF16, 0.0), -bf16::from_bits(1).to_f64());
    }

    #[test]
    fn bernoulli_extremes() {
        let p = HostTensor::from_slice(&[0.0f32, 1.0, 0.0, 1.0], [4]).unwrap();
        let src = "graph @g(%p: f32[4]) {\n  %1 = bernoulli(%p) {seed=3}\n  return %1\n}";
        assert_eq!(run(src, &[p]), vec![0.0, 1.0, 0.0, 1.0]);
    }
}
