//! The rule table: one entry per differentiable op, keyed by op name.
//!
//! Every rule is written with primitive MIR ops (and `stop_gradient` where
//! a mask or slope is piecewise constant), so the derivative graph is
//! itself differentiable and derivatives stack to any order.
//!
//! * [`Rule::Unary`]: elementwise `y = f(x)`; one derivative `f'(x)` gives
//!   both the VJP (`g * f'`) and the JVP (`t * f'`).
//! * [`Rule::General`]: a VJP function and a JVP that is either
//!   [`Jvp::Linear`] (the op applied to the tangents — exact for ops linear
//!   in their float inputs), a [`Jvp::Custom`] function, or
//!   [`Jvp::Transpose`]: the VJP rule is linear in the cotangent, so
//!   differentiating it in reverse once more (the transpose of the
//!   transpose) yields `J·t` with no new rule to get wrong.
//! * Fused ops are differentiated through their registered decomposition
//!   ([`Rule`] lookups return `None` for them; the transforms expand them);
//!   ops with a [`Rule::Expand`] (the recurrent cells) are rewritten into
//!   primitives by this crate the same way.

mod control;
mod elementwise;
mod fft;
mod index;
mod linalg;
mod recurrent;
mod reduce;
mod shape;

use crate::error::Result;
use rlx_ir::{Attrs, GraphBuilder, ValueId};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The node a rule differentiates, in the builder's id space.
pub struct NodeCx<'a> {
    pub op: &'a str,
    pub inputs: &'a [ValueId],
    pub outputs: &'a [ValueId],
    pub attrs: &'a Attrs,
    /// Which inputs want a cotangent (float and depending on the variables).
    pub wants: &'a [bool],
}

/// `f'(x)` from `x` and `y = f(x)`.
pub type DerivFn = fn(&mut GraphBuilder, ValueId, ValueId) -> Result<ValueId>;
/// Cotangents of the inputs from cotangents of the outputs (`None` = zero).
pub type VjpFn = fn(&mut GraphBuilder, &NodeCx, &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>>;
/// Tangents of the outputs from tangents of the inputs (`None` = zero).
pub type JvpFn = fn(&mut GraphBuilder, &NodeCx, &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>>;

#[derive(Clone, Copy)]
pub enum Jvp {
    Linear,
    Custom(JvpFn),
    Transpose,
}

/// Rewrites a node into primitive ops (outputs in order).
pub type ExpandFn = fn(&mut GraphBuilder, &[ValueId], &Attrs) -> Result<Vec<ValueId>>;

#[derive(Clone, Copy)]
pub enum Rule {
    Unary(DerivFn),
    /// A unary op whose `f'(x)` is written on its definition
    /// (`OpDef::derivative`; the ops defined by a scalar formula).
    Derivative(rlx_ir::op::DerivFn),
    General {
        vjp: VjpFn,
        jvp: Jvp,
    },
    /// Differentiated through a rewrite into primitives, applied before
    /// the sweeps (like a fused op's decomposition, but owned here).
    Expand(ExpandFn),
}

fn table() -> &'static BTreeMap<&'static str, Rule> {
    static T: OnceLock<BTreeMap<&'static str, Rule>> = OnceLock::new();
    T.get_or_init(|| {
        let mut m = BTreeMap::new();
        for part in [
            elementwise::RULES,
            reduce::RULES,
            shape::RULES,
            linalg::RULES,
            index::RULES,
            recurrent::RULES,
            control::RULES,
            fft::RULES,
        ] {
            for (name, r) in part {
                let prev = m.insert(*name, *r);
                assert!(prev.is_none(), "two rules for `{name}`");
            }
        }
        m
    })
}

impl Rule {
    /// `f'(x)` of a unary rule, from `x` and `y = f(x)`.
    pub(crate) fn derivative(
        self,
        b: &mut GraphBuilder,
        x: ValueId,
        y: ValueId,
    ) -> Result<ValueId> {
        match self {
            Rule::Unary(d) => d(b, x, y),
            Rule::Derivative(d) => Ok(d(b, x, y)?),
            _ => Err(crate::error::AdError::Arg(
                "internal: a derivative asked of a rule that is not unary".into(),
            )),
        }
    }
}

/// The rule for `op`: one written here, or the derivative on its
/// definition.
pub fn rule(op: &str) -> Option<Rule> {
    table().get(op).copied().or_else(|| {
        rlx_ir::lookup(op)
            .and_then(|d| d.derivative)
            .map(Rule::Derivative)
    })
}

/// Names of every op with a rule.
pub fn ops_with_rules() -> Vec<&'static str> {
    table().keys().copied().collect()
}

/// Differentiable ops that have no rule yet and are not fused (fused ops
/// go through their decomposition). Listed in the docs; a test pins it.
pub fn ops_without_rules() -> Vec<&'static str> {
    rlx_ir::all_ops()
        .into_iter()
        .filter(|d| {
            d.grad == rlx_ir::Grad::Differentiable && !d.is_fused() && rule(d.name).is_none()
        })
        .map(|d| d.name)
        .collect()
}
