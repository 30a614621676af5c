//! The browser's WebGPU device: one context per page, created on first use
//! (async), re-created after a device loss. Availability is checked before
//! asking wgpu, so a missing `navigator.gpu` gets a reason a user can act on.

#[cfg(feature = "webgpu")]
use rlx_wgpu::{GpuContext, PipelineCache};
use std::cell::RefCell;
use std::sync::Arc;

#[cfg(feature = "webgpu")]
type Ctx = (Arc<GpuContext>, Arc<PipelineCache>);
#[cfg(not(feature = "webgpu"))]
type Ctx = ();

thread_local! {
    static CTX: RefCell<Option<Ctx>> = const { RefCell::new(None) };
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

/// The live context, creating it if needed.
#[cfg(feature = "webgpu")]
pub async fn context() -> Result<Ctx, String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    let live = CTX.with(|c| c.borrow().as_ref().filter(|(g, _)| !g.is_lost()).cloned());
    if let Some(c) = live {
        return Ok(c);
    }
    let ctx = GpuContext::create(rlx_runtime::Device::WebGpu)
        .await
        .map_err(|e| e.to_string())?;
    let c = (Arc::new(ctx), Arc::new(PipelineCache::default()));
    CTX.with(|s| *s.borrow_mut() = Some(c.clone()));
    Ok(c)
}

/// `{available, reason?, adapter?}` for `rlx.devices()`.
pub async fn info_json() -> serde_json::Value {
    #[cfg(feature = "webgpu")]
    {
        match context().await {
            Ok((c, _)) => {
                let i = &c.info;
                serde_json::json!({
                    "device": "webgpu",
                    "available": true,
                    "adapter": {
                        "name": i.name,
                        "backend": i.backend,
                        "driver": i.driver,
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
