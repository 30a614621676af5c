//! `dequant_matmul` on CUDA without a GPU (CI): which weight types the
//! backend selects and which it refuses with a reason, which kernel a
//! shape gets, the generated sources through NVRTC where libnvrtc is
//! present, and a quantized llama's decoder graphs legalized and planned
//! for CUDA (every node native or decomposed, none refused). The numbers
//! are checked by the CPU emulation (`emulate.rs`) and on the GPU
//! (`gpu quant`).

mod common;
#[path = "support/quant.rs"]
#[allow(dead_code)] // shared with the GPU suite, which uses all of it
mod support;

use common::ClaimsOnly;
use rlx_cuda::codegen::kernels::quant as q;
use rlx_cuda::plan::{self, Launch};
use rlx_ir::text::parse;
use rlx_ir::DType;
use rlx_runtime::{legalize, DispatchOptions, Policy};
use support::{dequant_graph, tiny_llama};

fn planned(text: &str) -> plan::Plan {
    let g = parse(text).unwrap();
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::new(Policy::NativeOnly)).unwrap();
    plan::plan(&rlx_opt::plan(l.graph).unwrap()).unwrap()
}

#[test]
fn decoded_block_types_are_selected_and_others_refused_with_the_reason() {
    for d in q::DTYPES {
        for x in ["f32", "f16", "bf16"] {
            let g = parse(&dequant_graph(x.parse().unwrap(), &[2, 256], d, 5)).unwrap();
            let l = legalize(&g, &ClaimsOnly, &DispatchOptions::new(Policy::NativeOnly))
                .unwrap_or_else(|e| panic!("{d} {x}: {e}"));
            let n = l.report.nodes.iter().find(|n| n.op == "dequant_matmul");
            assert!(
                n.is_some_and(|n| n.path == rlx_runtime::DispatchPath::Native),
                "{d} {x}: {}",
                l.report
            );
        }
    }
    // Q2_K has no CUDA decoder: refused with the reason before any build,
    // and (PreferNative) its decomposition needs `dequantize`, which CUDA
    // lacks, so the DispatchError names the node.
    for (w, k) in [(DType::Q2K, 256), (DType::Mxfp4, 64)] {
        let g = parse(&dequant_graph(DType::F32, &[2, k], w, 5)).unwrap();
        for policy in [Policy::NativeOnly, Policy::PreferNative] {
            let Err(e) = legalize(&g, &ClaimsOnly, &DispatchOptions::new(policy)) else {
                panic!("a {w} dequant_matmul was selected");
            };
            let s = e.to_string();
            let want = format!("no CUDA kernel decodes {w} weights");
            assert!(s.contains("`dequant_matmul`") && s.contains(&want), "{s}");
        }
    }
}

#[test]
fn a_token_takes_the_gemv_kernel_and_a_prompt_a_decode_and_gemm_or_the_tiled_one() {
    let kernel = |p: &plan::Plan| match &p.launches[..] {
        [Launch::Kernel {
            grid, block, smem, ..
        }] => (*grid, *block, *smem),
        l => panic!("expected one launch, got {l:?}"),
    };
    // M = 1: a warp per 2 output columns, 4 warps per block.
    let p = planned(&dequant_graph(DType::F32, &[1, 512], DType::Q4_0, 67));
    assert_eq!(kernel(&p), ((9, 1, 1), 128, 0));
    assert!(p.source.contains("warp_sum"), "{}", p.source);
    // M = 8 (leading dims folded): still one pass over the weight.
    let p = planned(&dequant_graph(DType::F32, &[2, 4, 256], DType::Q6K, 9));
    assert_eq!(kernel(&p).0, (2, 1, 1));
    // M = 33 of f32 x: the weight decoded into scratch (a thread per 8
    // weights), then one cuBLAS GEMM over the 33 rows.
    let p = planned(&dequant_graph(DType::F32, &[3, 11, 256], DType::Q6K, 67));
    match &p.launches[..] {
        [Launch::Kernel {
            grid, block, args, ..
        }, Launch::Gemm { gemm, .. }] => {
            assert_eq!(
                (*grid, *block),
                (((67 * 256 / 8_usize).div_ceil(256) as u32, 1, 1), 256)
            );
            assert!(matches!(args[1].root, plan::Root::Scratch(_)));
            assert_eq!((gemm.m, gemm.n, gemm.k, gemm.batch), (67, 33, 256, 1));
        }
        l => panic!("expected decode + GEMM, got {l:?}"),
    }
    // f16 x: 64x64 tiles, Q4_K's 64-element chunk in 32 KiB of shared memory.
    let p = planned(&dequant_graph(DType::F16, &[70, 256], DType::Q4K, 130));
    assert_eq!(kernel(&p), ((3, 2, 1), 256, 32 * 1024));
    // The weight is the input buffer itself: no copy of it before the kernel.
    let Launch::Kernel { args, .. } = &p.launches[0] else {
        unreachable!()
    };
    assert!(matches!(args[1].root, plan::Root::Input(1)) && args[1].byte == 0);
}

#[test]
fn generated_dequant_sources_compile_with_nvrtc_where_available() {
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("libnvrtc not found: NVRTC compile test skipped");
        return;
    }
    // Every type, gemv (M = 1 and 5), tiled and decode, f32 / f16 / bf16 x, in one
    // module (several dequant kernels must coexist in one translation unit).
    let mut m = rlx_cuda::codegen::Module::default();
    for d in q::DTYPES {
        for x in q::X_DTYPES {
            for rows in [1, 5] {
                m.add(q::gemv(d, x, rows, 67, 512).unwrap());
            }
            m.add(q::tiled(d, x, 70, 67, 512).unwrap());
        }
        m.add(q::decode(d, 67, 512).unwrap());
    }
    let src = m.source();
    let opts = rlx_cuda::device::nvrtc_options("compute_90");
    let ptx = match cudarc::nvrtc::compile_ptx_with_opts(&src, opts) {
        Ok(p) => p.to_src(),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => {
            panic!("NVRTC: {}", log.to_string_lossy())
        }
        Err(other) => panic!("NVRTC: {other:?}"),
    };
    // The decoded quants, scales and accumulators stay in registers (the
    // lambdas inlined, every array index known after unrolling): a
    // `.local` array would put the decode through memory.
    assert!(!ptx.contains(".local"), "local memory in the PTX");
}

/// The decoder graphs of a llama whose matrices use all eight block types
/// (a decode step, T = 1, and a prompt, T = 16) and of one of SmolLM2's
/// shape (Q4_1, Q8_0; K = 576, a 49152-row output), optimized and legalized
/// for CUDA as `rlx::compile` does, then planned by the CUDA planner:
/// every dequant_matmul native, nothing refused. Which ops run through a
/// decomposition is printed (the GPU suite prints the same report).
#[test]
fn a_quantized_llama_decoder_legalizes_and_plans_for_cuda() {
    let model = rlx_models::llm::LlmModel::from_gguf(&tiny_llama(), |_| {}).unwrap();
    let types: std::collections::BTreeSet<DType> =
        model.weights().iter().map(|w| w.dtype()).collect();
    for d in q::DTYPES {
        assert!(types.contains(&d), "{d} missing from the model: {types:?}");
    }
    let smol =
        rlx_models::llm::LlmModel::from_gguf(&support::llama_gguf(&support::SMOLLM2_SHAPE), |_| {})
            .unwrap();
    for (m, t, past) in [(&model, 1, 64), (&model, 16, 64), (&smol, 1, 64)] {
        let g = m.decoder.model(t, past).to_mir().unwrap();
        let eval = |g: &rlx_ir::Graph, i: &[rlx_ir::HostTensor]| {
            rlx_cpu::run_graph(g, i).map_err(|e| e.to_string())
        };
        let (opt, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
        let l = legalize(&opt, &ClaimsOnly, &DispatchOptions::default())
            .unwrap_or_else(|e| panic!("T={t}: {e}"));
        let mut decomposed = std::collections::BTreeSet::new();
        let mut dequant = 0;
        for n in &l.report.nodes {
            if n.op == "dequant_matmul" {
                assert_eq!(n.path, rlx_runtime::DispatchPath::Native, "{}", l.report);
                dequant += 1;
            } else if n.path != rlx_runtime::DispatchPath::Native {
                decomposed.insert(format!("{} ({:?})", n.op, n.path));
            }
        }
        // q, k, v, o, gate, up, down per layer + the output projection.
        assert_eq!(dequant, 7 * m.config.layers + 1, "{}", l.report);
        eprintln!("T={t}: {dequant} dequant_matmul native; not native: {decomposed:?}");
        let p = plan::plan(&rlx_opt::plan(l.graph).unwrap()).unwrap();
        assert!(!p.launches.is_empty());
        eprintln!("T={t}: {} launches", p.launches.len());
    }
}
