//! ONNX `RoiAlign` with a fixed sampling grid (`sampling_ratio` > 0), run
//! on run-time boxes: each output bin averages (or takes the max of)
//! `sampling_ratio²` bilinear samples, computed as ONNX's reference does —
//! coordinates per box from elementwise ops over constant grid offsets,
//! the four corners gathered from the box's image, weights zero for
//! samples outside [−1, size].

use super::*;

pub(super) fn roi_align(mut n: N, _op: &str) -> R {
    let (x, rois, bidx) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let xd = n.dims(x);
    let rd = n.dims(rois);
    if xd.len() != 4 || rd.len() != 2 || rd[1] != 4 {
        return Err(format!(
            "X [N, C, H, W] and rois [R, 4], got {xd:?} and {rd:?}"
        ));
    }
    let (c, h, w, r) = (xd[1], xd[2], xd[3], rd[0]);
    let (ph, pw) = (n.ai("output_height", 1), n.ai("output_width", 1));
    let g = n.ai("sampling_ratio", 0);
    if g < 1 {
        return Err("sampling_ratio 0 (a grid adapted to each box) is not supported yet".into());
    }
    if ph < 1 || pw < 1 || g > 64 {
        return Err(format!("output {ph}×{pw} with sampling_ratio {g}"));
    }
    let (ph, pw, g) = (ph as usize, pw as usize, g as usize);
    let scale = n.af("spatial_scale", 1.0);
    let half = match n.astr("coordinate_transformation_mode").as_deref() {
        None | Some("half_pixel") => true,
        Some("output_half_pixel") => false,
        Some(m) => return Err(format!("coordinate_transformation_mode `{m}`")),
    };
    let max_mode = match n.astr("mode").as_deref() {
        None | Some("avg") => false,
        Some("max") => true,
        Some(m) => return Err(format!("mode `{m}`")),
    };
    let d = n.cx.b.dtype(x);
    let f = |n: &mut N, v: f64| n.scalar(v, DType::F32);
    let rois = n.cast_to(rois, DType::F32)?;
    let col = |n: &mut N, k: i64| -> Result<ValueId, String> {
        n.op(
            "narrow",
            &[rois],
            Attrs::new()
                .with("axis", 1i64)
                .with("start", k)
                .with("len", 1i64),
        )
    };
    // Box corners in input pixels, [R, 1] each.
    let (sc, off) = (f(&mut n, scale)?, f(&mut n, if half { 0.5 } else { 0.0 })?);
    let corner = |n: &mut N, k: i64| -> Result<ValueId, String> {
        let v = col(n, k)?;
        let v = n.op("mul", &[v, sc], Attrs::new())?;
        n.op("sub", &[v, off], Attrs::new())
    };
    let (x1, y1, x2, y2) = (
        corner(&mut n, 0)?,
        corner(&mut n, 1)?,
        corner(&mut n, 2)?,
        corner(&mut n, 3)?,
    );
    // The samples along one axis: start + (bin + (i + ½)/g)·size/bins, and
    // their bilinear taps (low, high, weight of high), [R, bins·g].
    let axis = |n: &mut N, s: ValueId, e: ValueId, bins: usize, size: usize| {
        let mut len = n.op("sub", &[e, s], Attrs::new())?;
        if !half {
            len = n.op("clamp", &[len], Attrs::new().with("min", 1.0))?;
        }
        let bins_v = f(n, bins as f64)?;
        let bin = n.op("div", &[len, bins_v], Attrs::new())?;
        let grid: Vec<f64> = (0..bins * g)
            .map(|k| (k / g) as f64 + ((k % g) as f64 + 0.5) / g as f64)
            .collect();
        let grid =
            HostTensor::from_f64(DType::F32, vec![1, bins * g], grid).map_err(|e| e.to_string())?;
        let grid = n.cx.b.constant(grid).map_err(|e| e.to_string())?;
        let t = n.op("mul", &[grid, bin], Attrs::new())?;
        let t = n.op("add", &[t, s], Attrs::new())?; // [R, bins·g]
        let (lo_lim, hi_lim) = (f(n, -1.0)?, f(n, size as f64)?);
        let ge = n.op("ge", &[t, lo_lim], Attrs::new())?;
        let le = n.op("le", &[t, hi_lim], Attrs::new())?;
        let ok = n.op("and", &[ge, le], Attrs::new())?;
        let t = n.op("clamp", &[t], Attrs::new().with("min", 0.0))?;
        let low = n.op("floor", &[t], Attrs::new())?;
        let last = f(n, size as f64 - 1.0)?;
        let at_end = n.op("ge", &[low, last], Attrs::new())?;
        let low = n.op("where", &[at_end, last, low], Attrs::new())?;
        let t = n.op("where", &[at_end, last, t], Attrs::new())?;
        let one = f(n, 1.0)?;
        let next = n.op("add", &[low, one], Attrs::new())?;
        let high = n.op("where", &[at_end, last, next], Attrs::new())?;
        let frac = n.op("sub", &[t, low], Attrs::new())?;
        let okf = n.cast_to(ok, DType::F32)?;
        Ok::<_, String>((low, high, frac, okf))
    };
    let (ylo, yhi, ly, yok) = axis(&mut n, y1, y2, ph, h)?;
    let (xlo, xhi, lx, xok) = axis(&mut n, x1, x2, pw, w)?;
    // Over (y sample, x sample): [R, PH·g, PW·g].
    let (ky, kx) = ((ph * g) as i64, (pw * g) as i64);
    let rows = |n: &mut N, v: ValueId| {
        n.op(
            "reshape",
            &[v],
            Attrs::new().with("shape", vec![r as i64, ky, 1]),
        )
    };
    let cols = |n: &mut N, v: ValueId| {
        n.op(
            "reshape",
            &[v],
            Attrs::new().with("shape", vec![r as i64, 1, kx]),
        )
    };
    let one = f(&mut n, 1.0)?;
    let (ylo, yhi, ly, yok) = (
        rows(&mut n, ylo)?,
        rows(&mut n, yhi)?,
        rows(&mut n, ly)?,
        rows(&mut n, yok)?,
    );
    let (xlo, xhi, lx, xok) = (
        cols(&mut n, xlo)?,
        cols(&mut n, xhi)?,
        cols(&mut n, lx)?,
        cols(&mut n, xok)?,
    );
    let hy = n.op("sub", &[one, ly], Attrs::new())?;
    let hx = n.op("sub", &[one, lx], Attrs::new())?;
    let ok = n.op("mul", &[yok, xok], Attrs::new())?;
    let width = f(&mut n, w as f64)?;
    let k = (ky * kx) as usize;
    // The box's image: [R, C, H·W].
    let xf = n.op(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![xd[0] as i64, c as i64, (h * w) as i64]),
    )?;
    let bidx = n.cast_to(bidx, DType::I64)?;
    let img = n.op("gather", &[xf, bidx], Attrs::new().with("axis", 0i64))?;
    let mut taps = Vec::new();
    for (yy, wy) in [(ylo, hy), (yhi, ly)] {
        for (xx, wx) in [(xlo, hx), (xhi, lx)] {
            let row = n.op("mul", &[yy, width], Attrs::new())?;
            let pos = n.op("add", &[row, xx], Attrs::new())?; // [R, ky, kx]
            let pos = n.cast_to(pos, DType::I64)?;
            let pos = n.op(
                "reshape",
                &[pos],
                Attrs::new().with("shape", vec![r as i64, 1, k as i64]),
            )?;
            let pos = n.op(
                "broadcast",
                &[pos],
                Attrs::new().with("shape", vec![r as i64, c as i64, k as i64]),
            )?;
            let v = n.op(
                "gather_elements",
                &[img, pos],
                Attrs::new().with("axis", 2i64),
            )?;
            let v = n.cast_to(v, DType::F32)?;
            let wt = n.op("mul", &[wy, wx], Attrs::new())?;
            let wt = n.op("mul", &[wt, ok], Attrs::new())?;
            let wt = n.op(
                "reshape",
                &[wt],
                Attrs::new().with("shape", vec![r as i64, 1, k as i64]),
            )?;
            taps.push(n.op("mul", &[v, wt], Attrs::new())?); // [R, C, k]
        }
    }
    let combine = if max_mode { "max" } else { "add" };
    let mut s = taps[0];
    for &t in &taps[1..] {
        s = n.op(combine, &[s, t], Attrs::new())?;
    }
    // [R, C, PH, g, PW, g] → over the two sample axes.
    let shape = vec![r as i64, c as i64, ph as i64, g as i64, pw as i64, g as i64];
    let s = n.op("reshape", &[s], Attrs::new().with("shape", shape))?;
    let red = if max_mode {
        "reduce_max"
    } else {
        "reduce_mean"
    };
    let y = n.op(
        red,
        &[s],
        Attrs::new()
            .with("axes", vec![3i64, 5])
            .with("keepdim", false),
    )?;
    Ok(vec![Out::Value(n.cast_to(y, d)?)])
}
