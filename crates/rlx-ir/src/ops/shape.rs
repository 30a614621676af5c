//! Shape and movement ops. None of them computes: a backend may implement
//! many as views (strides and offsets) instead of copies.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::op::{Arity::*, Category as C, Grad::*};

fn reshape(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let spec = ints(cx, "shape")?;
    let known: usize = spec
        .iter()
        .filter(|&&d| d >= 0)
        .fold(1usize, |a, &d| a.saturating_mul(d as usize));
    let holes = spec.iter().filter(|&&d| d == -1).count();
    if spec.iter().any(|&d| d < -1) || holes > 1 {
        return Err(format!(
            "shape {spec:?}: extents must be >= 0, with at most one -1"
        ));
    }
    let dims: Vec<usize> = spec
        .iter()
        .map(|&d| {
            if d == -1 {
                x.shape.numel().checked_div(known).unwrap_or(0)
            } else {
                d as usize
            }
        })
        .collect();
    if Shape(dims.clone()).numel() != x.shape.numel() {
        return Err(format!(
            "cannot reshape {} ({} elements) into {spec:?}",
            x.shape,
            x.shape.numel()
        ));
    }
    one(TensorType::new(x.dtype, dims))
}

fn permute(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let perm = axes_attr(cx, "perm", x.rank())?;
    if perm.len() != x.rank() {
        return Err(format!(
            "attribute `perm` = {:?} must list all {} axes of rank {}",
            ints(cx, "perm")?,
            x.rank(),
            x.rank()
        ));
    }
    one(TensorType::new(
        x.dtype,
        perm.iter().map(|&p| x.dims()[p]).collect::<Vec<_>>(),
    ))
}

fn broadcast(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let to: Vec<usize> = ints(cx, "shape")?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let b = broadcast_shapes(&x.shape, &Shape(to.clone())).map_err(|e| e.to_string())?;
    if b.0 != to {
        return Err(format!("{} does not broadcast to {to:?}", x.shape));
    }
    one(TensorType::new(x.dtype, to))
}

fn narrow(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let ax = axis_of(cx, "axis", x.rank())?;
    let (start, len) = (int(cx, "start")?, int(cx, "len")?);
    if start < 0 || len < 0 || start.saturating_add(len) as usize > x.dims()[ax] {
        return Err(format!(
            "narrow [{start}, {start}+{len}) is outside axis {ax} of extent {}",
            x.dims()[ax]
        ));
    }
    let mut d = x.dims().to_vec();
    d[ax] = len as usize;
    one(TensorType::new(x.dtype, d))
}

/// The resolved range of one sliced axis: first index, step, count.
pub fn slice_axis(
    dim: usize,
    start: i64,
    end: i64,
    step: i64,
) -> Result<(i64, i64, usize), String> {
    if step == 0 {
        return Err("slice step cannot be 0".into());
    }
    // i128 so that extreme starts, ends and steps cannot overflow.
    let (d, st) = (dim as i128, step as i128);
    let fix = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (s, e) = if step > 0 {
        (fix(start).clamp(0, d), fix(end).clamp(0, d))
    } else {
        (fix(start).clamp(-1, d - 1), fix(end).clamp(-1, d - 1))
    };
    let n = if step > 0 {
        (e - s + st - 1).div_euclid(st)
    } else {
        (s - e - st - 1).div_euclid(-st)
    };
    Ok((s as i64, step, n.max(0) as usize))
}

/// Per-axis (start, step, count) of a `slice` node, all axes.
pub fn slice_plan(shape: &Shape, attrs: &Attrs) -> Result<Vec<(i64, i64, usize)>, String> {
    let starts = attrs.ints("starts").map_err(|e| e.to_string())?;
    let ends = attrs.ints("ends").map_err(|e| e.to_string())?;
    let axes = attrs.ints("axes").map_err(|e| e.to_string())?;
    let steps = attrs.ints("steps").map_err(|e| e.to_string())?;
    let axes: Vec<i64> = if axes.is_empty() {
        (0..starts.len() as i64).collect()
    } else {
        axes.to_vec()
    };
    let steps: Vec<i64> = if steps.is_empty() {
        vec![1; starts.len()]
    } else {
        steps.to_vec()
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps must have one entry per sliced axis".into());
    }
    let axes = axes_of("axes", &axes, shape.rank())?;
    let mut plan: Vec<(i64, i64, usize)> = shape.dims().iter().map(|&d| (0, 1, d)).collect();
    for (k, &a) in axes.iter().enumerate() {
        plan[a] = slice_axis(shape.dims()[a], starts[k], ends[k], steps[k])?;
    }
    Ok(plan)
}

fn slice(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let plan = slice_plan(&x.shape, cx.attrs)?;
    one(TensorType::new(
        x.dtype,
        plan.iter().map(|p| p.2).collect::<Vec<_>>(),
    ))
}

fn concat(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let ax = axis_of(cx, "axis", x.rank())?;
    let mut d = x.dims().to_vec();
    for (k, t) in cx.inputs.iter().enumerate().skip(1) {
        expect_same_dtype(cx, k)?;
        if t.rank() != x.rank() || (0..x.rank()).any(|i| i != ax && t.dims()[i] != x.dims()[i]) {
            return Err(format!(
                "input {k} is {}, which does not match {} outside axis {ax}",
                t.shape, x.shape
            ));
        }
        d[ax] += t.dims()[ax];
    }
    one(TensorType::new(x.dtype, d))
}

fn split(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let ax = axis_of(cx, "axis", x.rank())?;
    let sizes = ints(cx, "sizes")?;
    if sizes.iter().any(|&s| s < 0)
        || sizes.iter().map(|&s| s as i128).sum::<i128>() != x.dims()[ax] as i128
        || sizes.is_empty()
    {
        return Err(format!(
            "sizes {sizes:?} must be non-negative and sum to the extent {} of axis {ax}",
            x.dims()[ax]
        ));
    }
    Ok(sizes
        .iter()
        .map(|&s| {
            let mut d = x.dims().to_vec();
            d[ax] = s as usize;
            TensorType::new(x.dtype, d)
        })
        .collect())
}

fn pad(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let pads = ints(cx, "pads")?;
    let mode = string(cx, "mode")?;
    let r = x.rank();
    if pads.len() != 2 * r || pads.iter().any(|&p| p < 0) {
        return Err(format!(
            "pads must list {} non-negative values (all begins, then all ends), got {pads:?}",
            2 * r
        ));
    }
    for i in 0..r {
        let (b, e) = (pads[i] as usize, pads[r + i] as usize);
        match mode {
            "constant" => {}
            "reflect" if b >= x.dims()[i].max(1) || e >= x.dims()[i].max(1) => {
                return Err(format!(
                    "reflect padding of axis {i} must be smaller than its extent {}",
                    x.dims()[i]
                ))
            }
            "edge" if x.dims()[i] == 0 && b + e > 0 => {
                return Err(format!("cannot edge-pad the empty axis {i}"))
            }
            "reflect" | "edge" => {}
            m => {
                return Err(format!(
                    "mode must be \"constant\", \"reflect\" or \"edge\", got {m:?}"
                ))
            }
        }
    }
    let d: Vec<usize> = (0..r)
        .map(|i| {
            x.dims()[i]
                .saturating_add(pads[i] as usize)
                .saturating_add(pads[r + i] as usize)
        })
        .collect();
    one(TensorType::new(x.dtype, d))
}

fn squeeze(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let axes = axes_attr(cx, "axes", x.rank())?;
    for &a in &axes {
        if x.dims()[a] != 1 {
            return Err(format!("cannot squeeze axis {a} of extent {}", x.dims()[a]));
        }
    }
    let d: Vec<usize> = (0..x.rank())
        .filter(|i| {
            if axes.is_empty() {
                x.dims()[*i] != 1
            } else {
                !axes.contains(i)
            }
        })
        .map(|i| x.dims()[i])
        .collect();
    one(TensorType::new(x.dtype, d))
}

fn unsqueeze(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let axes = ints(cx, "axes")?;
    let out_rank = x.rank() + axes.len();
    let axes = axes_of("axes", &axes, out_rank)?;
    let mut src = x.dims().iter();
    let d: Vec<usize> = (0..out_rank)
        .map(|i| {
            if axes.contains(&i) {
                1
            } else {
                *src.next().unwrap_or(&1)
            }
        })
        .collect();
    one(TensorType::new(x.dtype, d))
}

fn flip(cx: &InferCx) -> R {
    axes_attr(cx, "axes", cx.inputs[0].rank())?;
    same(cx)
}

fn roll(cx: &InferCx) -> R {
    let (s, a) = (ints(cx, "shifts")?, ints(cx, "axes")?);
    if s.len() != a.len() {
        return Err("shifts and axes must have the same length".into());
    }
    axes_of("axes", &a, cx.inputs[0].rank())?;
    same(cx)
}

fn tile(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let reps = ints(cx, "repeats")?;
    if reps.len() != x.rank() || reps.iter().any(|&r| r < 0) {
        return Err(format!(
            "repeats must give one non-negative count per axis, got {reps:?}"
        ));
    }
    one(TensorType::new(
        x.dtype,
        (0..x.rank())
            .map(|i| x.dims()[i].saturating_mul(reps[i] as usize))
            .collect::<Vec<_>>(),
    ))
}

const fn sh(
    name: &'static str,
    arity: crate::op::Arity,
    attrs: &'static [AttrSpec],
    infer: InferFn,
    doc: &'static str,
) -> OpDef {
    def(
        name,
        C::Shape,
        arity,
        MOVABLE,
        attrs,
        infer,
        None,
        Differentiable,
        doc,
    )
}

pub static SHAPE: &[OpDef] = &[
    with_view(
        sh(
            "reshape",
            Exact(1),
            &[attr("shape", K::Ints, D::Required)],
            reshape,
            "same elements, new shape; one extent may be -1",
        ),
        view::reshaped,
    ),
    with_view(
        sh(
            "permute",
            Exact(1),
            &[attr("perm", K::Ints, D::Required)],
            permute,
            "reorder axes: out.dims[i] = x.dims[perm[i]]",
        ),
        view::permuted,
    ),
    sh(
        "broadcast",
        Exact(1),
        &[attr("shape", K::Ints, D::Required)],
        broadcast,
        "NumPy broadcast_to",
    ),
    with_view(
        sh(
            "narrow",
            Exact(1),
            &[
                attr("axis", K::Int, D::Required),
                attr("start", K::Int, D::Required),
                attr("len", K::Int, D::Required),
            ],
            narrow,
            "contiguous range [start, start+len) of one axis",
        ),
        view::narrowed,
    ),
    sh(
        "slice",
        Exact(1),
        &[
            attr("starts", K::Ints, D::Required),
            attr("ends", K::Ints, D::Required),
            attr("axes", K::Ints, D::Ints(&[])),
            attr("steps", K::Ints, D::Ints(&[])),
        ],
        slice,
        "ONNX Slice: per-axis start/end/step (negative steps too), out-of-range bounds clamped",
    ),
    sh(
        "concat",
        AtLeast(1),
        &[attr("axis", K::Int, D::Required)],
        concat,
        "join along an existing axis",
    ),
    sh(
        "split",
        Exact(1),
        &[
            attr("axis", K::Int, D::Required),
            attr("sizes", K::Ints, D::Required),
        ],
        split,
        "cut one axis into pieces of the given sizes (one output each)",
    ),
    sh(
        "pad",
        Exact(1),
        &[
            attr("pads", K::Ints, D::Required),
            attr("mode", K::Str, D::Str("constant")),
            attr("value", K::Float, D::Float(0.0)),
        ],
        pad,
        "pad with a constant, by reflection (excluding the edge), or by repeating the edge",
    ),
    with_view(
        sh(
            "squeeze",
            Exact(1),
            &[attr("axes", K::Ints, D::Ints(&[]))],
            squeeze,
            "drop size-1 axes (all of them if axes = [])",
        ),
        view::reshaped,
    ),
    with_view(
        sh(
            "unsqueeze",
            Exact(1),
            &[attr("axes", K::Ints, D::Required)],
            unsqueeze,
            "insert size-1 axes at the given output positions",
        ),
        view::reshaped,
    ),
    sh(
        "flip",
        Exact(1),
        &[attr("axes", K::Ints, D::Required)],
        flip,
        "reverse the order along axes",
    ),
    sh(
        "roll",
        Exact(1),
        &[
            attr("shifts", K::Ints, D::Required),
            attr("axes", K::Ints, D::Required),
        ],
        roll,
        "rotate elements along axes (NumPy roll)",
    ),
    sh(
        "tile",
        Exact(1),
        &[attr("repeats", K::Ints, D::Required)],
        tile,
        "repeat the whole tensor along each axis",
    ),
];
