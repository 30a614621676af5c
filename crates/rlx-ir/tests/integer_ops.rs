//! `matmul_integer` and `matmul_integer_scaled` refuse operands they do not
//! define, at graph build, with what is wrong.
use rlx_ir::text::parse;

fn err(src: &str) -> String {
    parse(src).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn integer_products_check_their_operands() {
    let ok = "graph @g(%a: u8[2,3,4], %b: i8[4,5], %za: u8[3], %zb: i8[5]) {
  %y = matmul_integer(%a, %b, %za, %zb)
  return %y
}";
    let g = parse(ok).unwrap();
    assert_eq!(g.ty(g.outputs[0]).to_string(), "i32[2,3,5]");
    let e = err("graph @g(%a: f32[3,4], %b: i8[4,5]) {
  %y = matmul_integer(%a, %b)
  return %y
}");
    assert!(e.contains("expected one of u8, i8"), "{e}");
    let e = err("graph @g(%a: u8[3,4], %b: i8[6,5]) {
  %y = matmul_integer(%a, %b)
  return %y
}");
    assert!(e.contains("K = 4"), "{e}");
    let e = err("graph @g(%a: u8[3,4], %b: i8[4,5], %za: i8[]) {
  %y = matmul_integer(%a, %b, %za)
  return %y
}");
    assert!(e.contains("type of its operand"), "{e}");
    let e = err("graph @g(%a: u8[3,4], %b: i8[4,5], %za: u8[], %zb: i8[4]) {
  %y = matmul_integer(%a, %b, %za, %zb)
  return %y
}");
    assert!(e.contains("one per column of b (5 values)"), "{e}");
    let e = err(
        "graph @g(%a: u8[3,4], %b: i8[4,5], %za: u8[], %zb: i8[], %s: f32[3]) {
  %y = matmul_integer_scaled(%a, %b, %za, %zb, %s)
  return %y
}",
    );
    assert!(e.contains("scale") && e.contains("(5)"), "{e}");
    let g = parse(
        "graph @g(%a: u8[3,4], %b: i8[4,5], %za: u8[], %zb: i8[], %s: f32[5], %c: f32[1,5]) {
  %y = matmul_integer_scaled(%a, %b, %za, %zb, %s, %c)
  return %y
}",
    )
    .unwrap();
    assert_eq!(g.ty(g.outputs[0]).to_string(), "f32[3,5]");
}
