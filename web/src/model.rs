//! `compile` and the compiled `Model`: the rlx pipeline up to the LIR
//! program (`rlx::plan_with`), then the executable — built synchronously
//! for the CPU, awaited for WebGPU (the browser cannot block). A device
//! list is a fallback chain: every device skipped and why is recorded in
//! the dispatch report (`fallback`), so nothing falls back silently.

use crate::error::{err, rlx_err, runtime_err};
use crate::graph::Graph;
use crate::tensors::{from_js, to_js};
use crate::weights::Weights;
use rlx::{CompileOptions, DispatchOptions, Planned, Policy};
use rlx_ir::lir::Program;
use rlx_ir::{Graph as IrGraph, HostTensor};
use rlx_runtime::{Device, Executable};
use serde_json::{json, Value};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// Everything a compiled model holds (shared with in-flight runs).
pub struct Inner {
    /// The graph as written (before passes): the "HIR" view.
    source: IrGraph,
    planned_report: Value,
    program: Program,
    passes: Option<rlx_opt::PipelineReport>,
    memory: rlx_opt::MemoryReport,
    device: Device,
    /// Devices tried before `device`, with the reason each was skipped.
    fallback: Vec<(String, String)>,
    /// For `device: 'auto'`: the order tried and each device's estimate.
    auto: Option<Value>,
    /// Graph inputs bound to weights (by input index).
    bound: Vec<Option<Rc<HostTensor>>>,
    /// Built by the device's backend (`Backend::compile_async`).
    exec: Box<dyn Executable>,
    /// Compilation order (the embedder reports its latest model).
    serial: u64,
    /// Unbound inputs autocast takes in 16 bits (converted on each run;
    /// bound ones are converted once, at compile).
    narrowed: Vec<(usize, rlx::DType)>,
}

thread_local! {
    static SERIAL: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Inner {
    pub fn device_name(&self) -> &'static str {
        self.device.name()
    }
    pub fn serial(&self) -> u64 {
        self.serial
    }
    /// The dispatch report (schema 1) plus the devices skipped, as JSON.
    pub fn report_json(&self) -> String {
        let mut r = self.planned_report.clone();
        if let Some(o) = r.as_object_mut() {
            let fb: Vec<Value> = self
                .fallback
                .iter()
                .map(|(d, why)| json!({"device": d, "reason": why}))
                .collect();
            o.insert("fallback".into(), Value::Array(fb));
            if let Some(a) = &self.auto {
                o.insert("auto".into(), a.clone());
            }
        }
        r.to_string()
    }
}

/// Parse a device list entry.
fn device_of(name: &str) -> Result<Device, JsValue> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "webgpu" | "gpu" => Ok(Device::WebGpu),
        o => Err(err(
            "device",
            format!("unknown device `{o}` in the browser build (use 'webgpu' or 'cpu')"),
        )),
    }
}

pub fn options(
    policy: Option<String>,
    optimize: bool,
    amp: Option<String>,
) -> Result<CompileOptions, JsValue> {
    let mut o = CompileOptions {
        optimize,
        amp: match amp {
            Some(a) => rlx::Amp::parse(&a).map_err(|e| err("amp", e))?,
            None => rlx::Amp::None,
        },
        ..CompileOptions::default()
    };
    if let Some(p) = policy {
        o.dispatch = DispatchOptions::new(Policy::parse(&p).map_err(|e| err("dispatch", e))?);
    }
    Ok(o)
}

/// Compile `graph` for the first device of `devices` that can run it.
pub async fn compile_inner(
    graph: IrGraph,
    devices: Vec<String>,
    opts: CompileOptions,
    bound: Vec<Option<Rc<HostTensor>>>,
) -> Result<Inner, JsValue> {
    if devices.is_empty() {
        return Err(err(
            "device",
            "no device given (use 'cpu', 'webgpu' or a list)",
        ));
    }
    // 'auto': every device this page has, cheapest estimate first.
    let (devices, auto) = if devices.len() == 1 && devices[0] == "auto" {
        let (order, estimates) = crate::route::auto_order(&graph, &opts).await;
        (order, Some(estimates))
    } else {
        (devices, None)
    };
    let mut fallback: Vec<(String, String)> = Vec::new();
    let mut last_err = None;
    for name in &devices {
        let device = device_of(name)?;
        match build(&graph, device, &opts).await {
            Ok((planned, exec)) => {
                let resident: Vec<usize> =
                    (0..bound.len()).filter(|&i| bound[i].is_some()).collect();
                exec.keep_resident(&resident);
                // Under autocast the program takes some f32 inputs in 16
                // bits (as `rlx::Compiled` converts them): bound weights
                // are rounded here, once.
                let all: Vec<(usize, rlx::DType)> = planned
                    .passes
                    .as_ref()
                    .and_then(|p| p.autocast.as_ref())
                    .map(|a| a.narrowed.iter().map(|(i, _, d)| (*i, *d)).collect())
                    .unwrap_or_default();
                let mut bound = bound;
                let mut narrowed = vec![];
                for (i, d) in all {
                    match &bound[i] {
                        Some(t) => {
                            let c = rlx::narrow_input(i, t, d).map_err(rlx_err)?;
                            bound[i] = Some(Rc::new(c));
                        }
                        None => narrowed.push((i, d)),
                    }
                }
                return Ok(Inner {
                    source: graph,
                    planned_report: planned.report.to_json(),
                    program: planned.program,
                    passes: planned.passes,
                    memory: planned.memory,
                    device,
                    fallback,
                    auto,
                    bound,
                    exec,
                    serial: SERIAL.with(|c| {
                        c.set(c.get() + 1);
                        c.get()
                    }),
                    narrowed,
                });
            }
            Err(e) => {
                let msg = js_sys::Error::from(e.clone())
                    .message()
                    .as_string()
                    .unwrap_or_default();
                fallback.push((name.clone(), msg));
                last_err = Some(e);
            }
        }
    }
    if devices.len() == 1 {
        return Err(last_err.unwrap_or_else(|| err("device", "no device")));
    }
    let why: Vec<String> = fallback.iter().map(|(d, m)| format!("{d}: {m}")).collect();
    Err(err(
        "device",
        format!(
            "no device in {devices:?} can run this graph:\n{}",
            why.join("\n")
        ),
    ))
}

/// Plan for `device` and build through its backend, as for any backend
/// (`Backend::compile_async`: WebGPU's device and pipelines are awaited).
async fn build(
    graph: &IrGraph,
    device: Device,
    opts: &CompileOptions,
) -> Result<(Planned, Box<dyn Executable>), JsValue> {
    match device {
        Device::Cpu => {}
        // The context first: the dispatch report names how it holds f16.
        #[cfg(feature = "webgpu")]
        Device::WebGpu => {
            crate::gpu::context().await.map_err(|m| err("device", m))?;
        }
        d => {
            return Err(err(
                "device",
                crate::gpu::unavailable()
                    .unwrap_or_else(|| format!("no `{d}` backend in this build")),
            ))
        }
    }
    let planned = rlx::plan_with(graph, device, opts).map_err(rlx_err)?;
    let exe = planned
        .backend
        .compile_async(planned.program.clone())
        .await
        .map_err(|e| match device {
            // Building on the GPU fails for device reasons (a lost device,
            // an allocation or a pipeline it refuses).
            Device::Cpu => runtime_err(e),
            _ => err("device", e),
        })?;
    Ok((planned, exe))
}

/// Run with the unbound inputs (in graph-input order).
pub async fn run_inner(m: &Inner, given: Vec<HostTensor>) -> Result<Vec<HostTensor>, JsValue> {
    let mut it = given.into_iter();
    let mut owned: Vec<HostTensor> = Vec::with_capacity(m.bound.len());
    let mut slots: Vec<Option<usize>> = Vec::with_capacity(m.bound.len());
    for (i, b) in m.bound.iter().enumerate() {
        match b {
            Some(_) => slots.push(None),
            None => {
                let t = it.next().ok_or_else(|| err("input", "too few inputs"))?;
                let t = match m.narrowed.iter().find(|(k, _)| *k == i) {
                    Some(&(_, d)) => rlx::narrow_input(i, &t, d).map_err(rlx_err)?,
                    None => t,
                };
                slots.push(Some(owned.len()));
                owned.push(t);
            }
        }
    }
    let mut refs: Vec<&HostTensor> = Vec::with_capacity(m.bound.len());
    for (b, s) in m.bound.iter().zip(&slots) {
        refs.push(match (b, s) {
            (Some(t), _) => t.as_ref(),
            (None, Some(k)) => &owned[*k],
            (None, None) => return Err(err("input", "an unbound input has no value")),
        });
    }
    m.exec.run_async(&refs).await.map_err(runtime_err)
}

/// Step index range in which each value is live (defined → last read).
fn lifetimes(p: &Program) -> std::collections::HashMap<u32, (usize, usize)> {
    let base =
        |v: rlx_ir::graph::ValueId| p.views.iter().find(|w| w.value == v).map_or(v, |w| w.base);
    let mut life: std::collections::HashMap<u32, (usize, usize)> = Default::default();
    for (s, step) in p.steps.iter().enumerate() {
        for &o in &step.outputs {
            life.entry(o.0).or_insert((s, s));
        }
        for &i in &step.inputs {
            let b = base(i);
            let e = life.entry(b.0).or_insert((0, s));
            e.1 = e.1.max(s);
        }
    }
    let end = p.steps.len().saturating_sub(1);
    for &o in &p.graph.outputs {
        if let Some(e) = life.get_mut(&base(o).0) {
            e.1 = end;
        }
    }
    life
}

/// A compiled graph.
#[wasm_bindgen]
pub struct Model {
    inner: Option<Rc<Inner>>,
}

impl Model {
    pub fn from_inner(i: Inner) -> Model {
        Model {
            inner: Some(Rc::new(i)),
        }
    }
    fn get(&self) -> Result<&Rc<Inner>, JsValue> {
        self.inner.as_ref().ok_or_else(|| {
            err(
                "disposed",
                "this Model was disposed (model.dispose() was called); compile the graph again",
            )
        })
    }
}

/// Compile a graph: `devices` is a fallback chain; graph inputs whose
/// names are in `weights` are bound to them and kept resident.
#[wasm_bindgen]
pub fn compile(
    graph: &Graph,
    devices: Vec<String>,
    policy: Option<String>,
    optimize: bool,
    weights: Option<Weights>,
    amp: Option<String>,
) -> js_sys::Promise {
    let g = graph.inner().clone();
    let opts = options(policy, optimize, amp);
    future_to_promise(async move {
        let opts = opts?;
        let bound = match &weights {
            Some(w) => g
                .inputs
                .iter()
                .map(|&v| {
                    g.values[v.index()]
                        .name
                        .as_deref()
                        .and_then(|n| w.shared(n))
                })
                .collect(),
            None => vec![None; g.inputs.len()],
        };
        if let Some(w) = &weights {
            check_bound(&g, &bound, w)?;
        }
        let inner = compile_inner(g, devices, opts, bound).await?;
        Ok(Model::from_inner(inner).into())
    })
}

/// Bound weights must have the input's exact type.
fn check_bound(g: &IrGraph, bound: &[Option<Rc<HostTensor>>], w: &Weights) -> Result<(), JsValue> {
    for (i, b) in bound.iter().enumerate() {
        if let Some(t) = b {
            let v = &g.values[g.inputs[i].index()];
            if t.dtype() != v.ty.dtype || t.shape() != &v.ty.shape {
                return Err(err(
                    "input",
                    format!(
                        "{}: tensor `{}` is {} {} but graph input {i} wants {}",
                        w.label(),
                        v.name.as_deref().unwrap_or("?"),
                        t.dtype(),
                        t.shape(),
                        v.ty
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[wasm_bindgen]
impl Model {
    /// `webgpu` or `cpu`: the device it really compiled for.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> Result<String, JsValue> {
        Ok(self.get()?.device.name().to_string())
    }

    /// `[{name, dtype, shape, bound}]` of the graph inputs, as JSON.
    pub fn inputs(&self) -> Result<String, JsValue> {
        let m = self.get()?;
        let g = &m.source;
        let rows: Vec<Value> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let val = &g.values[v.index()];
                json!({"name": val.name, "dtype": val.ty.dtype.name(), "shape": val.ty.shape.dims(), "bound": m.bound[i].is_some()})
            })
            .collect();
        Ok(Value::Array(rows).to_string())
    }

    /// Run: `data[k]` is the typed array of the k-th unbound input.
    /// Resolves to `[{name, dtype, shape, data}]`.
    pub fn run(&self, data: js_sys::Array) -> Result<js_sys::Promise, JsValue> {
        let m = self.get()?.clone();
        let g = &m.source;
        let free: Vec<usize> = (0..g.inputs.len())
            .filter(|&i| m.bound[i].is_none())
            .collect();
        if data.length() as usize != free.len() {
            return Err(err(
                "input",
                format!(
                    "the model takes {} inputs (not bound to weights), got {}",
                    free.len(),
                    data.length()
                ),
            ));
        }
        let mut given = Vec::with_capacity(free.len());
        for (k, &i) in free.iter().enumerate() {
            let val = &g.values[g.inputs[i].index()];
            let name = val.name.clone().unwrap_or_else(|| format!("input {i}"));
            given.push(from_js(
                &format!("input `{name}`"),
                val.ty.dtype,
                val.ty.shape.dims(),
                &data.get(k as u32),
            )?);
        }
        Ok(future_to_promise(async move {
            let outs = run_inner(&m, given).await?;
            let arr = js_sys::Array::new();
            for (k, t) in outs.iter().enumerate() {
                let v = m
                    .source
                    .outputs
                    .get(k)
                    .map(|&v| m.source.values[v.index()].name.clone());
                let name = v.flatten().unwrap_or_else(|| format!("output{k}"));
                arr.push(&to_js(&name, t));
            }
            Ok(arr.into())
        }))
    }

    /// The IR at one level, as JSON: `hir` (as written, nodes carry their
    /// `origin`), `mir` (after the passes and legalization), `lir` (the
    /// schedule: steps, slots, views).
    pub fn ir(&self, level: &str) -> Result<String, JsValue> {
        let m = self.get()?;
        let v = match level {
            "hir" => m.source.to_json(),
            "mir" => m.program.graph.to_json(),
            "lir" => json!({
                "steps": m.program.steps,
                "slots": m.program.slots,
                "views": m.program.views,
                "arena_bytes": m.program.arena_bytes,
            }),
            o => {
                return Err(err(
                    "invalid_argument",
                    format!("Model.ir: unknown IR level `{o}` (use hir, mir or lir)"),
                ))
            }
        };
        Ok(v.to_string())
    }

    /// The dispatch report (schema 1), plus the devices skipped.
    #[wasm_bindgen(js_name = dispatchReport)]
    pub fn dispatch_report(&self) -> Result<String, JsValue> {
        Ok(self.get()?.report_json())
    }

    /// The memory plan with each buffer's lifetime in steps.
    #[wasm_bindgen(js_name = memoryPlan)]
    pub fn memory_plan(&self) -> Result<String, JsValue> {
        let m = self.get()?;
        let p = &m.program;
        let life = lifetimes(p);
        let slots: Vec<Value> = p
            .slots
            .iter()
            .map(|s| {
                let (a, b) = life.get(&s.value.0).copied().unwrap_or((0, 0));
                json!({
                    "value": s.value.0,
                    "name": p.graph.values[s.value.index()].name,
                    "dtype": s.ty.dtype.name(),
                    "shape": s.ty.shape.dims(),
                    "offset": s.offset,
                    "bytes": s.bytes,
                    "first_step": a,
                    "last_step": b,
                })
            })
            .collect();
        let r = &m.memory;
        Ok(json!({
            "arena_bytes": r.arena_bytes,
            "peak_bytes": r.peak_bytes,
            "naive_bytes": r.naive_bytes,
            "buffers": r.buffers,
            "in_place": r.in_place,
            "views": r.views,
            "steps": p.steps.len(),
            "slots": slots,
            "views_list": p.views,
        })
        .to_string())
    }

    /// What the MIR passes and fusion did, or `null`.
    #[wasm_bindgen(js_name = passReport)]
    pub fn pass_report(&self) -> Result<String, JsValue> {
        let m = self.get()?;
        Ok(match &m.passes {
            Some(p) => json!({
                "text": p.to_string(),
                "kernels_before": p.kernels_before,
                "kernels_after": p.kernels_after,
                "ops_before": p.ops_before,
                "ops_after": p.ops_after,
            }),
            None => Value::Null,
        }
        .to_string())
    }

    /// The kernels: for WebGPU the generated WGSL, or its naga translation
    /// (`msl`, `hlsl`, `glsl`, `spirv` as hex words); for the CPU the
    /// kernel each step runs. `[{name, lang, source}]` as JSON.
    pub fn kernels(&self, lang: &str) -> Result<String, JsValue> {
        let m = self.get()?;
        let rows: Vec<Value> = match m.device {
            #[cfg(feature = "webgpu")]
            Device::WebGpu => gpu_kernels(&m.program, lang)?,
            _ => m
                .program
                .steps
                .iter()
                .map(|s| json!({"name": s.kernel, "lang": "cpu", "nodes": s.nodes}))
                .collect(),
        };
        let _ = lang;
        Ok(Value::Array(rows).to_string())
    }

    /// Free the model (wasm and GPU memory); later calls fail with
    /// `disposed`. A run in flight finishes first.
    pub fn dispose(&mut self) {
        self.inner = None;
    }
}

#[cfg(feature = "webgpu")]
fn gpu_kernels(p: &Program, lang: &str) -> Result<Vec<Value>, JsValue> {
    use rlx_wgpu::{translate, Lang, Translated};
    let lang =
        Lang::parse(lang).map_err(|e| err("invalid_argument", format!("Model.kernels: {e}")))?;
    // The kernels this page runs: f16 stored as f16 only where the adapter has it.
    let f16 = rlx_wgpu::context::f16_path() != Some(false);
    let low = rlx_wgpu::lower_with(p, f16).map_err(|e| err("runtime", e))?;
    low.kernels
        .iter()
        .map(|k| {
            let source = match lang {
                Lang::Wgsl => k.wgsl.clone(),
                _ => match translate(&k.name, &k.wgsl, lang).map_err(|e| err("runtime", e))? {
                    Translated::Text(t) => t,
                    Translated::Spirv(w) => w
                        .chunks(8)
                        .map(|c| {
                            c.iter()
                                .map(|x| format!("{x:08x}"))
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                },
            };
            Ok(json!({"name": k.name, "lang": lang.name(), "source": source}))
        })
        .collect()
}

/// `rlx.wasmVariant()`: which build of this module runs — plain `simd128`
/// or `simd128+relaxed-madd` (rlx-cpu's `relaxed-simd` feature). The npm
/// package picks the .wasm; this is the module's own word on what it is.
#[wasm_bindgen(js_name = wasmVariant)]
pub fn wasm_variant() -> String {
    rlx_cpu::kernels::gemm128::VARIANT.to_string()
}

/// `rlx.devices()`: what this page can use.
#[wasm_bindgen(js_name = devicesJson)]
pub fn devices_json() -> js_sys::Promise {
    future_to_promise(async move {
        let gpu = crate::gpu::info_json().await;
        Ok(JsValue::from(
            json!([{"device": "cpu", "available": true}, gpu]).to_string(),
        ))
    })
}
