//! Fusion, expressed as data: [`FUSION_RULES`] is a table of [`Rule`]s
//! (one small matcher per pattern, each with a name), run by the [`Fuse`]
//! pass through the rule engine, followed by the two rewrites that are not
//! single-root rules: QK-RoPE pairing ([`rope`]) and elementwise regions
//! ([`crate::region`]).
//!
//! | rule | recognizes | becomes |
//! |---|---|---|
//! | `softmax` | `exp(x − max x) / Σ exp(x − max x)` (max through an optional `stop_gradient`), any one axis | `softmax` |
//! | `log_softmax` | `(x − max x) − log Σ exp(x − max x)` | `log_softmax` |
//! | `rms_normalize` | `x · rsqrt(mean(x²) + eps)` or `x / sqrt(mean(x²) + eps)`, trailing axes | `rms_norm(x, ones)` |
//! | `rms_norm_scale` | `rms_norm(x, ones) · gamma` | `rms_norm(x, gamma)` |
//! | `layer_norm_center` | `rms_norm(x − mean x, gamma)`, same axes | `layer_norm(x, gamma, zeros)` |
//! | `layer_norm_shift` | `layer_norm(x, gamma, zeros) + beta` | `layer_norm(x, gamma, beta)` |
//! | `gelu` | `0.5 · x · (1 + erf(x/√2))`, any association | `gelu` |
//! | `gelu_tanh` | `0.5 · x · (1 + tanh(√(2/π)(x + 0.044715 x³)))` | `gelu_tanh` |
//! | `silu` | `x · sigmoid(x)` | `silu` |
//! | `swiglu` | `silu(gate) · up` | `swiglu` |
//! | `matmul_bias` | `a @ b + bias`, bias along the last axis only | `matmul_bias_act{none}` |
//! | `matmul_act` | `act(matmul_bias_act{none})`, `act(a @ b)` | `matmul_bias_act{act}` |
//! | `attention` | `softmax(q @ kᵀ · s [+ bias / where(keep, ·, −inf)]) @ v` | `attention` (scale, mask_kind none/bias/custom/causal/sliding_window) |
//! | `conv_act` | `act(conv(..))`, the conv read only there | `conv_act` |
//! | `matmul_residual` | `act(a @ b [+ bias]) + r`, `r` of the sum's type | `matmul_residual` |
//! | `int_matmul_scale` | `f32(matmul_integer(a, b, za, zb)) · scale` (per column) | `matmul_integer_scaled` |
//! | `int_matmul_bias` | `matmul_integer_scaled(..) + bias` (per column) | `matmul_integer_scaled` with its bias |
//! | `attention_merged` | `reshape(permute(attention))` merging the heads | `attention_merged` |
//! | `packed_qkv_attention` | attention on narrow×3 of one packed projection | attention on views ([`qkv`]) |
//! | `qk_rope` (pairing) | two `rope`s sharing cos, sin | `qk_rope` |
//! | regions | maximal single-use elementwise chains, ≥ 2 ops | `fused_elementwise` |
//!
//! Every rule checks that the pattern is *closed* — its intermediates are
//! read only inside it — so fusion never makes a value be computed twice,
//! and that the fused op infers exactly the types the root had. Because
//! the engine counts uses in the graph being rewritten (where a fused
//! pattern's nodes linger until DCE), larger patterns built on smaller
//! ones (attention on softmax, layer_norm on rms_norm) match in a later
//! round: [`Fuse`] repeats rules + DCE until nothing fires.

mod activation;
mod attention;
mod heads;
mod integer;
mod matmul;
mod norm;
mod pattern;
pub mod qkv;
pub mod rope;
mod softmax;

use crate::dce::dce;
use crate::error::OptError;
use crate::pass::Pass;
use crate::region::fuse_regions;
use crate::rules::{Rule, RuleSet};
use rlx_ir::Graph;
use std::collections::BTreeMap;
use std::fmt;

/// The fusion patterns, in the order they are tried.
pub static FUSION_RULES: &[Rule] = &[
    softmax::SOFTMAX,
    softmax::LOG_SOFTMAX,
    norm::RMS_NORMALIZE,
    norm::RMS_NORM_SCALE,
    norm::LAYER_NORM_CENTER,
    norm::LAYER_NORM_SHIFT,
    activation::GELU,
    activation::GELU_TANH,
    activation::SILU,
    activation::SWIGLU,
    matmul::MATMUL_BIAS,
    matmul::MATMUL_ACT,
    matmul::MATMUL_RESIDUAL,
    matmul::CONV_ACT,
    integer::INT_MATMUL_SCALE,
    integer::INT_MATMUL_BIAS,
    attention::ATTENTION,
    heads::ATTENTION_MERGED,
    qkv::PACKED_QKV,
];

/// Rounds of rules + DCE at most (each round that fires shrinks the graph).
const MAX_ROUNDS: usize = 8;

/// What one [`Fuse`] run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuseReport {
    /// Firings per rule (`qk_rope` for the pairing).
    pub fired: BTreeMap<&'static str, usize>,
    /// Rounds of rules + DCE run.
    pub rounds: usize,
    /// `fused_elementwise` regions made.
    pub regions: usize,
    /// Ops those regions absorbed.
    pub region_ops: usize,
}

impl fmt::Display for FuseReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fired: Vec<String> = self
            .fired
            .iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect();
        write!(
            f,
            "fusion: {} in {} round{}; {} region{} of {} ops",
            if fired.is_empty() {
                "no patterns".to_string()
            } else {
                fired.join(", ")
            },
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.regions,
            if self.regions == 1 { "" } else { "s" },
            self.region_ops
        )
    }
}

/// The fusion pass: [`FUSION_RULES`] and QK-RoPE pairing to a fixpoint
/// (with DCE between rounds), then elementwise regions, then DCE.
#[derive(Clone, Debug)]
pub struct Fuse {
    rules: RuleSet,
    qk_rope: bool,
    regions: bool,
}

impl Default for Fuse {
    fn default() -> Self {
        Self::new()
    }
}

impl Fuse {
    /// Every pattern, QK-RoPE pairing and regions.
    pub fn new() -> Self {
        Fuse {
            rules: RuleSet::new("fuse", FUSION_RULES.to_vec()),
            qk_rope: true,
            regions: true,
        }
    }
    /// Without elementwise regions (the named patterns only).
    pub fn without_regions(mut self) -> Self {
        self.regions = false;
        self
    }
    /// Only the given rules (no pairing, no regions): for tests and tools.
    pub fn with_rules(rules: Vec<Rule>) -> Self {
        Fuse {
            rules: RuleSet::new("fuse", rules),
            qk_rope: false,
            regions: false,
        }
    }
    /// The rule table.
    pub fn rule_set(&mut self) -> &mut RuleSet {
        &mut self.rules
    }

    /// Fuse `g`; also returns what fired.
    pub fn apply(&self, g: &Graph) -> Result<(Graph, FuseReport), OptError> {
        let mut rep = FuseReport::default();
        // Dead readers would make live patterns look shared.
        let mut cur = dce(g)?;
        if self.regions {
            // Ops defined by a scalar formula become their primitives here,
            // so the regions below compile each formula into one kernel on
            // every backend (none has a kernel of its own for them).
            // (Sub-graphs too; the count is of the top level.) Most graphs
            // hold none: checked first, so they are not copied.
            let formula = |d: &rlx_ir::OpDef| d.is_formula();
            if rlx_ir::decompose::needs_expansion(&cur, &formula)? {
                let n = cur.nodes.iter().filter(|n| n.op.is_formula()).count();
                cur = rlx_ir::decompose::expand_fused(&cur, &formula)?;
                if n > 0 {
                    rep.fired.insert("formula", n);
                }
            }
        }
        for _ in 0..MAX_ROUNDS {
            rep.rounds += 1;
            let (next, fired) = self.rules.apply(&cur)?;
            cur = dce(&next)?;
            let mut changed = !fired.is_empty();
            for (k, v) in fired {
                *rep.fired.entry(k).or_default() += v;
            }
            if self.qk_rope {
                let (next, pairs) = rope::pair_ropes(&cur)?;
                if pairs > 0 {
                    *rep.fired.entry("qk_rope").or_default() += pairs;
                    cur = dce(&next)?;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if self.regions {
            let (next, regions, ops) = fuse_regions(&cur)?;
            cur = dce(&next)?;
            rep.regions = regions;
            rep.region_ops = ops;
        }
        Ok((cur, rep))
    }
}

impl Pass for Fuse {
    fn name(&self) -> &str {
        "fuse"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        Ok(self.apply(g)?.0)
    }
}
