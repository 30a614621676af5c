//! Dispatch policies: which paths the legalizer may take, globally and per
//! op, and the process-wide override.
//!
//! The override's text syntax ([`DispatchOptions::parse`]) is a
//! comma-separated list of a default policy and/or `op=policy` pairs, e.g.
//! `native_only` or `prefer_native,softmax=common_ir_only`. The edge
//! (`rlx::env`, from `RLX_DISPATCH`) sets it with [`set_override`]; when
//! set, it overrides the policies given to `compile`.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::RwLock;

/// Which path the legalizer prefers for a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Native kernel if claimed; else the decomposition; else a rewrite.
    #[default]
    PreferNative,
    /// The decomposition wherever an op has one; else native; else a rewrite.
    CommonIrOnly,
    /// Native kernels only; anything else is unsupported.
    NativeOnly,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::PreferNative => "prefer_native",
            Policy::CommonIrOnly => "common_ir_only",
            Policy::NativeOnly => "native_only",
        }
    }
    pub fn parse(s: &str) -> Result<Policy, String> {
        match s.trim() {
            "prefer_native" => Ok(Policy::PreferNative),
            "common_ir_only" => Ok(Policy::CommonIrOnly),
            "native_only" => Ok(Policy::NativeOnly),
            o => Err(format!(
                "unknown dispatch policy `{o}` (use prefer_native, common_ir_only or native_only)"
            )),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The policy of one compilation: a default and per-op overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DispatchOptions {
    pub policy: Policy,
    pub per_op: BTreeMap<String, Policy>,
}

impl DispatchOptions {
    pub fn new(policy: Policy) -> Self {
        DispatchOptions {
            policy,
            per_op: BTreeMap::new(),
        }
    }
    /// Builder: override the policy of one op.
    pub fn with_op(mut self, op: &str, p: Policy) -> Self {
        self.per_op.insert(op.to_string(), p);
        self
    }
    /// The policy that applies to `op`.
    pub fn for_op(&self, op: &str) -> Policy {
        self.per_op.get(op).copied().unwrap_or(self.policy)
    }

    /// Parse the override syntax (see the module docs).
    pub fn parse(s: &str) -> Result<DispatchOptions, String> {
        let mut o = DispatchOptions::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some((op, p)) => {
                    let op = op.trim();
                    if rlx_ir::lookup(op).is_none() {
                        return Err(format!("unknown op `{op}`"));
                    }
                    o.per_op.insert(op.to_string(), Policy::parse(p)?);
                }
                None => o.policy = Policy::parse(part)?,
            }
        }
        Ok(o)
    }

    /// The options in force: the process-wide override when set, else `self`.
    pub fn effective(&self) -> Result<DispatchOptions, String> {
        Ok(current_override().unwrap_or_else(|| self.clone()))
    }
}

static OVERRIDE: RwLock<Option<DispatchOptions>> = RwLock::new(None);

/// Sets (or with `None` clears) the options that override every
/// compile's own; returns the previous override. The edge calls this
/// once at start-up (`rlx::env::apply`, from `RLX_DISPATCH`).
pub fn set_override(o: Option<DispatchOptions>) -> Option<DispatchOptions> {
    // A poisoned lock still holds valid options.
    let mut g = OVERRIDE.write().unwrap_or_else(|e| e.into_inner());
    std::mem::replace(&mut *g, o)
}

/// The override in force, if any.
pub fn current_override() -> Option<DispatchOptions> {
    OVERRIDE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_default_and_per_op() {
        let o = DispatchOptions::parse("native_only, softmax=common_ir_only").unwrap();
        assert_eq!(o.policy, Policy::NativeOnly);
        assert_eq!(o.for_op("softmax"), Policy::CommonIrOnly);
        assert_eq!(o.for_op("add"), Policy::NativeOnly);
        assert!(DispatchOptions::parse("fastest")
            .unwrap_err()
            .contains("unknown dispatch policy"));
        assert!(DispatchOptions::parse("nope=native_only")
            .unwrap_err()
            .contains("unknown op"));
    }
}
