//! Indexing: gathers, scatters, one-hot, embedding. Index tensors are i32
//! or i64; negative indices count from the end; an index out of range is a
//! runtime error, never a wrapped read.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::op::{Arity::*, Category as C, Grad::*};

fn gather(cx: &InferCx) -> R {
    let (x, idx) = (&cx.inputs[0], &cx.inputs[1]);
    expect_dtype(cx, 1, INDEX_TYPES)?;
    let ax = axis_of(cx, "axis", x.rank())?;
    let mut d = x.dims()[..ax].to_vec();
    d.extend_from_slice(idx.dims());
    d.extend_from_slice(&x.dims()[ax + 1..]);
    one(TensorType::new(x.dtype, d))
}

fn index_select(cx: &InferCx) -> R {
    if cx.inputs[1].rank() != 1 {
        return Err(format!("indices must be 1-D, got {}", cx.inputs[1].shape));
    }
    gather(cx)
}

fn gather_nd(cx: &InferCx) -> R {
    let (x, idx) = (&cx.inputs[0], &cx.inputs[1]);
    expect_dtype(cx, 1, INDEX_TYPES)?;
    let b = int(cx, "batch_dims")?;
    if b < 0 {
        return Err(format!("attribute `batch_dims` = {b} must be >= 0"));
    }
    let b = b as usize;
    let k = *idx.dims().last().ok_or("indices must have rank >= 1")?;
    if b >= idx.rank() || b + k > x.rank() || x.dims()[..b] != idx.dims()[..b] {
        return Err(format!(
            "indices {} cannot address {} with batch_dims={b}",
            idx.shape, x.shape
        ));
    }
    let mut d = idx.dims()[..idx.rank() - 1].to_vec();
    d.extend_from_slice(&x.dims()[b + k..]);
    one(TensorType::new(x.dtype, d))
}

fn gather_elements(cx: &InferCx) -> R {
    let (x, idx) = (&cx.inputs[0], &cx.inputs[1]);
    expect_dtype(cx, 1, INDEX_TYPES)?;
    axis_of(cx, "axis", x.rank())?;
    if idx.rank() != x.rank() {
        return Err(format!(
            "indices must have the rank of x ({}), got {}",
            x.rank(),
            idx.shape
        ));
    }
    one(TensorType::new(x.dtype, idx.shape.clone()))
}

fn scatter(cx: &InferCx) -> R {
    let (x, idx, upd) = (&cx.inputs[0], &cx.inputs[1], &cx.inputs[2]);
    expect_dtype(cx, 1, INDEX_TYPES)?;
    expect_same_dtype(cx, 2)?;
    let ax = axis_of(cx, "axis", x.rank())?;
    if idx.shape != upd.shape || idx.rank() != x.rank() {
        return Err(format!(
            "indices {} and updates {} must have one shape, of the rank of x",
            idx.shape, upd.shape
        ));
    }
    if (0..x.rank()).any(|i| i != ax && idx.dims()[i] > x.dims()[i]) {
        return Err(format!(
            "indices {} exceed x {} outside axis {ax}",
            idx.shape, x.shape
        ));
    }
    same(cx)
}

fn scatter_nd(cx: &InferCx) -> R {
    let (x, idx, upd) = (&cx.inputs[0], &cx.inputs[1], &cx.inputs[2]);
    expect_dtype(cx, 1, INDEX_TYPES)?;
    expect_same_dtype(cx, 2)?;
    let k = *idx.dims().last().ok_or("indices must have rank >= 1")?;
    let mut want = idx.dims()[..idx.rank() - 1].to_vec();
    if k > x.rank() {
        return Err(format!("index depth {k} exceeds the rank of x {}", x.shape));
    }
    want.extend_from_slice(&x.dims()[k..]);
    if upd.dims() != want.as_slice() {
        return Err(format!("updates must be {want:?}, got {}", upd.shape));
    }
    let r = string(cx, "reduction")?;
    if !matches!(r, "none" | "add" | "mul" | "max" | "min") {
        return Err(format!(
            "reduction must be none, add, mul, max or min; got {r:?}"
        ));
    }
    same(cx)
}

fn one_hot(cx: &InferCx) -> R {
    let idx = &cx.inputs[0];
    let depth = int(cx, "depth")?;
    if depth < 0 {
        return Err("depth must be >= 0".into());
    }
    let ax = axis_in("axis", int(cx, "axis")?, idx.rank() + 1)?;
    let mut d = idx.dims().to_vec();
    d.insert(ax, depth as usize);
    one(TensorType::new(
        cx.attrs.dtype("dtype").map_err(|e| e.to_string())?,
        d,
    ))
}

fn embedding(cx: &InferCx) -> R {
    let (t, ids) = (&cx.inputs[0], &cx.inputs[1]);
    expect_dtype(cx, 1, INDEX_TYPES)?;
    if t.rank() != 2 {
        return Err(format!("table must be (vocab, dim), got {}", t.shape));
    }
    let mut d = ids.dims().to_vec();
    d.push(t.dims()[1]);
    one(TensorType::new(t.dtype, d))
}

const AXIS0: &[AttrSpec] = &[attr("axis", K::Int, D::Int(0))];

pub static INDEX: &[OpDef] = &[
    def(
        "gather",
        C::Index,
        Exact(2),
        MOVABLE,
        AXIS0,
        gather,
        None,
        Differentiable,
        "NumPy take: out = x[..., idx, ...] along axis",
    ),
    def(
        "index_select",
        C::Index,
        Exact(2),
        MOVABLE,
        AXIS0,
        index_select,
        None,
        Differentiable,
        "gather with 1-D indices",
    ),
    def(
        "gather_nd",
        C::Index,
        Exact(2),
        MOVABLE,
        &[attr("batch_dims", K::Int, D::Int(0))],
        gather_nd,
        None,
        Differentiable,
        "ONNX GatherND: the last index axis addresses leading axes of x",
    ),
    def(
        "gather_elements",
        C::Index,
        Exact(2),
        MOVABLE,
        AXIS0,
        gather_elements,
        None,
        Differentiable,
        "out[i][j] = x[idx[i][j]][j] (axis 0): take_along_axis",
    ),
    def(
        "scatter",
        C::Index,
        Exact(3),
        MOVABLE,
        AXIS0,
        scatter,
        None,
        Differentiable,
        "copy of x with x[idx[i][j]][j] = upd[i][j] (axis 0); the last write wins",
    ),
    def(
        "scatter_add",
        C::Index,
        Exact(3),
        NUMERIC,
        AXIS0,
        scatter,
        None,
        Differentiable,
        "copy of x with upd added at the indexed positions (duplicates accumulate)",
    ),
    def(
        "scatter_nd",
        C::Index,
        Exact(3),
        MOVABLE,
        &[attr("reduction", K::Str, D::Str("none"))],
        scatter_nd,
        None,
        Differentiable,
        "ONNX ScatterND with reduction none/add/mul/max/min",
    ),
    def(
        "one_hot",
        C::Index,
        Exact(1),
        INDEX_TYPES,
        &[
            attr("depth", K::Int, D::Required),
            attr("axis", K::Int, D::Int(-1)),
            attr("dtype", K::DType, D::DType(DType::F32)),
        ],
        one_hot,
        None,
        NotDifferentiable,
        "1 at the index, 0 elsewhere, along a new axis; out-of-range indices give all zeros",
    ),
    def(
        "embedding",
        C::Index,
        Exact(2),
        MOVABLE,
        &[],
        embedding,
        None,
        Differentiable,
        "rows of a (vocab, dim) table selected by ids",
    ),
];
