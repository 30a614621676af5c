//! Signal ops: `DFT` onto the IR's complex FFTs (ONNX keeps complex
//! numbers as a trailing axis of 2 reals), `STFT` (frames gathered, then
//! the same FFT), and the window generators (`HannWindow`,
//! `HammingWindow`, `BlackmanWindow`) and `MelWeightMatrix` as constants.

use super::*;

/// The signal of `x` ([..., 1] real or [..., 2] complex) as a C64 tensor
/// without the trailing axis, computed in f32.
fn complex_of(n: &mut N, x: ValueId) -> Result<ValueId, String> {
    let d = n.dims(x);
    let r = d.len();
    let c = *d.last().ok_or("DFT of a scalar")?;
    let part = |n: &mut N, k: i64| -> Result<ValueId, String> {
        let p = n.op(
            "narrow",
            &[x],
            Attrs::new()
                .with("axis", r as i64 - 1)
                .with("start", k)
                .with("len", 1i64),
        )?;
        let p = n.op(
            "squeeze",
            &[p],
            Attrs::new().with("axes", vec![r as i64 - 1]),
        )?;
        n.cast_to(p, DType::F32)
    };
    let re = part(n, 0)?;
    let im = match c {
        1 => {
            let z = n.scalar(0.0, DType::F32)?;
            let shape: Vec<i64> = d[..r - 1].iter().map(|&v| v as i64).collect();
            n.op("broadcast", &[z], Attrs::new().with("shape", shape))?
        }
        2 => part(n, 1)?,
        o => {
            return Err(format!(
                "the last axis must hold 1 (real) or 2 (complex) values, got {o}"
            ))
        }
    };
    n.op("complex", &[re, im], Attrs::new())
}

/// A C64 tensor as ONNX's complex layout: a trailing axis of (re, im).
fn parts(n: &mut N, z: ValueId) -> Result<ValueId, String> {
    let re = n.op("real", &[z], Attrs::new())?;
    let im = n.op("imag", &[z], Attrs::new())?;
    let re = n.op("unsqueeze", &[re], Attrs::new().with("axes", vec![-1i64]))?;
    let im = n.op("unsqueeze", &[im], Attrs::new().with("axes", vec![-1i64]))?;
    n.op("concat", &[re, im], Attrs::new().with("axis", -1i64))
}

/// `v` cut or zero-padded to `len` along `axis`.
fn fit(n: &mut N, v: ValueId, axis: usize, len: usize) -> Result<ValueId, String> {
    let d = n.dims(v);
    match d[axis].cmp(&len) {
        std::cmp::Ordering::Equal => Ok(v),
        std::cmp::Ordering::Greater => n.op(
            "narrow",
            &[v],
            Attrs::new()
                .with("axis", axis as i64)
                .with("start", 0i64)
                .with("len", len as i64),
        ),
        std::cmp::Ordering::Less => {
            let mut pads = vec![0i64; 2 * d.len()];
            pads[d.len() + axis] = (len - d[axis]) as i64;
            n.op("pad", &[v], Attrs::new().with("pads", pads))
        }
    }
}

/// ONNX `DFT` (opsets 17–20): forward or inverse, full or one-sided, with
/// an optional length (the signal cut or zero-padded to it).
pub(super) fn dft(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let xd = n.dims(x);
    let rank = xd.len();
    let axis = if n.cx.opset >= 20 {
        n.ints_in(2)?.and_then(|v| v.first().copied()).unwrap_or(-2)
    } else {
        n.ai("axis", 1)
    };
    let axis = axis_in(axis, rank, rank.saturating_sub(2))?;
    let (inverse, onesided) = (n.ai("inverse", 0) == 1, n.ai("onesided", 0) == 1);
    let len = match n.ints_in(1)?.and_then(|v| v.first().copied()) {
        Some(l) if l >= 1 => l as usize,
        Some(l) => return Err(format!("dft_length = {l} must be at least 1")),
        None if inverse && onesided => 2 * xd[axis].saturating_sub(1),
        None => xd[axis],
    };
    let d = n.cx.b.dtype(x);
    let z = complex_of(&mut n, x)?;
    let at = Attrs::new().with("axis", axis as i64);
    let y = if inverse && onesided {
        // One-sided spectrum in, `len` real samples out.
        let z = fit(&mut n, z, axis, len / 2 + 1)?;
        let r = n.op("irfft", &[z], at.with("n", len as i64))?;
        n.op("unsqueeze", &[r], Attrs::new().with("axes", vec![-1i64]))?
    } else {
        let z = fit(&mut n, z, axis, len)?;
        let f = n.op(if inverse { "ifft" } else { "fft" }, &[z], at)?;
        let f = if onesided {
            fit(&mut n, f, axis, len / 2 + 1)?
        } else {
            f
        };
        parts(&mut n, f)?
    };
    Ok(vec![Out::Value(n.cast_to(y, d)?)])
}

/// ONNX `HannWindow`, `HammingWindow`, `BlackmanWindow`: the window of
/// `size` values (periodic by default), as a constant.
pub(super) fn window(n: N, op: &str) -> R {
    let size = n
        .ints_in(0)?
        .and_then(|v| v.first().copied())
        .ok_or("the window needs its size")?;
    let size = usize::try_from(size).map_err(|_| format!("size {size} is negative"))?;
    let d = dtype_of(n.ai("output_datatype", 1) as i32)?;
    check_elems(d, size)?;
    let big_n = if n.ai("periodic", 1) == 1 {
        size as f64
    } else {
        size as f64 - 1.0
    };
    let tau = std::f64::consts::TAU;
    let vals: Vec<f64> = (0..size)
        .map(|i| {
            let c = (tau * i as f64 / big_n).cos();
            match op {
                "HannWindow" => 0.5 - 0.5 * c,
                "HammingWindow" => 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * c,
                _ => 0.42 - 0.5 * c + 0.08 * (2.0 * tau * i as f64 / big_n).cos(),
            }
        })
        .collect();
    let t = HostTensor::from_f64(d, vec![size], vals).map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}

/// ONNX `STFT`: frames of `frame_length` every `frame_step` samples
/// ([B, L, 1|2] → [B, frames, W, 1|2], one gather), weighted by the window,
/// then each frame's FFT (one-sided by default): [B, frames, bins, 2].
pub(super) fn stft(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let xd = n.dims(x);
    if xd.len() != 3 {
        return Err(format!(
            "the signal must be [batch, length, 1 or 2], got {xd:?}"
        ));
    }
    let first = |v: Option<Vec<i64>>| v.and_then(|v| v.first().copied());
    let step = first(n.ints_in(1)?).ok_or("STFT needs its frame_step")?;
    let window = match n.name(2) {
        Some(_) => Some(n.v(2)?),
        None => None,
    };
    let wlen = window.map(|w| n.dims(w).iter().product::<usize>());
    let flen = match first(n.ints_in(3)?) {
        Some(f) => f,
        None => wlen.unwrap_or(xd[1]) as i64,
    };
    if step < 1 || flen < 1 || flen as usize > xd[1] {
        return Err(format!(
            "frame_step {step} and frame_length {flen} for a signal of {} samples",
            xd[1]
        ));
    }
    let (flen, step) = (flen as usize, step as usize);
    let wsize = wlen.unwrap_or(flen);
    let frames = 1 + (xd[1] - flen) / step;
    if (frames - 1) * step + wsize > xd[1] {
        return Err(format!(
            "a window of {wsize} runs past the signal's {} samples",
            xd[1]
        ));
    }
    let idx: Vec<i64> = (0..frames)
        .flat_map(|f| (0..wsize).map(move |w| (f * step + w) as i64))
        .collect();
    let idx =
        HostTensor::from_i64(DType::I64, vec![frames, wsize], idx).map_err(|e| e.to_string())?;
    let idx = n.cx.b.constant(idx).map_err(|e| e.to_string())?;
    let mut fr = n.op("gather", &[x, idx], Attrs::new().with("axis", 1i64))?;
    let d = n.cx.b.dtype(x);
    if let Some(w) = window {
        let w = n.cast_to(w, d)?;
        let w = n.op(
            "reshape",
            &[w],
            Attrs::new().with("shape", vec![1i64, 1, wsize as i64, 1]),
        )?;
        fr = n.op("mul", &[fr, w], Attrs::new())?;
    }
    let z = complex_of(&mut n, fr)?;
    let z = fit(&mut n, z, 2, flen)?;
    let f = n.op("fft", &[z], Attrs::new().with("axis", 2i64))?;
    let f = if n.ai("onesided", 1) == 1 {
        fit(&mut n, f, 2, flen / 2 + 1)?
    } else {
        f
    };
    let y = parts(&mut n, f)?;
    Ok(vec![Out::Value(n.cast_to(y, d)?)])
}

/// ONNX `MelWeightMatrix` from its (import-time) inputs, as the reference
/// computes it: [dft_length / 2 + 1, num_mel_bins] triangles.
pub(super) fn mel_weight_matrix(n: N, _op: &str) -> R {
    let int = |k: usize| -> Result<i64, String> {
        n.ints_in(k)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| format!("input {k} is missing"))
    };
    let (mels, dft, rate) = (int(0)?, int(1)?, int(2)?);
    let lo = n.float_in(3)?.ok_or("input 3 is missing")?;
    let hi = n.float_in(4)?.ok_or("input 4 is missing")?;
    if mels < 1 || dft < 1 || rate < 1 {
        return Err(format!(
            "num_mel_bins {mels}, dft_length {dft} and sample_rate {rate} must be positive"
        ));
    }
    let (mels, bins) = (mels as usize, dft as usize / 2 + 1);
    let d = dtype_of(n.ai("output_datatype", 1) as i32)?;
    check_elems(d, bins * mels)?;
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let (lo_m, hi_m) = (mel(lo), mel(hi));
    let step = (hi_m - lo_m) / (mels + 2) as f64;
    let edges: Vec<i64> = (0..mels + 2)
        .map(|i| {
            let hz = 700.0 * (10f64.powf((i as f64 * step + lo_m) / 2595.0) - 1.0);
            (((dft + 1) as f64 * hz) / rate as f64).floor() as i64
        })
        .collect();
    let mut w = vec![0f64; bins * mels];
    let mut set = |j: i64, i: usize, v: f64| -> Result<(), String> {
        if j < 0 || j as usize >= bins {
            return Err(format!("mel bin {i} reaches frequency bin {j} of {bins}"));
        }
        w[j as usize * mels + i] = v;
        Ok(())
    };
    for i in 0..mels {
        let (l, c, h) = (edges[i], edges[i + 1], edges[i + 2]);
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        for j in c..h {
            set(j, i, (h - j) as f64 / (h - c) as f64)?;
        }
    }
    let t = HostTensor::from_f64(d, vec![bins, mels], w).map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}
