//! Found by the `ir_json` fuzz target on the H200 machine: a JSON graph
//! with extra values whose definitions point at nothing (a node output the
//! node does not list, a second copy of an input) verified, and printed as
//! a different graph than the one held. Every value must be defined once.

use rlx_ir::Graph;

#[test]
fn values_no_input_or_node_defines_are_refused() {
    let json = r#"{"name":"g","inputs":[0,1,2],"outputs":[3],
      "nodes":[{"op":"scatter_add","attrs":{"axis":{"int":0}},"inputs":[0,1,2],"outputs":[3]}],
      "values":[
        {"def":{"input":0},"name":"x","ty":{"dtype":"i32","shape":[4]}},
        {"def":{"input":1},"name":"idx","ty":{"dtype":"i32","shape":[3]}},
        {"def":{"input":2},"name":"upd","ty":{"dtype":"i32","shape":[3]}},
        {"def":{"node":{"node":0,"output":0}},"ty":{"dtype":"i32","shape":[4]}},
        {"def":{"input":1},"name":"idx","ty":{"dtype":"i32","shape":[3]}}]}"#;
    let e = Graph::from_json_str(json).unwrap_err().to_string();
    assert!(
        e.contains("value %4 is neither a graph input nor a node's output"),
        "{e}"
    );
    // Without the stale value the same graph is fine.
    let ok = json.replace(
        r#",
        {"def":{"input":1},"name":"idx","ty":{"dtype":"i32","shape":[3]}}]}"#,
        "]}",
    );
    Graph::from_json_str(&ok).unwrap();
}
