//! The inverse of fusion: fused ops become their registered decompositions
//! and fused regions are inlined (`rlx_ir::decompose::expand_fused`, which
//! recurses into sub-graphs and through decompositions that emit other
//! fused ops). `Fuse` then `Unfuse` computes what the input computed.

use crate::error::OptError;
use crate::pass::Pass;
use rlx_ir::decompose::expand_fused;
use rlx_ir::Graph;

/// Expand fused ops (all of them, or only those named).
#[derive(Clone, Debug, Default)]
pub struct Unfuse {
    only: Option<Vec<String>>,
}

impl Unfuse {
    /// Expand every fused op, regions included.
    pub fn new() -> Self {
        Self::default()
    }
    /// Expand only the fused ops named in `ops`.
    pub fn only(ops: &[&str]) -> Self {
        Unfuse {
            only: Some(ops.iter().map(|s| s.to_string()).collect()),
        }
    }
    /// Inline `fused_elementwise` regions only.
    pub fn regions() -> Self {
        Self::only(&["fused_elementwise"])
    }
}

impl Pass for Unfuse {
    fn name(&self) -> &str {
        "unfuse"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let only = self.only.as_deref();
        Ok(expand_fused(g, &|d| {
            only.is_none_or(|o| o.iter().any(|n| n == d.name))
        })?)
    }
}
