//! ONNX `DeformConv` (2-D): every kernel tap reads the input at its grid
//! position moved by a learned offset, bilinearly with zeros outside (as
//! the reference's GridSample with align_corners), scaled by the optional
//! mask; the sampled columns then meet the weights in one grouped matmul.

use super::*;

pub(super) fn deform_conv(mut n: N, _op: &str) -> R {
    let (x, w, off) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let (xd, wd, od) = (n.dims(x), n.dims(w), n.dims(off));
    if xd.len() != 4 || wd.len() != 4 || od.len() != 4 {
        return Err(format!(
            "2-D only: X, W and offset must be rank 4, got {xd:?}, {wd:?}, {od:?}"
        ));
    }
    let (nb, c, h, wi) = (xd[0], xd[1], xd[2], xd[3]);
    let (oc, kh, kw) = (wd[0], wd[2], wd[3]);
    let (g, og) = (n.ai("group", 1), n.ai("offset_group", 1));
    let strides = n.aints("strides").unwrap_or_else(|| vec![1, 1]);
    let dil = n.aints("dilations").unwrap_or_else(|| vec![1, 1]);
    let pads = n.aints("pads").unwrap_or_else(|| vec![0; 4]);
    if g < 1 || og < 1 || strides.len() != 2 || dil.len() != 2 || pads.len() != 4 {
        return Err("group, offset_group, strides, dilations and pads do not fit 2-D".into());
    }
    let (g, og) = (g as usize, og as usize);
    if c != wd[1] * g || oc % g != 0 || c % og != 0 {
        return Err(format!(
            "X {xd:?}, W {wd:?} with group {g} and offset_group {og} do not fit"
        ));
    }
    let (k, (oh, ow)) = (kh * kw, (od[2], od[3]));
    let out_of = |i: usize, s: i64, d: i64, kk: usize, pb: i64, pe: i64| {
        (i as i64 + pb + pe - ((kk as i64 - 1) * d + 1)).div_euclid(s) + 1
    };
    if od[0] != nb
        || od[1] != og * 2 * k
        || out_of(h, strides[0], dil[0], kh, pads[0], pads[2]) != oh as i64
        || out_of(wi, strides[1], dil[1], kw, pads[1], pads[3]) != ow as i64
    {
        return Err(format!(
            "offset {od:?} does not fit the convolution's output"
        ));
    }
    let p = oh * ow;
    let d = n.cx.b.dtype(x);
    let f32v = |n: &mut N, v: ValueId| n.cast_to(v, DType::F32);
    // Grid positions of every (tap, output pixel), [1, 1, K, P] per axis.
    let mut gy = Vec::with_capacity(k * p);
    let mut gx = Vec::with_capacity(k * p);
    for a in 0..kh {
        for b in 0..kw {
            for i in 0..oh {
                for j in 0..ow {
                    gy.push((i as i64 * strides[0] - pads[0] + a as i64 * dil[0]) as f64);
                    gx.push((j as i64 * strides[1] - pads[1] + b as i64 * dil[1]) as f64);
                }
            }
        }
    }
    let grid = |n: &mut N, v: Vec<f64>| -> Result<ValueId, String> {
        let t = HostTensor::from_f64(DType::F32, vec![1, 1, k, p], v).map_err(|e| e.to_string())?;
        n.cx.b.constant(t).map_err(|e| e.to_string())
    };
    let (gy, gx) = (grid(&mut n, gy)?, grid(&mut n, gx)?);
    // offset [N, og·K·2, oH, oW] → [N, og, K, 2, P]
    let off = f32v(&mut n, off)?;
    let off = n.op(
        "reshape",
        &[off],
        Attrs::new().with("shape", vec![nb as i64, og as i64, k as i64, 2, p as i64]),
    )?;
    let part = |n: &mut N, t: i64| -> Result<ValueId, String> {
        let v = n.op(
            "narrow",
            &[off],
            Attrs::new()
                .with("axis", 3i64)
                .with("start", t)
                .with("len", 1i64),
        )?;
        n.op("squeeze", &[v], Attrs::new().with("axes", vec![3i64]))
    };
    let (dy, dx) = (part(&mut n, 0)?, part(&mut n, 1)?);
    let y = n.op("add", &[gy, dy], Attrs::new())?; // [N, og, K, P]
    let xx = n.op("add", &[gx, dx], Attrs::new())?;
    let mask = match n.name(4) {
        Some(_) => {
            let m = n.v(4)?;
            let m = f32v(&mut n, m)?;
            Some(n.op(
                "reshape",
                &[m],
                Attrs::new().with("shape", vec![nb as i64, og as i64, k as i64, p as i64]),
            )?)
        }
        None => None,
    };
    // The input by offset group: [N, og, C/og, H·W].
    let cg = c / og;
    let xf = f32v(&mut n, x)?;
    let xf = n.op(
        "reshape",
        &[xf],
        Attrs::new().with(
            "shape",
            vec![nb as i64, og as i64, cg as i64, (h * wi) as i64],
        ),
    )?;
    let floor_of = |n: &mut N, v: ValueId| n.op("floor", &[v], Attrs::new());
    let (y0, x0) = (floor_of(&mut n, y)?, floor_of(&mut n, xx)?);
    let one = n.scalar(1.0, DType::F32)?;
    let (y1, x1) = (
        n.op("add", &[y0, one], Attrs::new())?,
        n.op("add", &[x0, one], Attrs::new())?,
    );
    let (fy, fx) = (
        n.op("sub", &[y, y0], Attrs::new())?,
        n.op("sub", &[xx, x0], Attrs::new())?,
    );
    let (gy0, gx0) = (
        n.op("sub", &[one, fy], Attrs::new())?,
        n.op("sub", &[one, fx], Attrs::new())?,
    );
    // One corner: its weight (zero outside the input) and its value.
    let corner = |n: &mut N, yc: ValueId, xc: ValueId, wy: ValueId, wx: ValueId| {
        let inside = |n: &mut N, v: ValueId, size: usize| -> Result<ValueId, String> {
            let (lo, hi) = (
                n.scalar(0.0, DType::F32)?,
                n.scalar(size as f64 - 1.0, DType::F32)?,
            );
            let a = n.op("ge", &[v, lo], Attrs::new())?;
            let b = n.op("le", &[v, hi], Attrs::new())?;
            n.op("and", &[a, b], Attrs::new())
        };
        let (iy, ix) = (inside(n, yc, h)?, inside(n, xc, wi)?);
        let ok = n.op("and", &[iy, ix], Attrs::new())?;
        let ok = n.cast_to(ok, DType::F32)?;
        let mut wt = n.op("mul", &[wy, wx], Attrs::new())?;
        wt = n.op("mul", &[wt, ok], Attrs::new())?;
        if let Some(m) = mask {
            wt = n.op("mul", &[wt, m], Attrs::new())?;
        }
        // Clamped into the input (the weight is zero where it was not).
        let ycl = n.op(
            "clamp",
            &[yc],
            Attrs::new().with("min", 0.0).with("max", h as f64 - 1.0),
        )?;
        let xcl = n.op(
            "clamp",
            &[xc],
            Attrs::new().with("min", 0.0).with("max", wi as f64 - 1.0),
        )?;
        let width = n.scalar(wi as f64, DType::F32)?;
        let pos = n.op("mul", &[ycl, width], Attrs::new())?;
        let pos = n.op("add", &[pos, xcl], Attrs::new())?;
        let pos = n.cast_to(pos, DType::I64)?;
        let shape = vec![nb as i64, og as i64, 1, (k * p) as i64];
        let pos = n.op("reshape", &[pos], Attrs::new().with("shape", shape.clone()))?;
        let full = vec![nb as i64, og as i64, cg as i64, (k * p) as i64];
        let pos = n.op("broadcast", &[pos], Attrs::new().with("shape", full))?;
        let v = n.op(
            "gather_elements",
            &[xf, pos],
            Attrs::new().with("axis", 3i64),
        )?;
        let wt = n.op("reshape", &[wt], Attrs::new().with("shape", shape))?;
        n.op("mul", &[v, wt], Attrs::new())
    };
    let a = corner(&mut n, y0, x0, gy0, gx0)?;
    let b = corner(&mut n, y0, x1, gy0, fx)?;
    let cc = corner(&mut n, y1, x0, fy, gx0)?;
    let dd = corner(&mut n, y1, x1, fy, fx)?;
    let s = n.op("add", &[a, b], Attrs::new())?;
    let s = n.op("add", &[s, cc], Attrs::new())?;
    let s = n.op("add", &[s, dd], Attrs::new())?; // [N, og, C/og, K·P]
                                                  // Columns by conv group: [N, g, (C/g)·K, P]; weights [1, g, OC/g, (C/g)·K].
    let cols = n.op(
        "reshape",
        &[s],
        Attrs::new().with(
            "shape",
            vec![nb as i64, g as i64, (c / g * k) as i64, p as i64],
        ),
    )?;
    let wf = f32v(&mut n, w)?;
    let wf = n.op(
        "reshape",
        &[wf],
        Attrs::new().with(
            "shape",
            vec![1, g as i64, (oc / g) as i64, (c / g * k) as i64],
        ),
    )?;
    let y = n.op("matmul", &[wf, cols], Attrs::new())?; // [N, g, OC/g, P]
    let mut y = n.op(
        "reshape",
        &[y],
        Attrs::new().with("shape", vec![nb as i64, oc as i64, oh as i64, ow as i64]),
    )?;
    if n.name(3).is_some() {
        let bias = n.v(3)?;
        let bias = f32v(&mut n, bias)?;
        let bias = n.op(
            "reshape",
            &[bias],
            Attrs::new().with("shape", vec![1, oc as i64, 1, 1]),
        )?;
        y = n.op("add", &[y, bias], Attrs::new())?;
    }
    Ok(vec![Out::Value(n.cast_to(y, d)?)])
}
