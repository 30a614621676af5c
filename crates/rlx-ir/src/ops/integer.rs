//! Integer arithmetic of quantized models: `matmul_integer`, the 8-bit
//! product with int32 accumulation that ONNX's `MatMulInteger` (and
//! rlx's static int8 quantization) is made of, and
//! `matmul_integer_scaled`, that product brought back to f32 by its scale
//! (and bias) in the GEMM's epilogue — rlx-opt's fold of
//! `cast(matmul_integer) · scale [+ bias]`.

use super::*;
use crate::error::IrError;
use crate::graph::{GraphBuilder, ValueId};
use crate::op::{Arity::*, Category as C, Grad::*};

type B<'a> = &'a mut GraphBuilder;
type Out = Result<Vec<ValueId>, IrError>;

const INT8: &[DType] = &[U8, I8];

/// a (..., M, K) or (K,), b (K, N), a zero point of a's type (a scalar or
/// one per row: M values) and one of b's (a scalar or one per column: N
/// values) → int32 (..., M, N).
fn matmul_integer(cx: &InferCx) -> R {
    let (a, b) = (&cx.inputs[0], &cx.inputs[1]);
    let int8 = |d: DType| INT8.contains(&d);
    if !int8(a.dtype) || !int8(b.dtype) || a.rank() < 1 || b.rank() != 2 {
        return Err(format!(
            "expects 8-bit integer a (..., M, K) and b (K, N); got {a} and {b}"
        ));
    }
    let k = a.dims()[a.rank() - 1];
    let n = b.dims()[1];
    if b.dims()[0] != k {
        return Err(format!(
            "a has K = {k}, b {} has K = {}",
            b.shape,
            b.dims()[0]
        ));
    }
    let m = if a.rank() >= 2 {
        a.dims()[a.rank() - 2]
    } else {
        1
    };
    for (i, (of, count, what)) in [(a, m, "row of a"), (b, n, "column of b")]
        .into_iter()
        .enumerate()
    {
        let Some(z) = cx.inputs.get(i + 2) else {
            continue;
        };
        if z.dtype != of.dtype {
            return Err(format!(
                "zero point {z} must have the type of its operand ({})",
                of.dtype
            ));
        }
        let ok = z.shape.numel() == 1 && z.rank() <= 1 || (z.rank() == 1 && z.dims()[0] == count);
        if !ok {
            return Err(format!(
                "zero point {z} must be a scalar or one per {what} ({count} values)"
            ));
        }
    }
    let mut d = a.dims()[..a.rank() - 1].to_vec();
    d.push(n);
    one(TensorType::new(I32, d))
}

/// The product in f32 — exact while every partial sum stays below 2^24
/// in magnitude (K ≤ 512 centred 8-bit values always do) — then int32:
/// how the backends without an integer kernel run it.
fn matmul_integer_d(b: B, x: &[ValueId], _: &Attrs) -> Out {
    let centred = |b: B, k: usize, per_row: bool| -> Result<ValueId, IrError> {
        let v = b.op1("cast", &[x[k]], Attrs::new().with("dtype", F32))?;
        let Some(&z) = x.get(k + 2) else { return Ok(v) };
        let mut z = b.op1("cast", &[z], Attrs::new().with("dtype", F32))?;
        let count = b.shape(z).numel();
        if per_row && count > 1 {
            z = b.op1(
                "reshape",
                &[z],
                Attrs::new().with("shape", vec![count as i64, 1]),
            )?;
        }
        b.binary("sub", v, z)
    };
    let a = centred(b, 0, true)?;
    let w = centred(b, 1, false)?;
    let p = b.binary("matmul", a, w)?;
    Ok(vec![b.op1(
        "cast",
        &[p],
        Attrs::new().with("dtype", I32),
    )?])
}

/// Shape `(N)`, `(1, .., N)` or a single value: one per output column.
fn per_column(t: &TensorType, n: usize) -> bool {
    let d = t.dims();
    t.shape.numel() == 1 || (d.last() == Some(&n) && d[..d.len() - 1].iter().all(|&x| x == 1))
}

/// matmul_integer's inputs (all four), then an f32 scale and optional
/// f32 bias, each one per output column or a single value → f32.
fn matmul_integer_scaled(cx: &InferCx) -> R {
    let int = matmul_integer(&InferCx {
        inputs: &cx.inputs[..4],
        ..*cx
    })?;
    let mut y = int.into_iter().next().ok_or("no output")?;
    let n = *y.dims().last().ok_or("rank 0 output")?;
    for (k, what) in [(4, "scale"), (5, "bias")] {
        let Some(t) = cx.inputs.get(k) else { continue };
        if t.dtype != F32 || !per_column(t, n) {
            return Err(format!(
                "the {what} {t} must be f32, one per output column ({n}) or a single value"
            ));
        }
    }
    y.dtype = F32;
    one(y)
}

/// `cast(matmul_integer(a, b, za, zb), f32) · scale [+ bias]`.
fn matmul_integer_scaled_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let p = matmul_integer_d(b, &x[..4], a)?[0];
    let f = b.op1("cast", &[p], Attrs::new().with("dtype", F32))?;
    let mut y = b.binary("mul", f, x[4])?;
    if let Some(&bias) = x.get(5) {
        y = b.binary("add", y, bias)?;
    }
    Ok(vec![y])
}

/// x f32 → (y u8, scale f32[], zero point u8[]): ONNX's
/// DynamicQuantizeLinear.
fn dynamic_quantize_linear(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    Ok(vec![
        TensorType::new(U8, x.shape.clone()),
        TensorType::new(F32, Vec::<usize>::new()),
        TensorType::new(U8, Vec::<usize>::new()),
    ])
}

/// The range [min(x, 0), max(x, 0)] over 255 levels: scale = range / 255
/// (1 for an all-zero x),
/// zero point = clamp(round(−min / scale), 0, 255), y = clamp(round(x /
/// scale) + zero point, 0, 255); rounding half to even.
fn dynamic_quantize_linear_d(b: B, x: &[ValueId], _: &Attrs) -> Out {
    let x = x[0];
    let rank = b.shape(x).rank() as i64;
    let all = Attrs::new()
        .with("axes", (0..rank).collect::<Vec<i64>>())
        .with("keepdim", false);
    let lo = b.op1("reduce_min", &[x], all.clone())?;
    let hi = b.op1("reduce_max", &[x], all)?;
    let zero = b.scalar(0.0, F32)?;
    let lo = b.binary("min", lo, zero)?;
    let hi = b.binary("max", hi, zero)?;
    let range = b.binary("sub", hi, lo)?;
    let levels = b.scalar(255.0, F32)?;
    let scale = b.binary("div", range, levels)?;
    // An all-zero x has no range: scale 1, as ONNX Runtime (ONNX's
    // reference evaluator uses 1/255; both give y = 0, zero point 0).
    let one = b.scalar(1.0, F32)?;
    let flat = b.binary("eq", range, zero)?;
    let scale = b.op1("where", &[flat, one, scale], Attrs::new())?;
    let bounds = Attrs::new().with("min", 0.0).with("max", 255.0);
    let m = b.binary("div", lo, scale)?;
    let m = b.unary("neg", m)?;
    let m = b.unary("round", m)?;
    let zpf = b.op1("clamp", &[m], bounds.clone())?;
    let q = b.binary("div", x, scale)?;
    let q = b.unary("round", q)?;
    let q = b.binary("add", q, zpf)?;
    let q = b.op1("clamp", &[q], bounds)?;
    let y = b.op1("cast", &[q], Attrs::new().with("dtype", U8))?;
    let zp = b.op1("cast", &[zpf], Attrs::new().with("dtype", U8))?;
    Ok(vec![y, scale, zp])
}

pub static INTEGER: &[OpDef] = &[def(
    "matmul_integer",
    C::Fused,
    Between(2, 4),
    INT8,
    &[],
    matmul_integer,
    Some(matmul_integer_d),
    NotDifferentiable,
    "(a − a_zero_point) @ (b − b_zero_point) of 8-bit integers with int32 accumulation; a (..., M, K), b (K, N); zero points a scalar or one per row of a / column of b",
), def(
    "matmul_integer_scaled",
    C::Fused,
    Between(5, 6),
    INT8,
    &[],
    matmul_integer_scaled,
    Some(matmul_integer_scaled_d),
    NotDifferentiable,
    "f32(matmul_integer(a, b, a_zero_point, b_zero_point)) · scale [+ bias]: the integer product rescaled in its epilogue; scale and bias f32, one per output column or a single value",
), def(
    "dynamic_quantize_linear",
    C::Fused,
    Exact(1),
    &[F32],
    &[],
    dynamic_quantize_linear,
    Some(dynamic_quantize_linear_d),
    NotDifferentiable,
    "x f32 → (y u8, scale, zero point): x over [min(x, 0), max(x, 0)] in 256 levels, as ONNX's DynamicQuantizeLinear (rounding half to even)",
)];
