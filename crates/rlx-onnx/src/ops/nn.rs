//! Network layers: convolutions and pools (Conv, ConvTranspose, pools,
//! Col2Im, CausalConvWithState), the loss ops, and layout reshuffles
//! (DepthToSpace, SpaceToDepth, Shrink), several as decompositions.

use super::*;

/// ONNX `Conv`, `MaxPool`, `AveragePool`, `LpPool`.
pub(super) fn conv(mut n: N, op: &str) -> R {
    conv_of(&mut n, op, None)
}

/// A `Conv` with this node's attributes over given input and weight (the
/// integer convolutions, centred first); no bias.
pub(super) fn conv_with(n: &mut N, op: &str, x: ValueId, w: ValueId) -> R {
    conv_of(n, op, Some((x, w)))
}

fn conv_of(n: &mut N, op: &str, given: Option<(ValueId, ValueId)>) -> R {
    let node = n.node;
    let x = match given {
        Some((x, _)) => x,
        None => n.v(0)?,
    };
    let weight = |n: &mut N| match given {
        Some((_, w)) => Ok(w),
        None => n.v(1),
    };
    let dims = n.dims(x);
    let sp = dims.len().saturating_sub(2);
    let kernel: Vec<i64> = match n.aints("kernel_shape") {
        Some(k) => k,
        None if op == "Conv" => {
            let w = weight(n)?;
            n.dims(w).iter().skip(2).map(|&d| d as i64).collect()
        }
        None => return Err("no kernel_shape".into()),
    };
    let strides = n.aints("strides").unwrap_or_else(|| vec![1; sp]);
    let dil = n.aints("dilations").unwrap_or_else(|| vec![1; sp]);
    if dims.len() < 3 || kernel.len() != sp || strides.len() != sp || dil.len() != sp {
        return Err(format!(
            "a {}-d input needs {sp} kernel sizes, strides and dilations, got {}, {}, {}",
            dims.len(),
            kernel.len(),
            strides.len(),
            dil.len()
        ));
    }
    if strides.iter().chain(&dil).chain(&kernel).any(|&v| v < 1) {
        return Err("kernel sizes, strides and dilations must be at least 1".into());
    }
    let auto = n.astr("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let mut pads = match auto.as_str() {
        "NOTSET" => n.aints("pads").unwrap_or_else(|| vec![0; 2 * sp]),
        "VALID" => vec![0; 2 * sp],
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut p = vec![0; 2 * sp];
            for i in 0..sp {
                let (inp, s, k, d) = (dims[2 + i] as i64, strides[i], kernel[i], dil[i]);
                let out = inp.saturating_add(s - 1) / s;
                let total = (out - 1)
                    .saturating_mul(s)
                    .saturating_add((k - 1).saturating_mul(d))
                    .saturating_add(1 - inp)
                    .max(0);
                let small = total / 2;
                let (b, e) = if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                p[i] = b;
                p[sp + i] = e;
            }
            p
        }
        o => return Err(format!("auto_pad = {o:?}")),
    };
    if pads.len() != 2 * sp || pads.iter().any(|&p| p < 0) {
        return Err(format!("pads {pads:?} for {sp} spatial axes"));
    }
    let ceil = n.ai("ceil_mode", 0) != 0;
    let given_pads = pads.clone();
    if ceil {
        // Ceil mode as more padding at the end: the padded positions never
        // win a max and are not counted in an average (count_include_pad
        // = 0); a last window that would start in the end padding is
        // dropped, as ONNX and PyTorch do.
        for i in 0..sp {
            let (inp, s, ek) = (dims[2 + i] as i64, strides[i], (kernel[i] - 1) * dil[i] + 1);
            let span = inp + pads[i] + pads[sp + i] - ek;
            let mut out = (span + s - 1).div_euclid(s) + 1;
            if (out - 1) * s >= inp + pads[i] {
                out -= 1;
            }
            let extra = (out - 1) * s + ek - (inp + pads[i] + pads[sp + i]);
            pads[sp + i] += extra.max(0);
        }
    }
    match op {
        "Conv" => {
            let w = weight(n)?;
            let mut ins = vec![x, w];
            if given.is_none() && n.name(2).is_some() {
                ins.push(n.v(2)?);
            }
            let group = n.ai("group", 1);
            n.one(
                "conv",
                &ins,
                Attrs::new()
                    .with("strides", strides)
                    .with("pads", pads)
                    .with("dilations", dil)
                    .with("groups", group),
            )
        }
        "MaxPool" => {
            let y = n.op(
                "max_pool",
                &[x],
                Attrs::new()
                    .with("kernel", kernel.clone())
                    .with("strides", strides.clone())
                    .with("pads", pads.clone())
                    .with("dilations", dil.clone()),
            )?;
            if node.output.get(1).is_none_or(|o| o.is_empty()) {
                return Ok(vec![Out::Value(y)]);
            }
            let out: Vec<usize> = n.dims(y)[2..].to_vec();
            let col = n.ai("storage_order", 0) != 0;
            let i = super::pool_index::indices(n, x, &out, &kernel, &strides, &pads, &dil, col)?;
            Ok(vec![Out::Value(y), Out::Value(i)])
        }
        _ => {
            let lp = op == "LpPool";
            // LpPool: (Σ |x|^p)^(1/p) over the window, padding counted as 0.
            let cip = lp || n.ai("count_include_pad", 0) == 1;
            let p = n.ai("p", 2) as f64;
            let d = n.cx.b.dtype(x);
            let src = if lp {
                let a = n.op("abs", &[x], Attrs::new())?;
                let pe = n.scalar(p, d)?;
                n.op("pow", &[a, pe], Attrs::new())?
            } else {
                x
            };
            let area: i64 = kernel.iter().product();
            let avg = if dil.iter().any(|&d| d != 1) || cip && ceil {
                let w = Window {
                    kernel: &kernel,
                    strides: &strides,
                    dil: &dil,
                    pads: &pads,
                    given: &given_pads,
                };
                pool_by_conv(n, src, &w, cip)?
            } else {
                n.op(
                    "avg_pool",
                    &[src],
                    Attrs::new()
                        .with("kernel", kernel)
                        .with("strides", strides)
                        .with("pads", pads)
                        .with("count_include_pad", cip),
                )?
            };
            if !lp {
                return Ok(vec![Out::Value(avg)]);
            }
            let k = n.scalar(area as f64, d)?;
            let sum = n.op("mul", &[avg, k], Attrs::new())?;
            let inv = n.scalar(1.0 / p, d)?;
            n.one("pow", &[sum, inv], Attrs::new())
        }
    }
}

/// A pooling window: sizes, strides, dilations, the pads applied (with
/// ceil mode's extra end padding) and the pads the model gave.
struct Window<'a> {
    kernel: &'a [i64],
    strides: &'a [i64],
    dil: &'a [i64],
    pads: &'a [i64],
    given: &'a [i64],
}

/// An average pool the IR's `avg_pool` does not express (dilations, or
/// ceil mode with padding counted): the window sums as a depthwise conv of
/// ones, divided by the count of positions each window covers — the same
/// conv over a tensor of ones (the model's padding counted when `cip`,
/// ceil mode's extra padding never).
fn pool_by_conv(n: &mut N, x: ValueId, w: &Window, cip: bool) -> Result<ValueId, String> {
    let dims = n.dims(x);
    let (c, sp) = (dims[1], dims.len() - 2);
    let d = n.cx.b.dtype(x);
    let mut kshape = vec![c, 1];
    kshape.extend(w.kernel.iter().map(|&k| k as usize));
    let knumel = check_elems_of(d, &kshape)?;
    let ones = HostTensor::from_f64(d, kshape, vec![1.0; knumel]).map_err(|e| e.to_string())?;
    let k = n.cx.b.constant(ones).map_err(|e| e.to_string())?;
    let conv = |n: &mut N, v: ValueId, k: ValueId, pads: Vec<i64>, groups: i64| {
        n.op(
            "conv",
            &[v, k],
            Attrs::new()
                .with("strides", w.strides.to_vec())
                .with("pads", pads)
                .with("dilations", w.dil.to_vec())
                .with("groups", groups),
        )
    };
    let sum = conv(n, x, k, w.pads.to_vec(), c as i64)?;
    // The count: ones over the input (plus the model's padding when it
    // counts), convolved with a one-channel kernel of ones.
    let mut cshape = vec![1usize, 1];
    let mut cpads = w.pads.to_vec();
    for i in 0..sp {
        let extra = if cip { w.given[i] + w.given[sp + i] } else { 0 };
        cshape.push(dims[2 + i] + extra as usize);
        if cip {
            cpads[i] = 0;
            cpads[sp + i] -= w.given[sp + i];
        }
    }
    let cnumel = check_elems_of(d, &cshape)?;
    let ones = HostTensor::from_f64(d, cshape, vec![1.0; cnumel]).map_err(|e| e.to_string())?;
    let o = n.cx.b.constant(ones).map_err(|e| e.to_string())?;
    let mut k1 = vec![1usize, 1];
    k1.extend(w.kernel.iter().map(|&k| k as usize));
    let ones = HostTensor::from_f64(d, k1, vec![1.0; knumel / c]).map_err(|e| e.to_string())?;
    let k1 = n.cx.b.constant(ones).map_err(|e| e.to_string())?;
    let count = conv(n, o, k1, cpads, 1)?;
    n.op("div", &[sum, count], Attrs::new())
}

/// ONNX `GlobalAveragePool`, `GlobalMaxPool`.
pub(super) fn global_average_pool(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    n.one(
        if op == "GlobalAveragePool" {
            "global_avg_pool"
        } else {
            "global_max_pool"
        },
        &[x],
        Attrs::new(),
    )
}

/// ONNX `NegativeLogLikelihoodLoss`, `SoftmaxCrossEntropyLoss`.
pub(super) fn negative_log_likelihood_loss(mut n: N, op: &str) -> R {
    let node = n.node;
    let (x, t) = (n.v(0)?, n.v(1)?);
    let w = match n.name(2) {
        Some(_) => Some(n.v(2)?),
        None => None,
    };
    let logp = if op == "SoftmaxCrossEntropyLoss" {
        n.op("log_softmax", &[x], Attrs::new().with("axis", 1i64))?
    } else {
        x
    };
    let loss = nll(&mut n, logp, t, w)?;
    let mut outs = vec![Out::Value(loss)];
    if op == "SoftmaxCrossEntropyLoss" && node.output.get(1).is_some_and(|o| !o.is_empty()) {
        outs.push(Out::Value(logp));
    }
    Ok(outs)
}

/// ONNX `ConvTranspose`.
pub(super) fn conv_transpose(mut n: N, _op: &str) -> R {
    let (x, w) = (n.v(0)?, n.v(1)?);
    let (xd, wd) = (n.dims(x), n.dims(w));
    let sp = xd.len().saturating_sub(2);
    let kernel: Vec<i64> = wd.iter().skip(2).map(|&d| d as i64).collect();
    let strides = n.aints("strides").unwrap_or_else(|| vec![1; sp]);
    let dil = n.aints("dilations").unwrap_or_else(|| vec![1; sp]);
    let out_pad = n.aints("output_padding").unwrap_or_else(|| vec![0; sp]);
    if xd.len() < 3
        || kernel.len() != sp
        || strides.len() != sp
        || dil.len() != sp
        || out_pad.len() != sp
    {
        return Err(
            "kernel, strides, dilations and output_padding must match the spatial rank".into(),
        );
    }
    if strides.iter().chain(&dil).any(|&v| v < 1) {
        return Err("strides and dilations must be at least 1".into());
    }
    let auto = n.astr("auto_pad").unwrap_or_else(|| "NOTSET".into());
    // Padding from output_shape or SAME_*: total = stride·(in − 1)
    // + output_padding + (k − 1)·dilation + 1 − out.
    let want: Option<Vec<i64>> = match (n.aints("output_shape"), auto.as_str()) {
        (Some(o), _) => Some(o.iter().rev().take(sp).rev().copied().collect()),
        (None, "SAME_UPPER" | "SAME_LOWER") => {
            Some((0..sp).map(|i| xd[2 + i] as i64 * strides[i]).collect())
        }
        (None, "NOTSET" | "VALID") => None,
        (None, o) => return Err(format!("auto_pad = {o:?}")),
    };
    if want.as_ref().is_some_and(|o| o.len() != sp) {
        return Err(format!("output_shape must give {sp} spatial sizes"));
    }
    // An output_shape beyond what the transposed convolution gives (without
    // SAME_*): the reference leaves the extra rows at the end as zeros (and
    // bias).
    let mut extra = vec![0i64; sp];
    let pads = match want {
        Some(out) => {
            let mut p = vec![0i64; 2 * sp];
            for i in 0..sp {
                let total = strides[i]
                    .saturating_mul(xd[2 + i] as i64 - 1)
                    .saturating_add(out_pad[i])
                    .saturating_add((kernel[i] - 1).saturating_mul(dil[i]))
                    .saturating_add(1)
                    .saturating_sub(out[i]);
                if total < 0 {
                    if auto != "NOTSET" {
                        return Err(format!(
                            "output_shape {out:?} is larger than the transposed convolution \
                             gives (with auto_pad {auto})"
                        ));
                    }
                    extra[i] = -total;
                    continue;
                }
                let half = total / 2;
                let (b, e) = if auto == "SAME_LOWER" {
                    (total - half, half)
                } else {
                    (half, total - half)
                };
                p[i] = b;
                p[sp + i] = e;
            }
            p
        }
        None if auto == "VALID" => vec![0; 2 * sp],
        None => n.aints("pads").unwrap_or_else(|| vec![0; 2 * sp]),
    };
    let mut ins = vec![x, w];
    let bias = if n.name(2).is_some() {
        Some(n.v(2)?)
    } else {
        None
    };
    let grow = extra.iter().any(|&e| e > 0);
    if let (Some(b), false) = (bias, grow) {
        ins.push(b);
    }
    let group = n.ai("group", 1);
    let y = n.op(
        "conv_transpose",
        &ins,
        Attrs::new()
            .with("strides", strides)
            .with("pads", pads)
            .with("dilations", dil)
            .with("groups", group)
            .with("output_padding", out_pad),
    )?;
    if !grow {
        return Ok(vec![Out::Value(y)]);
    }
    // Zeros after the computed rows, then the bias over the whole output.
    let mut p = vec![0i64; 2 * (sp + 2)];
    for i in 0..sp {
        p[sp + 2 + 2 + i] = extra[i];
    }
    let y = n.op("pad", &[y], Attrs::new().with("pads", p))?;
    match bias {
        Some(b) => {
            let mut shape = vec![1i64; sp + 2];
            shape[1] = n.dims(b).iter().product::<usize>() as i64;
            let b = n.op("reshape", &[b], Attrs::new().with("shape", shape))?;
            n.one("add", &[y, b], Attrs::new())
        }
        None => Ok(vec![Out::Value(y)]),
    }
}

/// The negative log-likelihood of `logp` ([N, C, d...]) at the classes
/// `t` ([N, d...]), weighted per class by `w` ([C]), with the node's
/// `reduction` (none, sum, mean: weighted by the weights picked) and
/// `ignore_index` (those elements count zero and weigh zero).
fn nll(n: &mut N, logp: ValueId, t: ValueId, w: Option<ValueId>) -> Result<ValueId, String> {
    let (d, td) = (n.cx.b.dtype(logp), n.cx.b.dtype(t));
    let reduction = n.astr("reduction").unwrap_or_else(|| "mean".into());
    let ignore = n.attr("ignore_index").map(|a| a.i());
    // Ignored targets may lie outside 0..C: read class 0 there instead.
    let (safe, keep) = match ignore {
        Some(i) => {
            let iv = n.scalar(i as f64, td)?;
            let zero = n.scalar(0.0, td)?;
            let is = n.op("eq", &[t, iv], Attrs::new())?;
            let safe = n.op("where", &[is, zero, t], Attrs::new())?;
            let keep = n.op("not", &[is], Attrs::new())?;
            (
                safe,
                Some(n.op("cast", &[keep], Attrs::new().with("dtype", d))?),
            )
        }
        None => (t, None),
    };
    let idx = n.op("unsqueeze", &[safe], Attrs::new().with("axes", vec![1i64]))?;
    let picked = n.op(
        "gather_elements",
        &[logp, idx],
        Attrs::new().with("axis", 1i64),
    )?;
    let picked = n.op("squeeze", &[picked], Attrs::new().with("axes", vec![1i64]))?;
    // The weight of each element: w[t] (or 1), times 0 where ignored.
    let mut weight = match w {
        Some(w) => Some(n.op("gather", &[w, safe], Attrs::new().with("axis", 0i64))?),
        None => None,
    };
    if let Some(k) = keep {
        weight = Some(match weight {
            Some(w) => n.op("mul", &[w, k], Attrs::new())?,
            None => k,
        });
    }
    let neg = n.op("neg", &[picked], Attrs::new())?;
    let loss = match weight {
        Some(w) => n.op("mul", &[neg, w], Attrs::new())?,
        None => neg,
    };
    let rank = n.dims(loss).len() as i64;
    let all: Vec<i64> = (0..rank).collect();
    let sum = |n: &mut N, v: ValueId| {
        n.op(
            "reduce_sum",
            &[v],
            Attrs::new()
                .with("axes", all.clone())
                .with("keepdim", false),
        )
    };
    match reduction.as_str() {
        "none" => Ok(loss),
        "sum" => sum(n, loss),
        "mean" => {
            let total = sum(n, loss)?;
            let count = match weight {
                Some(w) => sum(n, w)?,
                None => {
                    let c: usize = n.dims(loss).iter().product();
                    n.scalar(c as f64, d)?
                }
            };
            n.op("div", &[total, count], Attrs::new())
        }
        r => Err(format!("reduction {r:?}")),
    }
}

/// ONNX `CausalConvWithState`: a depthwise 1-D conv over the past state
/// (zeros when absent) followed by the input, no padding, optional SiLU;
/// the last k − 1 positions are the present state.
pub(super) fn causal_conv_with_state(mut n: N, _op: &str) -> R {
    let (x, w) = (n.v(0)?, n.v(1)?);
    let (xd, wd) = (n.dims(x), n.dims(w));
    if xd.len() != 3 || wd.len() != 3 {
        return Err(format!("input {xd:?} and weight {wd:?} must be rank 3"));
    }
    let (b, c, k) = (xd[0], xd[1], wd[2]);
    if k == 0 {
        return Err("the kernel is empty".into());
    }
    let past = match n.name(3) {
        Some(_) => n.v(3)?,
        None => {
            let d = n.cx.b.dtype(x);
            let z = HostTensor::zeros(d, vec![b, c, k - 1]).map_err(|e| e.to_string())?;
            n.cx.b.constant(z).map_err(|e| e.to_string())?
        }
    };
    let padded = n.op("concat", &[past, x], Attrs::new().with("axis", 2i64))?;
    let mut ins = vec![padded, w];
    if n.name(2).is_some() {
        ins.push(n.v(2)?);
    }
    let y = n.op("conv", &ins, Attrs::new().with("groups", c as i64))?;
    let y = match n.astr("activation").as_deref() {
        None | Some("none") => y,
        Some("silu" | "swish") => n.op("silu", &[y], Attrs::new())?,
        Some(o) => return Err(format!("activation {o:?} (none, silu or swish)")),
    };
    let total = n.dims(padded)[2];
    let state = n.op(
        "narrow",
        &[padded],
        Attrs::new()
            .with("axis", 2i64)
            .with("start", (total - (k - 1)) as i64)
            .with("len", (k - 1) as i64),
    )?;
    Ok(vec![Out::Value(y), Out::Value(state)])
}

/// ONNX `DepthToSpace` (DCR or CRD) and `SpaceToDepth`: reshape, permute,
/// reshape.
pub(super) fn depth_to_space(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let d: Vec<i64> = n.dims(x).iter().map(|&v| v as i64).collect();
    let b = n.ai("blocksize", 0);
    // b² must fit (a blocksize beyond every dimension is an error anyway).
    if d.len() != 4 || !(1..=1 << 20).contains(&b) {
        return Err(format!(
            "needs a 4-d input and blocksize in 1..=2^20, got {d:?} and {b}"
        ));
    }
    let (nn, c, h, w) = (d[0], d[1], d[2], d[3]);
    let (split, perm, out) = if op == "SpaceToDepth" {
        if h % b != 0 || w % b != 0 {
            return Err(format!("{h}×{w} is not a multiple of blocksize {b}"));
        }
        (
            vec![nn, c, h / b, b, w / b, b],
            vec![0i64, 3, 5, 1, 2, 4],
            vec![nn, c * b * b, h / b, w / b],
        )
    } else {
        if c % (b * b) != 0 {
            return Err(format!(
                "{c} channels are not a multiple of blocksize² {}",
                b * b
            ));
        }
        let crd = n.astr("mode").as_deref() == Some("CRD");
        let c2 = c / (b * b);
        if crd {
            (
                vec![nn, c2, b, b, h, w],
                vec![0i64, 1, 4, 2, 5, 3],
                vec![nn, c2, h * b, w * b],
            )
        } else {
            (
                vec![nn, b, b, c2, h, w],
                vec![0i64, 3, 4, 1, 5, 2],
                vec![nn, c2, h * b, w * b],
            )
        }
    };
    let r = n.op("reshape", &[x], Attrs::new().with("shape", split))?;
    let p = n.op("permute", &[r], Attrs::new().with("perm", perm))?;
    n.one("reshape", &[p], Attrs::new().with("shape", out))
}

/// ONNX `Shrink`: x + bias below −λ, x − bias above λ, 0 between.
pub(super) fn shrink(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let d = n.cx.b.dtype(x);
    let (l, b) = (n.af("lambd", 0.5), n.af("bias", 0.0));
    let (nl, pl) = (n.scalar(-l, d)?, n.scalar(l, d)?);
    let (bv, zero) = (n.scalar(b, d)?, n.scalar(0.0, d)?);
    let below = n.op("lt", &[x, nl], Attrs::new())?;
    let above = n.op("gt", &[x, pl], Attrs::new())?;
    let up = n.op("add", &[x, bv], Attrs::new())?;
    let down = n.op("sub", &[x, bv], Attrs::new())?;
    let mid = n.op("where", &[above, down, zero], Attrs::new())?;
    n.one("where", &[below, up, mid], Attrs::new())
}

/// ONNX `Col2Im`: the columns (N, C·∏block, L) summed back into the image
/// — a grouped `conv_transpose` (one group per channel) whose kernel puts
/// column j at its block position: a one-hot weight.
pub(super) fn col2im(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let img = n.ints_in(1)?.ok_or("Col2Im needs image_shape")?;
    let block = n.ints_in(2)?.ok_or("Col2Im needs block_shape")?;
    let r = img.len();
    let xd = n.dims(x);
    if r == 0 || block.len() != r || xd.len() != 3 || block.iter().chain(&img).any(|&v| v < 1) {
        return Err(format!(
            "input {xd:?}, image_shape {img:?}, block_shape {block:?} do not fit"
        ));
    }
    let k: usize = block.iter().map(|&b| b as usize).product();
    if !xd[1].is_multiple_of(k) {
        return Err(format!(
            "{} rows are not a multiple of the block's {k} positions",
            xd[1]
        ));
    }
    let c = xd[1] / k;
    let ints = |name: &str, fill: i64, len: usize| n.aints(name).unwrap_or_else(|| vec![fill; len]);
    let (s, d, p) = (
        ints("strides", 1, r),
        ints("dilations", 1, r),
        ints("pads", 0, 2 * r),
    );
    if s.len() != r || d.len() != r || p.len() != 2 * r {
        return Err("strides, dilations and pads must cover every image axis".into());
    }
    // The column grid: per axis (img + pads − dilated block) / stride + 1.
    let mut grid = Vec::with_capacity(r);
    for i in 0..r {
        let span = img[i] + p[i] + p[r + i] - (d[i] * (block[i] - 1) + 1);
        if span < 0 || s[i] < 1 {
            return Err(format!("axis {i}: the block does not fit the padded image"));
        }
        grid.push(span / s[i] + 1);
    }
    if grid.iter().product::<i64>() != xd[2] as i64 {
        return Err(format!("{} columns for a grid of {grid:?}", xd[2]));
    }
    let mut shape = vec![xd[0] as i64, xd[1] as i64];
    shape.extend(&grid);
    let xr = n.op("reshape", &[x], Attrs::new().with("shape", shape))?;
    let dt = n.cx.b.dtype(x);
    let mut wshape = vec![c * k, 1];
    wshape.extend(block.iter().map(|&b| b as usize));
    let numel = check_elems_of(dt, &wshape)?;
    let mut w = vec![0.0; numel];
    for ch in 0..c {
        for j in 0..k {
            w[(ch * k + j) * k + j] = 1.0;
        }
    }
    let wt = HostTensor::from_f64(dt, wshape, w).map_err(|e| e.to_string())?;
    let wv = n.cx.b.constant(wt).map_err(|e| e.to_string())?;
    n.one(
        "conv_transpose",
        &[xr, wv],
        Attrs::new()
            .with("strides", s)
            .with("dilations", d)
            .with("pads", p)
            .with("groups", c as i64),
    )
}

/// ONNX `MaxUnpool`: each value of X written at its index (flat over the
/// whole unpooled tensor, as MaxPool's Indices give them) into zeros of the
/// unpooled shape, (in − 1)·stride − pads + k; a larger `output_shape`
/// (known at import) then pads zeros at the end, as the reference does.
pub(super) fn max_unpool(mut n: N, _op: &str) -> R {
    let (x, i) = (n.v(0)?, n.v(1)?);
    let xd = n.dims(x);
    let sp = xd.len().saturating_sub(2);
    let kernel = n.aints("kernel_shape").ok_or("no kernel_shape")?;
    let strides = n.aints("strides").unwrap_or_else(|| vec![1; sp]);
    let pads = n.aints("pads").unwrap_or_else(|| vec![0; 2 * sp]);
    if xd.len() < 3 || kernel.len() != sp || strides.len() != sp || pads.len() != 2 * sp {
        return Err("kernel_shape, strides and pads must match the spatial rank".into());
    }
    let mut unpooled = xd[..2].to_vec();
    for k in 0..sp {
        let v = (xd[2 + k] as i64 - 1) * strides[k] - pads[k] - pads[sp + k] + kernel[k];
        unpooled.push(v.max(0) as usize);
    }
    let out: Vec<usize> = match n.ints_in(2)? {
        Some(o) => o.iter().map(|&v| v.max(0) as usize).collect(),
        None => unpooled.clone(),
    };
    if out.len() != xd.len() || out.iter().zip(&unpooled).any(|(o, u)| o < u) {
        return Err(format!(
            "output_shape {out:?} is smaller than the unpooled {unpooled:?}"
        ));
    }
    let total: usize = unpooled.iter().product();
    let dt = n.cx.b.dtype(x);
    let zero = n.scalar(0.0, dt)?;
    let zeros = n.op(
        "broadcast",
        &[zero],
        Attrs::new().with("shape", vec![total as i64]),
    )?;
    let count = xd.iter().product::<usize>() as i64;
    let idx = n.cast_to(i, DType::I64)?;
    let idx = n.op(
        "reshape",
        &[idx],
        Attrs::new().with("shape", vec![count, 1]),
    )?;
    let vals = n.op("reshape", &[x], Attrs::new().with("shape", vec![count]))?;
    let y = n.op("scatter_nd", &[zeros, idx, vals], Attrs::new())?;
    let shape: Vec<i64> = unpooled.iter().map(|&d| d as i64).collect();
    let y = n.op("reshape", &[y], Attrs::new().with("shape", shape))?;
    if out == unpooled {
        return Ok(vec![Out::Value(y)]);
    }
    let r = out.len();
    let mut p = vec![0i64; 2 * r];
    for k in 0..r {
        p[r + k] = (out[k] - unpooled[k]) as i64;
    }
    n.one("pad", &[y], Attrs::new().with("pads", p))
}
