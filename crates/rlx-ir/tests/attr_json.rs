//! Float attributes that JSON numbers cannot hold (NaN, ±inf) survive the
//! JSON form (found by the ir_text fuzz target: `pad {value=nan}` was
//! written as `null` and the JSON did not load).

use rlx_ir::{text, Attr, Graph};

fn round_trip(src: &str) -> Graph {
    let g = text::parse(src).expect("parses");
    let json = g.to_json().to_string();
    let back = Graph::from_json_str(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    assert_eq!(text::print(&back), text::print(&g), "{json}");
    back
}

#[test]
fn a_nan_float_attribute_round_trips_through_json() {
    let g = round_trip(
        "graph @g(%x: f32[2]) {\n  %r = pad(%x) {pads=[1, 1], value=nan}\n  return %r\n}",
    );
    let json = g.to_json().to_string();
    assert!(json.contains(r#""float":"nan""#), "{json}");
    match g.nodes[0].attrs.get("value") {
        Some(Attr::Float(v)) => assert!(v.is_nan()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn infinite_float_attributes_round_trip_through_json() {
    let g =
        round_trip("graph @g(%x: f32[3]) {\n  %r = clamp(%x) {min=-inf, max=inf}\n  return %r\n}");
    let json = g.to_json().to_string();
    assert!(
        json.contains(r#""float":"-inf""#) && json.contains(r#""float":"inf""#),
        "{json}"
    );
}

#[test]
fn finite_floats_stay_numbers_and_a_bad_string_is_an_error() {
    let g =
        round_trip("graph @g(%x: f32[3]) {\n  %r = clamp(%x) {min=-1.5, max=2}\n  return %r\n}");
    let json = g.to_json().to_string();
    assert!(json.contains(r#""float":-1.5"#), "{json}");
    let bad = json.replace(r#""float":-1.5"#, r#""float":"lots""#);
    let err = Graph::from_json_str(&bad).unwrap_err().to_string();
    assert!(err.contains("bad float `lots`"), "{err}");
}
