//! ONNX `GridSample` and `AffineGrid`. The sampling grid is a run-time
//! tensor, so GridSample's taps are computed in the graph: per spatial
//! axis the source coordinate (denormalized, rounded for nearest, brought
//! into range by the padding mode), the neighbours it reads and their
//! weights; each combination of neighbours is one `gather_elements` over
//! the flattened input plane, weighted and summed — the ONNX reference's
//! rules, step by step.

use super::*;

/// Keys' cubic convolution weights (a = −0.75) of the 4 neighbours at
/// fraction `t`.
fn cubic_weights(n: &mut N, t: ValueId) -> Result<Vec<ValueId>, String> {
    let a = -0.75;
    // w(d) for |d| ≤ 1: (a+2)d³ − (a+3)d² + 1; for 1 < |d| < 2: ad³ − 5ad² + 8ad − 4a.
    let near = |n: &mut N, d: ValueId| -> Result<ValueId, String> {
        let d2 = n.op("mul", &[d, d], Attrs::new())?;
        let d3 = n.op("mul", &[d2, d], Attrs::new())?;
        let c3 = n.scalar(a + 2.0, DType::F32)?;
        let c2 = n.scalar(a + 3.0, DType::F32)?;
        let one = n.scalar(1.0, DType::F32)?;
        let t3 = n.op("mul", &[d3, c3], Attrs::new())?;
        let t2 = n.op("mul", &[d2, c2], Attrs::new())?;
        let s = n.op("sub", &[t3, t2], Attrs::new())?;
        n.op("add", &[s, one], Attrs::new())
    };
    let far = |n: &mut N, d: ValueId| -> Result<ValueId, String> {
        let d2 = n.op("mul", &[d, d], Attrs::new())?;
        let d3 = n.op("mul", &[d2, d], Attrs::new())?;
        let (ca, c5, c8, c4) = (
            n.scalar(a, DType::F32)?,
            n.scalar(5.0 * a, DType::F32)?,
            n.scalar(8.0 * a, DType::F32)?,
            n.scalar(4.0 * a, DType::F32)?,
        );
        let t3 = n.op("mul", &[d3, ca], Attrs::new())?;
        let t2 = n.op("mul", &[d2, c5], Attrs::new())?;
        let t1 = n.op("mul", &[d, c8], Attrs::new())?;
        let s = n.op("sub", &[t3, t2], Attrs::new())?;
        let s = n.op("add", &[s, t1], Attrs::new())?;
        n.op("sub", &[s, c4], Attrs::new())
    };
    let (one, two) = (n.scalar(1.0, DType::F32)?, n.scalar(2.0, DType::F32)?);
    let tp1 = n.op("add", &[t, one], Attrs::new())?;
    let omt = n.op("sub", &[one, t], Attrs::new())?;
    let tmt = n.op("sub", &[two, t], Attrs::new())?;
    Ok(vec![far(n, tp1)?, near(n, t)?, near(n, omt)?, far(n, tmt)?])
}

/// `v` reflected into [lo, hi] by its nearer border, as often as needed
/// (the reference's `_gs_reflect`).
fn reflect(n: &mut N, v: ValueId, lo: f64, hi: f64) -> Result<ValueId, String> {
    let f = |n: &mut N, x: f64| n.scalar(x, DType::F32);
    let (lov, hiv, rng, two) = (f(n, lo)?, f(n, hi)?, f(n, hi - lo)?, f(n, 2.0)?);
    // Below: dx = lo − v; above: dx = v − hi.
    let below = n.op("lt", &[v, lov], Attrs::new())?;
    let above = n.op("gt", &[v, hiv], Attrs::new())?;
    let dlo = n.op("sub", &[lov, v], Attrs::new())?;
    let dhi = n.op("sub", &[v, hiv], Attrs::new())?;
    let dx = n.op("where", &[below, dlo, dhi], Attrs::new())?;
    let q = n.op("div", &[dx, rng], Attrs::new())?;
    let k = n.op("floor", &[q], Attrs::new())?;
    let kr = n.op("mul", &[k, rng], Attrs::new())?;
    let r = n.op("sub", &[dx, kr], Attrs::new())?;
    let half = n.op("div", &[k, two], Attrs::new())?;
    let hf = n.op("floor", &[half], Attrs::new())?;
    let even = n.op("eq", &[half, hf], Attrs::new())?;
    let lo_r = n.op("add", &[lov, r], Attrs::new())?;
    let hi_r = n.op("sub", &[hiv, r], Attrs::new())?;
    // Below: even → lo + r, odd → hi − r; above: even → hi − r, odd → lo + r.
    let from_below = n.op("where", &[even, lo_r, hi_r], Attrs::new())?;
    let from_above = n.op("where", &[even, hi_r, lo_r], Attrs::new())?;
    let moved = n.op("where", &[below, from_below, from_above], Attrs::new())?;
    let out = n.op("or", &[below, above], Attrs::new())?;
    n.op("where", &[out, moved, v], Attrs::new())
}

/// One neighbour on one axis: its index (in range), its weight (none for
/// nearest) and whether it is inside the input (padding zeros only).
type Tap = (ValueId, Option<ValueId>, Option<ValueId>);

/// ONNX `GridSample` (opset 16–22): nearest, linear or cubic; padding
/// zeros, border or reflection; 1 to 3 spatial axes.
pub(super) fn grid_sample(mut n: N, _op: &str) -> R {
    let (x, grid) = (n.v(0)?, n.v(1)?);
    let (xd, gd) = (n.dims(x), n.dims(grid));
    let r = xd.len().saturating_sub(2);
    if !(1..=3).contains(&r) || gd.len() != r + 2 || gd[0] != xd[0] || gd[r + 1] != r {
        return Err(format!(
            "input {xd:?} and grid {gd:?} do not fit (N, C, spatial) and (N, out…, {r})"
        ));
    }
    let mode = match n.astr("mode").as_deref().unwrap_or("linear") {
        "bilinear" | "linear" => "linear",
        "bicubic" | "cubic" => "cubic",
        "nearest" => "nearest",
        o => return Err(format!("mode {o:?}")),
    };
    let pad = n.astr("padding_mode").unwrap_or_else(|| "zeros".into());
    if !matches!(pad.as_str(), "zeros" | "border" | "reflection") {
        return Err(format!("padding_mode {pad:?}"));
    }
    let align = n.ai("align_corners", 0) == 1;
    let (batch, c) = (xd[0], xd[1]);
    let out_sp: Vec<usize> = gd[1..=r].to_vec();
    let numo: usize = out_sp.iter().product();
    let plane: usize = xd[2..].iter().product();
    let d = n.cx.b.dtype(x);
    let xf = n.cast_to(x, DType::F32)?;
    let xflat = n.op(
        "reshape",
        &[xf],
        Attrs::new().with("shape", vec![batch as i64, c as i64, plane as i64]),
    )?;
    let gf = n.cast_to(grid, DType::F32)?;
    // Per spatial axis, its taps.
    let mut axes: Vec<Vec<Tap>> = Vec::new();
    for i in 0..r {
        let size = xd[2 + i] as f64;
        // The grid's last axis lists x (the last spatial axis) first.
        let comp = n.op(
            "narrow",
            &[gf],
            Attrs::new()
                .with("axis", (r + 1) as i64)
                .with("start", (r - 1 - i) as i64)
                .with("len", 1i64),
        )?;
        let comp = n.op(
            "reshape",
            &[comp],
            Attrs::new().with("shape", vec![batch as i64, 1, numo as i64]),
        )?;
        // Denormalize: align → (g+1)/2·(size−1); else ((g+1)·size − 1)/2.
        let one = n.scalar(1.0, DType::F32)?;
        let g1 = n.op("add", &[comp, one], Attrs::new())?;
        let mut v = if align {
            let k = n.scalar((size - 1.0) / 2.0, DType::F32)?;
            n.op("mul", &[g1, k], Attrs::new())?
        } else {
            let k = n.scalar(size / 2.0, DType::F32)?;
            let h = n.scalar(0.5, DType::F32)?;
            let t = n.op("mul", &[g1, k], Attrs::new())?;
            n.op("sub", &[t, h], Attrs::new())?
        };
        if mode == "nearest" {
            v = n.op("round", &[v], Attrs::new())?;
        }
        let (lo, hi) = if align {
            (0.0, size - 1.0)
        } else {
            (-0.5, size - 0.5)
        };
        match pad.as_str() {
            "border" => {
                let (lov, hiv) = (n.scalar(lo, DType::F32)?, n.scalar(hi, DType::F32)?);
                let b = n.op("lt", &[v, lov], Attrs::new())?;
                let a = n.op("gt", &[v, hiv], Attrs::new())?;
                let out = n.op("or", &[b, a], Attrs::new())?;
                let cl = n.op(
                    "clamp",
                    &[v],
                    Attrs::new().with("min", 0.0).with("max", size - 1.0),
                )?;
                v = n.op("where", &[out, cl, v], Attrs::new())?;
            }
            "reflection" => v = reflect(&mut n, v, lo, hi)?,
            _ => {}
        }
        // The neighbours and their weights.
        let taps: Vec<(ValueId, Option<ValueId>)> = match mode {
            "nearest" => vec![(v, None)],
            _ => {
                let x0 = n.op("floor", &[v], Attrs::new())?;
                let t = n.op("sub", &[v, x0], Attrs::new())?;
                let (offsets, weights): (Vec<f64>, Vec<ValueId>) = if mode == "linear" {
                    let omt = n.op("sub", &[one, t], Attrs::new())?;
                    (vec![0.0, 1.0], vec![omt, t])
                } else {
                    (vec![-1.0, 0.0, 1.0, 2.0], cubic_weights(&mut n, t)?)
                };
                let mut out = Vec::new();
                for (o, w) in offsets.into_iter().zip(weights) {
                    let ov = n.scalar(o, DType::F32)?;
                    let idx = n.op("add", &[x0, ov], Attrs::new())?;
                    out.push((idx, Some(w)));
                }
                out
            }
        };
        // Each neighbour read with the padding rule.
        let mut read = Vec::new();
        for (idx, w) in taps {
            let (idx, valid) = match pad.as_str() {
                "zeros" => {
                    let (z, top) = (
                        n.scalar(0.0, DType::F32)?,
                        n.scalar(size - 1.0, DType::F32)?,
                    );
                    let ge = n.op("ge", &[idx, z], Attrs::new())?;
                    let le = n.op("le", &[idx, top], Attrs::new())?;
                    let ok = n.op("and", &[ge, le], Attrs::new())?;
                    (idx, Some(n.cast_to(ok, DType::F32)?))
                }
                "reflection" => {
                    let rf = reflect(&mut n, idx, lo, hi)?;
                    (n.op("trunc", &[rf], Attrs::new())?, None)
                }
                _ => (idx, None),
            };
            let idx = n.op(
                "clamp",
                &[idx],
                Attrs::new().with("min", 0.0).with("max", size - 1.0),
            )?;
            read.push((idx, w, valid));
        }
        axes.push(read);
    }
    // Every combination of neighbours over the axes.
    let strides: Vec<f64> = (0..r)
        .map(|i| xd[3 + i..].iter().product::<usize>() as f64)
        .collect();
    let combos: usize = axes.iter().map(|a| a.len()).product();
    let mut acc: Option<ValueId> = None;
    for combo in 0..combos {
        let mut rem = combo;
        let (mut flat, mut weight): (Option<ValueId>, Option<ValueId>) = (None, None);
        for (i, a) in axes.iter().enumerate().rev() {
            let (idx, w, valid) = a[rem % a.len()];
            rem /= a.len();
            let s = n.scalar(strides[i], DType::F32)?;
            let term = n.op("mul", &[idx, s], Attrs::new())?;
            flat = Some(match flat {
                None => term,
                Some(f) => n.op("add", &[f, term], Attrs::new())?,
            });
            for m in [w, valid].into_iter().flatten() {
                weight = Some(match weight {
                    None => m,
                    Some(wt) => n.op("mul", &[wt, m], Attrs::new())?,
                });
            }
        }
        let flat = flat.ok_or("no spatial axes")?;
        let fi = n.cast_to(flat, DType::I64)?;
        let fb = n.op(
            "broadcast",
            &[fi],
            Attrs::new().with("shape", vec![batch as i64, c as i64, numo as i64]),
        )?;
        let mut val = n.op(
            "gather_elements",
            &[xflat, fb],
            Attrs::new().with("axis", 2i64),
        )?;
        if let Some(w) = weight {
            val = n.op("mul", &[val, w], Attrs::new())?;
        }
        acc = Some(match acc {
            None => val,
            Some(s) => n.op("add", &[s, val], Attrs::new())?,
        });
    }
    let y = acc.ok_or("no taps")?;
    let mut shape = vec![batch as i64, c as i64];
    shape.extend(out_sp.iter().map(|&v| v as i64));
    let y = n.op("reshape", &[y], Attrs::new().with("shape", shape))?;
    Ok(vec![Out::Value(n.cast_to(y, d)?)])
}

/// ONNX `AffineGrid`: the (normalized) coordinates of every output pixel,
/// (x, y[, z], 1), through each batch item's affine matrix θ.
pub(super) fn affine_grid(mut n: N, _op: &str) -> R {
    let theta = n.v(0)?;
    let size = n.ints_in(1)?.ok_or("AffineGrid needs its size")?;
    let td = n.dims(theta);
    let r = size.len().saturating_sub(2);
    if !(r == 2 || r == 3) || td.len() != 3 || td[1] != r || td[2] != r + 1 {
        return Err(format!("theta {td:?} does not fit size {size:?}"));
    }
    let sp: Vec<usize> = size[2..].iter().map(|&v| v.max(0) as usize).collect();
    let align = n.ai("align_corners", 0) == 1;
    let coord = |i: usize, len: usize| -> f64 {
        if align {
            if len <= 1 {
                0.0
            } else {
                -1.0 + 2.0 * i as f64 / (len - 1) as f64
            }
        } else {
            (2 * i + 1) as f64 / len as f64 - 1.0
        }
    };
    let count: usize = sp.iter().product();
    check_elems(DType::F32, count * (r + 1))?;
    // Base grid rows (x, y, [z,] 1), x along the last spatial axis.
    let mut base = Vec::with_capacity(count * (r + 1));
    for p in 0..count {
        let mut rem = p;
        let mut c = vec![0.0; r];
        for a in (0..r).rev() {
            c[a] = coord(rem % sp[a], sp[a]);
            rem /= sp[a];
        }
        base.extend(c.iter().rev());
        base.push(1.0);
    }
    let d = n.cx.b.dtype(theta);
    let bt = HostTensor::from_f64(d, vec![count, r + 1], base).map_err(|e| e.to_string())?;
    let bv = n.cx.b.constant(bt).map_err(|e| e.to_string())?;
    // [count, r+1] @ θᵀ [N, r+1, r] → [N, count, r]
    let tt = n.op(
        "permute",
        &[theta],
        Attrs::new().with("perm", vec![0i64, 2, 1]),
    )?;
    let g = n.op("matmul", &[bv, tt], Attrs::new())?;
    let mut shape = vec![td[0] as i64];
    shape.extend(sp.iter().map(|&v| v as i64));
    shape.push(r as i64);
    n.one("reshape", &[g], Attrs::new().with("shape", shape))
}
