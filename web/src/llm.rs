//! Decoder LLMs in the page (`rlx.loadLlm`): a GGUF file held in memory,
//! its tokenizer and chat template, and generations the wrapper drives one
//! token per call (an async iterator in JavaScript, so the page stays
//! responsive between tokens). The graphs run on the wasm CPU engine.

use crate::error::{err, format_err, ir_err, rlx_err};
use rlx_formats::GgufFile;
use rlx_models::llm::{
    ChatMessage, GenerateOptions, Generation, LlmError, LlmModel, Sampling, Steps,
};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

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

struct State {
    model: LlmModel,
    steps: RefCell<Steps>,
}

/// A loaded decoder LLM.
#[wasm_bindgen]
pub struct Llm {
    s: Option<Rc<State>>,
}

fn device(devices: &[String]) -> Result<rlx::Device, JsValue> {
    // The page drives the decoder's steps synchronously, which only the CPU
    // engine can; WebGPU (whose dequant_matmul kernel runs natively on
    // Vulkan) needs the steps made asynchronous first, so asking for it
    // alone is refused with that reason.
    match devices.iter().find(|d| d.as_str() == "cpu") {
        Some(_) => Ok(rlx::Device::Cpu),
        None => Err(err(
            "device",
            format!(
                "none of [{}] runs decoder LLMs in the browser build yet: its decode steps run synchronously, and WebGPU's dequant_matmul runs only asynchronously in the page; use device 'cpu'",
                devices.join(", ")
            ),
        )),
    }
}

#[wasm_bindgen]
impl Llm {
    /// From the bytes of a GGUF file.
    #[wasm_bindgen(constructor)]
    pub fn new(gguf: Vec<u8>, label: &str, devices: Vec<String>) -> Result<Llm, JsValue> {
        let dev = device(&devices)?;
        let file = GgufFile::from_bytes_labeled(gguf, label).map_err(format_err)?;
        let model = LlmModel::from_gguf(&file, |_| {}).map_err(llm_err)?;
        drop(file);
        let steps = RefCell::new(Steps::for_model(&model, dev));
        Ok(Llm {
            s: Some(Rc::new(State { model, steps })),
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
            "context": s.steps.borrow().limit,
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
        let r = s.steps.borrow_mut().set_context(&s.model, n as usize);
        r.map_err(llm_err)
    }

    /// Start a generation from `prompt` (text, or token ids when `ids` is
    /// given): the prompt is prefilled here. `options` is JSON:
    /// maxTokens, temperature, topK, topP, minP, repetitionPenalty, seed,
    /// stop (strings), stopAtEos, addSpecial.
    pub fn start(
        &self,
        prompt: &str,
        ids: Option<Vec<u32>>,
        options: &str,
    ) -> Result<LlmStream, JsValue> {
        let s = self.live()?;
        let o: serde_json::Value = serde_json::from_str(options)
            .map_err(|e| err("invalid_argument", format!("options: {e}")))?;
        let num = |k: &str, d: f64| o[k].as_f64().unwrap_or(d);
        let opts = GenerateOptions {
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
        };
        let ids = match ids {
            Some(ids) => ids,
            None => s.model.tokenizer.encode(prompt, opts.add_special, true),
        };
        let g = {
            let mut steps = s.steps.borrow_mut();
            Generation::start(&s.model, &mut steps, &ids, &opts).map_err(llm_err)?
        };
        Ok(LlmStream {
            s,
            g,
            prompt_tokens: ids.len(),
        })
    }

    /// The dispatch report of the decode graph for the current cache
    /// capacity (JSON): which kernel runs each node of a decode step.
    #[wasm_bindgen(js_name = decodeReport)]
    pub fn decode_report(&self, past: u32) -> Result<String, JsValue> {
        let s = self.live()?;
        let c = s
            .steps
            .borrow_mut()
            .compiled(&s.model, 1, past.max(1) as usize)
            .map_err(llm_err)?;
        Ok(c.dispatch_report().to_json().to_string())
    }

    pub fn dispose(&mut self) {
        self.s = None;
    }
}

/// One generation in progress.
#[wasm_bindgen]
pub struct LlmStream {
    s: Rc<State>,
    g: Generation,
    prompt_tokens: usize,
}

#[wasm_bindgen]
impl LlmStream {
    /// The next token as `{id, text}`, or `null` when the generation ended.
    #[wasm_bindgen(js_name = next)]
    pub fn next_token(&mut self) -> Result<JsValue, JsValue> {
        let mut steps = self.s.steps.borrow_mut();
        match self
            .g
            .next_token(&self.s.model, &mut steps)
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
    }

    /// Why the generation ended (`length`, `eos`, `stop`, `context`), or
    /// `null` while it runs.
    #[wasm_bindgen(getter, js_name = finishReason)]
    pub fn finish_reason(&self) -> Option<String> {
        self.g.finish_reason().map(|f| f.name().to_string())
    }

    /// The text generated so far.
    #[wasm_bindgen(getter)]
    pub fn text(&self) -> String {
        self.g.text().to_string()
    }

    /// Tokens in the prompt.
    #[wasm_bindgen(getter, js_name = promptTokens)]
    pub fn prompt_tokens(&self) -> u32 {
        self.prompt_tokens as u32
    }
}
