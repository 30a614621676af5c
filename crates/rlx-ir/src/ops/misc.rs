//! Constants, ranges, identity, gradient stops, and (de)quantization.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::op::{Arity::*, Category as C, Grad::*};

fn constant(cx: &InferCx) -> R {
    let t = cx.attrs.tensor("value").map_err(|e| e.to_string())?;
    one(TensorType::new(t.dtype(), t.shape().clone()))
}

fn arange(cx: &InferCx) -> R {
    let dt = cx.attrs.dtype("dtype").map_err(|e| e.to_string())?;
    if !dt.is_numeric() {
        return Err(format!("dtype must be numeric, got {dt}"));
    }
    let n = int(cx, "len")?;
    if n < 0 {
        return Err("len must be >= 0".into());
    }
    one(TensorType::new(dt, vec![n as usize]))
}

fn quantize(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let to = cx.attrs.dtype("dtype").map_err(|e| e.to_string())?;
    if !to.is_quantized() || matches!(to, DType::I4 | DType::U4) {
        return Err(format!("dtype must be a block-quantized type, got {to}"));
    }
    if to.storage_bytes(*x.dims().last().unwrap_or(&0)).is_none() || x.rank() == 0 {
        return Err(format!(
            "the last axis of {} is not a whole number of {to} blocks",
            x.shape
        ));
    }
    one(TensorType::new(to, x.shape.clone()))
}

fn dequantize(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    if !x.dtype.is_quantized() {
        return Err(format!("input must be a quantized type, got {}", x.dtype));
    }
    let to = cx.attrs.dtype("dtype").map_err(|e| e.to_string())?;
    if !to.is_float() {
        return Err(format!("dtype must be a float type, got {to}"));
    }
    one(TensorType::new(to, x.shape.clone()))
}

pub static MISC: &[OpDef] = &[
    def(
        "constant",
        C::Misc,
        Exact(0),
        &[],
        &[attr("value", K::Tensor, D::Required)],
        constant,
        None,
        NotDifferentiable,
        "a literal tensor",
    ),
    def(
        "arange",
        C::Misc,
        Exact(0),
        &[],
        &[
            attr("start", K::Float, D::Float(0.0)),
            attr("step", K::Float, D::Float(1.0)),
            attr("len", K::Int, D::Required),
            attr("dtype", K::DType, D::DType(DType::I64)),
        ],
        arange,
        None,
        NotDifferentiable,
        "start + i·step for i in 0..len",
    ),
    with_view(
    def(
        "identity",
        C::Misc,
        Exact(1),
        &[],
        &[],
        same,
        None,
        Differentiable,
        "the input, unchanged",
    ),
    view::same),
    def(
        "transfer",
        C::Misc,
        Exact(1),
        &[],
        &[attr("to", K::Str, D::Required)],
        same,
        None,
        Differentiable,
        "copy to device `to`; the legalizer inserts these so every host↔device move is a visible node",
    ),
    with_view(
    def(
        "stop_gradient",
        C::Misc,
        Exact(1),
        &[],
        &[],
        same,
        None,
        NotDifferentiable,
        "the input, unchanged, but no gradient flows through it",
    ),
    view::same),
    def(
        "quantize",
        C::Quant,
        Exact(1),
        &[DType::F32],
        &[attr("dtype", K::DType, D::Required)],
        quantize,
        None,
        NotDifferentiable,
        "encode f32 rows into GGUF / MX blocks (round to nearest as the reference encoders do)",
    ),
    def(
        "dequantize",
        C::Quant,
        Exact(1),
        DType::PACKED,
        &[attr("dtype", K::DType, D::DType(DType::F32))],
        dequantize,
        None,
        NotDifferentiable,
        "decode GGUF / MX blocks (or packed 4-bit integers) to floats",
    ),
];
