//! The step each node runs, decided once at compile time, and where each
//! value lives while the steps run.

use super::convert::Fmt;
use super::layout::Loc;
use super::weights::DotPlan;
use super::Kind;

/// Where a value lives during a run.
#[derive(Clone, Debug)]
pub enum Home {
    /// Float elements (stored as `Fmt`) in the arena, the 16-bit arena, a
    /// graph input, the constants or the prepared buffer; possibly strided.
    Mem(Loc, Fmt),
    /// A host tensor: graph input `Some(k)`, else the host-side table.
    Host(Option<usize>),
}

/// Widen a node's 16-bit operand (its whole span in the 16-bit arena) into
/// the staging buffer at `to`, before the node runs.
#[derive(Clone, Debug)]
pub struct StageIn {
    pub from: std::ops::Range<usize>,
    pub fmt: Fmt,
    pub to: usize,
}

// One step per node, made once per compiled program: size is no concern.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Step {
    /// A view made by the memory plan, or a constant: nothing runs.
    View,
    Fast {
        kind: Kind,
        /// Operand locations as the kernel reads them.
        args: Vec<Option<Loc>>,
        /// causal / sliding-window mask, or a custom mask's strides.
        mask: Vec<bool>,
        mask_strides: Vec<usize>,
        /// Broadcast strides of bool (host) inputs of elementwise regions.
        host_strides: Vec<Vec<usize>>,
        /// 16-bit operands widened into the staging buffer first.
        stage_in: Vec<StageIn>,
        /// A 16-bit output: the kernel writes f32 into the staging output,
        /// which is then rounded into the 16-bit arena at this offset.
        out_half: Option<(usize, Fmt)>,
        /// A bf16 matmul on dot products.
        dot: Option<DotPlan>,
        /// An f32 matmul whose weight, when resident, is packed once for
        /// gemm128 (`f32_packs[i]`).
        f32_pack: Option<usize>,
    },
    /// A fast kernel whose output is a host tensor (integer results:
    /// [`Kind::IntMatmul`], [`Kind::ToInt8`]).
    Host(Kind),
    Ref,
}
