//! Ops whose output size depends on their input values — `NonZero`,
//! `Unique`, `NonMaxSuppression`. rlx's graphs have static shapes, so
//! these run at import, on inputs known at import (initializers, or
//! inputs bound with `ImportOptions::constants`); a run-time input is an
//! error that names it. Each follows ONNX's reference (orders, ties).

use super::*;
use std::cmp::Ordering;

/// Input `k`, required and known at import.
fn known(n: &N, k: usize) -> Result<HostTensor, String> {
    n.const_in(k)
        .map_err(|e| format!("{e}; its output's size depends on its values"))?
        .cloned()
        .ok_or_else(|| format!("input {k} is missing"))
}

fn i64_tensor(shape: Vec<usize>, v: Vec<i64>) -> Result<Out, String> {
    HostTensor::from_i64(DType::I64, shape, v)
        .map(Out::Const)
        .map_err(|e| e.to_string())
}

/// ONNX `NonZero`: the indices of the non-zero elements, [rank, count],
/// in row-major order.
pub(super) fn non_zero(n: N, _op: &str) -> R {
    let x = known(&n, 0)?;
    let v = x.to_f64_vec().map_err(|e| e.to_string())?;
    let dims = x.shape().dims().to_vec();
    let hits: Vec<usize> = (0..v.len()).filter(|&i| v[i] != 0.0).collect();
    let mut out = vec![0i64; dims.len() * hits.len()];
    for (j, &flat) in hits.iter().enumerate() {
        let mut r = flat;
        for a in (0..dims.len()).rev() {
            out[a * hits.len() + j] = (r % dims[a]) as i64;
            r /= dims[a];
        }
    }
    Ok(vec![i64_tensor(vec![dims.len(), hits.len()], out)?])
}

/// ONNX `Unique`: the distinct elements (or slices along `axis`), sorted
/// ascending or in order of first appearance; with the index of each one's
/// first appearance, each input's index into them, and their counts.
pub(super) fn unique(n: N, _op: &str) -> R {
    let x = known(&n, 0)?;
    let sorted = n.ai("sorted", 1) != 0;
    let dims = x.shape().dims().to_vec();
    // Work on [outer, len, inner]: the slices are x[o, i, :] over o.
    let (axis, flat) = match n.attr("axis") {
        Some(a) => (Some(rank_axis(a.i(), dims.len()) as usize), false),
        None => (None, true),
    };
    let (outer, len, inner) = match axis {
        Some(a) if a < dims.len() => (
            dims[..a].iter().product::<usize>(),
            dims[a],
            dims[a + 1..].iter().product::<usize>(),
        ),
        Some(a) => return Err(format!("axis {a} is outside rank {}", dims.len())),
        None => (1, x.numel(), 1),
    };
    // Elements compared exactly in their own domain (f64 holds every
    // float; i128 every integer, u64 above i64::MAX included).
    enum Vals {
        F(Vec<f64>),
        I(Vec<i128>),
    }
    let vals = if x.dtype().is_float() {
        Vals::F(x.to_f64_vec().map_err(|e| e.to_string())?)
    } else {
        let u64s = x.dtype() == DType::U64;
        let v = x.to_i64_vec().map_err(|e| e.to_string())?;
        Vals::I(
            v.into_iter()
                .map(|b| if u64s { b as u64 as i128 } else { b as i128 })
                .collect(),
        )
    };
    let elem = |a: usize, b: usize| match &vals {
        Vals::F(v) => v[a].total_cmp(&v[b]),
        Vals::I(v) => v[a].cmp(&v[b]),
    };
    // Slice i: the flat positions of x[o, i, :] over o.
    let slice = |i: usize| -> Vec<usize> {
        (0..outer)
            .flat_map(|o| (o * len + i) * inner..(o * len + i + 1) * inner)
            .collect()
    };
    let cmp = |a: &[usize], b: &[usize]| -> Ordering {
        a.iter()
            .zip(b)
            .map(|(&p, &q)| elem(p, q))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    // Distinct slices in order of first appearance.
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse = vec![0usize; len];
    let mut counts: Vec<i64> = Vec::new();
    let slices: Vec<Vec<usize>> = (0..len).map(slice).collect();
    for i in 0..len {
        match firsts
            .iter()
            .position(|&f| cmp(&slices[f], &slices[i]).is_eq())
        {
            Some(u) => {
                inverse[i] = u;
                counts[u] += 1;
            }
            None => {
                inverse[i] = firsts.len();
                firsts.push(i);
                counts.push(1);
            }
        }
    }
    let mut order: Vec<usize> = (0..firsts.len()).collect();
    if sorted {
        order.sort_by(|&a, &b| cmp(&slices[firsts[a]], &slices[firsts[b]]));
    }
    let mut rank = vec![0usize; order.len()];
    for (r, &u) in order.iter().enumerate() {
        rank[u] = r;
    }
    let k = order.len();
    // Y: the unique slices put back along the axis, gathered from x (its
    // own dtype, exact).
    let mut take = vec![0usize; outer * k * inner];
    for (r, &u) in order.iter().enumerate() {
        let s = &slices[firsts[u]];
        for o in 0..outer {
            take[(o * k + r) * inner..(o * k + r + 1) * inner]
                .copy_from_slice(&s[o * inner..(o + 1) * inner]);
        }
    }
    let yshape = if flat {
        vec![k]
    } else {
        let mut d = dims.clone();
        d[axis.unwrap_or(0)] = k;
        d
    };
    let y = x.take(&take, yshape).map_err(|e| e.to_string())?;
    let indices: Vec<i64> = order.iter().map(|&u| firsts[u] as i64).collect();
    let inv: Vec<i64> = inverse.iter().map(|&u| rank[u] as i64).collect();
    let cnt: Vec<i64> = order.iter().map(|&u| counts[u]).collect();
    Ok(vec![
        Out::Const(y),
        i64_tensor(vec![k], indices)?,
        i64_tensor(vec![len], inv)?,
        i64_tensor(vec![k], cnt)?,
    ])
}

/// ONNX `NonMaxSuppression`: per batch and class, boxes by descending
/// score (ties: lower index first) above `score_threshold`, each kept
/// unless its IoU with a kept box exceeds `iou_threshold`, at most
/// `max_output_boxes_per_class`; [selected, 3] (batch, class, box).
pub(super) fn non_max_suppression(n: N, _op: &str) -> R {
    let boxes = known(&n, 0)?;
    let scores = known(&n, 1)?;
    let first = |k: usize| -> Result<Option<f64>, String> {
        match n.name(k) {
            None => Ok(None),
            Some(_) => Ok(known(&n, k)?
                .to_f64_vec()
                .map_err(|e| e.to_string())?
                .first()
                .copied()),
        }
    };
    let max_out = first(2)?.map_or(0, |m| m.max(0.0) as usize);
    let iou_t = first(3)?.unwrap_or(0.0);
    let score_t = first(4)?;
    let center = n.ai("center_point_box", 0) != 0;
    let (bd, sd) = (
        boxes.shape().dims().to_vec(),
        scores.shape().dims().to_vec(),
    );
    if bd.len() != 3 || bd[2] != 4 || sd.len() != 3 || sd[0] != bd[0] || sd[2] != bd[1] {
        return Err(format!(
            "boxes {bd:?} and scores {sd:?} (want [B, N, 4] and [B, C, N])"
        ));
    }
    let (nb, nc, nbox) = (bd[0], sd[1], bd[1]);
    let bv = boxes.to_f64_vec().map_err(|e| e.to_string())?;
    let sv = scores.to_f64_vec().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in 0..nb {
        let bx = |i: usize| -> [f64; 4] {
            let o = (b * nbox + i) * 4;
            [bv[o], bv[o + 1], bv[o + 2], bv[o + 3]]
        };
        for c in 0..nc {
            let s = &sv[(b * nc + c) * nbox..(b * nc + c + 1) * nbox];
            let mut cand: Vec<usize> = (0..nbox)
                .filter(|&i| score_t.is_none_or(|t| s[i] > t))
                .collect();
            cand.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept
                    .iter()
                    .all(|&k| !suppresses(bx(i), bx(k), center, iou_t))
                {
                    kept.push(i);
                    out.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    let rows = out.len() / 3;
    Ok(vec![i64_tensor(vec![rows, 3], out)?])
}

/// Whether boxes `a` and `b` overlap by an IoU above `t` (the reference's
/// arithmetic: corners in either order, or centre and size).
fn suppresses(a: [f64; 4], b: [f64; 4], center: bool, t: f64) -> bool {
    let span = |lo: f64, hi: f64| if lo <= hi { (lo, hi) } else { (hi, lo) };
    let ((ax0, ax1), (ay0, ay1), (bx0, bx1), (by0, by1)) = if center {
        (
            (a[0] - a[2] / 2.0, a[0] + a[2] / 2.0),
            (a[1] - a[3] / 2.0, a[1] + a[3] / 2.0),
            (b[0] - b[2] / 2.0, b[0] + b[2] / 2.0),
            (b[1] - b[3] / 2.0, b[1] + b[3] / 2.0),
        )
    } else {
        (
            span(a[1], a[3]),
            span(a[0], a[2]),
            span(b[1], b[3]),
            span(b[0], b[2]),
        )
    };
    let (ix0, ix1) = (ax0.max(bx0), ax1.min(bx1));
    let (iy0, iy1) = (ay0.max(by0), ay1.min(by1));
    if ix1 <= ix0 || iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    let (area_a, area_b) = ((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0));
    let union = area_a + area_b - inter;
    if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > t
}
