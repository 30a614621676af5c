//! Rewriting fused ops into primitives through their registered
//! decompositions (the "common-IR" lowering), recursively and inside
//! sub-graphs.

use crate::attr::{Attr, Attrs};
use crate::error::IrError;
use crate::graph::{Graph, GraphBuilder, ValueId};
use crate::nesting;
use crate::op::OpDef;

/// A copy of `g` in which every fused node for which `expand` says yes is
/// replaced by its decomposition; repeated until none is left.
///
/// Each sub-graph is a level of [`crate::nesting`], so a region nested
/// past `limits().max_nesting_depth` is an [`IrError::Limit`].
pub fn expand_fused(g: &Graph, expand: &dyn Fn(&OpDef) -> bool) -> Result<Graph, IrError> {
    let _level = nesting::enter(&format!("expanding fused ops in graph `{}`", g.name))?;
    let mut cur = g.clone();
    // Decompositions may emit other fused ops; a few rounds reach a fixpoint.
    for _ in 0..8 {
        if !needs_expansion(&cur, expand)? {
            return Ok(cur);
        }
        cur = expand_once(&cur, expand)?;
    }
    Err(IrError::msg(format!(
        "graph `{}`: fused-op decompositions did not reach primitives after 8 rounds",
        g.name
    )))
}

/// Whether `g` (or a sub-graph) has a fused node `expand` says yes to:
/// callers check this first to keep the copy [`expand_fused`] makes.
pub fn needs_expansion(g: &Graph, expand: &dyn Fn(&OpDef) -> bool) -> Result<bool, IrError> {
    let _level = nesting::enter(&format!("looking for fused ops in graph `{}`", g.name))?;
    for n in &g.nodes {
        if n.op.is_fused() && expand(n.op.def()) {
            return Ok(true);
        }
        for a in n.attrs.0.values() {
            if let Attr::Graph(sg) = a {
                if needs_expansion(sg, expand)? {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

fn expand_once(g: &Graph, expand: &dyn Fn(&OpDef) -> bool) -> Result<Graph, IrError> {
    let mut b = GraphBuilder::new(g.name.clone());
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for &v in &g.inputs {
        let val = &g.values[v.index()];
        map[v.index()] = Some(b.input(
            val.name.clone().unwrap_or_else(|| v.0.to_string()),
            val.ty.clone(),
        ));
    }
    let get = |map: &[Option<ValueId>], v: ValueId| {
        map[v.index()].ok_or_else(|| IrError::msg("value used before definition"))
    };
    for node in &g.nodes {
        let inputs: Vec<ValueId> = node
            .inputs
            .iter()
            .map(|&v| get(&map, v))
            .collect::<Result<_, _>>()?;
        // Sub-graphs are expanded into the new attributes directly (a clone
        // first would copy every nested region once per level).
        let mut attrs = Attrs::new();
        for (name, a) in &node.attrs.0 {
            let a = match a {
                Attr::Graph(sg) => Attr::Graph(Box::new(expand_fused(sg, expand)?)),
                a => a.clone(),
            };
            attrs.0.insert(name.clone(), a);
        }
        b.set_origin(node.origin.clone());
        let outs = match node.op.decompose {
            Some(d) if expand(node.op.def()) => d(&mut b, &inputs, &attrs)
                .map_err(|e| IrError::msg(format!("decomposing `{}`: {e}", node.op.name())))?,
            _ => b.push(node.op, &inputs, attrs)?,
        };
        if outs.len() != node.outputs.len() {
            return Err(IrError::msg(format!(
                "decomposition of `{}` returned {} values, expected {}",
                node.op.name(),
                outs.len(),
                node.outputs.len()
            )));
        }
        for (&old, &new) in node.outputs.iter().zip(&outs) {
            if b.ty(new) != g.ty(old) {
                return Err(IrError::msg(format!(
                    "decomposition of `{}` produced {}, the op infers {}",
                    node.op.name(),
                    b.ty(new),
                    g.ty(old)
                )));
            }
            if let Some(n) = &g.values[old.index()].name {
                b.name_value(new, n.clone());
            }
            map[old.index()] = Some(new);
        }
    }
    b.set_origin(None);
    let outs: Vec<ValueId> = g
        .outputs
        .iter()
        .map(|&v| get(&map, v))
        .collect::<Result<_, _>>()?;
    b.finish(&outs)
}

/// Expand every fused op.
pub fn expand_all(g: &Graph) -> Result<Graph, IrError> {
    expand_fused(g, &|_| true)
}
