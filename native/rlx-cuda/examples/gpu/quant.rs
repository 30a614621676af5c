//! `gpu quant`: `dequant_matmul` over GGUF block weights on the GPU
//! against the CPU reference (every decoded type; the gemv kernel at M = 1
//! and 7, the tiled one at M = 33 and 100; f16/bf16 x), the gemv's time at
//! 4096 × 4096 (weights cold in L2 and warm) next to cuBLAS's f32 GEMV on
//! the same shape, and the tiled kernel's at M = 16 and 256. `gpu llm`:
//! quantized llamas with random weights written as GGUF here — a tiny one
//! with all eight types (logits vs the CPU, greedy tokens, the dispatch
//! report) and one of SmolLM2-135M's shape (decode tokens/s on CUDA and on
//! the CPU).

use super::*;
#[path = "../../tests/support/quant.rs"]
mod support;
use rlx_cuda::codegen::kernels::quant::DTYPES;
use rlx_models::llm::{GenerateOptions, LlmModel};
use support::{
    dequant_graph, llama_gguf, random_blocks, random_x, tiny_llama, QRng, SMOLLM2_SHAPE,
};

/// (max |got − want|, max |want|) over the elements.
fn max_err(got: &HostTensor, want: &HostTensor) -> (f64, f64) {
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    g.iter().zip(&w).fold((0.0, 0.0), |(e, m), (a, b)| {
        (f64::max(e, (a - b).abs()), f64::max(m, b.abs()))
    })
}

/// Parity of one case; its max abs error, or why it failed.
fn parity_case(
    rng: &mut QRng,
    wd: DType,
    xd: DType,
    xs: &[usize],
    n: usize,
) -> Result<f64, String> {
    let k = *xs.last().unwrap();
    let g = text::parse(&dequant_graph(xd, xs, wd, n)).unwrap();
    let ins = vec![random_x(rng, xd, xs), random_blocks(rng, wd, n, k)];
    let c = compile_cuda(&g, true)?;
    let kernel = c.dispatch_report().nodes[0].kernels.join(", ");
    if !kernel.contains("dequant_matmul") {
        return Err(format!("not the dequant kernel: {kernel}"));
    }
    let got = c
        .run_refs(&ins.iter().collect::<Vec<_>>())
        .map_err(|e| e.to_string())?;
    let want = rlx_cpu::run_graph(&g, &ins).map_err(|e| e.to_string())?;
    // f32: the reference sums in f64 from the same f32 weights; K ≤ 768
    // products of O(0.05) give O(1) outputs, rounded in f32 (1e-5). f16 /
    // bf16: one rounding of the output (rlx_cuda::tolerance).
    let (rt, at) = loosen(xd, 1e-5, 1e-5);
    close(&got[0], &want[0], rt, at)?;
    Ok(max_err(&got[0], &want[0]).0)
}

fn parity_all() -> usize {
    let mut rng = QRng(21);
    let mut fails = 0;
    for wd in DTYPES {
        let big = if matches!(wd, DType::Q4K | DType::Q5K | DType::Q6K) {
            768
        } else {
            576
        };
        let mut worst: f64 = 0.0;
        let mut n_ok = 0;
        for (xd, xs, n) in [
            (DType::F32, vec![1, big], 67),
            (DType::F32, vec![1, big], 1000),
            (DType::F32, vec![7, 256], 13),
            (DType::F32, vec![3, 11, big], 67),
            (DType::F32, vec![100, 256], 130),
            (DType::F16, vec![1, 256], 9),
            (DType::F16, vec![2, 9, 256], 70),
            (DType::BF16, vec![40, 256], 5),
        ] {
            match parity_case(&mut rng, wd, xd, &xs, n) {
                Ok(e) => {
                    n_ok += 1;
                    if xd == DType::F32 {
                        worst = worst.max(e);
                    }
                }
                Err(e) => {
                    fails += 1;
                    println!("FAIL dequant_matmul {wd} x {xd}{xs:?} n={n}: {e}");
                }
            }
        }
        println!("dequant_matmul {wd}: {n_ok}/8 cases pass; f32 max abs error {worst:.2e}");
    }
    fails
}

/// p50 milliseconds of a CUDA-graph replay of `exe` (inputs resident).
fn replay_ms(exe: &CudaExecutable, inputs: &[&HostTensor], runs: usize) -> f64 {
    exe.keep_resident(&(0..inputs.len()).collect::<Vec<_>>());
    for _ in 0..5 {
        exe.launch_async(inputs).unwrap();
        exe.sync().unwrap();
    }
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            exe.launch_async(inputs).unwrap();
            exe.sync().unwrap();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// A chain of `len` products x_{i+1} = x_i · W_{i mod copies}ᵀ, x (m, k)
/// and square weights (k = n) of `wd` (f32: `matmul` with (k, n) weights,
/// cuBLAS), the `copies` distinct weights together larger than L2 (each
/// read from memory: cycling through more than L2 holds misses every
/// time), in one CUDA graph: one replay's time over `len` is each
/// product's time plus its launch gap (the host's launch, copy-free with
/// every input resident, spread over `len`; the values overflow along the
/// chain, which costs GEMVs nothing). Returns (µs per product in the
/// chain, µs of one product alone warm in L2 from `profile`, weight bytes
/// of one product).
fn time_chain(
    be: &CudaBackend,
    wd: DType,
    m: usize,
    k: usize,
    copies: usize,
    len: usize,
) -> (f64, f64, usize) {
    let mut rng = QRng(7);
    let mut src = format!("graph @g(%x0: f32[{m}, {k}]");
    let mut body = String::new();
    let mut ins = vec![random_x(&mut rng, DType::F32, &[m, k])];
    for i in 0..copies {
        if wd == DType::F32 {
            src += &format!(", %w{i}: f32[{k}, {k}]");
            ins.push(random_x(&mut rng, DType::F32, &[k, k]));
        } else {
            src += &format!(", %w{i}: {wd}[{k}, {k}]");
            ins.push(random_blocks(&mut rng, wd, k, k));
        }
    }
    for i in 0..len {
        let op = if wd == DType::F32 {
            "matmul"
        } else {
            "dequant_matmul"
        };
        body += &format!("  %x{} = {op}(%x{i}, %w{})\n", i + 1, i % copies);
    }
    src += &format!(") {{\n{body}  return %x{len}\n}}");
    let g = text::parse(&src).unwrap();
    let c = compile_cuda(&g, true).unwrap();
    let exe = be.compile_program(c.program()).unwrap();
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let ms = replay_ms(&exe, &refs, 30);
    let warm = exe.profile().unwrap()[0].3 as f64 * 1e3;
    (
        ms * 1e3 / len as f64,
        warm,
        wd.storage_bytes(k * k).unwrap(),
    )
}

fn timings() {
    let k = 4096;
    let be = CudaBackend::with_options(0, env_opts()).unwrap();
    println!("gemv timings, x f32 (1, {k}) · W ({k}, {k})ᵀ — cold: per product in a CUDA graph of 32 chained products cycling over 8 distinct weights (2 for f32), launch gaps included; warm: one launch repeated, its weight in L2:");
    for (wd, copies) in [
        (DType::F32, 2),
        (DType::Q4_0, 8),
        (DType::Q4_1, 8),
        (DType::Q8_0, 8),
        (DType::Q4K, 8),
        (DType::Q5K, 8),
        (DType::Q6K, 8),
    ] {
        let (cold, warm, bytes) = time_chain(&be, wd, 1, k, copies, 32);
        println!(
            "  {:>5}: {cold:7.2} us cold ({:5.0} GB/s), {warm:7.2} us warm ({:5.0} GB/s); {:.1} MB of weights{}",
            wd.name(),
            bytes as f64 / cold / 1e3,
            bytes as f64 / warm / 1e3,
            bytes as f64 / 1e6,
            if wd == DType::F32 { " (cuBLAS)" } else { "" }
        );
    }
    // Prompt-sized products through the tiled kernel.
    for m in [16, 256] {
        for wd in [DType::Q4_0, DType::Q4K, DType::F32] {
            let (cold, warm, _) = time_chain(&be, wd, m, k, 2, 8);
            let tf = |us: f64| 2.0 * (m * k * k) as f64 / us / 1e6;
            println!(
                "  M={m} {:>5}: {cold:.1} us per product in a chain ({:.2} TFLOP/s), {warm:.1} us warm ({:.2} TFLOP/s){}",
                wd.name(),
                tf(cold),
                tf(warm),
                if wd == DType::F32 { " (cuBLAS, strict f32)" } else { "" }
            );
        }
    }
}

pub(super) fn quant() -> usize {
    let fails = parity_all();
    timings();
    println!(
        "{} passed, {fails} failed (dequant_matmul)",
        DTYPES.len() * 8 - fails
    );
    fails
}

/// Max |a − b| over two logit rows, and max |b|.
fn logit_err(a: &[f32], b: &[f32]) -> (f32, f32) {
    a.iter().zip(b).fold((0.0, 0.0), |(e, m), (x, y)| {
        (f32::max(e, (x - y).abs()), f32::max(m, y.abs()))
    })
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

/// Teacher-forced logits (a prompt, then decode steps) on CUDA and the
/// CPU; greedy tokens on both; decode speed on both.
fn llm_check(name: &str, model: &LlmModel, prompt: &[u32], tokens: usize) -> (usize, usize) {
    let mut fails = 0;
    let mut cuda = model.generator(Device::Cuda);
    let mut cpu = model.generator(Device::Cpu);
    let then: Vec<u32> = (0..4).map(|i| prompt[i % prompt.len()] + 1).collect();
    let a = cuda.logits(prompt, &then).unwrap();
    let b = cpu.logits(prompt, &then).unwrap();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let (e, m) = logit_err(x, y);
        // Every matmul's f32 sums in another order, through every layer:
        // 1e-3 of the logits' scale.
        let ok = e <= 1e-3 * m.max(1.0) && argmax(x) == argmax(y);
        if !ok {
            fails += 1;
        }
        println!(
            "{} llm {name} {}: max |logit diff| {e:.2e} (max |logit| {m:.2}), argmax {} vs {}",
            if ok { "PASS" } else { "FAIL" },
            if i == 0 {
                format!("prompt of {}", prompt.len())
            } else {
                format!("decode step {i}")
            },
            argmax(x),
            argmax(y)
        );
    }
    let opts = GenerateOptions {
        stop_at_eos: false,
        ..GenerateOptions::greedy(tokens)
    };
    let run = |g: &mut rlx_models::llm::Generator, dev: &str| -> (Vec<u32>, f64) {
        let mut times = Vec::new();
        let mut ids = Vec::new();
        let mut t = Instant::now();
        for tok in g.generate_ids(prompt, &opts).unwrap() {
            ids.push(tok.unwrap().id);
            times.push(t.elapsed().as_secs_f64());
            t = Instant::now();
        }
        // The first token includes the prompt; later steps may compile a
        // graph (a cache bucket outgrown): the median is the speed.
        let mut steps = times[1.min(times.len())..].to_vec();
        steps.sort_by(f64::total_cmp);
        let med = steps.get(steps.len() / 2).copied().unwrap_or(f64::NAN);
        println!(
            "llm {name} {dev}: {} tokens, first (prompt + compile) {:.0} ms, decode median {:.2} ms/token ({:.0} tokens/s)",
            ids.len(),
            times[0] * 1e3,
            med * 1e3,
            1.0 / med
        );
        (ids, med)
    };
    let (tc, _) = run(&mut cuda, "cuda");
    let (tp, _) = run(&mut cpu, "cpu");
    let same = tc.iter().zip(&tp).take_while(|(a, b)| a == b).count();
    println!("llm {name}: greedy tokens identical for the first {same} of {tokens} (cuda {tc:?})");
    let c = cuda.compiled(1, 64).unwrap();
    let r = c.dispatch_report();
    let mut not_native = std::collections::BTreeMap::new();
    for n in &r.nodes {
        if n.path != rlx::DispatchPath::Native {
            *not_native
                .entry(format!("{} ({:?})", n.op, n.path))
                .or_insert(0) += 1;
        }
    }
    let dq = r.nodes.iter().filter(|n| n.op == "dequant_matmul").count();
    println!(
        "llm {name} decode graph on cuda: {} nodes, {dq} dequant_matmul native; not native: {not_native:?}",
        r.nodes.len()
    );
    (a.len(), fails)
}

pub(super) fn llm(args: &[String]) -> usize {
    let tiny = LlmModel::from_gguf(&tiny_llama(), |_| {}).unwrap();
    let (mut checks, mut fails) = llm_check("tiny (all 8 types)", &tiny, &[10, 20, 30, 40, 50], 16);
    if !args.iter().any(|a| a == "--tiny-only") {
        let t0 = Instant::now();
        let smol = LlmModel::from_gguf(&llama_gguf(&SMOLLM2_SHAPE), |_| {}).unwrap();
        println!(
            "SmolLM2-shaped random model written and loaded in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        let prompt: Vec<u32> = (0..12).map(|i| 300 + 97 * i).collect();
        let (c, f) = llm_check("smollm2-shape (q4_1 + q8_0)", &smol, &prompt, 32);
        checks += c;
        fails += f;
    }
    println!("{} passed, {fails} failed (llm)", checks - fails);
    fails
}
