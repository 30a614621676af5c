//! Host tensors ↔ JS typed arrays. Each dtype has one array type (f16 and
//! bf16 travel as their bits in a `Uint16Array`, bool as 0/1 bytes, c64 as
//! interleaved re/im in a `Float32Array`); i64 also accepts an `Int32Array`
//! (token ids are usually built that way) and widens it.

use crate::error::err;
use half::{bf16, f16};
use js_sys::{Array, Object, Reflect};
use rlx_ir::tensor::TensorData;
use rlx_ir::{DType, HostTensor};
use wasm_bindgen::{JsCast, JsValue};

pub fn parse_dtype(s: &str) -> Result<DType, JsValue> {
    s.parse::<DType>().map_err(|e| err("dtype", e))
}

/// A shape from JS numbers: every dimension an integer in
/// `0..=usize::MAX` (2^32 - 1 in wasm32). Anything else — negative,
/// fractional, NaN, infinite, too large — is an error with code `shape`
/// naming `what`, the shape and the dimension, where a `Uint32Array` would
/// have wrapped it silently.
pub fn shape_of(what: &str, dims: &[f64]) -> Result<Vec<usize>, JsValue> {
    dims.iter()
        .enumerate()
        .map(|(i, &d)| {
            if d.is_finite() && d >= 0.0 && d.fract() == 0.0 && d <= usize::MAX as f64 {
                Ok(d as usize)
            } else {
                let shown: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
                Err(err(
                    "shape",
                    format!(
                        "{what}: shape [{}]: dimension {i} is {d}; every dimension must be an integer from 0 to {}",
                        shown.join(", "),
                        usize::MAX
                    ),
                ))
            }
        })
        .collect()
}

/// The name of the JS typed array that carries `dtype`.
pub fn array_kind(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 | DType::C64 => "Float32Array",
        DType::F64 => "Float64Array",
        DType::I32 => "Int32Array",
        DType::I64 => "BigInt64Array",
        DType::I16 => "Int16Array",
        DType::U16 => "Uint16Array",
        DType::U32 => "Uint32Array",
        DType::U64 => "BigUint64Array",
        DType::I8 => "Int8Array",
        DType::U8 | DType::Bool => "Uint8Array",
        DType::F16 | DType::BF16 => "Uint16Array",
        _ => "Uint8Array (packed blocks)",
    }
}

fn wrong(what: &str, dtype: DType, data: &JsValue) -> JsValue {
    let got = data
        .dyn_ref::<Object>()
        .map(|o| o.constructor().name().as_string().unwrap_or_default())
        .unwrap_or_else(|| format!("{:?}", data.js_typeof().as_string()));
    err(
        "input",
        format!(
            "{what}: dtype {dtype} needs a {}, got {got}",
            array_kind(dtype)
        ),
    )
}

/// Build a host tensor from a typed array (copied into wasm memory).
pub fn from_js(
    what: &str,
    dtype: DType,
    shape: &[usize],
    data: &JsValue,
) -> Result<HostTensor, JsValue> {
    macro_rules! arr {
        ($t:ty) => {
            data.dyn_ref::<$t>()
                .map(|a| a.to_vec())
                .ok_or_else(|| wrong(what, dtype, data))?
        };
    }
    let d = match dtype {
        DType::F32 => TensorData::F32(arr!(js_sys::Float32Array)),
        DType::F64 => TensorData::F64(arr!(js_sys::Float64Array)),
        DType::I32 => TensorData::I32(arr!(js_sys::Int32Array)),
        DType::I64 => match data.dyn_ref::<js_sys::Int32Array>() {
            Some(a) => TensorData::I64(a.to_vec().into_iter().map(i64::from).collect()),
            None => TensorData::I64(arr!(js_sys::BigInt64Array)),
        },
        DType::I16 => TensorData::I16(arr!(js_sys::Int16Array)),
        DType::U16 => TensorData::U16(arr!(js_sys::Uint16Array)),
        DType::U32 => TensorData::U32(arr!(js_sys::Uint32Array)),
        DType::U64 => TensorData::U64(arr!(js_sys::BigUint64Array)),
        DType::I8 => TensorData::I8(arr!(js_sys::Int8Array)),
        DType::U8 => TensorData::U8(arr!(js_sys::Uint8Array)),
        DType::Bool => TensorData::Bool(
            arr!(js_sys::Uint8Array)
                .into_iter()
                .map(|b| b != 0)
                .collect(),
        ),
        DType::F16 => TensorData::F16(
            arr!(js_sys::Uint16Array)
                .into_iter()
                .map(f16::from_bits)
                .collect(),
        ),
        DType::BF16 => TensorData::BF16(
            arr!(js_sys::Uint16Array)
                .into_iter()
                .map(bf16::from_bits)
                .collect(),
        ),
        DType::C64 => {
            let v = arr!(js_sys::Float32Array);
            if v.len() % 2 != 0 {
                return Err(err(
                    "input",
                    format!("{what}: c64 data needs re/im pairs, got {} floats", v.len()),
                ));
            }
            TensorData::C64(v.chunks(2).map(|c| [c[0], c[1]]).collect())
        }
        _ => TensorData::Packed(arr!(js_sys::Uint8Array)),
    };
    HostTensor::new(dtype, shape.to_vec(), d).map_err(|e| err("input", format!("{what}: {e}")))
}

/// The typed array holding a tensor's elements (a copy out of wasm memory).
pub fn data_to_js(t: &HostTensor) -> JsValue {
    match t.data() {
        TensorData::F32(v) => js_sys::Float32Array::from(&v[..]).into(),
        TensorData::F64(v) => js_sys::Float64Array::from(&v[..]).into(),
        TensorData::I32(v) => js_sys::Int32Array::from(&v[..]).into(),
        TensorData::I64(v) => js_sys::BigInt64Array::from(&v[..]).into(),
        TensorData::I16(v) => js_sys::Int16Array::from(&v[..]).into(),
        TensorData::U16(v) => js_sys::Uint16Array::from(&v[..]).into(),
        TensorData::U32(v) => js_sys::Uint32Array::from(&v[..]).into(),
        TensorData::U64(v) => js_sys::BigUint64Array::from(&v[..]).into(),
        TensorData::I8(v) => js_sys::Int8Array::from(&v[..]).into(),
        TensorData::U8(v) | TensorData::Packed(v) => js_sys::Uint8Array::from(&v[..]).into(),
        TensorData::Bool(v) => {
            let b: Vec<u8> = v.iter().map(|&x| x as u8).collect();
            js_sys::Uint8Array::from(&b[..]).into()
        }
        TensorData::F16(v) => {
            let b: Vec<u16> = v.iter().map(|x| x.to_bits()).collect();
            js_sys::Uint16Array::from(&b[..]).into()
        }
        TensorData::BF16(v) => {
            let b: Vec<u16> = v.iter().map(|x| x.to_bits()).collect();
            js_sys::Uint16Array::from(&b[..]).into()
        }
        TensorData::C64(v) => {
            let f: Vec<f32> = v.iter().flat_map(|c| [c[0], c[1]]).collect();
            js_sys::Float32Array::from(&f[..]).into()
        }
    }
}

/// `{name, dtype, shape, data}`.
pub fn to_js(name: &str, t: &HostTensor) -> JsValue {
    let o = Object::new();
    let shape: Array = t
        .shape()
        .dims()
        .iter()
        .map(|&d| JsValue::from(d as f64))
        .collect();
    let _ = Reflect::set(&o, &"name".into(), &name.into());
    let _ = Reflect::set(&o, &"dtype".into(), &t.dtype().name().into());
    let _ = Reflect::set(&o, &"shape".into(), &shape);
    let _ = Reflect::set(&o, &"data".into(), &data_to_js(t));
    o.into()
}
