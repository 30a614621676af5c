//! ONNX linear quantization (int8/uint8 with a scale and a zero point)
//! as IR arithmetic: `QuantizeLinear`, `DequantizeLinear`,
//! `DynamicQuantizeLinear`, `MatMulInteger`, `ConvInteger`,
//! `QLinearMatMul`, `QLinearConv`. The IR's own quantized types are block
//! formats (GGUF, MX); these per-tensor / per-axis / blocked schemes are
//! plain integer tensors with float parameters, so they decompose.
//!
//! A matmul of 8-bit operands with a 2-D B is the IR's `matmul_integer`
//! (exact int32 accumulation where a backend has the kernel, the fast CPU
//! engine does). Other integer products (convs, batched B, zero points of
//! other shapes) are accumulated by an f32 matmul or conv: exact while
//! every partial sum stays below 2^24 (K·255·127 for K ≤ 518), and within
//! f32 rounding (relative 6e-8) beyond — what a following rescale to
//! float keeps anyway.

use super::*;
use crate::tensor::Narrow;

/// A scale or zero point broadcast against `x` (`dims`): a scalar as is,
/// a 1-D one along `axis`, a blocked one (`block` > 0, x's rank) repeated
/// `block` times along `axis` and cut to x's length.
fn param_like(
    n: &mut N,
    p: ValueId,
    dims: &[usize],
    axis: i64,
    block: i64,
) -> Result<ValueId, String> {
    let pd = n.dims(p);
    let numel: usize = pd.iter().product();
    if pd.is_empty() || (numel == 1 && block == 0) {
        return Ok(p);
    }
    let rank = dims.len();
    let a = axis_in(axis, rank, rank.saturating_sub(1))?;
    if block == 0 {
        if pd.len() != 1 || pd[0] != dims[a] {
            return Err(format!(
                "a per-axis parameter of shape {pd:?} does not fit axis {a} of {dims:?}"
            ));
        }
        let mut shape = vec![1i64; rank];
        shape[a] = dims[a] as i64;
        return n.op("reshape", &[p], Attrs::new().with("shape", shape));
    }
    if block < 0 || pd.len() != rank || pd[a] * (block as usize) < dims[a] {
        return Err(format!(
            "a blocked parameter of shape {pd:?} (block {block}) does not fit {dims:?}"
        ));
    }
    // (…, B, …) → (…, B, 1, …) → (…, B, block, …) → (…, B·block, …) → cut.
    let mut un: Vec<i64> = pd.iter().map(|&d| d as i64).collect();
    un.insert(a + 1, 1);
    let u = n.op("reshape", &[p], Attrs::new().with("shape", un.clone()))?;
    un[a + 1] = block;
    let b = n.op("broadcast", &[u], Attrs::new().with("shape", un))?;
    let mut flat: Vec<i64> = pd.iter().map(|&d| d as i64).collect();
    flat[a] *= block;
    let r = n.op("reshape", &[b], Attrs::new().with("shape", flat))?;
    n.op(
        "narrow",
        &[r],
        Attrs::new()
            .with("axis", a as i64)
            .with("start", 0i64)
            .with("len", dims[a] as i64),
    )
}

/// Input `k` as f32 broadcast against x, or `None` when absent.
fn param_f32(
    n: &mut N,
    k: usize,
    dims: &[usize],
    axis: i64,
    block: i64,
) -> Result<Option<ValueId>, String> {
    if n.name(k).is_none() {
        return Ok(None);
    }
    let p = as_f32(n, k)?;
    param_like(n, p, dims, axis, block).map(Some)
}

/// Input `k`'s values in f32: float8 bits decoded, the rest converted.
fn as_f32(n: &mut N, k: usize) -> Result<ValueId, String> {
    let v = n.v(k)?;
    match n.name(k).and_then(|s| n.cx.narrow.get(s)).copied() {
        Some(Narrow::F8(kind)) => super::float8::decode(n, v, kind),
        _ => n.cast_to(v, DType::F32),
    }
}

/// What QuantizeLinear makes: an rlx integer type, or a narrow one.
enum Quantized {
    Plain(DType),
    Narrow(Narrow),
}

/// round-half-even(v) + zp, saturated to `to`'s range (or `range`), as `to`.
fn saturate(
    n: &mut N,
    v: ValueId,
    zp: Option<ValueId>,
    to: DType,
    range: Option<(i64, i64)>,
) -> Result<ValueId, String> {
    let (lo, hi) = match range {
        Some(r) => r,
        None => to
            .int_range()
            .ok_or_else(|| format!("quantizing to {to} is not supported yet"))?,
    };
    let mut r = n.op("round", &[v], Attrs::new())?;
    if let Some(z) = zp {
        r = n.op("add", &[r, z], Attrs::new())?;
    }
    let c = n.op(
        "clamp",
        &[r],
        Attrs::new().with("min", lo as f64).with("max", hi as f64),
    )?;
    n.cast_to(c, to)
}

/// ONNX `QuantizeLinear`: saturate(round(x / scale) + zero_point); to a
/// float8 type, x / scale + zero_point converted (rounded half to even,
/// saturated unless `saturate` = 0); to 4- and 2-bit integers, clamped to
/// their range.
pub(super) fn quantize_linear(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let (axis, block) = (n.ai("axis", 1), n.ai("block_size", 0));
    let to = match n.name(2) {
        Some(z) => match n.cx.narrow.get(z).copied() {
            Some(k) => Quantized::Narrow(k),
            None => {
                let z = n.v(2)?;
                Quantized::Plain(n.cx.b.dtype(z))
            }
        },
        None => match n.attr("output_dtype").map(|a| a.i() as i32) {
            Some(t) if t != 0 => match Narrow::of(t) {
                Some(k) => Quantized::Narrow(k),
                None => Quantized::Plain(dtype_of(t)?),
            },
            _ => Quantized::Plain(DType::U8),
        },
    };
    let xf = n.cast_to(x, DType::F32)?;
    let s = param_f32(&mut n, 1, &dims, axis, block)?.ok_or("the scale is missing")?;
    let zp = param_f32(&mut n, 2, &dims, axis, block)?;
    let q = n.op("div", &[xf, s], Attrs::new())?;
    let y = match to {
        Quantized::Plain(d) => saturate(&mut n, q, zp, d, None)?,
        Quantized::Narrow(k @ Narrow::Int { bits, signed }) => {
            let (lo, hi) = if signed {
                (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
            } else {
                (0, (1i64 << bits) - 1)
            };
            saturate(&mut n, q, zp, k.storage(), Some((lo, hi)))?
        }
        Quantized::Narrow(Narrow::F8(k)) => {
            let v = match zp {
                Some(z) => n.op("add", &[q, z], Attrs::new())?,
                None => q,
            };
            let sat = n.ai("saturate", 1) != 0;
            super::float8::encode(&mut n, v, k, sat)?
        }
    };
    Ok(vec![Out::Value(y)])
}

/// ONNX `DequantizeLinear`: (x − zero_point) · scale, in the scale's type.
pub(super) fn dequantize_linear(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let (axis, block) = (n.ai("axis", 1), n.ai("block_size", 0));
    let sv = n.v(1)?;
    let out = match n.attr("output_dtype").map(|a| a.i()) {
        Some(t) if t != 0 => dtype_of(t as i32)?,
        _ => n.cx.b.dtype(sv),
    };
    let mut v = as_f32(&mut n, 0)?;
    if let Some(z) = param_f32(&mut n, 2, &dims, axis, block)? {
        v = n.op("sub", &[v, z], Attrs::new())?;
    }
    let s = param_f32(&mut n, 1, &dims, axis, block)?.ok_or("the scale is missing")?;
    let y = n.op("mul", &[v, s], Attrs::new())?;
    Ok(vec![Out::Value(n.cast_to(y, out)?)])
}

/// ONNX `DynamicQuantizeLinear`: the IR's `dynamic_quantize_linear`
/// (uint8 over [min(x, 0), max(x, 0)]; outputs y, its scale and its zero
/// point).
pub(super) fn dynamic_quantize_linear(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let x = n.cast_to(x, DType::F32)?;
    let op = rlx_ir::Op::named("dynamic_quantize_linear").map_err(|e| e.to_string())?;
    let outs =
        n.cx.b
            .push(op, &[x], Attrs::new())
            .map_err(|e| e.to_string())?;
    Ok(outs.into_iter().map(Out::Value).collect())
}

/// `v − zero point` in f32; the zero point of A (MatMul) is per row, of B
/// per column, of a conv's weight per output channel.
fn centred(n: &mut N, k: usize, zp: usize, rows: bool, conv_w: bool) -> Result<ValueId, String> {
    let v = n.v(k)?;
    let vf = n.cast_to(v, DType::F32)?;
    if n.name(zp).is_none() {
        return Ok(vf);
    }
    let z = n.v(zp)?;
    let mut z = n.cast_to(z, DType::F32)?;
    let zd = n.dims(z);
    let vd = n.dims(vf);
    let count: usize = zd.iter().product();
    if count > 1 {
        if zd.len() != 1 || vd.is_empty() {
            return Err(format!(
                "a zero point of shape {zd:?} for an operand of shape {vd:?} (a scalar or one per row, column or channel)"
            ));
        }
        let shape: Vec<i64> = if conv_w {
            let mut s = vec![1i64; vd.len()];
            s[0] = zd[0] as i64;
            s
        } else if rows {
            // A's per-row zero point: (M,) → (M, 1).
            let mut s: Vec<i64> = zd.iter().map(|&d| d as i64).collect();
            s.push(1);
            s
        } else {
            zd.iter().map(|&d| d as i64).collect()
        };
        z = n.op("reshape", &[z], Attrs::new().with("shape", shape))?;
    }
    n.op("sub", &[vf, z], Attrs::new())
}

/// The integer product (matmul or conv) of the centred operands, in f32.
fn int_product(n: &mut N, op: &str, a: ValueId, b: ValueId) -> Result<ValueId, String> {
    if op.contains("Conv") {
        let r = nn::conv_with(n, "Conv", a, b)?;
        match r.into_iter().next() {
            Some(Out::Value(v)) => Ok(v),
            _ => Err("the convolution has no output".into()),
        }
    } else {
        n.op("matmul", &[a, b], Attrs::new())
    }
}

/// The IR's `matmul_integer` of inputs `a`, `b` with zero points `za`,
/// `zb` (input indices), where it applies: 8-bit operands, a 2-D B and
/// zero points of one value or one per row of A / column of B. `None`:
/// the product is decomposed into f32 instead.
fn integer_op(
    n: &mut N,
    a: usize,
    za: usize,
    b: usize,
    zb: usize,
) -> Result<Option<ValueId>, String> {
    let (av, bv) = (n.v(a)?, n.v(b)?);
    let int8 = |d: DType| matches!(d, DType::U8 | DType::I8);
    let (ad, bd) = (n.dims(av), n.dims(bv));
    let (adt, bdt) = (n.cx.b.dtype(av), n.cx.b.dtype(bv));
    if !int8(adt) || !int8(bdt) || ad.is_empty() || bd.len() != 2 || ad[ad.len() - 1] != bd[0] {
        return Ok(None);
    }
    let rows = if ad.len() >= 2 { ad[ad.len() - 2] } else { 1 };
    let zero = |n: &mut N, k: usize, dt: DType, count: usize| -> Result<Option<ValueId>, String> {
        let Some(_) = n.name(k) else {
            return Ok(Some(n.scalar(0.0, dt)?));
        };
        let z = n.v(k)?;
        let zd = n.dims(z);
        let numel: usize = zd.iter().product();
        let fits = n.cx.b.dtype(z) == dt && (numel == 1 || (zd.len() == 1 && zd[0] == count));
        Ok(match fits {
            true if numel == 1 && !zd.is_empty() => Some(n.op(
                "reshape",
                &[z],
                Attrs::new().with("shape", Vec::<i64>::new()),
            )?),
            true => Some(z),
            false => None,
        })
    };
    let (Some(z1), Some(z2)) = (zero(n, za, adt, rows)?, zero(n, zb, bdt, bd[1])?) else {
        return Ok(None);
    };
    n.op("matmul_integer", &[av, bv, z1, z2], Attrs::new())
        .map(Some)
}

/// ONNX `MatMulInteger`, `ConvInteger`: (A − a_zp) · (B − b_zp) as int32.
pub(super) fn mat_mul_integer(mut n: N, op: &str) -> R {
    let conv = op == "ConvInteger";
    if !conv {
        if let Some(y) = integer_op(&mut n, 0, 2, 1, 3)? {
            return Ok(vec![Out::Value(y)]);
        }
    }
    let a = centred(&mut n, 0, 2, true, false)?;
    let b = centred(&mut n, 1, 3, false, conv)?;
    let y = int_product(&mut n, op, a, b)?;
    Ok(vec![Out::Value(n.cast_to(y, DType::I32)?)])
}

/// ONNX `QLinearMatMul`, `QLinearConv`: the integer product rescaled by
/// a_scale · b_scale / y_scale, rounded, plus y's zero point.
/// Inputs: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp (, bias).
pub(super) fn q_linear(mut n: N, op: &str) -> R {
    let conv = op == "QLinearConv";
    let mut acc = match (conv, integer_op(&mut n, 0, 2, 3, 5)?) {
        (false, Some(y)) => n.cast_to(y, DType::F32)?,
        _ => {
            let a = centred(&mut n, 0, 2, true, false)?;
            let b = centred(&mut n, 3, 5, false, conv)?;
            int_product(&mut n, op, a, b)?
        }
    };
    if conv && n.name(8).is_some() {
        // The int32 bias, per output channel, added before the rescale.
        let bias = n.v(8)?;
        let bias = n.cast_to(bias, DType::F32)?;
        let c = n.dims(bias).first().copied().unwrap_or(1) as i64;
        let mut shape = vec![1i64; n.dims(acc).len()];
        if shape.len() > 1 {
            shape[1] = c;
        }
        let bias = n.op("reshape", &[bias], Attrs::new().with("shape", shape))?;
        acc = n.op("add", &[acc, bias], Attrs::new())?;
    }
    let out_dims = n.dims(acc);
    let scale_of = |n: &mut N, k: usize, axis: usize| -> Result<ValueId, String> {
        let s = n.v(k)?;
        let s = n.cast_to(s, DType::F32)?;
        let sd = n.dims(s);
        if sd.iter().product::<usize>() <= 1 {
            return Ok(s);
        }
        let mut shape = vec![1i64; out_dims.len()];
        if sd.len() != 1 || axis >= shape.len() {
            return Err(format!(
                "a scale of shape {sd:?} for a product of shape {out_dims:?} (a scalar or one per row, column or channel)"
            ));
        }
        shape[axis] = sd[0] as i64;
        n.op("reshape", &[s], Attrs::new().with("shape", shape))
    };
    let r = out_dims.len();
    // Per-axis scales: A's per row (axis −2), B's per column (last) or
    // per output channel (a conv's axis 1).
    let sa = scale_of(&mut n, 1, r.saturating_sub(2))?;
    let sb = scale_of(&mut n, 4, if conv { 1 } else { r.saturating_sub(1) })?;
    let sy = n.v(6)?;
    let sy = n.cast_to(sy, DType::F32)?;
    let f = n.op("mul", &[sa, sb], Attrs::new())?;
    let f = n.op("div", &[f, sy], Attrs::new())?;
    let v = n.op("mul", &[acc, f], Attrs::new())?;
    let (zp, to) = match n.name(7) {
        Some(_) => {
            let z = n.v(7)?;
            let d = n.cx.b.dtype(z);
            (Some(n.cast_to(z, DType::F32)?), d)
        }
        None => (None, DType::U8),
    };
    Ok(vec![Out::Value(saturate(&mut n, v, zp, to, None)?)])
}
