//! One table from elementwise op to a WGSL expression, shared by single-op
//! kernels, fused regions and matmul epilogues. Where WGSL's builtin
//! differs from the reference semantics (NaN in max/min/relu/sign, pow of a
//! negative base, expm1/log1p near 0, erf which WGSL lacks, sin/cos/tan
//! whose WGSL accuracy is loose) a prelude function does it the reference
//! way.

use rlx_ir::{Attrs, DType};

/// Helper functions every kernel may call (unused ones cost nothing).
pub const PRELUDE: &str = r#"
// Non-finite constants through a function call: a constant-evaluated
// bitcast to inf/NaN is a shader-creation error in WebGPU (Tint).
fn bits_(b: u32) -> f32 { return bitcast<f32>(b); }
fn nan_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn inf_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn fmax_(a: f32, b: f32) -> f32 { return select(max(a, b), a + b, nan_(a) || nan_(b)); }
fn fmin_(a: f32, b: f32) -> f32 { return select(min(a, b), a + b, nan_(a) || nan_(b)); }
fn relu_(x: f32) -> f32 { return select(max(x, 0.0), x, nan_(x)); }
fn sign_(x: f32) -> f32 { return select(sign(x), x, nan_(x)); }
fn expm1_(x: f32) -> f32 {
  let u = exp(x);
  if (u == 1.0) { return x; }
  if (u - 1.0 == -1.0) { return -1.0; }
  if (inf_(u)) { return u; }
  return (u - 1.0) * x / log(u);
}
fn log1p_(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (inf_(u)) { return u; }
  return log(u) * x / (u - 1.0);
}
fn erf_(x: f32) -> f32 {
  let z = abs(x);
  if (z < 0.5) {
    let x2 = x * x;
    return 1.1283791670955126 * x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.1 + x2 * (-0.023809523809523808 + x2 * (0.004629629629629629 + x2 * -0.0007575757575757576)))));
  }
  let t = 1.0 / (1.0 + 0.5 * z);
  let e = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(e - 1.0, 1.0 - e, x >= 0.0);
}
fn tanh_(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
// sin/cos/tan with our own argument reduction: WGSL promises only 2^-11
// absolute error on [-pi, pi] and nothing outside it (SwiftShader's cos is
// 2e-4 off at 3). x = k*pi/2 + r with pi/2 in three exactly-multipliable
// parts (Cody-Waite), |r| <= pi/4, Taylor polynomials on r (error < 2e-9).
// Returns (sin r, cos r, k mod 4).
fn sincos_(x: f32) -> vec3<f32> {
  let k = round(x * 0.6366197723675814);
  let r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
  let r2 = r * r;
  let s = r + r * r2 * (-0.16666666666666666 + r2 * (0.008333333333333333 + r2 * (-0.0001984126984126984 + r2 * 2.7557319223985893e-6)));
  let c = 1.0 + r2 * (-0.5 + r2 * (0.041666666666666664 + r2 * (-0.001388888888888889 + r2 * (2.48015873015873e-5 + r2 * -2.755731922398589e-7))));
  return vec3<f32>(s, c, f32(i32(k) & 3));
}
fn sin_(x: f32) -> f32 {
  let v = sincos_(x);
  let q = u32(v.z);
  let m = select(v.x, v.y, (q & 1u) == 1u);
  return select(m, -m, q >= 2u);
}
fn cos_(x: f32) -> f32 {
  let v = sincos_(x);
  let q = u32(v.z);
  let m = select(v.y, v.x, (q & 1u) == 1u);
  return select(m, -m, q == 1u || q == 2u);
}
fn tan_(x: f32) -> f32 {
  let v = sincos_(x);
  return select(v.x / v.y, -v.y / v.x, (u32(v.z) & 1u) == 1u);
}
fn sigmoid_(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
fn softplus_(x: f32) -> f32 { return select(max(x, 0.0) + log1p_(exp(-abs(x))), x, nan_(x)); }
fn gelu_(x: f32) -> f32 { return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476)); }
fn gelu_tanh_(x: f32) -> f32 { return 0.5 * x * (1.0 + tanh_(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
fn pow_(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (nan_(a) || nan_(b)) { return a + b; }
  if (a == 0.0) { return select(0.0, bits_(0x7f800000u), b < 0.0); }
  if (a > 0.0) { return pow(a, b); }
  if (trunc(b) != b) { return bits_(0x7fc00000u); }
  let m = pow(-a, b);
  let odd = abs(b) < 16777216.0 && (i32(abs(b)) & 1) == 1;
  return select(m, -m, odd);
}
fn ishl_(a: i32, b: i32) -> i32 { return select(0, a << u32(b), b >= 0 && b < 32); }
fn ishr_(a: i32, b: i32) -> i32 { return select(select(0, -1, a < 0), a >> u32(b), b >= 0 && b < 32); }
fn isign_(x: i32) -> i32 { return select(select(0, -1, x < 0), 1, x > 0); }
fn f2i_(x: f32) -> i32 {
  if (nan_(x)) { return 0; }
  if (x >= 2147483648.0) { return 2147483647; }
  if (x <= -2147483648.0) { return -2147483647 - 1; }
  return i32(x);
}
// f32 -> IEEE f16 bits, round to nearest even, in integer arithmetic so
// every adapter rounds alike (subnormals, overflow to inf, NaN kept).
fn f16bits_(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let s = (b >> 16u) & 0x8000u;
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7e00u; }
  if (a >= 0x477ff000u) { return s | 0x7c00u; }
  if (a >= 0x38800000u) { return s | ((a + 0xfffu + ((a >> 13u) & 1u) - 0x38000000u) >> 13u); }
  if (a < 0x33000000u) { return s; }
  let sh = 126u - (a >> 23u);
  let m = (a & 0x7fffffu) | 0x800000u;
  let q = m >> sh;
  let r = m & ((1u << sh) - 1u);
  let h = 1u << (sh - 1u);
  return s | (q + select(0u, 1u, r > h || (r == h && (q & 1u) == 1u)));
}
// IEEE f16 bits -> f32 (exact).
fn f16val_(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * 5.9604644775390625e-8)); }
  if (e == 31u) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
// x rounded to the nearest f16 (the value an f16 store keeps).
fn rf16_(x: f32) -> f32 { return f16val_(f16bits_(x)); }
"#;

/// Helpers of kernels that bind `array<f16>` buffers (need `enable f16`).
pub const F16_PRELUDE: &str = r#"
// The exact f16 of x: rf16_ already rounded, so the conversion is exact.
fn to_f16_(x: f32) -> f16 { return f16(rf16_(x)); }
"#;

/// A float literal with the exact f32 bits. inf and NaN (which WGSL cannot
/// write, nor constant-evaluate) go through the `bits_` call.
pub fn f32_lit(v: f64) -> String {
    let x = v as f32;
    if x.is_finite() {
        format!("bitcast<f32>({:#x}u)", x.to_bits())
    } else {
        format!("bits_({:#x}u)", x.to_bits())
    }
}

const FLOAT_UNARY: &[&str] = &[
    "abs",
    "neg",
    "sign",
    "square",
    "relu",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log1p",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "sigmoid",
    "softplus",
    "floor",
    "ceil",
    "round",
    "trunc",
    "isnan",
    "isinf",
    "isfinite",
    "gelu",
    "gelu_tanh",
    "silu",
];
const INT_UNARY: &[&str] = &["abs", "neg", "sign", "square", "relu", "bitwise_not"];
const BOOL_UNARY: &[&str] = &["not", "bitwise_not"];
const CMP: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge"];
const FLOAT_BINARY: &[&str] = &[
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "swiglu",
];
const INT_BINARY: &[&str] = &[
    "add",
    "sub",
    "mul",
    "max",
    "min",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "shl",
    "shr",
];
const BOOL_BINARY: &[&str] = &[
    "and",
    "or",
    "xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "eq",
    "ne",
];

/// Elementwise ops with a native kernel, and for which input dtypes.
pub fn claims() -> Vec<(&'static str, Vec<DType>)> {
    let mut out: Vec<(&'static str, Vec<DType>)> = Vec::new();
    let mut add = |op: &'static str, d: DType| match out.iter_mut().find(|(o, _)| *o == op) {
        Some((_, ds)) => {
            if !ds.contains(&d) {
                ds.push(d)
            }
        }
        None => out.push((op, vec![d])),
    };
    for &o in FLOAT_UNARY.iter().chain(FLOAT_BINARY).chain(CMP) {
        add(o, DType::F32);
        add(o, DType::F16);
    }
    for &o in INT_UNARY.iter().chain(INT_BINARY).chain(CMP) {
        add(o, DType::I32);
    }
    for &o in BOOL_UNARY.iter().chain(BOOL_BINARY) {
        add(o, DType::Bool);
    }
    // i64 is held exactly as two words: equality and casts only.
    for o in ["eq", "ne", "cast"] {
        add(o, DType::I64);
    }
    for d in [DType::F32, DType::F16, DType::I32, DType::Bool] {
        add("cast", d);
        add("identity", d);
        add("stop_gradient", d);
    }
    add("clamp", DType::F32);
    add("clamp", DType::F16);
    add("clamp", DType::I32);
    out.push(("where", vec![]));
    out
}

/// The expression of `op` applied to operand expressions `a` (already
/// bound to `let`s, so they may be repeated). `dt`: input dtype of the
/// op's first operand; `out`: result dtype. `None`: no kernel.
pub fn apply(op: &str, a: &[String], dt: &[DType], out: DType, attrs: &Attrs) -> Option<String> {
    if op == "constant" {
        return constant(attrs, out);
    }
    let x = a.first()?;
    let d0 = *dt.first()?;
    if op == "cast" {
        return cast(x, d0, out);
    }
    // f16 computes in f32 (its stores round).
    let d0 = if d0 == DType::F16 { DType::F32 } else { d0 };
    if op == "where" {
        return Some(format!("select({}, {}, {})", a[2], a[1], a[0]));
    }
    if op == "identity" || op == "stop_gradient" {
        return Some(x.clone());
    }
    if op == "clamp" {
        let (lo, hi) = (attrs.opt_float("min"), attrs.opt_float("max"));
        return Some(match d0 {
            DType::F32 => {
                let mut v = x.clone();
                if let Some(l) = lo {
                    v = format!("select({v}, {l}, {v} < {l})", l = f32_lit(l));
                }
                if let Some(h) = hi {
                    v = format!("select({v}, {h}, {v} > {h})", h = f32_lit(h));
                }
                v
            }
            DType::I32 => {
                let mut v = x.clone();
                if let Some(h) = hi {
                    v = format!(
                        "min({v}, {})",
                        h.floor().clamp(i32::MIN as f64, i32::MAX as f64) as i32
                    );
                }
                if let Some(l) = lo {
                    v = format!(
                        "max({v}, {})",
                        l.ceil().clamp(i32::MIN as f64, i32::MAX as f64) as i32
                    );
                }
                v
            }
            _ => return None,
        });
    }
    if a.len() == 1 {
        return unary(op, x, d0);
    }
    binary(op, x, &a[1], d0)
}

/// A scalar constant inside a region (the fuser moves one-element
/// constants into the body) as a literal of the compute type.
fn constant(attrs: &Attrs, out: DType) -> Option<String> {
    let t = attrs.tensor("value").ok()?;
    if t.shape().numel() != 1 {
        return None;
    }
    let v = *t.to_f64_vec().ok()?.first()?;
    Some(match out {
        DType::F32 | DType::F16 => f32_lit(v),
        DType::I32 => format!("i32({})", v as i32),
        DType::Bool => (if v != 0.0 { "true" } else { "false" }).to_string(),
        _ => return None,
    })
}

fn unary(op: &str, x: &str, d: DType) -> Option<String> {
    Some(match d {
        DType::F32 => match op {
            "abs" => format!("abs({x})"),
            "neg" => format!("-({x})"),
            "sign" => format!("sign_({x})"),
            "square" => format!("({x} * {x})"),
            "relu" => format!("relu_({x})"),
            // Vulkan's asin/acos are loose (~5e-4 on lavapipe): via atan2.
            "asin" => format!("atan2({x}, sqrt((1.0 - {x}) * (1.0 + {x})))"),
            "acos" => format!("atan2(sqrt((1.0 - {x}) * (1.0 + {x})), {x})"),
            "exp" | "exp2" | "log" | "log2" | "sqrt" | "atan" | "sinh" | "cosh" | "asinh"
            | "acosh" | "atanh" | "floor" | "ceil" | "round" | "trunc" => format!("{op}({x})"),
            // WGSL's are loose (SwiftShader: 2e-4 at 3): reduced by hand.
            "sin" => format!("sin_({x})"),
            "cos" => format!("cos_({x})"),
            "tan" => format!("tan_({x})"),
            "tanh" => format!("tanh_({x})"),
            "expm1" => format!("expm1_({x})"),
            "log1p" => format!("log1p_({x})"),
            "rsqrt" => format!("(1.0 / sqrt({x}))"),
            "reciprocal" => format!("(1.0 / {x})"),
            "erf" => format!("erf_({x})"),
            "sigmoid" => format!("sigmoid_({x})"),
            "softplus" => format!("softplus_({x})"),
            "gelu" => format!("gelu_({x})"),
            "gelu_tanh" => format!("gelu_tanh_({x})"),
            "silu" => format!("({x} * sigmoid_({x}))"),
            "isnan" => format!("nan_({x})"),
            "isinf" => format!("inf_({x})"),
            "isfinite" => format!("!(nan_({x}) || inf_({x}))"),
            _ => return None,
        },
        DType::I32 => match op {
            "abs" => format!("abs({x})"),
            "neg" => format!("(0 - {x})"),
            "sign" => format!("isign_({x})"),
            "square" => format!("({x} * {x})"),
            "relu" => format!("max({x}, 0)"),
            "bitwise_not" => format!("(~{x})"),
            _ => return None,
        },
        DType::Bool => match op {
            "not" | "bitwise_not" => format!("(!{x})"),
            _ => return None,
        },
        _ => return None,
    })
}

fn binary(op: &str, a: &str, b: &str, d: DType) -> Option<String> {
    let cmp = |o: &str| format!("({a} {o} {b})");
    if d == DType::I64 {
        // (lo, hi) word pairs: exact equality.
        return match op {
            "eq" => Some(format!("all({a} == {b})")),
            "ne" => Some(format!("any({a} != {b})")),
            _ => None,
        };
    }
    match op {
        "eq" => return Some(cmp("==")),
        "ne" => return Some(cmp("!=")),
        "lt" if d != DType::Bool => return Some(cmp("<")),
        "le" if d != DType::Bool => return Some(cmp("<=")),
        "gt" if d != DType::Bool => return Some(cmp(">")),
        "ge" if d != DType::Bool => return Some(cmp(">=")),
        _ => {}
    }
    Some(match d {
        DType::F32 => match op {
            "add" => format!("({a} + {b})"),
            "sub" => format!("({a} - {b})"),
            "mul" => format!("({a} * {b})"),
            "div" => format!("({a} / {b})"),
            "rem" => format!("({a} % {b})"),
            "pow" => format!("pow_({a}, {b})"),
            "max" => format!("fmax_({a}, {b})"),
            "min" => format!("fmin_({a}, {b})"),
            "atan2" => format!("atan2({a}, {b})"),
            "swiglu" => format!("({a} * sigmoid_({a}) * {b})"),
            _ => return None,
        },
        DType::I32 => match op {
            "add" => format!("({a} + {b})"),
            "sub" => format!("({a} - {b})"),
            "mul" => format!("({a} * {b})"),
            "max" => format!("max({a}, {b})"),
            "min" => format!("min({a}, {b})"),
            "bitwise_and" => format!("({a} & {b})"),
            "bitwise_or" => format!("({a} | {b})"),
            "bitwise_xor" => format!("({a} ^ {b})"),
            "shl" => format!("ishl_({a}, {b})"),
            "shr" => format!("ishr_({a}, {b})"),
            _ => return None,
        },
        DType::Bool => match op {
            "and" | "bitwise_and" => format!("({a} && {b})"),
            "or" | "bitwise_or" => format!("({a} || {b})"),
            "xor" | "bitwise_xor" => format!("({a} != {b})"),
            _ => return None,
        },
        _ => return None,
    })
}

fn cast(x: &str, from: DType, to: DType) -> Option<String> {
    use DType::*;
    Some(match (from, to) {
        (a, b) if a == b => x.to_string(),
        // f16 values are f32 in registers: casts to it round, from it widen.
        (F16, F32) => x.to_string(),
        (F16, t) => return cast(x, F32, t),
        (F32, F16) => format!("rf16_({x})"),
        (f, F16) => format!("rf16_({})", cast(x, f, F32)?),
        (F32, I32) => format!("f2i_({x})"),
        (F32, Bool) => format!("({x} != 0.0)"),
        (I32, F32) => format!("f32({x})"),
        (I32, Bool) => format!("({x} != 0)"),
        (Bool, F32) => format!("select(0.0, 1.0, {x})"),
        (Bool, I32) => format!("select(0, 1, {x})"),
        // In i32 range (the high word is the sign): one exact rounding.
        (I64, F32) => format!("select(f32(bitcast<i32>({x}.y)) * 4294967296.0 + f32({x}.x), f32(bitcast<i32>({x}.x)), {x}.y == select(0u, 0xffffffffu, bitcast<i32>({x}.x) < 0))"),
        (I64, I32) => format!("bitcast<i32>({x}.x)"),
        (I64, Bool) => format!("any({x} != vec2<u32>(0u, 0u))"),
        _ => return None,
    })
}
