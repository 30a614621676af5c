//! The folds rlx-opt decides for every backend — `matmul_residual`,
//! `attention_merged`, `conv_act` — made where they apply, not made where
//! they would change what is computed or compute something twice, and the
//! fused graph computing what the original did (reference interpreter).

mod common;

use common::{close_results, cpu, inputs_for};
use rlx_ir::text::parse;
use rlx_opt::compile_pipeline;

/// The ops of `src` after the pipeline, checked numerically against it.
fn fused_ops(src: &str) -> Vec<String> {
    let g = parse(src).unwrap();
    let (h, _) = compile_pipeline(&g, cpu).unwrap();
    let inputs = inputs_for(&g, 5);
    close_results(
        &cpu(&g, &inputs).unwrap(),
        &cpu(&h, &inputs).unwrap(),
        1e-4,
        1e-5,
    )
    .unwrap_or_else(|e| panic!("{src}: {e}"));
    h.nodes.iter().map(|n| n.op.name().to_string()).collect()
}

#[test]
fn a_residual_of_the_sums_type_is_added_in_the_epilogue() {
    let ops = fused_ops(
        "graph @g(%x: f32[4,8], %w: f32[8,8], %b: f32[8], %r: f32[4,8]) {
  %m = matmul(%x, %w)
  %y = add(%m, %b)
  %z = add(%r, %y)
  return %z
}",
    );
    assert_eq!(ops, ["matmul_residual"]);
}

#[test]
fn a_broadcast_operand_or_a_shared_product_is_not_a_residual() {
    // (1, 8) is a bias: the epilogue's, not a residual.
    let ops = fused_ops(
        "graph @g(%x: f32[4,8], %w: f32[8,8], %b: f32[1,8]) {
  %m = matmul(%x, %w)
  %z = add(%m, %b)
  return %z
}",
    );
    assert_eq!(ops, ["matmul_bias_act"]);
    // (4, 1) broadcasts along the other axis: a plain add.
    let ops = fused_ops(
        "graph @g(%x: f32[4,8], %w: f32[8,8], %c: f32[4,1]) {
  %m = matmul(%x, %w)
  %z = add(%m, %c)
  return %z
}",
    );
    assert_eq!(ops, ["matmul", "add"]);
    // The product is also an output: folding would compute it twice.
    let ops = fused_ops(
        "graph @g(%x: f32[4,8], %w: f32[8,8], %r: f32[4,8]) {
  %m = matmul(%x, %w)
  %z = add(%m, %r)
  return %z, %m
}",
    );
    assert_eq!(ops, ["matmul", "add"]);
}

#[test]
fn only_the_head_merge_folds_into_attention() {
    let merge = |perm: &str, shape: &str| {
        fused_ops(&format!(
            "graph @g(%q: f32[2,3,5,4], %k: f32[2,3,5,4], %v: f32[2,3,5,4]) {{
  %a = attention(%q, %k, %v)
  %p = permute(%a) {{perm={perm}}}
  %y = reshape(%p) {{shape={shape}}}
  return %y
}}"
        ))
    };
    assert_eq!(merge("[0, 2, 1, 3]", "[2, 5, 12]"), ["attention_merged"]);
    // Another permutation is not a head merge.
    assert_eq!(
        merge("[1, 0, 2, 3]", "[3, 40]"),
        ["attention", "permute", "reshape"]
    );
}

#[test]
fn an_activation_after_a_conv_is_applied_as_it_writes() {
    let ops = fused_ops(
        "graph @g(%x: f32[1,2,6,6], %w: f32[3,2,3,3], %b: f32[3]) {
  %c = conv(%x, %w, %b) {pads=[1, 1, 1, 1]}
  %y = silu(%c)
  return %y
}",
    );
    assert_eq!(ops, ["conv_act"]);
    // The conv read twice stays a conv.
    let ops = fused_ops(
        "graph @g(%x: f32[1,2,6,6], %w: f32[3,2,3,3]) {
  %c = conv(%x, %w)
  %y = relu(%c)
  %z = add(%y, %c)
  return %z
}",
    );
    assert!(ops.contains(&"conv".to_string()), "{ops:?}");
}

#[test]
fn a_head_merge_into_another_shape_folds_then_reshapes() {
    // (2, 3, 5, 4) heads merged straight into rows of the whole batch.
    let ops = fused_ops(
        "graph @g(%q: f32[2,3,5,4], %k: f32[2,3,5,4], %v: f32[2,3,5,4]) {
  %a = attention(%q, %k, %v)
  %p = permute(%a) {perm=[0, 2, 1, 3]}
  %y = reshape(%p) {shape=[10, 12]}
  return %y
}",
    );
    assert_eq!(ops, ["attention_merged", "reshape"]);
}
