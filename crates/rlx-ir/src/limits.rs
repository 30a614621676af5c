//! Limits as policy: the one place that says how much rlx may take from
//! its input before it refuses.
//!
//! Every parser, loader and planner asks [`limits()`] instead of keeping a
//! constant of its own, so a user raises one number in one place (the
//! CLI's flags and `RLX_MAX_*` variables, read at the edge, or
//! [`set_limits`] from Rust). Exceeding a limit is a [`LimitError`] that
//! names the limit, the value asked for, the bound, and how to raise it —
//! never an abort from the allocator, a stack overflow or a hang.
//!
//! The defaults are chosen so that honest models pass and hostile input
//! fails fast: memory bounds come from the machine where the edge knows it
//! (see [`Limits::with_available_memory`]), otherwise from fixed values
//! that fit a 64-bit desktop; wasm32 cannot address more than 4 GiB anyway.

use std::sync::RwLock;
use thiserror::Error;

/// The bounds in force. Copy it, change a field, [`set_limits`] it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one tensor (a declared shape times its element size).
    pub max_tensor_bytes: u64,
    /// Bytes of one compiled program's arena (all planned slots together).
    pub max_arena_bytes: u64,
    /// Nesting depth of parsed structures (text and JSON IR literals,
    /// regions of `if`/`loop`, protobuf messages) and of graph regions
    /// that are walked recursively.
    pub max_nesting_depth: usize,
    /// Bytes of a file read whole into memory (IR text/JSON, configs,
    /// tokenizer files). Weights are memory-mapped and bounded by
    /// `max_tensor_bytes` instead.
    pub max_file_bytes: u64,
    /// Worker threads; a larger request is clamped to this with a warning.
    pub max_threads: usize,
    /// Elements of one dimension list (a shape's rank, an attribute list).
    pub max_rank: usize,
}

const GIB: u64 = 1 << 30;

impl Limits {
    /// Fixed defaults, used until the edge sets others.
    pub const DEFAULT: Limits = Limits {
        max_tensor_bytes: if cfg!(target_pointer_width = "32") {
            2 * GIB
        } else {
            16 * GIB
        },
        max_arena_bytes: if cfg!(target_pointer_width = "32") {
            3 * GIB
        } else {
            32 * GIB
        },
        max_nesting_depth: 256,
        max_file_bytes: 256 << 20,
        max_threads: 256,
        max_rank: 32,
    };

    /// The defaults with memory bounds from the machine: an arena may take
    /// up to 90% of `available` bytes, one tensor up to half of them.
    pub fn with_available_memory(available: u64) -> Limits {
        let mut l = Limits::DEFAULT;
        l.max_arena_bytes = available / 10 * 9;
        l.max_tensor_bytes = available / 2;
        l
    }

    /// Checks `bytes` of one tensor named `what` against `max_tensor_bytes`.
    pub fn check_tensor_bytes(&self, what: &str, bytes: u64) -> Result<(), LimitError> {
        check(
            "max_tensor_bytes",
            what,
            bytes,
            self.max_tensor_bytes,
            "RLX_MAX_TENSOR_BYTES",
        )
    }

    /// Checks a program's arena of `bytes` against `max_arena_bytes`.
    pub fn check_arena_bytes(&self, what: &str, bytes: u64) -> Result<(), LimitError> {
        check(
            "max_arena_bytes",
            what,
            bytes,
            self.max_arena_bytes,
            "RLX_MAX_ARENA_BYTES",
        )
    }

    /// Checks a nesting `depth` reached while reading `what`.
    pub fn check_depth(&self, what: &str, depth: usize) -> Result<(), LimitError> {
        check(
            "max_nesting_depth",
            what,
            depth as u64,
            self.max_nesting_depth as u64,
            "RLX_MAX_NESTING_DEPTH",
        )
    }

    /// Checks the size of a file about to be read whole.
    pub fn check_file_bytes(&self, what: &str, bytes: u64) -> Result<(), LimitError> {
        check(
            "max_file_bytes",
            what,
            bytes,
            self.max_file_bytes,
            "RLX_MAX_FILE_BYTES",
        )
    }

    /// Checks a rank or list length.
    pub fn check_rank(&self, what: &str, rank: usize) -> Result<(), LimitError> {
        check(
            "max_rank",
            what,
            rank as u64,
            self.max_rank as u64,
            "RLX_MAX_RANK",
        )
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

fn check(
    limit: &'static str,
    what: &str,
    value: u64,
    max: u64,
    var: &'static str,
) -> Result<(), LimitError> {
    if value <= max {
        Ok(())
    } else {
        Err(LimitError {
            limit,
            what: what.to_string(),
            value,
            max,
            var,
        })
    }
}

/// A bound was exceeded. The message names the limit and how to raise it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{what}: {value} exceeds the limit {limit} = {max} (raise it with {var}=N, or `rlx_ir::limits::set_limits` from Rust)")]
pub struct LimitError {
    /// The field of [`Limits`].
    pub limit: &'static str,
    /// What was being read or built (a file, a tensor, a node).
    pub what: String,
    /// The value asked for.
    pub value: u64,
    /// The bound in force.
    pub max: u64,
    /// The environment variable the CLI and npm read for this limit.
    pub var: &'static str,
}

static LIMITS: RwLock<Limits> = RwLock::new(Limits::DEFAULT);

/// The limits in force (process-wide).
pub fn limits() -> Limits {
    // A poisoned lock still holds a valid `Limits` (it is `Copy`).
    *LIMITS.read().unwrap_or_else(|e| e.into_inner())
}

/// Replaces the limits in force; returns the previous ones.
pub fn set_limits(l: Limits) -> Limits {
    let mut g = LIMITS.write().unwrap_or_else(|e| e.into_inner());
    std::mem::replace(&mut *g, l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceeding_a_limit_names_it_and_the_variable() {
        let l = Limits {
            max_tensor_bytes: 100,
            ..Limits::DEFAULT
        };
        assert!(l.check_tensor_bytes("t", 100).is_ok());
        let e = l.check_tensor_bytes("tensor `w`", 101).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("tensor `w`")
                && s.contains("max_tensor_bytes")
                && s.contains("RLX_MAX_TENSOR_BYTES"),
            "{s}"
        );
        assert_eq!((e.value, e.max), (101, 100));
    }

    #[test]
    fn available_memory_bounds_the_arena() {
        let l = Limits::with_available_memory(10 * GIB);
        assert_eq!(l.max_arena_bytes, 9 * GIB);
        assert_eq!(l.max_tensor_bytes, 5 * GIB);
        assert_eq!(l.max_nesting_depth, Limits::DEFAULT.max_nesting_depth);
    }
}
