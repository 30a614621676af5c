//! rlx in WebAssembly. The wasm-bindgen API here is the engine under the
//! npm package (`npm/`, contract in `npm/API.md`): the JS wrapper there
//! turns these raw exports into the documented API (fluent tensors,
//! `RlxError` subclasses, progress callbacks, Node/browser loading).
//!
//! Every export returns `Result<_, JsValue>` whose error is a JS `Error`
//! with a `code` (see [`error`]); a Rust panic is recorded by the hook
//! installed in [`start`] so the wrapper can report it as `code: 'panic'`
//! instead of a bare `unreachable` trap.

pub mod alloc;
pub mod cabi;
pub mod embed;
pub mod error;
pub mod gpu;
pub mod graph;
pub mod llm;
pub mod model;
pub mod route;
pub mod tensors;
pub mod threads;
pub mod weights;

use wasm_bindgen::prelude::*;

/// Runs when the module is instantiated.
#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        error::record_panic(info.to_string());
    }));
    rlx::init();
    #[cfg(feature = "webgpu")]
    {
        rlx_wgpu::register();
        gpu::install();
    }
}

/// The crate version (the package version).
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The op registry as JSON (the rows of `rlx ops --json`).
#[wasm_bindgen(js_name = opsJson)]
pub fn ops_json() -> String {
    let rows: Vec<serde_json::Value> = rlx::ir::all_ops().iter().map(|d| d.to_json()).collect();
    serde_json::Value::Array(rows).to_string()
}

/// `rlx.memoryStats()`: `{wasm_bytes, heap_bytes, heap_allocations}` as
/// JSON — the size of the module's linear memory (it never shrinks) and
/// the bytes and blocks the Rust heap holds now (see [`alloc`]). The npm
/// stress tests check that these return to their plateau after
/// create/run/dispose cycles.
#[wasm_bindgen(js_name = memoryStats)]
pub fn memory_stats() -> String {
    let (bytes, blocks) = alloc::live();
    serde_json::json!({
        "wasm_bytes": alloc::linear_memory_bytes(),
        "heap_bytes": bytes,
        "heap_allocations": blocks,
    })
    .to_string()
}

/// `rlx.limits()`: the limits in force (`rlx_ir::limits`) as JSON, by
/// field name (`max_tensor_bytes`, ...).
#[wasm_bindgen(js_name = limitsJson)]
pub fn limits_json() -> String {
    let l = rlx::ir::limits::limits();
    let m: serde_json::Map<String, serde_json::Value> = l
        .fields()
        .iter()
        .map(|&(k, v)| (k.to_string(), v.into()))
        .collect();
    serde_json::Value::Object(m).to_string()
}

/// `rlx.setLimits({...})`: changes the named limits (JSON object of field
/// name → positive integer; the others keep their values) for the whole
/// module, and returns the limits now in force as [`limits_json`] does. An
/// unknown name or a bad value changes nothing and is `invalid_argument`.
/// A browser has no environment, so this is where its `RLX_MAX_*` go.
#[wasm_bindgen(js_name = setLimitsJson)]
pub fn set_limits_json(json: &str) -> Result<String, JsValue> {
    let bad = |m: String| error::err("invalid_argument", format!("setLimits: {m}"));
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("expected an object of limits".into()))?;
    let mut l = rlx::ir::limits::limits();
    for (k, v) in obj {
        let n = v
            .as_u64()
            .ok_or_else(|| bad(format!("{k}: {v} is not a positive whole number")))?;
        l.set(k, n).map_err(bad)?;
    }
    rlx::ir::limits::set_limits(l);
    Ok(limits_json())
}

/// The message of the last Rust panic (empty if none): the wrapper reads
/// it after a trap.
#[wasm_bindgen(js_name = takePanic)]
pub fn take_panic() -> String {
    error::take_panic()
}

/// Run one reference-vector file (`tests/vectors/ops/<op>.json`) in this
/// module; returns `{"runs": n, "failures": [..]}` as JSON.
#[wasm_bindgen(js_name = runVectors)]
pub fn run_vectors(json: &str) -> String {
    let (runs, failures) = match serde_json::from_str::<serde_json::Value>(json) {
        Ok(file) => {
            let r = rlx_cpu::conformance::run_file(&file);
            (r.runs, r.failures)
        }
        Err(e) => (0, vec![format!("bad vector JSON: {e}")]),
    };
    serde_json::json!({"runs": runs, "failures": failures}).to_string()
}

/// Panic on purpose: the test that a Rust panic reaches JS as an
/// `RlxError` with code `panic` and the panic's message
/// (npm/test/panic.test.mjs). Not part of the documented API.
/// Test hook: `GPUDevice.destroy()` on the page's WebGPU device, as a
/// driver reset would lose it (npm's device-loss test). Whether there was one.
#[wasm_bindgen(js_name = __testDestroyWebGpu)]
pub fn test_destroy_webgpu() -> bool {
    #[cfg(feature = "webgpu")]
    {
        gpu::destroy_for_test()
    }
    #[cfg(not(feature = "webgpu"))]
    {
        false
    }
}

#[wasm_bindgen(js_name = __testPanic)]
pub fn test_panic() {
    panic!("deliberate panic for the boundary test");
}
