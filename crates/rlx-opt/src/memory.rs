//! Memory planning: MIR → LIR.
//!
//! [`plan`] schedules one kernel per node, in graph order, and places every
//! value in one arena:
//!
//! * **Views instead of copies.** `reshape`/`squeeze`/`unsqueeze` of a
//!   contiguous value, same-dtype `cast`, `identity`, `stop_gradient`,
//!   `permute` (strides) and `narrow` on the leading axis (an offset) read
//!   their input's memory: the value becomes a [`View`] of the *root*
//!   storage (a slot, or a graph input) and its node launches no kernel.
//!   Packed/quantized dtypes are never viewed.
//! * **Liveness.** A stored value lives from the step that defines it to
//!   its last use — uses of every view of it included (a base outlives its
//!   views); graph outputs live to the end.
//! * **Reuse.** Buffers are carved from the arena with a best-fit free list
//!   keyed by size, all sizes and offsets 64-byte aligned; a buffer is
//!   released after the step of its last use (so a kernel never writes
//!   over its own inputs), and neighbouring free blocks merge.
//! * **In place.** The output of an elementwise unary or binary op (or of
//!   a `fused_elementwise` region, one elementwise loop) takes over the
//!   buffer of an input that dies at that node and has the output's dtype
//!   and shape — unless another input of the node reads the same buffer
//!   (through a view, say). So does `matmul_residual` over its residual
//!   (a transformer's residual stream stays in one buffer). Which inputs
//!   may be taken over is the op's `in_place` (`rlx_ir::InPlace`).
//!
//! Graph inputs stay in the caller's memory (no slot). [`check_plan`]
//! re-derives liveness from a [`Program`] and verifies that no two
//! simultaneously live stored values overlap (except an in-place pair at
//! the step that hands one buffer over), and that every view stays within
//! its base and inside its base's lifetime.

mod free_list;

use crate::error::OptError;
use free_list::FreeList;
use rlx_ir::lir::{BufferSlot, Program, Step, View};
use rlx_ir::op::{InPlace, Window};
use rlx_ir::{limits, Graph, IrError, Limits, Node, TensorType, ValueDef, ValueId};
use std::collections::{BTreeSet, HashMap};
use std::fmt;

/// Alignment of every buffer, in bytes.
pub const ALIGN: usize = 64;

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// What planning achieved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// The most bytes live at once (aligned buffer sizes).
    pub peak_bytes: usize,
    /// Size of the arena (≥ `peak_bytes`; the difference is fragmentation).
    pub arena_bytes: usize,
    /// Stored values (slots), in-place ones included.
    pub buffers: usize,
    /// Slots that took over an input's buffer.
    pub in_place: usize,
    /// Values that are views of another value's memory.
    pub views: usize,
    /// Bytes with one buffer per value (no reuse, no views): what
    /// `Program::from_graph` lays out.
    pub naive_bytes: usize,
}

fn human(b: usize) -> String {
    if b < 1024 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "arena {} (peak live {}, naive {}",
            human(self.arena_bytes),
            human(self.peak_bytes),
            human(self.naive_bytes)
        )?;
        if self.arena_bytes > 0 {
            write!(
                f,
                ", {:.1}x smaller",
                self.naive_bytes as f64 / self.arena_bytes as f64
            )?;
        }
        write!(
            f,
            "); {} buffers ({} in place), {} views",
            self.buffers, self.in_place, self.views
        )
    }
}

/// Row-major strides (in elements) of `dims`.
fn row_major(dims: &[usize]) -> Vec<usize> {
    rlx_ir::Shape::from(dims).strides()
}

/// Where a value's elements are, while planning.
#[derive(Clone, Debug)]
struct Loc {
    root: ValueId,
    offset: usize,
    strides: Vec<usize>,
}

#[derive(Clone, Debug)]
enum Storage {
    /// A graph input: the caller's buffer.
    Input,
    /// A buffer of its own in the arena.
    Owned,
    /// Another value's memory.
    View(Loc),
}

fn loc_of(storage: &[Storage], g: &Graph, v: ValueId) -> Loc {
    match &storage[v.index()] {
        Storage::View(l) => l.clone(),
        _ => Loc {
            root: v,
            offset: 0,
            strides: row_major(g.ty(v).dims()),
        },
    }
}

/// The view `node` can be, if any: its op's own answer
/// ([`rlx_ir::op::ViewFn`], on the op's definition) for an input and output
/// of one stored dtype.
fn view_of(g: &Graph, node: &Node, storage: &[Storage]) -> Option<Loc> {
    if node.inputs.len() != 1 || node.outputs.len() != 1 {
        return None;
    }
    let view = node.op.view?;
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let (tx, to) = (g.ty(x), g.ty(out));
    if tx.dtype != to.dtype || tx.dtype.is_quantized() {
        return None;
    }
    let l = loc_of(storage, g, x);
    let at = Window {
        offset: l.offset,
        strides: l.strides,
    };
    let w = view(tx, &node.attrs, to, &at)?;
    Some(Loc {
        root: l.root,
        offset: w.offset,
        strides: w.strides,
    })
}

fn bytes_of(ty: &TensorType) -> Result<usize, OptError> {
    ty.dtype
        .storage_bytes(ty.shape.numel())
        .ok_or_else(|| OptError::Plan(format!("{ty} is not a whole number of blocks")))
}

/// How errors name value `v`: its name, else `%index`, and what defines it.
fn describe(g: &Graph, v: usize) -> String {
    let value = &g.values[v];
    let name = value.name.clone().unwrap_or_else(|| format!("%{v}"));
    match value.def {
        ValueDef::Input(_) => format!("graph input `{name}` ({})", value.ty),
        ValueDef::Node { node, .. } => format!(
            "value `{name}` ({}) of node {node} (`{}`)",
            value.ty,
            g.nodes[node].op.name()
        ),
    }
}

/// Every value's byte size against `max_tensor_bytes`, overflow-checked,
/// before anything else looks at the shapes: past this point sizes,
/// strides and offsets fit `usize` (they are at most a tensor's bytes).
fn check_sizes(g: &Graph, lim: &Limits) -> Result<(), OptError> {
    for (v, value) in g.values.iter().enumerate() {
        let b = lim
            .check_tensor_shape(&describe(g, v), value.ty.dtype, value.ty.dims())
            .map_err(IrError::from)?;
        // On 32-bit targets a bound above 4 GiB could still let one through.
        if usize::try_from(b).is_err() {
            return Err(OptError::Plan(format!(
                "{}: {b} bytes do not fit this target's address space",
                describe(g, v)
            )));
        }
    }
    Ok(())
}

/// The inputs whose buffer node's output may take over, as its op says
/// ([`InPlace`], on the op's definition).
fn donors(node: &Node) -> &[ValueId] {
    if node.outputs.len() != 1 {
        return &[];
    }
    match node.op.in_place {
        InPlace::No => &[],
        InPlace::Elementwise => &node.inputs,
        InPlace::Operand(k) => node.inputs.get(k..=k).unwrap_or(&[]),
    }
}

/// Whether no other operand of `node` reads donor `x`'s memory: an
/// elementwise op may read `x` itself in several positions, never through
/// another view of it; an `Operand(k)` op (`matmul_residual`) may read it
/// nowhere else (`x @ x + x` is not planned in place).
fn others_clear(node: &Node, x: ValueId, root: impl Fn(ValueId) -> ValueId) -> bool {
    match node.op.in_place {
        InPlace::Operand(k) => node
            .inputs
            .iter()
            .enumerate()
            .all(|(j, &u)| j == k || root(u) != x),
        _ => node.inputs.iter().all(|&u| u == x || root(u) != x),
    }
}

/// Plan `graph` into an LIR program (see the module docs).
pub fn plan(graph: Graph) -> Result<Program, OptError> {
    Ok(plan_with_report(graph)?.0)
}

/// [`plan`], with what it achieved.
pub fn plan_with_report(graph: Graph) -> Result<(Program, MemoryReport), OptError> {
    graph.verify()?;
    let g = &graph;
    let lim = limits();
    check_sizes(g, &lim)?;
    let n = g.nodes.len();
    let nv = g.values.len();

    // 1. Views.
    let mut storage: Vec<Storage> = g
        .values
        .iter()
        .map(|v| match v.def {
            ValueDef::Input(_) => Storage::Input,
            ValueDef::Node { .. } => Storage::Owned,
        })
        .collect();
    let mut is_view_node = vec![false; n];
    for (i, node) in g.nodes.iter().enumerate() {
        if let Some(l) = view_of(g, node, &storage) {
            storage[node.outputs[0].index()] = Storage::View(l);
            is_view_node[i] = true;
        }
    }
    let root = |v: ValueId| match &storage[v.index()] {
        Storage::View(l) => l.root,
        _ => v,
    };

    // 2. Liveness of roots: definition to last use (views' uses included).
    let mut last: Vec<usize> = vec![0; nv];
    for (i, node) in g.nodes.iter().enumerate() {
        for &o in &node.outputs {
            last[o.index()] = i;
        }
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for &u in &node.inputs {
            let r = root(u).index();
            last[r] = last[r].max(i);
        }
    }
    for &o in &g.outputs {
        last[root(o).index()] = n;
    }
    let mut dies_at: Vec<Vec<ValueId>> = vec![Vec::new(); n];
    for v in 0..nv {
        if matches!(storage[v], Storage::Owned) && last[v] < n {
            dies_at[last[v]].push(ValueId(v as u32));
        }
    }

    // 3. Placement.
    let mut free = FreeList::default();
    let mut region: HashMap<ValueId, (usize, usize)> = HashMap::new(); // offset, aligned size
    let mut handed_over: BTreeSet<ValueId> = BTreeSet::new();
    let (mut live, mut peak) = (0usize, 0usize);
    let mut steps = Vec::new();
    let mut slots = Vec::new();
    let mut report = MemoryReport::default();
    for (i, node) in g.nodes.iter().enumerate() {
        if !is_view_node[i] {
            steps.push(Step {
                nodes: vec![i],
                kernel: node.op.name().to_string(),
                inputs: node.inputs.clone(),
                outputs: node.outputs.clone(),
            });
            for &o in &node.outputs {
                let ty = g.ty(o);
                let bytes = bytes_of(ty)?;
                let size = align(bytes);
                let donor = (size > 0)
                    .then(|| {
                        donors(node).iter().copied().find(|&x| {
                            matches!(storage[x.index()], Storage::Owned)
                                && last[x.index()] == i
                                && g.ty(x) == ty
                                && !handed_over.contains(&x)
                                && others_clear(node, x, root)
                        })
                    })
                    .flatten();
                let offset = match donor {
                    Some(x) => {
                        handed_over.insert(x);
                        report.in_place += 1;
                        region[&x].0
                    }
                    None => {
                        live += size;
                        // The arena is allocated by the backend after
                        // planning: bound it here, as it grows.
                        let what = || format!("the arena at {}", describe(g, o.index()));
                        let off = free.alloc(size).ok_or_else(|| {
                            OptError::Plan(format!("{}: arena size overflows usize", what()))
                        })?;
                        lim.check_arena_bytes(&what(), free.end as u64)
                            .map_err(IrError::from)?;
                        off
                    }
                };
                region.insert(o, (offset, size));
                slots.push(BufferSlot {
                    value: o,
                    ty: ty.clone(),
                    offset,
                    bytes,
                });
            }
            peak = peak.max(live);
        }
        for &v in &dies_at[i] {
            if handed_over.contains(&v) {
                continue;
            }
            let (off, size) = region[&v];
            free.free(off, size);
            live -= size;
        }
    }

    // 4. Views, against the root's storage.
    let views: Vec<View> = g
        .values
        .iter()
        .enumerate()
        .filter_map(|(v, _)| match &storage[v] {
            Storage::View(l) => Some(View {
                value: ValueId(v as u32),
                base: l.root,
                offset: l.offset,
                strides: l.strides.clone(),
            }),
            _ => None,
        })
        .collect();

    report.peak_bytes = peak;
    report.arena_bytes = free.end;
    report.buffers = slots.len();
    report.views = views.len();
    for v in &g.values {
        if !matches!(v.def, ValueDef::Input(_)) {
            // Saturating: a report, and on 32-bit targets values that each
            // pass the tensor bound can sum past usize.
            report.naive_bytes = report.naive_bytes.saturating_add(align(bytes_of(&v.ty)?));
        }
    }
    let program = Program {
        arena_bytes: free.end,
        graph,
        steps,
        slots,
        views,
    };
    Ok((program, report))
}

/// Verify a planned program: every non-input value has exactly one slot
/// or view; slots are aligned, sized for their type and inside the arena;
/// views read within their base (a slot or a graph input, never another
/// view) and their base lives as long as they are used; each non-view node
/// has one step, in order; and no two stored values that are live at the
/// same time share bytes — except an elementwise node's (or
/// `matmul_residual`'s) output taking over the buffer of an input that dies there (and that no other input of the
/// node reads). Liveness is re-derived from the program's graph, not taken
/// from the planner.
pub fn check_plan(p: &Program) -> Result<(), String> {
    let g = &p.graph;
    let n = g.nodes.len();
    let mut slot: HashMap<ValueId, &BufferSlot> = HashMap::new();
    let mut view: HashMap<ValueId, &View> = HashMap::new();
    for s in &p.slots {
        if slot.insert(s.value, s).is_some() {
            return Err(format!("%{} has two slots", s.value.0));
        }
    }
    for v in &p.views {
        if view.insert(v.value, v).is_some() {
            return Err(format!("%{} has two views", v.value.0));
        }
    }
    for (i, val) in g.values.iter().enumerate() {
        let v = ValueId(i as u32);
        let placed = slot.contains_key(&v) as u8 + view.contains_key(&v) as u8;
        match (val.def, placed) {
            (ValueDef::Input(_), 0) | (ValueDef::Node { .. }, 1) => {}
            (ValueDef::Input(_), _) => return Err(format!("graph input %{i} is placed")),
            (_, k) => return Err(format!("%{i} has {k} placements, expected 1")),
        }
    }
    for s in &p.slots {
        let ty = g.ty(s.value);
        let want = ty.dtype.storage_bytes(ty.shape.numel());
        if &s.ty != ty || Some(s.bytes) != want {
            return Err(format!("slot of %{} does not fit {ty}", s.value.0));
        }
        if s.offset % ALIGN != 0 || s.offset + s.bytes > p.arena_bytes {
            return Err(format!(
                "slot of %{} at {}+{} is misaligned or outside the {}-byte arena",
                s.value.0, s.offset, s.bytes, p.arena_bytes
            ));
        }
    }
    for v in &p.views {
        let ty = g.ty(v.value);
        let base_ty = g.ty(v.base);
        let base_is_input = matches!(g.values[v.base.index()].def, ValueDef::Input(_));
        if !base_is_input && !slot.contains_key(&v.base) {
            return Err(format!(
                "view %{} has base %{}, which is neither an input nor a slot",
                v.value.0, v.base.0
            ));
        }
        if ty.dtype != base_ty.dtype || v.strides.len() != ty.rank() {
            return Err(format!("view %{} does not match its base", v.value.0));
        }
        if ty.shape.numel() > 0 {
            let reach = v.offset
                + ty.dims()
                    .iter()
                    .zip(&v.strides)
                    .map(|(&d, &s)| (d - 1) * s)
                    .sum::<usize>();
            if reach >= base_ty.shape.numel() {
                return Err(format!(
                    "view %{} reads element {reach} of %{} ({} elements)",
                    v.value.0,
                    v.base.0,
                    base_ty.shape.numel()
                ));
            }
        }
    }
    // Steps: one per node with stored outputs, in order.
    let mut stepped = vec![0usize; n];
    let mut prev = None;
    for s in &p.steps {
        let &[i] = s.nodes.as_slice() else {
            return Err("a step runs several nodes (fusion is not planned here)".into());
        };
        let node = g.nodes.get(i).ok_or("a step names a missing node")?;
        if prev.is_some_and(|q| q >= i) || s.kernel != node.op.name() {
            return Err(format!("step for node {i} is out of order or mislabeled"));
        }
        if s.outputs.iter().any(|o| view.contains_key(o)) {
            return Err(format!("node {i} writes a view"));
        }
        prev = Some(i);
        stepped[i] += 1;
    }
    for (i, node) in g.nodes.iter().enumerate() {
        let is_view = node.outputs.iter().all(|o| view.contains_key(o));
        if stepped[i] != usize::from(!is_view) {
            return Err(format!(
                "node {i} (`{}`) has {} steps",
                node.op.name(),
                stepped[i]
            ));
        }
    }
    // Liveness of stored values, from the graph.
    let root = |v: ValueId| view.get(&v).map_or(v, |w| w.base);
    let mut start: HashMap<ValueId, usize> = HashMap::new();
    let mut end: HashMap<ValueId, usize> = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        for &o in &node.outputs {
            if slot.contains_key(&o) {
                start.insert(o, i);
                end.insert(o, i);
            }
        }
        for &u in &node.inputs {
            if let Some(e) = end.get_mut(&root(u)) {
                *e = (*e).max(i);
            }
        }
    }
    for &o in &g.outputs {
        if let Some(e) = end.get_mut(&root(o)) {
            *e = n;
        }
    }
    let in_place_ok = |x: &BufferSlot, y: &BufferSlot| {
        let i = start[&y.value];
        let node = &g.nodes[i];
        end[&x.value] == i
            && donors(node).contains(&x.value)
            && node.outputs.contains(&y.value)
            && x.offset == y.offset
            && x.bytes == y.bytes
            && x.ty == y.ty
            && others_clear(node, x.value, root)
    };
    let mut order: Vec<&BufferSlot> = p.slots.iter().filter(|s| s.bytes > 0).collect();
    order.sort_by_key(|s| s.offset);
    for (k, a) in order.iter().enumerate() {
        for b in &order[k + 1..] {
            if b.offset >= a.offset + a.bytes {
                break; // sorted by offset: no later slot overlaps `a` either
            }
            let (sa, ea, sb, eb) = (
                start[&a.value],
                end[&a.value],
                start[&b.value],
                end[&b.value],
            );
            if ea < sb || eb < sa {
                continue;
            }
            let ok = (ea == sb && in_place_ok(a, b)) || (eb == sa && in_place_ok(b, a));
            if !ok {
                return Err(format!(
                    "%{} (bytes {}..{}, live {sa}..={ea}) and %{} (bytes {}..{}, live {sb}..={eb}) overlap",
                    a.value.0,
                    a.offset,
                    a.offset + a.bytes,
                    b.value.0,
                    b.offset,
                    b.offset + b.bytes
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
