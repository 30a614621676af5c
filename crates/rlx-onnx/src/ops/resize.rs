//! ONNX `Resize` (and the older `Upsample`) as separable gathers: every
//! size is known at import, so each resized axis gets, per output
//! position, the input positions it reads (taps) and their weights —
//! computed here once, following the ONNX reference's rules — and runs as
//! `Σₜ gather(x, tapₜ, axis) · weightₜ`. Nearest is one gather per axis.

use super::*;

/// How one axis is resized.
struct Plan {
    /// Per tap: the input index and the weight for every output position.
    taps: Vec<(Vec<f64>, Vec<f64>)>,
    /// Output positions whose source lies outside the input
    /// (tf_crop_and_resize): they take the extrapolation value.
    outside: Vec<bool>,
}

/// The node's settings.
struct Mode {
    mode: String,
    ctm: String,
    nearest: String,
    a: f64,
    exclude: bool,
    antialias: bool,
}

/// The cubic convolution kernel (Keys, parameter `a`).
fn cubic(a: f64, x: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        (a + 2.0) * x * x * x - (a + 3.0) * x * x + 1.0
    } else if x < 2.0 {
        a * x * x * x - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
    } else {
        0.0
    }
}

/// The source coordinate of output position `x` (ONNX's
/// coordinate_transformation_mode), or `None` outside a crop's input.
fn source(m: &Mode, x: f64, inp: usize, out: usize, scale: f64, roi: (f64, f64)) -> Option<f64> {
    let (inw, outw) = (inp as f64, scale * inp as f64);
    Some(match m.ctm.as_str() {
        "align_corners" if outw == 1.0 => 0.0,
        "align_corners" => x * (inw - 1.0) / (outw - 1.0),
        "asymmetric" => x / scale,
        "tf_crop_and_resize" => {
            let span = (roi.1 - roi.0) * (inw - 1.0);
            let v = if outw == 1.0 {
                span / 2.0
            } else {
                x * span / (outw - 1.0)
            } + roi.0 * (inw - 1.0);
            if v < 0.0 || v > inw - 1.0 {
                return None;
            }
            v
        }
        "pytorch_half_pixel" if outw == 1.0 => -0.5,
        "half_pixel_symmetric" => {
            let adj = out as f64 / outw;
            inw / 2.0 * (1.0 - adj) + (x + 0.5) / scale - 0.5
        }
        _ => (x + 0.5) / scale - 0.5, // half_pixel, pytorch_half_pixel
    })
}

/// The weights of `n`-tap neighbourhoods at fraction `r` ∈ (0, 1].
fn coeffs(m: &Mode, r: f64, scale: f64) -> Vec<f64> {
    let s = scale.min(1.0);
    match (m.mode.as_str(), m.antialias && scale < 1.0) {
        ("linear", false) => vec![1.0 - r, r],
        ("linear", true) => {
            let start = (-1.0 / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..2 - start)
                .map(|i| (1.0 - ((i as f64 - r) * s).abs()).clamp(0.0, 1.0))
                .collect();
            let sum: f64 = c.iter().sum();
            c.iter().map(|v| v / sum).collect()
        }
        ("cubic", false) => [r + 1.0, r, 1.0 - r, 2.0 - r]
            .iter()
            .map(|&d| cubic(m.a, d))
            .collect(),
        (_, _) => {
            let start = (-2.0 / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..2 - start)
                .map(|i| cubic(m.a, s * (i as f64 - r)))
                .collect();
            let sum: f64 = c.iter().sum();
            c.iter().map(|v| v / sum).collect()
        }
    }
}

fn plan(m: &Mode, inp: usize, out: usize, scale: f64, roi: (f64, f64)) -> Plan {
    let last = inp as i64 - 1;
    let mut taps: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    let mut outside = vec![false; out];
    for (o, out_o) in outside.iter_mut().enumerate() {
        let Some(x) = source(m, o as f64, inp, out, scale, roi) else {
            *out_o = true;
            for t in &mut taps {
                t.0.push(0.0);
                t.1.push(0.0);
            }
            continue;
        };
        // The left neighbour, so that the fraction is in (0, 1] (the
        // reference prefers the pixel left of an integral coordinate).
        let x0 = x.ceil() as i64 - 1;
        let r = x - x0 as f64;
        let (first, mut w) = if m.mode == "nearest" {
            let up = match m.nearest.as_str() {
                _ if r == 1.0 => true,
                "round_prefer_ceil" => r >= 0.5,
                "floor" => false,
                "ceil" => true,
                _ => r > 0.5, // round_prefer_floor
            };
            (x0 + up as i64, vec![1.0])
        } else {
            let c = coeffs(m, r, scale);
            (x0 + 1 - (c.len() / 2) as i64, c)
        };
        let idx: Vec<i64> = (0..w.len() as i64).map(|k| first + k).collect();
        if m.exclude {
            for (k, &i) in idx.iter().enumerate() {
                if i < 0 || i > last {
                    w[k] = 0.0;
                }
            }
            let sum: f64 = w.iter().sum();
            w.iter_mut().for_each(|v| *v /= sum);
        }
        while taps.len() < w.len() {
            taps.push((vec![0.0; o], vec![0.0; o]));
        }
        for (k, t) in taps.iter_mut().enumerate() {
            // Beyond the input the edge repeats (the reference pads so).
            t.0.push(idx.get(k).map_or(0, |&i| i.clamp(0, last)) as f64);
            t.1.push(w.get(k).copied().unwrap_or(0.0));
        }
    }
    Plan { taps, outside }
}

/// A constant of `vals` shaped to broadcast along `axis` of a rank-`rank` tensor.
fn along(n: &mut N, vals: Vec<f64>, d: DType, axis: usize, rank: usize) -> Result<ValueId, String> {
    let mut shape = vec![1usize; rank];
    shape[axis] = vals.len();
    let t = HostTensor::from_f64(d, shape, vals).map_err(|e| e.to_string())?;
    n.cx.b.constant(t).map_err(|e| e.to_string())
}

/// ONNX `Resize` and `Upsample`.
pub(super) fn resize(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let rank = dims.len();
    let old = op == "Upsample" || n.cx.opset < 11;
    let mut m = Mode {
        mode: n.astr("mode").unwrap_or_else(|| "nearest".into()),
        ctm: n
            .astr("coordinate_transformation_mode")
            .unwrap_or_else(|| "half_pixel".into()),
        nearest: n
            .astr("nearest_mode")
            .unwrap_or_else(|| "round_prefer_floor".into()),
        a: n.af("cubic_coeff_a", -0.75),
        exclude: n.ai("exclude_outside", 0) != 0,
        antialias: n.ai("antialias", 0) != 0,
    };
    if old {
        // Resize-10 and Upsample: asymmetric coordinates, nearest floors.
        m.ctm = "asymmetric".into();
        m.nearest = "floor".into();
    }
    if !matches!(m.mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(format!("mode = {:?} is not supported", m.mode));
    }
    let axes: Vec<usize> = match n.aints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| axis_in(a, rank, rank.saturating_sub(1)))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let nonempty = |t: Option<&HostTensor>| t.filter(|t| t.shape().numel() > 0).cloned();
    let (roi, scales, sizes) = if old {
        let s = match n.attr("scales") {
            Some(a) => Some(a.floats.iter().map(|&v| v as f64).collect()),
            None => nonempty(n.const_in(1)?)
                .map(|t| t.to_f64_vec().map_err(|e| e.to_string()))
                .transpose()?,
        };
        (None, s, None)
    } else {
        // The roi matters (and must be known) for tf_crop_and_resize only.
        let roi = if m.ctm == "tf_crop_and_resize" {
            nonempty(n.const_in(1)?)
        } else {
            None
        };
        let sc = nonempty(n.const_in(2)?);
        let sz = nonempty(n.const_in(3)?);
        let f = |t: Option<HostTensor>| {
            t.map(|t| t.to_f64_vec().map_err(|e| e.to_string()))
                .transpose()
        };
        (f(roi)?, f(sc)?, f(sz)?)
    };
    // Per axis: output size and scale.
    let mut out = dims.clone();
    let mut scale = vec![1.0f64; rank];
    match (&sizes, &scales) {
        (Some(sz), _) => {
            if sz.len() != axes.len() || sz.iter().any(|&v| v < 0.0) {
                return Err(format!("sizes {sz:?} do not fit axes {axes:?}"));
            }
            let policy = n
                .astr("keep_aspect_ratio_policy")
                .unwrap_or_else(|| "stretch".into());
            let ratio: Vec<f64> = axes
                .iter()
                .zip(sz)
                .map(|(&a, &s)| s / dims[a] as f64)
                .collect();
            let common = match policy.as_str() {
                "stretch" => None,
                "not_larger" => ratio.iter().copied().reduce(f64::min),
                "not_smaller" => ratio.iter().copied().reduce(f64::max),
                o => return Err(format!("keep_aspect_ratio_policy = {o:?}")),
            };
            for (k, &a) in axes.iter().enumerate() {
                match common {
                    None => {
                        out[a] = sz[k] as usize;
                        scale[a] = ratio[k];
                    }
                    Some(c) => {
                        out[a] = (c * dims[a] as f64 + 0.5) as usize;
                        scale[a] = c;
                    }
                }
            }
        }
        (None, Some(sc)) => {
            if sc.len() != axes.len() || sc.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
                return Err(format!("scales {sc:?} do not fit axes {axes:?} (each > 0)"));
            }
            for (k, &a) in axes.iter().enumerate() {
                // The reference reads the scale as float32.
                let s = sc[k] as f32 as f64;
                scale[a] = s;
                out[a] = (s * dims[a] as f64) as usize;
            }
        }
        (None, None) => return Err("neither scales nor sizes is known at import".into()),
    }
    check_elems_of(n.cx.b.dtype(x), &out)?;
    let d = n.cx.b.dtype(x);
    let cd = if matches!(d, DType::F32 | DType::F64) || m.mode == "nearest" {
        d
    } else {
        DType::F32
    };
    let mut y = n.cast_to(x, cd)?;
    let mut mask: Option<Vec<bool>> = None;
    for (i, &a) in axes.iter().enumerate() {
        let r = match &roi {
            Some(roi) if roi.len() == 2 * axes.len() => (roi[i], roi[axes.len() + i]),
            Some(roi) if roi.len() == 2 * rank => (roi[a], roi[rank + a]),
            Some(roi) => return Err(format!("roi {roi:?} does not fit axes {axes:?}")),
            None if m.ctm == "tf_crop_and_resize" => {
                return Err("tf_crop_and_resize needs roi".into())
            }
            None => (0.0, 1.0),
        };
        if out[a] == dims[a] && scale[a] == 1.0 && m.ctm != "tf_crop_and_resize" {
            continue; // every mode maps an unscaled axis onto itself
        }
        if dims[a] == 0 {
            return Err(format!("axis {a} is empty and cannot be resized"));
        }
        let p = plan(&m, dims[a], out[a], scale[a], r);
        if p.outside.iter().any(|&o| o) {
            // Positions outside on this axis, combined over axes later.
            let cur = mask.take().unwrap_or_default();
            mask = Some(outside_or(&cur, &out, a, &p.outside));
        }
        let mut acc: Option<ValueId> = None;
        for (idx, w) in p.taps {
            if w.iter().all(|&v| v == 0.0) {
                continue;
            }
            let it = HostTensor::from_f64(DType::I64, vec![idx.len()], idx)
                .map_err(|e| e.to_string())?;
            let it = n.cx.b.constant(it).map_err(|e| e.to_string())?;
            let g = n.op("gather", &[y, it], Attrs::new().with("axis", a as i64))?;
            let term = if w.iter().all(|&v| v == 1.0) {
                g
            } else {
                let wv = along(&mut n, w, cd, a, rank)?;
                n.op("mul", &[g, wv], Attrs::new())?
            };
            acc = Some(match acc {
                None => term,
                Some(s) => n.op("add", &[s, term], Attrs::new())?,
            });
        }
        y = match acc {
            Some(v) => v,
            None => {
                // Every position is outside (a crop beyond the input).
                let z = n.scalar(0.0, cd)?;
                let mut shape: Vec<i64> = n.dims(y).iter().map(|&v| v as i64).collect();
                shape[a] = out[a] as i64;
                n.op("broadcast", &[z], Attrs::new().with("shape", shape))?
            }
        };
    }
    if let Some(mk) = mask {
        let ev = n.af("extrapolation_value", 0.0);
        let keep: Vec<f64> = mk.iter().map(|&o| if o { 0.0 } else { 1.0 }).collect();
        let t = HostTensor::from_f64(DType::Bool, out.clone(), keep).map_err(|e| e.to_string())?;
        let k = n.cx.b.constant(t).map_err(|e| e.to_string())?;
        let e = n.scalar(ev, cd)?;
        y = n.op("where", &[k, y, e], Attrs::new())?;
    }
    Ok(vec![Out::Value(n.cast_to(y, d)?)])
}

/// The output-shaped "outside" mask `cur` with axis `a`'s positions added.
fn outside_or(cur: &[bool], out: &[usize], a: usize, outside: &[bool]) -> Vec<bool> {
    let numel: usize = out.iter().product();
    let inner: usize = out[a + 1..].iter().product();
    (0..numel)
        .map(|i| cur.get(i).copied().unwrap_or(false) || outside[(i / inner) % out[a]])
        .collect()
}
