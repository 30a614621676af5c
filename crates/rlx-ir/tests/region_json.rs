//! A sub-graph whose inputs or outputs name values it does not have is a
//! typed error, not an index panic (found by the ir_json fuzz target: an
//! `if` whose then-branch returned `%4` of three values).

use rlx_ir::Graph;

fn if_graph(then_output: u32) -> String {
    let branch = |name: &str, op: &str, out: u32| {
        format!(
            r#"{{"graph":{{"inputs":[0,1],"name":"{name}","nodes":[{{"inputs":[0,1],"op":"{op}","outputs":[2]}}],"outputs":[{out}],"values":[{{"def":{{"input":0}},"ty":{{"dtype":"f32","shape":[3]}}}},{{"def":{{"input":1}},"ty":{{"dtype":"f32","shape":[3]}}}},{{"def":{{"node":{{"node":0,"output":0}}}},"ty":{{"dtype":"f32","shape":[3]}}}}]}}}}"#
        )
    };
    format!(
        r#"{{"inputs":[0,1,2],"name":"g","nodes":[{{"attrs":{{"else_branch":{},"then_branch":{}}},"inputs":[0,1,2],"op":"if","outputs":[3]}}],"outputs":[3],"values":[{{"def":{{"input":0}},"ty":{{"dtype":"bool","shape":[]}}}},{{"def":{{"input":1}},"ty":{{"dtype":"f32","shape":[3]}}}},{{"def":{{"input":2}},"ty":{{"dtype":"f32","shape":[3]}}}},{{"def":{{"node":{{"node":0,"output":0}}}},"ty":{{"dtype":"f32","shape":[3]}}}}]}}"#,
        branch("else_branch", "mul", 2),
        branch("then_branch", "add", then_output)
    )
}

#[test]
fn a_well_formed_if_loads() {
    Graph::from_json_str(&if_graph(2)).expect("loads");
}

#[test]
fn a_branch_output_out_of_range_is_an_error() {
    let err = Graph::from_json_str(&if_graph(4)).unwrap_err().to_string();
    assert!(
        err.contains("`then_branch`: output 0 (%4) is not a value of the sub-graph (it has 3)"),
        "{err}"
    );
}
