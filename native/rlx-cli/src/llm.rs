//! `rlx generate` and `rlx chat`: text from a decoder LLM in a GGUF file.

use crate::device::{self, Env};
use crate::out::{CliError, CliResult, Exit};
use crate::RunFlags;
use clap::Args;
use rlx_models::llm::{ChatMessage, GenerateOptions, LlmError, LlmModel, Sampling, Stream};
use rlx_models::Progress;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

pub const GENERATE_HELP: &str = "\
Architectures: llama (SmolLM2, Llama), qwen2, gemma3, read from the GGUF's
metadata; quantized weights stay quantized. Greedy unless --temperature > 0.

Examples:
  rlx generate --model SmolLM2-135M-Instruct.Q4_1.gguf \"The capital of France is\"
  rlx generate --model m.gguf --max-tokens 200 --temperature 0.8 --top-p 0.95 --seed 7 \"Once upon a time\"
  rlx generate --model m.gguf --chat \"Write a haiku about Rust\"
  rlx generate --model m.gguf --json --max-tokens 16 \"def fib(n):\"";

pub const CHAT_HELP: &str = "\
Type a message and press Enter; the reply streams as it is generated.
/reset starts a new conversation, /quit (or end of input) leaves.

Example:
  rlx chat --model SmolLM2-135M-Instruct.Q4_1.gguf --system \"You are terse.\"";

/// The model and sampling flags shared by `generate` and `chat`.
#[derive(Args)]
pub struct LlmFlags {
    /// The GGUF file.
    #[arg(long, short = 'm', value_name = "FILE.gguf")]
    model: PathBuf,
    /// New tokens at most.
    #[arg(long, short = 'n', default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_tokens: u32,
    /// Always the most likely token (the default; overrides --temperature).
    #[arg(long)]
    greedy: bool,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Sample among the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample within the smallest set of probability P.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Drop tokens less likely than P × the most likely.
    #[arg(long, default_value_t = 0.0)]
    min_p: f32,
    /// Penalize tokens already seen (1: off).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f32,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop when the text contains S (repeatable).
    #[arg(long, value_name = "S")]
    stop: Vec<String>,
    /// Context limit in tokens (prompt + generated; default: the model's, at most 4096).
    #[arg(long, value_name = "N")]
    context: Option<usize>,
    /// Round activations to 8 bits per 32 values in the quantized matmuls
    /// (integer dot products, llama.cpp's numerics): faster decoding on CPUs
    /// with AVX-512 VNNI or AVX2, not token-identical to the f32 path. Same
    /// as RLX_CPU_Q8_ACTIVATIONS=1; the dispatch report names the kernel.
    #[arg(long)]
    int8_activations: bool,
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    amp: crate::AmpFlag,
}

impl LlmFlags {
    pub fn threads(&self) -> Option<usize> {
        self.run.threads
    }

    pub fn int8_activations(&self) -> bool {
        self.int8_activations
    }

    fn options(&self) -> GenerateOptions {
        let temperature = if self.greedy { 0.0 } else { self.temperature };
        GenerateOptions {
            max_tokens: self.max_tokens as usize,
            sampling: Sampling {
                temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                seed: self.seed,
            },
            stop: self.stop.clone(),
            stop_at_eos: true,
            add_special: true,
        }
    }
}

#[derive(Args)]
pub struct GenerateArgs {
    /// The prompt.
    prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
    #[arg(long)]
    chat: bool,
    /// Print {"tokens": [generated ids], "text": ..., ...} instead of streaming.
    #[arg(long)]
    json: bool,
    /// After generating, print the decode step's dispatch report (how each
    /// node of the one-token graph runs on the device) to stderr.
    #[arg(long)]
    dispatch: bool,
    #[command(flatten)]
    flags: LlmFlags,
}

#[derive(Args)]
pub struct ChatArgs {
    /// A system message first.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    #[command(flatten)]
    flags: LlmFlags,
}

impl GenerateArgs {
    pub fn threads(&self) -> Option<usize> {
        self.flags.threads()
    }

    pub fn int8_activations(&self) -> bool {
        self.flags.int8_activations()
    }
}
impl ChatArgs {
    pub fn threads(&self) -> Option<usize> {
        self.flags.threads()
    }

    pub fn int8_activations(&self) -> bool {
        self.flags.int8_activations()
    }
}

fn llm_err(e: LlmError) -> CliError {
    let exit = match &e {
        LlmError::Model(_) => Exit::Failure,
        LlmError::Options(_) => Exit::Usage,
        LlmError::Context { .. } => Exit::Limit,
        _ => Exit::Input,
    };
    CliError::new(exit, e.to_string())
}

/// Load with a progress bar on stderr, then one line saying what loaded.
fn load(path: &PathBuf) -> CliResult<LlmModel> {
    let bar = crate::out::load_bar();
    let start = Instant::now();
    let m = LlmModel::open(path, |p| match p {
        Progress::Weights { done, total } => {
            bar.set_message("weights");
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
        Progress::Ready { parameters, bytes } => {
            bar.finish_and_clear();
            eprintln!(
                "loaded {} ({:.1}M parameters, {:.1} MB) in {:.2} s",
                path.display(),
                parameters as f64 / 1e6,
                bytes as f64 / 1e6,
                start.elapsed().as_secs_f64()
            );
        }
        Progress::Reading(_) => {}
    })
    .map_err(llm_err)?;
    bar.finish_and_clear();
    Ok(m)
}

/// Print tokens as they come, then a newline.
fn stream_out(s: &mut Stream) -> CliResult {
    let mut out = std::io::stdout().lock();
    for t in s.by_ref() {
        let t = t.map_err(llm_err)?;
        write!(out, "{}", t.text)?;
        out.flush()?;
    }
    writeln!(out)?;
    Ok(())
}

fn summary(s: &Stream) -> String {
    let t = s.timings();
    let rate = |n: usize, d: std::time::Duration| n as f64 / d.as_secs_f64().max(1e-9);
    format!(
        "prompt {} tokens at {:.1} tok/s, generated {} at {:.1} tok/s (ended by {})",
        t.prompt_tokens,
        rate(t.prompt_tokens, t.prefill),
        t.generated,
        rate(t.generated, t.decode),
        s.finish_reason().map_or("error", |f| f.name())
    )
}

pub fn generate(a: GenerateArgs, env: &Env) -> CliResult {
    let opts = a.flags.options();
    opts.sampling.check().map_err(llm_err)?;
    let dev = device::resolve(&a.flags.run, env)?;
    let model = load(&a.flags.model)?;
    let prompt = if a.chat {
        model
            .chat_prompt(&[ChatMessage::new("user", &a.prompt)], true)
            .map_err(llm_err)?
    } else {
        a.prompt.clone()
    };
    let mut gen = model.generator(dev);
    gen.set_amp(a.flags.amp.amp());
    if let Some(n) = a.flags.context {
        gen.set_context(n).map_err(llm_err)?;
    }
    let mut s = gen.generate(&prompt, &opts).map_err(llm_err)?;
    if !a.json {
        stream_out(&mut s)?;
        eprintln!("{}", summary(&s));
        drop(s);
        return print_dispatch(a.dispatch, &mut gen);
    }
    let mut ids = vec![];
    for t in s.by_ref() {
        ids.push(t.map_err(llm_err)?.id);
    }
    let t = s.timings();
    let v = serde_json::json!({
        "tokens": ids,
        "text": s.text(),
        "finish_reason": s.finish_reason().map(|f| f.name()),
        "prompt_tokens": t.prompt_tokens,
        "prefill_seconds": t.prefill.as_secs_f64(),
        "decode_seconds": t.decode.as_secs_f64(),
    });
    println!("{v}");
    drop(s);
    print_dispatch(a.dispatch, &mut gen)
}

/// The dispatch report of one decode step over the smallest cache.
fn print_dispatch(on: bool, gen: &mut rlx_models::llm::Generator) -> CliResult {
    if on {
        let c = gen.compiled(1, 64.min(gen.context())).map_err(llm_err)?;
        eprintln!(
            "decode step (1 token over 64 cached): {}",
            crate::run::dispatch_summary(&c)
        );
        eprintln!("{}", c.dispatch_report());
        if let Some(a) = c.pass_report().and_then(|p| p.autocast.as_ref()) {
            eprint!("{a}");
        }
    }
    Ok(())
}

pub fn chat(a: ChatArgs, env: &Env) -> CliResult {
    let opts = a.flags.options();
    opts.sampling.check().map_err(llm_err)?;
    let dev = device::resolve(&a.flags.run, env)?;
    let model = load(&a.flags.model)?;
    let mut gen = model.generator(dev);
    gen.set_amp(a.flags.amp.amp());
    if let Some(n) = a.flags.context {
        gen.set_context(n).map_err(llm_err)?;
    }
    let fresh = || -> Vec<ChatMessage> {
        a.system
            .iter()
            .map(|s| ChatMessage::new("system", s))
            .collect()
    };
    let mut messages = fresh();
    eprintln!("chatting with {} — /reset, /quit", model.name);
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        match line.trim() {
            "" => continue,
            "/quit" | "/exit" => return Ok(()),
            "/reset" => {
                messages = fresh();
                continue;
            }
            text => messages.push(ChatMessage::new("user", text)),
        }
        let prompt = model.chat_prompt(&messages, true).map_err(llm_err)?;
        let mut s = gen.generate(&prompt, &opts).map_err(llm_err)?;
        stream_out(&mut s)?;
        eprintln!("[{}]", summary(&s));
        messages.push(ChatMessage::new("assistant", s.text().trim()));
    }
}

#[derive(Args)]
pub struct BenchLlmArgs {
    /// The GGUF file.
    #[arg(long, short = 'm', value_name = "FILE.gguf")]
    model: PathBuf,
    /// Prompt tokens (prefill), as llama-bench's -p.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=32768))]
    prompt: u32,
    /// Generated tokens (decode), as llama-bench's -n.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=32768))]
    gen: u32,
    /// Timed repetitions (after one untimed run that compiles every graph).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Round activations to 8 bits per 32 values in the quantized matmuls
    /// (integer dot products, llama.cpp's numerics): faster decoding on CPUs
    /// with AVX-512 VNNI or AVX2, not token-identical to the f32 path. Same
    /// as RLX_CPU_Q8_ACTIVATIONS=1; the dispatch report names the kernel.
    #[arg(long)]
    int8_activations: bool,
    /// Also time each kernel of one prompt step (up to 256 tokens) and of
    /// the decode step after it, as the device's backend measures them
    /// (printed to stderr; with --json, added as "profile").
    #[arg(long)]
    profile: bool,
    #[command(flatten)]
    run: RunFlags,
    #[command(flatten)]
    amp: crate::AmpFlag,
}

impl BenchLlmArgs {
    pub fn threads(&self) -> Option<usize> {
        self.run.threads
    }

    pub fn int8_activations(&self) -> bool {
        self.int8_activations
    }
}

/// `rlx bench llm`: synthetic prompt ids (a fixed-seed LCG, as llama-bench
/// uses random tokens), greedy decode that ignores EOS; prefill and decode
/// timed separately, mean and standard deviation over the runs.
pub fn bench(a: BenchLlmArgs, env: &Env) -> CliResult {
    let dev = device::resolve(&a.run, env)?;
    let model = load(&a.model)?;
    let mut gen = model.generator(dev);
    gen.set_amp(a.amp.amp());
    let (p, n) = (a.prompt as usize, a.gen as usize);
    let need = p + n;
    if need > gen.context() {
        gen.set_context(need).map_err(llm_err)?;
    }
    let ids = rlx_models::llm::bench_prompt(p, model.config.vocab_size);
    // As llama-bench: pp is the prompt alone (one token sampled from its
    // logits); tg decodes n tokens from a one-token context.
    let mut pp_opts = GenerateOptions::greedy(1);
    pp_opts.stop_at_eos = false;
    let mut tg_opts = GenerateOptions::greedy(n + 1);
    tg_opts.stop_at_eos = false;
    let (mut pp, mut tg) = (vec![], vec![]);
    for run in 0..=a.runs {
        let mut s = gen.generate_ids(&ids, &pp_opts).map_err(llm_err)?;
        for t in s.by_ref() {
            t.map_err(llm_err)?;
        }
        let prefill = p as f64 / s.timings().prefill.as_secs_f64();
        drop(s);
        let mut s = gen.generate_ids(&ids[..1], &tg_opts).map_err(llm_err)?;
        for t in s.by_ref() {
            t.map_err(llm_err)?;
        }
        // n + 1 tokens: the first comes from the prompt's logits, then n
        // decode steps (the last token's step is not run).
        let decode = n as f64 / s.timings().decode.as_secs_f64();
        if run > 0 {
            pp.push(prefill);
            tg.push(decode);
        }
        eprintln!(
            "{} run: prefill {prefill:.1} tok/s, decode {decode:.1} tok/s",
            if run == 0 { "warm-up" } else { "timed" },
        );
    }
    let stats = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        (m, sd)
    };
    let ((ppm, pps), (tgm, tgs)) = (stats(&pp), stats(&tg));
    let profile = if a.profile {
        let [prompt, decode] = gen.profile(&ids).map_err(llm_err)?;
        eprintln!(
            "prompt step ({} tokens):\n{prompt}\ndecode step after it:\n{decode}",
            ids.len().min(256)
        );
        Some(serde_json::json!({"prompt": prompt, "decode": decode}))
    } else {
        None
    };
    if rlx_cpu::profile::enabled() {
        eprintln!(
            "per-op profile (RLX_PROFILE=1), every run:\n{}",
            rlx_cpu::profile::report()
        );
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "model": a.model.display().to_string(),
                "device": dev.to_string(),
                "amp": a.amp.amp.as_deref().unwrap_or("none"),
                "prompt": p, "gen": n, "runs": a.runs,
                "prefill_tok_s": ppm, "prefill_sd": pps,
                "decode_tok_s": tgm, "decode_sd": tgs,
                "profile": profile,
            })
        );
    } else {
        println!("| model | device | test | tok/s |\n|---|---|---|---:|");
        println!("| {} | {dev} | pp{p} | {ppm:.1} ± {pps:.1} |", model.name);
        println!("| {} | {dev} | tg{n} | {tgm:.1} ± {tgs:.1} |", model.name);
    }
    Ok(())
}
