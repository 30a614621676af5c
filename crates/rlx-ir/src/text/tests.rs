//! Round trips and error positions of the text form.

use super::*;
use crate::IrError;

const SRC: &str = "graph @mlp(%x: f32[2,3], %w: f32[3,4]) {
  %2 = matmul(%x, %w) : f32[2,4]
  %h = relu(%2) : f32[2,4]
  %4 = reduce_sum(%h) {axes=[1], keepdim=false} : f32[2]
  %5, %6 = topk(%h) {axis=-1, k=2, largest=true} : f32[2,2], i64[2,2]
  %7 = constant() {value=tensor<f32[2]> [1.5, nan]} : f32[2]
  %8 = add(%4, %7) : f32[2]
  return %8, %5, %6
}";

#[test]
fn round_trips() {
    let g = parse(SRC).unwrap();
    let printed = print(&g);
    assert_eq!(printed, SRC);
    let g2 = parse(&printed).unwrap();
    assert_eq!(print(&g2), printed);
}

#[test]
fn errors_point_at_the_problem() {
    let e = parse("graph @g(%x: f32[2]) {\n  %y = exp(%z)\n  return %y\n}").unwrap_err();
    assert!(matches!(e, IrError::Parse { line: 2, .. }), "{e}");
    assert!(e.to_string().contains("%z"));
    let e = parse("graph @g(%x: f32[2]) {\n  %y = frobnicate(%x)\n  return %y\n}").unwrap_err();
    assert!(e.to_string().contains("unknown op"), "{e}");
    let e = parse("graph @g(%x: f32[2], %w: f32[3]) {\n  %y = add(%x, %w)\n  return %y\n}")
        .unwrap_err();
    assert!(e.to_string().contains("do not broadcast"), "{e}");
    let e = parse("graph @g(%x: f32[2]) {\n  %y = exp(%x) : f32[3]\n  return %y\n}").unwrap_err();
    assert!(e.to_string().contains("annotated type"), "{e}");
}

#[test]
fn subgraphs_round_trip() {
    let src = "graph @g(%c: bool[], %x: f32[2]) {
  %2 = if(%c, %x) {else_branch=graph @e(%a: f32[2]) {
    %1 = neg(%a) : f32[2]
    return %1
  }, then_branch=graph @t(%a: f32[2]) {
    %1 = exp(%a) : f32[2]
    return %1
  }} : f32[2]
  return %2
}";
    let g = parse(src).unwrap();
    assert_eq!(print(&g), src);
}

/// `if` nested `depth` times: each then-branch holds the next `if`.
pub(crate) fn nested_if_text(depth: usize) -> String {
    let mut s = String::new();
    for k in 0..depth {
        s.push_str(&format!(
            "graph @g{k}(%c: bool[], %x: f32[2]) {{\n  %r = if(%c, %c, %x) {{then_branch="
        ));
    }
    s.push_str("graph @leaf(%c: bool[], %x: f32[2]) {\n  %r = exp(%x)\n  return %r\n}");
    for _ in 0..depth {
        s.push_str(", else_branch=graph @e(%c: bool[], %x: f32[2]) {\n  %r = neg(%x)\n  return %r\n}}\n  return %r\n}");
    }
    s
}

fn nesting_limit(e: &IrError) -> &crate::LimitError {
    match e {
        IrError::Limit(l) if l.limit == "max_nesting_depth" => l,
        e => panic!("expected a nesting limit error, got {e}"),
    }
}

#[test]
fn deeply_nested_tensor_data_is_a_limit_error_not_a_stack_overflow() {
    // Used to recurse once per `[` and overflow the stack.
    let depth = 30_000;
    let src = format!(
        "graph @g() {{\n  %c = constant() {{value=tensor<f32[1]> {}1.0{}}}\n  return %c\n}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let e = parse(&src).unwrap_err();
    let l = nesting_limit(&e);
    assert!(l.what.contains("tensor data at line 2"), "{e}");
    assert_eq!(l.max, crate::limits().max_nesting_depth as u64);
    // c64 pairs nest one level inside the list and still parse.
    let g = parse(
        "graph @g() {\n  %c = constant() {value=tensor<c64[2]> [[1.0, 2.0], [3.0, -4.0]]}\n  return %c\n}",
    )
    .unwrap();
    assert_eq!(g.nodes.len(), 1);
}

#[test]
fn nested_regions_parse_fast_within_the_limit_and_fail_typed_beyond_it() {
    let start = std::time::Instant::now();
    let g = parse(&nested_if_text(200)).unwrap();
    assert_eq!(print(&g), print(&parse(&print(&g)).unwrap()));
    // Verification used to copy every sub-region at every level (cubic in
    // the depth when parsing); linear now, so this is far below a second
    // even unoptimized.
    assert!(start.elapsed().as_secs_f64() < 2.0, "{:?}", start.elapsed());

    let e = parse(&nested_if_text(5000)).unwrap_err();
    assert!(
        nesting_limit(&e).what.contains("nested graph at line"),
        "{e}"
    );
}
