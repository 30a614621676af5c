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

/// A constant 1-D tensor literal of `n` values from `f`.
fn literal(dims: &[usize], f: impl Fn(usize) -> f32) -> String {
    let n: usize = dims.iter().product();
    let d: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let v: Vec<String> = (0..n).map(|i| format!("{:?}", f(i))).collect();
    format!("tensor<f32[{}]> [{}]", d.join(","), v.join(", "))
}

/// [`fused_ops`] without the constants.
fn kernels(src: &str) -> Vec<String> {
    let mut ops = fused_ops(src);
    ops.retain(|o| o != "constant");
    ops
}

/// `batch_norm(conv(x, w, b))` of constants becomes one conv (the folded
/// weight and bias constant-folded), with or without the conv's bias, for
/// grouped convs too; it stays when the weight is an input or the conv
/// is read elsewhere.
#[test]
fn a_batch_norm_after_a_conv_of_constants_folds_into_it() {
    let (m, c) = (6, 4);
    let params = |k: usize| {
        let bias = literal(&[m], |i| 0.1 * i as f32 - 0.2);
        let scale = literal(&[m], |i| 0.5 + 0.25 * i as f32);
        let shift = literal(&[m], |i| 0.3 - 0.05 * i as f32);
        let mean = literal(&[m], |i| 0.02 * (i * k) as f32);
        let var = literal(&[m], |i| 0.4 + 0.1 * i as f32);
        format!(
            "  %cb = constant() {{value={bias}}}
  %s = constant() {{value={scale}}}
  %t = constant() {{value={shift}}}
  %mu = constant() {{value={mean}}}
  %v = constant() {{value={var}}}\n"
        )
    };
    for (groups, with_bias) in [(1, true), (1, false), (2, true)] {
        let w = literal(&[m, c / groups, 3, 3], |i| {
            ((i * 7 % 11) as f32 - 5.0) / 9.0
        });
        let b = if with_bias { ", %cb" } else { "" };
        let src = format!(
            "graph @g(%x: f32[1,{c},7,7]) {{
  %w = constant() {{value={w}}}
{}  %y = conv(%x, %w{b}) {{pads=[1, 1, 1, 1], groups={groups}}}
  %z = batch_norm(%y, %s, %t, %mu, %v) {{eps=0.001}}
  return %z
}}",
            params(groups)
        );
        let left = kernels(&src);
        assert_eq!(left, ["conv"], "groups {groups}, bias {with_bias}");
    }
    // A weight that is an input: the conv stays, and the norm becomes a
    // per-channel multiply-add (one elementwise region).
    let src = format!(
        "graph @g(%x: f32[1,{c},7,7], %w: f32[{m},{c},3,3]) {{
{}  %y = conv(%x, %w, %cb) {{pads=[1, 1, 1, 1]}}
  %z = batch_norm(%y, %s, %t, %mu, %v) {{eps=0.001}}
  return %z
}}",
        params(1)
    );
    assert_eq!(kernels(&src), ["conv", "fused_elementwise"]);
    // The conv is also an output: it stays, and so does the norm (as a
    // multiply-add).
    let w = literal(&[m, c, 3, 3], |i| i as f32 / 50.0);
    let src = format!(
        "graph @g(%x: f32[1,{c},7,7]) {{
  %w = constant() {{value={w}}}
{}  %y = conv(%x, %w, %cb) {{pads=[1, 1, 1, 1]}}
  %z = batch_norm(%y, %s, %t, %mu, %v) {{eps=0.001}}
  return %y, %z
}}",
        params(1)
    );
    let ops = fused_ops(&src);
    assert!(ops.contains(&"conv".to_string()) && !ops.contains(&"batch_norm".to_string()));
}

/// A `slice` of unit steps becomes `narrow`s (a view where the memory
/// plan allows), with negative and clamped bounds resolved; a strided
/// slice stays a slice.
#[test]
fn a_unit_step_slice_becomes_narrows() {
    let ops = fused_ops(
        "graph @g(%x: f32[3,4,5]) {
  %y = slice(%x) {starts=[1, -3], ends=[2, 100], axes=[0, 2], steps=[1, 1]}
  %z = exp(%y)
  return %z
}",
    );
    assert_eq!(ops, ["narrow", "narrow", "exp"]);
    let ops = fused_ops(
        "graph @g(%x: f32[3,4,5]) {
  %y = slice(%x) {starts=[0], ends=[5], axes=[2], steps=[2]}
  %z = exp(%y)
  return %z
}",
    );
    assert_eq!(ops, ["slice", "exp"]);
}

#[test]
fn an_integer_products_rescale_and_bias_fold_into_its_epilogue() {
    // ONNX Runtime's dynamic quantization: MatMulInteger → Cast → Mul → Add.
    let ops = fused_ops(
        "graph @g(%a: u8[4,8], %w: i8[8,6], %za: u8[], %zw: i8[], %s: f32[6], %b: f32[6]) {
  %p = matmul_integer(%a, %w, %za, %zw)
  %f = cast(%p) {dtype=f32}
  %y = mul(%s, %f)
  %z = add(%y, %b)
  return %z
}",
    );
    assert_eq!(ops, ["matmul_integer_scaled"]);
    // A scale per row is no epilogue of the product: it stays a region.
    let ops = fused_ops(
        "graph @g(%a: u8[4,8], %w: i8[8,6], %za: u8[], %zw: i8[], %s: f32[4,1]) {
  %p = matmul_integer(%a, %w, %za, %zw)
  %f = cast(%p) {dtype=f32}
  %y = mul(%f, %s)
  return %y
}",
    );
    assert_eq!(ops, ["matmul_integer", "fused_elementwise"]);
    // The int32 product is also an output: folding would compute it twice.
    let ops = fused_ops(
        "graph @g(%a: u8[4,8], %w: i8[8,6], %za: u8[], %zw: i8[], %s: f32[]) {
  %p = matmul_integer(%a, %w, %za, %zw)
  %f = cast(%p) {dtype=f32}
  %y = mul(%f, %s)
  return %y, %p
}",
    );
    assert_eq!(ops, ["matmul_integer", "fused_elementwise"]);
}

#[test]
fn a_cast_to_eight_bits_ends_its_region() {
    // The quantized value is a node of its own, which an integer kernel
    // reads; the arithmetic before it is one f32 region.
    let ops = fused_ops(
        "graph @g(%x: f32[4,8], %s: f32[], %z: f32[]) {
  %d = div(%x, %s)
  %r = round(%d)
  %a = add(%r, %z)
  %c = clamp(%a) {min=0.0, max=255.0}
  %q = cast(%c) {dtype=u8}
  return %q
}",
    );
    assert_eq!(ops, ["fused_elementwise", "cast"]);
}
