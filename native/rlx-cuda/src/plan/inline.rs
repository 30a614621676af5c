//! Elementwise values recomputed by each of their readers instead of
//! stored: a cheap node with several readers (MiniLM's pooling head: the
//! padding mask's cast, read by the masked sum and by the token count; the
//! mean `sum / count`, read by the squared norm and by the final division)
//! would otherwise be a kernel of its own only because no single reader
//! can absorb it (`reduce.rs` fuses producers with one reader). Each
//! reader loads the node's operands and computes the value itself,
//! rounded to its dtype as storing it would, so results are unchanged; a
//! launch and a round trip through memory fewer per such node.

use super::*;

/// At most this many operands (a reader loads all of them instead of one
/// value) and readers (each recomputes the value).
const MAX_OPERANDS: usize = 2;
const MAX_READERS: usize = 3;

/// A value (or a view of one) that is never stored: readers compute it
/// from the operands of its producer, node `node`.
#[derive(Clone, Debug)]
pub(super) struct InlineSrc {
    pub node: usize,
    /// The producer's output dims (its operands' strides are over these).
    pub dims: Vec<usize>,
    /// The value as if the producer's output were stored contiguously:
    /// element strides and offset into that layout, the value's dims.
    at_strides: Vec<i64>,
    at_offset: i64,
    at_dims: Vec<usize>,
    /// The producer's operand memory (for overlap checks).
    pub locs: Vec<Loc>,
    pub dtype: DType,
    /// The nodes that run after the producer's place until its readers
    /// are done (see [`overwritten`]).
    window: Vec<usize>,
    /// The last reader, and whether every read it makes of the value is
    /// at its own output element (so it may write in place over an
    /// operand laid out like its output).
    last: usize,
    last_in_place: bool,
}

impl InlineSrc {
    /// For a reader over `dims` reading this value broadcast to them: per
    /// reader axis, the producer axis it walks (`None`: broadcast or
    /// length 1). `None` when the value's layout is not such a map (an
    /// offset, or axes merged by a reshape).
    pub fn axis_map(&self, dims: &[usize]) -> Option<Vec<Option<usize>>> {
        if self.at_offset != 0 {
            return None;
        }
        let at = Loc {
            root: Root::Scratch(0),
            offset: 0,
            strides: self.at_strides.clone(),
            dtype: self.dtype,
            dims: self.at_dims.clone(),
        };
        let rs = broadcast_strides(&at, dims);
        let cs = contiguous(&self.dims);
        let mut used = vec![false; self.dims.len()];
        let mut map = Vec::new();
        for (k, &d) in dims.iter().enumerate() {
            if d == 1 || rs[k] == 0 {
                map.push(None);
                continue;
            }
            // Axes longer than 1 have distinct contiguous strides.
            let a = (0..self.dims.len()).find(|&a| self.dims[a] > 1 && cs[a] == rs[k])?;
            if used[a] || d > self.dims[a] {
                return None;
            }
            used[a] = true;
            map.push(Some(a));
        }
        Some(map)
    }

    /// A producer operand's `strides` (over [`Self::dims`]) as strides
    /// over the reader's dims, through `map` (from [`Self::axis_map`]).
    pub fn compose(&self, map: &[Option<usize>], strides: &[i64]) -> Vec<i64> {
        map.iter().map(|a| a.map_or(0, |a| strides[a])).collect()
    }

    /// The same value seen through a view (offset and strides in the
    /// producer's output layout, as the LIR gives them).
    fn view(&self, offset: i64, strides: Vec<i64>, dims: Vec<usize>) -> InlineSrc {
        InlineSrc {
            at_strides: strides,
            at_offset: self.at_offset + offset,
            at_dims: dims,
            ..self.clone()
        }
    }
}

/// Memory an operand `u` of a kernel reads: its own, or for a recomputed
/// value its producer's operands'.
pub(super) fn operand_locs(p: &Planner, u: ValueId) -> Option<Vec<Loc>> {
    match p.inline.get(&u) {
        Some(src) => Some(src.locs.clone()),
        None => p.locs[u.index()].clone().map(|l| vec![l]),
    }
}

/// View node output `w` of `base`: if `base` is recomputed by its
/// readers, so is `w` (recorded; nothing stored). Returns whether it was.
pub(super) fn view_of_inline(
    p: &mut Planner,
    w: ValueId,
    base: ValueId,
    offset: i64,
    strides: Vec<i64>,
) -> bool {
    let Some(src) = p.inline.get(&base) else {
        return false;
    };
    let v = src.view(offset, strides, p.ty(w).dims().to_vec());
    p.inline.insert(w, v);
    true
}

/// `v` and every view of it (views of views too).
fn with_views(p: &Planner, v: ValueId) -> Vec<ValueId> {
    let mut values = vec![v];
    let mut k = 0;
    while k < values.len() {
        let b = values[k];
        values.extend(
            p.view_defs
                .iter()
                .filter(|(_, d)| d.0 == b)
                .map(|(&w, _)| w),
        );
        k += 1;
    }
    values
}

/// Elementwise node `i` with one output: if it has 2..=[`MAX_READERS`]
/// readers (through views), each an elementwise node or a reduction of it
/// alone, that can index it, its operands are plain stored values, and
/// no kernel from here to shortly after its last reader writes over
/// those operands, record it in `p.inline` and emit nothing.
pub(super) fn defer_to_readers(p: &mut Planner, i: usize, node: &Node) -> Result<bool, CudaError> {
    if node.outputs.len() != 1 || node.inputs.len() > MAX_OPERANDS {
        return Ok(false);
    }
    let v = node.outputs[0];
    let dims = p.ty(v).dims().to_vec();
    if dims.iter().product::<usize>() == 0 || p.g.outputs.contains(&v) || p.no_inline.contains(&v) {
        return Ok(false);
    }
    if node.op.name() == "fused_elementwise"
        && node
            .attrs
            .graph("body")
            .map_or(true, |b| b.outputs.len() != 1)
    {
        return Ok(false);
    }
    // Operands: plain stored values (not recomputed, gathered or left
    // for a reduction themselves).
    let mut locs = Vec::new();
    for &u in &node.inputs {
        if p.inline.contains_key(&u) || p.gathers.contains_key(&u) || p.deferred.contains_key(&u) {
            return Ok(false);
        }
        match &p.locs[u.index()] {
            Some(l) => locs.push(l.clone()),
            None => return Ok(false),
        }
    }
    let values = with_views(p, v);
    if values.iter().any(|w| p.g.outputs.contains(w)) {
        return Ok(false);
    }
    // Where each value sits in the producer's output layout.
    let mut src = InlineSrc {
        node: i,
        dims: dims.clone(),
        at_strides: contiguous(&dims),
        at_offset: 0,
        at_dims: dims.clone(),
        locs,
        dtype: p.ty(v).dtype,
        window: Vec::new(),
        last: i,
        last_in_place: false,
    };
    let mut at: HashMap<ValueId, InlineSrc> = HashMap::new();
    at.insert(v, src.clone());
    for &w in &values[1..] {
        let (b, off, st) = &p.view_defs[&w];
        let Some(bs) = at.get(b) else {
            return Ok(false);
        };
        let ws = bs.view(*off, st.clone(), p.ty(w).dims().to_vec());
        at.insert(w, ws);
    }
    // The readers: each must take a recomputed operand.
    let mut readers = Vec::new();
    // (reader, whether it reads `w` at its own element, as the producer's
    // output dims).
    let mut reads = Vec::new();
    for &w in &values {
        for &u in &p.users[w.index()] {
            let n = &p.g.nodes[u];
            if values.contains(&n.outputs[0]) {
                continue;
            }
            let in_dtype = p.ty(n.inputs[0]).dtype;
            let reader_dims = if is_elementwise(n, in_dtype) && n.outputs.len() == 1 {
                p.ty(n.outputs[0]).dims().to_vec()
            } else if Reduce::parse(n.op.name(), 0).is_some() && n.inputs.as_slice() == [w] {
                p.ty(w).dims().to_vec()
            } else {
                return Ok(false);
            };
            let Some(map) = at[&w].axis_map(&reader_dims).filter(|_| u > i) else {
                return Ok(false);
            };
            let identity = reader_dims == dims
                && map
                    .iter()
                    .enumerate()
                    .all(|(k, a)| *a == Some(k) || dims[k] == 1);
            reads.push((u, identity));
            if !readers.contains(&u) {
                readers.push(u);
            }
        }
    }
    if !(2..=MAX_READERS).contains(&readers.len()) {
        return Ok(false);
    }
    // Operands in the arena must keep their values until the last reader
    // has run: checked once every node is planned (`overwritten`) over
    // the nodes up to it and the two kernel nodes after it (a fused
    // kernel writes at most that far ahead: a reduction's epilogue and
    // row consumer, a GEMM's residual add).
    let last = readers.iter().copied().max().unwrap_or(i);
    src.last = last;
    src.last_in_place = reads.iter().all(|&(u, id)| u != last || id);
    src.window = (i + 1..=last).collect();
    src.window.extend(
        (last + 1..p.g.nodes.len())
            .filter(|&k| !p.views.contains(&p.g.nodes[k].outputs[0]))
            .take(2),
    );
    p.inline.insert(v, src);
    p.unstored.insert(v);
    // Never stored: a reader that does not know about it gets a typed
    // "no location" error, not an unwritten buffer.
    p.locs[v.index()] = None;
    Ok(true)
}

/// Once every node is planned: the recomputed values whose operands in
/// the arena a kernel may have overwritten before their last reader ran
/// (a node in the value's window whose output shares their memory and is
/// stored). The planner cannot tell before planning those nodes which of
/// them store their outputs: the pooling head's squared-norm sum, say,
/// reuses the mean's operands' memory but is never stored (its kernel
/// writes only the normalized result).
pub(super) fn overwritten(p: &Planner) -> Vec<ValueId> {
    let mut bad = Vec::new();
    for (&v, src) in &p.inline {
        if src.node
            != p.g
                .nodes
                .iter()
                .position(|n| n.outputs.contains(&v))
                .unwrap_or(usize::MAX)
        {
            continue; // a view: its base is checked
        }
        let writable: Vec<&Loc> = src
            .locs
            .iter()
            .filter(|l| !matches!(l.root, Root::Input(_) | Root::Const(_)))
            .collect();
        'nodes: for &k in &src.window {
            // After the last reader only outputs written by an earlier
            // node's fused kernel matter (`done`): a node's own kernel
            // runs after the last reader's.
            if k > src.last && !p.done.contains(&k) {
                continue;
            }
            for &o in &p.g.nodes[k].outputs {
                if p.views.contains(&o) || p.unstored.contains(&o) {
                    continue;
                }
                // Where the node's output went: its slot, or the memory
                // it aliases (a final transfer), if anywhere.
                let Some(ol) = &p.locs[o.index()] else {
                    continue;
                };
                // The last reader computing the value at its own element
                // and storing it there: each element is read before it is
                // written, by the same thread (as for any elementwise
                // kernel in place; a reduction's row consumer is checked
                // the same way in `reduce.rs`).
                let in_place = |l: &Loc| {
                    k == src.last
                        && src.last_in_place
                        && l.root == ol.root
                        && l.offset == ol.offset
                        && esize(l.dtype) == esize(ol.dtype)
                        && l.dims == src.dims
                        && l.dims == ol.dims
                        && l.strides == ol.strides
                };
                if writable.iter().any(|l| overlap(l, ol) && !in_place(l)) {
                    bad.push(v);
                    break 'nodes;
                }
            }
        }
    }
    bad
}
