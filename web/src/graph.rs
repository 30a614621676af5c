//! The JS graph builder and graph handle. Values are small integer ids;
//! the npm wrapper wraps them in fluent `Tensor` objects. Attributes come
//! as JSON and are converted with the op's schema, so `{axis: -1}` becomes
//! an int and `{eps: 1}` a float where the op declares a float.

use crate::error::{err, ir_err};
use crate::tensors::{from_js, parse_dtype, shape_of};
use rlx_ir::attr::{Attr, AttrKind};
use rlx_ir::graph::{GraphBuilder as IrBuilder, ValueId};
use rlx_ir::{Attrs, Graph as IrGraph, HostTensor, TensorType};
use serde_json::Value;
use wasm_bindgen::prelude::*;

/// Convert one JSON attribute to the kind the op's schema declares.
fn attr_of(op: &str, name: &str, kind: AttrKind, v: &Value) -> Result<Attr, String> {
    let bad = || format!("op `{op}`: attribute `{name}` must be {kind:?}, got {v}");
    let ints =
        |v: &Value| -> Option<Vec<i64>> { v.as_array()?.iter().map(Value::as_i64).collect() };
    Ok(match kind {
        AttrKind::Bool => Attr::Bool(v.as_bool().ok_or_else(bad)?),
        AttrKind::Int => Attr::Int(v.as_i64().ok_or_else(bad)?),
        AttrKind::Float => Attr::Float(v.as_f64().ok_or_else(bad)?),
        AttrKind::Str => Attr::Str(v.as_str().ok_or_else(bad)?.to_string()),
        AttrKind::Ints => Attr::Ints(ints(v).ok_or_else(bad)?),
        AttrKind::Floats => Attr::Floats(
            v.as_array()
                .and_then(|a| a.iter().map(Value::as_f64).collect())
                .ok_or_else(bad)?,
        ),
        AttrKind::DType => Attr::DType(v.as_str().ok_or_else(bad)?.parse()?),
        AttrKind::Tensor => Attr::Tensor(HostTensor::from_json(v).map_err(|e| e.to_string())?),
        AttrKind::Graph => Attr::Graph(Box::new(IrGraph::from_json(v).map_err(|e| e.to_string())?)),
    })
}

/// Attributes from a JSON object, checked against `op`'s schema.
pub fn attrs_from_json(op: &str, json: &str) -> Result<Attrs, JsValue> {
    let def = rlx_ir::op::lookup(op).ok_or_else(|| {
        err(
            "graph",
            format!("unknown op `{op}` (rlx.ops() lists every op)"),
        )
    })?;
    let v: Value = if json.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(json)
            .map_err(|e| err("graph", format!("op `{op}`: attributes are not JSON: {e}")))?
    };
    let obj = v
        .as_object()
        .ok_or_else(|| err("graph", format!("op `{op}`: attributes must be an object")))?;
    let mut attrs = Attrs::new();
    for (k, val) in obj {
        let spec = def.attrs.iter().find(|a| a.name == k).ok_or_else(|| {
            let names: Vec<_> = def.attrs.iter().map(|a| a.name).collect();
            err(
                "graph",
                format!(
                    "op `{op}` has no attribute `{k}` (it has: {})",
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ),
            )
        })?;
        attrs.set(
            k,
            attr_of(op, k, spec.kind, val).map_err(|m| err("graph", m))?,
        );
    }
    Ok(attrs)
}

/// Builds a graph node by node (types are inferred as it goes).
#[wasm_bindgen]
pub struct GraphBuilder {
    b: Option<IrBuilder>,
}

fn type_json(t: &TensorType) -> String {
    serde_json::json!({"dtype": t.dtype.name(), "shape": t.shape.dims()}).to_string()
}

impl GraphBuilder {
    fn b(&mut self) -> Result<&mut IrBuilder, JsValue> {
        self.b
            .as_mut()
            .ok_or_else(|| err("disposed", "this GraphBuilder already finished its graph"))
    }
    fn id(&mut self, v: u32) -> Result<ValueId, JsValue> {
        let n = self.b()?.graph().values.len();
        if (v as usize) < n {
            Ok(ValueId(v))
        } else {
            Err(err(
                "graph",
                format!("value %{v} does not belong to this builder"),
            ))
        }
    }
}

#[wasm_bindgen]
impl GraphBuilder {
    #[wasm_bindgen(constructor)]
    pub fn new(name: &str) -> GraphBuilder {
        GraphBuilder {
            b: Some(IrBuilder::new(name)),
        }
    }

    /// A graph input; returns its value id. `shape` comes as numbers
    /// (a `Float64Array`) so that a negative or fractional dimension is
    /// refused here instead of wrapping on the way in.
    pub fn input(&mut self, name: &str, dtype: &str, shape: Vec<f64>) -> Result<u32, JsValue> {
        let shape = shape_of(&format!("input `{name}`"), &shape)?;
        let ty = TensorType::new(parse_dtype(dtype)?, shape);
        rlx_ir::graph::check_size(&ty).map_err(|m| err("graph", format!("input `{name}`: {m}")))?;
        Ok(self.b()?.input(name, ty).0)
    }

    /// A constant from a typed array (`shape` as numbers, as for `input`).
    pub fn constant(
        &mut self,
        dtype: &str,
        shape: Vec<f64>,
        data: JsValue,
    ) -> Result<u32, JsValue> {
        let shape = shape_of("constant", &shape)?;
        let t = from_js("constant", parse_dtype(dtype)?, &shape, &data)?;
        self.b()?.constant(t).map(|v| v.0).map_err(ir_err)
    }

    /// Apply a registered op; `origin` (e.g. the JS call site) is recorded
    /// on the node and shown by the playground. Returns the output ids.
    pub fn op(
        &mut self,
        op: &str,
        inputs: Vec<u32>,
        attrs_json: &str,
        origin: Option<String>,
    ) -> Result<Vec<u32>, JsValue> {
        let ids = inputs
            .iter()
            .map(|&v| self.id(v))
            .collect::<Result<Vec<_>, _>>()?;
        let attrs = attrs_from_json(op, attrs_json)?;
        let b = self.b()?;
        b.set_origin(origin);
        let out = b.op(op, &ids, attrs);
        b.set_origin(None);
        Ok(out.map_err(ir_err)?.into_iter().map(|v| v.0).collect())
    }

    /// `{"dtype", "shape"}` of a value, as JSON.
    #[wasm_bindgen(js_name = typeOf)]
    pub fn type_of(&mut self, v: u32) -> Result<String, JsValue> {
        let id = self.id(v)?;
        Ok(type_json(self.b()?.ty(id)))
    }

    /// Finish with these outputs; the builder cannot be used afterwards.
    pub fn finish(&mut self, outputs: Vec<u32>) -> Result<Graph, JsValue> {
        let ids = outputs
            .iter()
            .map(|&v| self.id(v))
            .collect::<Result<Vec<_>, _>>()?;
        let b = self
            .b
            .take()
            .ok_or_else(|| err("disposed", "already finished"))?;
        Ok(Graph {
            g: b.finish(&ids).map_err(ir_err)?,
        })
    }
}

/// A verified MIR graph.
#[wasm_bindgen]
pub struct Graph {
    pub(crate) g: IrGraph,
}

fn io_json(g: &IrGraph, ids: &[ValueId]) -> String {
    let rows: Vec<Value> = ids
        .iter()
        .map(|&v| {
            let t = &g.values[v.index()].ty;
            serde_json::json!({
                "name": g.values[v.index()].name.clone().unwrap_or_else(|| format!("%{}", v.0)),
                "dtype": t.dtype.name(),
                "shape": t.shape.dims(),
            })
        })
        .collect();
    Value::Array(rows).to_string()
}

#[wasm_bindgen]
impl Graph {
    /// Parse the rlx text format.
    #[wasm_bindgen(js_name = fromText)]
    pub fn from_text(text: &str) -> Result<Graph, JsValue> {
        Ok(Graph {
            g: rlx_ir::text::parse(text).map_err(ir_err)?,
        })
    }

    /// Import an ONNX model (or a `.rten` model: its bytes begin `RTEN`). `dims`: JSON `{name: size}` for symbolic
    /// dimensions; `shapes`: JSON `{input: [sizes]}` for whole input shapes;
    /// `external`: `{location: Uint8Array}`, the files of tensors saved as
    /// external data.
    #[wasm_bindgen(js_name = fromOnnx)]
    pub fn from_onnx(
        bytes: &[u8],
        dims: Option<String>,
        shapes: Option<String>,
        external: Option<js_sys::Object>,
    ) -> Result<Graph, JsValue> {
        let mut opts = rlx_onnx::ImportOptions::default();
        if let Some(files) = external {
            let mut map = std::collections::HashMap::new();
            for pair in js_sys::Object::entries(&files).iter() {
                let pair = js_sys::Array::from(&pair);
                let name = pair.get(0).as_string().unwrap_or_default();
                map.insert(name, js_sys::Uint8Array::new(&pair.get(1)).to_vec());
            }
            opts.external = Some(rlx_onnx::ExternalData::from_files(map));
        }
        if let Some(d) = dims {
            opts.dims = serde_json::from_str(&d)
                .map_err(|e| err("invalid_argument", format!("Graph.fromOnnx: `dims`: {e}")))?;
        }
        if let Some(s) = shapes {
            opts.shapes = serde_json::from_str(&s)
                .map_err(|e| err("invalid_argument", format!("Graph.fromOnnx: `shapes`: {e}")))?;
        }
        // .rten bytes (RTEN magic) go through the same op mapping.
        let m = if rlx_onnx::is_rten(bytes) {
            rlx_onnx::import_rten(bytes, &opts)
        } else {
            rlx_onnx::import(bytes, &opts)
        };
        let m = m.map_err(|e| {
            let code = match &e {
                rlx_onnx::OnnxError::Unsupported(_) => "unsupported",
                rlx_onnx::OnnxError::Ir(rlx_ir::IrError::Limit(_)) => "limit",
                rlx_onnx::OnnxError::Ir(_) => "graph",
                _ => "format",
            };
            err(code, format!("Graph.fromOnnx: {e}"))
        })?;
        Ok(Graph { g: m.graph })
    }

    /// The files an ONNX model's external-data tensors live in (relative
    /// locations, first use first): what to fetch before `fromOnnx`.
    #[wasm_bindgen(js_name = onnxExternalFiles)]
    pub fn onnx_external_files(bytes: &[u8]) -> Result<Vec<String>, JsValue> {
        rlx_onnx::external_files(bytes)
            .map_err(|e| err("format", format!("Graph.onnxExternalFiles: {e}")))
    }

    /// Read the JSON form (`json()`).
    #[wasm_bindgen(js_name = fromJson)]
    pub fn from_json(json: &str) -> Result<Graph, JsValue> {
        let v: Value =
            serde_json::from_str(json).map_err(|e| err("parse", format!("graph JSON: {e}")))?;
        Ok(Graph {
            g: IrGraph::from_json(&v).map_err(ir_err)?,
        })
    }

    pub fn text(&self) -> String {
        rlx_ir::text::print(&self.g)
    }

    pub fn json(&self) -> String {
        self.g.to_json().to_string()
    }

    pub fn name(&self) -> String {
        self.g.name.clone()
    }

    /// `[{name, dtype, shape}]` of the inputs, as JSON.
    pub fn inputs(&self) -> String {
        io_json(&self.g, &self.g.inputs)
    }

    pub fn outputs(&self) -> String {
        io_json(&self.g, &self.g.outputs)
    }
}

impl Graph {
    pub fn inner(&self) -> &IrGraph {
        &self.g
    }
}
