//! The planner's allocator: best-fit over one growing arena.

use std::collections::{BTreeMap, BTreeSet};

/// Best-fit allocator over one growing arena.
#[derive(Default)]
pub(super) struct FreeList {
    by_offset: BTreeMap<usize, usize>,
    by_size: BTreeSet<(usize, usize)>,
    /// The arena's size so far.
    pub(super) end: usize,
}

impl FreeList {
    fn take(&mut self, off: usize, size: usize) {
        self.by_offset.remove(&off);
        self.by_size.remove(&(size, off));
    }
    fn put(&mut self, off: usize, size: usize) {
        self.by_offset.insert(off, size);
        self.by_size.insert((size, off));
    }

    /// An aligned block of `size` (aligned) bytes, or `None` when the
    /// arena's end would overflow `usize` (reachable on 32-bit targets,
    /// where two tensors under the tensor bound can exceed 4 GiB).
    pub(super) fn alloc(&mut self, size: usize) -> Option<usize> {
        if size == 0 {
            return Some(0);
        }
        if let Some(&(s, off)) = self.by_size.range((size, 0)..).next() {
            self.take(off, s);
            if s > size {
                self.put(off + size, s - size);
            }
            return Some(off);
        }
        // Grow the arena, starting inside a free block at its end if any.
        if let Some((&off, &s)) = self.by_offset.iter().next_back() {
            if off + s == self.end {
                let end = off.checked_add(size)?;
                self.take(off, s);
                self.end = end;
                return Some(off);
            }
        }
        let off = self.end;
        self.end = off.checked_add(size)?;
        Some(off)
    }

    pub(super) fn free(&mut self, mut off: usize, mut size: usize) {
        if size == 0 {
            return;
        }
        if let Some((&p, &ps)) = self.by_offset.range(..off).next_back() {
            if p + ps == off {
                self.take(p, ps);
                off = p;
                size += ps;
            }
        }
        if let Some(&ns) = self.by_offset.get(&(off + size)) {
            self.take(off + size, ns);
            size += ns;
        }
        self.put(off, size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_is_best_fit_coalesces_and_grows_from_a_free_tail() {
        let mut f = FreeList::default();
        let a = f.alloc(128).unwrap(); // 0
        let b = f.alloc(64).unwrap(); // 128
        let c = f.alloc(256).unwrap(); // 192
        let d = f.alloc(64).unwrap(); // 448
        assert_eq!((a, b, c, d, f.end), (0, 128, 192, 448, 512));
        f.free(a, 128);
        f.free(c, 256);
        assert_eq!(f.alloc(64), Some(0)); // the 128 hole fits better than the 256 one
        f.free(0, 64);
        assert_eq!(f.by_offset.get(&0), Some(&128)); // merged with its remainder
        f.free(b, 64); // joins both neighbours
        assert_eq!(f.by_offset.len(), 1);
        assert_eq!(f.by_offset.get(&0), Some(&448));
        f.free(d, 64);
        // A request larger than every hole extends the free tail.
        assert_eq!(f.alloc(640), Some(0));
        assert_eq!(f.end, 640);
        assert!(f.by_offset.is_empty());
    }

    #[test]
    fn an_arena_end_past_usize_is_none_not_a_wrap() {
        let mut f = FreeList::default();
        assert_eq!(f.alloc(usize::MAX - 63), Some(0));
        assert_eq!(f.alloc(128), None);
        assert_eq!(f.end, usize::MAX - 63);
    }
}
