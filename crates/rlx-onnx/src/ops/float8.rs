//! ONNX's 8-bit floats (FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ). rlx has no
//! float8 type: such a tensor is kept as its bit patterns in a `u8`
//! tensor, and the import remembers which values are float8 (and which
//! kind). Only `Cast` and `CastLike` read or make them — any other op fed
//! one is refused, never handed bits it would take for integers.
//!
//! Decoding is a gather from the 256 values of the kind; encoding is
//! arithmetic in f32: the exponent from log2 (corrected to exact powers of
//! two), the significand rounded half to even, saturation or the overflow
//! code, the sign bit, NaN — matching `ml_dtypes` (ONNX's reference).

use super::*;
use crate::tensor::F8;

/// The value of every code of `k`, in code order.
pub(crate) fn table(k: F8) -> Vec<f64> {
    if k == F8::E8M0 {
        // 2^(c − 127); 0xFF is NaN; no sign, no zero.
        return (0..256)
            .map(|c| {
                if c == 0xFF {
                    f64::NAN
                } else {
                    2f64.powi(c - 127)
                }
            })
            .collect();
    }
    let (m, bias, nb) = (k.mantissa_bits(), k.bias(), k.bits());
    let emask = (1u32 << (nb - 1 - m)) - 1;
    (0..1u32 << nb)
        .map(|c| {
            let neg = c & k.sign_bit() != 0;
            let (e, f) = ((c >> m) & emask, c & ((1 << m) - 1));
            let v = match k {
                F8::E4M3FNUZ | F8::E5M2FNUZ if c == 0x80 => return f64::NAN,
                F8::E4M3FN if c & 0x7F == 0x7F => return f64::NAN,
                F8::E5M2 if e == emask && f == 0 => f64::INFINITY,
                F8::E5M2 if e == emask => return f64::NAN,
                _ if e == 0 => f as f64 * 2f64.powi(1 - bias - m as i32),
                _ => (1.0 + f as f64 / (1u32 << m) as f64) * 2f64.powi(e as i32 - bias),
            };
            if neg {
                -v
            } else {
                v
            }
        })
        .collect()
}

/// floor(log2 a) of f32 values, made exact at powers of two (log2 in f32
/// can land just beside an integer), from `min` up.
fn floor_log2(n: &mut N, a: ValueId, min: f64) -> Result<ValueId, String> {
    let one = n.scalar(1.0, DType::F32)?;
    let l = n.op("log2", &[a], Attrs::new())?;
    let l = n.op("floor", &[l], Attrs::new())?;
    let l = n.op("clamp", &[l], Attrs::new().with("min", min))?;
    let p = n.op("exp2", &[l], Attrs::new())?;
    let high = n.op("gt", &[p, a], Attrs::new())?;
    let lm = n.op("sub", &[l, one], Attrs::new())?;
    let l = n.op("where", &[high, lm, l], Attrs::new())?;
    let lp = n.op("add", &[l, one], Attrs::new())?;
    let p2 = n.op("exp2", &[lp], Attrs::new())?;
    let low = n.op("le", &[p2, a], Attrs::new())?;
    n.op("where", &[low, lp, l], Attrs::new())
}

/// The float8 bits `v` (u8) as f32 values.
pub(super) fn decode(n: &mut N, v: ValueId, k: F8) -> Result<ValueId, String> {
    let codes = table(k);
    let t =
        HostTensor::from_f64(DType::F32, vec![codes.len()], codes).map_err(|e| e.to_string())?;
    let t = n.cx.b.constant(t).map_err(|e| e.to_string())?;
    let idx = n.cast_to(v, DType::I64)?;
    n.op("gather", &[t, idx], Attrs::new().with("axis", 0i64))
}

/// `x` (any float type) as float8 bits of kind `k` (u8): round half to
/// even; beyond the largest finite value the largest (`saturate`, and ±inf
/// too) or the overflow code (inf for E5M2, else NaN).
pub(super) fn encode(n: &mut N, x: ValueId, k: F8, saturate: bool) -> Result<ValueId, String> {
    if k == F8::E8M0 {
        return encode_e8m0(n, x, saturate, "up");
    }
    let x = n.cast_to(x, DType::F32)?;
    let f = |n: &mut N, v: f64| n.scalar(v, DType::F32);
    let (m, emin) = (k.mantissa_bits() as i32, 1 - k.bias());
    let nan = n.op("isnan", &[x], Attrs::new())?;
    // The sign bit, −0.0 included (1/−0 = −∞).
    let zero = f(n, 0.0)?;
    let lt = n.op("lt", &[x, zero], Attrs::new())?;
    let eq = n.op("eq", &[x, zero], Attrs::new())?;
    let rx = n.op("reciprocal", &[x], Attrs::new())?;
    let rneg = n.op("lt", &[rx, zero], Attrs::new())?;
    let nz = n.op("and", &[eq, rneg], Attrs::new())?;
    let neg = n.op("or", &[lt, nz], Attrs::new())?;
    let mut a = n.op("abs", &[x], Attrs::new())?;
    if saturate {
        a = n.op("clamp", &[a], Attrs::new().with("max", k.max_value()))?;
    }
    let inf = n.op("isinf", &[a], Attrs::new())?;
    let bad = n.op("or", &[nan, inf], Attrs::new())?;
    let a = n.op("where", &[bad, zero, a], Attrs::new())?;
    // e = floor(log2 a), exact at powers of two, at least emin.
    let l = floor_log2(n, a, (emin - 1) as f64)?;
    let e = n.op("clamp", &[l], Attrs::new().with("min", emin as f64))?;
    // significand in units of 2^(e − m), rounded half to even
    let mv = f(n, m as f64)?;
    let qe = n.op("sub", &[e, mv], Attrs::new())?;
    let q = n.op("exp2", &[qe], Attrs::new())?;
    let s = n.op("div", &[a, q], Attrs::new())?;
    let s = n.op("round", &[s], Attrs::new())?;
    // code = (e − emin)·2^m + s (a carry into the next exponent included)
    let em = f(n, emin as f64)?;
    let de = n.op("sub", &[e, em], Attrs::new())?;
    let pm = f(n, (1u32 << m) as f64)?;
    let hi = n.op("mul", &[de, pm], Attrs::new())?;
    let code = n.op("add", &[hi, s], Attrs::new())?;
    let (maxc, ovf) = (f(n, k.max_code() as f64)?, f(n, k.overflow_code() as f64)?);
    let over = n.op("gt", &[code, maxc], Attrs::new())?;
    let over = n.op("or", &[over, inf], Attrs::new())?;
    let code = n.op("where", &[over, ovf, code], Attrs::new())?;
    // The sign bit; the FNUZ kinds have no −0 and one NaN (0x80).
    let c128 = f(n, k.sign_bit() as f64)?;
    let signed = n.op("add", &[code, c128], Attrs::new())?;
    let sign_ok = if k.fnuz() {
        let nz = n.op("ne", &[code, zero], Attrs::new())?;
        let nn = n.op("ne", &[code, c128], Attrs::new())?;
        let ok = n.op("and", &[nz, nn], Attrs::new())?;
        n.op("and", &[neg, ok], Attrs::new())?
    } else {
        neg
    };
    let code = n.op("where", &[sign_ok, signed, code], Attrs::new())?;
    let nanc = f(n, k.nan_code() as f64)?;
    let code = n.op("where", &[nan, nanc, code], Attrs::new())?;
    n.cast_to(code, DType::U8)
}

/// `x` as E8M0 codes (u8), as ONNX's reference (`to_float8e8m0`) does on
/// the f32 bits: the exponent field, raised by one when `round_mode` says
/// (`up`: any fraction; `nearest`: a fraction of at least one half; `down`:
/// never) unless that passes the largest code and `saturate`; the sign is
/// dropped; NaN and ±inf give 0xFF.
pub(super) fn encode_e8m0(
    n: &mut N,
    x: ValueId,
    saturate: bool,
    round_mode: &str,
) -> Result<ValueId, String> {
    let x = n.cast_to(x, DType::F32)?;
    let f = |n: &mut N, v: f64| n.scalar(v, DType::F32);
    let nan = n.op("isnan", &[x], Attrs::new())?;
    let inf = n.op("isinf", &[x], Attrs::new())?;
    let special = n.op("or", &[nan, inf], Attrs::new())?;
    let one = f(n, 1.0)?;
    let a = n.op("abs", &[x], Attrs::new())?;
    let a = n.op("where", &[special, one, a], Attrs::new())?;
    // The exponent field − 127: floor(log2 a), exact at powers of two; at
    // least −127 (zero and subnormals have field 0).
    let l = floor_log2(n, a, -127.0)?;
    let l = n.op("clamp", &[l], Attrs::new().with("min", -127.0))?;
    let bias = f(n, 127.0)?;
    let code = n.op("add", &[l, bias], Attrs::new())?;
    // Below 2^-126 the field is 0 and every bit of `a` is fraction.
    let zero = f(n, 0.0)?;
    let tiny = f(n, 2f64.powi(-126))?;
    let sub = n.op("lt", &[a, tiny], Attrs::new())?;
    let p = n.op("exp2", &[l], Attrs::new())?;
    let inc = match round_mode {
        "down" => None,
        "up" => {
            let frac = n.op("ne", &[a, p], Attrs::new())?;
            let any = n.op("gt", &[a, zero], Attrs::new())?;
            Some(n.op("where", &[sub, any, frac], Attrs::new())?)
        }
        "nearest" => {
            let r = n.op("div", &[a, p], Attrs::new())?;
            let half = f(n, 1.5)?;
            let up = n.op("ge", &[r, half], Attrs::new())?;
            let t = f(n, 2f64.powi(-127))?;
            let sub_up = n.op("gt", &[a, t], Attrs::new())?;
            Some(n.op("where", &[sub, sub_up, up], Attrs::new())?)
        }
        m => return Err(format!("round_mode `{m}` (ONNX knows up, down, nearest)")),
    };
    let code = match inc {
        Some(mut inc) => {
            if saturate {
                let top = f(n, 254.0)?;
                let at_top = n.op("eq", &[code, top], Attrs::new())?;
                let below = n.op("not", &[at_top], Attrs::new())?;
                inc = n.op("and", &[inc, below], Attrs::new())?;
            }
            let inc = n.cast_to(inc, DType::F32)?;
            n.op("add", &[code, inc], Attrs::new())?
        }
        None => code,
    };
    let nanc = f(n, 255.0)?;
    let code = n.op("where", &[special, nanc, code], Attrs::new())?;
    n.cast_to(code, DType::U8)
}

/// `x` converted to a `bits`-wide integer as the reference does it: the
/// value truncated toward zero, then wrapped modulo 2^bits (two's
/// complement when `signed`), held in `storage` (i8 / u8).
pub(super) fn wrap_int(
    n: &mut N,
    x: ValueId,
    bits: u32,
    signed: bool,
    storage: DType,
) -> Result<ValueId, String> {
    let x = n.cast_to(x, DType::F32)?;
    let t = n.op("trunc", &[x], Attrs::new())?;
    let m = n.scalar((1u32 << bits) as f64, DType::F32)?;
    let q = n.op("div", &[t, m], Attrs::new())?;
    let q = n.op("floor", &[q], Attrs::new())?;
    let qm = n.op("mul", &[q, m], Attrs::new())?;
    let mut r = n.op("sub", &[t, qm], Attrs::new())?; // in [0, 2^bits)
    if signed {
        let half = n.scalar((1u32 << (bits - 1)) as f64, DType::F32)?;
        let high = n.op("ge", &[r, half], Attrs::new())?;
        let low = n.op("sub", &[r, m], Attrs::new())?;
        r = n.op("where", &[high, low, r], Attrs::new())?;
    }
    n.cast_to(r, storage)
}
