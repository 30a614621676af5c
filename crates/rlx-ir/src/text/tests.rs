//! Round trips and error positions of the text form.

use super::*;
use crate::{Graph, IrError};

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

fn constant(ty: &str, data: &str) -> Result<Graph, IrError> {
    parse(&format!(
        "graph @g() {{\n  %c = constant() {{value=tensor<{ty}> {data}}}\n  return %c\n}}"
    ))
}

/// The parse error of a bad literal: position, then dtype and value in the message.
fn literal_error(ty: &str, data: &str) -> (usize, usize, String) {
    match constant(ty, data).unwrap_err() {
        IrError::Parse { line, col, msg } => (line, col, msg),
        e => panic!("expected a parse error, got {e}"),
    }
}

#[test]
fn integer_literals_out_of_range_are_errors_at_the_element() {
    // `i8 1000` used to wrap to -24 and `bool 2` to become true.
    let (line, col, msg) = literal_error("i8[2]", "[1, 1000]");
    assert_eq!((line, col), (2, 44), "{msg}");
    assert!(
        msg.contains("1000 is out of range for i8 (-128..=127)"),
        "{msg}"
    );
    for (ty, bad) in [
        ("bool[1]", "2"),
        ("bool[1]", "-1"),
        ("i8[1]", "-129"),
        ("u8[1]", "256"),
        ("u8[1]", "-1"),
        ("i16[1]", "32768"),
        ("i32[1]", "2147483648"),
        ("i32[1]", "-2147483649"),
    ] {
        let (_, _, msg) = literal_error(ty, &format!("[{bad}]"));
        let dtype = ty.split('[').next().unwrap();
        assert!(
            msg.contains(&format!("{bad} is out of range for {dtype}")),
            "{ty} {bad}: {msg}"
        );
    }
    let (_, _, msg) = literal_error("i32[1]", "[1.5]");
    assert!(msg.contains("not an integer"), "{msg}");
    // The edges of each range still parse, to the values written.
    let g = constant("i8[2]", "[-128, 127]").unwrap();
    let v = g.nodes[0]
        .attrs
        .tensor("value")
        .unwrap()
        .to_vec::<i8>()
        .unwrap();
    assert_eq!(v, [-128, 127]);
    let g = constant("bool[4]", "[0, 1, true, false]").unwrap();
    let v = g.nodes[0]
        .attrs
        .tensor("value")
        .unwrap()
        .to_vec::<bool>()
        .unwrap();
    assert_eq!(v, [false, true, true, false]);
    assert!(constant("u8[1]", "[255]").is_ok());
    assert!(constant("i64[1]", "[-9223372036854775808]").is_ok());
}

#[test]
fn float_literals_that_overflow_their_dtype_are_errors_unless_inf() {
    let (_, _, msg) = literal_error("f16[1]", "[70000.0]");
    assert!(msg.contains("70000.0 is out of range for f16"), "{msg}");
    let (_, _, msg) = literal_error("f16[1]", "[70000]");
    assert!(msg.contains("out of range for f16"), "{msg}");
    let (_, _, msg) = literal_error("bf16[1]", "[1e39]");
    assert!(msg.contains("out of range for bf16"), "{msg}");
    let (_, _, msg) = literal_error("f32[1]", "[-1e39]");
    assert!(msg.contains("out of range for f32"), "{msg}");
    let (_, _, msg) = literal_error("c64[1]", "[[1.0, 1e39]]");
    assert!(msg.contains("out of range for c64"), "{msg}");
    // Beyond f64 the lexer refuses it (Rust would read it as inf).
    let (_, _, msg) = literal_error("f64[1]", "[1e400]");
    assert!(msg.contains("overflows f64"), "{msg}");
    // Written as inf, infinity is what was asked for; the largest finite
    // values still parse.
    let g = constant("f16[3]", "[inf, -inf, 65504.0]").unwrap();
    let v = g.nodes[0]
        .attrs
        .tensor("value")
        .unwrap()
        .to_f64_vec()
        .unwrap();
    assert_eq!(v, [f64::INFINITY, f64::NEG_INFINITY, 65504.0]);
}

#[test]
fn json_literals_out_of_range_are_typed_errors() {
    use crate::HostTensor;
    let read = |dtype: &str, data: serde_json::Value| {
        HostTensor::from_json(&serde_json::json!({"dtype": dtype, "shape": [2], "data": data}))
    };
    for (dtype, data, index, value) in [
        ("i8", serde_json::json!([1, 1000]), 1, "1000"),
        ("bool", serde_json::json!([2, 0]), 0, "2"),
        ("u8", serde_json::json!([0, -1]), 1, "-1"),
        (
            "i64",
            serde_json::json!([0, u64::MAX]),
            1,
            "18446744073709551615",
        ),
        ("f16", serde_json::json!([0.0, 70000.0]), 1, "70000.0"),
    ] {
        match read(dtype, data).unwrap_err() {
            IrError::Literal { index: i, error } => {
                assert_eq!(
                    (i, error.dtype.name(), error.value.as_str()),
                    (index, dtype, value)
                )
            }
            e => panic!("{dtype}: {e}"),
        }
    }
    let t = read("i8", serde_json::json!([-128, 127])).unwrap();
    assert_eq!(t.to_vec::<i8>().unwrap(), [-128, 127]);
    let t = read("f16", serde_json::json!(["inf", 1.0])).unwrap();
    assert_eq!(t.to_f64_vec().unwrap(), [f64::INFINITY, 1.0]);
}

/// Found by the `ir_text` fuzz target: an input named with digits only
/// (`%8`) printed as its index (`%0`) but parsed back as `8`, so
/// `parse(print(g)) != g`.
#[test]
fn inputs_with_all_digit_names_round_trip() {
    for src in [
        "graph @g(%8: f32[]) {\n  return\n}",
        "graph @g(%5: i16[3,1], %x: f32[2]) {\n  %y = neg(%x)\n  return %y\n}",
    ] {
        let g = parse(src).unwrap();
        let again = parse(&print(&g)).unwrap();
        assert_eq!(again, g, "{}", print(&g));
        assert_eq!(print(&again), print(&g));
    }
}

#[test]
fn unsigned_literals_round_trip_through_text_and_json() {
    // u64 above i64::MAX is written as itself, in text and in JSON.
    let src = "graph @g() {
  %0 = constant() {value=tensor<u64[3]> [0, 9223372036854775808, 18446744073709551615]} : u64[3]
  %1 = constant() {value=tensor<u32[2]> [4294967295, 7]} : u32[2]
  %2 = constant() {value=tensor<u16[1]> [65535]} : u16[1]
  return %0, %1, %2
}";
    let g = parse(src).unwrap();
    assert_eq!(print(&g), src);
    let g2 = Graph::from_json(&serde_json::to_value(&g).unwrap()).unwrap();
    assert_eq!(print(&g2), src);
    // Too big for anything else, and negative for u64, are errors.
    for bad in [
        "tensor<i64[1]> [9223372036854775808]",
        "tensor<u64[1]> [-1]",
        "tensor<u32[1]> [4294967296]",
        "tensor<u64[1]> [18446744073709551616]",
    ] {
        let ty = &bad[7..13];
        let text = format!("graph @g() {{\n  %0 = constant() {{value={bad}}}\n  return %0\n}}");
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.contains("out of range") || e.contains("bad integer"),
            "{ty}: {e}"
        );
    }
}

#[test]
fn bitcast_keeps_the_element_size() {
    let ok = "graph @g(%x: f32[2]) {\n  %1 = bitcast(%x) {dtype=i32} : i32[2]\n  return %1\n}";
    assert_eq!(print(&parse(ok).unwrap()), ok);
    let e = parse("graph @g(%x: f32[2]) {\n  %0 = bitcast(%x) {dtype=f16}\n  return %0\n}")
        .unwrap_err()
        .to_string();
    assert!(e.contains("of one size: f32 → f16"), "{e}");
}
