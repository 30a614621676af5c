//! The sentence-embedding pipeline (`rlx.pipelines.embed`): MiniLM's
//! tokenizer and encoder with masked mean pooling and L2 normalization,
//! compiled per (batch, padded length) on the chosen device chain and
//! cached. The same batching as the native `SentenceEmbedder::embed`:
//! texts sorted by length, 16 per batch, lengths rounded up to 16.

use crate::error::{embed_err, err, format_err};
use crate::model::{compile_inner, options, run_inner, Inner};
use rlx_formats::SafetensorsFile;
use rlx_ir::HostTensor;
use rlx_models::SentenceEmbedder;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

struct State {
    e: SentenceEmbedder,
    weights: Vec<Rc<HostTensor>>,
    devices: Vec<String>,
    compiled: RefCell<HashMap<(usize, usize), Rc<Inner>>>,
}

/// A loaded embedding model.
#[wasm_bindgen]
pub struct Embedder {
    s: Option<Rc<State>>,
}

#[wasm_bindgen]
impl Embedder {
    /// From the model's files: `config.json`, `sentence_bert_config.json`
    /// (optional), `tokenizer.json` as text, `model.safetensors` as bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(
        config: &str,
        sentence_bert_config: Option<String>,
        tokenizer: &str,
        safetensors: Vec<u8>,
        label: &str,
        devices: Vec<String>,
    ) -> Result<Embedder, JsValue> {
        let file = SafetensorsFile::from_bytes_labeled(safetensors, label).map_err(format_err)?;
        let mut e = SentenceEmbedder::from_parts(
            config,
            sentence_bert_config.as_deref(),
            tokenizer,
            &file,
            |_| {},
        )
        .map_err(embed_err)?;
        drop(file);
        let weights = e.take_weights().into_iter().map(Rc::new).collect();
        Ok(Embedder {
            s: Some(Rc::new(State {
                e,
                weights,
                devices,
                compiled: RefCell::new(HashMap::new()),
            })),
        })
    }

    /// Embed texts; resolves to an array of `Float32Array` (one per text,
    /// L2-normalized).
    pub fn embed(&self, texts: Vec<String>) -> Result<js_sys::Promise, JsValue> {
        let s = self.s.clone().ok_or_else(|| {
            err(
                "disposed",
                "this Embedder was disposed (embedder.dispose() was called); create another",
            )
        })?;
        Ok(future_to_promise(async move {
            let refs: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
            let mut lens = Vec::with_capacity(refs.len());
            for t in &refs {
                lens.push(s.e.token_ids(t).map_err(embed_err)?.len());
            }
            let mut order: Vec<usize> = (0..refs.len()).collect();
            order.sort_by_key(|&i| lens[i]);
            let mut out = vec![Vec::new(); refs.len()];
            for chunk in order.chunks(s.e.batch_size.max(1)) {
                let batch: Vec<&str> = chunk.iter().map(|&i| refs[i]).collect();
                let [ids, mask, types] = s.e.encode(&batch).map_err(embed_err)?;
                let (b, n) = (ids.shape().dims()[0], ids.shape().dims()[1]);
                let m = model_for(&s, b, n).await?;
                let outs = run_inner(&m, vec![ids, mask, types]).await?;
                for (&i, v) in chunk.iter().zip(s.e.pooled(&outs).map_err(embed_err)?) {
                    out[i] = v;
                }
            }
            let arr = js_sys::Array::new();
            for v in out {
                arr.push(&js_sys::Float32Array::from(&v[..]));
            }
            Ok(arr.into())
        }))
    }

    /// The device of the most recently compiled shape (`webgpu`/`cpu`).
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        self.last(|m| m.device_name().to_string())
            .unwrap_or_default()
    }

    /// The dispatch report of the most recently compiled shape (JSON).
    #[wasm_bindgen(js_name = dispatchReport)]
    pub fn dispatch_report(&self) -> String {
        self.last(|m| m.report_json())
            .unwrap_or_else(|| "null".into())
    }

    pub fn dispose(&mut self) {
        self.s = None;
    }
}

impl Embedder {
    fn last<T>(&self, f: impl Fn(&Inner) -> T) -> Option<T> {
        let s = self.s.as_ref()?;
        let c = s.compiled.borrow();
        c.values().max_by_key(|m| m.serial()).map(|m| f(m))
    }
}

async fn model_for(s: &Rc<State>, b: usize, n: usize) -> Result<Rc<Inner>, JsValue> {
    if let Some(m) = s.compiled.borrow().get(&(b, n)) {
        return Ok(m.clone());
    }
    let g = s.e.bert().graph(b, n).map_err(|e| err("graph", e))?;
    let mut bound = vec![None, None, None];
    bound.extend(s.weights.iter().cloned().map(Some));
    let inner = compile_inner(g, s.devices.clone(), options(None, true, None)?, bound).await?;
    let m = Rc::new(inner);
    s.compiled.borrow_mut().insert((b, n), m.clone());
    Ok(m)
}

/// The BERT encoder graph for (batch, seq) from a `config.json` (for
/// `rlx.models.bert`): inputs `input_ids`, `attention_mask`,
/// `token_type_ids`, then the parameters by checkpoint name.
#[wasm_bindgen(js_name = bertGraph)]
pub fn bert_graph(
    config: &str,
    batch: u32,
    seq: u32,
    pooling: bool,
) -> Result<crate::graph::Graph, JsValue> {
    let cfg = rlx_models::bert::BertConfig::from_json(config).map_err(crate::error::ir_err)?;
    let g = rlx_models::bert::Bert::new(cfg, pooling)
        .graph(batch as usize, seq as usize)
        .map_err(crate::error::ir_err)?;
    Ok(crate::graph::Graph { g })
}
