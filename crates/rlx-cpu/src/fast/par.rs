//! Threads for the fast kernels: rayon natively (its global pool, sized
//! once: [`crate::set_threads`], default all cores up to the
//! `max_threads` limit; `rlx_ref::threads` owns it). On wasm32, one thread,
//! except in the threaded build (`+atomics`), where the pool is Web
//! Workers and the calling thread — usually the page's main thread, which
//! may not block — takes a share of every loop (see `spread`).
//! Per-thread scratch is allocated at compile time, so a run allocates
//! nothing here.

use std::sync::Mutex;

/// The threaded wasm32 build: rayon over Web Workers.
macro_rules! web_threads {
    ($($item:item)*) => {
        $(#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))] $item)*
    };
}

/// Worker threads the fast kernels use (the pool `rlx_ref::threads` owns).
pub fn threads() -> usize {
    rlx_ref::threads::threads()
}

/// `f()` on this pool thread while the pool's other threads stay awake,
/// running the pool's pending work, until it returns. Each kernel of a run
/// hands work to the other threads; a thread that went to sleep between
/// two kernels takes tens of µs to wake, as long as a batch-1 kernel.
/// The helpers are `rayon::join` halves, which live on the stack: a run
/// still allocates nothing.
#[cfg(not(target_arch = "wasm32"))]
pub fn with_helpers<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    with_n_helpers(threads().saturating_sub(1), f)
}

/// [`with_helpers`] with `n` helpers (tests run it on a pool of their own).
#[cfg(not(target_arch = "wasm32"))]
fn with_n_helpers<R: Send>(n: usize, f: impl FnOnce() -> R + Send) -> R {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    let main = rayon::current_thread_index();
    // Serve until `done`; on the thread running `f` (which may pick up a
    // helper while it waits inside a kernel) do nothing: it would spin
    // there forever. Any other thread may also pick up a helper still
    // queued while it waits inside a kernel's job (for the other half of
    // a split it made): that job cannot finish under the spinning helper,
    // and `f` waits for the job — a deadlock (seen on 16 cores: a decode
    // step never returned). So a helper with no work for `IDLE` returns:
    // the job under it goes on, and `f` with it.
    const IDLE: std::time::Duration = std::time::Duration::from_micros(200);
    let serve = || {
        if rayon::current_thread_index() == main {
            return;
        }
        let mut idle_since: Option<std::time::Instant> = None;
        while !done.load(Ordering::Acquire) {
            if rayon::yield_now() == Some(rayon::Yield::Executed) {
                idle_since = None;
            } else if idle_since
                .get_or_insert_with(std::time::Instant::now)
                .elapsed()
                > IDLE
            {
                return;
            } else {
                std::hint::spin_loop();
            }
        }
    };
    fn helpers(n: usize, serve: &(impl Fn() + Sync)) {
        match n {
            0 => {}
            1 => serve(),
            _ => {
                rayon::join(serve, || helpers(n - 1, serve));
            }
        }
    }
    // Set when `f` returns or unwinds: a panic inside a kernel must end
    // the helpers too, or `join` would wait for them forever.
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let (r, ()) = rayon::join(
        || {
            let _done = Done(&done);
            f()
        },
        || helpers(n, &serve),
    );
    r
}

// The threaded browser build. The calling thread never waits on a rayon
// latch here: the page's main thread may not block, so it would spin on
// one (`web_spin_lock`) until a sleeping worker woke to run the job it
// waits for. Jobs are detached (`rayon::spawn`) and the caller spins on
// plain atomics it owns, waiting only for jobs already inside an item: a
// worker that comes late finds the work gone.
web_threads! {
    /// `f()` on this thread (outside the pool: the page's main thread)
    /// while the pool's workers spin, serving the loops `f` hands them
    /// through `spread`, until it returns: as natively, a worker that went
    /// to sleep between two kernels would take tens of µs to wake.
    pub fn with_helpers_here<R>(f: impl FnOnce() -> R) -> R {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let done = Arc::new(AtomicBool::new(false));
        for _ in 1..threads() {
            let done = done.clone();
            // Touches only its own `done`: nothing to wait for at the end.
            rayon::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    if rayon::yield_now() != Some(rayon::Yield::Executed) {
                        std::hint::spin_loop();
                    }
                }
            });
        }
        let r = f();
        // wasm32 aborts on panic, so nothing is left spinning.
        done.store(true, Ordering::Release);
        r
    }

    /// One `spread` in flight: its items, and who may still read `f`.
    struct Shared {
        next: std::sync::atomic::AtomicUsize,
        n: usize,
        /// Set by the caller once its own share is done: a job that starts
        /// after this takes no item.
        closed: std::sync::atomic::AtomicBool,
        /// Jobs between their start and their last item.
        active: std::sync::atomic::AtomicUsize,
        /// The caller's closure, its lifetime erased: read only by a job
        /// counted in `active` that found `closed` unset, and the caller
        /// returns only when `active` is 0 after closing.
        f: *const (dyn Fn(usize) + Sync + 'static),
    }

    // SAFETY: `f` is `Sync` and only called under the protocol above.
    #[allow(unsafe_code)]
    unsafe impl Send for Shared {}
    #[allow(unsafe_code)]
    unsafe impl Sync for Shared {}

    impl Shared {
        fn work(&self, f: &(dyn Fn(usize) + Sync)) {
            use std::sync::atomic::Ordering::Relaxed;
            loop {
                let i = self.next.fetch_add(1, Relaxed);
                if i >= self.n {
                    break;
                }
                f(i);
            }
        }
    }

    /// `f(i)` for `i` in `0..n`, shared between the pool's workers and the
    /// calling thread, which takes items too instead of waiting (the
    /// page's main thread can only spin): items go out one at a time from
    /// a counter, so a slow thread takes fewer. Returns when every item
    /// is done and no worker can read `f` any more.
    #[allow(unsafe_code)]
    fn spread(n: usize, f: &(dyn Fn(usize) + Sync)) {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        use std::sync::Arc;
        // SAFETY: only the pointer's lifetime is erased; see `Shared::f`.
        let erased: *const (dyn Fn(usize) + Sync + 'static) =
            unsafe { std::mem::transmute(f as *const (dyn Fn(usize) + Sync)) };
        let sh = Arc::new(Shared {
            next: AtomicUsize::new(0),
            n,
            closed: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            f: erased,
        });
        for _ in 1..threads().min(n) {
            let sh = sh.clone();
            rayon::spawn(move || {
                sh.active.fetch_add(1, SeqCst);
                if !sh.closed.load(SeqCst) {
                    // SAFETY: counted in `active` with `closed` unset, so
                    // the caller is still inside `spread` and `f` lives.
                    sh.work(unsafe { &*sh.f });
                }
                sh.active.fetch_sub(1, SeqCst);
            });
        }
        sh.work(f);
        // Every item is taken; close, then wait for the jobs still inside
        // an item (not for jobs that have not started: they take none).
        sh.closed.store(true, SeqCst);
        while sh.active.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }
}

/// `f(index, chunk)` over `data.chunks_mut(chunk)`, in parallel natively.
pub fn for_chunks<T: Send, F>(data: &mut [T], chunk: usize, f: F)
where
    F: Fn(usize, &mut [T]) + Send + Sync,
{
    let chunk = chunk.max(1);
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    #[allow(unsafe_code)]
    if threads() > 1 && data.len() > chunk {
        let len = data.len();
        let d = Disjoint::new(data);
        // SAFETY: chunk i is elements [i·chunk, (i+1)·chunk), disjoint
        // from every other chunk; each index is handed out once.
        return spread(len.div_ceil(chunk), &|i| {
            f(i, unsafe { d.range(i * chunk..((i + 1) * chunk).min(len)) })
        });
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        if threads() > 1 && data.len() > chunk {
            data.par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(i, c)| f(i, c));
            return;
        }
    }
    for (i, c) in data.chunks_mut(chunk).enumerate() {
        f(i, c);
    }
}

/// Threads worth giving a kernel of `flops` floating-point operations:
/// all of them from about 4 MFLOP (some 40 µs of one core), else one —
/// below that, splitting (each thread packing its own operands, the
/// join) cost more than it saved on the 2-core machines measured
/// (PP-OCR's small convs ran slower on 2 threads than on 1).
pub fn threads_for(flops: usize) -> usize {
    const MIN_FLOPS: usize = 1 << 22;
    if flops >= MIN_FLOPS {
        threads().max(1)
    } else {
        1
    }
}

/// One mutable slice handed to parallel tasks that each write their own
/// ranges of it (the rows of an output tile, say, which are not one
/// contiguous chunk): [`Disjoint::range`] is where the caller promises
/// that no two tasks hold overlapping ranges at once.
pub struct Disjoint<'a, T = f32> {
    ptr: *mut T,
    len: usize,
    _slice: std::marker::PhantomData<&'a mut [T]>,
}

impl<T> Clone for Disjoint<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Disjoint<'_, T> {}

// SAFETY: the pointer comes from a `&mut [T]` borrowed for 'a; tasks
// reach its elements only through `range`, whose callers keep the ranges
// of concurrent tasks disjoint.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for Disjoint<'_, T> {}
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for Disjoint<'_, T> {}

impl<'a, T> Disjoint<'a, T> {
    pub fn new(s: &'a mut [T]) -> Disjoint<'a, T> {
        Disjoint {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            _slice: std::marker::PhantomData,
        }
    }

    /// Elements `r` of the slice.
    ///
    /// # Safety
    /// No other task may hold a range overlapping `r` while this one lives.
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn range(&self, r: std::ops::Range<usize>) -> &mut [T] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "Disjoint: range out of bounds"
        );
        // SAFETY: in bounds (asserted); exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.end - r.start) }
    }
}

/// `f(i)` for `i` in `0..n`, in parallel natively.
pub fn for_each<F>(n: usize, f: F)
where
    F: Fn(usize) + Send + Sync,
{
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    if threads() > 1 && n > 1 {
        return spread(n, &f);
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        if threads() > 1 && n > 1 {
            (0..n).into_par_iter().for_each(f);
            return;
        }
    }
    (0..n).for_each(f);
}

/// [`for_chunks`] over `data`, and over `other` (the same length) in
/// the same chunks when there is one: `f(index, chunk, other's chunk)`.
pub fn for_chunks_with<F>(data: &mut [f32], other: Option<&mut [u16]>, chunk: usize, f: F)
where
    F: Fn(usize, &mut [f32], Option<&mut [u16]>) + Send + Sync,
{
    let Some(other) = other else {
        return for_chunks(data, chunk, |i, c| f(i, c, None));
    };
    let chunk = chunk.max(1);
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    #[allow(unsafe_code)]
    if threads() > 1 && data.len() > chunk {
        let len = data.len();
        let (d, o) = (Disjoint::new(data), Disjoint::new(other));
        // SAFETY: as in `for_chunks`, over both slices (the same length).
        return spread(len.div_ceil(chunk), &|i| {
            let r = i * chunk..((i + 1) * chunk).min(len);
            f(
                i,
                unsafe { d.range(r.clone()) },
                Some(unsafe { o.range(r) }),
            )
        });
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        if threads() > 1 && data.len() > chunk {
            data.par_chunks_mut(chunk)
                .zip(other.par_chunks_mut(chunk))
                .enumerate()
                .for_each(|(i, (c, o))| f(i, c, Some(o)));
            return;
        }
    }
    for (i, (c, o)) in data
        .chunks_mut(chunk)
        .zip(other.chunks_mut(chunk))
        .enumerate()
    {
        f(i, c, Some(o));
    }
}

/// A chunk size (a multiple of `unit`, at least `min` elements where the
/// total allows) that splits `total` into a number of chunks that is a
/// multiple of the thread count when it can be — 3 equal chunks on 2
/// threads would leave one idle a third of the time.
pub fn chunk_len(total: usize, unit: usize, min: usize) -> usize {
    let unit = unit.max(1);
    let units = total.div_ceil(unit).max(1);
    let t = threads();
    let max_chunks = (total / min.max(1)).clamp(1, units);
    let chunks = if max_chunks >= 4 * t {
        4 * t
    } else if max_chunks >= t {
        max_chunks / t * t
    } else {
        max_chunks
    };
    units.div_ceil(chunks) * unit
}

/// Per-thread scratch buffers, sized at compile time.
pub struct Scratch<T = f32> {
    slots: Vec<Mutex<Vec<T>>>,
}

impl<T: Clone + Default> Scratch<T> {
    pub fn new(per_thread: usize) -> Scratch<T> {
        Scratch {
            slots: (0..threads() + 1)
                .map(|_| Mutex::new(vec![T::default(); per_thread]))
                .collect(),
        }
    }

    /// Run `f` with this thread's scratch buffer.
    pub fn with<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> R {
        #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
        let k = rayon::current_thread_index().unwrap_or(self.slots.len() - 1);
        #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
        let k = 0;
        let slot = &self.slots[k.min(self.slots.len() - 1)];
        // Each pool thread only ever takes its own slot, so this lock is
        // uncontended (the last slot is shared by callers outside the pool).
        let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    /// A kernel that panics inside `with_helpers` ends the run with that
    /// panic; the helper threads, spinning until the run is done, must not
    /// keep `join` waiting forever (they did: a failing test hung).
    #[test]
    fn a_panic_inside_with_helpers_ends_the_helpers() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                super::with_helpers(|| -> usize { panic!("a kernel bug") })
            });
            let _ = tx.send(r.is_err());
        });
        let ended = rx.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(ended, Ok(true), "with_helpers did not return after a panic");
    }

    /// On a pool of many threads, a thread waiting inside a kernel's job
    /// (for the other half of a split it made) can pick up a helper still
    /// queued; the run then waits for a job that waits for the run. Seen
    /// as a decode step that never returned on a 16-core machine (every
    /// thread's stack read with cuda-gdb there). Here a 16-thread pool
    /// runs nested parallel loops under 15 helpers: a smoke test of the
    /// scheme on a big pool. On the 2-core CI machine it did not
    /// reproduce that deadlock with the old helpers (3 × 3000 runs), so it
    /// guards against hangs in general, not that one.
    #[test]
    fn helpers_never_hold_up_a_run_on_a_big_pool() {
        use rayon::prelude::*;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(16)
                .build()
                .unwrap();
            pool.install(|| {
                for _ in 0..1000 {
                    super::with_n_helpers(15, || {
                        (0..64).into_par_iter().for_each(|i| {
                            (0..8).into_par_iter().for_each(|j| {
                                // A few µs of work per item.
                                let mut x = (i * j) as u64;
                                for _ in 0..2000 {
                                    x = std::hint::black_box(
                                        x.wrapping_mul(6364136223846793005).wrapping_add(1),
                                    );
                                }
                            });
                        });
                    });
                }
            });
            let _ = tx.send(());
        });
        let ended = rx.recv_timeout(std::time::Duration::from_secs(120));
        assert!(
            ended.is_ok(),
            "runs under with_helpers did not finish in 120 s"
        );
    }
}
