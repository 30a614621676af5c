//! Normalizations: layer, RMS, batch (inference and training), instance
//! and group, mean-variance, Lp, LRN — most as one standardization
//! (`standardize`) followed by a per-channel scale and bias.

use super::*;

/// ONNX `LayerNormalization`.
pub(super) fn layer_normalization(mut n: N, _op: &str) -> R {
    let node = n.node;
    let (x, g) = (n.v(0)?, n.v(1)?);
    let dims = n.dims(x);
    let rank = dims.len();
    let axis = axis_in(n.ai("axis", -1), rank, rank.saturating_sub(1))? as i64;
    let eps = n.af("epsilon", 1e-5);
    let d = n.cx.b.dtype(x);
    let stats = node.output.iter().skip(1).any(|o| !o.is_empty());
    if axis == rank as i64 - 1 && !stats {
        let b = match n.name(2) {
            Some(_) => n.v(2)?,
            None => {
                let z = HostTensor::zeros(d, vec![*dims.last().unwrap_or(&1)])
                    .map_err(|e| e.to_string())?;
                n.cx.b.constant(z).map_err(|e| e.to_string())?
            }
        };
        return n.one(
            "layer_norm",
            &[x, g, b],
            Attrs::new().with("axis", axis).with("eps", eps),
        );
    }
    // Over the axes from `axis` on, with the statistics as outputs:
    // mean, 1/sqrt(var + eps), (x - mean)·that·scale + bias.
    let axes: Vec<i64> = (axis..rank as i64).collect();
    let Standard {
        norm, mean, inv, ..
    } = standardize(&mut n, x, axes, Some(eps))?;
    let mut y = n.op("mul", &[norm, g], Attrs::new())?;
    if n.name(2).is_some() {
        let b = n.v(2)?;
        y = n.op("add", &[y, b], Attrs::new())?;
    }
    Ok(vec![Out::Value(y), Out::Value(mean), Out::Value(inv)])
}

/// ONNX `RMSNormalization`.
pub(super) fn r_m_s_normalization(mut n: N, _op: &str) -> R {
    let (x, g) = (n.v(0)?, n.v(1)?);
    let dims = n.dims(x);
    let axis = rank_axis(n.ai("axis", -1), dims.len());
    let eps = n.af("epsilon", 1e-5);
    n.one(
        "rms_norm",
        &[x, g],
        Attrs::new().with("axis", axis).with("eps", eps),
    )
}

/// ONNX `BatchNormalization`: inference with the running statistics, or
/// (training_mode = 1) the batch's statistics, with the updated running
/// mean and variance as outputs 1 and 2.
pub(super) fn batch_normalization(mut n: N, _op: &str) -> R {
    let ins: Vec<ValueId> = (0..5).map(|k| n.v(k)).collect::<Result<_, _>>()?;
    let eps = n.af("epsilon", 1e-5);
    let rank = n.dims(ins[0]).len();
    if rank < 2 {
        return Err(format!(
            "the input must have a channel axis, got rank {rank}"
        ));
    }
    if n.ai("training_mode", 0) == 0 {
        return n.one("batch_norm", &ins, Attrs::new().with("eps", eps));
    }
    let (x, scale, bias, mean, var) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
    let d = n.cx.b.dtype(x);
    let mom = n.af("momentum", 0.9);
    let c = n.dims(x)[1] as i64;
    // The per-channel values as (C, 1, …, 1) to broadcast over (N, C, …).
    let mut cshape = vec![c];
    cshape.extend(std::iter::repeat_n(1, rank - 2));
    let axes: Vec<i64> = (0..rank as i64).filter(|&a| a != 1).collect();
    let Standard {
        norm,
        mean: bm,
        var: bv,
        ..
    } = standardize(&mut n, x, axes, Some(eps))?;
    let sc = n.op(
        "reshape",
        &[scale],
        Attrs::new().with("shape", cshape.clone()),
    )?;
    let bi = n.op("reshape", &[bias], Attrs::new().with("shape", cshape))?;
    let y = n.op("mul", &[norm, sc], Attrs::new())?;
    let y = n.op("add", &[y, bi], Attrs::new())?;
    // running = running · momentum + batch · (1 − momentum)
    let (m, m1) = (n.scalar(mom, d)?, n.scalar(1.0 - mom, d)?);
    let run = |n: &mut N, old: ValueId, batch: ValueId| -> Result<ValueId, String> {
        let b = n.op("reshape", &[batch], Attrs::new().with("shape", vec![c]))?;
        let a = n.op("mul", &[old, m], Attrs::new())?;
        let b = n.op("mul", &[b, m1], Attrs::new())?;
        n.op("add", &[a, b], Attrs::new())
    };
    let rm = run(&mut n, mean, bm)?;
    let rv = run(&mut n, var, bv)?;
    Ok(vec![Out::Value(y), Out::Value(rm), Out::Value(rv)])
}

/// ONNX `LpNormalization`: x / ‖x‖ₚ along `axis` (p = 1 or 2).
pub(super) fn lp_normalization(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let axis = n.ai("axis", -1);
    let p = n.ai("p", 2);
    let r = Attrs::new().with("axes", vec![axis]).with("keepdim", true);
    let norm = match p {
        1 => {
            let a = n.op("abs", &[x], Attrs::new())?;
            n.op("reduce_sum", &[a], r)?
        }
        2 => {
            let sq = n.op("mul", &[x, x], Attrs::new())?;
            let s = n.op("reduce_sum", &[sq], r)?;
            n.op("sqrt", &[s], Attrs::new())?
        }
        o => return Err(format!("p = {o} (ONNX allows 1 or 2)")),
    };
    // A zero vector stays zero (the reference divides by 1 there).
    let d = n.cx.b.dtype(x);
    let (zero, one) = (n.scalar(0.0, d)?, n.scalar(1.0, d)?);
    let z = n.op("eq", &[norm, zero], Attrs::new())?;
    let norm = n.op("where", &[z, one, norm], Attrs::new())?;
    n.one("div", &[x, norm], Attrs::new())
}

/// ONNX `InstanceNormalization` and `GroupNormalization`: mean and
/// variance per (batch, group) — a group per channel for the former —
/// then scale and bias per channel (per group in GroupNormalization-18).
pub(super) fn group_normalization(mut n: N, op: &str) -> R {
    let (x, scale, bias) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let d = n.dims(x);
    if d.len() < 2 {
        return Err(format!("the input needs a channel axis, got {d:?}"));
    }
    let c = d[1];
    let groups = if op == "InstanceNormalization" {
        c
    } else {
        usize::try_from(n.ai("num_groups", 0)).unwrap_or(0)
    };
    if groups == 0 || !c.is_multiple_of(groups) {
        return Err(format!("{c} channels do not split into {groups} groups"));
    }
    let eps = n.af("epsilon", 1e-5);
    let g = n.op(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![d[0] as i64, groups as i64, -1]),
    )?;
    let norm = standardize(&mut n, g, vec![2], Some(eps))?.norm;
    let shape: Vec<i64> = d.iter().map(|&v| v as i64).collect();
    let norm = n.op("reshape", &[norm], Attrs::new().with("shape", shape))?;
    // Per-channel parameters as (C, 1, …); per-group ones repeated first.
    let per_channel = |n: &mut N, p: ValueId| -> Result<ValueId, String> {
        let len = n.dims(p).iter().product::<usize>();
        let p = if len == groups && groups != c {
            let u = n.op(
                "reshape",
                &[p],
                Attrs::new().with("shape", vec![groups as i64, 1]),
            )?;
            let b = n.op(
                "broadcast",
                &[u],
                Attrs::new().with("shape", vec![groups as i64, (c / groups) as i64]),
            )?;
            n.op("reshape", &[b], Attrs::new().with("shape", vec![c as i64]))?
        } else if len == c {
            p
        } else {
            return Err(format!("a scale or bias of {len} values for {c} channels"));
        };
        let mut s = vec![c as i64];
        s.extend(std::iter::repeat_n(1, d.len() - 2));
        n.op("reshape", &[p], Attrs::new().with("shape", s))
    };
    let s = per_channel(&mut n, scale)?;
    let b = per_channel(&mut n, bias)?;
    let y = n.op("mul", &[norm, s], Attrs::new())?;
    n.one("add", &[y, b], Attrs::new())
}

/// ONNX `LRN`: x / (bias + α/size · Σ x² over `size` neighbouring
/// channels)^β — the channel window sum as an average pool over a
/// (N, 1, C, rest) view, padding counted.
pub(super) fn lrn(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let d = n.dims(x);
    let size = n.ai("size", 0);
    if d.len() < 3 || size < 1 {
        return Err(format!(
            "needs (N, C, …) and size >= 1, got {d:?} and {size}"
        ));
    }
    let (alpha, beta, bias) = (n.af("alpha", 1e-4), n.af("beta", 0.75), n.af("bias", 1.0));
    let dt = n.cx.b.dtype(x);
    let sq = n.op("mul", &[x, x], Attrs::new())?;
    let rest: usize = d[2..].iter().product();
    let v = n.op(
        "reshape",
        &[sq],
        Attrs::new().with("shape", vec![d[0] as i64, 1, d[1] as i64, rest as i64]),
    )?;
    let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let avg = n.op(
        "avg_pool",
        &[v],
        Attrs::new()
            .with("kernel", vec![size, 1])
            .with("strides", vec![1i64, 1])
            .with("pads", vec![lo, 0, hi, 0])
            .with("count_include_pad", true),
    )?;
    let shape: Vec<i64> = d.iter().map(|&v| v as i64).collect();
    let avg = n.op("reshape", &[avg], Attrs::new().with("shape", shape))?;
    // Σ = avg · size, so α/size · Σ = α · avg.
    let a = n.scalar(alpha, dt)?;
    let t = n.op("mul", &[avg, a], Attrs::new())?;
    let bb = n.scalar(bias, dt)?;
    let t = n.op("add", &[t, bb], Attrs::new())?;
    let be = n.scalar(beta, dt)?;
    let den = n.op("pow", &[t, be], Attrs::new())?;
    n.one("div", &[x, den], Attrs::new())
}

/// ONNX `MeanVarianceNormalization`: (x − mean) / √var over `axes`
/// (default batch and spatial: 0, 2, 3).
pub(super) fn mean_variance_normalization(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let axes = n.aints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    let norm = standardize(&mut n, x, axes, None)?.norm;
    Ok(vec![Out::Value(norm)])
}

/// Mean and variance of `x` over `axes`, and `x` standardized by them;
/// `eps = None` divides by √var itself (MeanVarianceNormalization).
fn standardize(
    n: &mut N,
    x: ValueId,
    axes: Vec<i64>,
    eps: Option<f64>,
) -> Result<Standard, String> {
    let red = Attrs::new().with("axes", axes).with("keepdim", true);
    let mean = n.op("reduce_mean", &[x], red.clone())?;
    let xc = n.op("sub", &[x, mean], Attrs::new())?;
    let sq = n.op("mul", &[xc, xc], Attrs::new())?;
    let var = n.op("reduce_mean", &[sq], red)?;
    let ve = match eps {
        Some(e) => {
            let d = n.cx.b.dtype(x);
            let e = n.scalar(e, d)?;
            n.op("add", &[var, e], Attrs::new())?
        }
        None => var,
    };
    let inv = n.op("rsqrt", &[ve], Attrs::new())?;
    let norm = n.op("mul", &[xc, inv], Attrs::new())?;
    Ok(Standard {
        norm,
        mean,
        var,
        inv,
    })
}

/// `x` standardized over `axes` (kept as size 1).
struct Standard {
    /// (x − mean) · rsqrt(var + eps)
    norm: ValueId,
    mean: ValueId,
    var: ValueId,
    /// rsqrt(var + eps)
    inv: ValueId,
}
