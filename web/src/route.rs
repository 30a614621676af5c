//! `device: 'auto'`: the devices this page has, tried in the order of the
//! cost model's estimate for the graph (`rlx_runtime::estimate` over the
//! legalized program), with the figures measured on this machine where
//! the device was calibrated (`rlx.calibrate()` in the npm package times
//! small graphs and hands the figures in through `setCalibrationJson`),
//! else the backends' nominal ones. The dispatch report's `auto` says
//! each estimate and whose figures it used.

use crate::error::err;
use rlx::{CompileOptions, Device};
use rlx_ir::Graph as IrGraph;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;

/// The devices to try, cheapest first, and the estimates as JSON.
pub async fn auto_order(graph: &IrGraph, opts: &CompileOptions) -> (Vec<String>, Value) {
    let mut candidates = vec![("cpu", Device::Cpu)];
    #[cfg(feature = "webgpu")]
    if crate::gpu::unavailable().is_none() && crate::gpu::context().await.is_ok() {
        candidates.push(("webgpu", Device::WebGpu));
    }
    let mut rows: Vec<(String, Option<f64>, Value)> = Vec::new();
    for (name, device) in candidates {
        match rlx::plan_with(graph, device, opts) {
            Ok(p) => {
                let (s, source) = rlx_runtime::estimate(&p.program.graph, p.backend.as_ref());
                let ms = s * 1e3;
                rows.push((
                    name.to_string(),
                    Some(ms),
                    json!({"device": name, "estimate_ms": ms, "figures": source.name()}),
                ));
            }
            Err(e) => rows.push((
                name.to_string(),
                None,
                json!({"device": name, "error": e.to_string()}),
            )),
        }
    }
    // Cheapest first; a device that cannot run the graph last (it stays
    // in the list so its reason reaches the error or the report).
    rows.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    let order: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let estimates: Vec<Value> = rows.into_iter().map(|r| r.2).collect();
    let report = json!({"order": &order, "estimates": estimates});
    (order, report)
}

/// Put measured figures in force for their device: `{device, backend,
/// gemm_gflops, launch_us, transfer_gbps}` (the Rust `Calibration`).
#[wasm_bindgen(js_name = setCalibrationJson)]
pub fn set_calibration_json(json: &str) -> Result<(), JsValue> {
    let mut c: rlx::Calibration = serde_json::from_str(json)
        .map_err(|e| err("invalid_argument", format!("calibration: {e}")))?;
    // The browser's names for the router's devices.
    if c.device == "webgpu" || c.device == "gpu" {
        c.device = Device::WebGpu.name().to_string();
    }
    rlx::set_calibration(c).map_err(|e| err("invalid_argument", e))
}

/// Forget every calibration (the nominal figures apply again).
#[wasm_bindgen(js_name = clearCalibrations)]
pub fn clear_calibrations() {
    rlx::clear_calibrations();
}
