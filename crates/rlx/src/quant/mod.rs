//! Post-training quantization of a graph's dense layers to integer grids
//! with float scales (ONNX Runtime's QDQ scheme): weights int8 or int4,
//! symmetric, per tensor, per output channel or per group along the
//! inputs; activations (static int8) with a range calibrated once on
//! sample inputs — min-max, a percentile, or the least squared error.
//!
//! ```text
//! let mut cal = Calibrator::new(weight_inputs);
//! for batch in samples { cal.observe(&graph, &inputs, None)?; }
//! let plan = cal.plan(&graph, &Scheme::static_int8(Range::Mse, Granularity::Channel), &weights)?;
//! let q_graph = plan.apply(&graph)?;      // weights become i8 inputs
//! let w_k = plan.weight(k);               // the i8 values to pass for input k
//! ```
//!
//! A dense layer is a matmul-family node (`matmul`, `matmul_bias_act`, …)
//! whose second operand is a rank-2 weight input, as stored (in, out) or
//! read through `permute([1, 0])` from (out, in). The rewritten graph
//! reads `(x_q − zero_point)·scale` and `w_q·scale` in place of x and w,
//! so every backend runs it with the ops it has; the integer values and
//! their products are exact in f32 (8-bit by 8-bit products summed as
//! f32), so it computes what an int8 kernel would, up to f32 sums. It is
//! slower than f32 until a backend claims the pattern with int8 kernels.
//!
//! Conventions are ONNX Runtime's (`quant_utils.compute_scale_zp`): a
//! range always includes zero; symmetric grids are [-127, 127] (int4:
//! [-8, 7]) with zero point 0, asymmetric ones [-128, 127]; x ↦ clamp(round(x / s) + z)
//! rounding half to even. `tests/vectors/quant` holds the NumPy/ONNX
//! Runtime reference they are checked against.

mod integer;
mod observe;
mod rewrite;

pub use observe::{percentile, quantization_error, Observer, MSE_STEPS, SAMPLE_CAP};
pub use rewrite::{dense_sites, Calibrator, DenseSite, Plan, SitePlan, Skipped};

/// How calibration turns observed activations into a range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Range {
    /// The smallest and largest value seen.
    MinMax,
    /// The p-th percentile (e.g. 99.99) of |x| (symmetric) or the
    /// (100 − p)-th and p-th percentiles (asymmetric): outliers clipped.
    Percentile(f64),
    /// Of the min-max range scaled by k/200 (k = 1..=200), the one whose
    /// grid reproduces the samples with the least squared error.
    Mse,
    /// No calibration: each run quantizes a layer input over its own
    /// [min(x, 0), max(x, 0)] (`dynamic_quantize_linear`, ONNX Runtime's
    /// dynamic quantization; u8 with a zero point).
    Dynamic,
}

impl Range {
    /// `minmax`, `mse`, `percentile` (99.99) or `percentile=P`.
    pub fn parse(s: &str) -> Result<Range, String> {
        match s {
            "minmax" | "min-max" => Ok(Range::MinMax),
            "mse" => Ok(Range::Mse),
            "percentile" => Ok(Range::Percentile(99.99)),
            "dynamic" => Ok(Range::Dynamic),
            _ => match s.strip_prefix("percentile=").map(str::parse::<f64>) {
                Some(Ok(p)) if p > 50.0 && p <= 100.0 => Ok(Range::Percentile(p)),
                Some(_) => Err(format!("`{s}`: a percentile must be in (50, 100]")),
                None => Err(format!(
                    "unknown calibration range `{s}` (minmax, percentile, percentile=P, mse, dynamic)"
                )),
            },
        }
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Range::MinMax => write!(f, "min-max"),
            Range::Percentile(p) => write!(f, "percentile {p}"),
            Range::Mse => write!(f, "MSE"),
            Range::Dynamic => write!(f, "dynamic"),
        }
    }
}

/// Which weights share one scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// One scale per weight tensor.
    Tensor,
    /// One scale per output channel.
    Channel,
    /// One scale per `n` consecutive inputs of each output channel (the
    /// input count must be a multiple of `n`).
    Group(usize),
}

impl Granularity {
    /// `tensor`, `channel` or `group=N`.
    pub fn parse(s: &str) -> Result<Granularity, String> {
        match s {
            "tensor" => Ok(Granularity::Tensor),
            "channel" => Ok(Granularity::Channel),
            _ => match s.strip_prefix("group=").map(str::parse::<usize>) {
                Some(Ok(n)) if n > 0 => Ok(Granularity::Group(n)),
                _ => Err(format!(
                    "unknown weight granularity `{s}` (tensor, channel, group=N)"
                )),
            },
        }
    }
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Granularity::Tensor => write!(f, "per tensor"),
            Granularity::Channel => write!(f, "per channel"),
            Granularity::Group(n) => write!(f, "groups of {n}"),
        }
    }
}

/// How activations are quantized (static: one range per layer input,
/// fixed at calibration).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activations {
    pub range: Range,
    pub symmetric: bool,
}

/// A quantization scheme for a graph's dense layers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scheme {
    /// 8 or 4 (symmetric grids [-127, 127] and [-8, 7], as ONNX Runtime).
    pub weight_bits: u8,
    pub granularity: Granularity,
    /// `None`: weight-only (activations stay f32, no calibration needed).
    pub activations: Option<Activations>,
}

impl Scheme {
    /// Static int8: int8 weights and int8 activations with an asymmetric
    /// range calibrated by `range`.
    pub fn static_int8(range: Range, granularity: Granularity) -> Self {
        Scheme {
            weight_bits: 8,
            granularity,
            activations: Some(Activations {
                range,
                symmetric: false,
            }),
        }
    }

    /// Dynamic int8: int8 weights, activations quantized at run time over
    /// each run's own range (no calibration).
    pub fn dynamic_int8(granularity: Granularity) -> Self {
        Scheme {
            weight_bits: 8,
            granularity,
            activations: Some(Activations {
                range: Range::Dynamic,
                symmetric: false,
            }),
        }
    }

    /// Weights only, `bits` 8 or 4.
    pub fn weight_only(bits: u8, granularity: Granularity) -> Self {
        Scheme {
            weight_bits: bits,
            granularity,
            activations: None,
        }
    }
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "int{} weights {}", self.weight_bits, self.granularity)?;
        match self.activations {
            Some(a) => write!(
                f,
                ", int8 activations ({}, {})",
                a.range,
                if a.symmetric {
                    "symmetric"
                } else {
                    "asymmetric"
                }
            ),
            None => write!(f, ", f32 activations"),
        }
    }
}

/// One grid: x ↦ clamp(round(x / scale) + zero_point, qmin, qmax).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QParams {
    pub scale: f32,
    pub zero_point: i32,
    pub qmin: i32,
    pub qmax: i32,
}

impl QParams {
    /// The grid of `bits` (8 or 4) covering [lo, hi] widened to include
    /// zero (ONNX Runtime's `compute_scale_zp` and grids): symmetric int8
    /// [-127, 127] and int4 [-8, 7] (scale 2·max|x| / 15) with zero point 0;
    /// asymmetric [−2^(bits−1), 2^(bits−1) − 1]. A range of (almost) zero
    /// width gets scale 1.
    pub fn new(lo: f32, hi: f32, symmetric: bool, bits: u8) -> Self {
        // Grids of 2 to 16 bits (other widths are taken as the nearest).
        let bits = bits.clamp(2, 16);
        let top = (1i32 << (bits - 1)) - 1;
        let (mut rmin, mut rmax) = (lo.min(0.0) as f64, hi.max(0.0) as f64);
        let (qmin, qmax) = if symmetric {
            let a = rmin.abs().max(rmax.abs());
            (rmin, rmax) = (-a, a);
            // ONNX Runtime's grids: int8 [-127, 127], int4 the full [-8, 7].
            if bits == 8 {
                (-top, top)
            } else {
                (-top - 1, top)
            }
        } else {
            (-top - 1, top)
        };
        // As ONNX Runtime: the zero point from the f64 scale, then the
        // scale stored as f32; a scale below f32's smallest normal is 1.
        let scale64 = (rmax - rmin) / (qmax - qmin) as f64;
        if scale64 < f32::MIN_POSITIVE as f64 {
            return QParams {
                scale: 1.0,
                zero_point: 0,
                qmin,
                qmax,
            };
        }
        let scale = scale64 as f32;
        let zero_point = if symmetric {
            0
        } else {
            (qmin as f64 - rmin / scale64).round_ties_even() as i32
        };
        QParams {
            scale,
            zero_point,
            qmin,
            qmax,
        }
    }

    /// [`QParams::new`] for int8.
    pub fn int8(lo: f32, hi: f32, symmetric: bool) -> Self {
        QParams::new(lo, hi, symmetric, 8)
    }

    /// The integer `x` maps to.
    pub fn quantize(&self, x: f32) -> i32 {
        let q = (x / self.scale).round_ties_even() as i64 + self.zero_point as i64;
        q.clamp(self.qmin as i64, self.qmax as i64) as i32
    }

    /// The value `x` is read back as.
    pub fn fake_quant(&self, x: f32) -> f32 {
        (self.quantize(x) - self.zero_point) as f32 * self.scale
    }
}

/// A rank-2 weight on an integer grid: `values` in the weight's own
/// layout, `scales` one per tensor / channel / group.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantWeight {
    pub values: Vec<i8>,
    pub scales: Vec<f32>,
}

/// Quantize a weight of `dims` [rows, cols] whose output channels run
/// along `out_axis` (0: stored (out, in); 1: stored (in, out)) to a
/// symmetric `bits` grid with scales per `g`. Scales come from each
/// group's largest magnitude. Errors name what does not fit.
pub fn quantize_weight(
    w: &[f32],
    dims: [usize; 2],
    out_axis: usize,
    bits: u8,
    g: Granularity,
) -> Result<QuantWeight, String> {
    if !matches!(bits, 4 | 8) {
        return Err(format!("weights are quantized to 8 or 4 bits, not {bits}"));
    }
    if w.len() != dims[0] * dims[1] || out_axis > 1 {
        return Err(format!("a weight of {} values is not {dims:?}", w.len()));
    }
    if let Some(bad) = w.iter().find(|v| !v.is_finite()) {
        return Err(format!("the weight holds a non-finite value ({bad})"));
    }
    let (outs, ins) = (dims[out_axis], dims[1 - out_axis]);
    let group = match g {
        Granularity::Tensor => outs * ins,
        Granularity::Channel => ins,
        Granularity::Group(0) => return Err("a group of 0 inputs".into()),
        Granularity::Group(n) if ins % n == 0 => n,
        Granularity::Group(n) => {
            return Err(format!(
                "{ins} inputs per output are not a whole number of groups of {n}"
            ))
        }
    };
    // Element (o, i) of the weight, wherever the layout puts it.
    let at = |o: usize, i: usize| {
        if out_axis == 0 {
            o * dims[1] + i
        } else {
            i * dims[1] + o
        }
    };
    // Groups are consecutive inputs of one output (Tensor: everything).
    let group_of = |o: usize, i: usize| {
        if g == Granularity::Tensor {
            0
        } else {
            (o * ins + i) / group
        }
    };
    let n_groups = if g == Granularity::Tensor {
        1
    } else {
        outs * ins / group
    };
    let mut amax = vec![0f32; n_groups];
    for o in 0..outs {
        for i in 0..ins {
            let k = group_of(o, i);
            amax[k] = amax[k].max(w[at(o, i)].abs());
        }
    }
    let grids: Vec<QParams> = amax
        .iter()
        .map(|&a| QParams::new(-a, a, true, bits))
        .collect();
    let mut values = vec![0i8; w.len()];
    for o in 0..outs {
        for i in 0..ins {
            let j = at(o, i);
            values[j] = grids[group_of(o, i)].quantize(w[j]) as i8;
        }
    }
    Ok(QuantWeight {
        values,
        scales: grids.iter().map(|q| q.scale).collect(),
    })
}
