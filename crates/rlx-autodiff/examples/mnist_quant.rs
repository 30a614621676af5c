//! Quantization of the MNIST MLP 784-512-512-10: held-out accuracy of the
//! f32 model, of post-training quantization (PTQ: the trained weights
//! quantized, no retraining) and of quantization-aware training (QAT:
//! fine-tuned through `fake_quant`, straight-through gradients) to int8
//! (GGUF Q8_0) and int4 (Q4_0), blocks of 32 along each output's inputs.
//! The first layer's 784 inputs are not a whole number of blocks, so it
//! stays f32 (as is common for first layers); the table says so.
//!
//! cargo run --release -p rlx-autodiff --example mnist_quant -- [--epochs N] [--fashion] [--out DIR]
//!
//! Writes `DIR/<dataset>-mlp-quant.md` (default benches/results).

#[path = "common/mod.rs"]
#[allow(dead_code)] // the training loop with logs is the other examples'
mod common;

use rlx::quant::{Calibrator, Granularity, Plan, Range, Scheme};
use rlx_autodiff::nets::{mlp_quant, quantizable};
use rlx_autodiff::{run_epoch, Optimizer, TrainStep};
use rlx_ir::DType;
use std::fmt::Write as _;

const SIZES: [usize; 4] = [784, 512, 512, 10];

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Held-out predictions of `params` through the logits graph of `q`
/// (rewritten by `plan`, integer dense layers, when given), and the
/// accuracy.
fn predict(
    q: Option<DType>,
    params: &[rlx::HostTensor],
    test: &rlx_data::Dataset,
    plan: Option<&Plan>,
) -> Res<(Vec<usize>, f64)> {
    let eb = 500;
    let mut preds = Vec::with_capacity(test.len());
    let mut right = 0;
    let order: Vec<usize> = (0..test.len()).collect();
    for idx in order.chunks(eb) {
        let mut g = mlp_quant(&SIZES, idx.len(), 0, q)?.logits;
        let mut params = params.to_vec();
        if let Some(p) = plan {
            g = p.apply(&g)?;
            for &k in p.sites.keys() {
                params[k] = p.weight(k).ok_or("no weight")??;
            }
        }
        let exe = rlx::compile(&g, rlx::Device::Cpu)?;
        let batch = test.batch(idx, false, 10);
        let mut ins: Vec<&rlx::HostTensor> = params.iter().collect();
        ins.push(&batch.images);
        let out = exe.run_refs(&ins)?;
        let p = rlx_autodiff::nets::argmax_rows(&out[0].to_vec::<f32>()?, 10);
        right += p
            .iter()
            .zip(&batch.labels)
            .filter(|(p, l)| **p == **l as usize)
            .count();
        preds.extend(p);
    }
    Ok((preds, right as f64 / test.len() as f64))
}

fn train(
    a: &common::Args,
    q: Option<DType>,
    init: Vec<rlx::HostTensor>,
    epochs: usize,
    lr: f64,
    data: &rlx_data::Dataset,
) -> Res<Vec<rlx::HostTensor>> {
    let net = mlp_quant(&SIZES, a.batch, a.seed, q)?;
    let mut step = TrainStep::new(&net.loss, &net.param_indices(), init, Optimizer::adam(lr))?;
    let steps = data.len() / a.batch;
    for e in 0..epochs {
        let order = data.permutation(a.seed * 1000 + e as u64);
        let batches = data
            .batches(&order, a.batch, false, 10)
            .map(|b| (vec![b.images, b.onehot], a.batch));
        let label = format!(
            "{} epoch {}/{epochs}",
            q.map_or("f32".into(), |d| format!("QAT {d}")),
            e + 1
        );
        let st = run_epoch(&mut step, &label, steps, batches, false)?;
        eprintln!("{label}: loss {:.4}", st.mean_loss());
    }
    Ok(step.params().to_vec())
}

fn main() -> Res<()> {
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let a = common::Args::parse("mlp-quant");
    let (train_set, test) = common::load(&a)?;
    let init = rlx_autodiff::nets::mlp(&SIZES, a.batch, a.seed)?.init;
    let f32_params = train(&a, None, init, a.epochs, a.lr, &train_set)?;
    let (base, acc_f32) = predict(None, &f32_params, &test, None)?;
    let qat_epochs = (a.epochs / 3).max(1);
    let changed = |p: &[usize]| p.iter().zip(&base).filter(|(a, b)| a != b).count();

    let mut rows = vec![("f32".to_string(), acc_f32, 0usize)];
    for q in [DType::Q8_0, DType::Q4_0] {
        let (p, ptq) = predict(Some(q), &f32_params, &test, None)?;
        rows.push((format!("PTQ {q}"), ptq, changed(&p)));
        let qat_params = train(
            &a,
            Some(q),
            f32_params.clone(),
            qat_epochs,
            a.lr * 0.3,
            &train_set,
        )?;
        let (p, qat) = predict(Some(q), &qat_params, &test, None)?;
        rows.push((
            format!("QAT {q} ({qat_epochs} more epochs from the f32 model)"),
            qat,
            changed(&p),
        ));
    }
    // Integer PTQ of all three layers (rlx::quant: per channel needs no
    // block multiple, so the 784-input layer is quantized too), static
    // ranges calibrated on 512 training images.
    let (cal_g, weights) = {
        let n = mlp_quant(&SIZES, 512, 0, None)?;
        let w: Vec<usize> = (0..f32_params.len())
            .filter(|&k| f32_params[k].shape().rank() == 2)
            .collect();
        (n.logits, w)
    };
    let cal_batch = train_set.batch(&(0..512).collect::<Vec<_>>(), false, 10);
    let mut cal_ins: Vec<&rlx::HostTensor> = f32_params.iter().collect();
    cal_ins.push(&cal_batch.images);
    let mut cal = Calibrator::new(weights.iter().copied());
    cal.observe(&cal_g, &cal_ins, None)?;
    let mut int_bytes = vec![];
    for scheme in [
        Scheme::static_int8(Range::MinMax, Granularity::Channel),
        Scheme::static_int8(Range::Percentile(99.99), Granularity::Channel),
        Scheme::static_int8(Range::Mse, Granularity::Tensor),
        Scheme::weight_only(8, Granularity::Channel),
        Scheme::weight_only(4, Granularity::Channel),
        Scheme::weight_only(4, Granularity::Group(16)),
    ] {
        let plan = cal.plan(&cal_g, &scheme, &cal_ins)?;
        let (p, acc) = predict(None, &f32_params, &test, Some(&plan))?;
        let biases: usize = (0..f32_params.len())
            .filter(|k| !plan.sites.contains_key(k))
            .map(|k| 4 * f32_params[k].numel())
            .sum();
        int_bytes.push((scheme.to_string(), plan.weight_bytes() + biases));
        rows.push((format!("PTQ {scheme}, all layers"), acc, changed(&p)));
    }
    // The same extra epochs in f32, so QAT's gain over PTQ is not just more training.
    let more = train(
        &a,
        None,
        f32_params.clone(),
        qat_epochs,
        a.lr * 0.3,
        &train_set,
    )?;
    let (p, acc_more) = predict(None, &more, &test, None)?;
    rows.push((
        format!("f32 ({qat_epochs} more epochs, for comparison)"),
        acc_more,
        changed(&p),
    ));
    // Weight bytes: quantized layers in their block type, the rest f32.
    let net = rlx_autodiff::nets::mlp(&SIZES, 1, 0)?;
    let bytes = |q: Option<DType>| -> u64 {
        net.init
            .iter()
            .map(|t| match q {
                Some(q) if quantizable(t.shape().dims(), q) => {
                    rlx_ir::limits::tensor_bytes(q, t.shape().dims()).unwrap_or(0)
                }
                _ => 4 * t.numel() as u64,
            })
            .sum()
    };
    let mut md = String::new();
    writeln!(
        md,
        "# MNIST MLP {SIZES:?}: quantization ({})\n",
        a.dataset()
    )?;
    writeln!(
        md,
        "Command: `{}` (rlx CPU; {} train / {} held-out examples; seed {}; adam lr {}, batch {}, {} f32 epochs).\n",
        std::env::args().collect::<Vec<_>>().join(" "),
        train_set.len(),
        test.len(),
        a.seed,
        a.lr,
        a.batch,
        a.epochs
    )?;
    writeln!(md, "GGUF rows (q8_0, q4_0): layers 2 and 3 quantized (blocks of 32 along the inputs); layer 1 (784 inputs) stays f32. `rlx::quant` rows (int8/int4 on integer grids, ONNX Runtime's conventions): all three layers; static ranges calibrated on 512 training images. Weight bytes as held (int4: one value per byte) plus scales and f32 biases.\n")?;
    writeln!(
        md,
        "| model | held-out accuracy | predictions changed vs f32 | weight bytes |"
    )?;
    writeln!(md, "|---|---|---|---|")?;
    for (name, acc, changed) in &mut rows {
        if let Some((_, b)) = int_bytes.iter().find(|(s, _)| name.contains(s.as_str())) {
            writeln!(md, "| {name} | {:.2}% | {changed} | {b} |", 100.0 * *acc)?;
            continue;
        }
        let q = if name.contains("q8_0") {
            Some(DType::Q8_0)
        } else if name.contains("q4_0") {
            Some(DType::Q4_0)
        } else {
            None
        };
        writeln!(
            md,
            "| {name} | {:.2}% | {changed} | {} |",
            100.0 * *acc,
            bytes(q)
        )?;
    }
    std::fs::create_dir_all(&a.out)?;
    let path = a.out.join(format!("{}-mlp-quant.md", a.dataset()));
    std::fs::write(&path, &md)?;
    println!("{md}");
    eprintln!("wrote {}", path.display());
    Ok(())
}
