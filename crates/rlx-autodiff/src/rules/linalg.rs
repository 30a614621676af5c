//! Contractions (matmul, dot_general), convolutions and pooling.

use super::reduce::expand_back;
use super::{Jvp, NodeCx, Rule};
use crate::emit::*;
use crate::error::Result;
use rlx_ir::{Attrs, HostTensor, ValueId};

type Out = Result<Vec<Option<ValueId>>>;

fn dims(b: &B, v: ValueId) -> Vec<usize> {
    b.shape(v).dims().to_vec()
}

/// Swap the last two axes.
fn mt(b: &mut B, v: ValueId) -> Result<ValueId> {
    let r = b.shape(v).rank();
    let mut p: Vec<usize> = (0..r).collect();
    p.swap(r - 2, r - 1);
    permute(b, v, &p)
}

/// NumPy matmul: promote 1-D operands to matrices, then
/// dA = G·Bᵀ and dB = Aᵀ·G, summed over broadcast batch axes.
fn vjp_matmul(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (n.inputs[0], n.inputs[1]);
    let (xd, yd) = (dims(b, x), dims(b, y));
    let x2d = if xd.len() == 1 {
        vec![1, xd[0]]
    } else {
        xd.clone()
    };
    let y2d = if yd.len() == 1 {
        vec![yd[0], 1]
    } else {
        yd.clone()
    };
    let x2 = reshape(b, x, &x2d)?;
    let y2 = reshape(b, y, &y2d)?;
    // The output with the promoted axes put back.
    let mut gd = dims(b, n.outputs[0]);
    if xd.len() == 1 {
        gd.insert(gd.len() - usize::from(yd.len() > 1), 1);
    }
    if yd.len() == 1 {
        gd.push(1);
    }
    let g2 = reshape(b, g, &gd)?;
    let gx = if n.wants[0] {
        let yt = mt(b, y2)?;
        let r = b.binary("matmul", g2, yt)?;
        let r = unbroadcast(b, r, &x2d)?;
        Some(reshape(b, r, &xd)?)
    } else {
        None
    };
    let gy = if n.wants[1] {
        let xt = mt(b, x2)?;
        let r = b.binary("matmul", xt, g2)?;
        let r = unbroadcast(b, r, &y2d)?;
        Some(reshape(b, r, &yd)?)
    } else {
        None
    };
    Ok(vec![gx, gy])
}

fn axes(n: &NodeCx, name: &str, rank: usize) -> Result<Vec<usize>> {
    Ok(n.attrs
        .ints(name)?
        .iter()
        .map(|&a| {
            if a < 0 {
                (a + rank as i64) as usize
            } else {
                a as usize
            }
        })
        .collect())
}
fn ints(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&a| a as i64).collect()
}
fn dot(
    b: &mut B,
    x: ValueId,
    y: ValueId,
    lb: &[usize],
    rb: &[usize],
    lc: &[usize],
    rc: &[usize],
) -> Result<ValueId> {
    Ok(b.op1(
        "dot_general",
        &[x, y],
        Attrs::new()
            .with("lhs_batch", ints(lb))
            .with("rhs_batch", ints(rb))
            .with("lhs_contract", ints(lc))
            .with("rhs_contract", ints(rc)),
    )?)
}

/// Output axes are [batch, lhs free, rhs free]. Each operand's cotangent
/// contracts G with the other operand over that operand's free axes; the
/// result comes out in [batch, own free, own contracted (in the other
/// operand's axis order)] and is permuted back.
fn vjp_dot_general(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (n.inputs[0], n.inputs[1]);
    let (ra, rb_) = (b.shape(x).rank(), b.shape(y).rank());
    let (lb, rb) = (axes(n, "lhs_batch", ra)?, axes(n, "rhs_batch", rb_)?);
    let (lc, rc) = (axes(n, "lhs_contract", ra)?, axes(n, "rhs_contract", rb_)?);
    let lfree: Vec<usize> = (0..ra)
        .filter(|i| !lb.contains(i) && !lc.contains(i))
        .collect();
    let rfree: Vec<usize> = (0..rb_)
        .filter(|i| !rb.contains(i) && !rc.contains(i))
        .collect();
    let nb = lb.len();
    let gbatch: Vec<usize> = (0..nb).collect();
    let g_l: Vec<usize> = (nb..nb + lfree.len()).collect();
    let g_r: Vec<usize> = (nb + lfree.len()..nb + lfree.len() + rfree.len()).collect();
    let gx = if n.wants[0] {
        let r = dot(b, g, y, &gbatch, &rb, &g_r, &rfree)?;
        // y's remaining axes are its contracted ones, ascending.
        let mut rem: Vec<usize> = rc.clone();
        rem.sort_unstable();
        let mut src: Vec<usize> = lb.clone();
        src.extend(&lfree);
        src.extend(
            rem.iter()
                .map(|a| lc[rc.iter().position(|r| r == a).unwrap()]),
        );
        Some(permute(b, r, &inverse_perm(&src))?)
    } else {
        None
    };
    let gy = if n.wants[1] {
        let r = dot(b, x, g, &lb, &gbatch, &lfree, &g_l)?;
        let mut rem: Vec<usize> = lc.clone();
        rem.sort_unstable();
        let mut src: Vec<usize> = rb.clone();
        src.extend(
            rem.iter()
                .map(|a| rc[lc.iter().position(|l| l == a).unwrap()]),
        );
        src.extend(&rfree);
        Some(permute(b, r, &inverse_perm(&src))?)
    } else {
        None
    };
    Ok(vec![gx, gy])
}

/// Window parameters of a conv-like node, defaults filled.
struct Win {
    s: Vec<usize>,
    d: Vec<usize>,
    pb: Vec<usize>,
    pe: Vec<usize>,
}
fn win(n: &NodeCx, sp: usize) -> Result<Win> {
    let list = |name: &str, len: usize, fill: usize| -> Result<Vec<usize>> {
        let v = n
            .attrs
            .get(name)
            .map(|_| n.attrs.ints(name))
            .transpose()?
            .unwrap_or(&[]);
        Ok(if v.is_empty() {
            vec![fill; len]
        } else {
            v.iter().map(|&x| x as usize).collect()
        })
    };
    let p = list("pads", 2 * sp, 0)?;
    Ok(Win {
        s: list("strides", sp, 1)?,
        d: list("dilations", sp, 1)?,
        pb: p[..sp].to_vec(),
        pe: p[sp..].to_vec(),
    })
}
fn conv_attrs(w: &Win, groups: i64) -> Attrs {
    let mut pads = ints(&w.pb);
    pads.extend(ints(&w.pe));
    Attrs::new()
        .with("strides", ints(&w.s))
        .with("dilations", ints(&w.d))
        .with("pads", pads)
        .with("groups", groups)
}

/// dW of y = conv(x, W) for one group: correlate x with G, the forward
/// stride becoming the dilation and vice versa; trim to the kernel size.
fn conv_weight_grad(b: &mut B, x: ValueId, g: ValueId, k: &[usize], w: &Win) -> Result<ValueId> {
    let r = b.shape(x).rank();
    let mut p: Vec<usize> = (0..r).collect();
    p.swap(0, 1);
    let xt = permute(b, x, &p)?;
    let gt = permute(b, g, &p)?;
    let swapped = Win {
        s: w.d.clone(),
        d: w.s.clone(),
        pb: w.pb.clone(),
        pe: w.pe.clone(),
    };
    let mut c = b.op1("conv", &[xt, gt], conv_attrs(&swapped, 1))?;
    for (i, &ki) in k.iter().enumerate() {
        if b.shape(c).dims()[2 + i] != ki {
            c = b.op1(
                "narrow",
                &[c],
                Attrs::new()
                    .with("axis", (2 + i) as i64)
                    .with("start", 0i64)
                    .with("len", ki as i64),
            )?;
        }
    }
    permute(b, c, &p)
}

/// dW over groups: split channels, one weight gradient per group, concat.
fn grouped_weight_grad(
    b: &mut B,
    x: ValueId,
    g: ValueId,
    k: &[usize],
    w: &Win,
    groups: usize,
) -> Result<ValueId> {
    if groups == 1 {
        return conv_weight_grad(b, x, g, k, w);
    }
    let split = |b: &mut B, v: ValueId| -> Result<Vec<ValueId>> {
        let c = b.shape(v).dims()[1] / groups;
        Ok(b.op(
            "split",
            &[v],
            Attrs::new()
                .with("axis", 1i64)
                .with("sizes", vec![c as i64; groups]),
        )?)
    };
    let xs = split(b, x)?;
    let gs = split(b, g)?;
    let mut parts = vec![];
    for (xi, gi) in xs.into_iter().zip(gs) {
        parts.push(conv_weight_grad(b, xi, gi, k, w)?);
    }
    Ok(b.op1("concat", &parts, Attrs::new().with("axis", 0i64))?)
}

fn bias_grad(b: &mut B, g: ValueId) -> Result<ValueId> {
    let r = b.shape(g).rank();
    let ax: Vec<usize> = (0..r).filter(|&a| a != 1).collect();
    sum(b, g, &ax, false)
}

fn vjp_conv(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None; n.inputs.len()]);
    };
    let (x, wt) = (n.inputs[0], n.inputs[1]);
    let (xd, wd) = (dims(b, x), dims(b, wt));
    let sp = xd.len() - 2;
    let w = win(n, sp)?;
    let groups = n.attrs.int("groups")?;
    let gd = dims(b, g);
    let mut out = vec![None; n.inputs.len()];
    if n.wants[0] {
        // conv_transpose with the output padding that restores x's extent.
        let op: Vec<i64> = (0..sp)
            .map(|i| {
                let full = (gd[2 + i] - 1) * w.s[i] + w.d[i] * (wd[2 + i] - 1) + 1;
                xd[2 + i] as i64 - (full as i64 - (w.pb[i] + w.pe[i]) as i64)
            })
            .collect();
        let a = conv_attrs(&w, groups).with("output_padding", op);
        out[0] = Some(b.op1("conv_transpose", &[g, wt], a)?);
    }
    if n.wants[1] {
        out[1] = Some(grouped_weight_grad(b, x, g, &wd[2..], &w, groups as usize)?);
    }
    if n.inputs.len() == 3 && n.wants[2] {
        out[2] = Some(bias_grad(b, g)?);
    }
    Ok(out)
}

/// y = conv_transpose(x, W) is the x-gradient of a conv, so dx is that
/// conv applied to G, and dW is the conv weight gradient with the roles of
/// input and output swapped.
fn vjp_conv_transpose(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None; n.inputs.len()]);
    };
    let (x, wt) = (n.inputs[0], n.inputs[1]);
    let wd = dims(b, wt);
    let sp = wd.len() - 2;
    let w = win(n, sp)?;
    let groups = n.attrs.int("groups")?;
    let mut out = vec![None; n.inputs.len()];
    if n.wants[0] {
        let gx = b.op1("conv", &[g, wt], conv_attrs(&w, groups))?;
        // Output padding can leave trailing x positions unreached: trim/pad.
        let xd = dims(b, x);
        let mut gx = gx;
        for i in 0..sp {
            let have = b.shape(gx).dims()[2 + i];
            if have > xd[2 + i] {
                gx = b.op1(
                    "narrow",
                    &[gx],
                    Attrs::new()
                        .with("axis", (2 + i) as i64)
                        .with("start", 0i64)
                        .with("len", xd[2 + i] as i64),
                )?;
            }
        }
        out[0] = Some(gx);
    }
    if n.wants[1] {
        out[1] = Some(grouped_weight_grad(b, g, x, &wd[2..], &w, groups as usize)?);
    }
    if n.inputs.len() == 3 && n.wants[2] {
        out[2] = Some(bias_grad(b, g)?);
    }
    Ok(out)
}

/// Pools whose windows tile the input (kernel = stride, no padding,
/// dilation 1): view x as (N, C, Ho, k1, Wo, k2, ...) and spread G over
/// each window — evenly (average) or to the elements equal to the max.
fn vjp_pool(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let xd = dims(b, x);
    let sp = xd.len() - 2;
    let k: Vec<usize> = n
        .attrs
        .ints("kernel")?
        .iter()
        .map(|&v| v as usize)
        .collect();
    let w = win(n, sp)?;
    let tiled =
        w.s == k && w.d.iter().all(|&d| d == 1) && w.pb.iter().chain(&w.pe).all(|&p| p == 0);
    if !tiled {
        return pool_general(b, n, g, &k, &w);
    }
    let yd = dims(b, n.outputs[0]);
    // The part of x the windows cover.
    let mut xc = x;
    for i in 0..sp {
        let cover = yd[2 + i] * k[i];
        if cover != xd[2 + i] {
            xc = b.op1(
                "narrow",
                &[xc],
                Attrs::new()
                    .with("axis", (2 + i) as i64)
                    .with("start", 0i64)
                    .with("len", cover as i64),
            )?;
        }
    }
    let mut split = xd[..2].to_vec();
    let mut one = xd[..2].to_vec();
    for i in 0..sp {
        split.extend([yd[2 + i], k[i]]);
        one.extend([yd[2 + i], 1]);
    }
    let win_axes: Vec<usize> = (0..sp).map(|i| 3 + 2 * i).collect();
    let gb = reshape(b, g, &one)?;
    let gb = broadcast_to(b, gb, &split)?;
    let gx = if n.op == "max_pool" {
        let xs = reshape(b, xc, &split)?;
        let yb = reshape(b, n.outputs[0], &one)?;
        let yb = broadcast_to(b, yb, &split)?;
        let hit = b.binary("eq", xs, yb)?;
        let dt = b.dtype(x);
        let m = b.op1("cast", &[hit], Attrs::new().with("dtype", dt))?;
        let cnt = sum(b, m, &win_axes, true)?;
        let m = div(b, m, cnt)?;
        let m = stop(b, m)?;
        mul(b, gb, m)?
    } else {
        scale(b, gb, 1.0 / k.iter().product::<usize>() as f64)?
    };
    let mut cover = xd[..2].to_vec();
    cover.extend((0..sp).map(|i| yd[2 + i] * k[i]));
    let mut gx = reshape(b, gx, &cover)?;
    for i in 0..sp {
        let rest = xd[2 + i] - cover[2 + i];
        if rest > 0 {
            let r = xd.len();
            let mut pads = vec![0i64; 2 * r];
            pads[r + 2 + i] = rest as i64;
            gx = b.op1("pad", &[gx], Attrs::new().with("pads", pads))?;
        }
    }
    Ok(vec![Some(gx)])
}

/// Any window geometry (overlap, padding, dilation): a host-computed table
/// `idx[o, j]` of the flat input position under kernel element `j` of
/// output window `o` (padding points at one extra sentinel slot) gathers
/// each window, spreads G over it (max: to the elements equal to the
/// maximum, shared by ties; average: divided by the window's divisor),
/// and scatter-adds the contributions back.
fn pool_general(b: &mut B, n: &NodeCx, g: ValueId, k: &[usize], w: &Win) -> Out {
    let x = n.inputs[0];
    let xd = dims(b, x);
    let yd = dims(b, n.outputs[0]);
    let sp = k.len();
    let (nb, c) = (xd[0], xd[1]);
    let sflat: usize = xd[2..].iter().product();
    let pout: usize = yd[2..].iter().product();
    let kk: usize = k.iter().product();
    let mut idx = Vec::with_capacity(pout * kk);
    let mut valid = vec![0usize; pout];
    for (o, cnt) in valid.iter_mut().enumerate() {
        // Unflatten o over the output extents and j over the kernel.
        let mut oi = vec![0; sp];
        let mut r = o;
        for i in (0..sp).rev() {
            oi[i] = r % yd[2 + i];
            r /= yd[2 + i];
        }
        for j in 0..kk {
            let mut ji = vec![0; sp];
            let mut r = j;
            for i in (0..sp).rev() {
                ji[i] = r % k[i];
                r /= k[i];
            }
            let mut flat = 0i64;
            let mut inside = true;
            for i in 0..sp {
                let p = (oi[i] * w.s[i] + ji[i] * w.d[i]) as i64 - w.pb[i] as i64;
                inside &= p >= 0 && p < xd[2 + i] as i64;
                flat = flat * xd[2 + i] as i64 + p;
            }
            idx.push(if inside { flat } else { sflat as i64 });
            *cnt += usize::from(inside);
        }
    }
    let dt = b.dtype(x);
    let table = b.constant(HostTensor::from_i64(
        rlx_ir::DType::I64,
        vec![pout, kk],
        idx,
    )?)?;
    let gb = reshape(b, g, &[nb, c, pout, 1])?;
    let contrib = if n.op == "max_pool" {
        let xf = reshape(b, x, &[nb, c, sflat])?;
        // The sentinel slot is never the maximum.
        let xf = b.op1(
            "pad",
            &[xf],
            Attrs::new()
                .with("pads", vec![0i64, 0, 0, 0, 0, 1])
                .with("value", f64::MIN),
        )?;
        let win = b.op1("gather", &[xf, table], Attrs::new().with("axis", 2i64))?;
        let yb = reshape(b, n.outputs[0], &[nb, c, pout, 1])?;
        let hit = b.binary("eq", win, yb)?;
        let m = b.op1("cast", &[hit], Attrs::new().with("dtype", dt))?;
        let cnt = sum(b, m, &[3], true)?;
        let m = div(b, m, cnt)?;
        let m = stop(b, m)?;
        mul(b, gb, m)?
    } else {
        let include =
            n.attrs.get("count_include_pad").is_some() && n.attrs.bool("count_include_pad")?;
        let div_v: Vec<f64> = valid
            .iter()
            .map(|&v| if include { kk as f64 } else { v.max(1) as f64 })
            .collect();
        let dv = b.constant(HostTensor::from_f64(dt, vec![pout, 1], div_v)?)?;
        let q = div(b, gb, dv)?;
        // Padding positions land in the sentinel slot, which is dropped.
        broadcast_to(b, q, &[nb, c, pout, kk])?
    };
    let contrib = reshape(b, contrib, &[nb, c, pout * kk])?;
    let tb = reshape(b, table, &[1, 1, pout * kk])?;
    let tb = broadcast_to(b, tb, &[nb, c, pout * kk])?;
    let z = zeros(b, &rlx_ir::TensorType::new(dt, vec![nb, c, sflat + 1]))?;
    let gx = b.op1(
        "scatter_add",
        &[z, tb, contrib],
        Attrs::new().with("axis", 2i64),
    )?;
    let gx = b.op1(
        "narrow",
        &[gx],
        Attrs::new()
            .with("axis", 2i64)
            .with("start", 0i64)
            .with("len", sflat as i64),
    )?;
    Ok(vec![Some(reshape(b, gx, &xd)?)])
}

fn spatial(b: &B, x: ValueId) -> Vec<usize> {
    (2..b.shape(x).rank()).collect()
}
fn vjp_global_avg(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let ax = spatial(b, x);
    let c: usize = ax.iter().map(|&a| b.shape(x).dims()[a]).product();
    let g = scale(b, g, 1.0 / c as f64)?;
    Ok(vec![Some(expand_back(b, g, x, &ax)?)])
}
fn vjp_global_max(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let ax = spatial(b, x);
    let y = expand_back(b, n.outputs[0], x, &ax)?;
    let hit = b.binary("eq", x, y)?;
    let dt = b.dtype(x);
    let m = b.op1("cast", &[hit], Attrs::new().with("dtype", dt))?;
    let cnt = sum(b, m, &ax, true)?;
    let m = div(b, m, cnt)?;
    let m = stop(b, m)?;
    let g = expand_back(b, g, x, &ax)?;
    Ok(vec![Some(mul(b, g, m)?)])
}

pub static RULES: &[(&str, Rule)] = &[
    (
        "matmul",
        Rule::General {
            vjp: vjp_matmul,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "dot_general",
        Rule::General {
            vjp: vjp_dot_general,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "conv",
        Rule::General {
            vjp: vjp_conv,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "conv_transpose",
        Rule::General {
            vjp: vjp_conv_transpose,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "max_pool",
        Rule::General {
            vjp: vjp_pool,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "avg_pool",
        Rule::General {
            vjp: vjp_pool,
            jvp: Jvp::Linear,
        },
    ),
    (
        "global_avg_pool",
        Rule::General {
            vjp: vjp_global_avg,
            jvp: Jvp::Linear,
        },
    ),
    (
        "global_max_pool",
        Rule::General {
            vjp: vjp_global_max,
            jvp: Jvp::Transpose,
        },
    ),
];
