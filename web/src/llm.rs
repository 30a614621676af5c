//! Decoder LLMs in the page (`rlx.loadLlm`): a GGUF file held in memory,
//! its tokenizer and chat template, and generations the wrapper drives one
//! token per call (an async iterator in JavaScript, so the page stays
//! responsive between tokens). The graphs run on WebGPU (compiled and run
//! asynchronously: the page cannot block on the GPU) or the wasm CPU
//! engine, whichever the caller's device list names first and the page has.

use crate::error::{err, format_err, ir_err, rlx_err};
use rlx::Device;
use rlx_formats::GgufFile;
use rlx_models::llm::{
    ChatMessage, GenerateOptions, Generation, LlmError, LlmModel, Sampling, Steps,
};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

fn llm_err(e: LlmError) -> JsValue {
    match e {
        LlmError::Format(f) => format_err(f),
        LlmError::Tokenizer(t) => err("tokenizer", t),
        LlmError::Context { .. } => err("limit", e),
        LlmError::Options(m) => err("invalid_argument", m),
        LlmError::Model(m) => rlx_err(m),
        LlmError::Ir(i) => ir_err(i),
        other => err("format", other),
    }
}

/// `loadLlm`'s `amp`: `None` for `auto`, which each generation settles
/// by the device — f16 on WebGPU where the adapter has `shader-f16` (f16
/// storage and arithmetic, f32 accumulation), f32 elsewhere (the CPU, or
/// an adapter without it: f16 there would be held in f32 words, no
/// faster).
fn parse_amp(s: &str) -> Result<Option<rlx::Amp>, JsValue> {
    if s == "auto" {
        return Ok(None);
    }
    rlx::Amp::parse(s)
        .map(Some)
        .map_err(|m| err("invalid_argument", format!("{m} or auto")))
}

struct State {
    model: LlmModel,
    device: Device,
    /// `amp: 'auto'`, and whether a generation has settled it yet.
    auto_amp: bool,
    settled: std::cell::Cell<bool>,
    steps: RefCell<Steps>,
}

/// A loaded decoder LLM.
#[wasm_bindgen]
pub struct Llm {
    s: Option<Rc<State>>,
}

/// The first device of `devices` this page can run the model on: 'webgpu'
/// where the build has it and the browser has `navigator.gpu`, 'cpu'.
/// Every device passed over is named in the error when none is left.
fn device(devices: &[String]) -> Result<Device, JsValue> {
    let mut why = Vec::new();
    for d in devices {
        match d.as_str() {
            "cpu" => return Ok(Device::Cpu),
            "webgpu" | "gpu" => {
                #[cfg(feature = "webgpu")]
                match crate::gpu::unavailable() {
                    None => return Ok(Device::WebGpu),
                    Some(w) => why.push(format!("webgpu: {w}")),
                }
                #[cfg(not(feature = "webgpu"))]
                why.push("webgpu: not in this build".to_string());
            }
            other => why.push(format!("`{other}`: unknown device (use 'webgpu' or 'cpu')")),
        }
    }
    Err(err(
        "device",
        format!(
            "no device in [{}] can run this model: {}",
            devices.join(", "),
            why.join("; ")
        ),
    ))
}

/// A second call while a step is running (the JavaScript wrapper awaits
/// each one; this is someone calling the raw object concurrently).
fn busy() -> JsValue {
    err(
        "invalid_argument",
        "this model is busy with another step; await the previous call first",
    )
}

#[wasm_bindgen]
impl Llm {
    /// From the bytes of a GGUF file; `amp`: `auto`, `none`, `f16` or `bf16`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        gguf: Vec<u8>,
        label: &str,
        devices: Vec<String>,
        amp: &str,
    ) -> Result<Llm, JsValue> {
        let fixed = parse_amp(amp)?;
        let dev = device(&devices)?;
        let file = GgufFile::from_bytes_labeled(gguf, label).map_err(format_err)?;
        let model = LlmModel::from_gguf(&file, |_| {}).map_err(llm_err)?;
        drop(file);
        let mut steps = Steps::for_model(&model, dev);
        if let Some(a) = fixed.clone() {
            steps.set_amp(a);
        }
        Ok(Llm {
            s: Some(Rc::new(State {
                model,
                device: dev,
                auto_amp: fixed.is_none(),
                settled: std::cell::Cell::new(false),
                steps: RefCell::new(steps),
            })),
        })
    }

    fn live(&self) -> Result<Rc<State>, JsValue> {
        self.s.clone().ok_or_else(|| {
            err(
                "disposed",
                "this Llm was disposed (llm.dispose() was called); load another",
            )
        })
    }

    /// The device the graphs run on (`webgpu` or `cpu`).
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> Result<String, JsValue> {
        let s = self.live()?;
        Ok(match s.device {
            Device::WebGpu => "webgpu".into(),
            d => d.to_string(),
        })
    }

    /// The mixed precision of the graphs: `none` (f32) or `f16`/`bf16`;
    /// `auto` until the first generation settles it.
    #[wasm_bindgen(getter)]
    pub fn amp(&self) -> Result<String, JsValue> {
        let s = self.live()?;
        if s.auto_amp && !s.settled.get() {
            return Ok("auto".into());
        }
        let steps = s.steps.try_borrow().map_err(|_| busy())?;
        Ok(steps.amp().name())
    }

    /// The architecture and sizes, as JSON.
    #[wasm_bindgen(js_name = configJson)]
    pub fn config_json(&self) -> Result<String, JsValue> {
        let s = self.live()?;
        let c = &s.model.config;
        Ok(serde_json::json!({
            "name": s.model.name,
            "architecture": c.arch.name(),
            "vocabSize": c.vocab_size,
            "hidden": c.hidden,
            "layers": c.layers,
            "heads": c.heads,
            "kvHeads": c.kv_heads,
            "headDim": c.head_dim,
            "contextLength": c.context_length,
            "context": s.steps.try_borrow().map_err(|_| busy())?.limit,
            "hasChatTemplate": s.model.chat_template.is_some(),
        })
        .to_string())
    }

    /// The prompt for `messages` (JSON `[{role, content}]`) by the file's
    /// chat template.
    #[wasm_bindgen(js_name = chatPrompt)]
    pub fn chat_prompt(
        &self,
        messages: &str,
        add_generation_prompt: bool,
    ) -> Result<String, JsValue> {
        let s = self.live()?;
        let v: Vec<serde_json::Value> = serde_json::from_str(messages)
            .map_err(|e| err("invalid_argument", format!("messages: {e}")))?;
        let msgs = v
            .iter()
            .map(|m| {
                let f = |k: &str| {
                    m[k].as_str().map(str::to_string).ok_or_else(|| {
                        err(
                            "invalid_argument",
                            format!("every message needs a string `{k}`"),
                        )
                    })
                };
                Ok(ChatMessage {
                    role: f("role")?,
                    content: f("content")?,
                })
            })
            .collect::<Result<Vec<_>, JsValue>>()?;
        s.model
            .chat_prompt(&msgs, add_generation_prompt)
            .map_err(llm_err)
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, JsValue> {
        Ok(self.live()?.model.tokenizer.encode(text, add_special, true))
    }

    /// The text of token ids.
    pub fn decode(&self, ids: Vec<u32>) -> Result<String, JsValue> {
        Ok(self.live()?.model.tokenizer.decode(&ids))
    }

    /// Set the context limit (prompt + generated tokens).
    #[wasm_bindgen(js_name = setContext)]
    pub fn set_context(&self, n: u32) -> Result<(), JsValue> {
        let s = self.live()?;
        let r = s
            .steps
            .try_borrow_mut()
            .map_err(|_| busy())?
            .set_context(&s.model, n as usize);
        r.map_err(llm_err)
    }

    /// Start a generation from `prompt` (text, or token ids when `ids` is
    /// given); resolves once the prompt is prefilled (the first graphs
    /// compile here). `options` is JSON: maxTokens, temperature, topK,
    /// topP, minP, repetitionPenalty, seed, stop (strings), stopAtEos,
    /// addSpecial.
    // The steps' RefCell is held across the awaits on purpose: it is the
    // lock of this model while a step runs, and a second call meanwhile
    // gets `busy()` from `try_borrow_mut`, not a panic.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn start(
        &self,
        prompt: &str,
        ids: Option<Vec<u32>>,
        options: &str,
    ) -> Result<js_sys::Promise, JsValue> {
        let s = self.live()?;
        let opts = options_from(options)?;
        let ids = match ids {
            Some(ids) => ids,
            None => s.model.tokenizer.encode(prompt, opts.add_special, true),
        };
        Ok(future_to_promise(async move {
            // WebGPU's device first: a browser without an adapter is a
            // 'device' error here, before any work.
            #[allow(unused_mut)]
            let mut shader_f16 = false;
            #[cfg(feature = "webgpu")]
            if s.device == Device::WebGpu {
                let (ctx, _) = crate::gpu::context().await.map_err(|m| err("device", m))?;
                shader_f16 = ctx.info.shader_f16;
            }
            let g = {
                let mut steps = s.steps.try_borrow_mut().map_err(|_| busy())?;
                // A lost and re-created device may lack what the first had.
                if s.auto_amp {
                    let f16 = s.device == Device::WebGpu && shader_f16;
                    steps.set_amp(if f16 { rlx::Amp::f16() } else { rlx::Amp::None });
                    s.settled.set(true);
                }
                Generation::start_async(&s.model, &mut steps, &ids, &opts)
                    .await
                    .map_err(llm_err)?
            };
            Ok(LlmStream {
                s,
                g: Rc::new(RefCell::new(g)),
                prompt_tokens: ids.len(),
            }
            .into())
        }))
    }

    /// The dispatch report of the decode graph for the current cache
    /// capacity (JSON): which kernel runs each node of a decode step
    /// (planned only, so no executable is built for it).
    #[wasm_bindgen(js_name = decodeReport)]
    pub fn decode_report(&self, past: u32) -> Result<String, JsValue> {
        let s = self.live()?;
        let r = s
            .steps
            .try_borrow_mut()
            .map_err(|_| busy())?
            .report(&s.model, 1, past.max(1) as usize)
            .map_err(llm_err)?;
        Ok(r.to_json().to_string())
    }

    pub fn dispose(&mut self) {
        self.s = None;
    }
}

/// The generation options from their JSON.
fn options_from(options: &str) -> Result<GenerateOptions, JsValue> {
    let o: serde_json::Value = serde_json::from_str(options)
        .map_err(|e| err("invalid_argument", format!("options: {e}")))?;
    let num = |k: &str, d: f64| o[k].as_f64().unwrap_or(d);
    Ok(GenerateOptions {
        max_tokens: num("maxTokens", 128.0) as usize,
        sampling: Sampling {
            temperature: num("temperature", 0.0) as f32,
            top_k: num("topK", 0.0) as usize,
            top_p: num("topP", 1.0) as f32,
            min_p: num("minP", 0.0) as f32,
            repetition_penalty: num("repetitionPenalty", 1.0) as f32,
            seed: num("seed", 0.0) as u64,
        },
        stop: o["stop"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        stop_at_eos: o["stopAtEos"].as_bool().unwrap_or(true),
        add_special: o["addSpecial"].as_bool().unwrap_or(true),
    })
}

/// One generation in progress.
#[wasm_bindgen]
pub struct LlmStream {
    s: Rc<State>,
    g: Rc<RefCell<Generation>>,
    prompt_tokens: usize,
}

#[wasm_bindgen]
impl LlmStream {
    /// Resolves to the next token as `{id, text}`, or `null` when the
    /// generation ended.
    // Both RefCells are held across the await on purpose (see `start`).
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn next(&self) -> js_sys::Promise {
        let (s, g) = (self.s.clone(), self.g.clone());
        future_to_promise(async move {
            let mut steps = s.steps.try_borrow_mut().map_err(|_| busy())?;
            let mut g = g.try_borrow_mut().map_err(|_| busy())?;
            match g
                .next_token_async(&s.model, &mut steps)
                .await
                .map_err(llm_err)?
            {
                None => Ok(JsValue::NULL),
                Some(t) => {
                    let o = js_sys::Object::new();
                    js_sys::Reflect::set(&o, &"id".into(), &t.id.into())?;
                    js_sys::Reflect::set(&o, &"text".into(), &t.text.into())?;
                    Ok(o.into())
                }
            }
        })
    }

    /// Why the generation ended (`length`, `eos`, `stop`, `context`), or
    /// `null` while it runs.
    #[wasm_bindgen(getter, js_name = finishReason)]
    pub fn finish_reason(&self) -> Result<Option<String>, JsValue> {
        let g = self.g.try_borrow().map_err(|_| busy())?;
        Ok(g.finish_reason().map(|f| f.name().to_string()))
    }

    /// The text generated so far.
    #[wasm_bindgen(getter)]
    pub fn text(&self) -> Result<String, JsValue> {
        Ok(self.g.try_borrow().map_err(|_| busy())?.text().to_string())
    }

    /// Tokens in the prompt.
    #[wasm_bindgen(getter, js_name = promptTokens)]
    pub fn prompt_tokens(&self) -> u32 {
        self.prompt_tokens as u32
    }
}
