//! Unary, binary, where, clamp and cast kernels.

use super::*;
use rlx_ir::TensorData;

type F1 = fn(f64) -> f64;

fn float_unary(op: &str) -> Option<F1> {
    Some(match op {
        "abs" => f64::abs,
        "neg" => |x| -x,
        "sign" => |x: f64| {
            if x.is_nan() {
                x
            } else if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        },
        "square" => |x| x * x,
        "relu" => |x: f64| if x.is_nan() { x } else { x.max(0.0) },
        "exp" => f64::exp,
        "exp2" => f64::exp2,
        "expm1" => f64::exp_m1,
        "log" => f64::ln,
        "log2" => f64::log2,
        "log1p" => f64::ln_1p,
        "sqrt" => f64::sqrt,
        "rsqrt" => |x: f64| 1.0 / x.sqrt(),
        "reciprocal" => |x| 1.0 / x,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "erf" => libm::erf,
        "sigmoid" => sigmoid,
        // max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
        "softplus" => |x: f64| {
            if x.is_nan() {
                x
            } else {
                x.max(0.0) + (-x.abs()).exp().ln_1p()
            }
        },
        "floor" => f64::floor,
        "ceil" => f64::ceil,
        "round" => f64::round_ties_even,
        "trunc" => f64::trunc,
        "isnan" => |x: f64| x.is_nan() as u8 as f64,
        "isinf" => |x: f64| x.is_infinite() as u8 as f64,
        "isfinite" => |x: f64| x.is_finite() as u8 as f64,
        _ => return None,
    })
}

pub(crate) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn int_unary(op: &str) -> Option<fn(i64) -> i64> {
    Some(match op {
        "abs" => i64::wrapping_abs,
        "neg" => i64::wrapping_neg,
        "sign" => i64::signum,
        "square" => |x: i64| x.wrapping_mul(x),
        "relu" => |x: i64| x.max(0),
        "bitwise_not" => |x: i64| !x,
        "not" => |x: i64| (x == 0) as i64,
        _ => return None,
    })
}

fn unary(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ty = cx.out_type(0);
    if x.dtype().is_float() {
        let f = float_unary(cx.op)
            .ok_or_else(|| cx.fail(format!("no float form for {}", x.dtype())))?;
        return Ok(vec![from_floats(
            ty,
            floats(x)?.into_iter().map(f).collect(),
        )?]);
    }
    let f =
        int_unary(cx.op).ok_or_else(|| cx.fail(format!("no integer form for {}", x.dtype())))?;
    // The ring operations give the same bits on u64 seen as i64.
    let ring = matches!(cx.op, "neg" | "square" | "bitwise_not" | "not");
    let vals = if ring { ring_ints(x)? } else { ints(x)? };
    let mut v: Vec<i64> = vals.into_iter().map(f).collect();
    if x.dtype() == DType::Bool && cx.op == "bitwise_not" {
        v.iter_mut().for_each(|b| *b &= 1);
    }
    Ok(vec![from_ints(ty, v)?])
}

/// Both operands' elements, and for each output element the index it reads
/// in each (broadcasting).
type Operands<T> = (Vec<T>, Vec<T>, Vec<usize>, Vec<usize>);

fn operands<T>(
    cx: &KernelCx,
    conv: fn(&HostTensor) -> Result<Vec<T>, CpuError>,
) -> Result<Operands<T>, CpuError> {
    let (a, b) = (cx.input(0), cx.input(1));
    let shape = &cx.out_type(0).shape;
    Ok((
        conv(a)?,
        conv(b)?,
        broadcast_map(a.shape(), shape),
        broadcast_map(b.shape(), shape),
    ))
}

fn float_binary(op: &str) -> Option<fn(f64, f64) -> f64> {
    let nan_max = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    };
    let nan_min = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.min(b)
        }
    };
    Some(match op {
        "add" => |a, b| a + b,
        "sub" => |a, b| a - b,
        "mul" => |a, b| a * b,
        "div" => |a, b| a / b,
        "rem" => |a, b| a % b,
        "pow" => f64::powf,
        "max" => nan_max,
        "min" => nan_min,
        "atan2" => f64::atan2,
        _ => return None,
    })
}

fn cmp(op: &str) -> Option<fn(std::cmp::Ordering) -> bool> {
    use std::cmp::Ordering::*;
    Some(match op {
        "eq" => |o| o == Equal,
        "ne" => |o| o != Equal,
        "lt" => |o| o == Less,
        "le" => |o| o != Greater,
        "gt" => |o| o == Greater,
        "ge" => |o| o != Less,
        _ => return None,
    })
}

fn bits(d: DType) -> i64 {
    match d {
        DType::I8 | DType::U8 => 8,
        DType::I16 | DType::U16 => 16,
        DType::I32 | DType::U32 => 32,
        _ => 64,
    }
}

/// A key that orders the i64 bit patterns of `d` as `d` orders its
/// values: u64 flips the sign bit (so 2^63 sorts above i64::MAX).
pub(crate) fn order_key(d: DType) -> fn(i64) -> i64 {
    if d == DType::U64 {
        |v| v ^ i64::MIN
    } else {
        |v| v
    }
}

fn binary(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let dt = cx.input(0).dtype();
    let ty = cx.out_type(0);
    if let Some(c) = cmp(cx.op) {
        let v: Vec<f64> = if dt.is_float() {
            let (a, b, ia, ib) = operands(cx, floats)?;
            // NaN compares unequal to everything (so `ne` is true).
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| match a[i].partial_cmp(&b[j]) {
                    Some(o) => c(o) as u8 as f64,
                    None => (cx.op == "ne") as u8 as f64,
                })
                .collect()
        } else {
            let (a, b, ia, ib) = operands(cx, ring_ints)?;
            let key = order_key(dt);
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| c(key(a[i]).cmp(&key(b[j]))) as u8 as f64)
                .collect()
        };
        return Ok(vec![from_floats(ty, v)?]);
    }
    if dt.is_float() {
        let f = float_binary(cx.op).ok_or_else(|| cx.fail(format!("no float form for {dt}")))?;
        let (a, b, ia, ib) = operands(cx, floats)?;
        return Ok(vec![from_floats(
            ty,
            ia.iter().zip(&ib).map(|(&i, &j)| f(a[i], b[j])).collect(),
        )?]);
    }
    // u64 values keep their bits in i64: the ring operations are the same,
    // and ordering, division and right shifts are done unsigned.
    let (a, b, ia, ib) = operands(cx, ring_ints)?;
    let w = bits(dt);
    let unsigned = dt == DType::U64;
    let key = order_key(dt);
    let mut out = Vec::with_capacity(ia.len());
    for (&i, &j) in ia.iter().zip(&ib) {
        let (x, y) = (a[i], b[j]);
        out.push(match cx.op {
            "add" => x.wrapping_add(y),
            "sub" => x.wrapping_sub(y),
            "mul" => x.wrapping_mul(y),
            "div" | "rem" if y == 0 => return Err(cx.fail("integer division by zero")),
            "div" if unsigned => (x as u64 / y as u64) as i64,
            "rem" if unsigned => (x as u64 % y as u64) as i64,
            "div" => x.wrapping_div(y),
            "rem" => x.wrapping_rem(y),
            "max" => std::cmp::max_by_key(x, y, |&v| key(v)),
            "min" => std::cmp::min_by_key(x, y, |&v| key(v)),
            "and" | "bitwise_and" => x & y,
            "or" | "bitwise_or" => x | y,
            "xor" | "bitwise_xor" => x ^ y,
            "shl" => {
                if (0..w).contains(&y) {
                    x.wrapping_shl(y as u32)
                } else {
                    0
                }
            }
            "shr" => {
                if unsigned && (0..w).contains(&y) {
                    ((x as u64) >> y) as i64
                } else if unsigned {
                    0
                } else if (0..w).contains(&y) {
                    x >> y
                } else if x < 0 {
                    -1
                } else {
                    0
                }
            }
            op => return Err(cx.fail(format!("`{op}` has no integer form"))),
        });
    }
    Ok(vec![from_ints(ty, out)?])
}

fn where_(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let ty = cx.out_type(0);
    let (c, a, b) = (cx.input(0), cx.input(1), cx.input(2));
    let cond: Vec<bool> = broadcast_map(c.shape(), &ty.shape)
        .into_iter()
        .map(|i| matches!(c.data(), TensorData::Bool(v) if v[i]))
        .collect();
    let (ia, ib) = (
        broadcast_map(a.shape(), &ty.shape),
        broadcast_map(b.shape(), &ty.shape),
    );
    // Pick from a virtual concatenation [a, b] so every dtype is handled.
    let both = concat_data(&[a.data(), b.data()]).map_err(|e| cx.fail(e))?;
    let idx: Vec<usize> = (0..cond.len())
        .map(|k| if cond[k] { ia[k] } else { a.numel() + ib[k] })
        .collect();
    Ok(vec![HostTensor::new(
        ty.dtype,
        ty.shape.clone(),
        both.take(&idx)?,
    )?])
}

/// Join the element vectors of tensors of one dtype.
pub(crate) fn concat_data(parts: &[&TensorData]) -> Result<TensorData, String> {
    macro_rules! join {
        ($($var:ident),*) => {
            match parts.first() {
                $(Some(TensorData::$var(_)) => {
                    let mut out = Vec::new();
                    for p in parts {
                        match p {
                            TensorData::$var(v) => out.extend_from_slice(v),
                            _ => return Err("mixed dtypes".into()),
                        }
                    }
                    TensorData::$var(out)
                })*
                Some(TensorData::Packed(_)) => return Err("cannot move elements of packed tensors".into()),
                None => return Err("nothing to join".into()),
            }
        };
    }
    Ok(join!(
        Bool, I8, U8, I16, I32, I64, U16, U32, U64, F16, BF16, F32, F64, C64
    ))
}

fn clamp(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let (lo, hi) = (cx.attrs.opt_float("min"), cx.attrs.opt_float("max"));
    let ty = cx.out_type(0);
    if x.dtype().is_float() {
        let v = floats(x)?
            .into_iter()
            .map(|v| {
                let v = lo.map_or(v, |l| if v < l { l } else { v });
                hi.map_or(v, |h| if v > h { h } else { v })
            })
            .collect();
        return Ok(vec![from_floats(ty, v)?]);
    }
    // Integer bounds: the tightest integers inside [min, max].
    let lo = lo.map(|l| l.ceil() as i64);
    let hi = hi.map(|h| h.floor() as i64);
    let v = ints(x)?
        .into_iter()
        .map(|v| hi.map_or(v, |h| v.min(h)))
        .map(|v| lo.map_or(v, |l| v.max(l)))
        .collect();
    Ok(vec![from_ints(ty, v)?])
}

/// The `cast` op (semantics in its doc, crates/rlx-ir/src/ops/elementwise.rs).
fn cast(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ty = cx.out_type(0);
    let from_float = x.dtype().is_float() || x.dtype() == DType::C64;
    let out = match (x.dtype(), ty.dtype) {
        (a, b) if a == b => x.clone(),
        (_, b) if from_float && b.is_int() => from_ints(ty, float_to_int(&floats(x)?, b)?)?,
        (DType::C64, b) if b.is_float() || b == DType::Bool => from_floats(ty, floats(x)?)?,
        (_, DType::C64) => HostTensor::from_c64(ty.shape.clone(), x.to_c64_vec()?)?,
        (a, _) if a.is_float() => from_floats(ty, floats(x)?)?,
        // u64 above i64::MAX widens exactly through f64's rounding, as a cast does.
        (DType::U64, b) if b.is_float() => from_floats(ty, floats(x)?)?,
        _ => from_ints(ty, ring_ints(x)?)?,
    };
    Ok(vec![out])
}

fn bitcast(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let ty = cx.out_type(0);
    let bytes = cx.input(0).to_le_bytes();
    Ok(vec![HostTensor::from_le_bytes(
        ty.dtype,
        ty.shape.clone(),
        &bytes,
    )?])
}

/// Float → integer: truncate toward zero, saturate to the dtype's range;
/// NaN and ±inf have no integer value and are an error naming the element
/// (wrapping them, or NaN → 0, gave a silently wrong number).
fn float_to_int(v: &[f64], to: DType) -> Result<Vec<i64>, CpuError> {
    let (lo, hi) = to.int_range().ok_or_else(|| CpuError::Runtime {
        op: "cast".into(),
        msg: format!("{to} is not an integer dtype"),
    })?;
    v.iter()
        .enumerate()
        .map(|(index, &f)| {
            if !f.is_finite() {
                return Err(CpuError::Cast {
                    node: None,
                    index,
                    value: f,
                    to,
                });
            }
            if to == DType::U64 {
                // `as u64` saturates at 0 and u64::MAX; the bits ride in i64.
                return Ok(f.trunc() as u64 as i64);
            }
            // `as` saturates at the i64 range; then clamp to the dtype's.
            Ok((f.trunc() as i64).clamp(lo, hi))
        })
        .collect()
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("abs", unary),
    ("neg", unary),
    ("sign", unary),
    ("square", unary),
    ("relu", unary),
    ("exp", unary),
    ("exp2", unary),
    ("expm1", unary),
    ("log", unary),
    ("log2", unary),
    ("log1p", unary),
    ("sqrt", unary),
    ("rsqrt", unary),
    ("reciprocal", unary),
    ("sin", unary),
    ("cos", unary),
    ("tan", unary),
    ("asin", unary),
    ("acos", unary),
    ("atan", unary),
    ("sinh", unary),
    ("cosh", unary),
    ("tanh", unary),
    ("asinh", unary),
    ("acosh", unary),
    ("atanh", unary),
    ("erf", unary),
    ("sigmoid", unary),
    ("softplus", unary),
    ("floor", unary),
    ("ceil", unary),
    ("round", unary),
    ("trunc", unary),
    ("isnan", unary),
    ("isinf", unary),
    ("isfinite", unary),
    ("not", unary),
    ("bitwise_not", unary),
    ("add", binary),
    ("sub", binary),
    ("mul", binary),
    ("div", binary),
    ("rem", binary),
    ("pow", binary),
    ("max", binary),
    ("min", binary),
    ("atan2", binary),
    ("eq", binary),
    ("ne", binary),
    ("lt", binary),
    ("le", binary),
    ("gt", binary),
    ("ge", binary),
    ("and", binary),
    ("or", binary),
    ("xor", binary),
    ("bitwise_and", binary),
    ("bitwise_or", binary),
    ("bitwise_xor", binary),
    ("shl", binary),
    ("shr", binary),
    ("where", where_),
    ("clamp", clamp),
    ("cast", cast),
    ("bitcast", bitcast),
];
