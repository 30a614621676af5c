//! A tiny C ABI on the raw module (before wasm-bindgen's post-processing):
//! `scripts/wasm-conformance.mjs` runs every reference vector through it
//! under Node, and `benches/wasm` times the encoder block with it, without
//! depending on the JS glue.

use std::cell::RefCell;

thread_local! {
    static LAST: RefCell<(u32, String)> = const { RefCell::new((0, String::new())) };
}

/// Allocate `len` bytes for the host to write into. Pair with [`rlx_free`].
#[no_mangle]
pub extern "C" fn rlx_alloc(len: usize) -> *mut u8 {
    let mut v = vec![0u8; len];
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

/// Free a buffer from [`rlx_alloc`].
///
/// # Safety
/// `ptr` and `len` must come from one `rlx_alloc` call, freed once.
#[no_mangle]
pub unsafe extern "C" fn rlx_free(ptr: *mut u8, len: usize) {
    // SAFETY: the caller passes back exactly what rlx_alloc returned.
    drop(unsafe { Vec::from_raw_parts(ptr, len, len) });
}

/// Run one `tests/vectors/ops/<op>.json` file held in `len` bytes at `ptr`.
/// Returns the number of failing runs; [`rlx_last_runs`] and
/// [`rlx_last_message_ptr`]/[`rlx_last_message_len`] describe the result.
///
/// # Safety
/// `ptr..ptr+len` must be a live allocation (from [`rlx_alloc`]).
#[no_mangle]
pub unsafe extern "C" fn rlx_run_vectors(ptr: *const u8, len: usize) -> u32 {
    // SAFETY: the caller guarantees the range is readable.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    let (runs, failures) = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(file) => {
            let r = rlx_cpu::conformance::run_file(&file);
            (r.runs as u32, r.failures)
        }
        Err(e) => (0, vec![format!("bad vector JSON: {e}")]),
    };
    let n = failures.len() as u32;
    LAST.with(|l| *l.borrow_mut() = (runs, failures.join("\n")));
    n
}

/// Runs made by the last [`rlx_run_vectors`] call.
#[no_mangle]
pub extern "C" fn rlx_last_runs() -> u32 {
    LAST.with(|l| l.borrow().0)
}

/// The failure messages of the last call (UTF-8), pointer and length.
#[no_mangle]
pub extern "C" fn rlx_last_message_ptr() -> *const u8 {
    LAST.with(|l| l.borrow().1.as_ptr())
}

#[no_mangle]
pub extern "C" fn rlx_last_message_len() -> usize {
    LAST.with(|l| l.borrow().1.len())
}

/// Number of registered op kinds (a cheap liveness probe).
#[no_mangle]
pub extern "C" fn rlx_op_count() -> u32 {
    rlx::ir::all_ops().len() as u32
}

thread_local! {
    static BENCH: RefCell<Option<(rlx::Compiled, Vec<rlx::HostTensor>)>> = const { RefCell::new(None) };
}

/// Compile the MiniLM-sized encoder block (seq 128) at `batch` for the
/// wasm-vs-native benchmark (`benches/wasm/run.py`); 0 on success.
#[no_mangle]
pub extern "C" fn rlx_bench_prepare(batch: u32) -> u32 {
    use rlx_models::dsl_block::{block_inputs, block_params, encoder_block, BlockShape};
    let built = encoder_block(BlockShape {
        batch: batch as usize,
        ..BlockShape::MINILM
    })
    .and_then(|g| {
        let ins = block_inputs(&g, 42)?;
        let c = rlx::compile(&g, rlx::Device::Cpu)?;
        // Weights resident, as for a loaded model (the native side too).
        c.keep_resident(&block_params(&g));
        Ok((c, ins))
    });
    match built {
        Ok(b) => {
            BENCH.with(|c| *c.borrow_mut() = Some(b));
            0
        }
        Err(e) => {
            LAST.with(|l| *l.borrow_mut() = (0, e.to_string()));
            1
        }
    }
}

/// The prepared block's distinct kernel names from its dispatch report,
/// one per line, as the last message (the benchmark prints which GEMM
/// kernel it timed); 0 on success, 2 when nothing is prepared.
#[no_mangle]
pub extern "C" fn rlx_bench_kernels() -> u32 {
    BENCH.with(|c| match c.borrow().as_ref() {
        Some((p, _)) => {
            let mut names: Vec<&str> = Vec::new();
            for k in p.dispatch_report().nodes.iter().flat_map(|n| &n.kernels) {
                if !names.contains(&k.as_str()) {
                    names.push(k);
                }
            }
            LAST.with(|l| *l.borrow_mut() = (0, names.join("\n")));
            0
        }
        None => 2,
    })
}

/// Run the prepared block once; 0 on success.
#[no_mangle]
pub extern "C" fn rlx_bench_run() -> u32 {
    BENCH.with(|c| match c.borrow().as_ref() {
        Some((p, ins)) => match p.run(ins) {
            Ok(_) => 0,
            Err(e) => {
                LAST.with(|l| *l.borrow_mut() = (0, e.to_string()));
                1
            }
        },
        None => 2,
    })
}
