//! The GPU-side tests and benchmark of rlx-cuda, one binary (built here,
//! run on the GPU machine by `tests/gpu/run.sh`):
//!
//! * `gpu parity [VECTOR_DIR]` — every reference-vector case whose nodes all
//!   run natively on CUDA: against the committed expected outputs, and
//!   against the CPU reference on fresh random inputs. Prints
//!   `N passed, M failed`.
//! * `gpu minilm --weights F --config F [--batches 1,2] [--seq 128]
//!   [--runs 50] [--check 1,8] [--json F] [--profile]` — MiniLM on the GPU at
//!   fp32 (strict), fp32+TF32 and fp16: cosine against the CPU reference and
//!   p50 latency with and without CUDA graph replay.
//! * `gpu sgemm` — our own fp32 GEMM kernels, each forced, against the CPU.
//! * `gpu hgemm` — our own f16/bf16 tensor-core GEMM kernels, each forced, against the CPU.
//! * `gpu mma-peak` — the tensor cores' `mma.sync` throughput ceiling (TFLOP/s).
//! * `gpu quant` — `dequant_matmul` over GGUF block weights against the
//!   CPU, and its gemv's time at 4096 × 4096.
//! * `gpu llm [--tiny-only]` — quantized llamas written here as GGUF
//!   (random weights): logits and greedy tokens vs the CPU, decode speed.
//! * `gpu gguf --model F.gguf --reference tests/vectors/llm/NAME.json` — a
//!   real GGUF decoder on CUDA: greedy tokens and logits vs transformers,
//!   prefill / decode tokens/s (benches/llm/cuda.sh runs it).
//! * `gpu yolo --model 320n.onnx --input in_astronaut.npy [--last N]` —
//!   where YOLOv8n's output on CUDA departs from the CPU's (a probe).
//! * `gpu onnx-ref --model F --input NAME=X.npy --expect OUT.npy [--scale S]
//!   [--tol T]` — an ONNX model on CUDA against ONNX Runtime's output.
//!
//! One module per suite; this file holds what they share (seeded inputs,
//! tolerances, the CUDA compile with the environment's options).

mod copies;
mod gemm;
mod gguf;
mod minilm;
mod parity;
mod quant;
mod train;
mod yolo;

use copies::copies;
use gemm::{hgemm, mma_peak, sgemm};
use gguf::gguf;
use minilm::minilm;
use parity::{extra_inputs, parity};
use quant::{llm, quant};
use train::{train, train_ref};
use yolo::{onnx_ref, yolo};

use rlx::{CompileOptions, Target};
use rlx_cuda::{CudaBackend, CudaExecutable, CudaOptions};
use rlx_ir::{text, DType, Graph, HostTensor};
use rlx_runtime::{Device, DispatchOptions, Policy};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// xorshift64*: seeded, good enough for test inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit().max(1e-300), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

fn tensor(v: &Value) -> Result<HostTensor, String> {
    HostTensor::from_json(v).map_err(|e| e.to_string())
}

use rlx_ref::conformance::close;

fn loosen(d: DType, rtol: f64, atol: f64) -> (f64, f64) {
    rlx_cuda::tolerance(d, rtol, atol)
}

fn random_like(t: &HostTensor, rng: &mut Rng) -> HostTensor {
    let n = t.numel();
    match t.dtype() {
        d if d.is_float() => HostTensor::from_f64(
            d,
            t.shape().clone(),
            (0..n).map(|_| rng.normal() * 1.5).collect(),
        )
        .unwrap_or_else(|_| t.clone()),
        DType::Bool => HostTensor::from_slice(
            &(0..n).map(|_| rng.unit() < 0.7).collect::<Vec<_>>(),
            t.shape().clone(),
        )
        .unwrap_or_else(|_| t.clone()),
        // Integers stay as the case wrote them: they are often indices.
        _ => t.clone(),
    }
}

/// The CUDA options the environment sets (`RLX_CUDA_*` through
/// `rlx::env`, read once in `main`); each case starts from them.
static ENV_OPTS: std::sync::OnceLock<CudaOptions> = std::sync::OnceLock::new();

fn env_opts() -> CudaOptions {
    ENV_OPTS.get().copied().unwrap_or_default()
}

fn compile_cuda(g: &Graph, native_only: bool) -> Result<rlx::Compiled, String> {
    let mut o = CompileOptions {
        optimize: false,
        ..Default::default()
    };
    if native_only {
        o.dispatch = DispatchOptions::new(Policy::NativeOnly);
    }
    rlx::compile_with(g, Target::Device(Device::Cuda), &o).map_err(|e| e.to_string())
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|s| s.as_str())
}

fn list(s: &str) -> Vec<usize> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(|s| s.as_str()) == Some("train-ref") {
        std::process::exit(train_ref(&args[2..]) as i32);
    }
    // RLX_* settings (RLX_CUDA_HGEMM=auto, RLX_CUDA_TUNE_LOG=1, ...)
    // through the one edge.
    let env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let cuda = CudaOptions::from_lookup(|n| env.cuda_var(n)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let _ = ENV_OPTS.set(cuda);
    match CudaBackend::with_options(0, cuda) {
        Ok(b) => rlx_runtime::register_backend(Arc::new(b)),
        Err(e) => {
            eprintln!("rlx-cuda: {e}");
            std::process::exit(2);
        }
    }
    let fails = match args.get(1).map(|s| s.as_str()) {
        Some("parity") => parity(
            args.get(2)
                .map(|s| s.as_str())
                .unwrap_or("tests/vectors/ops"),
        ),
        Some("minilm") => minilm(&args[2..]),
        Some("copies") => copies(),
        Some("sgemm") => sgemm(),
        Some("hgemm") => hgemm(),
        Some("mma-peak") => mma_peak(),
        Some("train") => train(&args[2..]),
        Some("quant") => quant(),
        Some("llm") => llm(&args[2..]),
        Some("gguf") => gguf(&args[2..]),
        Some("yolo") => yolo(&args[2..]),
        Some("onnx-ref") => onnx_ref(&args[2..]),
        _ => {
            eprintln!("usage: gpu parity [DIR] | gpu minilm --weights F --config F [...]");
            2
        }
    };
    std::process::exit(if fails == 0 { 0 } else { 1 });
}
