//! Compiling a planned LIR program for the fast engine, in three phases:
//! where every value lives ([`Layout`]: the graph inputs, the memory
//! plan's slots, constants and views), which graph inputs get a prepared
//! copy ([`super::weights`]), and the step each node runs ([`Planner`]).

use super::convert::{self, Fmt};
use super::elementwise;
use super::layout::{row_major, Loc, Root};
use super::state::State;
use super::step::{Home, StageIn, Step};
use super::weights::{
    dot_plan, f32_pack_kind, f32_pack_plan, prep_need, transposed_copies, F32Pack, F32PackKind,
    Need, Pack, Prep,
};
use super::{attention, bf16dot, bounds, fail, select, winograd, FastProgram, Filter, Kind};
use crate::kernels::amx;
use crate::CpuError;
use rlx_ir::lir::Program;
use rlx_ir::{Graph, Node, TensorType};
use std::sync::Mutex;

impl FastProgram {
    pub fn compile(program: Program) -> Result<FastProgram, CpuError> {
        // Before any length below is computed or allocated.
        bounds::check(&program)?;
        let mut layout = Layout::of(&program);
        let (preps, prepared_len) = transposed_copies(&program, &mut layout.homes);
        let mut planner = Planner::new(&program.graph, layout, preps, prepared_len);
        let mut steps = Vec::with_capacity(program.graph.nodes.len());
        for ni in 0..program.graph.nodes.len() {
            let step = planner.step(ni)?;
            steps.push(step);
        }
        let Planner {
            homes,
            consts,
            arena_len,
            half_len,
            mut preps,
            packs,
            f32_packs,
            prepared_len,
            f32_pack_kind,
            scratch,
            stage_len,
            stage_out_len,
            amx_scratch,
            ..
        } = planner;
        for p in preps.iter_mut().filter(|p| p.transpose) {
            p.need = prep_need(&program.graph, &homes, &steps, p, &f32_packs, f32_pack_kind);
        }
        let mut p = FastProgram {
            graph: program.graph,
            homes,
            steps,
            consts,
            preps,
            packs,
            f32_packs,
            f32_pack_kind,
            amx_scratch,
            prepared_len,
            arena_len,
            half_len,
            stage_len,
            stage_out_len,
            scratch,
            state: Mutex::new(State::empty()),
        };
        // `ready` is only ever set for resident inputs, which stay resident.
        p.state = Mutex::new(p.new_state());
        Ok(p)
    }
}

/// Where each value lives before any node is planned.
struct Layout {
    homes: Vec<Home>,
    /// The float constants, widened to f32 ([`Root::Const`]).
    consts: Vec<f32>,
    arena_len: usize,
    half_len: usize,
    /// Values that are a float constant, or a view the memory plan made.
    is_const: Vec<bool>,
    is_view: Vec<bool>,
}

impl Layout {
    fn of(program: &Program) -> Layout {
        let g = &program.graph;
        let mut homes = input_homes(g);
        let (arena_len, half_len) = place_slots(program, &mut homes);
        let (consts, is_const) = place_constants(g, &mut homes);
        let is_view = place_views(program, &mut homes);
        Layout {
            homes,
            consts,
            arena_len,
            half_len,
            is_const,
            is_view,
        }
    }
}

/// Float graph inputs are read where the caller keeps them; others (and
/// every value not placed later) are host tensors.
fn input_homes(g: &Graph) -> Vec<Home> {
    let mut homes: Vec<Home> = vec![Home::Host(None); g.values.len()];
    for (k, &v) in g.inputs.iter().enumerate() {
        let t = g.ty(v);
        homes[v.index()] = match Fmt::of(t.dtype) {
            Some(fmt) => Home::Mem(
                Loc {
                    root: Root::Input(k),
                    offset: 0,
                    dims: t.dims().to_vec(),
                    strides: row_major(t.dims()),
                },
                fmt,
            ),
            None => Home::Host(Some(k)),
        };
    }
    homes
}

/// f32 slots in the f32 arena, f16/bf16 slots (as bits) in the 16-bit
/// arena, both at the plan's offsets; each arena is only as long as its
/// last slot. Returns the two arenas' lengths.
fn place_slots(program: &Program, homes: &mut [Home]) -> (usize, usize) {
    let (mut arena_len, mut half_len) = (0usize, 0usize);
    for s in &program.slots {
        let Some(fmt) = Fmt::of(s.ty.dtype) else {
            continue;
        };
        let (root, offset) = if fmt == Fmt::F32 {
            arena_len = arena_len.max((s.offset + s.bytes).div_ceil(4));
            (Root::Arena, s.offset / 4)
        } else {
            half_len = half_len.max((s.offset + s.bytes).div_ceil(2));
            (Root::Half, s.offset / 2)
        };
        homes[s.value.index()] = Home::Mem(
            Loc {
                root,
                offset,
                dims: s.ty.dims().to_vec(),
                strides: row_major(s.ty.dims()),
            },
            fmt,
        );
    }
    (arena_len, half_len)
}

/// Float constants live in their own f32 buffer, filled here once (16-bit
/// ones widened: exact). Returns the buffer and which values are in it.
fn place_constants(g: &Graph, homes: &mut [Home]) -> (Vec<f32>, Vec<bool>) {
    let mut consts = Vec::new();
    let mut is_const = vec![false; g.values.len()];
    for node in &g.nodes {
        if node.op.name() != "constant" || node.outputs.len() != 1 {
            continue;
        }
        let Ok(t) = node.attrs.tensor("value") else {
            continue;
        };
        if !convert::is_float(t.dtype()) {
            continue;
        }
        let Ok(data) = t.to_f64_vec() else {
            continue;
        };
        let v = node.outputs[0];
        homes[v.index()] = Home::Mem(
            Loc {
                root: Root::Const,
                offset: consts.len(),
                dims: t.shape().dims().to_vec(),
                strides: row_major(t.shape().dims()),
            },
            Fmt::F32,
        );
        consts.extend(data.iter().map(|&x| x as f32));
        is_const[v.index()] = true;
    }
    (consts, is_const)
}

/// A float view the memory plan made lives in its base's memory, read
/// through its own strides. Returns which values are views.
fn place_views(program: &Program, homes: &mut [Home]) -> Vec<bool> {
    let g = &program.graph;
    let mut is_view = vec![false; g.values.len()];
    for v in &program.views {
        if !convert::is_float(g.ty(v.value).dtype) {
            continue;
        }
        let (base, fmt) = match &homes[v.base.index()] {
            Home::Mem(l, f) => (l.clone(), *f),
            Home::Host(_) => continue,
        };
        homes[v.value.index()] = Home::Mem(
            Loc {
                root: base.root,
                offset: base.offset + v.offset,
                dims: g.ty(v.value).dims().to_vec(),
                strides: v.strides.clone(),
            },
            fmt,
        );
        is_view[v.value.index()] = true;
    }
    is_view
}

/// The layouts of a fast step's bool (host) operands.
struct BoolOperands {
    /// causal / sliding-window mask of attention.
    mask: Vec<bool>,
    /// Broadcast strides of a custom attention mask or a `where` condition.
    mask_strides: Vec<usize>,
    /// Broadcast strides of bool inputs of elementwise regions.
    host_strides: Vec<Vec<usize>>,
}

/// What compile gathers while it plans each node's step, in node order:
/// later nodes see the copies, packs and folds of earlier ones.
struct Planner<'g> {
    g: &'g Graph,
    homes: Vec<Home>,
    consts: Vec<f32>,
    arena_len: usize,
    half_len: usize,
    preps: Vec<Prep>,
    packs: Vec<Pack>,
    f32_packs: Vec<F32Pack>,
    prepared_len: usize,
    /// 16-bit graph inputs a fast kernel reads: their widened copy's
    /// offset in `prepared`.
    widened: Vec<Option<usize>>,
    /// Decided once (whether this CPU has AMX).
    f32_pack_kind: Option<F32PackKind>,
    scratch: usize,
    stage_len: usize,
    stage_out_len: usize,
    amx_scratch: usize,
    /// Nodes that run nothing (views, constants).
    no_op: Vec<bool>,
}

impl<'g> Planner<'g> {
    fn new(g: &'g Graph, layout: Layout, preps: Vec<Prep>, prepared_len: usize) -> Planner<'g> {
        let no_op: Vec<bool> = g
            .nodes
            .iter()
            .map(|n| {
                n.outputs.len() == 1
                    && convert::is_float(g.ty(n.outputs[0]).dtype)
                    && (layout.is_view[n.outputs[0].index()]
                        || layout.is_const[n.outputs[0].index()])
            })
            .collect();
        Planner {
            g,
            homes: layout.homes,
            consts: layout.consts,
            arena_len: layout.arena_len,
            half_len: layout.half_len,
            preps,
            packs: Vec::new(),
            f32_packs: Vec::new(),
            prepared_len,
            widened: vec![None; g.inputs.len()],
            f32_pack_kind: f32_pack_kind(),
            scratch: 0,
            stage_len: 0,
            stage_out_len: 0,
            amx_scratch: 0,
            no_op,
        }
    }

    /// The step of node `ni`: nothing, the reference kernel, or a fast
    /// kernel with its operands, staging, packs and fold.
    fn step(&mut self, ni: usize) -> Result<Step, CpuError> {
        let g = self.g;
        let node = &g.nodes[ni];
        if self.no_op[ni] {
            return Ok(Step::View);
        }
        let out_float = node.outputs.len() == 1 && convert::is_float(g.ty(node.outputs[0]).dtype);
        let types: Vec<&TensorType> = node.inputs.iter().map(|&v| g.ty(v)).collect();
        // Fast kernels write f32 arena slots directly, 16-bit slots
        // through the staging output.
        let out_home = match out_float.then(|| &self.homes[node.outputs[0].index()]) {
            Some(Home::Mem(l, f)) if matches!(l.root, Root::Arena | Root::Half) => {
                Some((l.clone(), *f))
            }
            _ => None,
        };
        let kind = select(node.op.name(), &types, &node.attrs);
        if let Some(k @ (Kind::IntMatmul { .. } | Kind::ToInt8 { .. } | Kind::DynQuant)) = &kind {
            return Ok(Step::Host(k.clone()));
        }
        let kind = kind.filter(|_| out_home.is_some());
        let (Some(kind), Some((out_loc, out_fmt))) = (kind, out_home) else {
            return Ok(Step::Ref);
        };
        let out_ty = g.ty(node.outputs[0]);
        let out_half = (out_fmt != Fmt::F32).then(|| {
            self.stage_out_len = self.stage_out_len.max(out_loc.numel());
            (out_loc.offset, out_fmt)
        });
        let dot = match &kind {
            Kind::Matmul {
                bias,
                residual: false,
                ..
            } if bf16dot::available() => {
                dot_plan(g, node, &self.homes, &self.preps, &mut self.packs, *bias)
            }
            _ => None,
        };
        let (stage_in, staged) = self.stage_in(node, dot.is_some());
        let mut args = self.args(node, dot.is_some(), &stage_in)?;
        self.stage_len = self.stage_len.max(staged);
        let f32_pack = self.f32_pack(&kind, dot.is_some(), &args);
        let kind = self.winograd_filter(kind, &args);
        let BoolOperands {
            mask,
            mask_strides,
            host_strides,
        } = self.fit_operands(&kind, node, &types, out_ty, &mut args)?;
        Ok(Step::Fast {
            kind,
            args,
            mask,
            mask_strides,
            host_strides,
            stage_in,
            out_half,
            dot,
            f32_pack,
        })
    }

    /// 16-bit arena operands: their spans, overlapping ones merged (q, k, v
    /// read through views of one packed buffer are staged once), each
    /// region widened into the staging buffer. A dot-product matmul
    /// (`dot`) reads its left operand as it is. Returns the regions and
    /// the staging length they take.
    fn stage_in(&self, node: &Node, dot: bool) -> (Vec<StageIn>, usize) {
        let mut spans: Vec<(std::ops::Range<usize>, Fmt)> = node
            .inputs
            .iter()
            .enumerate()
            .filter(|&(i, _)| !(dot && i == 0))
            .filter_map(|(_, &v)| match &self.homes[v.index()] {
                Home::Mem(l, f) if l.root == Root::Half && *f != Fmt::F32 => Some((l.span(), *f)),
                _ => None,
            })
            .collect();
        spans.sort_by_key(|(r, _)| r.start);
        let mut stage_in: Vec<StageIn> = Vec::new();
        let mut cursor = 0usize;
        for (r, fmt) in spans {
            match stage_in.last_mut() {
                Some(last) if last.fmt == fmt && r.start < last.from.end => {
                    let end = last.from.end.max(r.end);
                    cursor += end - last.from.end;
                    last.from.end = end;
                }
                _ => {
                    stage_in.push(StageIn {
                        from: r.clone(),
                        fmt,
                        to: cursor,
                    });
                    cursor += r.len();
                }
            }
        }
        (stage_in, cursor)
    }

    /// Each operand's f32 location as the kernel reads it: f32 values
    /// where they live, 16-bit graph inputs from their widened copy (made
    /// here on first use), 16-bit arena values from the staging buffer.
    fn args(
        &mut self,
        node: &Node,
        dot: bool,
        stage_in: &[StageIn],
    ) -> Result<Vec<Option<Loc>>, CpuError> {
        let g = self.g;
        let mut args: Vec<Option<Loc>> = Vec::with_capacity(node.inputs.len());
        for (i, &v) in node.inputs.iter().enumerate() {
            let Home::Mem(l, fmt) = &self.homes[v.index()] else {
                args.push(None);
                continue;
            };
            // A bf16 dot-product matmul reads its left operand in
            // place and its weight from its own pack: neither needs a
            // widened f32 copy.
            if dot && i <= 1 {
                args.push(None);
                continue;
            }
            let l = match (l.root, *fmt) {
                (_, Fmt::F32) => l.clone(),
                (Root::Input(k), _) => {
                    let (preps, prepared_len) = (&mut self.preps, &mut self.prepared_len);
                    let off = *self.widened[k].get_or_insert_with(|| {
                        let n = g.ty(g.inputs[k]).shape.numel();
                        preps.push(Prep {
                            input: k,
                            rows: n,
                            cols: 1,
                            offset: *prepared_len,
                            transpose: false,
                            need: Need::Always,
                        });
                        *prepared_len += n;
                        *prepared_len - n
                    });
                    Loc {
                        root: Root::Prepared,
                        offset: off + l.offset,
                        ..l.clone()
                    }
                }
                (_, fmt) => {
                    let span = l.span();
                    let s = stage_in
                        .iter()
                        .find(|s| {
                            s.fmt == fmt && s.from.start <= span.start && span.end <= s.from.end
                        })
                        .ok_or_else(|| fail(node.op.name(), "unstaged operand (an engine bug)"))?;
                    Loc {
                        root: Root::Stage,
                        offset: s.to + (l.offset - s.from.start),
                        ..l.clone()
                    }
                }
            };
            args.push(Some(l));
        }
        Ok(args)
    }

    /// A Winograd conv of a constant weight: its filter transformed once,
    /// here, into the constants (else each run transforms it).
    fn winograd_filter(&mut self, kind: Kind, args: &[Option<Loc>]) -> Kind {
        let Kind::Conv {
            geom,
            bias,
            act,
            winograd: Some(Filter::PerRun),
        } = kind
        else {
            return kind;
        };
        let filter = match args.get(1).and_then(Option::as_ref) {
            Some(w) if w.root == Root::Const && w.is_contiguous() => {
                let (m, c) = (w.dims[0], w.dims[1]);
                let u = winograd::transform_weights(&self.consts[w.offset..][..w.numel()], m, c);
                self.consts.extend_from_slice(&u);
                Filter::Const(self.consts.len() - u.len())
            }
            _ => Filter::PerRun,
        };
        Kind::Conv {
            geom,
            bias,
            act,
            winograd: Some(filter),
        }
    }

    /// The f32 pack of a matmul's weight (not a dot-product one), where
    /// resident f32 weights are packed once.
    fn f32_pack(&mut self, kind: &Kind, dot: bool, args: &[Option<Loc>]) -> Option<usize> {
        match kind {
            Kind::Matmul { .. } if !dot && self.f32_pack_kind.is_some() => {
                let b = args.get(1).and_then(Option::as_ref);
                let i = f32_pack_plan(self.g, b, &self.preps, &mut self.f32_packs);
                if let (Some(_), Some(F32PackKind::Amx)) = (i, self.f32_pack_kind) {
                    let k = b.map_or(0, |b| b.dims[0]);
                    self.amx_scratch = self.amx_scratch.max(amx::scratch_len(k));
                }
                i
            }
            _ => None,
        }
    }

    /// Fits the operands to the kernel: broadcasts (and, for `permute`,
    /// permutes) `args` to the output, lays out the bool operands, and
    /// raises the per-thread scratch to what the kernel needs.
    fn fit_operands(
        &mut self,
        kind: &Kind,
        node: &Node,
        types: &[&TensorType],
        out_ty: &TensorType,
        args: &mut [Option<Loc>],
    ) -> Result<BoolOperands, CpuError> {
        let (mut mask, mut mask_strides) = (Vec::new(), Vec::new());
        let mut host_strides = vec![Vec::new(); node.inputs.len()];
        let scratch = &mut self.scratch;
        match kind {
            Kind::Elementwise(p) => {
                *scratch = (*scratch).max(p.scratch());
                let op = node.op.name();
                for (k, t) in types.iter().enumerate() {
                    // Host (bool or integer) inputs are read through
                    // their broadcast strides.
                    if !convert::is_float(t.dtype) {
                        let l = Loc {
                            root: Root::Arena,
                            offset: 0,
                            dims: t.dims().to_vec(),
                            strides: row_major(t.dims()),
                        };
                        host_strides[k] = elementwise::broadcast(&l, out_ty.dims()).strides;
                    }
                }
                for a in args.iter_mut().flatten() {
                    *a = if op == "permute" {
                        let perm = node.attrs.ints("perm").map_err(CpuError::Ir)?;
                        let r = a.dims.len();
                        let ax = |p: i64| rlx_ir::shape::normalize_axis(p, r).map_err(CpuError::Ir);
                        let idx = perm.iter().map(|&p| ax(p)).collect::<Result<Vec<_>, _>>()?;
                        Loc {
                            dims: idx.iter().map(|&i| a.dims[i]).collect(),
                            strides: idx.iter().map(|&i| a.strides[i]).collect(),
                            ..a.clone()
                        }
                    } else if elementwise::unary(op) == Some(elementwise::Un::Copy) {
                        a.clone() // same element order, possibly other dims
                    } else {
                        elementwise::broadcast(a, out_ty.dims())
                    };
                }
            }
            Kind::Attention { merged, cached } => {
                let (q, k) = (types[0], types[1]);
                let r = q.shape.rank();
                let sq = q.dims()[r - 2];
                // The keys attended: the cache's and the new ones.
                let sk = k.dims()[r - 2] + if *cached { types[3].dims()[r - 2] } else { 0 };
                let out_dims = attention::unmerged(out_ty.dims(), types[2].dims()[r - 1], *merged);
                *scratch = (*scratch).max(attention::scratch(sk));
                if !*cached {
                    let kind_s = node.attrs.str("mask_kind").map_err(CpuError::Ir)?;
                    let window = node.attrs.int("window").map_err(CpuError::Ir)?;
                    if let Some(m) = rlx_ir::ops::fused::attention_mask(kind_s, sq, sk, window) {
                        mask = m;
                    }
                }
                let mut full = out_dims[..r - 2].to_vec();
                full.extend([sq, sk]);
                let mi = if *cached { 5 } else { 3 };
                if let Some(mt) = types.get(mi) {
                    let ml = Loc {
                        root: Root::Arena,
                        offset: 0,
                        dims: mt.dims().to_vec(),
                        strides: row_major(mt.dims()),
                    };
                    let b = elementwise::broadcast(&ml, &full);
                    mask_strides = b.strides;
                    if let Some(Some(a)) = args.get_mut(mi) {
                        *a = elementwise::broadcast(a, &full);
                    }
                }
            }
            Kind::Norm { .. } => {
                let x = types[0];
                let ax = x
                    .shape
                    .axis(node.attrs.int("axis").map_err(CpuError::Ir)?)
                    .map_err(CpuError::Ir)?;
                *scratch = (*scratch).max(x.dims()[ax..].iter().product());
            }
            Kind::Softmax { .. } => {
                let x = types[0];
                let ax = x
                    .shape
                    .axis(node.attrs.int("axis").map_err(CpuError::Ir)?)
                    .map_err(CpuError::Ir)?;
                *scratch = (*scratch).max(x.dims()[ax]);
            }
            Kind::Where => {
                *scratch = (*scratch).max(3 * elementwise::TILE);
                let c = types[0];
                let cl = Loc {
                    root: Root::Arena,
                    offset: 0,
                    dims: c.dims().to_vec(),
                    strides: row_major(c.dims()),
                };
                mask_strides = elementwise::broadcast(&cl, out_ty.dims()).strides;
                for a in args.iter_mut().skip(1).flatten() {
                    *a = elementwise::broadcast(a, out_ty.dims());
                }
            }
            Kind::Matmul { .. }
            | Kind::Conv { .. }
            | Kind::ConvTranspose { .. }
            | Kind::MaxPool { .. }
            | Kind::Gather { .. }
            | Kind::Concat { .. }
            | Kind::Embedding
            | Kind::DequantMatmul { .. }
            | Kind::Rope { .. }
            | Kind::Constant
            | Kind::IntMatmul { .. }
            | Kind::IntMatmulScaled { .. }
            | Kind::DynQuant
            | Kind::ToInt8 { .. }
            | Kind::Reduce { .. } => {}
        }
        Ok(BoolOperands {
            mask,
            mask_strides,
            host_strides,
        })
    }
}
