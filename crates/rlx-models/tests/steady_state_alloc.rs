//! Zero allocation in steady state: after the first run, a run of the
//! compiled encoder block on the fast CPU engine allocates only what it
//! hands back (the output tensors and the Vec holding them) — and the
//! packing buffer the `gemm` crate allocates inside every call, which we
//! count exactly (`rlx_cpu::gemm_calls`) rather than hide. A counting
//! global allocator sees every thread, the worker pool's included. This is
//! the only test in its binary, so nothing else allocates meanwhile.

use rlx::{Device, HostTensor};
use rlx_models::dsl_block::{encoder_block, BlockShape};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn repeated_runs_allocate_only_their_outputs() {
    let shape = BlockShape {
        batch: 2,
        seq: 32,
        hidden: 64,
        heads: 4,
        ffn: 128,
    };
    let g = encoder_block(shape).unwrap();
    let ins: Vec<HostTensor> = g
        .inputs
        .iter()
        .map(|&v| {
            let t = g.ty(v);
            let n = t.shape.numel();
            let d: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 200.0)
                .collect();
            HostTensor::new(t.dtype, t.shape.clone(), d.into()).unwrap()
        })
        .collect();
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let c = rlx::compile(&g, Device::Cpu).unwrap();
    c.run_refs(&refs).unwrap(); // warm-up: thread pool, lazy statics
    c.run_refs(&refs).unwrap();
    let (before, gemms) = (ALLOCS.load(Ordering::SeqCst), rlx_cpu::gemm_calls());
    let outs = c.run_refs(&refs).unwrap();
    let used = ALLOCS.load(Ordering::SeqCst) - before;
    let gemms = rlx_cpu::gemm_calls() - gemms;
    assert!(gemms > 0);
    // The output Vec and each output's data and shape, plus the packing
    // buffers the `gemm` crate allocates inside each call (one or two):
    // nothing per kernel of ours, nothing per intermediate.
    let allowed = 1 + 2 * outs.len() + 2 * gemms;
    assert!(
        used <= allowed,
        "a steady-state run made {used} allocations (allowed {allowed}: the outputs and {gemms} GEMM packing buffers)"
    );
}
