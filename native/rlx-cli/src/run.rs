//! `rlx run`: compile a graph file for a device, feed it .npy inputs, and
//! write or summarize its outputs. Imported formats come through the same
//! command: ONNX (`.onnx`) and RTen (`.rten`) models.

use crate::device::{self, Env};
use crate::out::{CliError, CliResult, Out};
use clap::Args;
use rlx::{DType, HostTensor};
use rlx_formats::npy;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

pub const AFTER_HELP: &str = "\
Each graph input needs a value: --input NAME=FILE.npy (NumPy's numpy.save
format, C order, the input's dtype and shape), or --random SEED to fill the
inputs not given with seeded random values. Outputs are written as
DIR/NAME.npy with --output-dir, else summarized (shape, min, max, mean).

An ONNX model (.onnx, or .rten) is imported first (rlx-onnx): its symbolic
dimensions need --dim NAME=N, or the input's whole shape: from its
--input file, or --shape NAME=D0,D1,...; an op it cannot map is listed,
every one, with exit code 4.

Examples:
  rlx run docs/examples/attention_block.mir --random 0
  rlx run model.onnx --dim batch=1 --random 0 --report
  rlx run yolov8n.onnx --input images=img.npy --output-dir out/
  rlx run yolov8n.rten --shape images=1,3,320,320 --random 0
  rlx run model.mir --input x=x.npy --output-dir out/ --device vulkan
  rlx run model.json --input x=x.npy --report --runs 20";

#[derive(Args)]
pub struct RunArgs {
    /// The model: a MIR file (text, or JSON ending in .json), or an ONNX
    /// model (.onnx, .rten).
    model: PathBuf,
    #[command(flatten)]
    shape: crate::model::ShapeArgs,
    /// An input value: NAME=FILE.npy (repeatable).
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Fill inputs not given with seeded random values.
    #[arg(long, value_name = "SEED")]
    random: Option<u64>,
    /// Write each output as DIR/NAME.npy.
    #[arg(long, short = 'o', value_name = "DIR")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    run: crate::RunFlags,
    #[command(flatten)]
    amp: crate::AmpFlag,
    /// Print the full dispatch report (a one-line summary is always printed).
    #[arg(long)]
    report: bool,
    /// After the timed runs, one more run timing each kernel on the device
    /// (its backend says how), hottest first.
    #[arg(long)]
    profile: bool,
    /// Run this many times and print the latency (p50, min).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    runs: u32,
}

/// One line: where the nodes run and how.
pub fn dispatch_summary(m: &rlx::Compiled) -> String {
    use rlx::DispatchPath as P;
    let r = m.dispatch_report();
    format!(
        "dispatch on {}: {} nodes — {} native, {} common-ir, {} rewritten; {} kernels, {} transfers",
        r.device,
        r.nodes.len(),
        r.count(P::Native),
        r.count(P::CommonIr),
        r.count(P::Rewritten),
        m.kernel_count(),
        r.transfers.len()
    )
}

fn input_name(g: &rlx::Graph, i: usize) -> String {
    g.values[g.inputs[i].index()]
        .name
        .clone()
        .unwrap_or_else(|| format!("input{i}"))
}

/// Seeded values for an input of type `ty`: floats in [-1, 1), integers
/// in [0, 10), booleans half true.
fn random_tensor(ty: &rlx::TensorType, seed: u64) -> CliResult<HostTensor> {
    let n = ty.shape.numel();
    rlx::ir::limits()
        .check_tensor_bytes("random input", (n as u64).saturating_mul(8))
        .map_err(|e| CliError::new(crate::out::Exit::Limit, e.to_string()))?;
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let dims = ty.shape.clone();
    let t = if ty.dtype.is_float() {
        let v: Vec<f64> = (0..n)
            .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            .collect();
        HostTensor::from_f64(ty.dtype, dims, v)
    } else if ty.dtype == DType::Bool {
        HostTensor::from_slice(&(0..n).map(|_| next() & 1 == 1).collect::<Vec<_>>(), dims)
    } else {
        HostTensor::from_i64(
            ty.dtype,
            dims,
            (0..n).map(|_| (next() % 10) as i64).collect(),
        )
    };
    t.map_err(|e| CliError::input(format!("random input of type {ty}: {e}")))
}

/// The --input files: (name, file, value), read and checked against the
/// size limit.
fn read_inputs(specs: &[String]) -> CliResult<Vec<(String, String, HostTensor)>> {
    let mut out = Vec::new();
    for spec in specs {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| CliError::usage(format!("--input {spec}: expected NAME=FILE.npy")))?;
        let path = PathBuf::from(file);
        let max = rlx::ir::limits().max_tensor_bytes + 4096;
        let len = std::fs::metadata(&path)
            .map_err(|e| CliError::input(format!("{file}: {e}")))?
            .len();
        if len > max {
            return Err(CliError::new(
                crate::out::Exit::Limit,
                format!("{file}: {len} bytes exceeds the limit max_tensor_bytes (raise it with RLX_MAX_TENSOR_BYTES)"),
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| CliError::input(format!("{file}: {e}")))?;
        let t = npy::read(file, &bytes).map_err(|e| CliError::input(e.to_string()))?;
        out.push((name.to_string(), file.to_string(), t));
    }
    Ok(out)
}

pub fn run(a: RunArgs, env: &Env) -> CliResult {
    let dev = device::resolve(&a.run, env)?;
    // An imported model takes its input shapes from the files, so they are
    // read first; a MIR graph is parsed first, so that a name it does not
    // have is reported before any file is read.
    let (g, files) = if crate::model::is_onnx(&a.model) {
        let files = read_inputs(&a.inputs)?;
        let given: Vec<(String, Vec<usize>)> = files
            .iter()
            .map(|(n, _, t)| (n.clone(), t.shape().dims().to_vec()))
            .collect();
        (crate::model::load(&a.model, &a.shape, &given)?, files)
    } else {
        let g = crate::model::load(&a.model, &a.shape, &[])?;
        for spec in &a.inputs {
            // (A spec without `=` is reported by read_inputs.)
            let Some((name, _)) = spec.split_once('=') else {
                continue;
            };
            if !(0..g.inputs.len()).any(|i| input_name(&g, i) == name) {
                let names: Vec<_> = (0..g.inputs.len()).map(|i| input_name(&g, i)).collect();
                return Err(CliError::usage(format!(
                    "--input {name}: the graph has no input `{name}` (its inputs: {})",
                    names.join(", ")
                )));
            }
        }
        (g, read_inputs(&a.inputs)?)
    };

    // Inputs by name, checked against the graph's declared types.
    let mut given: Vec<Option<HostTensor>> = vec![None; g.inputs.len()];
    for (name, file, t) in files {
        let i = (0..g.inputs.len())
            .find(|&i| input_name(&g, i) == name)
            .ok_or_else(|| {
                let names: Vec<_> = (0..g.inputs.len()).map(|i| input_name(&g, i)).collect();
                CliError::usage(format!(
                    "--input {name}: the graph has no input `{name}` (its inputs: {})",
                    names.join(", ")
                ))
            })?;
        let want = g.ty(g.inputs[i]);
        if t.dtype() != want.dtype || t.shape() != &want.shape {
            return Err(CliError::input(format!(
                "--input {name}={file}: the array is {}{}, the graph's input `{name}` is {want}; \
                 save it with arr.astype(...).reshape(...)",
                t.dtype(),
                t.shape()
            )));
        }
        given[i] = Some(t);
    }
    let mut inputs = Vec::with_capacity(given.len());
    let mut missing = Vec::new();
    for (i, t) in given.into_iter().enumerate() {
        match (t, a.random) {
            (Some(t), _) => inputs.push(t),
            (None, Some(seed)) => inputs.push(random_tensor(
                g.ty(g.inputs[i]),
                seed.wrapping_add(i as u64),
            )?),
            (None, None) => missing.push(format!("{}: {}", input_name(&g, i), g.ty(g.inputs[i]))),
        }
    }
    if !missing.is_empty() {
        return Err(CliError::usage(format!(
            "no value for the graph's input(s) {}; give --input NAME=FILE.npy, or --random SEED",
            missing.join(", ")
        )));
    }

    let t0 = Instant::now();
    // A spinner while it compiles (drawn only on a terminal).
    let spin = indicatif::ProgressBar::new_spinner().with_message(format!("compiling for {dev}"));
    spin.enable_steady_tick(std::time::Duration::from_millis(100));
    let opts = rlx::CompileOptions {
        amp: a.amp.amp(),
        ..Default::default()
    };
    let m = rlx::compile_with(&g, dev, &opts);
    spin.finish_and_clear();
    let m = m?;
    eprintln!(
        "{}: compiled in {:.1} ms",
        a.model.display(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    eprintln!("{}", dispatch_summary(&m));
    if a.report {
        eprintln!("{}", m.dispatch_report());
    }
    let mut times = Vec::with_capacity(a.runs as usize);
    let mut outs = Vec::new();
    for _ in 0..a.runs {
        let t = Instant::now();
        outs = m.run(&inputs)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    eprintln!(
        "ran {} time(s): p50 {:.3} ms, min {:.3} ms",
        a.runs,
        times[times.len() / 2],
        times[0]
    );
    if a.profile {
        // Through the backend trait: any device times its own kernels.
        let refs: Vec<&rlx::HostTensor> = inputs.iter().collect();
        eprintln!("{}", m.profile(&refs)?);
    }
    write_outputs(&g, &outs, a.output_dir.as_ref())
}

fn output_name(g: &rlx::Graph, i: usize) -> String {
    g.values[g.outputs[i].index()]
        .name
        .clone()
        .unwrap_or_else(|| format!("output{i}"))
}

fn write_outputs(g: &rlx::Graph, outs: &[HostTensor], dir: Option<&PathBuf>) -> CliResult {
    let mut o = Out::new();
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::failure(format!("{}: {e}", dir.display())))?;
    }
    for (i, t) in outs.iter().enumerate() {
        let name = output_name(g, i);
        match dir {
            Some(dir) => {
                // A value name may hold characters a file name cannot.
                let safe: String = name
                    .chars()
                    .map(|c| {
                        if c.is_alphanumeric() || "-_.".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                let path = dir.join(format!("{safe}.npy"));
                let bytes = npy::write(&name, t).map_err(|e| CliError::failure(e.to_string()))?;
                std::fs::write(&path, bytes)
                    .map_err(|e| CliError::failure(format!("{}: {e}", path.display())))?;
                writeln!(
                    o,
                    "{name}: {}{} -> {}",
                    t.dtype(),
                    t.shape(),
                    path.display()
                )?;
            }
            None => writeln!(o, "{name}: {}{}  {}", t.dtype(), t.shape(), summary(t))?,
        }
    }
    Ok(o.flush()?)
}

/// min / max / mean and the first values, or why there are none.
fn summary(t: &HostTensor) -> String {
    let Ok(v) = t.to_f64_vec() else {
        return "(packed data)".into();
    };
    if v.is_empty() {
        return "(empty)".into();
    }
    let nan = v.iter().filter(|x| x.is_nan()).count();
    let finite = v.iter().copied().filter(|x| !x.is_nan());
    let (mut lo, mut hi, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    for x in finite {
        lo = lo.min(x);
        hi = hi.max(x);
        sum += x;
    }
    let head: Vec<String> = v.iter().take(6).map(|x| format!("{x:.6}")).collect();
    let mut s = format!(
        "min {lo:.6}  max {hi:.6}  mean {:.6}  [{}{}]",
        sum / (v.len() - nan).max(1) as f64,
        head.join(", "),
        if v.len() > 6 { ", ..." } else { "" }
    );
    if nan > 0 {
        s.push_str(&format!("  ({nan} NaN)"));
    }
    s
}

impl RunArgs {
    /// `--threads`, which wins over RLX_NUM_THREADS.
    pub fn threads(&self) -> Option<usize> {
        self.run.threads
    }
}
