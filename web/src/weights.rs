//! Weights loaded from a safetensors file held in memory (the wrapper
//! fetches it: ArrayBuffer, Response or URL). Tensors are shared, not
//! copied, by every model compiled with them.

use crate::error::{err, format_err};
use crate::tensors::to_js;
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

    /// Another handle to the same tensors (the wrapper passes one to
    /// `compile`, which takes ownership of its argument).
    pub fn share(&self) -> Weights {
        Weights {
            tensors: self.tensors.clone(),
            label: self.label.clone(),
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
