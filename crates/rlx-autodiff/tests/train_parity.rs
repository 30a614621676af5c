//! One optimizer step (two, so momentum/moment state is exercised) of a
//! small MLP against PyTorch: the loss of each step and every parameter
//! after it. Vectors: tests/vectors/training/mlp_steps.json, made by
//! tests/vectors/training/generate.py (torch CPU, float32).

use rlx_autodiff::{nets, Optimizer, TrainStep};
use rlx_ir::HostTensor;

fn vectors() -> serde_json::Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/training/mlp_steps.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).expect("training vectors")).unwrap()
}
fn f32s(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn run(name: &str, opt: Optimizer) {
    let v = vectors();
    let sizes: Vec<usize> = v["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let batch = v["batch"].as_u64().unwrap() as usize;
    let net = nets::mlp(&sizes, batch, 0).unwrap();
    let init: Vec<HostTensor> = v["init"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&net.init)
        .map(|(d, t)| HostTensor::from_slice(&f32s(d), t.shape().clone()).unwrap())
        .collect();
    let mut step = TrainStep::new(&net.loss, &net.param_indices(), init, opt).unwrap();
    for (k, want) in v["runs"][name].as_array().unwrap().iter().enumerate() {
        let x = HostTensor::from_slice(&f32s(&v["x"][k]), vec![batch, sizes[0]]).unwrap();
        let y =
            HostTensor::from_slice(&f32s(&v["y"][k]), vec![batch, *sizes.last().unwrap()]).unwrap();
        let loss = step.step(&[x, y]).unwrap();
        let wl = want["loss"].as_f64().unwrap();
        assert!(
            (loss - wl).abs() <= 1e-5 * (1.0 + wl.abs()),
            "{name} step {k}: loss {loss} vs torch {wl}"
        );
        for (i, (p, w)) in step
            .params()
            .iter()
            .zip(want["params"].as_array().unwrap())
            .enumerate()
        {
            let got = p.to_vec::<f32>().unwrap();
            for (j, (a, b)) in got.iter().zip(f32s(w)).enumerate() {
                assert!(
                    (a - b).abs() <= 2e-6 + 1e-5 * b.abs(),
                    "{name} step {k} param {i}[{j}]: {a} vs torch {b}"
                );
            }
        }
    }
}

#[test]
fn sgd_momentum_weight_decay_matches_pytorch() {
    run(
        "sgd",
        Optimizer::Sgd {
            lr: 0.1,
            momentum: 0.9,
            weight_decay: 0.01,
        },
    );
}
#[test]
fn adam_matches_pytorch() {
    run(
        "adam",
        Optimizer::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        },
    );
}
#[test]
fn adamw_matches_pytorch() {
    run(
        "adamw",
        Optimizer::AdamW {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.1,
        },
    );
}

/// A checkpoint restores params, optimizer state and the step count, so
/// training continues exactly as without the save/load.
#[test]
fn checkpoint_round_trip_continues_identically() {
    let v = vectors();
    let batch = 4;
    let net = nets::mlp(&[6, 5, 4, 3], batch, 7).unwrap();
    let x = HostTensor::from_slice(&f32s(&v["x"][0]), vec![batch, 6]).unwrap();
    let y = HostTensor::from_slice(&f32s(&v["y"][0]), vec![batch, 3]).unwrap();
    let mut a = TrainStep::new(
        &net.loss,
        &net.param_indices(),
        net.init.clone(),
        Optimizer::adam(0.01),
    )
    .unwrap();
    a.step(&[x.clone(), y.clone()]).unwrap();
    let dir = std::env::temp_dir().join(format!("rlx-ad-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.safetensors");
    a.save_checkpoint(&path).unwrap();
    let mut b = TrainStep::new(
        &net.loss,
        &net.param_indices(),
        net.init.clone(),
        Optimizer::adam(0.01),
    )
    .unwrap();
    b.load_checkpoint(&path).unwrap();
    assert_eq!(b.steps(), 1);
    let la = a.step(&[x.clone(), y.clone()]).unwrap();
    let lb = b.step(&[x, y]).unwrap();
    assert_eq!(la, lb);
    for (p, q) in a.params().iter().zip(b.params()) {
        assert_eq!(p.to_vec::<f32>().unwrap(), q.to_vec::<f32>().unwrap());
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A schedule change recompiles the step but keeps weights, optimizer state
/// and the step count: torch's second Adam step, taken after switching the
/// learning rate away and back, is matched exactly.
#[test]
fn learning_rate_change_keeps_state() {
    let v = vectors();
    let batch = 4;
    let net = nets::mlp(&[6, 5, 4, 3], batch, 0).unwrap();
    let init: Vec<HostTensor> = v["init"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&net.init)
        .map(|(d, t)| HostTensor::from_slice(&f32s(d), t.shape().clone()).unwrap())
        .collect();
    let opt = Optimizer::Adam {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
    };
    let mut step = TrainStep::new(&net.loss, &net.param_indices(), init, opt).unwrap();
    let data = |k: usize| {
        vec![
            HostTensor::from_slice(&f32s(&v["x"][k]), vec![batch, 6]).unwrap(),
            HostTensor::from_slice(&f32s(&v["y"][k]), vec![batch, 3]).unwrap(),
        ]
    };
    step.step(&data(0)).unwrap();
    step.set_learning_rate(0.5).unwrap();
    assert_eq!(step.optimizer().learning_rate(), 0.5);
    step.set_learning_rate(0.01).unwrap();
    step.step(&data(1)).unwrap();
    let want = &v["runs"]["adam"][1]["params"];
    for (p, w) in step.params().iter().zip(want.as_array().unwrap()) {
        for (a, b) in p.to_vec::<f32>().unwrap().iter().zip(f32s(w)) {
            assert!((a - b).abs() <= 2e-6 + 1e-5 * b.abs(), "{a} vs torch {b}");
        }
    }
}
