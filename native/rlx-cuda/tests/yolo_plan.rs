//! YOLOv8n's box-decoding tail planned for CUDA (host side, no GPU): the
//! box distances `lt`/`rb` are narrow views of the DFL conv's output,
//! `x1y1 = anchors − lt` and `x2y2 = anchors + rb` each have two readers
//! (the centre `(x1y1 + x2y2) / 2` and the size `x2y2 − x1y1`), and the
//! planner may recompute such a value in its readers instead of storing
//! it — only while no kernel in between writes over its operands. The
//! memory planner gave the size's slot (arena byte 0) bytes of the conv
//! output's slot (byte 64): a check that compared slot roots instead of
//! arena bytes missed it, the size kernel overwrote `lt`, and the centres
//! read it afterwards (wrong by up to 112 px on the H100 and H200, widths
//! right). The model comes from `./scripts/fetch-models`.

mod common;
use common::ClaimsOnly;
use rlx_cuda::plan;
use rlx_runtime::{legalize, DispatchOptions};
use std::collections::HashMap;

#[test]
fn a_recomputed_value_is_stored_when_a_later_kernel_overwrites_its_operands() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../.cache/models/nudenet-3.4.2/nudenet/320n.onnx"
    );
    let model =
        std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e} — run ./scripts/fetch-models"));
    let opts = rlx_onnx::ImportOptions {
        shapes: HashMap::from([("images".to_string(), vec![1, 3, 320, 320])]),
        ..Default::default()
    };
    let mut g = rlx_onnx::import(&model, &opts).unwrap().graph;
    // The output: concat(centres, sizes), before the stride multiply.
    let k = g
        .nodes
        .iter()
        .rposition(|n| n.op.name() == "concat" && g.ty(n.outputs[0]).shape.dims() == [1, 4, 2100])
        .expect("the box concat");
    g.outputs = vec![g.nodes[k].outputs[0]];
    let eval = |g: &rlx_ir::Graph, i: &[rlx_ir::HostTensor]| {
        rlx_cpu::run_graph(g, i).map_err(|e| e.to_string())
    };
    let (opt, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
    let l = legalize(&opt, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let program = rlx_opt::plan(l.graph).unwrap();
    let p = plan::plan_for(&program, true).unwrap();
    // x1y1 is stored (its own `sub` kernel) next to the size's `sub`;
    // before the fix it was recomputed by both readers: one `sub` kernel.
    assert_eq!(p.kernels_of("sub"), 2, "{:?}", p.kernels);
}
