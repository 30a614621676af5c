//! `rlx embed` and `rlx bench minilm`.

use crate::device::{self, Env};
use crate::out::{CliError, CliResult, Exit, Out};
use crate::RunFlags;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rlx::HostTensor;
use rlx_models::{EmbedError, Progress, SentenceEmbedder};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub const EMBED_HELP: &str = "\
The model is all-MiniLM-L6-v2: --model DIR, else RLX_MINILM, else the
model cache (`rlx models fetch all-minilm-l6-v2`).

Examples:
  rlx embed \"A man is eating food.\" \"A man eats bread.\" --cosine
  rlx embed --file sentences.txt --json > vectors.json
  rlx embed --device vulkan \"some text\"";

#[derive(Args)]
pub struct EmbedArgs {
    /// Texts to embed.
    texts: Vec<String>,
    /// Also embed each line of FILE (`-` reads standard input).
    #[arg(long, short = 'f', value_name = "FILE")]
    file: Option<PathBuf>,
    /// Print JSON: [{"text": ..., "embedding": [...]}, ...].
    #[arg(long)]
    json: bool,
    /// Print the cosine-similarity table of the texts (at most 100 texts).
    #[arg(long)]
    cosine: bool,
    /// The model directory (config.json, tokenizer.json, model.safetensors).
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    #[command(flatten)]
    quant: QuantFlags,
    /// Sentences per forward pass.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    batch_size: u32,
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    amp: crate::AmpFlag,
}

#[derive(Subcommand)]
pub enum BenchCmd {
    /// p50 latency of the MiniLM encoder forward (synthetic token ids).
    #[command(
        after_help = "Example:\n  rlx bench minilm --batches 1,8 --runs 50 --device cpu --threads 2"
    )]
    Minilm(BenchArgs),
    /// Prefill and decode tokens/s of a GGUF decoder LLM (llama-bench's pp/tg).
    #[command(
        after_help = "Example:\n  rlx bench llm --model SmolLM2-135M-Instruct.Q4_1.gguf --prompt 512 --gen 128 --threads 2"
    )]
    Llm(crate::llm::BenchLlmArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    /// Batch sizes, comma-separated (each 1..=1024).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    batches: Vec<u32>,
    /// Tokens per sentence (1..=512, MiniLM's positions).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=512))]
    seq: u32,
    /// Timed runs per batch size.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    runs: u32,
    /// Untimed runs first.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    warmup: u32,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// The model directory.
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    #[command(flatten)]
    quant: QuantFlags,
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    amp: crate::AmpFlag,
}

/// Post-training quantization of the dense layers, before anything runs.
#[derive(Args)]
pub struct QuantFlags {
    /// Quantize the dense layers first: a GGUF block type (q8_0, q4_0,
    /// q4_1, q5_0, q5_1, mxfp4; weight-only) or int8 / int4 (integer
    /// grids with float scales; int8 with --calibrate is static int8,
    /// with --dynamic dynamic int8: activations too).
    #[arg(long, value_name = "TYPE")]
    quantize: Option<String>,
    /// Calibration texts, one per line: GPTQ for q4_0|q4_1|q8_0, the
    /// activation ranges for int8.
    #[arg(long, value_name = "FILE", requires = "quantize")]
    calibrate: Option<PathBuf>,
    /// Static int8: how calibration picks each activation range (minmax,
    /// percentile = 99.99, percentile=P, mse).
    #[arg(
        long,
        value_name = "METHOD",
        default_value = "minmax",
        requires = "calibrate"
    )]
    range: String,
    /// int8 without calibration: activations quantized at run time over
    /// each run's own range (ONNX Runtime's dynamic quantization).
    #[arg(long, requires = "quantize", conflicts_with = "calibrate")]
    dynamic: bool,
    /// int8 / int4: weights sharing one scale (tensor, channel, group=N).
    #[arg(
        long,
        value_name = "G",
        default_value = "channel",
        requires = "quantize"
    )]
    granularity: String,
}

/// The calibration texts of `--calibrate FILE` (non-empty lines).
fn calibration_texts(f: &Path) -> CliResult<String> {
    let text = std::fs::read_to_string(f)
        .map_err(|e| CliError::new(Exit::Input, format!("--calibrate {}: {e}", f.display())))?;
    if text.lines().all(|l| l.trim().is_empty()) {
        return Err(CliError::usage(format!(
            "--calibrate {}: no texts (one per line)",
            f.display()
        )));
    }
    Ok(text)
}

/// `--quantize TYPE [--calibrate FILE] [--range M] [--granularity G]`:
/// the dense weights in a block type (GPTQ with calibration texts) or on
/// integer grids (static int8 with calibration texts), sizes printed.
fn quantize(m: &mut SentenceEmbedder, q: &QuantFlags) -> CliResult {
    let Some(ty) = q.quantize.as_deref() else {
        return Ok(());
    };
    let text = q.calibrate.as_deref().map(calibration_texts).transpose()?;
    let lines: Vec<&str> = text
        .as_deref()
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).collect())
        .unwrap_or_default();
    let from = q.calibrate.as_ref().map(|f| f.display().to_string());
    let ty = ty.to_ascii_lowercase();
    if let Some(bits) = ty.strip_prefix("int").and_then(|b| b.parse::<u8>().ok()) {
        use rlx::quant::{Granularity, Range, Scheme};
        let g = Granularity::parse(&q.granularity)
            .map_err(|e| CliError::usage(format!("--granularity: {e}")))?;
        let scheme = match (bits, &from) {
            (8, Some(f)) => {
                let r = Range::parse(&q.range).map_err(|e| CliError::usage(format!("--range: {e}")))?;
                eprintln!("static int8: calibrating {r} ranges on {} texts of {f}", lines.len());
                Scheme::static_int8(r, g)
            }
            (8, None) if q.dynamic => Scheme::dynamic_int8(g),
            (_, None) if q.dynamic => {
                return Err(CliError::usage("--dynamic quantizes int8 activations: use --quantize int8"))
            }
            (8 | 4, None) => Scheme::weight_only(bits, g),
            (4, Some(_)) => {
                return Err(CliError::usage(
                    "--quantize int4 is weight-only: drop --calibrate (or use int8 for static int8, q4_0 for GPTQ)",
                ))
            }
            _ => return Err(CliError::usage(format!("--quantize {ty}: int8 or int4"))),
        };
        let (plan, before, after) = m.quantize(&scheme, &lines).map_err(embed_err)?;
        eprintln!(
            "quantized {} dense layers ({scheme}): {:.1} MB -> {:.1} MB in all",
            plan.sites.len(),
            before as f64 / 1e6,
            after as f64 / 1e6
        );
        return Ok(());
    }
    let d: rlx::DType = ty.parse().map_err(|_| {
        CliError::usage(format!(
            "--quantize {ty}: not int8, int4 or a block type (q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4)"
        ))
    })?;
    let (before, after) = match &from {
        None => m.quantize_weights(d).map_err(embed_err)?,
        Some(f) => {
            eprintln!("GPTQ: calibrating on {} texts of {f}", lines.len());
            m.quantize_weights_gptq(d, &lines).map_err(embed_err)?
        }
    };
    eprintln!(
        "quantized the dense weights to {d}: {:.1} MB -> {:.1} MB in all",
        before as f64 / 1e6,
        after as f64 / 1e6
    );
    Ok(())
}

fn embed_err(e: EmbedError) -> CliError {
    let msg = e.to_string();
    let exit = if msg.contains("exceeds the limit") {
        Exit::Limit
    } else if matches!(e, EmbedError::Model(_)) {
        Exit::Failure
    } else {
        Exit::Input
    };
    CliError::new(exit, msg)
}

/// A progress bar on stderr while weights load (hidden when stderr is not
/// a terminal), then one line with what was loaded.
fn load(dir: &std::path::Path) -> CliResult<SentenceEmbedder> {
    let bar = crate::out::load_bar();
    let start = Instant::now();
    let m = SentenceEmbedder::load(dir, |p| match p {
        Progress::Reading(f) => bar.set_message(f),
        Progress::Weights { done, total } => {
            bar.set_message("weights");
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
        Progress::Ready { parameters, bytes } => {
            bar.finish_and_clear();
            eprintln!(
                "loaded {:.1}M parameters ({:.1} MB) from {} in {:.2} s",
                parameters as f64 / 1e6,
                bytes as f64 / 1e6,
                dir.display(),
                start.elapsed().as_secs_f64()
            );
        }
    })
    .map_err(embed_err)?;
    bar.finish_and_clear();
    Ok(m)
}

fn read_lines(file: &PathBuf, texts: &mut Vec<String>) -> CliResult {
    let shown = file.display().to_string();
    let reader: Box<dyn BufRead> = if shown == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file).map_err(|e| CliError::input(format!("{shown}: {e}")))?;
        Box::new(std::io::BufReader::new(f))
    };
    // Bounded like every file read whole (a line longer than the bound, or
    // more lines than it, is an error instead of unbounded memory).
    let max = rlx::ir::limits().max_file_bytes;
    let mut total = 0u64;
    for line in reader.lines() {
        let line = line.map_err(|e| CliError::input(format!("{shown}: {e}")))?;
        total += line.len() as u64 + 1;
        if total > max {
            let e = rlx::ir::limits()
                .check_file_bytes(&shown, total)
                .unwrap_err();
            return Err(CliError::new(Exit::Limit, e.to_string()));
        }
        if !line.trim().is_empty() {
            texts.push(line);
        }
    }
    Ok(())
}

pub fn embed(mut a: EmbedArgs, env: &Env) -> CliResult {
    if let Some(f) = a.file.take() {
        read_lines(&f, &mut a.texts)?;
    }
    if a.texts.is_empty() {
        return Err(CliError::usage(
            "rlx embed: give at least one text (or --file FILE); see `rlx embed --help`",
        ));
    }
    if a.cosine && a.texts.len() > 100 {
        return Err(CliError::usage(format!(
            "--cosine prints an N×N table; {} texts would be {} cells (at most 100 texts)",
            a.texts.len(),
            a.texts.len() * a.texts.len()
        )));
    }
    let dev = device::resolve(&a.run, env)?;
    let dir = crate::models::minilm_dir(a.model.as_ref(), env)?;
    let mut m = load(&dir)?;
    quantize(&mut m, &a.quant)?;
    m.set_amp(a.amp.amp());
    m.set_device(dev);
    m.batch_size = a.batch_size as usize;

    let bar = ProgressBar::new(a.texts.len() as u64).with_style(
        ProgressStyle::with_template("embedding [{bar:30}] {pos}/{len} {per_sec}")
            .expect("static template")
            .progress_chars("#>-"),
    );
    let t0 = Instant::now();
    let mut vecs = Vec::with_capacity(a.texts.len());
    // Chunks of a few batches, so the bar moves and memory stays bounded.
    for chunk in a.texts.chunks(m.batch_size * 4) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        vecs.extend(m.embed(&refs).map_err(embed_err)?);
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    eprintln!(
        "embedded {} text(s) on {dev} in {:.1} ms",
        a.texts.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    // How the encoder ran: the first batch's shape (every shape of this
    // encoder dispatches alike; it is in the session's cache already when
    // the texts fit one batch).
    let first: Vec<&str> = a
        .texts
        .iter()
        .take(m.batch_size)
        .map(String::as_str)
        .collect();
    let [ids, _, _] = m.encode(&first).map_err(embed_err)?;
    let (b, s) = (ids.shape().dims()[0], ids.shape().dims()[1]);
    let c = m.compiled(b, s).map_err(embed_err)?;
    eprintln!("{}", crate::run::dispatch_summary(&c));

    let mut o = Out::new();
    if a.json {
        let out: Vec<_> = a
            .texts
            .iter()
            .zip(&vecs)
            .map(|(t, v)| serde_json::json!({"text": t, "embedding": v}))
            .collect();
        serde_json::to_writer(&mut o, &out).map_err(std::io::Error::from)?;
        writeln!(o)?;
    } else {
        for (t, v) in a.texts.iter().zip(&vecs) {
            let head: Vec<String> = v.iter().take(8).map(|x| format!("{x:+.4}")).collect();
            writeln!(o, "{t:?}\n  [{} ... ] ({} dims)", head.join(", "), v.len())?;
        }
    }
    if a.cosine {
        writeln!(o, "cosine similarity:")?;
        for vi in &vecs {
            let row: Vec<String> = vecs
                .iter()
                .map(|vj| format!("{:.3}", SentenceEmbedder::cosine(vi, vj)))
                .collect();
            writeln!(o, "  {}", row.join("  "))?;
        }
    }
    Ok(o.flush()?)
}

/// `rlx bench minilm`: p50 latency of the encoder forward (the same graph
/// the embedder runs, without tokenization) on synthetic ids.
pub fn bench(cmd: BenchCmd, env: &Env) -> CliResult {
    let a = match cmd {
        BenchCmd::Minilm(a) => a,
        BenchCmd::Llm(a) => return crate::llm::bench(a, env),
    };
    let dev = device::resolve(&a.run, env)?;
    let dir = crate::models::minilm_dir(a.model.as_ref(), env)?;
    let mut m = load(&dir)?;
    quantize(&mut m, &a.quant)?;
    let weights = m.weights();
    let seq = a.seq as usize;
    let runs = a.runs as usize;
    let mut rows = Vec::new();
    let bar = ProgressBar::new((a.batches.len() * (runs + a.warmup as usize)) as u64).with_style(
        ProgressStyle::with_template("bench {msg} [{bar:30}] {pos}/{len}")
            .expect("static template")
            .progress_chars("#>-"),
    );
    for &b in &a.batches {
        let b = b as usize;
        bar.set_message(format!("batch {b}"));
        let g = m.graph(b, seq).map_err(embed_err)?;
        let opts = rlx::CompileOptions {
            amp: a.amp.amp(),
            ..Default::default()
        };
        let c = rlx::compile_with(&g, dev, &opts)?;
        // Weights are inputs 3.. and stay fixed, as in the embedder (the
        // peers also prepare their weights once, at session creation).
        c.keep_resident(&(3..3 + weights.len()).collect::<Vec<_>>());
        // Synthetic ids from a fixed seed (an LCG), mask all ones, types zero.
        let mut state = 42u64;
        let ids: Vec<i64> = (0..b * seq)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) as i64 % m.config.vocab_size as i64
            })
            .collect();
        let ids = HostTensor::from_slice(&ids, [b, seq])?;
        let mask = HostTensor::from_slice(&vec![1i64; b * seq], [b, seq])?;
        let types = HostTensor::from_slice(&vec![0i64; b * seq], [b, seq])?;
        let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
        inputs.extend(weights.iter());
        for _ in 0..a.warmup {
            c.run_refs(&inputs)?;
            bar.inc(1);
        }
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            c.run_refs(&inputs)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            bar.inc(1);
        }
        times.sort_by(f64::total_cmp);
        let p50 = times[times.len() / 2];
        let gflops = 2.87 * b as f64 * (seq as f64 / 128.0) / (p50 / 1e3);
        bar.suspend(|| {
            eprintln!(
                "batch {b:>3}  seq {seq}  p50 {p50:>9.2} ms  min {:>9.2} ms  ({gflops:.1} GFLOP/s, {} kernels, {dev})",
                times[0],
                c.kernel_count()
            )
        });
        rows.push(serde_json::json!({"system": format!("rlx-{dev}"), "batch": b, "seq": seq, "p50_ms": p50, "min_ms": times[0], "runs": runs, "kernels": c.kernel_count()}));
    }
    bar.finish_and_clear();
    if rlx_cpu::profile::enabled() {
        eprintln!(
            "\nper-op profile (RLX_PROFILE=1), all batches:\n{}",
            rlx_cpu::profile::report()
        );
    }
    if a.json {
        let mut o = Out::new();
        serde_json::to_writer_pretty(&mut o, &rows).map_err(std::io::Error::from)?;
        writeln!(o)?;
        o.flush()?;
    }
    Ok(())
}

impl EmbedArgs {
    /// `--threads`, which wins over RLX_NUM_THREADS.
    pub fn threads(&self) -> Option<usize> {
        self.run.threads
    }
}

impl BenchArgs {
    /// `--threads`, which wins over RLX_NUM_THREADS.
    pub fn threads(&self) -> Option<usize> {
        self.run.threads
    }
}
