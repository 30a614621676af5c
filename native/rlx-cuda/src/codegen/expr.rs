//! The elementwise op table: one CUDA C expression per op and dtype class.
//! Operands are already in the compute type (`ctype::compute`); results
//! are in the compute type of the op's output dtype.

use crate::ctype::{is_single, lit};
use rlx_ir::{Attrs, DType};

/// `name` with the single-precision suffix when `d` computes in f32.
fn f(d: DType, name: &str) -> String {
    if is_single(d) {
        format!("{name}f")
    } else {
        name.to_string()
    }
}

/// Unary ops on floats.
pub const FLOAT_UNARY: &[&str] = &[
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
/// Unary ops on integers.
pub const INT_UNARY: &[&str] = &["abs", "neg", "sign", "square", "relu", "bitwise_not"];
/// Binary ops on floats.
pub const FLOAT_BINARY: &[&str] = &[
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "eq", "ne", "lt", "le", "gt",
    "ge", "swiglu",
];
/// Binary ops on integers (no division: a zero divisor must be an error, which a kernel cannot raise cheaply).
pub const INT_BINARY: &[&str] = &[
    "add",
    "sub",
    "mul",
    "max",
    "min",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
];
/// Ops on booleans.
pub const BOOL_OPS: &[&str] = &["not", "and", "or", "xor", "eq", "ne"];

/// The expression for unary `op` on `x` of dtype `d`.
pub fn unary(op: &str, d: DType, x: &str) -> Option<String> {
    if d == DType::Bool {
        return (op == "not").then(|| format!("(!{x})"));
    }
    let float = d.is_float();
    if !float {
        return Some(match op {
            "abs" => format!("({x} < 0 ? -{x} : {x})"),
            "neg" => format!("(-{x})"),
            "sign" => format!("((long long)(({x} > 0) - ({x} < 0)))"),
            "square" => format!("({x} * {x})"),
            "relu" => format!("({x} > 0 ? {x} : 0LL)"),
            "bitwise_not" => format!("(~{x})"),
            _ => return None,
        });
    }
    let one = lit(d, 1.0);
    let zero = lit(d, 0.0);
    let half = lit(d, 0.5);
    Some(match op {
        "abs" => format!("{}({x})", f(d, "fabs")),
        "neg" => format!("(-{x})"),
        "sign" => format!(
            "({x} != {x} ? {x} : ({x} > {zero} ? {one} : ({x} < {zero} ? -{one} : {zero})))"
        ),
        "square" => format!("({x} * {x})"),
        "relu" => format!("({x} != {x} ? {x} : ({x} > {zero} ? {x} : {zero}))"),
        "exp" | "exp2" | "expm1" | "log" | "log2" | "log1p" | "sqrt" | "rsqrt" | "sin" | "cos"
        | "tan" | "asin" | "acos" | "atan" | "sinh" | "cosh" | "tanh" | "asinh" | "acosh"
        | "atanh" | "erf" | "floor" | "ceil" | "trunc" => format!("{}({x})", f(d, op)),
        "reciprocal" => format!("({one} / {x})"),
        // Ties to even, as the reference does.
        "round" => format!("{}({x})", f(d, "rint")),
        // Split by sign so exp never overflows.
        "sigmoid" => format!(
            "({x} >= {zero} ? {one} / ({one} + {e}(-{x})) : {e}({x}) / ({one} + {e}({x})))",
            e = f(d, "exp")
        ),
        "softplus" => format!(
            "({x} != {x} ? {x} : {mx}({x}, {zero}) + {l1p}({e}(-{ab}({x}))))",
            mx = f(d, "fmax"),
            l1p = f(d, "log1p"),
            e = f(d, "exp"),
            ab = f(d, "fabs")
        ),
        "isnan" => format!("({x} != {x})"),
        "isinf" => format!(
            "({x} == {inf} || {x} == -{inf})",
            inf = lit(d, f64::INFINITY)
        ),
        "isfinite" => format!(
            "({x} == {x} && {x} != {inf} && {x} != -{inf})",
            inf = lit(d, f64::INFINITY)
        ),
        "gelu" => format!(
            "({half} * {x} * ({one} + {}({x} * {})))",
            f(d, "erf"),
            lit(d, std::f64::consts::FRAC_1_SQRT_2)
        ),
        "gelu_tanh" => format!(
            "({half} * {x} * ({one} + {}({} * ({x} + {} * {x} * {x} * {x}))))",
            f(d, "tanh"),
            lit(d, (2.0 / std::f64::consts::PI).sqrt()),
            lit(d, 0.044715)
        ),
        "silu" => format!(
            "({x} * ({x} >= {zero} ? {one} / ({one} + {e}(-{x})) : {e}({x}) / ({one} + {e}({x}))))",
            e = f(d, "exp")
        ),
        _ => return None,
    })
}

/// NaN-propagating max/min, as the reference.
fn nan_pick(d: DType, a: &str, b: &str, name: &str) -> String {
    format!(
        "({a} != {a} ? {a} : ({b} != {b} ? {b} : {}({a}, {b})))",
        f(d, name)
    )
}

/// The expression for binary `op` on `a`, `b` of dtype `d`.
pub fn binary(op: &str, d: DType, a: &str, b: &str) -> Option<String> {
    let cmp = |o: &str| format!("({a} {o} {b})");
    if d == DType::Bool {
        return Some(match op {
            "and" => format!("({a} && {b})"),
            "or" => format!("({a} || {b})"),
            "xor" | "ne" => format!("({a} != {b})"),
            "eq" => format!("({a} == {b})"),
            _ => return None,
        });
    }
    let common = match op {
        "add" => Some(format!("({a} + {b})")),
        "sub" => Some(format!("({a} - {b})")),
        "mul" => Some(format!("({a} * {b})")),
        "eq" => Some(cmp("==")),
        "ne" => Some(cmp("!=")),
        "lt" => Some(cmp("<")),
        "le" => Some(cmp("<=")),
        "gt" => Some(cmp(">")),
        "ge" => Some(cmp(">=")),
        _ => None,
    };
    if common.is_some() {
        return common;
    }
    if d.is_float() {
        Some(match op {
            "div" => format!("({a} / {b})"),
            "rem" => format!("{}({a}, {b})", f(d, "fmod")),
            "pow" => format!("{}({a}, {b})", f(d, "pow")),
            "max" => nan_pick(d, a, b, "fmax"),
            "min" => nan_pick(d, a, b, "fmin"),
            "atan2" => format!("{}({a}, {b})", f(d, "atan2")),
            // silu(gate) * up
            "swiglu" => format!("(({}) * {b})", unary("silu", d, a)?),
            _ => return None,
        })
    } else {
        Some(match op {
            "max" => format!("({a} > {b} ? {a} : {b})"),
            "min" => format!("({a} < {b} ? {a} : {b})"),
            "bitwise_and" => format!("({a} & {b})"),
            "bitwise_or" => format!("({a} | {b})"),
            "bitwise_xor" => format!("({a} ^ {b})"),
            _ => return None,
        })
    }
}

/// `clamp(x)` with its optional bounds (NaN stays NaN).
pub fn clamp(d: DType, x: &str, attrs: &Attrs) -> String {
    let mut e = x.to_string();
    if let Some(lo) = attrs.opt_float("min") {
        let l = lit(d, lo);
        e = format!("({e} < {l} ? {l} : {e})");
    }
    if let Some(hi) = attrs.opt_float("max") {
        let h = lit(d, hi);
        e = format!("({e} > {h} ? {h} : {e})");
    }
    e
}

/// `cast` from `from` to `to`, both in compute types.
pub fn cast(from: DType, to: DType, x: &str) -> String {
    match (from.is_float(), to) {
        (_, DType::Bool) => format!("({x} != 0)"),
        // Float to integer truncates toward zero and saturates at the
        // type's range, as the CPU does (`rlx_ir::DType::int_range`, one
        // table). NaN gives 0: a kernel cannot raise the CPU's error.
        (true, t) if !t.is_float() => match t.int_range() {
            Some((lo, hi)) => {
                // i64::MIN has no literal of its own in C.
                let lo_int = if lo == i64::MIN {
                    "(-9223372036854775807LL - 1)".to_string()
                } else {
                    format!("{lo}LL")
                };
                format!(
                    "({x} != {x} ? 0LL : {x} <= {lo}.0 ? {lo_int} : {x} >= {hi}.0 ? {hi}LL : (long long)({x}))"
                )
            }
            None => format!("({x} != {x} ? 0LL : (long long)({x}))"),
        },
        _ => format!("(({})({x}))", crate::ctype::compute(to)),
    }
}

/// Whether `op` is an elementwise op this table knows for input dtype `d`.
pub fn knows(op: &str, d: DType) -> bool {
    let list: &[&[&str]] = if d == DType::Bool {
        &[BOOL_OPS]
    } else if d.is_float() {
        &[FLOAT_UNARY, FLOAT_BINARY]
    } else {
        &[INT_UNARY, INT_BINARY]
    };
    list.iter().any(|l| l.contains(&op)) || matches!(op, "where" | "clamp" | "cast")
}
