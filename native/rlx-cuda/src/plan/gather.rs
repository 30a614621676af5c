//! Gathers read where they are used: an embedding lookup whose only reader
//! is an elementwise node (BERT's word + position + token-type sum) is not
//! stored; that node loads the table element through the index instead
//! (`GatherLoad`), saving a launch and a round trip through memory per
//! lookup. The elementwise node itself may then be computed inside the
//! layer norm that reads it (`reduce.rs`), so MiniLM's embedding block is
//! one kernel.

use super::*;
use crate::codegen::kernels::GatherLoad;

/// A gather left for its reader: the table and index memory and how the
/// reader finds an output element in the table.
#[derive(Clone, Debug)]
pub(super) struct GatherSrc {
    pub table: Loc,
    pub idx: Loc,
    /// The gather's output as if stored (contiguous): the reader's
    /// operand strides address it.
    pub out: Loc,
    pub load: GatherLoad,
}

/// Whether reads of `l` see the same bytes at any point of a run: graph
/// inputs and constants are never written by a kernel.
fn read_only(l: &Loc) -> bool {
    matches!(l.root, Root::Input(_) | Root::Const(_))
}

/// Gather node `i` (table `x`, indices `idx` along `axis`): if its output
/// is read only by one later elementwise node whose every operand is a
/// graph input (or its upload), a constant or a gather's output, and its table and indices are
/// contiguous graph inputs or constants, record it in `p.gathers` and
/// emit nothing. Such a reader is lowered as an elementwise kernel (or
/// inside the norm after it): no other fusion takes it, since those start
/// from a GEMM or reduction producing one of its operands. The operands
/// are read-only, so reading them later sees the same values.
pub(super) fn defer_gather(
    p: &mut Planner,
    i: usize,
    node: &Node,
    x: &Loc,
    idx: &Loc,
    axis: usize,
) -> Result<bool, CudaError> {
    let v = node.outputs[0];
    let users = &p.users[v.index()];
    if users.len() != 1 || p.g.outputs.contains(&v) || node.outputs.len() != 1 {
        return Ok(false);
    }
    let j = users[0];
    if j <= i
        || !(read_only(x) && read_only(idx) && x.is_contiguous() && idx.is_contiguous())
        || !matches!(idx.dtype, DType::I32 | DType::I64)
    {
        return Ok(false);
    }
    let reader = &p.g.nodes[j];
    let in_dtype = p.ty(reader.inputs[0]).dtype;
    if !is_elementwise(reader, in_dtype) || reader.outputs.len() != 1 {
        return Ok(false);
    }
    // A graph input (or its upload), a constant, or a gather's output.
    let simple = |u: ValueId| {
        let producer = p.g.nodes.iter().find(|n| n.outputs.contains(&u));
        match producer.map(|n| (n.op.name(), n)) {
            None => p.g.inputs.contains(&u),
            Some(("gather" | "embedding" | "index_select" | "constant" | "arange", _)) => true,
            Some(("transfer", n)) => p.g.inputs.contains(&n.inputs[0]),
            Some(_) => false,
        }
    };
    if !reader.inputs.iter().all(|&u| simple(u)) {
        return Ok(false);
    }
    let out = p.loc(v)?;
    let load = GatherLoad {
        idx_dtype: idx.dtype,
        outer: x.dims[..axis].iter().product(),
        len: x.dims[axis],
        inner: x.dims[axis + 1..].iter().product(),
        n_idx: idx.dims.iter().product(),
        code: i as i32 + 1,
    };
    p.gathers.insert(
        v,
        GatherSrc {
            table: x.clone(),
            idx: idx.clone(),
            out,
            load,
        },
    );
    // Never stored: a reader that does not know about the gather gets a
    // typed "no location" error, not an unwritten buffer.
    p.locs[v.index()] = None;
    Ok(true)
}
