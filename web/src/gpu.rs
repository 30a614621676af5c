//! The browser's WebGPU device: one context per page, created on first use
//! (async), re-created after a device loss. Availability is checked before
//! asking wgpu, so a missing `navigator.gpu` gets a reason a user can act on.

#[cfg(feature = "webgpu")]
use rlx_wgpu::{GpuContext, PipelineCache, WgpuBackend};
#[cfg(feature = "webgpu")]
use std::sync::Arc;

#[cfg(feature = "webgpu")]
type Ctx = (Arc<GpuContext>, Arc<PipelineCache>);

#[cfg(feature = "webgpu")]
thread_local! {
    /// The page's WebGPU backend, registered by [`install`]: it owns the
    /// one GPU context that `devices()` and `compile()` share.
    static BACKEND: std::cell::RefCell<Option<Arc<WgpuBackend>>> = const { std::cell::RefCell::new(None) };
}

/// Register the WebGPU backend (at module start) and keep it for
/// [`context`]: models compile through it, as through any backend.
#[cfg(feature = "webgpu")]
pub fn install() {
    let b = Arc::new(WgpuBackend::new(rlx_runtime::Device::WebGpu));
    rlx_runtime::register_backend(b.clone());
    BACKEND.with(|s| *s.borrow_mut() = Some(b));
}

/// Test hook (`rlx.__testDestroyWebGpu()`): `GPUDevice.destroy()` on the
/// page's live device, as a driver reset or the browser would lose it.
/// Whether there was one.
#[cfg(feature = "webgpu")]
pub fn destroy_for_test() -> bool {
    let ctx = BACKEND.with(|s| s.borrow().as_ref().and_then(|b| b.live_context()));
    ctx.map(|c| c.device.destroy()).is_some()
}

/// Why WebGPU cannot be used here, if it cannot (checked without wgpu).
pub fn unavailable() -> Option<String> {
    if !cfg!(feature = "webgpu") {
        return Some("this build of rlx has no WebGPU backend (cargo feature `webgpu`)".into());
    }
    if !cfg!(target_arch = "wasm32") {
        return Some("WebGPU exists only in the browser build".into());
    }
    let global = js_sys::global();
    let nav = js_sys::Reflect::get(&global, &"navigator".into()).unwrap_or_default();
    let gpu = if nav.is_undefined() || nav.is_null() {
        wasm_bindgen::JsValue::UNDEFINED
    } else {
        js_sys::Reflect::get(&nav, &"gpu".into()).unwrap_or_default()
    };
    if gpu.is_undefined() || gpu.is_null() {
        return Some(
            "navigator.gpu is missing: this browser or runtime has no WebGPU (Chrome/Edge 113+, or \
             Chromium with --enable-unsafe-webgpu); use device 'cpu' or a fallback list ['webgpu', 'cpu']"
                .into(),
        );
    }
    None
}

/// The live context of the WebGPU backend, creating it if needed (and
/// again after a device loss).
#[cfg(feature = "webgpu")]
pub async fn context() -> Result<Ctx, String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    let b = BACKEND
        .with(|s| s.borrow().clone())
        .ok_or("the WebGPU backend is not installed (rlx.init() first)")?;
    b.context_async().await.map_err(|e| e.to_string())
}

/// `{available, reason?, adapter?}` for `rlx.devices()`.
pub async fn info_json() -> serde_json::Value {
    #[cfg(feature = "webgpu")]
    {
        match context().await {
            Ok((c, _)) => {
                let i = &c.info;
                let browser = browser_adapter_info().await;
                let pick = |ours: &str, key: &str| {
                    if ours.trim().is_empty() {
                        browser[key].as_str().unwrap_or("").to_string()
                    } else {
                        ours.to_string()
                    }
                };
                serde_json::json!({
                    "device": "webgpu",
                    "available": true,
                    "adapter": {
                        "name": pick(&i.name, "description"),
                        "vendor": browser["vendor"],
                        "architecture": browser["architecture"],
                        "features": browser["features"],
                        "backend": i.backend,
                        "driver": pick(&i.driver, "device"),
                        "shader_f16": i.shader_f16,
                        "subgroups": i.subgroups,
                        "limits": {
                            "maxStorageBufferBindingSize": i.max_storage_binding,
                            "maxStorageBuffersPerShaderStage": i.max_storage_buffers_per_stage,
                            "maxComputeWorkgroupStorageSize": i.max_workgroup_storage,
                            "maxComputeInvocationsPerWorkgroup": i.max_invocations,
                        }
                    }
                })
            }
            Err(why) => serde_json::json!({"device": "webgpu", "available": false, "reason": why}),
        }
    }
    #[cfg(not(feature = "webgpu"))]
    {
        serde_json::json!({"device": "webgpu", "available": false, "reason": unavailable()})
    }
}

/// What the browser's own `GPUAdapter.info` and `features` say (wgpu's
/// adapter info is empty on the web): `{vendor, architecture, device,
/// description, features}`, or `null` outside a browser.
async fn browser_adapter_info() -> serde_json::Value {
    use js_sys::{Array, Function, Promise, Reflect};
    use wasm_bindgen::{JsCast, JsValue};
    let get = |o: &JsValue, k: &str| Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED);
    let gpu = get(&get(&js_sys::global(), "navigator"), "gpu");
    let Some(req) = get(&gpu, "requestAdapter").dyn_into::<Function>().ok() else {
        return serde_json::Value::Null;
    };
    let Some(p) = req
        .call0(&gpu)
        .ok()
        .and_then(|p| p.dyn_into::<Promise>().ok())
    else {
        return serde_json::Value::Null;
    };
    let adapter = match wasm_bindgen_futures::JsFuture::from(p).await {
        Ok(a) if !a.is_null() && !a.is_undefined() => a,
        _ => return serde_json::Value::Null,
    };
    let info = get(&adapter, "info");
    let text = |k: &str| get(&info, k).as_string().unwrap_or_default();
    let mut features: Vec<String> = Array::from(&get(&adapter, "features"))
        .iter()
        .filter_map(|f| f.as_string())
        .collect();
    features.sort();
    serde_json::json!({
        "vendor": text("vendor"),
        "architecture": text("architecture"),
        "device": text("device"),
        "description": text("description"),
        "features": features,
    })
}
