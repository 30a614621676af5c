//! Where a value's f32 elements are during a run, and safe access to them
//! while another region of the same arena is being written.

use rlx_ir::{Element, HostTensor};
use std::ops::Range;

/// The f32 elements of a graph input (empty for other dtypes, which the
/// engine never reads as f32).
pub fn input_f32(t: &HostTensor) -> &[f32] {
    f32::unwrap(t.data()).unwrap_or(&[])
}

/// The storage a value's elements live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// The compiled program's arena (the memory plan's slots).
    Arena,
    /// The caller's graph input `k`.
    Input(usize),
    /// The program's constants, materialized once at compile time.
    Const,
    /// f32 copies of graph inputs: transposed 2-D inputs (weights read as
    /// `wᵀ`) and widened f16/bf16 inputs; made once when the caller keeps
    /// them resident, else at each run.
    Prepared,
    /// The 16-bit arena: f16/bf16 values of the memory plan, as bits. No
    /// kernel reads it directly; operands are widened into [`Root::Stage`].
    Half,
    /// f32 staging of a node's 16-bit operands, widened just before it runs.
    Stage,
}

/// A strided f32 view: `dims`/`strides` in elements from `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub root: Root,
    pub offset: usize,
    pub dims: Vec<usize>,
    pub strides: Vec<usize>,
}

pub fn row_major(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

impl Loc {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Row-major with no gaps (size-1 axes may have any stride).
    pub fn is_contiguous(&self) -> bool {
        // Checked from the last axis, without allocating (it runs per kernel).
        let mut want = 1;
        for (&d, &s) in self.dims.iter().zip(&self.strides).rev() {
            if d > 1 && s != want {
                return false;
            }
            want *= d;
        }
        true
    }

    /// The element range the view touches, relative to its root.
    pub fn span(&self) -> Range<usize> {
        if self.numel() == 0 {
            return self.offset..self.offset;
        }
        let last: usize = self
            .dims
            .iter()
            .zip(&self.strides)
            .map(|(&d, &s)| (d - 1) * s)
            .sum();
        self.offset..self.offset + last + 1
    }

    /// Root index where batch entry `bi` (row-major over `batch`) of a
    /// batched matrix starts: the axes before the last two broadcast to
    /// `batch` (an axis of extent 1, or a missing one, contributes 0).
    pub fn batch_offset(&self, batch: &[usize], mut bi: usize) -> usize {
        let vb = &self.dims[..self.dims.len() - 2];
        let pad = batch.len() - vb.len();
        let mut off = self.offset;
        for ax in (0..batch.len()).rev() {
            let c = bi % batch[ax];
            bi /= batch[ax];
            if ax >= pad && vb[ax - pad] != 1 {
                off += c * self.strides[ax - pad];
            }
        }
        off
    }

    /// Flat root index of the element at row-major position `i`.
    pub fn index_of(&self, mut i: usize) -> usize {
        let mut at = self.offset;
        for (&d, &s) in self.dims.iter().zip(&self.strides).rev() {
            at += (i % d) * s;
            i /= d;
        }
        at
    }
}

/// Read access to everything but the region being written: the arena is
/// split around the output, so reads and the write borrow disjoint memory.
pub struct Reader<'a> {
    pub inputs: &'a [&'a HostTensor],
    pub consts: &'a [f32],
    pub prepared: &'a [f32],
    pub stage: &'a [f32],
    before: &'a [f32],
    after: &'a [f32],
    out: Range<usize>,
}

/// Why a read was refused: the memory plan put an input where the output
/// is being written (a bug in the plan or in this engine, not bad input).
#[derive(Debug)]
pub struct Overlap;

impl<'a> Reader<'a> {
    /// Split `arena` into the written region `out` and a reader of the rest.
    pub fn split(
        arena: &'a mut [f32],
        out: Range<usize>,
        inputs: &'a [&'a HostTensor],
        consts: &'a [f32],
        prepared: &'a [f32],
        stage: &'a [f32],
    ) -> (&'a mut [f32], Reader<'a>) {
        let (before, rest) = arena.split_at_mut(out.start);
        let (o, after) = rest.split_at_mut(out.end - out.start);
        (
            o,
            Reader {
                inputs,
                consts,
                prepared,
                stage,
                before,
                after,
                out,
            },
        )
    }

    /// The slice that `loc`'s root indices address, plus the shift to
    /// subtract from them (so `slice[loc.index_of(i) - shift]`).
    pub fn slice(&self, loc: &Loc) -> Result<(&'a [f32], usize), Overlap> {
        match loc.root {
            Root::Input(k) => Ok((input_f32(self.inputs[k]), 0)),
            Root::Const => Ok((self.consts, 0)),
            Root::Prepared => Ok((self.prepared, 0)),
            Root::Stage => Ok((self.stage, 0)),
            // Staged before every read (an engine bug if it gets here).
            Root::Half => Err(Overlap),
            Root::Arena => {
                let span = loc.span();
                if span.is_empty() {
                    return Ok((&[], 0));
                }
                if span.end <= self.out.start {
                    Ok((self.before, 0))
                } else if span.start >= self.out.end {
                    Ok((self.after, self.out.end))
                } else {
                    Err(Overlap)
                }
            }
        }
    }

    /// Whether `loc` is exactly the region being written (in place).
    pub fn is_output(&self, loc: &Loc) -> bool {
        loc.root == Root::Arena && loc.is_contiguous() && loc.span() == self.out
    }
}

/// A read-only strided operand resolved against a [`Reader`].
#[derive(Clone, Copy)]
pub struct View<'a, 'l> {
    pub data: &'a [f32],
    pub loc: &'l Loc,
    pub shift: usize,
}

impl<'a> View<'a, '_> {
    /// The matrix over the last two axes of this view, at root index `off`
    /// (a batch entry's start): any strides, so a transpose is no copy.
    pub fn mat(&self, off: usize, rows: usize, cols: usize) -> crate::kernels::gemm::Mat<'a, f32> {
        let r = self.loc.dims.len();
        crate::kernels::gemm::Mat {
            // Empty past the end: the prepared buffer holds only the
            // copies some kernel reads, and a packed weight's view into
            // it is made but not read (an unexpected read fails the
            // GEMM's bounds check instead of reading stale memory).
            data: self.data.get(off - self.shift..).unwrap_or(&[]),
            rows,
            cols,
            row_stride: self.loc.strides[r - 2],
            col_stride: self.loc.strides[r - 1],
        }
    }
}

impl View<'_, '_> {
    /// The contiguous elements, when the view is contiguous.
    pub fn contiguous(&self) -> Option<&[f32]> {
        self.loc.is_contiguous().then(|| {
            let s = self.loc.offset - self.shift;
            &self.data[s..s + self.loc.numel()]
        })
    }

    pub fn get(&self, i: usize) -> f32 {
        self.data[self.loc.index_of(i) - self.shift]
    }
}
