//! `gpu sgemm`, `gpu hgemm` and `gpu mma-peak`: our own GEMM kernels, each
//! forced, against the CPU's f64 result; the tensor cores' ceiling.

use super::*;

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
pub(super) fn sgemm() -> usize {
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
pub(super) fn hgemm() -> usize {
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
pub(super) fn mma_peak() -> usize {
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
    let ptx =
        cudarc::nvrtc::compile_ptx_with_opts(&src, rlx_cuda::device::nvrtc_options("compute_90"))
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
