//! `cast` from a float to an integer dtype: truncation toward zero,
//! saturation at the dtype's range, and a typed error naming the node and
//! the element for NaN and ±inf (they used to become 0, or wrap, without a
//! word). Run by the reference interpreter and by the fast engine.

use rlx_cpu::fast::FastProgram;
use rlx_cpu::{run_graph, CpuError};
use rlx_ir::{lir::Program, text, DType, HostTensor};

fn graph(from: &str, to: &str, n: usize) -> rlx_ir::Graph {
    // The cast is node 1, after a neg, so the index is not trivially 0.
    text::parse(&format!(
        "graph @g(%x: {from}[{n}]) {{\n  %a = neg(%x)\n  %r = cast(%a) {{dtype={to}}}\n  return %r\n}}"
    ))
    .unwrap()
}

/// Both engines, same answer.
fn run_both(g: &rlx_ir::Graph, x: HostTensor) -> [Result<HostTensor, CpuError>; 2] {
    let reference = run_graph(g, std::slice::from_ref(&x)).map(|mut v| v.remove(0));
    let fast = FastProgram::compile(Program::from_graph(g.clone()))
        .and_then(|p| p.run(&[&x]))
        .map(|mut v| v.remove(0));
    [reference, fast]
}

#[test]
fn nan_and_infinities_to_int_are_errors_naming_node_and_element() {
    for (bad, shown) in [
        (f32::NAN, "NaN"),
        (f32::INFINITY, "-inf"),
        (f32::NEG_INFINITY, "inf"),
    ] {
        for to in ["i32", "i8", "u8", "i64", "i16"] {
            let g = graph("f32", to, 3);
            let x = HostTensor::from_slice(&[1.0f32, -2.5, bad], [3]).unwrap();
            for r in run_both(&g, x) {
                match r {
                    Err(
                        ref e @ CpuError::Cast {
                            node: Some(1),
                            index: 2,
                            ..
                        },
                    ) => {
                        let s = e.to_string();
                        assert!(
                            s.contains("node 1: `cast` to")
                                && s.contains("element 2 is")
                                && s.contains(shown),
                            "{s}"
                        );
                    }
                    other => panic!("{bad} to {to}: expected a cast error, got {other:?}"),
                }
            }
        }
    }
}

#[test]
fn finite_out_of_range_floats_saturate() {
    // neg() flips the signs: the cast sees -x.
    let x = HostTensor::from_slice(&[-300.0f32, 300.0, -127.9, 2.9, -1e20, 0.5], [6]).unwrap();
    let cases: [(&str, DType, Vec<i64>); 4] = [
        ("i8", DType::I8, vec![127, -128, 127, -2, 127, 0]),
        ("u8", DType::U8, vec![255, 0, 127, 0, 255, 0]),
        (
            "i32",
            DType::I32,
            vec![300, -300, 127, -2, i32::MAX as i64, 0],
        ),
        ("i64", DType::I64, vec![300, -300, 127, -2, i64::MAX, 0]),
    ];
    for (to, dtype, want) in cases {
        let g = graph("f32", to, 6);
        for r in run_both(&g, x.clone()) {
            let t = r.unwrap_or_else(|e| panic!("{to}: {e}"));
            assert_eq!(t.dtype(), dtype);
            assert_eq!(t.to_i64_vec().unwrap(), want, "{to}");
        }
    }
    // f64 and f16 sources follow the same rule.
    let g = graph("f64", "u8", 2);
    let x = HostTensor::from_slice(&[-1000.0f64, 3.7], [2]).unwrap();
    for r in run_both(&g, x) {
        assert_eq!(r.unwrap().to_i64_vec().unwrap(), [255, 0]);
    }
}
