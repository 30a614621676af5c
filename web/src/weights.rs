//! Weights loaded from a safetensors or GGUF file held in memory (the
//! wrapper fetches it: ArrayBuffer, Response or URL). Tensors are shared,
//! not copied, by every model compiled with them. GGUF files keep their
//! metadata (architecture, hyperparameters, tokenizer) and their block
//! types (q4_0, q4_k, … as packed bytes).

use crate::error::{err, format_err};
use crate::tensors::to_js;
use rlx_formats::gguf::{GgufFile, Value};
use rlx_formats::SafetensorsFile;
use rlx_ir::HostTensor;
use std::collections::BTreeMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

type Map = BTreeMap<String, Rc<HostTensor>>;

/// Named tensors.
#[wasm_bindgen]
pub struct Weights {
    tensors: Rc<Map>,
    label: Rc<str>,
    /// A GGUF file's metadata as JSON (`None` for safetensors).
    metadata: Option<Rc<str>>,
}

/// A GGUF metadata value as JSON: numbers, booleans, strings and arrays as
/// such (u64/i64 beyond 2^53 lose precision in JavaScript numbers).
fn value_json(v: &Value) -> serde_json::Value {
    use serde_json::json;
    match v {
        Value::U8(x) => json!(x),
        Value::I8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        Value::F32(x) => json!(x),
        Value::F64(x) => json!(x),
        Value::Bool(x) => json!(x),
        Value::String(x) => json!(x),
        Value::Array(_, items) => serde_json::Value::Array(items.iter().map(value_json).collect()),
    }
}

impl Weights {
    pub fn from_file(file: &SafetensorsFile) -> Result<Weights, JsValue> {
        let tensors = file
            .tensors()
            .map_err(format_err)?
            .into_iter()
            .map(|(n, t)| (n, Rc::new(t)))
            .collect();
        Ok(Weights {
            tensors: Rc::new(tensors),
            label: file.label().into(),
            metadata: None,
        })
    }

    /// Every tensor of a GGUF file (block types stay packed) and its
    /// metadata. A tensor of a type rlx holds only as bytes (IQ*, TQ*) is
    /// a format error naming it.
    pub fn from_gguf_file(file: &GgufFile) -> Result<Weights, JsValue> {
        let mut tensors = Map::new();
        for t in file.tensors() {
            tensors.insert(
                t.name.clone(),
                Rc::new(file.tensor(&t.name).map_err(format_err)?),
            );
        }
        let meta: serde_json::Map<String, serde_json::Value> = file
            .metadata()
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect();
        Ok(Weights {
            tensors: Rc::new(tensors),
            label: file.label().into(),
            metadata: Some(serde_json::Value::Object(meta).to_string().into()),
        })
    }
    /// The tensor named `name`, shared.
    pub fn shared(&self, name: &str) -> Option<Rc<HostTensor>> {
        self.tensors.get(name).cloned()
    }
    pub fn label(&self) -> &str {
        &self.label
    }
}

#[wasm_bindgen]
impl Weights {
    /// Parse safetensors bytes; `label` (the URL or file name) names the
    /// file in every error.
    #[wasm_bindgen(js_name = fromSafetensors)]
    pub fn from_safetensors(bytes: Vec<u8>, label: &str) -> Result<Weights, JsValue> {
        let file = SafetensorsFile::from_bytes_labeled(bytes, label).map_err(format_err)?;
        Weights::from_file(&file)
    }

    /// Parse GGUF bytes; `label` names the file in every error.
    #[wasm_bindgen(js_name = fromGguf)]
    pub fn from_gguf(bytes: Vec<u8>, label: &str) -> Result<Weights, JsValue> {
        let file = GgufFile::from_bytes_labeled(bytes, label).map_err(format_err)?;
        Weights::from_gguf_file(&file)
    }

    /// A GGUF file's metadata as JSON (`{}` for safetensors weights).
    #[wasm_bindgen(js_name = metadataJson)]
    pub fn metadata_json(&self) -> String {
        self.metadata.as_deref().unwrap_or("{}").to_string()
    }

    /// Another handle to the same tensors (the wrapper passes one to
    /// `compile`, which takes ownership of its argument).
    pub fn share(&self) -> Weights {
        Weights {
            tensors: self.tensors.clone(),
            label: self.label.clone(),
            metadata: self.metadata.clone(),
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }

    /// `{"dtype", "shape"}` as JSON.
    pub fn info(&self, name: &str) -> Result<String, JsValue> {
        let t = self.get_tensor(name)?;
        Ok(serde_json::json!({"dtype": t.dtype().name(), "shape": t.shape().dims()}).to_string())
    }

    /// `{name, dtype, shape, data}` (a copy).
    pub fn get(&self, name: &str) -> Result<JsValue, JsValue> {
        Ok(to_js(name, self.get_tensor(name)?))
    }

    /// Bytes held.
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.tensors
            .values()
            .map(|t| t.dtype().storage_bytes(t.numel()).unwrap_or(0) as f64)
            .sum()
    }
}

impl Weights {
    fn get_tensor(&self, name: &str) -> Result<&HostTensor, JsValue> {
        self.tensors.get(name).map(|t| t.as_ref()).ok_or_else(|| {
            err(
                "input",
                format!(
                    "{}: no tensor named `{name}` ({} tensors)",
                    self.label,
                    self.tensors.len()
                ),
            )
        })
    }
}
