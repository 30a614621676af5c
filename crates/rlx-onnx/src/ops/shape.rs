//! Shape, movement, indexing and constant ops: most need values known at
//! import (a shape, axes, pads) and map onto one IR op.

use super::*;

/// ONNX `Transpose`.
pub(super) fn transpose(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let rank = n.dims(x).len() as i64;
    let perm = n.aints("perm").unwrap_or_else(|| (0..rank).rev().collect());
    n.one("permute", &[x], Attrs::new().with("perm", perm))
}

/// ONNX `Reshape`.
pub(super) fn reshape_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let shape = n.ints_in(1)?.ok_or("Reshape needs its shape input")?;
    let allowzero = n.ai("allowzero", 0) == 1;
    let shape: Vec<i64> = shape
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            if s == 0 && !allowzero {
                dims.get(i).map_or(0, |&d| d as i64)
            } else {
                s
            }
        })
        .collect();
    n.one("reshape", &[x], Attrs::new().with("shape", shape))
}

/// ONNX `Flatten`.
pub(super) fn flatten_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let axis = axis_in(n.ai("axis", 1), dims.len(), dims.len())?;
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis..].iter().product();
    n.one(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![outer as i64, inner as i64]),
    )
}

/// ONNX `Squeeze`, `Unsqueeze`.
pub(super) fn squeeze(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let axes = match n.aints("axes") {
        Some(a) => Some(a),
        None => n.ints_in(1)?,
    };
    let axes = match axes {
        Some(a) => a,
        None if op == "Squeeze" => n
            .dims(x)
            .iter()
            .enumerate()
            .filter(|(_, &d)| d == 1)
            .map(|(i, _)| i as i64)
            .collect(),
        None => return Err("Unsqueeze needs its axes".into()),
    };
    n.one(&op.to_lowercase(), &[x], Attrs::new().with("axes", axes))
}

/// ONNX `Concat`.
pub(super) fn concat_op(mut n: N, _op: &str) -> R {
    let node = n.node;
    let mut ins = Vec::new();
    for k in 0..node.input.len() {
        ins.push(n.v(k)?);
    }
    let axis = n.ai("axis", 0);
    n.one("concat", &ins, Attrs::new().with("axis", axis))
}

/// ONNX `Cast`.
pub(super) fn cast_op(mut n: N, _op: &str) -> R {
    let to = n.ai("to", 0) as i32;
    let target = match crate::tensor::Narrow::of(to) {
        Some(k) => Target::Narrow(k),
        None => Target::Plain(dtype_of(to)?),
    };
    cast_into(&mut n, target)
}

/// ONNX `BitCast`: the bits of each element as another type of its size.
pub(super) fn bitcast_op(mut n: N, _op: &str) -> R {
    let to = dtype_of(n.ai("to", 0) as i32)?;
    if n.name(0).and_then(|s| n.cx.narrow.get(s)).is_some() {
        return Err("BitCast of a float8 or 4-/2-bit tensor is not supported".into());
    }
    let x = n.v(0)?;
    n.one("bitcast", &[x], Attrs::new().with("dtype", to))
}

/// What a Cast makes: an rlx dtype, or a type rlx keeps wider.
enum Target {
    Plain(DType),
    Narrow(crate::tensor::Narrow),
}

/// Input 0 cast to `target`: float8 decoded from / encoded to its bits,
/// 4- and 2-bit integers wrapped as the reference's conversion does.
fn cast_into(n: &mut N, target: Target) -> R {
    use crate::tensor::Narrow;
    let x = n.v(0)?;
    let from = n.name(0).and_then(|s| n.cx.narrow.get(s)).copied();
    let x = match from {
        Some(Narrow::F8(k)) => super::float8::decode(n, x, k)?,
        _ => x, // narrow integers are held as their values
    };
    match target {
        Target::Narrow(Narrow::F8(crate::tensor::F8::E8M0)) => {
            let saturate = n.ai("saturate", 1) != 0;
            let mode = n.astr("round_mode").unwrap_or_else(|| "up".into());
            Ok(vec![Out::Value(super::float8::encode_e8m0(
                n, x, saturate, &mode,
            )?)])
        }
        Target::Narrow(Narrow::F8(k)) => {
            let saturate = n.ai("saturate", 1) != 0;
            Ok(vec![Out::Value(super::float8::encode(n, x, k, saturate)?)])
        }
        Target::Narrow(k @ Narrow::Int { bits, signed }) => Ok(vec![Out::Value(
            super::float8::wrap_int(n, x, bits, signed, k.storage())?,
        )]),
        Target::Plain(d) => n.one("cast", &[x], Attrs::new().with("dtype", d)),
    }
}

/// ONNX `Where`.
pub(super) fn where_op(mut n: N, _op: &str) -> R {
    let (c, a, b) = (n.v(0)?, n.v(1)?, n.v(2)?);
    n.one("where", &[c, a, b], Attrs::new())
}

/// ONNX `Gather`.
pub(super) fn gather_op(mut n: N, _op: &str) -> R {
    let (x, i) = (n.v(0)?, n.v(1)?);
    let axis = n.ai("axis", 0);
    n.one("gather", &[x, i], Attrs::new().with("axis", axis))
}

/// ONNX `Shape`, `Size`.
pub(super) fn shape_op(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let dims: Vec<i64> = n.dims(x).iter().map(|&d| d as i64).collect();
    let t = if op == "Size" {
        HostTensor::from_i64(DType::I64, Vec::<usize>::new(), vec![dims.iter().product()])
    } else {
        let r = dims.len() as i64;
        let clampi = |v: i64| rank_axis(v, r as usize).clamp(0, r) as usize;
        let (s, e) = (clampi(n.ai("start", 0)), clampi(n.ai("end", r)));
        let part = dims[s..e.max(s)].to_vec();
        HostTensor::from_i64(DType::I64, vec![part.len()], part)
    }
    .map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}

/// ONNX `Constant`.
pub(super) fn constant(n: N, _op: &str) -> R {
    let node = n.node;
    let a = node.attribute.first().ok_or("Constant without a value")?;
    let t = match a.name() {
        "value" => to_host(a.t.as_ref().ok_or("Constant `value` without a tensor")?)
            .map_err(|e| e.to_string())?,
        "value_float" => HostTensor::from_f64(DType::F32, Vec::<usize>::new(), vec![a.f() as f64])
            .map_err(|e| e.to_string())?,
        "value_int" => HostTensor::from_i64(DType::I64, Vec::<usize>::new(), vec![a.i()])
            .map_err(|e| e.to_string())?,
        "value_floats" => HostTensor::from_f64(
            DType::F32,
            vec![a.floats.len()],
            a.floats.iter().map(|&x| x as f64).collect(),
        )
        .map_err(|e| e.to_string())?,
        "value_ints" => HostTensor::from_i64(DType::I64, vec![a.ints.len()], a.ints.clone())
            .map_err(|e| e.to_string())?,
        other => return Err(format!("Constant `{other}` is not supported yet")),
    };
    Ok(vec![Out::Const(t)])
}

/// ONNX `Expand`.
pub(super) fn expand_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let want = n.ints_in(1)?.ok_or("Expand needs its shape")?;
    let dims = n.dims(x);
    // NumPy broadcasting of the input's shape and the given one.
    let r = dims.len().max(want.len());
    let pad = |v: Vec<i64>| -> Vec<i64> { std::iter::repeat_n(1, r - v.len()).chain(v).collect() };
    let (a, b) = (pad(dims.iter().map(|&d| d as i64).collect()), pad(want));
    let out: Vec<i64> = a
        .iter()
        .zip(&b)
        .map(|(&p, &q)| if p == 1 { q } else { p })
        .collect();
    n.one("broadcast", &[x], Attrs::new().with("shape", out))
}

/// ONNX `Tile`.
pub(super) fn tile_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let reps = n.ints_in(1)?.ok_or("Tile needs its repeats")?;
    n.one("tile", &[x], Attrs::new().with("repeats", reps))
}

/// ONNX `Trilu`.
pub(super) fn trilu(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let r = dims.len();
    if r < 2 {
        return Err("Trilu needs a rank of at least 2".into());
    }
    let k = n.ints_in(1)?.and_then(|v| v.first().copied()).unwrap_or(0);
    let upper = n.ai("upper", 1) == 1;
    let (rows, cols) = (dims[r - 2], dims[r - 1]);
    let keep: Vec<bool> = (0..rows * cols)
        .map(|e| {
            let (i, j) = ((e / cols) as i64, (e % cols) as i64);
            if upper {
                j - i >= k
            } else {
                j - i <= k
            }
        })
        .collect();
    let m = HostTensor::from_slice(&keep, [rows, cols]).map_err(|e| e.to_string())?;
    let m = n.cx.b.constant(m).map_err(|e| e.to_string())?;
    let d = n.cx.b.dtype(x);
    let z = n.scalar(0.0, d)?;
    n.one("where", &[m, x, z], Attrs::new())
}

/// ONNX `Slice`.
pub(super) fn slice_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let rank = n.dims(x).len() as i64;
    // Attributes before opset 10, inputs after.
    let (starts, ends, axes, steps) = if n.cx.opset < 10 {
        let st = n.aints("starts").ok_or("Slice without starts")?;
        let en = n.aints("ends").ok_or("Slice without ends")?;
        let ax = n
            .aints("axes")
            .unwrap_or_else(|| (0..st.len() as i64).collect());
        let sp = vec![1; st.len()];
        (st, en, ax, sp)
    } else {
        let st = n.ints_in(1)?.ok_or("Slice without starts")?;
        let en = n.ints_in(2)?.ok_or("Slice without ends")?;
        let ax = n
            .ints_in(3)?
            .unwrap_or_else(|| (0..st.len() as i64).collect());
        let sp = n.ints_in(4)?.unwrap_or_else(|| vec![1; st.len()]);
        (st, en, ax, sp)
    };
    let axes: Vec<i64> = axes.iter().map(|&a| rank_axis(a, rank as usize)).collect();
    n.one(
        "slice",
        &[x],
        Attrs::new()
            .with("starts", starts)
            .with("ends", ends)
            .with("axes", axes)
            .with("steps", steps),
    )
}

/// ONNX `Split`.
pub(super) fn split_op(mut n: N, _op: &str) -> R {
    let node = n.node;
    let x = n.v(0)?;
    let dims = n.dims(x);
    let axis = axis_in(n.ai("axis", 0), dims.len(), dims.len().saturating_sub(1))?;
    let extent = *dims.get(axis).ok_or("Split of a scalar")? as i64;
    let axis = axis as i64;
    let sizes = match n.aints("split") {
        Some(s) => s,
        None => match n.ints_in(1)? {
            Some(s) => s,
            None => {
                let parts = node.output.len().max(1) as i64;
                if n.ai("num_outputs", parts) != parts {
                    return Err("num_outputs differs from the node's outputs".into());
                }
                let each = (extent + parts - 1) / parts;
                (0..parts)
                    .map(|k| (extent - k * each).clamp(0, each))
                    .collect()
            }
        },
    };
    let outs =
        n.cx.b
            .op(
                "split",
                &[x],
                Attrs::new().with("axis", axis).with("sizes", sizes),
            )
            .map_err(|e| e.to_string())?;
    Ok(outs.into_iter().map(Out::Value).collect())
}

/// ONNX `CastLike`.
pub(super) fn cast_like(mut n: N, _op: &str) -> R {
    let like = n.v(1)?;
    let target = match n.name(1).and_then(|s| n.cx.narrow.get(s)).copied() {
        Some(k) => Target::Narrow(k),
        None => Target::Plain(n.cx.b.dtype(like)),
    };
    cast_into(&mut n, target)
}

/// ONNX `Range`.
pub(super) fn range_op(n: N, _op: &str) -> R {
    let (start, limit, delta) = (
        n.float_in(0)?.ok_or("Range without start")?,
        n.float_in(1)?.ok_or("Range without limit")?,
        n.float_in(2)?.ok_or("Range without delta")?,
    );
    let d = n.const_in(0)?.map_or(DType::F32, |t| t.dtype());
    let count = ((limit - start) / delta).ceil();
    if !count.is_finite() {
        return Err(format!(
            "Range({start}, {limit}, {delta}) has no finite length"
        ));
    }
    let count = count.max(0.0) as usize;
    check_elems(d, count)?;
    let vals: Vec<f64> = (0..count).map(|i| start + i as f64 * delta).collect();
    let t = HostTensor::from_f64(d, vec![count], vals).map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}

/// ONNX `ConstantOfShape`.
pub(super) fn constant_of_shape(n: N, _op: &str) -> R {
    let shape = n.ints_in(0)?.ok_or("ConstantOfShape needs its shape")?;
    let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let (d, x) = match n.attr("value").and_then(|a| a.t.as_ref()) {
        Some(t) => {
            let h = to_host(t).map_err(|e| e.to_string())?;
            (
                h.dtype(),
                h.to_f64_vec()
                    .map_err(|e| e.to_string())?
                    .first()
                    .copied()
                    .unwrap_or(0.0),
            )
        }
        None => (DType::F32, 0.0),
    };
    let numel = check_elems_of(d, &dims)?;
    let t = HostTensor::from_f64(d, dims, vec![x; numel]).map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}

/// ONNX `GatherElements`.
pub(super) fn gather_elements(mut n: N, _op: &str) -> R {
    let (x, i) = (n.v(0)?, n.v(1)?);
    let axis = n.ai("axis", 0);
    n.one("gather_elements", &[x, i], Attrs::new().with("axis", axis))
}

/// ONNX `Pad`.
pub(super) fn pad_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let rank = n.dims(x).len();
    let mode = n.astr("mode").unwrap_or_else(|| "constant".into());
    let (pads, value) = if n.cx.opset < 11 {
        (
            n.aints("pads").ok_or("Pad without pads")?,
            n.af("value", 0.0),
        )
    } else {
        let p = n.ints_in(1)?.ok_or("Pad without pads")?;
        let v = n.float_in(2)?.unwrap_or(0.0);
        (p, v)
    };
    let pads = match n.ints_in(3)? {
        // Pads for some axes only (opset 18).
        Some(axes) => {
            let mut full = vec![0i64; 2 * rank];
            if pads.len() != 2 * axes.len() {
                return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
            }
            for (k, &a) in axes.iter().enumerate() {
                let a = axis_in(a, rank, rank.saturating_sub(1))?;
                full[a] = pads[k];
                full[rank + a] = pads[axes.len() + k];
            }
            full
        }
        None => pads,
    };
    if pads.iter().any(|&p| p < 0) {
        return Err("negative pads (cropping) are not supported yet".into());
    }
    if mode == "wrap" {
        // The input repeated around itself: per axis, its last `begin`
        // positions before it and its first `end` after it.
        let mut y = x;
        for a in 0..rank {
            let (b, e, len) = (pads[a], pads[rank + a], n.dims(y)[a] as i64);
            if b == 0 && e == 0 {
                continue;
            }
            if b > len || e > len {
                return Err(format!("wrap pads ({b}, {e}) exceed axis {a} of {len}"));
            }
            let cut = |n: &mut N, start: i64, l: i64| {
                n.op(
                    "narrow",
                    &[y],
                    Attrs::new()
                        .with("axis", a as i64)
                        .with("start", start)
                        .with("len", l),
                )
            };
            let mut parts = Vec::new();
            if b > 0 {
                parts.push(cut(&mut n, len - b, b)?);
            }
            parts.push(y);
            if e > 0 {
                parts.push(cut(&mut n, 0, e)?);
            }
            y = n.op("concat", &parts, Attrs::new().with("axis", a as i64))?;
        }
        return Ok(vec![Out::Value(y)]);
    }
    n.one(
        "pad",
        &[x],
        Attrs::new()
            .with("pads", pads)
            .with("mode", mode)
            .with("value", value),
    )
}

/// ONNX `ScatterElements`.
pub(super) fn scatter_elements(mut n: N, _op: &str) -> R {
    let red = n.astr("reduction").unwrap_or_else(|| "none".into());
    let (x, i, u) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let axis = n.ai("axis", 0);
    let r = match red.as_str() {
        "none" => "scatter",
        "add" => "scatter_add",
        "mul" | "max" | "min" => return scatter_elements_nd(&mut n, x, i, u, axis, &red),
        o => return Err(format!("reduction = {o:?}")),
    };
    n.one(r, &[x, i, u], Attrs::new().with("axis", axis))
}

/// ScatterElements with a reduction the IR's `scatter` lacks, as
/// `scatter_nd`: every index element's full coordinate — its own position
/// on every axis but `axis`, the index there.
fn scatter_elements_nd(n: &mut N, x: ValueId, i: ValueId, u: ValueId, axis: i64, red: &str) -> R {
    let (xd, id) = (n.dims(x), n.dims(i));
    let rank = xd.len();
    let a = axis_in(axis, rank, rank.saturating_sub(1))?;
    if id.len() != rank {
        return Err(format!("indices {id:?} must have the rank of data {xd:?}"));
    }
    // Negative indices count from the end.
    let i64v = n.cast_to(i, DType::I64)?;
    let (zero, ext) = (
        n.scalar(0.0, DType::I64)?,
        n.scalar(xd[a] as f64, DType::I64)?,
    );
    let neg = n.op("lt", &[i64v, zero], Attrs::new())?;
    let up = n.op("add", &[i64v, ext], Attrs::new())?;
    let iv = n.op("where", &[neg, up, i64v], Attrs::new())?;
    let mut cols = Vec::with_capacity(rank);
    for k in 0..rank {
        let col = if k == a {
            iv
        } else {
            super::index::coordinate(n, &id, k)?
        };
        cols.push(n.op(
            "unsqueeze",
            &[col],
            Attrs::new().with("axes", vec![rank as i64]),
        )?);
    }
    let coords = n.op("concat", &cols, Attrs::new().with("axis", rank as i64))?;
    n.one(
        "scatter_nd",
        &[x, coords, u],
        Attrs::new().with("reduction", red),
    )
}
