//! Reductions over a set of axes (`axes = []` means all axes), and
//! arg-reductions over one axis.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::op::{Arity::Exact, Category as C, Grad::*};

const AXES: &[AttrSpec] = &[
    attr("axes", K::Ints, D::Ints(&[])),
    attr("keepdim", K::Bool, D::Bool(false)),
];
const VAR: &[AttrSpec] = &[
    attr("axes", K::Ints, D::Ints(&[])),
    attr("keepdim", K::Bool, D::Bool(false)),
    attr("correction", K::Int, D::Int(0)),
];
const ARG: &[AttrSpec] = &[
    attr("axis", K::Int, D::Int(-1)),
    attr("keepdim", K::Bool, D::Bool(false)),
];

/// The reduced shape, and the sorted list of reduced axes.
pub fn reduced_shape(
    shape: &Shape,
    axes: &[i64],
    keepdim: bool,
) -> Result<(Shape, Vec<usize>), String> {
    let mut ax = if axes.is_empty() {
        (0..shape.rank()).collect()
    } else {
        axes_of("axes", axes, shape.rank())?
    };
    ax.sort_unstable();
    let dims = shape
        .dims()
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (ax.contains(&i), keepdim) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok((Shape(dims), ax))
}

fn reduce(cx: &InferCx, dtype: DType) -> R {
    let keep = cx.attrs.bool("keepdim").map_err(|e| e.to_string())?;
    let (s, _) = reduced_shape(&cx.inputs[0].shape, &ints(cx, "axes")?, keep)?;
    one(TensorType::new(dtype, s))
}
fn reduce_same(cx: &InferCx) -> R {
    reduce(cx, cx.inputs[0].dtype)
}
fn reduce_bool(cx: &InferCx) -> R {
    reduce(cx, DType::Bool)
}
fn arg(cx: &InferCx) -> R {
    let t = &cx.inputs[0];
    let ax = axis_of(cx, "axis", t.rank())?;
    if t.dims()[ax] == 0 {
        return Err(format!(
            "axis {ax} is empty; an arg-reduction needs at least one element"
        ));
    }
    let keep = cx.attrs.bool("keepdim").map_err(|e| e.to_string())?;
    let (s, _) = reduced_shape(&t.shape, &[ax as i64], keep)?;
    one(TensorType::new(DType::I64, s))
}

const fn red(
    name: &'static str,
    dtypes: &'static [DType],
    attrs: &'static [AttrSpec],
    infer: InferFn,
    grad: Grad,
    doc: &'static str,
) -> OpDef {
    def(
        name,
        C::Reduce,
        Exact(1),
        dtypes,
        attrs,
        infer,
        None,
        grad,
        doc,
    )
}

pub static REDUCE: &[OpDef] = &[
    red(
        "reduce_sum",
        NUMERIC,
        AXES,
        reduce_same,
        Differentiable,
        "sum (integers wrap); empty → 0",
    ),
    red(
        "reduce_mean",
        FLOAT,
        AXES,
        reduce_same,
        Differentiable,
        "arithmetic mean; empty → NaN",
    ),
    red(
        "reduce_prod",
        NUMERIC,
        AXES,
        reduce_same,
        Differentiable,
        "product; empty → 1",
    ),
    red(
        "reduce_max",
        NUMERIC,
        AXES,
        reduce_same,
        Differentiable,
        "maximum (NaN propagates); empty is a runtime error",
    ),
    red(
        "reduce_min",
        NUMERIC,
        AXES,
        reduce_same,
        Differentiable,
        "minimum (NaN propagates); empty is a runtime error",
    ),
    red(
        "reduce_logsumexp",
        FLOAT,
        AXES,
        reduce_same,
        Differentiable,
        "log(sum(exp(x))), computed stably; empty → -inf",
    ),
    red(
        "reduce_variance",
        FLOAT,
        VAR,
        reduce_same,
        Differentiable,
        "variance with `correction` degrees of freedom removed",
    ),
    red(
        "reduce_any",
        BOOL,
        AXES,
        reduce_bool,
        NotDifferentiable,
        "logical or; empty → false",
    ),
    red(
        "reduce_all",
        BOOL,
        AXES,
        reduce_bool,
        NotDifferentiable,
        "logical and; empty → true",
    ),
    red(
        "argmax",
        NUMERIC,
        ARG,
        arg,
        NotDifferentiable,
        "index (i64) of the first maximum; NaN counts as maximal",
    ),
    red(
        "argmin",
        NUMERIC,
        ARG,
        arg,
        NotDifferentiable,
        "index (i64) of the first minimum; NaN counts as minimal",
    ),
];
