//! A MiniLM-shaped encoder block written with the lazy DSL from primitive
//! ops only — the way an importer or a user would write it — so the compile
//! pipeline has something to fuse: layer norms from mean/sub/rsqrt, softmax
//! from exp/max/sum, gelu from erf, bias adds after matmuls, attention from
//! matmul/scale/mask/softmax/matmul.

use rlx::{DType, Error, Graph, Tensor, Trace};

/// Sizes of the block (MiniLM: hidden 384, 12 heads, ffn 1536).
#[derive(Clone, Copy, Debug)]
pub struct BlockShape {
    pub batch: usize,
    pub seq: usize,
    pub hidden: usize,
    pub heads: usize,
    pub ffn: usize,
}

impl BlockShape {
    pub const MINILM: BlockShape = BlockShape {
        batch: 1,
        seq: 128,
        hidden: 384,
        heads: 12,
        ffn: 1536,
    };
}

fn param(t: &Trace, name: &str, dims: &[usize]) -> Tensor {
    t.input(name, DType::F32, dims.to_vec())
}

fn scalar(t: &Trace, v: f32) -> Result<Tensor, Error> {
    t.tensor(&[v], rlx::Shape::scalar())
}

/// Layer norm over the last axis, spelled out.
fn layer_norm(t: &Trace, x: &Tensor, g: &Tensor, b: &Tensor) -> Result<Tensor, Error> {
    let mean = x.mean(&[-1], true)?;
    let d = x - &mean;
    let var = d.square().mean(&[-1], true)?;
    let r = (var + scalar(t, 1e-12)?).rsqrt();
    Ok(d * r * g + b)
}

/// Softmax over the last axis, spelled out.
fn softmax(x: &Tensor) -> Result<Tensor, Error> {
    let e = (x - &x.max(&[-1], true)?).exp();
    Ok(&e / &e.sum(&[-1], true)?)
}

/// The exact (erf) gelu, spelled out.
fn gelu(t: &Trace, x: &Tensor) -> Result<Tensor, Error> {
    let inner = (x * &scalar(t, std::f32::consts::FRAC_1_SQRT_2)?).erf() + scalar(t, 1.0)?;
    Ok(x * &scalar(t, 0.5)? * inner)
}

/// The graph: inputs `x` (B, S, H), an additive mask (B, 1, 1, S), then the
/// block's weights (already transposed to (in, out)); output (B, S, H).
pub fn encoder_block(s: BlockShape) -> Result<Graph, Error> {
    let t = Trace::new("encoder_block");
    let (b, n, h, nh, f) = (
        s.batch as i64,
        s.seq as i64,
        s.hidden,
        s.heads as i64,
        s.ffn,
    );
    let hd = h as i64 / nh;
    let x = t.input("x", DType::F32, [s.batch, s.seq, h]);
    let mask = t.input("mask", DType::F32, [s.batch, 1, 1, s.seq]);
    let (wq, bq) = (param(&t, "wq", &[h, h]), param(&t, "bq", &[h]));
    let (wk, bk) = (param(&t, "wk", &[h, h]), param(&t, "bk", &[h]));
    let (wv, bv) = (param(&t, "wv", &[h, h]), param(&t, "bv", &[h]));
    let (wo, bo) = (param(&t, "wo", &[h, h]), param(&t, "bo", &[h]));
    let (g1, b1) = (param(&t, "ln1_g", &[h]), param(&t, "ln1_b", &[h]));
    let (w1, c1) = (param(&t, "w1", &[h, f]), param(&t, "c1", &[f]));
    let (w2, c2) = (param(&t, "w2", &[f, h]), param(&t, "c2", &[h]));
    let (g2, b2) = (param(&t, "ln2_g", &[h]), param(&t, "ln2_b", &[h]));

    let heads =
        |p: Tensor| -> Result<Tensor, Error> { p.reshape(&[b, n, nh, hd])?.permute(&[0, 2, 1, 3]) };
    let q = heads(x.matmul(&wq)? + &bq)?;
    let k = heads(x.matmul(&wk)? + &bk)?;
    let v = heads(x.matmul(&wv)? + &bv)?;
    let scores = q.matmul(&k.t()?)? * scalar(&t, 1.0 / (hd as f32).sqrt())? + &mask;
    let ctx = softmax(&scores)?
        .matmul(&v)?
        .permute(&[0, 2, 1, 3])?
        .reshape(&[b, n, h as i64])?;
    let a = layer_norm(&t, &(ctx.matmul(&wo)? + &bo + &x), &g1, &b1)?;
    let ff = gelu(&t, &(a.matmul(&w1)? + &c1))?.matmul(&w2)? + &c2;
    let y = layer_norm(&t, &(ff + &a), &g2, &b2)?;
    t.finish(&[&y])
}

/// The inputs of [`encoder_block`] that are parameters (all but `x` and
/// `mask`): what an inference session keeps resident (`keep_resident`), as
/// the npm package does for a loaded model's weights.
pub fn block_params(g: &Graph) -> Vec<usize> {
    (2..g.inputs.len()).collect()
}

/// Deterministic inputs for [`encoder_block`]: values in [-0.5, 0.5) from
/// a fixed-seed LCG (weights scaled down so activations stay O(1)), and an
/// all-keep additive mask. For benchmarks that need no checkpoint.
pub fn block_inputs(g: &Graph, seed: u64) -> Result<Vec<rlx::HostTensor>, Error> {
    let mut state = seed;
    g.inputs
        .iter()
        .map(|&v| {
            let ty = g.ty(v);
            let name = g.values[v.index()].name.clone().unwrap_or_default();
            let scale = if name.starts_with('w') { 0.1 } else { 1.0 };
            let data: Vec<f32> = (0..ty.shape.numel())
                .map(|_| {
                    if name == "mask" {
                        return 0.0;
                    }
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5) * scale
                })
                .collect();
            Ok(rlx::HostTensor::new(
                ty.dtype,
                ty.shape.clone(),
                data.into(),
            )?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx::{CompileOptions, Device, HostTensor};

    #[test]
    fn fusion_finds_attention_layer_norm_gelu_epilogues_and_folds_and_keeps_results() {
        let s = BlockShape {
            batch: 2,
            seq: 8,
            hidden: 32,
            heads: 4,
            ffn: 64,
        };
        let g = encoder_block(s).unwrap();
        let fused = rlx::compile(&g, Device::Cpu).unwrap();
        let plain = rlx::compile_with(
            &g,
            Device::Cpu,
            &CompileOptions {
                optimize: false,
                ..Default::default()
            },
        )
        .unwrap();
        let ops: Vec<&str> = fused
            .program()
            .graph
            .nodes
            .iter()
            .map(|n| n.op.name())
            .collect();
        for op in [
            "attention_merged",
            "layer_norm",
            "matmul_bias_act",
            "matmul_residual",
        ] {
            assert!(ops.contains(&op), "{op} not fused: {ops:?}");
        }
        assert!(
            fused.kernel_count() * 2 < plain.kernel_count(),
            "{} vs {}",
            fused.kernel_count(),
            plain.kernel_count()
        );
        // Same numbers with and without the optimizer.
        let inputs: Vec<HostTensor> = g
            .input_types()
            .iter()
            .enumerate()
            .map(|(k, ty)| {
                let n = ty.shape.numel();
                let v: Vec<f32> = (0..n)
                    .map(|i| (((i * 31 + k * 7) % 17) as f32 - 8.0) / 40.0)
                    .collect();
                HostTensor::from_slice(&v, ty.shape.clone()).unwrap()
            })
            .collect();
        let a = fused.run(&inputs).unwrap()[0].to_vec::<f32>().unwrap();
        let b = plain.run(&inputs).unwrap()[0].to_vec::<f32>().unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
    }
}
