//! One depth guard for every recursive walk over parsed or built IR.
//!
//! Literals, sub-graphs of `if`/`while`/`scan`/`fused_elementwise` and the
//! passes and interpreters that recurse into them all use the call stack,
//! so a hostile input nested deep enough overflows it — an abort that no
//! caller can catch (and that poisons a wasm instance for good). Each
//! recursive step instead calls [`enter`] first: it counts the levels this
//! thread is inside, across crates and across walkers (a verify started
//! inside a pass inside the interpreter adds to the same count, which is
//! what the stack sees), and refuses the level past
//! [`Limits::max_nesting_depth`](crate::limits::Limits) with a
//! [`LimitError`] that names the limit and how to raise it.
//!
//! The count lives in a thread-local, not in an argument, so walkers in
//! other crates (`rlx-opt` passes, the CPU interpreter) share the bound
//! without threading a depth through every signature. The guard steps back
//! out when dropped, on error and unwind paths too.

use crate::limits::{limits, LimitError};
use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One level of nesting held by the current thread; dropping it leaves
/// the level. Not `Send`: the count it restores is this thread's.
#[must_use = "the level is left as soon as the guard is dropped"]
pub struct NestingGuard {
    _this_thread: PhantomData<*const ()>,
}

/// Enter one more level of a recursive walk over `what` (a phrase such as
/// "sub-graph `body` of node 3"), or fail when that level would exceed
/// `limits().max_nesting_depth`.
pub fn enter(what: &str) -> Result<NestingGuard, LimitError> {
    let depth = DEPTH.with(|d| d.get()) + 1;
    limits().check_depth(what, depth)?;
    DEPTH.with(|d| d.set(depth));
    Ok(NestingGuard {
        _this_thread: PhantomData,
    })
}

/// The levels the current thread is inside now.
pub fn depth() -> usize {
    DEPTH.with(|d| d.get())
}

impl Drop for NestingGuard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recurse(n: usize) -> Result<usize, LimitError> {
        let _g = enter("test recursion")?;
        if n == 0 {
            Ok(depth())
        } else {
            recurse(n - 1)
        }
    }

    #[test]
    fn levels_are_counted_and_left_on_error() {
        let max = limits().max_nesting_depth;
        assert_eq!(recurse(9).unwrap(), 10);
        assert_eq!(depth(), 0);
        let e = recurse(max + 5).unwrap_err();
        assert_eq!(
            (e.limit, e.value, e.max),
            ("max_nesting_depth", max as u64 + 1, max as u64)
        );
        assert!(e.to_string().contains("RLX_MAX_NESTING_DEPTH"), "{e}");
        // Every guard was dropped on the way out, so the next walk starts at 0.
        assert_eq!(depth(), 0);
        assert_eq!(recurse(0).unwrap(), 1);
    }
}
