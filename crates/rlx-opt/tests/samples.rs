//! Optimization and memory planning on sample models: HIR blocks lowered to
//! MIR (and expanded to primitives, the common-IR path), optimized with
//! the standard pipeline, planned, checked, and run through the LIR
//! simulator against the reference interpreter. Prints what was saved.

mod common;

use common::{cpu, execute, same_results, Rng};
use rlx_ir::decompose::expand_all;
use rlx_ir::hir::{Activation, Mlp, Model, TransformerEncoder};
use rlx_ir::{DType, Graph, GraphBuilder, HostTensor, TensorType};
use rlx_opt::{check_plan, plan_with_report, standard_pipeline, MemoryReport};

fn f32t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims.to_vec())
}

/// Optimize, plan (before and after), check, run; returns the reports.
fn run_sample(name: &str, g: &Graph) -> (usize, usize, MemoryReport, MemoryReport) {
    let mut rng = Rng(7);
    let inputs: Vec<HostTensor> = g
        .inputs
        .iter()
        .map(|&v| {
            let t = g.ty(v);
            rng.tensor(t.dtype, t.dims())
        })
        .collect();
    let want = cpu(g, &inputs).unwrap();
    let (opt, rep) = standard_pipeline(cpu).run(g).unwrap();
    same_results(&want, &cpu(&opt, &inputs).unwrap()).unwrap();
    let mut reports = Vec::new();
    for h in [g, &opt] {
        let (p, mem) = plan_with_report(h.clone()).unwrap();
        check_plan(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        same_results(&want, &execute(&p, &inputs).unwrap())
            .unwrap_or_else(|e| panic!("{name}: planned run differs: {e}"));
        reports.push(mem);
    }
    println!(
        "{name}: {} -> {} nodes; unoptimized {}; optimized {}",
        rep.nodes_before, rep.nodes_after, reports[0], reports[1]
    );
    let after = reports.pop().unwrap();
    let before = reports.pop().unwrap();
    (rep.nodes_before, rep.nodes_after, before, after)
}

#[test]
fn elementwise_chain_runs_in_one_buffer() {
    let mut b = GraphBuilder::new("chain");
    let x = b.input("x", f32t(&[64, 64]));
    let mut v = x;
    for op in [
        "exp", "tanh", "neg", "sin", "relu", "abs", "cos", "sigmoid", "square", "floor",
    ] {
        v = b.unary(op, v).unwrap();
    }
    let g = b.finish(&[v]).unwrap();
    let (_, _, before, _) = run_sample("elementwise chain", &g);
    assert_eq!(before.arena_bytes, 64 * 64 * 4);
    assert_eq!(before.naive_bytes, 10 * 64 * 64 * 4);
}

#[test]
fn mlp_block() {
    let m = Model::new("mlp", Mlp::new(32, 128, Activation::Gelu)).with_input("x", f32t(&[8, 32]));
    let g = expand_all(&m.to_mir().unwrap()).unwrap();
    let (_, _, before, after) = run_sample("mlp (decomposed)", &g);
    assert!(before.arena_bytes * 2 <= before.naive_bytes, "{before}");
    assert!(after.arena_bytes <= before.arena_bytes);
}

#[test]
fn transformer_encoder() {
    let m = Model::new("enc", TransformerEncoder::new(2, 32, 4, 64, 1e-5))
        .with_input("x", f32t(&[2, 8, 32]));
    let fused = m.to_mir().unwrap();
    run_sample("transformer encoder x2 (fused ops)", &fused);
    let g = expand_all(&fused).unwrap();
    let (before_n, after_n, before, after) = run_sample("transformer encoder x2 (decomposed)", &g);
    assert!(after_n <= before_n);
    assert!(before.arena_bytes * 2 <= before.naive_bytes, "{before}");
    assert!(after.views > 0 && after.in_place > 0, "{after}");
}
