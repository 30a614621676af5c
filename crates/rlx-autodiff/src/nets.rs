//! Small reference networks for the training examples, tests and
//! benchmarks: the MLP and LeNet-5, as a loss graph (params, images,
//! one-hot labels → mean cross-entropy) and a logits graph (params, images
//! → logits). Parameters come first in both, in the same order, with
//! PyTorch's default initialization U(±1/√fan_in) from a seeded generator.

use crate::error::Result;
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType, ValueId};

pub struct Net {
    /// Inputs: params..., x, y_onehot. Output: scalar mean cross-entropy.
    pub loss: Graph,
    /// Inputs: params..., x. Output: logits (batch, classes).
    pub logits: Graph,
    pub names: Vec<String>,
    pub init: Vec<HostTensor>,
}

impl Net {
    pub fn param_indices(&self) -> Vec<usize> {
        (0..self.names.len()).collect()
    }
}

/// SplitMix64 uniform values for initialization.
fn uniform(seed: &mut u64, n: usize, bound: f64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = *seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 11) as f64 / (1u64 << 53) as f64;
            ((2.0 * u - 1.0) * bound) as f32
        })
        .collect()
}

/// Parameter shapes + fan-ins, and a function that emits the logits.
struct Spec {
    params: Vec<(String, Vec<usize>, usize)>,
    image: Vec<usize>,
    classes: usize,
    body: fn(&mut GraphBuilder, &[ValueId], ValueId) -> Result<ValueId>,
    /// Weights (rank 2, fan-in a whole number of blocks) seen through
    /// [`fake_quant`] in this block type: quantization-aware training.
    fake_quant: Option<DType>,
}

/// Quantization-aware training's view of a weight `w` (in, out): the
/// values a `dtype` model would use — each output's column quantized in
/// blocks along the inputs, as `dequant_matmul` stores it (out, in) — with
/// a straight-through gradient: `w + stop_gradient(dequantize(quantize(wᵀ))ᵀ − w)`,
/// whose forward value is the quantized weight and whose gradient with
/// respect to `w` is the identity.
pub fn fake_quant(b: &mut GraphBuilder, w: ValueId, dtype: DType) -> Result<ValueId> {
    let t =
        |b: &mut GraphBuilder, v| b.op1("permute", &[v], Attrs::new().with("perm", vec![1i64, 0]));
    let wt = t(b, w)?;
    let q = b.op1("quantize", &[wt], Attrs::new().with("dtype", dtype))?;
    let dq = b.op1("dequantize", &[q], Attrs::new().with("dtype", DType::F32))?;
    let back = t(b, dq)?;
    let diff = b.binary("sub", back, w)?;
    let cut = b.unary("stop_gradient", diff)?;
    Ok(b.binary("add", w, cut)?)
}

fn graphs(spec: &Spec, batch: usize, seed: u64) -> Result<Net> {
    let mut s = seed;
    let init = spec
        .params
        .iter()
        .map(|(_, d, fan)| {
            HostTensor::from_slice(
                &uniform(&mut s, d.iter().product(), 1.0 / (*fan as f64).sqrt()),
                d.clone(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let build = |with_loss: bool| -> Result<Graph> {
        let mut b = GraphBuilder::new(if with_loss { "loss" } else { "logits" });
        let mut ps: Vec<ValueId> = spec
            .params
            .iter()
            .map(|(n, d, _)| b.input(n.clone(), TensorType::new(DType::F32, d.clone())))
            .collect();
        if let Some(q) = spec.fake_quant {
            for (p, (_, d, _)) in ps.iter_mut().zip(&spec.params) {
                if quantizable(d, q) {
                    *p = fake_quant(&mut b, *p, q)?;
                }
            }
        }
        let mut xd = vec![batch];
        xd.extend(&spec.image);
        let x = b.input("x", TensorType::new(DType::F32, xd));
        let logits = (spec.body)(&mut b, &ps, x)?;
        if !with_loss {
            return Ok(b.finish(&[logits])?);
        }
        let y = b.input("y", TensorType::new(DType::F32, vec![batch, spec.classes]));
        let lp = b.op1("log_softmax", &[logits], Attrs::new().with("axis", -1i64))?;
        let t = b.binary("mul", lp, y)?;
        let s = b.op1("reduce_sum", &[t], Attrs::new())?;
        let l = b.scalar(-1.0 / batch as f64, DType::F32)?;
        let loss = b.binary("mul", s, l)?;
        Ok(b.finish(&[loss])?)
    };
    Ok(Net {
        loss: build(true)?,
        logits: build(false)?,
        names: spec.params.iter().map(|p| p.0.clone()).collect(),
        init,
    })
}

fn dense(
    b: &mut GraphBuilder,
    x: ValueId,
    w: ValueId,
    bias: ValueId,
    relu: bool,
) -> Result<ValueId> {
    let h = b.binary("matmul", x, w)?;
    let h = b.binary("add", h, bias)?;
    Ok(if relu { b.unary("relu", h)? } else { h })
}

fn mlp_body(b: &mut GraphBuilder, p: &[ValueId], x: ValueId) -> Result<ValueId> {
    let layers = p.len() / 2;
    let mut h = x;
    for l in 0..layers {
        h = dense(b, h, p[2 * l], p[2 * l + 1], l + 1 < layers)?;
    }
    Ok(h)
}

/// Whether a parameter of shape `d` is a weight `fake_quant` applies to:
/// rank 2 with a fan-in (rows) that is a whole number of `q` blocks.
pub fn quantizable(d: &[usize], q: DType) -> bool {
    let block = match q.storage() {
        rlx_ir::dtype::Storage::Block { block, .. } => block,
        rlx_ir::dtype::Storage::Plain { .. } => return false,
    };
    d.len() == 2 && d[0].is_multiple_of(block)
}

/// An MLP with ReLU between layers, e.g. `sizes = [784, 512, 512, 10]`.
pub fn mlp(sizes: &[usize], batch: usize, seed: u64) -> Result<Net> {
    mlp_quant(sizes, batch, seed, None)
}

/// [`mlp`] whose weights go through [`fake_quant`] in `fake_quant`'s block
/// type where their fan-in allows (784 inputs do not divide into blocks of
/// 32, so the first layer of the MNIST MLP stays f32): the loss graph for
/// quantization-aware training, and a logits graph that computes what the
/// quantized model does.
pub fn mlp_quant(
    sizes: &[usize],
    batch: usize,
    seed: u64,
    fake_quant: Option<DType>,
) -> Result<Net> {
    let mut params = vec![];
    for (l, w) in sizes.windows(2).enumerate() {
        params.push((format!("fc{}.weight", l + 1), vec![w[0], w[1]], w[0]));
        params.push((format!("fc{}.bias", l + 1), vec![w[1]], w[0]));
    }
    graphs(
        &Spec {
            params,
            image: vec![sizes[0]],
            classes: *sizes.last().unwrap(),
            body: mlp_body,
            fake_quant,
        },
        batch,
        seed,
    )
}

fn conv_relu_pool(
    b: &mut GraphBuilder,
    x: ValueId,
    w: ValueId,
    bias: ValueId,
    pad: i64,
) -> Result<ValueId> {
    let c = b.op1(
        "conv",
        &[x, w, bias],
        Attrs::new().with("pads", vec![pad, pad, pad, pad]),
    )?;
    let r = b.unary("relu", c)?;
    Ok(b.op1(
        "max_pool",
        &[r],
        Attrs::new()
            .with("kernel", vec![2i64, 2])
            .with("strides", vec![2i64, 2]),
    )?)
}

fn lenet_body(b: &mut GraphBuilder, p: &[ValueId], x: ValueId) -> Result<ValueId> {
    let h = conv_relu_pool(b, x, p[0], p[1], 2)?; // (B, 6, 14, 14)
    let h = conv_relu_pool(b, h, p[2], p[3], 0)?; // (B, 16, 5, 5)
    let n = b.shape(h).dims()[0] as i64;
    let h = b.op1("reshape", &[h], Attrs::new().with("shape", vec![n, 400]))?;
    let h = dense(b, h, p[4], p[5], true)?;
    let h = dense(b, h, p[6], p[7], true)?;
    dense(b, h, p[8], p[9], false)
}

/// LeNet-5 for 28×28 inputs: conv 5×5 (6, pad 2) → relu → maxpool 2 →
/// conv 5×5 (16) → relu → maxpool 2 → 400 → 120 → 84 → 10.
pub fn lenet5(batch: usize, seed: u64) -> Result<Net> {
    let p = |n: &str, d: Vec<usize>, fan: usize| (n.to_string(), d, fan);
    let params = vec![
        p("conv1.weight", vec![6, 1, 5, 5], 25),
        p("conv1.bias", vec![6], 25),
        p("conv2.weight", vec![16, 6, 5, 5], 150),
        p("conv2.bias", vec![16], 150),
        p("fc1.weight", vec![400, 120], 400),
        p("fc1.bias", vec![120], 400),
        p("fc2.weight", vec![120, 84], 120),
        p("fc2.bias", vec![84], 120),
        p("fc3.weight", vec![84, 10], 84),
        p("fc3.bias", vec![10], 84),
    ];
    graphs(
        &Spec {
            params,
            image: vec![1, 28, 28],
            classes: 10,
            body: lenet_body,
            fake_quant: None,
        },
        batch,
        seed,
    )
}

/// Accuracy of `logits` (compiled for `batch`) over a data set, in full
/// batches plus one smaller compiled graph for the remainder.
pub fn argmax_rows(logits: &[f32], classes: usize) -> Vec<usize> {
    logits
        .chunks(classes)
        .map(|r| {
            r.iter()
                .enumerate()
                .fold(0, |best, (i, v)| if *v > r[best] { i } else { best })
        })
        .collect()
}
