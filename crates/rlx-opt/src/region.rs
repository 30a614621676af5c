//! Elementwise regions → `fused_elementwise`.
//!
//! A region is a maximal set of elementwise nodes (unary, binary, `where`,
//! `clamp`, `cast`: [`rlx_ir::ops::region::is_elementwise`]) with one
//! output shape, where every value but the region's result is read only
//! inside the region (and is no graph output). Inputs may broadcast. Nodes
//! are assigned in reverse order: a node joins the region of its readers
//! when all of them are in one region of its shape, else it starts a new
//! one — so a region is a tree of single-use values ending at its root.
//!
//! Regions of at least [`MIN_OPS`] ops become one `fused_elementwise` node
//! at the root's place, whose `body` holds the region's nodes over its
//! inputs; scalar constants are copied into the body rather than passed.

use crate::error::OptError;
use crate::rebuild::{map_subgraphs, use_counts, Rebuilder};
use rlx_ir::ops::region::is_elementwise;
use rlx_ir::{Attr, Attrs, Graph, GraphBuilder, Node, Op, ValueDef, ValueId};

/// The fewest ops a fused region holds.
pub const MIN_OPS: usize = 2;

/// Whether `n` may be part of a region. A cast to an 8-bit integer (a
/// quantized activation, ONNX's `QuantizeLinear`/`DynamicQuantizeLinear`)
/// stays a node of its own: the region before it ends in f32, and the
/// integer kernels that read the 8-bit values (`matmul_integer`) take
/// them from a plain cast.
fn eligible(n: &Node, g: &Graph) -> bool {
    let to_int8 = n.op.name() == "cast"
        && n.outputs.len() == 1
        && matches!(
            g.ty(n.outputs[0]).dtype,
            rlx_ir::DType::U8 | rlx_ir::DType::I8
        );
    is_elementwise(n.op.def())
        && n.outputs.len() == 1
        && !to_int8
        && !n.attrs.0.values().any(|a| matches!(a, Attr::Graph(_)))
}

/// For each node, the root node of its region (`None`: not elementwise).
fn assign(g: &Graph) -> Vec<Option<usize>> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for v in &n.inputs {
            readers[v.index()].push(i);
        }
    }
    let is_output = use_counts(g)
        .iter()
        .enumerate()
        .map(|(v, &u)| u > readers[v].len())
        .collect::<Vec<_>>();
    let mut root: Vec<Option<usize>> = vec![None; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if !eligible(n, g) {
            continue;
        }
        let out = n.outputs[0];
        let rs = &readers[out.index()];
        let joined = rs.first().and_then(|&r0| root[r0]).filter(|&r| {
            !is_output[out.index()]
                && rs.iter().all(|&u| root[u] == Some(r))
                && g.ty(g.nodes[r].outputs[0]).shape == g.ty(out).shape
        });
        root[i] = Some(joined.unwrap_or(i));
    }
    root
}

/// The producer of `v` when it is a constant of at most one element.
fn scalar_constant(g: &Graph, v: ValueId) -> Option<&Node> {
    match g.values[v.index()].def {
        ValueDef::Node { node, .. } => {
            Some(&g.nodes[node]).filter(|n| n.op.name() == "constant" && g.ty(v).shape.numel() <= 1)
        }
        ValueDef::Input(_) => None,
    }
}

/// The region made of `members` (node indices, in order; the last is the
/// root): the values it reads from outside, and its body over them.
fn body(g: &Graph, members: &[usize]) -> Result<(Vec<ValueId>, Graph), OptError> {
    let outputs: Vec<ValueId> = members.iter().map(|&i| g.nodes[i].outputs[0]).collect();
    let mut inputs: Vec<ValueId> = Vec::new();
    for &i in members {
        for &v in &g.nodes[i].inputs {
            if !outputs.contains(&v) && !inputs.contains(&v) && scalar_constant(g, v).is_none() {
                inputs.push(v);
            }
        }
    }
    let mut b = GraphBuilder::new("region");
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for (k, &v) in inputs.iter().enumerate() {
        map[v.index()] = Some(b.input(format!("in{k}"), g.ty(v).clone()));
    }
    for &i in members {
        let n = &g.nodes[i];
        let mut ins = Vec::with_capacity(n.inputs.len());
        for &v in &n.inputs {
            let x = match (map[v.index()], scalar_constant(g, v)) {
                (Some(x), _) => x,
                (None, Some(c)) => b.push(c.op, &[], c.attrs.clone())?[0],
                (None, None) => {
                    return Err(OptError::pass("fuse", "a region reads an unmapped value"))
                }
            };
            map[v.index()] = Some(x);
            ins.push(x);
        }
        let outs = b.push(n.op, &ins, n.attrs.clone())?;
        map[n.outputs[0].index()] = Some(outs[0]);
    }
    let root = *outputs
        .last()
        .ok_or_else(|| OptError::pass("fuse", "empty region"))?;
    let out = map[root.index()].ok_or_else(|| OptError::pass("fuse", "region root unmapped"))?;
    Ok((inputs, b.finish(&[out])?))
}

/// Fuse the elementwise regions of `g` (and of its sub-graphs, except the
/// bodies of existing regions); returns the graph, the number of regions
/// made and the number of ops they absorbed.
pub fn fuse_regions(g: &Graph) -> Result<(Graph, usize, usize), OptError> {
    let root = assign(g);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); g.nodes.len()];
    for (i, r) in root.iter().enumerate() {
        if let Some(r) = r {
            members[*r].push(i);
        }
    }
    let fused = |i: usize| root[i].is_some_and(|r| members[r].len() >= MIN_OPS);
    let (mut regions, mut ops) = (0, 0);
    let region_op = Op::named("fused_elementwise")?;
    let mut r = Rebuilder::new(g);
    for (i, node) in g.nodes.iter().enumerate() {
        if fused(i) && root[i] != Some(i) {
            continue; // emitted inside its region's body
        }
        if fused(i) {
            let (ins, sub) = body(g, &members[i])?;
            let inputs = ins
                .iter()
                .map(|&v| r.get(v))
                .collect::<Result<Vec<_>, _>>()?;
            let attrs = Attrs::new().with("body", sub);
            let outs = r.push(region_op, &inputs, attrs, node.origin.clone())?;
            r.bind(node.outputs[0], outs[0])?;
            regions += 1;
            ops += members[i].len();
            continue;
        }
        let inputs = r.inputs_of(node)?;
        let attrs = if node.op.name() == "fused_elementwise" {
            node.attrs.clone()
        } else {
            map_subgraphs(&node.attrs, &mut |sg| {
                let (h, k, n) = fuse_regions(sg)?;
                regions += k;
                ops += n;
                Ok(h)
            })?
        };
        r.copy(node, &inputs, attrs)?;
    }
    Ok((r.finish()?, regions, ops))
}
