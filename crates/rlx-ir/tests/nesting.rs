//! Nesting depth of sub-graphs: every recursive walk of rlx-ir (verify,
//! the text parser, the JSON reader, fused-op expansion) refuses a region
//! nested past `limits().max_nesting_depth` with a typed error instead of
//! overflowing the stack. One test: it changes the process-wide limits.

use rlx_ir::decompose::expand_all;
use rlx_ir::{limits, set_limits, text, Attrs, DType, Graph, GraphBuilder, IrError, TensorType};

fn t(d: DType, dims: &[usize]) -> TensorType {
    TensorType::new(d, dims.to_vec())
}

/// `depth` nested `if`s over (c, x): then-branches nest, else-branches negate.
fn nested_if(depth: usize) -> Result<Graph, IrError> {
    let leaf = |op: &str, name: &str| -> Result<Graph, IrError> {
        let mut b = GraphBuilder::new(name);
        let _c = b.input("c", t(DType::Bool, &[]));
        let x = b.input("x", t(DType::F32, &[2]));
        let y = b.unary(op, x)?;
        b.finish(&[y])
    };
    let mut g = leaf("exp", "leaf")?;
    for k in 0..depth {
        let mut b = GraphBuilder::new(format!("g{k}"));
        let c = b.input("c", t(DType::Bool, &[]));
        let x = b.input("x", t(DType::F32, &[2]));
        let attrs = Attrs::new()
            .with("then_branch", g)
            .with("else_branch", leaf("neg", "e")?);
        let r = b.op1("if", &[c, c, x], attrs)?;
        g = b.finish(&[r])?;
    }
    Ok(g)
}

fn is_nesting_limit(e: &IrError) -> bool {
    matches!(e, IrError::Limit(l) if l.limit == "max_nesting_depth")
}

#[test]
fn nesting_is_bounded_in_every_walk() {
    // Within the limit: builds, prints, parses, expands, JSON round-trips.
    let g = nested_if(200).unwrap();
    assert_eq!(text::parse(&text::print(&g)).unwrap(), g);
    assert_eq!(expand_all(&g).unwrap(), g);

    // Building past the limit is refused at the level that crosses it.
    let e = nested_if(5000).unwrap_err();
    assert!(is_nesting_limit(&e), "{e}");

    // A graph built under a raised limit is refused by every walk once the
    // default is back (as when a program comes from a more lenient process).
    let default = limits();
    set_limits(rlx_ir::Limits {
        max_nesting_depth: 400,
        ..default
    });
    let deep = nested_if(300);
    set_limits(default);
    let deep = deep.unwrap();
    let e = deep.verify().unwrap_err();
    assert!(is_nesting_limit(&e), "verify: {e}");
    let e = expand_all(&deep).unwrap_err();
    assert!(is_nesting_limit(&e), "expand_all: {e}");
    let e = text::parse(&text::print(&deep)).unwrap_err();
    assert!(is_nesting_limit(&e), "parse: {e}");
}

#[test]
fn json_nesting_is_a_typed_error() {
    // Shallow regions round-trip through JSON text.
    let g = nested_if(20).unwrap();
    let s = g.to_json().to_string();
    assert_eq!(Graph::from_json_str(&s).unwrap(), g);
    // A document nested 100 000 deep: serde_json's recursion limit, with
    // the position, not a stack overflow.
    let deep = "[".repeat(100_000);
    match Graph::from_json_str(&deep).unwrap_err() {
        IrError::Parse { line: 1, msg, .. } => assert!(msg.contains("recursion limit"), "{msg}"),
        e => panic!("{e}"),
    }
    // Regions deeper than JSON holds: refused with the reason.
    let e = Graph::from_json_str(&nested_if(40).unwrap().to_json().to_string()).unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");
    // A value built in memory is measured before it is read.
    let mut v = serde_json::json!(1);
    for _ in 0..200 {
        v = serde_json::Value::Array(vec![v]);
    }
    let e = Graph::from_json(&v).unwrap_err();
    assert!(e.to_string().contains("nests 200 levels deep"), "{e}");
}
