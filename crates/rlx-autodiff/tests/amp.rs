//! Mixed-precision training: f16 gradients underflow without loss scaling
//! and match the f32 step with it; an overflowing step is skipped with the
//! weights untouched and the scale backed off as PyTorch's GradScaler
//! does. (A short real MNIST run in f16 and bf16: mnist_quick.rs.)
//! The references are the f32 step (itself checked against PyTorch in
//! train_parity.rs) and the closed form of a least-squares gradient.

use rlx_autodiff::{LossScaler, MixedPrecision, Optimizer, TrainStep};
use rlx_ir::{DType, Graph, GraphBuilder, HostTensor, TensorType};

/// loss = c · Σ (x @ w − y)², with w the only parameter.
fn least_squares(c: f64) -> Graph {
    let mut b = GraphBuilder::new("lsq");
    let w = b.input("w", TensorType::new(DType::F32, [4, 1]));
    let x = b.input("x", TensorType::new(DType::F32, [8, 4]));
    let y = b.input("y", TensorType::new(DType::F32, [8, 1]));
    let p = b.binary("matmul", x, w).unwrap();
    let r = b.binary("sub", p, y).unwrap();
    let sq = b.unary("square", r).unwrap();
    let s = b.op1("reduce_sum", &[sq], rlx_ir::Attrs::new()).unwrap();
    let k = b.scalar(c, DType::F32).unwrap();
    let l = b.binary("mul", s, k).unwrap();
    b.finish(&[l]).unwrap()
}

fn data(scale: f64) -> (HostTensor, HostTensor, HostTensor) {
    let x: Vec<f32> = (0..32)
        .map(|i| (((i * 7) % 9) as f32 - 4.0) / 4.0)
        .collect();
    let y: Vec<f32> = (0..8).map(|i| (i as f32 - 3.5) * scale as f32).collect();
    let w = vec![0.5f32, -0.25, 0.75, 0.125];
    (
        HostTensor::from_slice(&w, [4, 1]).unwrap(),
        HostTensor::from_slice(&x, [8, 4]).unwrap(),
        HostTensor::from_slice(&y, [8, 1]).unwrap(),
    )
}

/// The closed-form SGD step: w − lr · 2c · xᵀ(xw − y), in f64.
fn sgd_step(w: &[f32], x: &[f32], y: &[f32], c: f64, lr: f64) -> Vec<f64> {
    let mut g = [0.0f64; 4];
    for r in 0..8 {
        let p: f64 = (0..4).map(|k| x[r * 4 + k] as f64 * w[k] as f64).sum();
        let d = 2.0 * c * (p - y[r] as f64);
        for (k, gk) in g.iter_mut().enumerate() {
            *gk += x[r * 4 + k] as f64 * d;
        }
    }
    (0..4).map(|k| w[k] as f64 - lr * g[k]).collect()
}

fn rel_err(a: &[f32], b: &[f64], w0: &[f32]) -> f64 {
    // Error of the update itself (w1 − w0), relative to its size.
    let num: f64 = a
        .iter()
        .zip(b)
        .zip(w0)
        .map(|((a, b), w)| ((*a as f64 - *w as f64) - (b - *w as f64)).powi(2))
        .sum();
    let den: f64 = b.iter().zip(w0).map(|(b, w)| (b - *w as f64).powi(2)).sum();
    (num / den).sqrt()
}

#[test]
fn loss_scaling_rescues_f16_gradients_that_underflow() {
    let (c, lr) = (1e-9, 1e7);
    let g = least_squares(c);
    let (w, x, y) = data(1.0);
    let (wv, xv, yv) = (
        w.to_vec::<f32>().unwrap(),
        x.to_vec::<f32>().unwrap(),
        y.to_vec::<f32>().unwrap(),
    );
    let want = sgd_step(&wv, &xv, &yv, c, lr);

    let f32_step = |mp: Option<MixedPrecision>| {
        let mut s = match mp {
            None => TrainStep::new(&g, &[0], vec![w.clone()], Optimizer::sgd(lr)).unwrap(),
            Some(mp) => {
                TrainStep::mixed_precision(&g, &[0], vec![w.clone()], Optimizer::sgd(lr), mp)
                    .unwrap()
            }
        };
        s.step(&[x.clone(), y.clone()]).unwrap();
        (s.params()[0].to_vec::<f32>().unwrap(), s)
    };
    let (plain, _) = f32_step(None);
    assert!(rel_err(&plain, &want, &wv) < 1e-5);

    // f16 without scaling: dL/d(xw) ≈ 2e-9 is below f16's smallest
    // subnormal, so the gradient (and the update) is exactly zero.
    let unscaled = MixedPrecision {
        scaler: None,
        ..MixedPrecision::f16()
    };
    let (w16, _) = f32_step(Some(unscaled));
    assert_eq!(w16, wv, "an f16 gradient of 2e-9 must flush to zero");

    // With the default scaler (65536) the same step matches f32 to f16's
    // rounding of x, w and the gradient.
    let (ws, s) = f32_step(Some(MixedPrecision::f16()));
    let e = rel_err(&ws, &want, &wv);
    assert!(e < 5e-3, "scaled f16 step off by {e}");
    assert!(e > 0.0, "no f16 rounding at all: did autocast run?");
    assert!(!s.skipped_last());
    assert_eq!(s.scaler().unwrap().scale, 65536.0);
    // Forward and backward contractions run in f16 in the step graph.
    let sg = &s.layout().graph;
    let f16_matmuls = sg
        .nodes
        .iter()
        .filter(|n| n.op.name() == "matmul" && sg.ty(n.outputs[0]).dtype == DType::F16)
        .count();
    assert!(f16_matmuls >= 2, "{f16_matmuls} f16 matmuls in the step");
}

#[test]
fn an_overflowing_step_is_skipped_and_the_scale_backs_off() {
    // Residuals of order 10: at scale 65536 the f16 gradients overflow.
    let (c, lr) = (1.0, 1e-3);
    let g = least_squares(c);
    let (w, x, y) = data(10.0);
    let (wv, xv, yv) = (
        w.to_vec::<f32>().unwrap(),
        x.to_vec::<f32>().unwrap(),
        y.to_vec::<f32>().unwrap(),
    );
    let mp = MixedPrecision {
        scaler: Some(LossScaler {
            growth_interval: 1000,
            ..LossScaler::default()
        }),
        ..MixedPrecision::f16()
    };
    let mut s = TrainStep::mixed_precision(&g, &[0], vec![w], Optimizer::sgd(lr), mp).unwrap();
    // The largest gradient in the f16 backward: dL/d(xw) and xᵀ of it.
    let mut gmax = 0.0f64;
    let mut gw = [0.0f64; 4];
    for r in 0..8 {
        let p: f64 = (0..4).map(|k| xv[r * 4 + k] as f64 * wv[k] as f64).sum();
        let d = 2.0 * c * (p - yv[r] as f64);
        gmax = gmax.max(d.abs());
        for (k, gk) in gw.iter_mut().enumerate() {
            *gk += xv[r * 4 + k] as f64 * d;
        }
    }
    for v in gw {
        gmax = gmax.max(v.abs());
    }
    // Steps skipped until scale · gmax fits in f16 (max 65504).
    let mut scale = 65536.0;
    let mut expect_skips = 0;
    while scale * gmax > 65504.0 {
        scale /= 2.0;
        expect_skips += 1;
    }
    assert!(
        scale * gmax < 0.9 * 65504.0,
        "test data too close to the f16 limit"
    );
    eprintln!("expecting {expect_skips} skipped steps, then scale {scale}");
    assert!(expect_skips >= 2);
    for k in 0..expect_skips {
        s.step(&[x.clone(), y.clone()]).unwrap();
        assert!(s.skipped_last(), "step {k} should overflow");
        assert_eq!(
            s.params()[0].to_vec::<f32>().unwrap(),
            wv,
            "skipped step moved w"
        );
    }
    s.step(&[x.clone(), y.clone()]).unwrap();
    assert!(
        !s.skipped_last(),
        "scale {} should fit",
        s.scaler().unwrap().scale
    );
    let st = s.scaler().unwrap();
    assert_eq!(st.skipped, expect_skips as u64);
    assert_eq!(st.scale, scale);
    let want = sgd_step(&wv, &xv, &yv, c, lr);
    let e = rel_err(&s.params()[0].to_vec::<f32>().unwrap(), &want, &wv);
    assert!(e < 5e-3, "applied f16 step off by {e}");
}

/// A checkpoint carries the loss scaler: a run resumed from it continues
/// with the backed-off scale and takes the same steps, skipped or not, as
/// the run that never stopped.
#[test]
fn a_checkpoint_resumes_the_loss_scale() {
    let g = least_squares(1.0);
    let (w, x, y) = data(10.0);
    let mp = MixedPrecision {
        scaler: Some(LossScaler {
            growth_interval: 3,
            ..LossScaler::default()
        }),
        ..MixedPrecision::f16()
    };
    let new = || {
        TrainStep::mixed_precision(&g, &[0], vec![w.clone()], Optimizer::sgd(1e-3), mp.clone())
            .unwrap()
    };
    let mut a = new();
    for _ in 0..8 {
        a.step(&[x.clone(), y.clone()]).unwrap();
    }
    let st = *a.scaler().unwrap();
    assert!(st.skipped >= 2 && st.scale < 65536.0, "{st:?}");
    let dir = std::env::temp_dir().join(format!("rlx-amp-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("step.safetensors");
    a.save_checkpoint(&path).unwrap();
    let mut b = new();
    assert_eq!(b.scaler().unwrap().scale, 65536.0);
    b.load_checkpoint(&path).unwrap();
    assert_eq!(*b.scaler().unwrap(), st);
    assert_eq!(b.steps(), a.steps());
    for _ in 0..4 {
        a.step(&[x.clone(), y.clone()]).unwrap();
        b.step(&[x.clone(), y.clone()]).unwrap();
        assert_eq!(a.scaler(), b.scaler());
        assert_eq!(a.params()[0], b.params()[0]);
        assert_eq!(a.skipped_last(), b.skipped_last());
    }
    // Without the scaler's state the resumed run would differ: its first
    // step at the initial scale overflows.
    let mut fresh = new();
    fresh.step(&[x.clone(), y.clone()]).unwrap();
    assert!(fresh.skipped_last());
    // A bad scale in the metadata is a typed error naming the key.
    let t = a.params()[0].clone();
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("loss_scale".to_string(), "-3".to_string());
    let bad = dir.join("bad.safetensors");
    rlx_formats::safetensors::write_file(&bad, &[("w", &t)], &meta).unwrap();
    let e = new().load_checkpoint(&bad).unwrap_err().to_string();
    assert!(e.contains("`loss_scale` = `-3`"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
