//! The built-in op set, one module per family. Each entry in a family's
//! table is the complete definition of that op (see [`crate::op::OpDef`]).

pub mod control;
pub mod elementwise;
pub mod formula;
pub mod fused;
pub mod index;
pub mod integer;
pub mod linalg;
pub mod misc;
pub mod reduce;
pub mod region;
pub mod shape;
pub mod signal;
pub mod view;

#[cfg(test)]
mod axes_tests;

pub use elementwise::ELEMENTWISE;

use crate::attr::{AttrSpec, Attrs};
use crate::dtype::DType;
use crate::op::{Arity, Category, DecomposeFn, Grad, InferCx, InferFn, OpDef};
use crate::shape::{broadcast_shapes, normalize_axis, Shape, TensorType};

/// Every built-in op definition.
pub fn builtin() -> impl Iterator<Item = &'static OpDef> {
    [
        elementwise::ELEMENTWISE,
        reduce::REDUCE,
        linalg::LINALG,
        shape::SHAPE,
        index::INDEX,
        signal::SIGNAL,
        control::CONTROL,
        fused::FUSED,
        integer::INTEGER,
        formula::FORMULA,
        region::REGION,
        misc::MISC,
    ]
    .into_iter()
    .flatten()
}

use DType::*;
pub(crate) const FLOAT: &[DType] = &[F16, BF16, F32, F64];
pub(crate) const INT: &[DType] = &[I8, U8, I16, I32, I64, U16, U32, U64];
pub(crate) const NUMERIC: &[DType] = &[I8, U8, I16, I32, I64, U16, U32, U64, F16, BF16, F32, F64];
pub(crate) const SIGNED: &[DType] = &[I8, I16, I32, I64, F16, BF16, F32, F64];
pub(crate) const INT_BOOL: &[DType] = &[Bool, I8, U8, I16, I32, I64, U16, U32, U64];
pub(crate) const BOOL: &[DType] = &[Bool];
pub(crate) const PLAIN: &[DType] = &[
    Bool, I8, U8, I16, I32, I64, U16, U32, U64, F16, BF16, F32, F64,
];
/// Movement ops take any plain element, complex included.
pub(crate) const MOVABLE: &[DType] = &[
    Bool, I8, U8, I16, I32, I64, U16, U32, U64, F16, BF16, F32, F64, C64,
];
pub(crate) const COMPLEX: &[DType] = &[C64];
pub(crate) const INDEX_TYPES: &[DType] = &[I32, I64];

/// Table-entry constructor: every field spelled out once.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn def(
    name: &'static str,
    category: Category,
    arity: Arity,
    dtypes: &'static [DType],
    attrs: &'static [AttrSpec],
    infer: InferFn,
    decompose: Option<DecomposeFn>,
    grad: Grad,
    doc: &'static str,
) -> OpDef {
    OpDef {
        name,
        category,
        arity,
        dtypes,
        attrs,
        infer,
        decompose,
        grad,
        doc,
        lowering: crate::op::Lowering::Kernel,
        derivative: None,
        view: None,
        // Unary and binary ops are elementwise.
        in_place: match category {
            Category::Unary | Category::Binary => crate::op::InPlace::Elementwise,
            _ => crate::op::InPlace::No,
        },
    }
}

/// `d`, whose output may take over an input's buffer as `in_place` says.
pub(crate) const fn with_in_place(mut d: OpDef, in_place: crate::op::InPlace) -> OpDef {
    d.in_place = in_place;
    d
}

/// `d`, whose output can be a view of its input ([`crate::op::ViewFn`]).
pub(crate) const fn with_view(mut d: OpDef, view: crate::op::ViewFn) -> OpDef {
    d.view = Some(view);
    d
}

pub(crate) type R = Result<Vec<TensorType>, String>;

/// The sub-graph attribute `name`, with its inputs and outputs naming
/// values it has: a region's type rule reads their types before the
/// sub-graph itself is verified (a JSON graph whose branch returned `%4`
/// of three values panicked here; found by the ir_json fuzz target).
pub(crate) fn sub_graph<'a>(
    cx: &'a InferCx,
    name: &str,
) -> Result<&'a crate::graph::Graph, String> {
    let g = cx.attrs.graph(name).map_err(|e| e.to_string())?;
    let n = g.values.len();
    for (what, ids) in [("input", &g.inputs), ("output", &g.outputs)] {
        if let Some((k, v)) = ids.iter().enumerate().find(|(_, v)| v.index() >= n) {
            return Err(format!(
                "`{name}`: {what} {k} (%{}) is not a value of the sub-graph (it has {n})",
                v.0
            ));
        }
    }
    Ok(g)
}

pub(crate) fn one(ty: TensorType) -> R {
    Ok(vec![ty])
}

/// Output has the type of input 0.
pub(crate) fn same(cx: &InferCx) -> R {
    one(cx.inputs[0].clone())
}

/// Output is bool with the shape of input 0.
pub(crate) fn to_bool(cx: &InferCx) -> R {
    one(TensorType::new(Bool, cx.inputs[0].shape.clone()))
}

/// All inputs share a dtype; the shape is their broadcast.
pub(crate) fn broadcast_same(cx: &InferCx) -> R {
    let dt = cx.inputs[0].dtype;
    let mut shape = cx.inputs[0].shape.clone();
    for (k, t) in cx.inputs.iter().enumerate().skip(1) {
        if t.dtype != dt {
            return Err(format!(
                "input {k} has dtype {}, input 0 has {dt}; insert a cast",
                t.dtype
            ));
        }
        shape = broadcast_shapes(&shape, &t.shape).map_err(|e| e.to_string())?;
    }
    one(TensorType::new(dt, shape))
}

/// Like [`broadcast_same`] but the result is bool.
pub(crate) fn broadcast_bool(cx: &InferCx) -> R {
    let t = broadcast_same(cx)?.remove(0);
    one(TensorType::new(Bool, t.shape))
}

/// The one range rule for axis-valued attributes (`axis`, `axes`, `perm`,
/// `lhs_batch`, ...): `value` of attribute `name` must name an axis of a
/// tensor of `rank`, negative values counting from the end. The message
/// names the attribute, the value and the rank; the verifier adds the
/// node and the op.
pub(crate) fn axis_in(name: &str, value: i64, rank: usize) -> Result<usize, String> {
    normalize_axis(value, rank).map_err(|_| {
        if rank == 0 {
            format!("attribute `{name}` = {value} is out of range: a tensor of rank 0 has no axes")
        } else {
            format!(
                "attribute `{name}` = {value} is out of range for rank {rank} (valid: {}..={})",
                -(rank as i64),
                rank - 1
            )
        }
    })
}

/// The int attribute `name` as an axis of a tensor of `rank`.
pub(crate) fn axis_of(cx: &InferCx, name: &str, rank: usize) -> Result<usize, String> {
    axis_in(name, int(cx, name)?, rank)
}

/// The list `list` of attribute `name` as distinct axes of a tensor of
/// `rank` (negative allowed), in the order given.
pub(crate) fn axes_of(name: &str, list: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(list.len());
    for &a in list {
        let a = axis_in(name, a, rank)?;
        if out.contains(&a) {
            return Err(format!(
                "attribute `{name}` = {list:?} lists axis {a} twice (rank {rank})"
            ));
        }
        out.push(a);
    }
    Ok(out)
}

/// The int-list attribute `name` as distinct axes of a tensor of `rank`.
pub(crate) fn axes_attr(cx: &InferCx, name: &str, rank: usize) -> Result<Vec<usize>, String> {
    axes_of(name, &ints(cx, name)?, rank)
}

pub(crate) fn ints(cx: &InferCx, name: &str) -> Result<Vec<i64>, String> {
    cx.attrs
        .ints(name)
        .map(|v| v.to_vec())
        .map_err(|e| e.to_string())
}
pub(crate) fn int(cx: &InferCx, name: &str) -> Result<i64, String> {
    cx.attrs.int(name).map_err(|e| e.to_string())
}
pub(crate) fn string<'a>(cx: &'a InferCx, name: &str) -> Result<&'a str, String> {
    cx.attrs.str(name).map_err(|e| e.to_string())
}

pub(crate) fn expect_dtype(cx: &InferCx, k: usize, allowed: &[DType]) -> Result<(), String> {
    let d = cx.inputs[k].dtype;
    if allowed.contains(&d) {
        Ok(())
    } else {
        let names: Vec<_> = allowed.iter().map(|d| d.name()).collect();
        Err(format!(
            "input {k} has dtype {d}, expected one of {}",
            names.join(", ")
        ))
    }
}

pub(crate) fn expect_same_dtype(cx: &InferCx, k: usize) -> Result<(), String> {
    if cx.inputs[k].dtype != cx.inputs[0].dtype {
        return Err(format!(
            "input {k} has dtype {}, input 0 has {}",
            cx.inputs[k].dtype, cx.inputs[0].dtype
        ));
    }
    Ok(())
}
