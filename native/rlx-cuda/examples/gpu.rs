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

fn close(got: &HostTensor, want: &HostTensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "got {}{}, want {}{}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    if !want.dtype().is_float() {
        let (g, w) = (
            got.to_i64_vec().map_err(|e| e.to_string())?,
            want.to_i64_vec().map_err(|e| e.to_string())?,
        );
        return match g.iter().zip(&w).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(format!("element {i}: got {}, want {}", g[i], w[i])),
        };
    }
    let (g, w) = (
        got.to_f64_vec().map_err(|e| e.to_string())?,
        want.to_f64_vec().map_err(|e| e.to_string())?,
    );
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            return Err(format!("element {i}: got {a}, want {b}"));
        }
    }
    Ok(())
}

fn loosen(d: DType, rtol: f64, atol: f64) -> (f64, f64) {
    match d {
        DType::F16 => (rtol.max(1e-2), atol.max(1e-2)),
        DType::BF16 => (rtol.max(4e-2), atol.max(4e-2)),
        DType::F32 => (rtol.max(1e-5), atol.max(1e-6)),
        _ => (rtol, atol),
    }
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

const EXTRA: &[(&str, &str)] = &[
    ("attention_64_heads_causal", "graph @g(%q: f32[4,16,24,32], %k: f32[4,16,24,32], %v: f32[4,16,24,32]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ("attention_64_heads_keep_mask", "graph @g(%q: f32[4,16,24,32], %k: f32[4,16,24,32], %v: f32[4,16,24,32], %m: bool[4,1,1,24]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  return %o\n}"),
    ("attention_64_heads_bias", "graph @g(%q: f32[64,24,32], %k: f32[64,40,32], %v: f32[64,40,16], %m: f32[64,24,40]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("attention_permute_reshape", "graph @g(%q: f32[2,4,16,8], %k: f32[2,4,16,8], %v: f32[2,4,16,8]) {\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,16,32]}\n  return %r\n}"),
    ("attention_64_heads_permute_reshape", "graph @g(%q: f32[4,16,24,8], %k: f32[4,16,24,8], %v: f32[4,16,24,8]) {\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[4,24,128]}\n  return %r\n}"),
    // Tensor-core attention (f16/bf16 only; the f32 run takes the other
    // kernels): partial 16-row tiles, a bias mask, 1- and 4-warp blocks, a
    // causal mask, a keep mask broadcast over heads with the merged-heads layout.
    ("attention_tc_bias_partial_rows", "graph @g(%q: f32[2,4,40,64], %k: f32[2,4,128,64], %v: f32[2,4,128,32], %m: f32[2,1,40,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("attention_tc_causal_4_warps", "graph @g(%q: f32[144,100,32], %k: f32[144,112,32], %v: f32[144,112,16]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ("attention_tc_keep_mask_merged_heads", "graph @g(%q: f32[2,12,128,32], %k: f32[2,12,128,32], %v: f32[2,12,128,32], %m: bool[2,1,1,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  return %r\n}"),
    // q/k/v computed into the arena, heads split by views, merged again:
    // the memory planner may give the merged output q's, k's or v's buffer
    // (the tensor-core kernel then writes in place, as in MiniLM).
    ("attention_tc_in_place_merged_heads", "graph @g(%x: f32[2,128,384], %y: f32[2,128,384], %z: f32[2,128,384]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,128,12,32]}\n  %rb = reshape(%b) {shape=[2,128,12,32]}\n  %rc = reshape(%c) {shape=[2,128,12,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  return %r\n}"),
    // q's buffer still read after the attention, so the merged output may
    // take k's: written in place only with one block per head.
    ("attention_tc_in_place_over_k", "graph @g(%x: f32[2,128,384], %y: f32[2,128,384], %z: f32[2,128,384]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,128,12,32]}\n  %rb = reshape(%b) {shape=[2,128,12,32]}\n  %rc = reshape(%c) {shape=[2,128,12,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  %s = add(%r, %a)\n  return %s\n}"),
    // Sibling GEMMs batched into one (weights and biases grouped, a bias per
    // batch), with plain and with transposed (permute view) weights. (Each
    // output is compared on its own: a sum of two of them, ~±13 each, lost
    // 2 ulps to cancellation at f16/bf16 in the first H200 run.)
    ("qkv_siblings", "graph @g(%x: f32[2,16,32], %wq: f32[32,24], %bq: f32[24], %wk: f32[32,24], %bk: f32[24], %wv: f32[32,24], %bv: f32[24]) {\n  %q = matmul_bias_act(%x, %wq, %bq)\n  %k = matmul_bias_act(%x, %wk, %bk)\n  %v = matmul_bias_act(%x, %wv, %bv)\n  return %q, %k, %v\n}"),
    ("qkv_siblings_transposed_weights", "graph @g(%x: f32[2,16,32], %wq: f32[24,32], %bq: f32[24], %wk: f32[24,32], %bk: f32[24], %wv: f32[24,32], %bv: f32[24]) {\n  %tq = permute(%wq) {perm=[1,0]}\n  %q = matmul_bias_act(%x, %tq, %bq)\n  %tk = permute(%wk) {perm=[1,0]}\n  %k = matmul_bias_act(%x, %tk, %bk)\n  %tv = permute(%wv) {perm=[1,0]}\n  %v = matmul_bias_act(%x, %tv, %bv)\n  return %q, %k, %v\n}"),
    ("linear_bias_residual", "graph @g(%x: f32[3,8,16], %w: f32[16,16], %b: f32[16], %r: f32[3,8,16]) {\n  %y = matmul_bias_act(%x, %w, %b)\n  %z = add(%y, %r)\n  return %z\n}"),
    // Reductions with fused neighbours: an elementwise producer computed
    // in the reduction's loop, an elementwise epilogue on the reduced
    // value, and a consumer over the input's shape reading the value per
    // row (MiniLM's mean pooling + L2 normalize; a row max subtracted over
    // a middle axis; an epilogue with an operand of its own).
    ("reduce_fusions_pooling", "graph @g(%x: f32[3,7,40], %m: f32[3,7,1]) {\n  %me = exp(%m)\n  %a = mul(%x, %me)\n  %s = reduce_sum(%a) {axes=[1]}\n  %c = reduce_sum(%me) {axes=[1]}\n  %cc = clamp(%c) {min=1e-9}\n  %mean = div(%s, %cc)\n  %sq = mul(%mean, %mean)\n  %n = reduce_sum(%sq) {axes=[1], keepdim=true}\n  %r = sqrt(%n)\n  %y = div(%mean, %r)\n  return %y\n}"),
    ("reduce_fusions_middle_axis_consumer", "graph @g(%x: f32[4,9,6]) {\n  %mx = reduce_max(%x) {axes=[1], keepdim=true}\n  %y = sub(%x, %mx)\n  return %y\n}"),
    ("reduce_fusions_column_consumer", "graph @g(%x: f32[6,10]) {\n  %s = reduce_sum(%x) {axes=[0]}\n  %y = mul(%x, %s)\n  return %y\n}"),
    // Reductions over a middle axis with many outputs: 32 neighbouring
    // outputs per block (a partial last block), 8 threads per output.
    ("reduce_columns_producer_epilogue", "graph @g(%x: f32[3,50,700], %m: f32[3,50,1]) {\n  %a = mul(%x, %m)\n  %s = reduce_sum(%a) {axes=[1]}\n  %y = neg(%s)\n  return %y\n}"),
    ("reduce_columns_max_mean", "graph @g(%x: f32[40,1100]) {\n  %mx = reduce_max(%x) {axes=[0]}\n  %mn = reduce_mean(%x) {axes=[0]}\n  return %mx, %mn\n}"),
    ("reduce_fusions_epilogue_operand", "graph @g(%x: f32[5,300], %b: f32[5]) {\n  %s = reduce_mean(%x) {axes=[1]}\n  %y = add(%s, %b)\n  return %y\n}"),
    // Rows of a multiple of 128: the 4-elements-per-lane norm kernel.
    ("layer_norm_384", "graph @g(%x: f32[10,384], %g: f32[384], %b: f32[384]) {\n  %y = layer_norm(%x, %g, %b) {eps=1e-5}\n  return %y\n}"),
    ("rms_norm_256", "graph @g(%x: f32[5,256], %g: f32[256]) {\n  %y = rms_norm(%x, %g) {eps=1e-6}\n  return %y\n}"),
    ("layer_norm_1000", "graph @g(%x: f32[6,1000], %g: f32[1000], %b: f32[1000]) {\n  %y = layer_norm(%x, %g, %b) {eps=1e-5}\n  return %y\n}"),
    // Gathers read by their elementwise reader (never stored): along a
    // middle axis with an outer one; BERT's three embedding lookups summed
    // (positions from a constant arange) inside the layer norm after them.
    // Integer inputs are indices 0..2 (see `extra_inputs`).
    ("gather_read_by_elementwise_outer_axis", "graph @g(%t: f32[4,5,6], %i: i64[7], %b: f32[6]) {\n  %x = gather(%t, %i) {axis=1}\n  %y = add(%x, %b)\n  return %y\n}"),
    ("embeddings_sum_in_layer_norm", EMBEDDINGS_LN),
    // A padding mask `ids != 0` read only by attention (which then reads
    // the ids): the tensor-core kernel at f16/bf16 (heads of 32), the
    // tiled one at f32.
    ("attention_tc_nonzero_ids_mask", "graph @g(%q: f32[2,12,128,32], %k: f32[2,12,128,32], %v: f32[2,12,128,32], %ids: i64[2,128]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,128]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}"),
];

/// BERT's embedding block (as the optimizer leaves it): three lookups, one
/// fused sum, a layer norm.
const EMBEDDINGS_LN: &str = "graph @g(%ids: i64[2,16], %tt: i64[2,16], %w: f32[10,64], %p: f32[16,64], %ty: f32[3,64], %g: f32[64], %be: f32[64]) {\n  %pi = arange() {dtype=i64, len=16, start=0.0, step=1.0}\n  %a = embedding(%w, %ids)\n  %b = embedding(%p, %pi)\n  %c = embedding(%ty, %tt)\n  %s = fused_elementwise(%a, %c, %b) {body=graph @region(%in0: f32[2,16,64], %in1: f32[2,16,64], %in2: f32[16,64]) {\n    %3 = add(%in0, %in1) : f32[2,16,64]\n    %4 = add(%in2, %3) : f32[2,16,64]\n    return %4\n  }}\n  %n = layer_norm(%s, %g, %be) {axis=2, eps=1e-5}\n  return %n\n}";

/// Random inputs of `g` for the extra cases: floats normal, integers
/// (indices) cycling through 0, 1, 2.
fn extra_inputs(g: &Graph, rng: &mut Rng) -> Vec<HostTensor> {
    g.input_types()
        .iter()
        .map(|ty| {
            let z = HostTensor::zeros(ty.dtype, ty.shape.clone()).unwrap();
            if matches!(ty.dtype, DType::I32 | DType::I64) {
                let v = (0..z.numel()).map(|k| ((k * 5 + 1) % 3) as f64).collect();
                HostTensor::from_f64(ty.dtype, ty.shape.clone(), v).unwrap()
            } else {
                random_like(&z, rng)
            }
        })
        .collect()
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

fn parity(dir: &str) -> usize {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("vector dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let (mut pass, mut fail) = (0usize, 0usize);
    let mut covered = std::collections::BTreeSet::new();
    let mut covered_narrow = std::collections::BTreeSet::new();
    let mut rng = Rng(0x5eed);
    let claims = rlx_cuda::claims();
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let op = v["op"].as_str().unwrap_or("?").to_string();
        for case in v["cases"].as_array().cloned().unwrap_or_default() {
            let name = format!("{op}/{}", case["name"].as_str().unwrap_or("?"));
            if case.get("moments").is_some() {
                continue;
            }
            let Ok(g) = text::parse(case["graph"].as_str().unwrap_or("")) else {
                continue;
            };
            let Ok(c) = compile_cuda(&g, true) else {
                continue;
            }; // not native on CUDA
            let inputs: Vec<HostTensor> = match case["inputs"]
                .as_array()
                .map(|a| a.iter().map(tensor).collect::<Result<Vec<_>, _>>())
            {
                Some(Ok(t)) => t,
                _ => continue,
            };
            let refs: Vec<&HostTensor> = inputs.iter().collect();
            let mut result = |what: &str, r: Result<(), String>| match r {
                Ok(()) => pass += 1,
                Err(e) => {
                    fail += 1;
                    println!("FAIL {name} ({what}): {e}");
                }
            };
            let got = c.run_refs(&refs);
            if let Some(want) = case.get("error").and_then(|e| e.as_str()) {
                result(
                    "expected error",
                    match got {
                        Err(e) => {
                            println!("ok   {name}: typed error: {e} (reference: {want})");
                            Ok(())
                        }
                        Ok(_) => Err(format!("ran, but the reference fails with {want:?}")),
                    },
                );
                continue;
            }
            let want: Vec<HostTensor> = case["outputs"]
                .as_array()
                .map(|a| a.iter().filter_map(|t| tensor(t).ok()).collect())
                .unwrap_or_default();
            let (rt, at) = (
                case["rtol"].as_f64().unwrap_or(1e-6),
                case["atol"].as_f64().unwrap_or(1e-6),
            );
            let r = got.map_err(|e| e.to_string()).and_then(|outs| {
                outs.iter()
                    .zip(&want)
                    .enumerate()
                    .try_for_each(|(k, (o, w))| {
                        let (rt, at) = loosen(w.dtype(), rt, at);
                        close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                    })
            });
            let ok = r.is_ok();
            result("vectors", r);
            // The same graph on random inputs against the CPU reference.
            let rand: Vec<HostTensor> = inputs.iter().map(|t| random_like(t, &mut rng)).collect();
            let rrefs: Vec<&HostTensor> = rand.iter().collect();
            if let Ok(cpu) = rlx_cpu::run_graph(&g, &rand) {
                let r = c
                    .run_refs(&rrefs)
                    .map_err(|e| e.to_string())
                    .and_then(|outs| {
                        outs.iter()
                            .zip(&cpu)
                            .enumerate()
                            .try_for_each(|(k, (o, w))| {
                                let (rt, at) = loosen(w.dtype(), 1e-4, 1e-5);
                                close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                            })
                    });
                let ok2 = r.is_ok();
                result("random vs cpu", r);
                // The f32 graph again in f16 and bf16 (storage), against the
                // CPU reference on the same narrow graph.
                let src = case["graph"].as_str().unwrap_or("");
                for narrow in ["f16", "bf16"] {
                    if !src.contains("f32") {
                        break;
                    }
                    let Ok(gn) = text::parse(&src.replace("f32", narrow)) else {
                        continue;
                    };
                    let Ok(cn) = compile_cuda(&gn, true) else {
                        continue;
                    };
                    let rn: Vec<HostTensor> = gn
                        .input_types()
                        .iter()
                        .zip(&rand)
                        .map(|(ty, t)| {
                            if ty.dtype == t.dtype() {
                                t.clone()
                            } else {
                                HostTensor::from_f64(
                                    ty.dtype,
                                    t.shape().clone(),
                                    t.to_f64_vec().unwrap(),
                                )
                                .unwrap()
                            }
                        })
                        .collect();
                    let Ok(cpu) = rlx_cpu::run_graph(&gn, &rn) else {
                        continue;
                    };
                    let r = cn
                        .run_refs(&rn.iter().collect::<Vec<_>>())
                        .map_err(|e| e.to_string())
                        .and_then(|outs| {
                            outs.iter()
                                .zip(&cpu)
                                .enumerate()
                                .try_for_each(|(k, (o, w))| {
                                    let (rt, at) = loosen(w.dtype(), 1e-4, 1e-5);
                                    close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                                })
                        });
                    if r.is_ok() {
                        for n in &gn.nodes {
                            covered_narrow.insert(format!("{}<{narrow}>", n.op.name()));
                        }
                    }
                    result(
                        if narrow == "f16" {
                            "f16 random vs cpu"
                        } else {
                            "bf16 random vs cpu"
                        },
                        r,
                    );
                }
                if ok && ok2 {
                    for n in &g.nodes {
                        covered.insert(n.op.name().to_string());
                    }
                }
            }
        }
    }
    // Shapes the vectors do not reach: many heads (the cuBLAS attention
    // path), GEMM epilogues with a residual (cuBLASLt), long norm rows.
    // The tensor-core cases again under each block split of
    // `CudaOptions::attn_split` (the backend `compile_cuda` finds): the first
    // version (0) and forced widths, besides the automatic pick.
    let splits = |name: &str| -> &'static [&'static str] {
        if name.starts_with("attention_tc") {
            &["", "0", "w1", "w2", "w8"]
        } else {
            &[""]
        }
    };
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    for ((name, src), split) in EXTRA
        .iter()
        .flat_map(|e| splits(e.0).iter().map(move |s| (e, *s)))
    {
        // The split asked for (empty: the environment's), on the backend
        // `compile_cuda` finds.
        let opts = CudaOptions {
            attn_split: if split.is_empty() {
                env_opts().attn_split
            } else {
                rlx_cuda::plan::parse_attn_split(Some(split)).expect("a known split")
            },
            ..env_opts()
        };
        rlx_runtime::register_backend(Arc::new(base.options(opts)));
        let name = if split.is_empty() {
            name.to_string()
        } else {
            format!("{name}[split={split}]")
        };
        for dt in ["f32", "f16", "bf16"] {
            if !split.is_empty() && dt == "f32" {
                continue;
            }
            let Ok(g) = text::parse(&src.replace("f32", dt)) else {
                continue;
            };
            let c = match compile_cuda(&g, true) {
                Ok(c) => c,
                Err(e) => {
                    fail += 1;
                    println!("FAIL extra/{name}<{dt}>: does not compile natively: {e}");
                    continue;
                }
            };
            let ins = extra_inputs(&g, &mut rng);
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let r = c
                .run_refs(&ins.iter().collect::<Vec<_>>())
                .map_err(|e| e.to_string())
                .and_then(|outs| {
                    outs.iter()
                        .zip(&want)
                        .enumerate()
                        .try_for_each(|(k, (o, w))| {
                            let (rt, at) = loosen(w.dtype(), 1e-4, 1e-5);
                            close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                        })
                });
            match r {
                Ok(()) => {
                    pass += 1;
                    println!("ok   extra/{name}<{dt}>");
                }
                Err(e) => {
                    fail += 1;
                    println!("FAIL extra/{name}<{dt}>: {e}");
                }
            }
        }
    }
    rlx_runtime::register_backend(Arc::new(base));
    // An index out of range inside the fused embedding block is the same
    // typed error the gather kernel reports, naming the embedding node.
    {
        let g = text::parse(EMBEDDINGS_LN).unwrap();
        let mut ins = extra_inputs(&g, &mut rng);
        let mut ids = vec![1f64; 32];
        ids[17] = 10.0;
        ins[0] = HostTensor::from_f64(DType::I64, ins[0].shape().clone(), ids).unwrap();
        let r = compile_cuda(&g, true)
            .map_err(|e| e.to_string())
            .and_then(|c| match c.run_refs(&ins.iter().collect::<Vec<_>>()) {
                Err(e) if e.to_string().contains("embedding") => Ok(()),
                Err(e) => Err(format!("error does not name the embedding: {e}")),
                Ok(_) => Err("no error for index 10 of 10 rows".into()),
            });
        match r {
            Ok(()) => {
                pass += 1;
                println!("ok   extra/embeddings_index_out_of_range");
            }
            Err(e) => {
                fail += 1;
                println!("FAIL extra/embeddings_index_out_of_range: {e}");
            }
        }
    }
    let untested: Vec<&String> = claims
        .ops
        .keys()
        .filter(|o| !covered.contains(*o) && o.as_str() != "transfer")
        .collect();
    println!(
        "ops claimed: {}; ops with passing parity cases: {}",
        claims.ops.len(),
        covered.len()
    );
    println!("claimed ops without a passing case: {untested:?}");
    println!(
        "op<dtype> pairs passing in f16/bf16: {}",
        covered_narrow.len()
    );
    println!("{pass} passed, {fail} failed");
    fail
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

fn minilm_inputs(b: usize, s: usize, vocab: usize) -> Vec<HostTensor> {
    let mut rng = Rng(42 + b as u64);
    let mut ids = vec![0i64; b * s];
    let mut mask = vec![0i64; b * s];
    for r in 0..b {
        // Rows of different lengths, so padding is exercised.
        let len = s - (r * 7) % (s / 2);
        for t in 0..s {
            if t < len {
                ids[r * s + t] = if t == 0 {
                    101
                } else if t + 1 == len {
                    102
                } else {
                    1000 + (rng.next() % (vocab as u64 - 1000)) as i64
                };
                mask[r * s + t] = 1;
            }
        }
    }
    vec![
        HostTensor::from_slice(&ids, [b, s]).unwrap(),
        HostTensor::from_slice(&mask, [b, s]).unwrap(),
        HostTensor::from_slice(&vec![0i64; b * s], [b, s]).unwrap(),
    ]
}

fn cosine_min(a: &HostTensor, b: &HostTensor, h: usize) -> f64 {
    let (a, b) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    a.chunks(h)
        .zip(b.chunks(h))
        .map(|(x, y)| {
            let d: f64 = x.iter().zip(y).map(|(p, q)| p * q).sum();
            let nx: f64 = x.iter().map(|p| p * p).sum::<f64>().sqrt();
            let ny: f64 = y.iter().map(|p| p * p).sum::<f64>().sqrt();
            d / (nx * ny)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Exact bitwise equality (floats compared by value; NaN equals NaN).
fn identical(got: &[HostTensor], want: &[HostTensor]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, want {}", got.len(), want.len()));
    }
    got.iter()
        .zip(want)
        .enumerate()
        .try_for_each(|(k, (g, w))| close(g, w, 0.0, 0.0).map_err(|e| format!("output {k}: {e}")))
}

/// Pinned staging and async copies: a graph whose outputs are exact
/// functions of its inputs (one IEEE rounding each, so the GPU must equal
/// the CPU bit for bit), with odd sizes and four dtypes packed into one
/// staging buffer, run with fresh inputs many times — with and without
/// CUDA graph replay, with one input resident, and with two launches
/// queued back to back before one read (the staging buffer is refilled
/// while the first run's copies may still be in flight).
fn copies() -> usize {
    let src = "graph @g(%x: f32[37,129], %y: f32[37,129], %i: i64[5], %h: f16[3,7]) {\n  %a = add(%x, %y)\n  %m = mul(%x, %y)\n  %b = add(%i, %i)\n  %c = add(%h, %h)\n  return %a, %m, %b, %c\n}";
    let g = text::parse(src).expect("copies graph");
    let compiled = compile_cuda(&g, true).expect("copies graph compiles natively");
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    let mut rng = Rng(0xc0b1e5);
    let fresh = |rng: &mut Rng, y: &HostTensor| -> Vec<HostTensor> {
        let f = |rng: &mut Rng, d: DType, dims: &[usize]| {
            let n: usize = dims.iter().product();
            HostTensor::from_f64(
                d,
                rlx_ir::Shape::from(dims),
                (0..n).map(|_| rng.normal() * 3.0).collect(),
            )
            .unwrap()
        };
        let ids: Vec<i64> = (0..5)
            .map(|_| (rng.next() >> 20) as i64 - (1 << 42))
            .collect();
        vec![
            f(rng, DType::F32, &[37, 129]),
            y.clone(),
            HostTensor::from_slice(&ids, [5]).unwrap(),
            f(rng, DType::F16, &[3, 7]),
        ]
    };
    let y = HostTensor::from_f64(
        DType::F32,
        rlx_ir::Shape::from([37usize, 129]),
        (0..37 * 129).map(|k| (k as f64).sin() * 2.0).collect(),
    )
    .unwrap();
    let (mut pass, mut fail) = (0, 0);
    let mut check = |name: String, r: Result<(), String>| match r {
        Ok(()) => {
            pass += 1;
            println!("ok   copies/{name}");
        }
        Err(e) => {
            fail += 1;
            println!("FAIL copies/{name}: {e}");
        }
    };
    for cuda_graph in [true, false] {
        let exe = base
            .options(CudaOptions {
                cuda_graph,
                ..env_opts()
            })
            .compile_program(compiled.program())
            .unwrap();
        exe.keep_resident(&[1]);
        let tag = if cuda_graph { "graph" } else { "eager" };
        let mut bad = Ok(());
        for it in 0..25 {
            let ins = fresh(&mut rng, &y);
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let got = exe
                .run_cuda(&ins.iter().collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            if let Err(e) = got.and_then(|o| identical(&o, &want)) {
                bad = Err(format!("run {it}: {e}"));
                break;
            }
        }
        check(format!("{tag}/25 runs identical to the CPU"), bad);
        // Two launches back to back, one read: the outputs are the second's.
        let (a, b) = (fresh(&mut rng, &y), fresh(&mut rng, &y));
        let r = exe
            .launch_async(&a.iter().collect::<Vec<_>>())
            .and_then(|_| exe.launch_async(&b.iter().collect::<Vec<_>>()))
            .and_then(|_| exe.read_outputs())
            .map_err(|e| e.to_string())
            .and_then(|o| identical(&o, &rlx_cpu::run_graph(&g, &b).unwrap()));
        check(format!("{tag}/back-to-back launches"), r);
        // A wrong input is still a typed error, not a copy of garbage.
        let mut wrong = fresh(&mut rng, &y);
        wrong[0] = HostTensor::zeros(DType::F32, rlx_ir::Shape::from([36usize, 129])).unwrap();
        let r = match exe.run_cuda(&wrong.iter().collect::<Vec<_>>()) {
            Err(rlx_cuda::CudaError::Input(_)) => Ok(()),
            other => Err(format!("expected an Input error, got {other:?}")),
        };
        check(format!("{tag}/wrong shape is a typed error"), r);
    }
    println!("{pass} passed, {fail} failed");
    fail
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_exe(exe: &CudaExecutable, inputs: &[&HostTensor], runs: usize) -> f64 {
    let n = inputs.len();
    exe.keep_resident(&(0..n).collect::<Vec<_>>());
    for _ in 0..10 {
        exe.launch_async(inputs).unwrap();
        exe.sync().unwrap();
    }
    let times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            exe.launch_async(inputs).unwrap();
            exe.sync().unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    p50(times)
}

/// p50 of whole runs with the per-request tensors (ids, mask) copied in
/// through the pinned staging and the outputs copied back: `run_cuda`, with
/// only inputs `first..` (the weights) resident.
fn time_e2e(exe: &CudaExecutable, inputs: &[&HostTensor], first: usize, runs: usize) -> f64 {
    exe.keep_resident(&(first..inputs.len()).collect::<Vec<_>>());
    for _ in 0..10 {
        exe.run_cuda(inputs).unwrap();
    }
    let times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            exe.run_cuda(inputs).unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    p50(times)
}

fn minilm(args: &[String]) -> usize {
    let weights = arg(args, "--weights").expect("--weights FILE");
    let config = arg(args, "--config").expect("--config FILE");
    let batches = list(arg(args, "--batches").unwrap_or("1,2,4,8,16,32"));
    let check = list(arg(args, "--check").unwrap_or("1,8"));
    let seq: usize = arg(args, "--seq").unwrap_or("128").parse().unwrap();
    let runs: usize = arg(args, "--runs").unwrap_or("50").parse().unwrap();
    let modes: Vec<String> = arg(args, "--modes")
        .unwrap_or("fp32,tf32,fp16")
        .split(',')
        .map(String::from)
        .collect();
    let cfg =
        rlx_models::bert::BertConfig::from_json(&std::fs::read_to_string(config).unwrap()).unwrap();
    let bert = rlx_models::bert::Bert::new(cfg.clone(), true);
    let file = rlx_formats::SafetensorsFile::open(weights).unwrap();
    let params = bert.parameters();
    let load = |d: DType| -> Vec<HostTensor> {
        params
            .iter()
            .map(|p| {
                let t = file.tensor(&p.name).unwrap();
                assert_eq!(t.shape(), &p.ty.shape, "{}", p.name);
                HostTensor::from_f64(d, t.shape().clone(), t.to_f64_vec().unwrap()).unwrap()
            })
            .collect()
    };
    let w32 = load(DType::F32);
    let w16 = load(DType::F16);
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    println!("device: {}", base.name());
    let mut failures = 0;
    let mut json = Vec::new();
    for mode in &modes {
        let (dtype, opts) = match mode.as_str() {
            "fp32" => (DType::F32, env_opts()),
            "tf32" => (
                DType::F32,
                CudaOptions {
                    tf32: true,
                    ..env_opts()
                },
            ),
            "fp16" => (DType::F16, env_opts()),
            m => panic!("unknown mode {m}"),
        };
        let be = Arc::new(base.options(opts));
        rlx_runtime::register_backend(be.clone());
        for &b in &batches {
            let g32 = bert.graph(b, seq).unwrap();
            let g = if dtype == DType::F16 {
                text::parse(&text::print(&g32).replace("f32", "f16")).unwrap()
            } else {
                g32.clone()
            };
            let t0 = Instant::now();
            let compiled =
                rlx::compile_with(&g, Target::Device(Device::Cuda), &CompileOptions::default())
                    .unwrap();
            let exe = be.compile_program(compiled.program()).unwrap();
            let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
            if b == batches[0] && mode == &modes[0] {
                println!("{}", compiled.dispatch_report());
            }
            let data = minilm_inputs(b, seq, cfg.vocab_size);
            let w = if dtype == DType::F16 { &w16 } else { &w32 };
            let mut inputs: Vec<&HostTensor> = data.iter().collect();
            inputs.extend(w.iter());
            let outs = exe.run_cuda(&inputs).unwrap();
            let mut cos = None;
            if check.contains(&b) {
                let cpu = rlx::compile(&g32, Device::Cpu).unwrap();
                let mut ci: Vec<&HostTensor> = data.iter().collect();
                ci.extend(w32.iter());
                let want = cpu.run_refs(&ci).unwrap();
                let c = cosine_min(&outs[1], &want[1], cfg.hidden_size);
                // Strict fp32 must match to 1e-4; fp16 and TF32 (10-bit
                // mantissa products) to 1e-3.
                let need = if mode == "fp32" { 0.9999 } else { 0.999 };
                let ok = c >= need;
                if !ok {
                    failures += 1;
                }
                println!(
                    "{} minilm {mode} B={b}: min cosine vs CPU {c:.7} (need >= {need})",
                    if ok { "PASS" } else { "FAIL" }
                );
                cos = Some(c);
            }
            let e2e = be.compile_program(compiled.program()).unwrap();
            let e2e_ms = time_e2e(&e2e, &inputs, data.len(), runs);
            drop(e2e);
            let graph_ms = time_exe(&exe, &inputs, runs);
            let eager = be
                .options(CudaOptions {
                    cuda_graph: false,
                    ..opts
                })
                .compile_program(compiled.program())
                .unwrap();
            let eager_ms = time_exe(&eager, &inputs, runs);
            println!(
                "minilm {mode} B={b} seq={seq}: p50 {graph_ms:.3} ms (CUDA graph), {eager_ms:.3} ms (eager launches), {e2e_ms:.3} ms (CUDA graph + pinned async copies of ids/mask in, outputs out); {} launches, compile {compile_ms:.0} ms, PDL {}",
                exe.launch_count(),
                if exe.pdl() { "on" } else { "off" }
            );
            // Which cuBLASLt algorithm each GEMM shape runs (tuned at
            // compile unless RLX_CUDA_AUTOTUNE=0), once per shape.
            let mut algos = std::collections::BTreeSet::new();
            for (_, d) in exe.gemm_algos() {
                algos.insert(d.replace(", cached", ""));
            }
            for d in &algos {
                println!("  {mode} B={b} {d}");
            }
            let mut profile = serde_json::Map::new();
            if args.iter().any(|a| a == "--profile") {
                let prof = eager.profile().unwrap();
                let mut by: std::collections::BTreeMap<String, (f32, usize)> = Default::default();
                for (_, op, name, ms) in &prof {
                    // GEMMs apart from the kernels of the same node (the
                    // bias + GELU after the FFN up-projection).
                    let key = if name.starts_with("cublasLt") {
                        format!("{op}[cublasLt]")
                    } else if name.starts_with("sgemm") {
                        format!("{op}[rlx sgemm]")
                    } else if name.starts_with("hgemm") {
                        format!("{op}[rlx hgemm]")
                    } else {
                        op.clone()
                    };
                    let e = by.entry(key).or_default();
                    e.0 += ms;
                    e.1 += 1;
                }
                let total: f32 = prof.iter().map(|p| p.3).sum();
                println!("  profile {mode} B={b} (GPU time of each launch alone, CUDA graph of 5 repeats): sum {total:.3} ms vs {graph_ms:.3} ms per graph replay");
                for (op, (ms, n)) in by {
                    println!("    {op:<20} {n:>4} launches {ms:>8.3} ms");
                    profile.insert(op, serde_json::json!({"launches": n, "ms": ms}));
                }
            }
            json.push(serde_json::json!({"impl": "rlx-cuda", "mode": mode, "batch": b, "seq": seq,
                "p50_ms_graph": graph_ms, "p50_ms_eager": eager_ms, "p50_ms_e2e_copies": e2e_ms, "launches": exe.launch_count(), "pdl": exe.pdl(), "min_cosine_vs_cpu": cos,
                "profile_ms_by_op": profile, "gemm_algos": algos}));
        }
    }
    if let Some(p) = arg(args, "--json") {
        std::fs::write(p, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
    failures
}

/// The MLP 784-512-512-10 training step (mean cross-entropy, SGD momentum
/// 0.9, lr 0.01) resident on the GPU: parameters and momentum fed back on
/// the device, the whole step one CUDA graph. Checked against the CPU
/// running the same step graph; then img/s.
fn train(args: &[String]) -> usize {
    use rlx_autodiff::{nets, optim, train_step, Optimizer};
    let batches = list(arg(args, "--batches").unwrap_or("128,1024"));
    let steps: usize = arg(args, "--steps").unwrap_or("200").parse().unwrap();
    let be = Arc::new(CudaBackend::with_options(0, env_opts()).unwrap());
    rlx_runtime::register_backend(be.clone());
    let opt = Optimizer::Sgd {
        lr: 0.01,
        momentum: 0.9,
        weight_decay: 0.0,
    };
    let mut fails = 0;
    let mut json = Vec::new();
    for &b in &batches {
        let net = nets::mlp(&[784, 512, 512, 10], b, 1).unwrap();
        let layout = train_step(&net.loss, &net.param_indices(), &opt).unwrap();
        let mut carried = net.init.clone();
        carried.extend(optim::init_state(&opt, &carried).unwrap());
        let mut rng = Rng(7 + b as u64);
        let x = HostTensor::from_f64(
            DType::F32,
            [b, 784],
            (0..b * 784).map(|_| rng.unit()).collect(),
        )
        .unwrap();
        let y = HostTensor::from_f64(
            DType::F32,
            [b, 10],
            (0..b * 10)
                .map(|k| {
                    if k % 10 == (k / 10 * 7) % 10 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect(),
        )
        .unwrap();
        let compiled = match rlx::compile_with(
            &layout.graph,
            Target::Device(Device::Cuda),
            &CompileOptions::default(),
        ) {
            Ok(c) => c,
            Err(e) => {
                println!("FAIL train B={b}: does not compile for CUDA: {e}");
                fails += 1;
                continue;
            }
        };
        let exe = be.compile_program(compiled.program()).unwrap();
        // 5 steps on the GPU, on the CPU in f32, and on the CPU in f64 (the
        // reference). Some tensors (momentum of nearly cancelling bias
        // gradients) are ill-conditioned in f32: the GPU must be as close
        // to the f64 reference as the CPU's own f32 arithmetic is.
        let cpu = rlx::compile(&layout.graph, Device::Cpu).unwrap();
        let g64 = text::parse(&text::print(&layout.graph).replace("f32", "f64")).unwrap();
        let c64 = rlx::compile(&g64, Device::Cpu).unwrap();
        let to64 = |t: &HostTensor| {
            HostTensor::from_f64(DType::F64, t.shape().clone(), t.to_f64_vec().unwrap()).unwrap()
        };
        let (x64, y64) = (to64(&x), to64(&y));
        let (mut gc, mut cc) = (carried.clone(), carried.clone());
        let mut rc: Vec<HostTensor> = carried.iter().map(to64).collect();
        let mut last = (vec![], vec![], vec![]);
        for _ in 0..5 {
            let mut gi: Vec<&HostTensor> = gc.iter().collect();
            gi.extend([&x, &y]);
            let mut go = exe.run_cuda(&gi).unwrap();
            let mut ci: Vec<&HostTensor> = cc.iter().collect();
            ci.extend([&x, &y]);
            let mut co = cpu.run_refs(&ci).unwrap();
            let mut ri: Vec<&HostTensor> = rc.iter().collect();
            ri.extend([&x64, &y64]);
            let mut ro = c64.run_refs(&ri).unwrap();
            last = (go.clone(), co.clone(), ro.clone());
            gc = go.drain(1..).collect();
            cc = co.drain(1..).collect();
            rc = ro.drain(1..).collect();
        }
        let (dg, dc) = (rel_diffs(&last.0, &last.2), rel_diffs(&last.1, &last.2));
        let worst = dg.iter().cloned().fold(0f64, f64::max);
        let ok = dg.iter().zip(&dc).all(|(g, c)| *g <= (4.0 * c).max(1e-4));
        if !ok {
            fails += 1;
        }
        println!(
            "{} train B={b}: 5 steps, max relative difference to the CPU f64 reference per output: GPU {:?}, CPU f32 {:?}",
            if ok { "PASS" } else { "FAIL" },
            dg.iter().map(|d| format!("{d:.1e}")).collect::<Vec<_>>(),
            dc.iter().map(|d| format!("{d:.1e}")).collect::<Vec<_>>()
        );
        // Resident: outputs 1.. feed inputs 0..; data uploaded once.
        let n = layout.carried();
        exe.set_feedback(&(0..n).map(|k| (k + 1, k)).collect::<Vec<_>>())
            .unwrap();
        exe.keep_resident(&[n, n + 1]);
        let mut ins: Vec<&HostTensor> = gc.iter().collect();
        ins.extend([&x, &y]);
        for _ in 0..20 {
            exe.launch_async(&ins).unwrap();
        }
        exe.sync().unwrap();
        let t = Instant::now();
        for _ in 0..steps {
            exe.launch_async(&ins).unwrap();
        }
        exe.sync().unwrap();
        let secs = t.elapsed().as_secs_f64();
        let ips = (b * steps) as f64 / secs;
        let loss = exe.read_outputs().unwrap()[0].to_f64_vec().unwrap()[0];
        println!("train B={b}: {:.0} img/s ({:.1} us/step, {} launches/step, loss after {} steps {loss:.4})", ips, secs / steps as f64 * 1e6, exe.launch_count(), steps + 25);
        json.push(serde_json::json!({"impl": "rlx-cuda", "batch": b, "img_per_s": ips, "us_per_step": secs / steps as f64 * 1e6, "launches": exe.launch_count(), "max_rel_diff_vs_cpu": worst, "max_rel_diff_vs_f64_gpu": dg, "max_rel_diff_vs_f64_cpu_f32": dc}));
    }
    if let Some(p) = arg(args, "--json") {
        std::fs::write(p, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
    fails
}

/// Relative difference of each output (max |a-b| / max |b| per tensor).
fn rel_diffs(a: &[HostTensor], b: &[HostTensor]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let (x, y) = (x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
            let scale = y.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
            x.iter()
                .zip(&y)
                .fold(0f64, |m, (p, q)| m.max((p - q).abs()))
                / scale
        })
        .collect()
}

/// The MLP step on the CPU in f32 and in f64 (no GPU): how far f32
/// arithmetic itself moves the results after 5 steps.
fn train_ref(args: &[String]) -> usize {
    use rlx_autodiff::{nets, optim, train_step, Optimizer};
    let b: usize = arg(args, "--batch").unwrap_or("1024").parse().unwrap();
    let opt = Optimizer::Sgd {
        lr: 0.01,
        momentum: 0.9,
        weight_decay: 0.0,
    };
    let net = nets::mlp(&[784, 512, 512, 10], b, 1).unwrap();
    let layout = train_step(&net.loss, &net.param_indices(), &opt).unwrap();
    let g64 = text::parse(&text::print(&layout.graph).replace("f32", "f64")).unwrap();
    let mut carried = net.init.clone();
    carried.extend(optim::init_state(&opt, &carried).unwrap());
    let (x, y) = train_data(b);
    let to64 = |t: &HostTensor| {
        HostTensor::from_f64(DType::F64, t.shape().clone(), t.to_f64_vec().unwrap()).unwrap()
    };
    let c32 = rlx::compile(&layout.graph, Device::Cpu).unwrap();
    let c64 = rlx::compile(&g64, Device::Cpu).unwrap();
    let (mut a, mut r): (Vec<HostTensor>, Vec<HostTensor>) =
        (carried.clone(), carried.iter().map(to64).collect());
    let (x64, y64) = (to64(&x), to64(&y));
    let mut last = (vec![], vec![]);
    for _ in 0..5 {
        let mut ia: Vec<&HostTensor> = a.iter().collect();
        ia.extend([&x, &y]);
        let mut ir: Vec<&HostTensor> = r.iter().collect();
        ir.extend([&x64, &y64]);
        let mut oa = c32.run_refs(&ia).unwrap();
        let mut or = c64.run_refs(&ir).unwrap();
        last = (oa.clone(), or.clone());
        a = oa.drain(1..).collect();
        r = or.drain(1..).collect();
    }
    println!(
        "cpu f32 vs cpu f64 after 5 steps, per output: {:?}",
        rel_diffs(&last.0, &last.1)
            .iter()
            .map(|d| format!("{d:.1e}"))
            .collect::<Vec<_>>()
    );
    0
}

fn train_data(b: usize) -> (HostTensor, HostTensor) {
    let mut rng = Rng(7 + b as u64);
    let x = HostTensor::from_f64(
        DType::F32,
        [b, 784],
        (0..b * 784).map(|_| rng.unit()).collect(),
    )
    .unwrap();
    let y = HostTensor::from_f64(
        DType::F32,
        [b, 10],
        (0..b * 10)
            .map(|k| {
                if k % 10 == (k / 10 * 7) % 10 {
                    1.0
                } else {
                    0.0
                }
            })
            .collect(),
    )
    .unwrap();
    (x, y)
}

/// The f64 result of a GEMM case (`src` with `from` as its element
/// type) on `ins`, and the magnitude each output's error scales with: the
/// same graph without its activation on the inputs' absolute values
/// (Σ|a||b| + |bias| + |residual|).
fn f64_reference(src: &str, from: &str, ins: &[HostTensor]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let as64 = |abs: bool| -> Vec<HostTensor> {
        ins.iter()
            .map(|t| {
                let v = t.to_f64_vec().unwrap();
                let v = if abs {
                    v.into_iter().map(f64::abs).collect()
                } else {
                    v
                };
                HostTensor::from_f64(DType::F64, t.shape().clone(), v).unwrap()
            })
            .collect()
    };
    let run = |text: &str, abs: bool| -> Vec<Vec<f64>> {
        let g = text::parse(text).expect("f64 case parses");
        rlx_cpu::run_graph(&g, &as64(abs))
            .unwrap()
            .iter()
            .map(|t| t.to_f64_vec().unwrap())
            .collect()
    };
    let src64 = src.replace(from, "f64");
    (
        run(&src64, false),
        run(&src64.replace(" {activation=\"gelu\"}", ""), true),
    )
}

/// Outputs farther than `tol(want, mag)` from the reference (or NaN), and
/// the largest error.
fn outside(
    got: &[HostTensor],
    (want, mag): &(Vec<Vec<f64>>, Vec<Vec<f64>>),
    tol: impl Fn(f64, f64) -> f64,
) -> (usize, f64) {
    let mut bad = 0;
    let mut worst = 0.0f64;
    for ((g, w), m) in got.iter().zip(want).zip(mag) {
        for ((a, b), c) in g.to_f64_vec().unwrap().into_iter().zip(w).zip(m) {
            let e = (a - b).abs();
            worst = worst.max(e);
            if e > tol(*b, *c) || e.is_nan() {
                bad += 1;
            }
        }
    }
    (bad, worst)
}

/// Compile `g` for CUDA and run it: the outputs and each GEMM's choice.
fn run_gemms(
    base: &CudaBackend,
    g: &Graph,
    ins: &[HostTensor],
) -> Result<(Vec<HostTensor>, Vec<String>), String> {
    let c = compile_cuda(g, true)?;
    let exe = base
        .compile_program(c.program())
        .map_err(|e| e.to_string())?;
    let algos = exe.gemm_algos().into_iter().map(|(_, d)| d).collect();
    let outs = exe
        .run_cuda(&ins.iter().collect::<Vec<_>>())
        .map_err(|e| e.to_string())?;
    Ok((outs, algos))
}

/// Our own fp32 GEMM kernels (`sgemm.rs`), each forced in turn through
/// `CudaOptions::sgemm` on every eligible GEMM, against the CPU's f64 result
/// of the same graph within the fp32 dot-product error bound (below;
/// cuBLASLt's error on the same inputs is printed next to ours). Cases:
/// edges in m (features), n (tokens) and k, bias, a fused residual, and
/// batched sibling GEMMs with a bias per batch. Prints `N passed, M failed`.
fn sgemm() -> usize {
    const CASES: &[(&str, &str)] = &[
        ("linear_bias_residual_edges", "graph @g(%x: f32[2,37,132], %w: f32[52,132], %b: f32[52], %r: f32[2,37,52]) {\n  %t = permute(%w) {perm=[1,0]}\n  %y = matmul_bias_act(%x, %t, %b)\n  %z = add(%y, %r)\n  return %z\n}"),
        ("qkv_siblings_batched", "graph @g(%x: f32[2,37,132], %wq: f32[52,132], %bq: f32[52], %wk: f32[52,132], %bk: f32[52], %wv: f32[52,132], %bv: f32[52]) {\n  %tq = permute(%wq) {perm=[1,0]}\n  %q = matmul_bias_act(%x, %tq, %bq)\n  %tk = permute(%wk) {perm=[1,0]}\n  %k = matmul_bias_act(%x, %tk, %bk)\n  %tv = permute(%wv) {perm=[1,0]}\n  %v = matmul_bias_act(%x, %tv, %bv)\n  return %q, %k, %v\n}"),
        ("matmul_k_tail", "graph @g(%x: f32[3,29,132], %w: f32[44,132]) {\n  %t = permute(%w) {perm=[1,0]}\n  %y = matmul(%x, %t)\n  return %y\n}"),
        ("bias_gelu_multi_tile", "graph @g(%x: f32[300,388], %w: f32[132,388], %b: f32[132]) {\n  %t = permute(%w) {perm=[1,0]}\n  %y = matmul_bias_act(%x, %t, %b) {activation=\"gelu\"}\n  return %y\n}"),
    ];
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    let mut rng = Rng(0x5e33);
    let (mut pass, mut fail) = (0usize, 0usize);
    for (name, src) in CASES {
        let g = text::parse(src).expect("sgemm case parses");
        let ins = extra_inputs(&g, &mut rng);
        let reference = f64_reference(src, "f32", &ins);
        // The bound: each output within 2 (K + 2) u |a|·|b| (+ |bias| +
        // |residual|) of the f64 result, u = 2^-24 — the textbook error
        // bound of a K-term fp32 dot product plus two additions, doubled
        // for the GELU's slope (< 1.13).
        // K: every case's first input is the GEMM's left operand.
        let k = ins[0].shape().dims().last().copied().unwrap_or(0);
        let tol = 2.0 * (k as f64 + 2.0) * f64::powi(2.0, -24);
        let check = |got: &[HostTensor]| outside(got, &reference, |_, mag| tol * mag);
        // cuBLASLt (strict fp32) on the same inputs, for comparison.
        let with = |mode: &str| {
            base.options(CudaOptions {
                sgemm: rlx_cuda::sgemm::parse_mode(Some(mode)).expect("a known sgemm mode"),
                ..env_opts()
            })
        };
        let bar = match run_gemms(&with("0"), &g, &ins) {
            Ok((outs, _)) => check(&outs),
            Err(e) => {
                fail += 1;
                println!("FAIL sgemm/cublaslt/{name}: {e}");
                continue;
            }
        };
        println!(
            "     sgemm/cublaslt/{name}: max error vs f64 {:.2e}, {} outside the bound",
            bar.1, bar.0
        );
        for (tile, splits) in rlx_cuda::sgemm::TILES
            .iter()
            .flat_map(|t| [(t, 1), (t, 4)])
            .chain([
                (&rlx_cuda::sgemm::TILES[0], 2),
                (&rlx_cuda::sgemm::TILES[6], 8),
            ])
        {
            let kname = tile.candidate_name(splits);
            let r = run_gemms(&with(&kname), &g, &ins).and_then(|(outs, algos)| {
                if algos.is_empty() || !algos.iter().all(|d| d.contains(&kname)) {
                    return Err(format!("not every GEMM ran {kname}: {algos:?}"));
                }
                let (bad, e) = check(&outs);
                if bad == 0 {
                    Ok(format!("max error vs f64 {e:.2e} (cuBLASLt's {:.2e})", bar.1))
                } else {
                    Err(format!("{bad} outputs outside 2 (K + 2) u |a||b|; max error vs f64 {e:.2e} (cuBLASLt's {:.2e})", bar.1))
                }
            });
            tally(&mut pass, &mut fail, &format!("sgemm/{kname}/{name}"), r);
        }
    }
    println!("{pass} passed, {fail} failed");
    fail
}

fn tally(pass: &mut usize, fail: &mut usize, what: &str, r: Result<String, String>) {
    match r {
        Ok(m) => {
            *pass += 1;
            println!("ok   {what}: {m}");
        }
        Err(e) => {
            *fail += 1;
            println!("FAIL {what}: {e}");
        }
    }
}

/// Our own tensor-core 16-bit GEMM kernels (`hgemm.rs`), each forced in
/// turn through `CudaOptions::hgemm` on every GEMM, f16 and bf16, against the
/// CPU's f64 result on the same 16-bit inputs. Bound: the fp32
/// accumulation's 2 (K + 2) 2^-24 Σ|a||b| (as for sgemm) plus one
/// rounding to the 16-bit type (2^-11 / 2^-8 relative) — the kernels
/// round once, after bias, residual and activation. cuBLASLt + the
/// separate bias + GELU kernel rounds twice; its error is printed for
/// comparison. The GELU case must run fused (its tail kernel dropped).
fn hgemm() -> usize {
    const CASES: &[(&str, &str)] = &[
        ("linear_bias_residual_edges", "graph @g(%x: f32[2,37,136], %w: f32[52,136], %b: f32[52], %r: f32[2,37,52]) {\n  %t = permute(%w) {perm=[1,0]}\n  %y = matmul_bias_act(%x, %t, %b)\n  %z = add(%y, %r)\n  return %z\n}"),
        ("qkv_siblings_batched", "graph @g(%x: f32[2,37,136], %wq: f32[52,136], %bq: f32[52], %wk: f32[52,136], %bk: f32[52], %wv: f32[52,136], %bv: f32[52]) {\n  %tq = permute(%wq) {perm=[1,0]}\n  %q = matmul_bias_act(%x, %tq, %bq)\n  %tk = permute(%wk) {perm=[1,0]}\n  %k = matmul_bias_act(%x, %tk, %bk)\n  %tv = permute(%wv) {perm=[1,0]}\n  %v = matmul_bias_act(%x, %tv, %bv)\n  return %q, %k, %v\n}"),
        ("matmul_k_tail", "graph @g(%x: f32[3,29,136], %w: f32[44,136]) {\n  %t = permute(%w) {perm=[1,0]}\n  %y = matmul(%x, %t)\n  return %y\n}"),
        ("bias_gelu_fused_multi_tile", "graph @g(%x: f32[300,392], %w: f32[132,392], %b: f32[132]) {\n  %t = permute(%w) {perm=[1,0]}\n  %y = matmul_bias_act(%x, %t, %b) {activation=\"gelu\"}\n  return %y\n}"),
    ];
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    let mut rng = Rng(0x4e16);
    let (mut pass, mut fail) = (0usize, 0usize);
    for (dt, unit) in [("f16", f64::powi(2.0, -11)), ("bf16", f64::powi(2.0, -8))] {
        for (name, src) in CASES {
            let src = src.replace("f32", dt);
            let g = text::parse(&src).expect("hgemm case parses");
            let ins = extra_inputs(&g, &mut rng);
            let reference = f64_reference(&src, dt, &ins);
            let k = ins[0].shape().dims().last().copied().unwrap_or(0);
            let acc = 2.0 * (k as f64 + 2.0) * f64::powi(2.0, -24);
            let tol = |want: f64, mag: f64| unit * (want.abs() + acc * mag) + acc * mag;
            let with = |mode: &str| {
                base.options(CudaOptions {
                    hgemm: rlx_cuda::hgemm::parse_mode(Some(mode)).expect("a known hgemm mode"),
                    ..env_opts()
                })
            };
            let bar = match run_gemms(&with("0"), &g, &ins) {
                Ok((outs, _)) => outside(&outs, &reference, tol),
                Err(e) => {
                    fail += 1;
                    println!("FAIL hgemm/{dt}/cublaslt/{name}: {e}");
                    continue;
                }
            };
            println!(
                "     hgemm/{dt}/cublaslt/{name}: max error vs f64 {:.2e}, {} outside our bound",
                bar.1, bar.0
            );
            for tile in rlx_cuda::hgemm::TILES {
                let kname = tile.name();
                let r = run_gemms(&with(&kname), &g, &ins).and_then(|(outs, algos)| {
                    if algos.is_empty() || !algos.iter().all(|d| d.contains(&kname)) {
                        return Err(format!("not every GEMM ran {kname}: {algos:?}"));
                    }
                    if src.contains("gelu") && !algos.iter().all(|d| d.contains("+ bias + activation")) {
                        return Err(format!("the GELU was not fused: {algos:?}"));
                    }
                    let (bad, e) = outside(&outs, &reference, tol);
                    if bad == 0 {
                        Ok(format!("max error vs f64 {e:.2e} (cuBLASLt's {:.2e})", bar.1))
                    } else {
                        Err(format!("{bad} outputs outside the bound; max error vs f64 {e:.2e} (cuBLASLt's {:.2e})", bar.1))
                    }
                });
                tally(
                    &mut pass,
                    &mut fail,
                    &format!("hgemm/{dt}/{kname}/{name}"),
                    r,
                );
            }
        }
    }
    println!("{pass} passed, {fail} failed");
    fail
}

/// Tensor-core throughput ceiling of `mma.sync.m16n8k16` (f16 inputs,
/// fp32 accumulation) on this GPU: every warp issues `chains` independent
/// MMAs per step from registers only (no memory traffic), 16 warps per SM.
/// Prints TFLOP/s per chain count — the bound our `hgemm.rs` kernels
/// (and the tensor-core attention) can reach at best.
fn mma_peak() -> usize {
    use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
    let ctx = CudaContext::new(0).expect("CUDA device");
    let stream = ctx.default_stream();
    let sms = ctx
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .expect("SM count") as u32;
    let mut src = String::from(rlx_cuda::ctype::PREAMBLE);
    for chains in [1, 2, 4, 8, 16] {
        src += &format!(
            r#"
extern "C" __global__ void mma_peak_{chains}(float* out, int iters) {{
  unsigned a[4] = {{threadIdx.x | 0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u}};
  unsigned b0 = 0x3c003c00u ^ blockIdx.x, b1 = 0x3c003c00u;
  float c[{chains}][4];
  for (int j = 0; j < {chains}; ++j) {{ c[j][0] = 0.f; c[j][1] = 0.f; c[j][2] = 0.f; c[j][3] = 0.f; }}
  for (int i = 0; i < iters; ++i) {{
    #pragma unroll
    for (int j = 0; j < {chains}; ++j) mma_f16(c[j], a, b0, b1);
  }}
  float s = 0.f;
  for (int j = 0; j < {chains}; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}}
"#
        );
    }
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        &src,
        rlx_cuda::device::nvrtc_options("compute_90", false),
    )
    .expect("NVRTC");
    let m = ctx.load_module(ptx).expect("module");
    let (blocks, threads, iters) = (sms * 4, 128u32, 20_000i32);
    let mut out = stream
        .alloc_zeros::<f32>((blocks * threads) as usize)
        .expect("alloc");
    for chains in [1u32, 2, 4, 8, 16] {
        let f = m
            .load_function(&format!("mma_peak_{chains}"))
            .expect("function");
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut best = f32::INFINITY;
        for _ in 0..4 {
            let timed = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let e0 = ctx.new_event(timed).unwrap();
            let e1 = ctx.new_event(timed).unwrap();
            e0.record(&stream).unwrap();
            let mut b = stream.launch_builder(&f);
            b.arg(&mut out).arg(&iters);
            // SAFETY: `out` holds one float per launched thread.
            unsafe { b.launch(cfg) }.expect("launch");
            e1.record(&stream).unwrap();
            stream.synchronize().unwrap();
            best = best.min(e0.elapsed_ms(&e1).unwrap());
        }
        let flop = blocks as f64 * (threads / 32) as f64 * iters as f64 * chains as f64 * 4096.0;
        println!(
            "mma.sync m16n8k16 f16->f32, {chains} independent per warp, {} warps/SM: {:.0} TFLOP/s",
            threads / 32 * 4,
            flop / (best as f64 * 1e-3) / 1e12
        );
    }
    0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(|s| s.as_str()) == Some("train-ref") {
        std::process::exit(train_ref(&args[2..]) as i32);
    }
    // RLX_* settings (RLX_CUDA_AUTOTUNE=0, RLX_CUDA_ATTN_SPLIT=w4, ... for
    // tests/gpu/run.sh's A/B runs) through the one edge.
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
        _ => {
            eprintln!("usage: gpu parity [DIR] | gpu minilm --weights F --config F [...]");
            2
        }
    };
    std::process::exit(if fails == 0 { 0 } else { 1 });
}
