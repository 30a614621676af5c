//! Graph inputs the kernels read other than as they are — weights, mostly:
//! transposed or widened f32 copies ([`Prep`]), bf16 packs for the
//! dot-product matmuls ([`Pack`]) and f32 packs for gemm128 or the AMX
//! tiles ([`F32Pack`]); which of them a program makes, and when.

use super::convert::{Fmt, Raw};
use super::layout::{Loc, Root};
use super::step::{Home, Step};
use super::{par, Kind};
use crate::kernels::amx;
use rlx_ir::lir::Program;
use rlx_ir::{DType, Graph};

/// An f32 copy of graph input `input` at `offset` in the prepared buffer:
/// either its transpose (a `c × r` matrix read as its `r × c` transpose —
/// GEMM packs a row-major operand with vector loads; through the
/// transposing strides it would gather element by element, once per row
/// block), or, for an f16/bf16 input the fast kernels read, its elements
/// widened to f32.
#[derive(Clone, Debug)]
pub struct Prep {
    pub input: usize,
    pub rows: usize,
    pub cols: usize,
    pub offset: usize,
    pub transpose: bool,
    pub need: Need,
}

/// Whether a [`Prep`]'s copy is made: a weight's transposed f32 copy costs
/// 4 bytes per parameter, and none is needed where every reader reads the
/// weight some other way. `prepared` only grows as far as the copies made
/// reach; a copy not made past the last one made costs no memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Need {
    Always,
    /// Every reader is a bf16 dot-product matmul, which packs the input's
    /// bits itself.
    Never,
    /// Every reader is (or is a bf16 dot-product matmul besides) an f32
    /// matmul through `f32_packs[i]` for these `i`, each packed from the
    /// graph input itself, and — on the AMX tiles — never with fewer than
    /// [`amx::MIN_ROWS`] rows: the copy is needed only while the weight is
    /// not resident, or where an AMX pack holds a non-finite value (those
    /// products run on the `gemm` crate).
    UnlessPacked(Vec<usize>),
}

/// A bf16 graph input packed for [`bf16dot`]: read as `k × n` through
/// strides (`rs`, `cs`) — row-major, or a transposed weight.
#[derive(Clone, Debug, PartialEq)]
pub struct Pack {
    pub input: usize,
    pub k: usize,
    pub n: usize,
    pub rs: usize,
    pub cs: usize,
}

/// A bf16 matmul on dot products: the left operand's rows straight from
/// the 16-bit arena or graph input `a_input` (no staging), the weight from
/// `packs[pack]`.
#[derive(Clone, Copy, Debug)]
pub struct DotPlan {
    pub a_input: Option<usize>,
    pub a_offset: usize,
    pub lda: usize,
    pub pack: usize,
}

/// The dot-product plan of a bf16 matmul node, when its operands allow:
/// `a` a bf16 arena value or graph input whose rows (batch axes merged) are
/// unit-stride,
/// the weight a 2-D bf16 graph input read plain or transposed, a bias (if
/// any) of `n` elements.
pub fn dot_plan(
    g: &Graph,
    node: &rlx_ir::Node,
    homes: &[Home],
    preps: &[Prep],
    packs: &mut Vec<Pack>,
    bias: bool,
) -> Option<DotPlan> {
    let Home::Mem(a, Fmt::BF16) = &homes[node.inputs[0].index()] else {
        return None;
    };
    let r = a.dims.len();
    let a_input = match a.root {
        Root::Half => None,
        Root::Input(k) => Some(k),
        _ => return None,
    };
    if r < 2 || a.strides[r - 1] != 1 {
        return None;
    }
    let (k, lda) = (a.dims[r - 1], a.strides[r - 2]);
    let mut want = lda * a.dims[r - 2];
    for ax in (0..r - 2).rev() {
        if a.dims[ax] != 1 && a.strides[ax] != want {
            return None;
        }
        want *= a.dims[ax];
    }
    let (input, rs, cs, n) = match &homes[node.inputs[1].index()] {
        Home::Mem(l, Fmt::BF16) if l.dims.len() == 2 && l.dims[0] == k => match l.root {
            Root::Input(i) if l.offset == 0 => (i, l.strides[0], l.strides[1], l.dims[1]),
            _ => return None,
        },
        // A transposed weight: the prepared copy is the transpose of a
        // (n × k) input, whose bf16 bits are read directly instead.
        Home::Mem(l, Fmt::F32) if l.root == Root::Prepared && l.dims.len() == 2 => {
            let p = preps.iter().find(|p| p.transpose && p.offset == l.offset)?;
            let bf = Fmt::of(g.ty(g.inputs[p.input]).dtype) == Some(Fmt::BF16);
            if !bf || p.rows != k {
                return None;
            }
            (p.input, 1, p.rows, p.cols)
        }
        _ => return None,
    };
    if bias && g.ty(node.inputs[2]).dims() != [n] {
        return None;
    }
    let want = Pack {
        input,
        k,
        n,
        rs,
        cs,
    };
    let pack = match packs.iter().position(|p| *p == want) {
        Some(i) => i,
        None => {
            packs.push(want);
            packs.len() - 1
        }
    };
    Some(DotPlan {
        a_input,
        a_offset: a.offset,
        lda,
        pack,
    })
}

/// Whether resident f32 weights are packed once for gemm128: in the wasm32
/// build, whose f32 products run on it (natively the `gemm` crate packs
/// per call; this crate's own unit tests pack natively too, to test it).
const PACK_F32: bool = cfg!(any(target_arch = "wasm32", test));

/// How resident f32 weights are packed once, if they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum F32PackKind {
    Gemm128,
    /// Split for the AMX tiles ([`amx`]), where the CPU has them.
    Amx,
}

pub fn f32_pack_kind() -> Option<F32PackKind> {
    if amx::available() {
        Some(F32PackKind::Amx)
    } else if PACK_F32 {
        Some(F32PackKind::Gemm128)
    } else {
        None
    }
}

/// A 2-D f32 weight a matmul reads from graph input `input` (directly, or
/// its prepared transposed/widened copy) at `loc`: packed once for gemm128
/// when the input is resident.
#[derive(Clone, Debug, PartialEq)]
pub struct F32Pack {
    pub input: usize,
    pub loc: Loc,
    /// Where it is packed from: `loc`, or — for a whole transposed f32
    /// weight's prepared copy — the graph input itself through transposing
    /// strides, so that the copy need not exist.
    pub src: Loc,
}

/// The [`F32Pack`] of a matmul's weight as the kernel reads it (`b`), if
/// it is a 2-D view of a graph input or of its prepared copy.
pub fn f32_pack_plan(
    g: &Graph,
    b: Option<&Loc>,
    preps: &[Prep],
    packs: &mut Vec<F32Pack>,
) -> Option<usize> {
    let b = b.filter(|l| l.dims.len() == 2)?;
    let (input, src) = match b.root {
        Root::Input(k) => (k, b.clone()),
        Root::Prepared => {
            let p = preps
                .iter()
                .find(|p| (p.offset..p.offset + p.rows * p.cols).contains(&b.offset))?;
            let whole = p.transpose
                && b.offset == p.offset
                && b.dims == [p.rows, p.cols]
                && b.strides == [p.cols, 1]
                && g.ty(g.inputs[p.input]).dtype == DType::F32;
            let src = if whole {
                Loc {
                    root: Root::Input(p.input),
                    offset: 0,
                    dims: vec![p.rows, p.cols],
                    strides: vec![1, p.rows],
                }
            } else {
                b.clone()
            };
            (p.input, src)
        }
        _ => return None,
    };
    let want = F32Pack {
        input,
        loc: b.clone(),
        src,
    };
    Some(match packs.iter().position(|p| *p == want) {
        Some(i) => i,
        None => {
            packs.push(want);
            packs.len() - 1
        }
    })
}

/// The [`Need`] of transposed copy `p`, from every value whose home lies
/// in it and the step that reads that value.
pub fn prep_need(
    g: &Graph,
    homes: &[Home],
    steps: &[Step],
    p: &Prep,
    f32_packs: &[F32Pack],
    kind: Option<F32PackKind>,
) -> Need {
    let range = p.offset..p.offset + p.rows * p.cols;
    let inside = |v: rlx_ir::ValueId| matches!(&homes[v.index()], Home::Mem(l, _) if l.root == Root::Prepared && range.contains(&l.offset));
    if g.outputs.iter().any(|&v| inside(v)) {
        return Need::Always;
    }
    let mut packs = Vec::new();
    for (node, step) in g.nodes.iter().zip(steps) {
        for (j, &v) in node.inputs.iter().enumerate() {
            if !inside(v) || matches!(step, Step::View) {
                continue;
            }
            match step {
                Step::Fast { dot: Some(_), .. } if j == 1 => {}
                Step::Fast {
                    kind: Kind::Matmul { .. },
                    f32_pack: Some(i),
                    ..
                } if j == 1 && f32_packs[*i].src.root == Root::Input(p.input) => {
                    // The fewest rows a product of it can have: a batch
                    // entry's (the rows of all entries merge only where
                    // the layout allows).
                    let a = g.ty(node.inputs[0]).dims();
                    let rows = if a.len() >= 2 { a[a.len() - 2] } else { 1 };
                    if kind == Some(F32PackKind::Amx) && rows < amx::MIN_ROWS {
                        return Need::Always;
                    }
                    packs.push(*i);
                }
                _ => return Need::Always,
            }
        }
    }
    if packs.is_empty() {
        Need::Never
    } else {
        Need::UnlessPacked(packs)
    }
}

/// dst (r × c, row-major) = srcᵀ, src being c × r row-major (any storage);
/// in panels of 16 dst rows (16 contiguous elements of each src row),
/// across threads.
pub fn transpose_into(dst: &mut [f32], src: Raw, r: usize, c: usize) {
    const P: usize = 16;
    par::for_chunks(dst, P * c, |pi, panel| {
        let k0 = pi * P;
        let rows = panel.len() / c.max(1);
        let mut buf = [0f32; P];
        for j in 0..c {
            let s = &mut buf[..rows];
            src.load(j * r + k0, s);
            for (t, &x) in s.iter().enumerate() {
                panel[t * c + j] = x;
            }
        }
    });
}

/// Views that transpose a 2-D graph input get a prepared f32 copy, their
/// home moved there. Returns the copies and the prepared buffer's length.
pub fn transposed_copies(program: &Program, homes: &mut [Home]) -> (Vec<Prep>, usize) {
    let g = &program.graph;
    let mut preps = Vec::new();
    let mut prepared_len = 0;
    for v in &program.views {
        let Home::Mem(l, _) = &homes[v.value.index()] else {
            continue;
        };
        let Root::Input(k) = l.root else { continue };
        let base = g.ty(g.inputs[k]);
        let (r, c) = match l.dims[..] {
            [r, c] => (r, c),
            _ => continue,
        };
        if base.dims() != [c, r] || l.offset != 0 || l.strides != [1, r] || r * c == 0 {
            continue;
        }
        preps.push(Prep {
            input: k,
            rows: r,
            cols: c,
            offset: prepared_len,
            transpose: true,
            need: Need::Always,
        });
        homes[v.value.index()] = Home::Mem(
            Loc {
                root: Root::Prepared,
                offset: prepared_len,
                dims: vec![r, c],
                strides: vec![c, 1],
            },
            Fmt::F32,
        );
        prepared_len += r * c;
    }
    (preps, prepared_len)
}
