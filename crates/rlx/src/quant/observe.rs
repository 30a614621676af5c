//! What calibration records of one tensor, and the ranges it picks from
//! that: min-max, a percentile, or the clipping range with the least
//! squared quantization error.

use super::{QParams, Range};

/// Values kept per observed tensor before thinning (4 MiB of f32): enough
/// for a percentile of 1e-4 to rest on a hundred values, small enough to
/// keep one per quantized layer of a transformer.
pub const SAMPLE_CAP: usize = 1 << 20;

/// Candidate clipping ranges the MSE search tries: the observed range
/// scaled by k/MSE_STEPS, k = 1..=MSE_STEPS.
pub const MSE_STEPS: u32 = 200;

/// The statistics of one tensor over calibration runs: its exact min and
/// max, how many values were seen, and every `stride`-th value (the
/// stride doubles each time the sample fills, so which values are kept
/// depends only on the order they came in).
#[derive(Clone, Debug)]
pub struct Observer {
    min: f32,
    max: f32,
    count: u64,
    samples: Vec<f32>,
    stride: u64,
    cap: usize,
}

impl Default for Observer {
    fn default() -> Self {
        Observer::with_cap(SAMPLE_CAP)
    }
}

impl Observer {
    /// An observer keeping at most `cap` (≥ 2) sampled values.
    pub fn with_cap(cap: usize) -> Self {
        Observer {
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            count: 0,
            samples: vec![],
            stride: 1,
            cap: cap.max(2),
        }
    }

    /// Record `values`; a NaN or infinity is an error (a range with one
    /// would quantize everything to zero or to the clamp).
    pub fn add(&mut self, values: &[f32]) -> Result<(), String> {
        for &v in values {
            if !v.is_finite() {
                return Err(format!(
                    "a non-finite value ({v}) after {} finite ones",
                    self.count
                ));
            }
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            if self.count.is_multiple_of(self.stride) {
                if self.samples.len() == self.cap {
                    // Keep every other sample: those at multiples of the new stride.
                    let kept: Vec<f32> = self.samples.iter().step_by(2).copied().collect();
                    self.samples = kept;
                    self.stride *= 2;
                }
                if self.count.is_multiple_of(self.stride) {
                    self.samples.push(v);
                }
            }
            self.count += 1;
        }
        Ok(())
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest and largest value seen.
    pub fn min_max(&self) -> Option<(f32, f32)> {
        (self.count > 0).then_some((self.min, self.max))
    }

    /// The sampled values (all of them while fewer than the cap were seen).
    pub fn samples(&self) -> &[f32] {
        &self.samples
    }

    /// The range `method` picks for an int8 grid (`symmetric`: [-127, 127]
    /// around zero; otherwise [-128, 127] with a zero point). `None` when
    /// nothing was observed.
    pub fn range(&self, method: Range, symmetric: bool) -> Option<(f32, f32)> {
        let (lo, hi) = self.min_max()?;
        Some(match method {
            // A dynamic range is each run's own; the observed one stands in.
            Range::MinMax | Range::Dynamic => (lo, hi),
            Range::Percentile(p) => {
                if symmetric {
                    let abs: Vec<f32> = self.samples.iter().map(|v| v.abs()).collect();
                    let t = percentile(abs, p);
                    (-t, t)
                } else {
                    let s = self.samples.clone();
                    (percentile(s.clone(), 100.0 - p), percentile(s, p))
                }
            }
            Range::Mse => mse_range(&self.samples, lo, hi, symmetric),
        })
    }
}

/// The `p`-th percentile (0..=100) of `v` with linear interpolation
/// between the two nearest ranks (NumPy's default, `method="linear"`).
pub fn percentile(mut v: Vec<f32>, p: f64) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f32::total_cmp);
    let pos = (p.clamp(0.0, 100.0) / 100.0) * (v.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos - pos.floor());
    let a = v[i] as f64;
    let b = v[(i + 1).min(v.len() - 1)] as f64;
    (a + (b - a) * frac) as f32
}

/// Squared error of quantizing `samples` onto the grid of `q` and back.
pub fn quantization_error(samples: &[f32], q: &QParams) -> f64 {
    samples
        .iter()
        .map(|&x| {
            let e = (q.fake_quant(x) - x) as f64;
            e * e
        })
        .sum()
}

/// The range among the observed one scaled by k/[`MSE_STEPS`] whose grid
/// reproduces the samples with the least squared error (the first such,
/// so the narrowest on a tie).
fn mse_range(samples: &[f32], lo: f32, hi: f32, symmetric: bool) -> (f32, f32) {
    let mut best = (f64::INFINITY, (lo, hi));
    for k in 1..=MSE_STEPS {
        let f = k as f32 / MSE_STEPS as f32;
        let (l, h) = (lo.min(0.0) * f, hi.max(0.0) * f);
        let err = quantization_error(samples, &QParams::int8(l, h, symmetric));
        if err < best.0 {
            best = (err, (l, h));
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_every_stride_th_value() {
        let mut o = Observer::with_cap(4);
        let v: Vec<f32> = (0..10).map(|i| i as f32).collect();
        o.add(&v).unwrap();
        // 0,1,2,3 → full at 4 → keep 0,2 (stride 2), add 4, 6 → full at 8 → 0,4 (stride 4), add 8.
        assert_eq!(o.samples(), &[0.0, 4.0, 8.0]);
        assert_eq!(o.min_max(), Some((0.0, 9.0)));
        assert_eq!(o.count(), 10);
        assert!(o.add(&[f32::NAN]).is_err());
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], 50) == 2.5, 90 -> 3.7
        assert_eq!(percentile(vec![4.0, 1.0, 3.0, 2.0], 50.0), 2.5);
        assert!((percentile(vec![4.0, 1.0, 3.0, 2.0], 90.0) - 3.7).abs() < 1e-6);
    }
}
