//! Indexing ops: GatherND, ScatterND, OneHot, Compress, EyeLike,
//! CenterCropPad — onto the IR's gathers and scatters, or constants when
//! everything is known at import.

use super::*;

/// ONNX `GatherND`.
pub(super) fn gather_nd(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let b = n.ai("batch_dims", 0);
    // Indices known at import (a mask's row selection in exported
    // transformers): a plain gather of rows of x with its leading axes
    // flattened — every backend has gather; not every one gather_nd.
    if b == 0 {
        if let Some(idx) = n.name(1).and_then(|s| n.cx.consts.get(s)).cloned() {
            if let Some(out) = gather_nd_rows(&mut n, x, &idx)? {
                return Ok(vec![Out::Value(out)]);
            }
        }
    }
    let i = n.v(1)?;
    n.one("gather_nd", &[x, i], Attrs::new().with("batch_dims", b))
}

/// GatherND (no batch axes) with constant indices as a gather of rows:
/// `None` when the indices are not integers of a usable shape.
fn gather_nd_rows(n: &mut N, x: ValueId, idx: &HostTensor) -> Result<Option<ValueId>, String> {
    let (xd, id) = (n.dims(x), idx.shape().dims().to_vec());
    let Some(&k) = id.last() else { return Ok(None) };
    if k == 0 || k > xd.len() {
        return Ok(None);
    }
    let Ok(vals) = idx.to_i64_vec() else {
        return Ok(None);
    };
    let mut lin = Vec::with_capacity(vals.len() / k);
    for row in vals.chunks(k) {
        let mut at = 0i64;
        for (j, &v) in row.iter().enumerate() {
            let d = xd[j] as i64;
            let v = if v < 0 { v + d } else { v };
            if !(0..d).contains(&v) {
                return Err(format!("index {v} is out of range for an axis of {d}"));
            }
            at = at * d + v;
        }
        lin.push(at as f64);
    }
    let lead: usize = xd[..k].iter().product();
    let mut shape = vec![lead as i64];
    shape.extend(xd[k..].iter().map(|&d| d as i64));
    let xr = n.op("reshape", &[x], Attrs::new().with("shape", shape))?;
    let t = HostTensor::from_f64(DType::I64, id[..id.len() - 1].to_vec(), lin)
        .map_err(|e| e.to_string())?;
    let t = n.cx.b.constant(t).map_err(|e| e.to_string())?;
    Ok(Some(n.op(
        "gather",
        &[xr, t],
        Attrs::new().with("axis", 0i64),
    )?))
}

/// ONNX `ScatterND` (reduction none, add, mul, max, min).
pub(super) fn scatter_nd(mut n: N, _op: &str) -> R {
    let red = n.astr("reduction").unwrap_or_else(|| "none".into());
    let (x, i, u) = (n.v(0)?, n.v(1)?, n.v(2)?);
    n.one(
        "scatter_nd",
        &[x, i, u],
        Attrs::new().with("reduction", red),
    )
}

/// ONNX `OneHot`: `values[1]` at the index, `values[0]` elsewhere;
/// indices in `[-depth, depth)` (negative ones count from the end), any
/// numeric type.
pub(super) fn one_hot(mut n: N, _op: &str) -> R {
    let depth = n.float_in(1)?.ok_or("OneHot needs its depth")?;
    if !(0.0..=i64::MAX as f64).contains(&depth) {
        return Err(format!("depth {depth} must be a non-negative integer"));
    }
    let depth = depth as i64;
    let idx = n.v(0)?;
    let idx = n.cast_to(idx, DType::I64)?;
    let (zero, dep) = (
        n.scalar(0.0, DType::I64)?,
        n.scalar(depth as f64, DType::I64)?,
    );
    let neg = n.op("lt", &[idx, zero], Attrs::new())?;
    let up = n.op("add", &[idx, dep], Attrs::new())?;
    let idx = n.op("where", &[neg, up, idx], Attrs::new())?;
    let values = n.v(2)?;
    if n.dims(values) != [2] {
        return Err(format!(
            "values must hold 2 elements, got {:?}",
            n.dims(values)
        ));
    }
    let axis = n.ai("axis", -1);
    let hot = n.op(
        "one_hot",
        &[idx],
        Attrs::new()
            .with("depth", depth)
            .with("axis", axis)
            .with("dtype", DType::Bool),
    )?;
    let pick = |n: &mut N, k: i64| {
        n.op(
            "narrow",
            &[values],
            Attrs::new()
                .with("axis", 0i64)
                .with("start", k)
                .with("len", 1i64),
        )
    };
    let (off, on) = (pick(&mut n, 0)?, pick(&mut n, 1)?);
    n.one("where", &[hot, on, off], Attrs::new())
}

/// ONNX `Compress`: the condition must be known at import (the output's
/// length depends on it); it becomes a gather of the kept positions.
pub(super) fn compress(mut n: N, _op: &str) -> R {
    let cond = n
        .const_in(1)?
        .ok_or("Compress needs its condition")?
        .to_f64_vec()
        .map_err(|e| e.to_string())?;
    let mut x = n.v(0)?;
    let axis = match n.attr("axis") {
        Some(a) => {
            let rank = n.dims(x).len();
            axis_in(a.i(), rank, rank.saturating_sub(1))?
        }
        None => {
            let numel: usize = n.dims(x).iter().product();
            x = n.op(
                "reshape",
                &[x],
                Attrs::new().with("shape", vec![numel as i64]),
            )?;
            0
        }
    };
    let len = n.dims(x)[axis];
    if cond.len() > len {
        return Err(format!(
            "the condition has {} entries for an axis of {len}",
            cond.len()
        ));
    }
    let keep: Vec<f64> = (0..cond.len())
        .filter(|&i| cond[i] != 0.0)
        .map(|i| i as f64)
        .collect();
    let idx =
        HostTensor::from_f64(DType::I64, vec![keep.len()], keep).map_err(|e| e.to_string())?;
    let idx = n.cx.b.constant(idx).map_err(|e| e.to_string())?;
    n.one("gather", &[x, idx], Attrs::new().with("axis", axis))
}

/// ONNX `EyeLike`: a constant of the input's shape, ones on diagonal `k`.
pub(super) fn eye_like(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    if dims.len() != 2 {
        return Err(format!("the input must be 2-D, got {dims:?}"));
    }
    let d = match n.attr("dtype") {
        Some(a) => dtype_of(a.i() as i32)?,
        None => n.cx.b.dtype(x),
    };
    let k = n.ai("k", 0);
    let numel = check_elems_of(d, &dims)?;
    let mut v = vec![0.0; numel];
    // Only the rows whose diagonal column exists: r + k in 0..cols (a
    // zero-width input of 2³¹ rows must not loop over them).
    let (rows, cols) = (dims[0] as i64, dims[1] as i64);
    for r in (-k).max(0)..rows.min(cols.saturating_sub(k)) {
        v[(r * cols + r + k) as usize] = 1.0;
    }
    let t = HostTensor::from_f64(d, dims, v).map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}

/// ONNX `CenterCropPad`: per axis, crop the centre (start
/// `(in − out) / 2`) or pad around it (`(out − in) / 2` before).
pub(super) fn center_crop_pad(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let rank = dims.len();
    let shape = n.ints_in(1)?.ok_or("CenterCropPad needs its shape")?;
    let axes: Vec<usize> = match n.aints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| axis_in(a, rank, rank.saturating_sub(1)))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if shape.len() != axes.len() || shape.iter().any(|&s| s < 0) {
        return Err(format!("shape {shape:?} does not fit axes {axes:?}"));
    }
    let (mut starts, mut ends) = (vec![0i64; rank], vec![0i64; rank]);
    let mut pads = vec![0i64; 2 * rank];
    for (i, d) in dims.iter().enumerate() {
        ends[i] = *d as i64;
    }
    for (&a, &want) in axes.iter().zip(&shape) {
        let have = dims[a] as i64;
        if want < have {
            starts[a] = (have - want) / 2;
            ends[a] = starts[a] + want;
        } else {
            pads[a] = (want - have) / 2;
            pads[rank + a] = want - have - pads[a];
        }
    }
    let axes_all: Vec<i64> = (0..rank as i64).collect();
    let y = n.op(
        "slice",
        &[x],
        Attrs::new()
            .with("starts", starts)
            .with("ends", ends)
            .with("axes", axes_all),
    )?;
    n.one("pad", &[y], Attrs::new().with("pads", pads))
}

/// An iota along axis `k` of `dims`: every element's coordinate on that
/// axis, as an i64 constant of shape `dims`.
pub(super) fn coordinate(n: &mut N, dims: &[usize], k: usize) -> Result<ValueId, String> {
    let numel = check_elems_of(DType::I64, dims)?;
    let inner: usize = dims[k + 1..].iter().product();
    let v: Vec<f64> = (0..numel)
        .map(|e| ((e / inner.max(1)) % dims[k].max(1)) as f64)
        .collect();
    let t = HostTensor::from_f64(DType::I64, dims.to_vec(), v).map_err(|e| e.to_string())?;
    n.cx.b.constant(t).map_err(|e| e.to_string())
}

/// ONNX `TensorScatter` (a KV cache's write): `update` written into
/// `past_cache` along `axis` from each batch item's `write_indices` on
/// (wrapping around in circular mode), as a `scatter_nd` over the full
/// coordinates of the update's elements.
pub(super) fn tensor_scatter(mut n: N, _op: &str) -> R {
    let (cache, upd) = (n.v(0)?, n.v(1)?);
    let (cd, ud) = (n.dims(cache), n.dims(upd));
    let rank = cd.len();
    let axis = axis_in(n.ai("axis", -2), rank, rank.saturating_sub(1))?;
    let circular = match n.astr("mode").as_deref().unwrap_or("linear") {
        "linear" => false,
        "circular" => true,
        o => return Err(format!("mode {o:?}")),
    };
    if ud.len() != rank
        || (0..rank).any(|i| {
            if i == axis {
                ud[i] > cd[i]
            } else {
                ud[i] != cd[i]
            }
        })
        || axis == 0
    {
        return Err(format!(
            "update {ud:?} does not fit cache {cd:?} along axis {axis}"
        ));
    }
    let mut cols = Vec::with_capacity(rank);
    for k in 0..rank {
        let mut col = coordinate(&mut n, &ud, k)?;
        if k == axis {
            // + write_indices[batch] (zeros when absent), wrapped if circular.
            if n.name(2).is_some() {
                let wi = n.v(2)?;
                let wi = n.cast_to(wi, DType::I64)?;
                let batch = coordinate(&mut n, &ud, 0)?;
                let start = n.op("gather", &[wi, batch], Attrs::new().with("axis", 0i64))?;
                col = n.op("add", &[col, start], Attrs::new())?;
            }
            if circular {
                let m = n.scalar(cd[axis] as f64, DType::I64)?;
                col = n.op("rem", &[col, m], Attrs::new())?;
            }
        }
        cols.push(n.op(
            "unsqueeze",
            &[col],
            Attrs::new().with("axes", vec![rank as i64]),
        )?);
    }
    let coords = n.op("concat", &cols, Attrs::new().with("axis", rank as i64))?;
    n.one(
        "scatter_nd",
        &[cache, coords, upd],
        Attrs::new().with("reduction", "none"),
    )
}

/// ONNX `ReverseSequence`: along `time_axis`, each batch item's first
/// `sequence_lens[b]` steps reversed, the rest kept — a `gather_elements`
/// with the reversed positions.
pub(super) fn reverse_sequence(mut n: N, _op: &str) -> R {
    let (x, lens) = (n.v(0)?, n.v(1)?);
    let d = n.dims(x);
    let rank = d.len();
    let (ba, ta) = (n.ai("batch_axis", 1), n.ai("time_axis", 0));
    let (ba, ta) = (
        axis_in(ba, rank, rank.saturating_sub(1))?,
        axis_in(ta, rank, rank.saturating_sub(1))?,
    );
    if ba == ta || rank < 2 {
        return Err(format!(
            "batch_axis {ba} and time_axis {ta} of a rank-{rank} input"
        ));
    }
    let t = coordinate(&mut n, &d, ta)?;
    let b = coordinate(&mut n, &d, ba)?;
    let lens = n.cast_to(lens, DType::I64)?;
    let l = n.op("gather", &[lens, b], Attrs::new().with("axis", 0i64))?;
    let inside = n.op("lt", &[t, l], Attrs::new())?;
    let one = n.scalar(1.0, DType::I64)?;
    let lm = n.op("sub", &[l, one], Attrs::new())?;
    let rev = n.op("sub", &[lm, t], Attrs::new())?;
    let idx = n.op("where", &[inside, rev, t], Attrs::new())?;
    n.one(
        "gather_elements",
        &[x, idx],
        Attrs::new().with("axis", ta as i64),
    )
}
