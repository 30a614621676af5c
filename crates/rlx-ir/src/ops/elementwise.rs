//! Elementwise ops: unary, binary (NumPy broadcasting), where, clamp, cast.
//! Semantics are those of NumPy on the same dtype, except where noted.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::dtype::Storage;
use crate::op::{Arity::Exact, Category as C, Grad::*};

const fn un(
    name: &'static str,
    dtypes: &'static [DType],
    infer: InferFn,
    grad: Grad,
    doc: &'static str,
) -> OpDef {
    def(
        name,
        C::Unary,
        Exact(1),
        dtypes,
        &[],
        infer,
        None,
        grad,
        doc,
    )
}
const fn bin(
    name: &'static str,
    dtypes: &'static [DType],
    infer: InferFn,
    grad: Grad,
    doc: &'static str,
) -> OpDef {
    def(
        name,
        C::Binary,
        Exact(2),
        dtypes,
        &[],
        infer,
        None,
        grad,
        doc,
    )
}

fn where_(cx: &InferCx) -> R {
    let t = broadcast_same(&InferCx {
        op: cx.op,
        inputs: &cx.inputs[1..],
        attrs: cx.attrs,
    })?
    .remove(0);
    let shape = broadcast_shapes(&cx.inputs[0].shape, &t.shape).map_err(|e| e.to_string())?;
    one(TensorType::new(t.dtype, shape))
}

fn cast(cx: &InferCx) -> R {
    let to = cx.attrs.dtype("dtype").map_err(|e| e.to_string())?;
    if to.is_quantized() {
        return Err(format!(
            "cannot cast to the block type {to}; use `quantize`"
        ));
    }
    one(TensorType::new(to, cx.inputs[0].shape.clone()))
}

fn bitcast(cx: &InferCx) -> R {
    let (from, to) = (
        cx.inputs[0].dtype,
        cx.attrs.dtype("dtype").map_err(|e| e.to_string())?,
    );
    let size = |d: DType| match d.storage() {
        Storage::Plain { size } => Some(size),
        Storage::Block { .. } => None,
    };
    match (size(from), size(to)) {
        (Some(a), Some(b)) if a == b => one(TensorType::new(to, cx.inputs[0].shape.clone())),
        _ => Err(format!(
            "bitcast reinterprets elements of one size: {from} → {to} changes it (or is packed)"
        )),
    }
}

pub static ELEMENTWISE: &[OpDef] = &[
    un(
        "abs",
        NUMERIC,
        same,
        Differentiable,
        "|x| (wraps at the minimum of signed integers)",
    ),
    un("neg", SIGNED, same, Differentiable, "-x"),
    un(
        "sign",
        NUMERIC,
        same,
        NotDifferentiable,
        "-1, 0 or 1 (NaN stays NaN)",
    ),
    un("square", NUMERIC, same, Differentiable, "x*x"),
    un("relu", NUMERIC, same, Differentiable, "max(x, 0)"),
    un("exp", FLOAT, same, Differentiable, "e^x"),
    un("exp2", FLOAT, same, Differentiable, "2^x"),
    un(
        "expm1",
        FLOAT,
        same,
        Differentiable,
        "e^x - 1, accurate near 0",
    ),
    un("log", FLOAT, same, Differentiable, "natural logarithm"),
    un("log2", FLOAT, same, Differentiable, "base-2 logarithm"),
    un(
        "log1p",
        FLOAT,
        same,
        Differentiable,
        "ln(1 + x), accurate near 0",
    ),
    un("sqrt", FLOAT, same, Differentiable, "square root"),
    un("rsqrt", FLOAT, same, Differentiable, "1 / sqrt(x)"),
    un("reciprocal", FLOAT, same, Differentiable, "1 / x"),
    un("sin", FLOAT, same, Differentiable, "sine"),
    un("cos", FLOAT, same, Differentiable, "cosine"),
    un("tan", FLOAT, same, Differentiable, "tangent"),
    un("asin", FLOAT, same, Differentiable, "arc sine"),
    un("acos", FLOAT, same, Differentiable, "arc cosine"),
    un("atan", FLOAT, same, Differentiable, "arc tangent"),
    un("sinh", FLOAT, same, Differentiable, "hyperbolic sine"),
    un("cosh", FLOAT, same, Differentiable, "hyperbolic cosine"),
    un("tanh", FLOAT, same, Differentiable, "hyperbolic tangent"),
    un(
        "asinh",
        FLOAT,
        same,
        Differentiable,
        "inverse hyperbolic sine",
    ),
    un(
        "acosh",
        FLOAT,
        same,
        Differentiable,
        "inverse hyperbolic cosine",
    ),
    un(
        "atanh",
        FLOAT,
        same,
        Differentiable,
        "inverse hyperbolic tangent",
    ),
    un("erf", FLOAT, same, Differentiable, "Gauss error function"),
    un("sigmoid", FLOAT, same, Differentiable, "1 / (1 + e^-x)"),
    un(
        "softplus",
        FLOAT,
        same,
        Differentiable,
        "ln(1 + e^x), stable for large |x|",
    ),
    un("floor", FLOAT, same, NotDifferentiable, "round toward -inf"),
    un("ceil", FLOAT, same, NotDifferentiable, "round toward +inf"),
    un(
        "round",
        FLOAT,
        same,
        NotDifferentiable,
        "round half to even (NumPy `rint`)",
    ),
    un("trunc", FLOAT, same, NotDifferentiable, "round toward 0"),
    un("isnan", FLOAT, to_bool, NotDifferentiable, "x is NaN"),
    un(
        "isinf",
        FLOAT,
        to_bool,
        NotDifferentiable,
        "x is +inf or -inf",
    ),
    un(
        "isfinite",
        FLOAT,
        to_bool,
        NotDifferentiable,
        "x is neither NaN nor infinite",
    ),
    un("not", BOOL, same, NotDifferentiable, "logical not"),
    un(
        "bitwise_not",
        INT_BOOL,
        same,
        NotDifferentiable,
        "bitwise complement (logical not on bool)",
    ),
    bin(
        "add",
        NUMERIC,
        broadcast_same,
        Differentiable,
        "a + b (integers wrap)",
    ),
    bin(
        "sub",
        NUMERIC,
        broadcast_same,
        Differentiable,
        "a - b (integers wrap)",
    ),
    bin(
        "mul",
        NUMERIC,
        broadcast_same,
        Differentiable,
        "a * b (integers wrap)",
    ),
    bin(
        "div",
        NUMERIC,
        broadcast_same,
        Differentiable,
        "a / b; integers truncate toward 0 and division by 0 is a runtime error",
    ),
    bin(
        "rem",
        NUMERIC,
        broadcast_same,
        NotDifferentiable,
        "remainder with the sign of a (C fmod); integer rem by 0 is a runtime error",
    ),
    bin("pow", FLOAT, broadcast_same, Differentiable, "a ^ b"),
    bin(
        "max",
        NUMERIC,
        broadcast_same,
        Differentiable,
        "elementwise maximum; NaN propagates",
    ),
    bin(
        "min",
        NUMERIC,
        broadcast_same,
        Differentiable,
        "elementwise minimum; NaN propagates",
    ),
    bin(
        "atan2",
        FLOAT,
        broadcast_same,
        Differentiable,
        "angle of (b, a): atan2(a, b)",
    ),
    bin("eq", PLAIN, broadcast_bool, NotDifferentiable, "a == b"),
    bin("ne", PLAIN, broadcast_bool, NotDifferentiable, "a != b"),
    bin("lt", PLAIN, broadcast_bool, NotDifferentiable, "a < b"),
    bin("le", PLAIN, broadcast_bool, NotDifferentiable, "a <= b"),
    bin("gt", PLAIN, broadcast_bool, NotDifferentiable, "a > b"),
    bin("ge", PLAIN, broadcast_bool, NotDifferentiable, "a >= b"),
    bin(
        "and",
        BOOL,
        broadcast_same,
        NotDifferentiable,
        "logical and",
    ),
    bin("or", BOOL, broadcast_same, NotDifferentiable, "logical or"),
    bin(
        "xor",
        BOOL,
        broadcast_same,
        NotDifferentiable,
        "logical xor",
    ),
    bin(
        "bitwise_and",
        INT_BOOL,
        broadcast_same,
        NotDifferentiable,
        "bitwise and",
    ),
    bin(
        "bitwise_or",
        INT_BOOL,
        broadcast_same,
        NotDifferentiable,
        "bitwise or",
    ),
    bin(
        "bitwise_xor",
        INT_BOOL,
        broadcast_same,
        NotDifferentiable,
        "bitwise xor",
    ),
    bin(
        "shl",
        INT,
        broadcast_same,
        NotDifferentiable,
        "a << b; shifts outside [0, bits) give 0",
    ),
    bin(
        "shr",
        INT,
        broadcast_same,
        NotDifferentiable,
        "a >> b (arithmetic for signed); shifts outside [0, bits) give 0 or -1",
    ),
    def(
        "where",
        C::Ternary,
        Exact(3),
        BOOL,
        &[],
        where_,
        None,
        Differentiable,
        "cond ? a : b, all three broadcast",
    ),
    def(
        "clamp",
        C::Unary,
        Exact(1),
        NUMERIC,
        &[
            attr("min", K::Float, D::Optional),
            attr("max", K::Float, D::Optional),
        ],
        same,
        None,
        Differentiable,
        "min(max(x, min), max); a missing bound is open",
    ),
    with_view(
    def(
        "cast",
        C::Misc,
        Exact(1),
        &[],
        &[attr("dtype", K::DType, D::Required)],
        cast,
        None,
        Differentiable,
        "convert elements: float→int truncates toward 0 and saturates at the dtype's range, NaN or ±inf → int is a runtime error naming the node and element; int→int wraps (two's complement); float→float rounds to nearest even (overflow gives ±inf); x→bool is x != 0 (NaN → true); c64→real takes the real part",
    ),
    view::same),
    def(
        "bitcast",
        C::Misc,
        Exact(1),
        &[],
        &[attr("dtype", K::DType, D::Required)],
        bitcast,
        None,
        NotDifferentiable,
        "reinterpret each element's bits as `dtype`, of the same size (f32 ↔ i32, f64 ↔ i64, u16 → i16, bool → u8; a non-zero byte read as bool is true)",
    ),
];
