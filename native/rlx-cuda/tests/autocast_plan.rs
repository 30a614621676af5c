//! MiniLM under autocast f16 planned for CUDA (host side, no GPU): the f32
//! graph through rlx-opt's pipeline with `Autocast::f16()`.

mod common;
use common::ClaimsOnly;
use rlx_cuda::plan;
use rlx_runtime::{legalize, DispatchOptions};

/// MiniLM under autocast f16 (the f32 graph through rlx-opt's pipeline
/// with `Autocast::f16()`): every node is claimed natively by CUDA, the
/// plan builds, and every GEMM reads and writes f16.
#[test]
fn minilm_under_autocast_f16_plans_natively() {
    let cfg = rlx_models::bert::BertConfig::from_json(
        r#"{"vocab_size": 1000, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 1536, "max_position_embeddings": 512, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#,
    )
    .unwrap();
    let g = rlx_models::bert::Bert::new(cfg, true)
        .graph(1, 128)
        .unwrap();
    let eval = |g: &rlx_ir::Graph, i: &[rlx_ir::HostTensor]| {
        rlx_cpu::run_graph(g, i).map_err(|e| e.to_string())
    };
    let ac = rlx_opt::Autocast::f16();
    let (opt, rep) = rlx_opt::compile_pipeline_with(&g, eval, Some(&ac)).unwrap();
    let amp = rep.autocast.unwrap();
    assert_eq!(amp.lowered.get("matmul_residual"), Some(&12), "{amp}");
    assert!(amp.refused.is_empty(), "{amp}");
    let l = legalize(&opt, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    assert!(
        l.report
            .nodes
            .iter()
            .all(|n| n.path == rlx_runtime::DispatchPath::Native),
        "{}",
        l.report
    );
    let program = rlx_opt::plan(l.graph).unwrap();
    let p = plan::plan_for(&program, true).unwrap();
    let gs: Vec<&plan::Gemm> = p
        .launches
        .iter()
        .filter_map(|l| match l {
            plan::Launch::Gemm { gemm, .. } => Some(gemm),
            _ => None,
        })
        .collect();
    assert!(gs.len() >= 18, "{} GEMM launches", gs.len());
    assert!(
        gs.iter()
            .all(|g| g.dtype == rlx_ir::DType::F16 && g.c_dtype == rlx_ir::DType::F16),
        "every GEMM in f16"
    );
    eprintln!(
        "MiniLM autocast f16 on CUDA (host plan): {} launches, {} GEMMs",
        p.launches.len(),
        gs.len()
    );
}
