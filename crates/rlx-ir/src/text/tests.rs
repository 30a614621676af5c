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
