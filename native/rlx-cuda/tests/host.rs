//! Host-side tests: they need no GPU and run in CI. The GPU tests are
//! `examples/gpu/` (one module per suite), run on the H200 by
//! `tests/gpu/run.sh`.

mod common;
use common::ClaimsOnly;
use rlx_cuda::{claims, plan, CudaBackend, CudaError};
use rlx_ir::text::parse;
use rlx_runtime::{legalize, DispatchOptions};

#[test]
fn claims_cover_at_least_80_op_kinds_that_exist() {
    let c = claims();
    assert!(c.ops.len() >= 80, "only {} ops claimed", c.ops.len());
    for op in c.ops.keys() {
        assert!(
            rlx_ir::lookup(op).is_some(),
            "claimed op `{op}` is not in the op registry"
        );
    }
}

#[test]
fn no_driver_is_a_typed_error_not_a_panic() {
    // CI and this build machine have no NVIDIA driver.
    if rlx_cuda::device::libraries_present().is_ok() {
        return; // on a GPU machine this test has nothing to check
    }
    match CudaBackend::new() {
        Err(CudaError::LibraryMissing { lib }) => assert_eq!(lib, "libcuda"),
        other => panic!("expected LibraryMissing, got {other:?}"),
    }
}

fn planned(text: &str) -> plan::Plan {
    let g = parse(text).unwrap();
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let program = rlx_opt_plan(l.graph);
    plan::plan(&program).unwrap()
}

fn rlx_opt_plan(g: rlx_ir::Graph) -> rlx_ir::lir::Program {
    rlx_ir::lir::Program::from_graph(g)
}

#[test]
fn elementwise_chain_generates_one_kernel_per_node_with_baked_strides() {
    let p = planned(
        "graph @g(%a: f32[2,3], %b: f32[3]) {\n  %c = add(%a, %b)\n  %d = exp(%c)\n  return %d\n}",
    );
    // add (broadcast stride 0 on the first axis of b), exp; transfers of
    // inputs alias their buffers, and so does the final output transfer
    // (no kernel runs after it).
    assert!(p.source.contains("expf("), "{}", p.source);
    assert!(p.source.contains("(x0 + x1)"), "{}", p.source);
    assert_eq!(p.launches.len(), 2, "{:?}", p.kernels);
}

#[test]
fn softmax_layer_norm_matmul_and_attention_lower() {
    let p = planned(
        "graph @g(%x: f32[2,4,8], %w: f32[8,8], %g: f32[8], %b: f32[8]) {\n  %y = matmul(%x, %w)\n  %n = layer_norm(%y, %g, %b)\n  %s = softmax(%n)\n  return %s\n}",
    );
    assert!(p
        .launches
        .iter()
        .any(|l| matches!(l, plan::Launch::Gemm { .. })));
    assert!(p.source.contains("sqrtf"), "layer norm kernel missing");
    let a = planned(
        "graph @g(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}",
    );
    assert_eq!(a.consts.len(), 1, "the causal mask becomes a constant");
    assert!(a.source.contains("warp_max"));
}

#[test]
fn movement_ops_take_their_index_map_from_the_reference() {
    let p = planned("graph @g(%x: f32[2,3]) {\n  %y = flip(%x) {axes=[1]}\n  return %y\n}");
    // The table for flip along axis 1 of [[0,1,2],[3,4,5]].
    let t = p.consts.last().unwrap().to_i64_vec().unwrap();
    assert_eq!(t, vec![2, 1, 0, 5, 4, 3]);
}

#[test]
fn unsupported_dtypes_are_typed_errors() {
    let g = parse("graph @g(%x: c64[2]) {\n  return %x\n}").unwrap();
    let program = rlx_ir::lir::Program::from_graph(g);
    assert!(matches!(plan::plan(&program), Err(CudaError::Input(_))));
}

/// Legalize for CUDA and run the real memory planner (views, reuse, in place).
fn planned_lir(text: &str) -> plan::Plan {
    let g = parse(text).unwrap();
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let program = rlx_opt::plan(l.graph).unwrap();
    plan::plan(&program).unwrap()
}

/// [`planned_lir`] after rlx-opt's pipeline, which decides the folds
/// (`matmul_residual`, `attention_merged`) the planner lowers.
fn fused_lir(text: &str) -> plan::Plan {
    let g = parse(text).unwrap();
    let eval = |g: &rlx_ir::Graph, i: &[rlx_ir::HostTensor]| {
        rlx_cpu::run_graph(g, i).map_err(|e| e.to_string())
    };
    let (opt, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
    let l = legalize(&opt, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    plan::plan(&rlx_opt::plan(l.graph).unwrap()).unwrap()
}

fn gemms(p: &plan::Plan) -> Vec<&plan::Gemm> {
    p.launches
        .iter()
        .filter_map(|l| match l {
            plan::Launch::Gemm { gemm, .. } => Some(gemm),
            _ => None,
        })
        .collect()
}

#[test]
fn linear_then_residual_add_is_one_gemm_with_epilogues() {
    let p = fused_lir(
        "graph @g(%x: f32[3,8,16], %w: f32[16,16], %b: f32[16], %r: f32[3,8,16]) {\n  %y = matmul_bias_act(%x, %w, %b)\n  %z = add(%y, %r)\n  return %z\n}",
    );
    let g = gemms(&p);
    assert_eq!(g.len(), 1);
    assert!(g[0].bias.is_some() && g[0].residual.is_some(), "{:?}", g[0]);
    // The 3 batches of x stacked into one GEMM against the shared weight.
    assert_eq!((g[0].m, g[0].n, g[0].k, g[0].batch), (16, 24, 16, 1));
    // No elementwise kernel for the bias or the add (only the output copy).
    assert!(!p.source.contains("(x0 + x1)"), "{}", p.source);
}

/// The fold is decided on the graph, not on the schedule: a residual
/// computed after the product is added in its epilogue all the same; with
/// an activation, the product goes to scratch and one kernel applies the
/// activation and adds the residual.
#[test]
fn residual_computed_later_or_after_an_activation() {
    let p = fused_lir(
        "graph @g(%x: f32[8,16], %w: f32[16,16], %r: f32[8,16]) {\n  %y = matmul(%x, %w)\n  %e = exp(%r)\n  %z = add(%y, %e)\n  return %z\n}",
    );
    assert_eq!(p.kernels_of("matmul_residual"), 1, "{:?}", p.kernels);
    let g = gemms(&p);
    assert!(g.len() == 1 && g[0].residual.is_some(), "{g:?}");
    let p = fused_lir(
        "graph @g(%x: f32[8,16], %w: f32[16,16], %b: f32[16], %r: f32[8,16]) {\n  %y = matmul_bias_act(%x, %w, %b) {activation=\"relu\"}\n  %z = add(%y, %r)\n  return %z\n}",
    );
    let g = gemms(&p);
    assert!(
        g.len() == 1 && g[0].residual.is_none() && g[0].bias.is_none(),
        "{g:?}"
    );
    assert_eq!(p.kernels_of("matmul_residual"), 2, "{:?}", p.kernels);
    assert!(
        p.source.contains("(x0 + x1)") && p.source.contains("+ x2)"),
        "{}",
        p.source
    );
}

#[test]
fn attention_writes_into_the_following_permute_reshape() {
    let src = "graph @g(%q: f32[2,4,16,8], %k: f32[2,4,16,8], %v: f32[2,4,16,8]) {\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,16,32]}\n  return %r\n}";
    let p = fused_lir(src);
    let reshape_kernels = p.kernels_of("reshape");
    assert_eq!(reshape_kernels, 0, "{:?}", p.kernels);
    // The attention output stride over heads is the head dim (8), over rows 32.
    assert!(p.source.contains("row * 32LL"), "{}", p.source);
}

/// MiniLM's shape (6 layers, 12 heads of 32) through the real pipeline.
fn minilm_plan(batch: usize) -> plan::Plan {
    minilm_plan_as(batch, "f32", true)
}

/// MiniLM as a `dtype` graph, planned with or without tensor-core kernels.
fn minilm_plan_as(batch: usize, dtype: &str, tensor_cores: bool) -> plan::Plan {
    let cfg = rlx_models::bert::BertConfig::from_json(
        r#"{"vocab_size": 1000, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 1536, "max_position_embeddings": 512, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#,
    )
    .unwrap();
    let g = rlx_models::bert::Bert::new(cfg, true)
        .graph(batch, 128)
        .unwrap();
    let g = parse(&rlx_ir::text::print(&g).replace("f32", dtype)).unwrap();
    let eval = |g: &rlx_ir::Graph, i: &[rlx_ir::HostTensor]| {
        rlx_cpu::run_graph(g, i).map_err(|e| e.to_string())
    };
    let (opt, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
    let l = legalize(&opt, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let program = rlx_opt::plan(l.graph).unwrap();
    plan::plan_for(&program, tensor_cores).unwrap()
}

/// A call of the preamble's f16 tensor-core helper (`mma.sync.m16n8k16`).
const MMA_F16: &str = "mma_f16(";

/// Whether the plan's kernels (not the preamble's helpers, which every
/// module carries) use a tensor-core MMA.
fn calls_mma(p: &plan::Plan) -> bool {
    let k = p.source.replace(rlx_cuda::ctype::PREAMBLE, "");
    k.contains("mma_f16(") || k.contains("mma_bf16(")
}

#[test]
fn f16_attention_keeps_scores_on_chip_with_tensor_cores() {
    // B=32: 384 heads, which without tensor cores take the cuBLAS path
    // (scores through global memory).
    let p = minilm_plan_as(32, "f16", true);
    assert!(calls_mma(&p) && p.source.contains(MMA_F16));
    // Heads of 32: registers capped so 3 blocks of 8 warps share an SM
    // (384 heads in one wave on an H200).
    assert!(p.source.contains("__launch_bounds__(256, 3)"));
    // MiniLM's padding mask (broadcast over query rows) is staged in shared memory.
    assert!(p.source.contains("ms[j] = "), "mask not staged");
    let batched = |p: &plan::Plan| {
        p.launches
            .iter()
            .filter(|l| matches!(l, plan::Launch::GemmBatched { .. }))
            .count()
    };
    assert_eq!(batched(&p), 0, "no batched score GEMMs");
    // Scratch: only the 6 batched Q/K/V outputs, no score buffers.
    assert!(
        p.scratch.len() == 6 && p.scratch.iter().all(|&b| b == 3 * 32 * 128 * 384 * 2),
        "no score scratch buffers: {:?}",
        p.scratch
    );
    // Each attention is one launch.
    let att = p.kernels_of("attention_merged");
    assert_eq!(att, 6);
    // It writes the merged-heads layout (attention_merged): no reshape
    // copies left.
    let reshapes = p.kernels_of("reshape");
    assert_eq!(reshapes, 0, "{:?}", p.kernels);
    assert_eq!(p.launches.len(), 52);
    // Pre-sm_80 GPUs (or f32) get no mma instruction.
    let old = minilm_plan_as(32, "f16", false);
    assert!(!calls_mma(&old));
    assert_eq!(batched(&old), 12);
    assert!(!calls_mma(&minilm_plan_as(32, "f32", true)));
}

/// NVRTC compiles what the planner generates. NVRTC needs no GPU, only
/// libnvrtc (CI has none: the test says so and checks nothing there; the
/// GPU machine and a build machine with the `nvidia-cuda-nvrtc` wheel on
/// LD_LIBRARY_PATH run it).
#[test]
fn generated_sources_compile_with_nvrtc_where_available() {
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("libnvrtc not found: NVRTC compile test skipped");
        return;
    }
    let mut sources = vec![
        minilm_plan_as(2, "f32", true).source,
        minilm_plan_as(32, "f16", true).source,
        minilm_plan_as(1, "bf16", true).source,
        // 96 heads: the 4-rows-per-warp f32 attention, float4 staging and
        // the padding mask read once per key.
        minilm_plan_as(8, "f32", true).source,
    ];
    for dt in ["f16", "bf16"] {
        for src in [
            "graph @g(%q: f32[2,4,40,64], %k: f32[2,4,128,64], %v: f32[2,4,128,32], %m: f32[2,1,40,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}",
            "graph @g(%q: f32[3,48,32], %k: f32[3,48,32], %v: f32[3,48,16]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}",
        ] {
            let p = planned_lir(&src.replace("f32", dt));
            assert!(calls_mma(&p), "{dt}: {}", p.source);
            sources.push(p.source);
        }
    }
    // Gathers read by their elementwise reader or inside a layer norm.
    for dt in ["f32", "f16", "bf16"] {
        for src in [GATHER_OUTER_AXIS, EMBEDDINGS_LN, BIAS_GELU, NONZERO_MASK_TC] {
            sources.push(planned_lir(&src.replace("f32", dt)).source);
        }
    }
    // Reductions with fused producers, epilogues and row consumers.
    for dt in ["f32", "f16", "bf16", "f64"] {
        for src in [
            "graph @g(%x: f32[3,7,40], %m: f32[3,7,1]) {\n  %me = exp(%m)\n  %a = mul(%x, %me)\n  %s = reduce_sum(%a) {axes=[1]}\n  %c = reduce_sum(%me) {axes=[1]}\n  %cc = clamp(%c) {min=1e-9}\n  %mean = div(%s, %cc)\n  %sq = mul(%mean, %mean)\n  %n = reduce_sum(%sq) {axes=[1], keepdim=true}\n  %r = sqrt(%n)\n  %y = div(%mean, %r)\n  return %y\n}",
            "graph @g(%x: f32[4,9,6]) {\n  %a = neg(%x)\n  %mx = argmax(%a) {axis=1}\n  %mn = reduce_max(%x) {axes=[1], keepdim=true}\n  %y = sub(%x, %mn)\n  return %y, %mx\n}",
            "graph @g(%x: f32[40,1100]) {\n  %mx = reduce_max(%x) {axes=[0]}\n  %mn = reduce_mean(%x) {axes=[0]}\n  %p = reduce_prod(%x) {axes=[0]}\n  %q = reduce_min(%x) {axes=[0]}\n  return %mx, %mn, %p, %q\n}",
        ] {
            sources.push(planned(&src.replace("f32", dt)).source);
        }
    }
    for src in &sources {
        let opts = rlx_cuda::device::nvrtc_options("compute_90");
        if let Err(e) = cudarc::nvrtc::compile_ptx_with_opts(src, opts) {
            let log = match e {
                cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                    log.to_string_lossy().into_owned()
                }
                other => format!("{other:?}"),
            };
            panic!("NVRTC: {log}");
        }
    }
}

/// Our own fp32 GEMM kernels compile, one entry point per tile, and keep
/// their accumulators and staging registers in registers (no `.local`
/// arrays in the PTX). Skipped without libnvrtc, like the test above.
#[test]
fn sgemm_kernels_compile_without_local_memory() {
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("libnvrtc not found: NVRTC compile test skipped");
        return;
    }
    let opts = rlx_cuda::device::nvrtc_options("compute_90");
    let ptx = match cudarc::nvrtc::compile_ptx_with_opts(rlx_cuda::sgemm::source(), opts) {
        Ok(p) => p.to_src(),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => {
            panic!("NVRTC: {}", log.to_string_lossy())
        }
        Err(e) => panic!("NVRTC: {e:?}"),
    };
    for t in rlx_cuda::sgemm::TILES {
        assert!(
            ptx.contains(&format!(".entry {}(", t.name())),
            "{}",
            t.name()
        );
    }
    assert!(!ptx.contains(".local"), "local memory in the sgemm PTX");
}

/// Our own tensor-core 16-bit GEMM kernels compile for f16 and bf16, with
/// and without an activation, one entry point per tile, with no `.local`
/// arrays (accumulators and fragments in registers). Skipped without
/// libnvrtc.
#[test]
fn hgemm_kernels_compile_without_local_memory() {
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("libnvrtc not found: NVRTC compile test skipped");
        return;
    }
    for d in [rlx_ir::DType::F16, rlx_ir::DType::BF16] {
        let gelu = rlx_cuda::codegen::expr::unary("gelu", d, "y").unwrap();
        for act in [None, Some(gelu.as_str())] {
            let opts = rlx_cuda::device::nvrtc_options("compute_90");
            let ptx =
                match cudarc::nvrtc::compile_ptx_with_opts(rlx_cuda::hgemm::source(d, act), opts) {
                    Ok(p) => p.to_src(),
                    Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => {
                        panic!("NVRTC: {}", log.to_string_lossy())
                    }
                    Err(e) => panic!("NVRTC: {e:?}"),
                };
            if std::env::var_os("RLX_DUMP_PTX").is_some() {
                std::fs::write(format!("/tmp/hgemm-{d}.ptx"), &ptx).unwrap();
            }
            for t in rlx_cuda::hgemm::TILES {
                assert!(
                    ptx.contains(&format!(".entry {}(", t.name())),
                    "{}",
                    t.name()
                );
            }
            assert!(
                !ptx.contains(".local"),
                "local memory in the hgemm PTX ({d}, {act:?})"
            );
        }
    }
}

#[test]
fn minilm_plans_with_fused_epilogues_and_attention_layout() {
    let p = minilm_plan(1);
    let ops: Vec<&str> = p
        .kernels
        .iter()
        .map(|(n, _)| p.node_ops[*n].as_str())
        .collect();
    let count = |op: &str| ops.iter().filter(|o| **o == op).count();
    // 6 layers of 8 launches, 1 for the embeddings (the three lookups and
    // their sum computed inside the layer norm; the attention reads the
    // mask ids itself, no `ids != 0` kernel), 3 for the pooling (mean over
    // the mask + L2 normalize: reductions fuse their elementwise
    // neighbours, the mask's cast and the mean are recomputed by their
    // two readers each), and the outputs need no copy.
    assert_eq!(p.launches.len(), 52);
    assert_eq!(count("cast") + count("div"), 0, "{:?}", p.kernels);
    assert_eq!(count("ne"), 0);
    assert!(
        p.source.contains("const long long* __restrict__ in3"),
        "attention reads the i64 mask"
    );
    assert_eq!(count("embedding"), 0);
    assert_eq!(count("fused_elementwise"), 0);
    // The embedding layer norm checks the three lookups' indices.
    let first = &p.launches[0];
    assert!(
        matches!(first, plan::Launch::Kernel { node, err: true, .. } if p.node_ops[*node] == "layer_norm"),
        "{first:?}"
    );
    // Q, K and V of each layer are one GEMM batched over their weights
    // (allocated back to back: a weight group and a bias group per layer),
    // with a per-batch bias, into a scratch buffer.
    let qkv: Vec<&plan::Gemm> = gemms(&p).into_iter().filter(|g| g.batch == 3).collect();
    assert_eq!(qkv.len(), 6);
    assert!(qkv
        .iter()
        .all(|g| g.bias.is_some() && g.bias_stride == 384 && g.stride_a == 384 * 384));
    assert_eq!(p.input_groups.len(), 12);
    assert!(p.input_groups.iter().all(|g| g.len() == 3));
    // q/k/v then live in scratch, apart from the merged-heads buffer, so
    // the attention writes that layout directly: no reshape copies.
    assert_eq!(count("reshape"), 0);
    assert_eq!(count("attention_merged"), 6);
    // Every linear without an activation has its bias (and the residual
    // add after the output projections) in the cuBLASLt epilogue.
    let with_residual = p
        .launches
        .iter()
        .filter(|l| matches!(l, plan::Launch::Gemm { gemm, .. } if gemm.residual.is_some()))
        .count();
    assert_eq!(with_residual, 12);
    assert_eq!(count("add"), 0);
    assert_eq!(count("matmul_residual"), 12);
}

#[test]
fn staging_layout_packs_aligned_and_disjoint() {
    use rlx_cuda::staging::{pack, ALIGN};
    // Odd sizes of mixed dtypes (a 37x129 f32, 5 i64, 21 f16, an empty tensor, the 4-byte error flag).
    let sizes = [37 * 129 * 4, 5 * 8, 21 * 2, 0, 4];
    let (offs, total) = pack(&sizes);
    assert_eq!(offs.len(), sizes.len());
    assert_eq!(offs[0], 0);
    for k in 0..sizes.len() {
        assert_eq!(offs[k] % ALIGN, 0, "offset {k} not aligned");
        assert!(offs[k] + sizes[k] <= total);
        if k + 1 < sizes.len() {
            assert!(
                offs[k] + sizes[k] <= offs[k + 1],
                "ranges {k} and {} overlap",
                k + 1
            );
            // No more padding than needed.
            assert!(offs[k + 1] - (offs[k] + sizes[k]) < ALIGN);
        }
    }
    // 19092 bytes end at 19092; the next starts at the next multiple of 256.
    assert_eq!(offs[1], 19200);
    assert_eq!(total, offs[4] + 4);
    assert_eq!(pack(&[]), (vec![], 0));
}

/// `attention_merged` gets a buffer of its own (q, k and v are freed only
/// after its step), so the tensor-core kernel (f16) and the f32 one both
/// write the merged layout, and no copy is left.
#[test]
fn merged_attention_writes_its_own_buffer_on_every_path() {
    let src = "graph @g(%x: f16[2,128,384], %y: f16[2,128,384], %z: f16[2,128,384]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,128,12,32]}\n  %rb = reshape(%b) {shape=[2,128,12,32]}\n  %rc = reshape(%c) {shape=[2,128,12,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  return %r\n}";
    let p = fused_lir(src);
    let reshapes = |p: &plan::Plan| p.kernels_of("reshape");
    assert_eq!(reshapes(&p), 0, "{:?}", p.kernels);
    assert!(calls_mma(&p));
    let p32 = fused_lir(&src.replace("f16", "f32"));
    assert_eq!(reshapes(&p32), 0, "{:?}", p32.kernels);
    assert_eq!(p32.kernels_of("attention_merged"), 1, "{:?}", p32.kernels);
    assert!(p32.source.contains("warp_max"));
    assert!(!calls_mma(&p32));
}

#[test]
fn sibling_gemms_become_one_batched_gemm_over_grouped_weights() {
    let src = "graph @g(%x: f32[2,16,32], %wq: f32[24,32], %bq: f32[24], %wk: f32[24,32], %bk: f32[24], %wv: f32[24,32], %bv: f32[24]) {\n  %tq = permute(%wq) {perm=[1,0]}\n  %q = matmul_bias_act(%x, %tq, %bq)\n  %tk = permute(%wk) {perm=[1,0]}\n  %k = matmul_bias_act(%x, %tk, %bk)\n  %tv = permute(%wv) {perm=[1,0]}\n  %v = matmul_bias_act(%x, %tv, %bv)\n  %s = add(%q, %k)\n  return %s, %v\n}";
    let p = planned_lir(src);
    let g = gemms(&p);
    assert_eq!(g.len(), 1, "{:?}", p.kernels);
    assert_eq!(g[0].batch, 3);
    // Group members 24*32*4 = 3072 bytes apart (a multiple of 256), biases 256.
    assert_eq!(g[0].stride_a, 768);
    assert_eq!(g[0].bias_stride, 64);
    assert_eq!(p.input_groups, vec![vec![1, 3, 5], vec![2, 4, 6]]);
    // Different weight views (k's weight not transposed) are not siblings:
    // q and v are batched, k is its own GEMM.
    let mixed = planned_lir(&src.replace("%wk: f32[24,32]", "%wk: f32[32,24]").replace(
        "%tk = permute(%wk) {perm=[1,0]}\n  %k = matmul_bias_act(%x, %tk, %bk)",
        "%k = matmul_bias_act(%x, %wk, %bk)",
    ));
    let mut batches: Vec<i32> = gemms(&mixed).iter().map(|g| g.batch).collect();
    batches.sort();
    assert_eq!(batches, vec![1, 2]);
    assert_eq!(mixed.input_groups, vec![vec![1, 5], vec![2, 6]]);
}

#[test]
fn reductions_fuse_their_elementwise_producer_epilogue_and_row_consumer() {
    // Mean pooling over the mask, then L2 normalize: 11 nodes (+ the output
    // transfer) in 3 kernels — mul into the first sum, clamp after the
    // count, mul into the norm's sum, sqrt after it and the division by it
    // over each row; `exp` and the mean's `div` (read twice each) are
    // recomputed by their readers (`inline.rs`).
    let p = planned(
        "graph @g(%x: f32[3,7,40], %m: f32[3,7,1]) {\n  %me = exp(%m)\n  %a = mul(%x, %me)\n  %s = reduce_sum(%a) {axes=[1]}\n  %c = reduce_sum(%me) {axes=[1]}\n  %cc = clamp(%c) {min=1e-9}\n  %mean = div(%s, %cc)\n  %sq = mul(%mean, %mean)\n  %n = reduce_sum(%sq) {axes=[1], keepdim=true}\n  %r = sqrt(%n)\n  %y = div(%mean, %r)\n  return %y\n}",
    );
    let ops: Vec<&str> = p
        .kernels
        .iter()
        .map(|(n, _)| p.node_ops[*n].as_str())
        .collect();
    assert_eq!(
        ops,
        ["reduce_sum", "reduce_sum", "reduce_sum"],
        "{:?}",
        p.kernels
    );
    assert_eq!(p.launches.len(), 3);
    // The producer's value is rounded as storing it would round it (its
    // operand `exp(m)` recomputed as `il1_`), the epilogue's too; the row
    // consumer reads the row's value `z_`.
    assert!(
        p.source.contains("x = ((float)(((float)((x0 * il1_)))))"),
        "{}",
        p.source
    );
    assert!(p.source.contains("z_ = "), "{}", p.source);
    // A producer read by two reductions is recomputed by each; a
    // reduction read by a later node stays.
    let q = planned(
        "graph @g(%x: f32[4,8]) {\n  %a = exp(%x)\n  %s = reduce_sum(%a) {axes=[1]}\n  %t = reduce_max(%a) {axes=[1]}\n  %u = add(%s, %t)\n  return %u\n}",
    );
    let qops: Vec<&str> = q
        .kernels
        .iter()
        .map(|(n, _)| q.node_ops[*n].as_str())
        .collect();
    assert_eq!(qops, ["reduce_sum", "reduce_max"], "{:?}", q.kernels);
    // A consumer reading the sums of columns per column is fused (block j
    // owns column j)...
    let col = "graph @g(%x: f32[4,4]) {\n  %s = reduce_sum(%x) {axes=[0]}\n  %y = mul(%x, %s)\n  return %y\n}";
    assert_eq!(planned(col).launches.len(), 1);
    // ...but the sums of rows broadcast along the rows (row i's sum read in
    // column i) are not per row: left alone.
    let r = planned(&col.replace("axes=[0]", "axes=[1]"));
    assert_eq!(r.launches.len(), 2, "{:?}", r.kernels);
}

#[test]
fn middle_axis_reductions_with_many_outputs_take_32_outputs_per_block() {
    let p = planned(
        "graph @g(%x: f32[3,50,700], %m: f32[3,50,1]) {\n  %a = mul(%x, %m)\n  %s = reduce_sum(%a) {axes=[1]}\n  %y = neg(%s)\n  return %y\n}",
    );
    // 2100 outputs: 66 blocks (the last one partial), the producer and
    // the epilogue fused as before.
    assert_eq!(p.launches.len(), 1, "{:?}", p.kernels);
    let plan::Launch::Kernel { grid, block, .. } = &p.launches[0] else {
        panic!("not a kernel: {:?}", p.launches[0]);
    };
    assert_eq!((*grid, *block), ((66, 1, 1), 256));
    assert!(p.source.contains("sh[8][32]"), "{}", p.source);
    assert!(p.source.contains("o < 2100LL"), "{}", p.source);
    // Reductions over the last axis, few outputs, or two-pass kinds keep
    // one block per output.
    for src in [
        "graph @g(%x: f32[2100,50]) {\n  %s = reduce_sum(%x) {axes=[1]}\n  return %s\n}",
        "graph @g(%x: f32[3,50,300]) {\n  %s = reduce_sum(%x) {axes=[1]}\n  return %s\n}",
        "graph @g(%x: f32[3,50,700]) {\n  %s = reduce_variance(%x) {axes=[1]}\n  return %s\n}",
    ] {
        let q = planned(src);
        assert!(!q.source.contains("sh[8][32]"), "{src}");
    }
}

/// Bias + GELU after a GEMM over a 16-byte multiple (vectorized).
const BIAS_GELU: &str = "graph @g(%x: f32[4,64], %w: f32[64,48], %b: f32[48]) {\n  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}\n  return %y\n}";
/// A padding mask `ids != 0` read only by attention (heads of 32: the
/// tensor-core kernel at f16/bf16).
const NONZERO_MASK_TC: &str = "graph @g(%q: f32[2,12,128,32], %k: f32[2,12,128,32], %v: f32[2,12,128,32], %ids: i64[2,128]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,128]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}";
const GATHER_OUTER_AXIS: &str = "graph @g(%t: f32[4,5,6], %i: i64[7], %b: f32[6]) {\n  %x = gather(%t, %i) {axis=1}\n  %y = add(%x, %b)\n  return %y\n}";
/// BERT's embedding block as the optimizer leaves it (also a GPU parity case).
const EMBEDDINGS_LN: &str = "graph @g(%ids: i64[2,16], %tt: i64[2,16], %w: f32[10,64], %p: f32[16,64], %ty: f32[3,64], %g: f32[64], %be: f32[64]) {\n  %pi = arange() {dtype=i64, len=16, start=0.0, step=1.0}\n  %a = embedding(%w, %ids)\n  %b = embedding(%p, %pi)\n  %c = embedding(%ty, %tt)\n  %s = fused_elementwise(%a, %c, %b) {body=graph @region(%in0: f32[2,16,64], %in1: f32[2,16,64], %in2: f32[16,64]) {\n    %3 = add(%in0, %in1) : f32[2,16,64]\n    %4 = add(%in2, %3) : f32[2,16,64]\n    return %4\n  }}\n  %n = layer_norm(%s, %g, %be) {axis=2, eps=1e-5}\n  return %n\n}";

fn kernel_ops(p: &plan::Plan) -> Vec<&str> {
    p.kernels
        .iter()
        .map(|(n, _)| p.node_ops[*n].as_str())
        .collect()
}

#[test]
fn gathers_are_read_by_their_one_elementwise_reader() {
    let p = planned_lir(GATHER_OUTER_AXIS);
    // One kernel: the add, loading through the indices (an outer axis of
    // 4, 7 indices into 5 rows of 6), with the error flag.
    assert_eq!(kernel_ops(&p), ["add"], "{:?}", p.kernels);
    assert!(matches!(
        p.launches.as_slice(),
        [plan::Launch::Kernel { err: true, args, .. }] if args.len() == 4
    ));
    assert!(
        p.source.contains("const long long* __restrict__ ix0"),
        "{}",
        p.source
    );
    assert!(p.source.contains("(gf0 / 6u) % 7u"), "{}", p.source);
    assert!(
        p.source.contains("(long long)(gf0 / 42u) * 5LL + gj0"),
        "{}",
        p.source
    );
    // Stored as before when the gather is also a graph output, or when its
    // reader also reads a value no gather produced (a fusion starting from
    // that value's producer could take the reader).
    let kept = planned_lir(
        "graph @g(%t: f32[5,6], %i: i64[7], %b: f32[6]) {\n  %x = gather(%t, %i)\n  %y = add(%x, %b)\n  return %y, %x\n}",
    );
    assert_eq!(kernel_ops(&kept), ["gather", "add"], "{:?}", kept.kernels);
    let mixed = planned_lir(
        "graph @g(%t: f32[5,6], %i: i64[7], %b: f32[6]) {\n  %e = exp(%b)\n  %x = gather(%t, %i)\n  %y = add(%x, %e)\n  return %y\n}",
    );
    assert!(
        kernel_ops(&mixed).contains(&"gather"),
        "{:?}",
        mixed.kernels
    );
}

#[test]
fn embedding_lookups_and_their_sum_run_inside_the_layer_norm() {
    for dt in ["f32", "f16"] {
        let p = planned_lir(&EMBEDDINGS_LN.replace("f32", dt));
        assert_eq!(kernel_ops(&p), ["layer_norm"], "{dt}: {:?}", p.kernels);
        // Operands: 3 tables; gamma, beta, out; 3 index arrays (the error
        // flag is appended by the executable).
        assert!(
            matches!(p.launches.as_slice(), [plan::Launch::Kernel { err: true, args, .. }] if args.len() == 9),
            "{:?}",
            p.launches
        );
        // The positions are a constant; the sum is rounded to the stored
        // dtype before the norm reads it, as the unfused kernels did.
        assert_eq!(p.consts.len(), 1);
        if dt == "f16" {
            assert!(p.source.contains("h2f(f2h((float)(v4)))"), "{}", p.source);
        }
    }
}

#[test]
fn elementwise_kernels_move_16_bytes_per_operand_when_aligned() {
    // MiniLM's bias + GELU after the FFN up-projection: 8 f16 per thread.
    let p = minilm_plan_as(2, "f16", true);
    assert!(p.source.contains("c2 *= 8;"), "{}", p.source);
    assert!(p.source.contains("*(const v16b*)(in0 + "));
    // f32: 4 per thread; a row broadcast (stride 0 along the last axis)
    // is loaded per element, the contiguous operand 16 bytes at a time.
    let p = planned_lir(
        "graph @g(%x: f32[8,16], %y: f32[8,1]) {\n  %z = mul(%x, %y)\n  %e = exp(%z)\n  return %e\n}",
    );
    assert!(p.source.contains("c1 *= 4;"), "{}", p.source);
    assert!(p.source.contains("x1 = ((float)(in1[c0]))"), "{}", p.source);
    // A last axis that is not a multiple of the width, or an operand
    // strided along it (a transposed view): one element per thread.
    let p = planned_lir("graph @g(%x: f32[8,6]) {\n  %e = exp(%x)\n  return %e\n}");
    assert!(!p.source.contains("v16b t0"), "{}", p.source);
    let p = planned_lir(
        "graph @g(%x: f32[16,8], %y: f32[8,16]) {\n  %t = permute(%x) {perm=[1,0]}\n  %e = add(%t, %y)\n  return %e\n}",
    );
    assert!(!p.source.contains("v16b t0"), "{}", p.source);
}

#[test]
fn a_nonzero_mask_read_only_by_attention_is_not_stored() {
    let src = "graph @g(%q: f32[2,4,16,8], %k: f32[2,4,16,8], %v: f32[2,4,16,8], %ids: i64[2,16]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,16]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}";
    let p = planned_lir(src);
    assert_eq!(kernel_ops(&p), ["attention"], "{:?}", p.kernels);
    assert!(
        p.source.contains("const long long* __restrict__ in3"),
        "{}",
        p.source
    );
    // Also read by another node: stored as before.
    let p = planned_lir(&src.replace("return %o", "%c = cast(%m) {dtype=f32}\n  return %o, %c"));
    assert!(kernel_ops(&p).contains(&"ne"), "{:?}", p.kernels);
}

/// MiniLM fp32 attention (12 heads per sequence) by head count, as the
/// H200 A/B chose (benches/results/minilm-cuda-attn-ab.log): the tiled
/// kernel below 48 heads, the 4-rows-per-warp kernel from 48 — one launch
/// each, no batched score GEMMs.
#[test]
fn minilm_f32_attention_path_follows_the_head_count() {
    let batched = |p: &plan::Plan| {
        p.launches
            .iter()
            .filter(|l| matches!(l, plan::Launch::GemmBatched { .. }))
            .count()
    };
    for b in [1usize, 2, 4, 8, 32] {
        let p = minilm_plan_as(b, "f32", true);
        assert_eq!(batched(&p), 0, "B={b}");
        assert_eq!(p.kernels_of("attention_merged"), 6, "B={b}");
        let rows = p.source.contains("float4 kt[");
        assert_eq!(rows, b >= 4, "B={b}: 4-rows-per-warp kernel");
    }
}

/// The block split of MiniLM's f16 tensor-core attention (12 heads per
/// sequence, 128 rows): the widest blocks that still give >= 384 — the
/// fastest or within 1 us of it per batch in the H200 A/B
/// (benches/results/minilm-cuda-split-ab.log).
#[test]
fn minilm_attention_blocks_follow_the_grid_size() {
    for (b, warps) in [(1usize, 2u32), (8, 2), (16, 4), (32, 8)] {
        let p = minilm_plan_as(b, "f16", true);
        let grids: Vec<((u32, u32, u32), u32)> = p
            .launches
            .iter()
            .filter_map(|l| match l {
                plan::Launch::Kernel {
                    node, grid, block, ..
                } if p.node_ops[*node] == "attention_merged" => Some((*grid, *block)),
                _ => None,
            })
            .collect();
        assert_eq!(grids.len(), 6);
        for (grid, block) in grids {
            assert_eq!(block, 32 * warps, "B={b}");
            assert_eq!(grid, (8 / warps, 12 * b as u32, 1), "B={b}");
        }
    }
}

/// The edge: `RLX_CUDA_*` values become `CudaOptions` fields, a bad one a
/// typed error naming the variable; nothing is read from the process
/// environment.
#[test]
fn cuda_options_from_lookup() {
    use rlx_cuda::CudaOptions;
    let none = CudaOptions::from_lookup(|_| None).unwrap();
    assert_eq!(none, CudaOptions::default());
    let o = CudaOptions::from_lookup(|n| match n {
        "RLX_CUDA_TUNE_LOG" => Some("1".into()),
        "RLX_CUDA_HGEMM" => Some("auto".into()),
        // Settled A/B knobs, deleted: no longer read.
        "RLX_CUDA_ATTN_SPLIT" | "RLX_CUDA_AUTOTUNE" => Some("bogus".into()),
        _ => None,
    })
    .unwrap();
    assert!(o.tune_log);
    assert_eq!(o.hgemm, rlx_cuda::hgemm::Mode::Auto);
    assert_eq!(o.attn_split, rlx_cuda::plan::AttnSplit::Auto);
    for var in CudaOptions::VARS {
        match CudaOptions::from_lookup(|n| (n == var).then(|| "bogus".into())) {
            Err(CudaError::Input(m)) => assert!(m.contains(var) && m.contains("bogus"), "{m}"),
            other => panic!("{var}=bogus: expected a typed error, got {other:?}"),
        }
    }
}

/// `rlx::env` collects exactly the variables this crate parses.
#[test]
fn the_edge_collects_every_cuda_variable() {
    let edge: Vec<&str> = rlx::env::VARS
        .iter()
        .map(|v| v.name)
        .filter(|n| n.starts_with("RLX_CUDA_"))
        .collect();
    let mut ours = rlx_cuda::CudaOptions::VARS.to_vec();
    let mut edge_sorted = edge.clone();
    ours.sort();
    edge_sorted.sort();
    assert_eq!(ours, edge_sorted);
}
