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

/// The block's inputs: deterministic values, rounded to `dtype`.
fn block_inputs(g: &rlx::Graph) -> Vec<HostTensor> {
    g.inputs
        .iter()
        .map(|&v| {
            let t = g.ty(v);
            let n = t.shape.numel();
            let d = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 200.0);
            let data: rlx::ir::TensorData = match t.dtype {
                rlx::DType::F16 => d.map(half::f16::from_f32).collect::<Vec<_>>().into(),
                rlx::DType::BF16 => d.map(half::bf16::from_f32).collect::<Vec<_>>().into(),
                _ => d.collect::<Vec<_>>().into(),
            };
            HostTensor::new(t.dtype, t.shape.clone(), data).unwrap()
        })
        .collect()
}

/// The f32 block, and the same block with every f32 (inputs, constants,
/// activations) stored as f16 — whose 16-bit operands are widened into
/// staging buffers allocated at compile time.
#[test]
fn repeated_runs_allocate_only_their_outputs() {
    let shape = BlockShape {
        batch: 2,
        seq: 32,
        hidden: 64,
        heads: 4,
        ffn: 128,
    };
    let g32 = encoder_block(shape).unwrap();
    let g16 = rlx::ir::text::parse(&rlx::ir::text::print(&g32).replace("f32", "f16")).unwrap();
    for g in [g32, g16] {
        let ins = block_inputs(&g);
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
            "{}: a steady-state run made {used} allocations (allowed {allowed}: the outputs and {gemms} GEMM packing buffers)",
            outs[0].dtype()
        );
    }
}
