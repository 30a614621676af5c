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

mod read;

pub use read::{read_bounded, read_bounded_to_string, ReadError};

use crate::dtype::{DType, Storage};
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

/// Bytes of a tensor of `dtype` and `dims`, or `None` when the element
/// count or the byte count overflows `u64`. Block-quantized dtypes count
/// whole blocks (a partial block is rounded up; the IR rejects it later).
pub fn tensor_bytes(dtype: DType, dims: &[usize]) -> Option<u64> {
    let numel = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(u64::try_from(d).ok()?))?;
    match dtype.storage() {
        Storage::Plain { size } => numel.checked_mul(size as u64),
        Storage::Block { block, bytes } => numel
            .div_ceil(block.max(1) as u64)
            .checked_mul(bytes as u64),
    }
}

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

    /// Checks a tensor of `dtype` and `dims` named `what` against
    /// `max_tensor_bytes` and returns its bytes. The size is computed with
    /// overflow checks ([`tensor_bytes`]): a shape whose byte count does
    /// not fit `u64` is refused as over any limit, where a saturating or
    /// wrapping product would let it through or panic.
    pub fn check_tensor_shape(
        &self,
        what: &str,
        dtype: DType,
        dims: &[usize],
    ) -> Result<u64, LimitError> {
        match tensor_bytes(dtype, dims) {
            Some(b) => self.check_tensor_bytes(what, b).map(|()| b),
            // Refused whatever the bound: no limit can hold it.
            None => Err(LimitError {
                limit: "max_tensor_bytes",
                what: format!("{what} ({dtype} {dims:?}: the byte size overflows u64)"),
                value: u64::MAX,
                max: self.max_tensor_bytes,
                var: "RLX_MAX_TENSOR_BYTES",
            }),
        }
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

/// The JavaScript (npm) name of a field of [`Limits`]: `max_tensor_bytes`
/// is `maxTensorBytes`.
pub fn js_name(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut upper = false;
    for ch in field.chars() {
        if ch == '_' {
            upper = true;
        } else if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

impl Limits {
    /// Every field by name (as in the struct), with its value: what the
    /// npm package's `limits()` shows and `setLimits` changes.
    pub fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("max_tensor_bytes", self.max_tensor_bytes),
            ("max_arena_bytes", self.max_arena_bytes),
            ("max_nesting_depth", self.max_nesting_depth as u64),
            ("max_file_bytes", self.max_file_bytes),
            ("max_threads", self.max_threads as u64),
            ("max_rank", self.max_rank as u64),
        ]
    }

    /// Sets the field `name` (a name of [`Limits::fields`]) to `value`. An
    /// unknown name, or a value of 0 (nothing would pass) or one that does
    /// not fit the field, is an error that says so.
    pub fn set(&mut self, name: &str, value: u64) -> Result<(), String> {
        if value == 0 {
            return Err(format!(
                "limit {name}: 0 would refuse everything; give at least 1"
            ));
        }
        let small = |v: u64| {
            usize::try_from(v).map_err(|_| format!("limit {name}: {v} does not fit this platform"))
        };
        match name {
            "max_tensor_bytes" => self.max_tensor_bytes = value,
            "max_arena_bytes" => self.max_arena_bytes = value,
            "max_nesting_depth" => self.max_nesting_depth = small(value)?,
            "max_file_bytes" => self.max_file_bytes = value,
            "max_threads" => self.max_threads = small(value)?,
            "max_rank" => self.max_rank = small(value)?,
            _ => {
                let known: Vec<&str> = self.fields().iter().map(|f| f.0).collect();
                return Err(format!(
                    "unknown limit `{name}` (the limits: {})",
                    known.join(", ")
                ));
            }
        }
        Ok(())
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

/// A bound was exceeded. The message names the limit and how to raise it
/// from each edge: the environment variable (CLI, Node), `setLimits` in
/// the npm package (a browser has no environment), `set_limits` in Rust.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{what}: {value} exceeds the limit {limit} = {max} (raise it with {var}=N, `rlx.setLimits({{ {js}: N }})` in JavaScript, or `rlx_ir::limits::set_limits` from Rust)", js = js_name(limit))]
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
        assert!(s.contains("rlx.setLimits({ maxTensorBytes: N })"), "{s}");
    }

    #[test]
    fn fields_are_set_by_name_and_bad_names_or_values_refused() {
        let mut l = Limits::DEFAULT;
        l.set("max_rank", 7).unwrap();
        l.set("max_tensor_bytes", 1 << 40).unwrap();
        assert_eq!((l.max_rank, l.max_tensor_bytes), (7, 1 << 40));
        assert!(l.fields().contains(&("max_rank", 7)));
        let e = l.set("max_ranks", 7).unwrap_err();
        assert!(
            e.contains("unknown limit `max_ranks`") && e.contains("max_rank"),
            "{e}"
        );
        assert!(l.set("max_threads", 0).unwrap_err().contains("at least 1"));
        assert_eq!(js_name("max_nesting_depth"), "maxNestingDepth");
    }

    #[test]
    fn tensor_bytes_are_overflow_checked() {
        assert_eq!(tensor_bytes(DType::F32, &[2, 3]), Some(24));
        assert_eq!(tensor_bytes(DType::F32, &[]), Some(4));
        assert_eq!(
            tensor_bytes(DType::F32, &[0, usize::MAX, usize::MAX]),
            Some(0)
        );
        assert_eq!(tensor_bytes(DType::Q4_0, &[64]), Some(36));
        assert_eq!(tensor_bytes(DType::F32, &[1 << 40, 1 << 40]), None);
        assert_eq!(tensor_bytes(DType::F64, &[1 << 31, 1 << 31]), None);
        let l = Limits::DEFAULT;
        let e = l
            .check_tensor_shape("input `x`", DType::F32, &[1 << 40, 1 << 40])
            .unwrap_err();
        assert!(e.to_string().contains("overflows u64"), "{e}");
        let e = l
            .check_tensor_shape("input `x`", DType::F32, &[1_000_000, 1_000_000])
            .unwrap_err();
        assert_eq!((e.limit, e.value), ("max_tensor_bytes", 4_000_000_000_000));
        assert_eq!(l.check_tensor_shape("x", DType::F32, &[2, 2]), Ok(16));
    }

    #[test]
    fn available_memory_bounds_the_arena() {
        let l = Limits::with_available_memory(10 * GIB);
        assert_eq!(l.max_arena_bytes, 9 * GIB);
        assert_eq!(l.max_tensor_bytes, 5 * GIB);
        assert_eq!(l.max_nesting_depth, Limits::DEFAULT.max_nesting_depth);
    }
}
