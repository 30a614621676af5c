//! Fused QK-RoPE: two `rope` nodes with the same `cos`, `sin` and
//! `interleaved` → one `qk_rope`.
//!
//! The only pattern with two roots, so not a [`crate::Rule`] (a rule
//! rewrites one node as it is emitted): a small rebuild pairs each `rope`
//! with the next one sharing its tables, provided the second one's input is
//! defined before the first `rope` (so `qk_rope` can stand where the first
//! one stood), and binds both outputs to the `qk_rope`'s.

use crate::error::OptError;
use crate::rebuild::{map_subgraphs, Rebuilder};
use rlx_ir::{Graph, Op, ValueDef, ValueId};

/// For each node, the index of the later `rope` it pairs with.
fn pairs(g: &Graph) -> Vec<Option<usize>> {
    let defined_at = |v: ValueId| match g.values[v.index()].def {
        ValueDef::Input(_) => None,
        ValueDef::Node { node, .. } => Some(node),
    };
    let mut partner = vec![None; g.nodes.len()];
    let mut taken = vec![false; g.nodes.len()];
    for (i, a) in g.nodes.iter().enumerate() {
        if a.op.name() != "rope" || taken[i] {
            continue;
        }
        let j = (i + 1..g.nodes.len()).find(|&j| {
            let b = &g.nodes[j];
            !taken[j]
                && b.op.name() == "rope"
                && b.inputs[1..] == a.inputs[1..]
                && b.attrs == a.attrs
                && defined_at(b.inputs[0]).is_none_or(|d| d < i)
        });
        if let Some(j) = j {
            partner[i] = Some(j);
            taken[i] = true;
            taken[j] = true;
        }
    }
    partner
}

/// Pair `rope` nodes into `qk_rope` (in sub-graphs too); returns the graph
/// and how many pairs were fused.
pub fn pair_ropes(g: &Graph) -> Result<(Graph, usize), OptError> {
    let partner = pairs(g);
    let mut count = 0;
    let mut r = Rebuilder::new(g);
    let mut second: Vec<Option<ValueId>> = vec![None; g.nodes.len()];
    let qk = Op::named("qk_rope")?;
    for (i, node) in g.nodes.iter().enumerate() {
        if let Some(v) = second[i] {
            r.bind(node.outputs[0], v)?;
            continue;
        }
        let mut sub = 0;
        let attrs = map_subgraphs(&node.attrs, &mut |sg| {
            let (h, k) = pair_ropes(sg)?;
            sub += k;
            Ok(h)
        })?;
        count += sub;
        let inputs = r.inputs_of(node)?;
        match partner[i] {
            Some(j) => {
                let other = r.get(g.nodes[j].inputs[0])?;
                let ins = [inputs[0], other, inputs[1], inputs[2]];
                let outs = r.push(qk, &ins, attrs, node.origin.clone())?;
                r.bind(node.outputs[0], outs[0])?;
                second[j] = Some(outs[1]);
                count += 1;
            }
            None => {
                r.copy(node, &inputs, attrs)?;
            }
        }
    }
    Ok((r.finish()?, count))
}
