//! The shared reference-vector runner (`rlx_ref::conformance`) with the
//! fast engine as one more engine: every case runs on the reference
//! interpreter (and decomposed, for fused ops) and, when the fast engine
//! runs a node of it natively, on the fast engine too.

use rlx_ir::{Graph, HostTensor};
pub use rlx_ref::conformance::*;
use serde_json::Value;

/// How a case is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The reference interpreter on the graph as written.
    Reference,
    /// The reference interpreter with fused ops replaced by their
    /// decompositions.
    Decomposed,
    /// The fast engine (`crate::fast`), on a plain one-slot-per-value plan.
    Fast,
}

/// Whether the fast engine runs any node of `g` natively.
pub fn has_fast_node(g: &Graph) -> bool {
    g.nodes.iter().any(|n| {
        let tys: Vec<_> = n.inputs.iter().map(|&v| g.ty(v)).collect();
        crate::fast::select(n.op.name(), &tys, &n.attrs).is_some()
    })
}

/// The fast engine as a conformance engine.
pub fn fast(g: Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RunError> {
    crate::fast::FastProgram::compile(rlx_ir::lir::Program::from_graph(g))
        .and_then(|p| p.run(&inputs.iter().collect::<Vec<_>>()))
        .map_err(|e| RunError::Failed(e.to_string()))
}

/// Run one case in `mode`.
pub fn run_case_in(case: &Value, mode: Mode) -> Result<(), String> {
    match mode {
        Mode::Reference => run_case_on(case, Form::AsWritten, &reference, &exact),
        Mode::Decomposed => run_case_on(case, Form::Decomposed, &reference, &exact),
        Mode::Fast => run_case_on(case, Form::AsWritten, &fast, &exact),
    }
    .map(|_| ())
}

/// Run every case of one `ops/<op>.json` file on the reference interpreter
/// (and decomposed, for fused ops) and on the fast engine where it runs a
/// node natively.
pub fn run_file(file: &Value) -> FileReport {
    run_file_with(
        file,
        &[Extra {
            label: " (fast engine)",
            runs: &has_fast_node,
            engine: &fast,
            tol: &exact,
        }],
    )
}
