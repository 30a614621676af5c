//! Movement kernels. Each computes, for every output element, which input
//! element it reads, then gathers — so every dtype works the same way.

use super::elementwise::concat_data;
use super::*;

/// Flat source indices of an output whose coordinate on axis k reads
/// source coordinate `maps[k][c]` (`None`: read the fill element instead).
fn per_axis(src: &Shape, maps: &[Vec<Option<usize>>]) -> Vec<Option<usize>> {
    let strides = src.strides();
    let dims: Vec<usize> = maps.iter().map(|m| m.len()).collect();
    let n: usize = dims.iter().product();
    (0..n)
        .map(|o| {
            let c = unravel(o, &dims);
            let mut flat = 0;
            for k in 0..dims.len() {
                flat += maps[k][c[k]]? * strides[k];
            }
            Some(flat)
        })
        .collect()
}

fn gather_out(
    cx: &KernelCx,
    x: &HostTensor,
    idx: Vec<Option<usize>>,
    fill: Option<f64>,
) -> Result<HostTensor, CpuError> {
    let ty = cx.out_type(0);
    let n = x.numel();
    let data = if idx.iter().any(|i| i.is_none()) {
        let f = HostTensor::from_f64(x.dtype(), [1], vec![fill.unwrap_or(0.0)])?;
        concat_data(&[x.data(), f.data()]).map_err(|e| cx.fail(e))?
    } else {
        x.data().clone()
    };
    let flat: Vec<usize> = idx.into_iter().map(|i| i.unwrap_or(n)).collect();
    Ok(HostTensor::new(
        ty.dtype,
        ty.shape.clone(),
        data.take(&flat)?,
    )?)
}

fn identity_map(d: usize) -> Vec<Option<usize>> {
    (0..d).map(Some).collect()
}

/// Reshape, squeeze, unsqueeze, identity: same elements, new shape.
fn same_elements(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    Ok(vec![cx
        .input(0)
        .clone()
        .reshape(cx.out_type(0).shape.clone())?])
}

fn permute(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let s = x.shape().strides();
    let perm: Vec<usize> = cx
        .ints("perm")?
        .iter()
        .map(|&p| rlx_ir::shape::normalize_axis(p, s.len()))
        .collect::<Result<_, _>>()?;
    let strides: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
    let idx = strided_map(cx.out_type(0).shape.dims(), &strides, 0);
    Ok(vec![x.take(&idx, cx.out_type(0).shape.clone())?])
}

fn broadcast(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ty = cx.out_type(0);
    Ok(vec![x.take(
        &broadcast_map(x.shape(), &ty.shape),
        ty.shape.clone(),
    )?])
}

fn narrow(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let (start, len) = (cx.int("start")? as usize, cx.int("len")? as usize);
    let mut maps: Vec<_> = x.shape().dims().iter().map(|&d| identity_map(d)).collect();
    maps[ax] = (start..start + len).map(Some).collect();
    Ok(vec![gather_out(cx, x, per_axis(x.shape(), &maps), None)?])
}

fn slice(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let plan = rlx_ir::ops::shape::slice_plan(x.shape(), cx.attrs).map_err(|e| cx.fail(e))?;
    let maps: Vec<Vec<Option<usize>>> = plan
        .iter()
        .map(|&(s, st, n)| (0..n as i64).map(|i| Some((s + i * st) as usize)).collect())
        .collect();
    Ok(vec![gather_out(cx, x, per_axis(x.shape(), &maps), None)?])
}

fn concat(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let ty = cx.out_type(0);
    let ax = cx.axis("axis", ty.shape.rank())?;
    let (outer, _, inner) = around(ty.shape.dims(), ax);
    let parts: Vec<&rlx_ir::TensorData> = cx.inputs.iter().map(|t| t.data()).collect();
    let all = concat_data(&parts).map_err(|e| cx.fail(e))?;
    let mut idx = Vec::with_capacity(ty.shape.numel());
    for o in 0..outer {
        let mut base = 0;
        for t in cx.inputs {
            let len = t.shape().dims()[ax];
            idx.extend((0..len * inner).map(|k| base + o * len * inner + k));
            base += t.numel();
        }
    }
    Ok(vec![HostTensor::new(
        ty.dtype,
        ty.shape.clone(),
        all.take(&idx)?,
    )?])
}

fn split(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let mut start = 0;
    let mut outs = Vec::new();
    for ty in cx.outputs {
        let len = ty.shape.dims()[ax];
        let mut maps: Vec<_> = x.shape().dims().iter().map(|&d| identity_map(d)).collect();
        maps[ax] = (start..start + len).map(Some).collect();
        let idx: Vec<usize> = per_axis(x.shape(), &maps).into_iter().flatten().collect();
        outs.push(x.take(&idx, ty.shape.clone())?);
        start += len;
    }
    Ok(outs)
}

fn pad(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let pads = cx.ints("pads")?;
    let mode = cx.str("mode")?;
    let r = x.shape().rank();
    let maps: Vec<Vec<Option<usize>>> = (0..r)
        .map(|k| {
            let d = x.shape().dims()[k] as i64;
            let (b, e) = (pads[k], pads[r + k]);
            (-b..d + e)
                .map(|p| match mode {
                    _ if (0..d).contains(&p) => Some(p as usize),
                    "reflect" => Some(if p < 0 { -p } else { 2 * (d - 1) - p } as usize),
                    "edge" => Some(p.clamp(0, d - 1) as usize),
                    _ => None,
                })
                .collect()
        })
        .collect();
    Ok(vec![gather_out(
        cx,
        x,
        per_axis(x.shape(), &maps),
        Some(cx.float("value")?),
    )?])
}

fn axis_maps(
    cx: &KernelCx,
    x: &HostTensor,
    f: impl Fn(usize, usize, i64) -> usize,
    list: &str,
    amounts: Option<&[i64]>,
) -> Result<HostTensor, CpuError> {
    let r = x.shape().rank();
    let mut maps: Vec<_> = x.shape().dims().iter().map(|&d| identity_map(d)).collect();
    for (k, &a) in cx.ints(list)?.iter().enumerate() {
        let ax = rlx_ir::shape::normalize_axis(a, r)?;
        let d = x.shape().dims()[ax];
        let amt = amounts.map_or(0, |s| s[k]);
        // Compose with earlier entries for the same axis (roll may list an axis twice).
        let prev = maps[ax].clone();
        maps[ax] = (0..d).map(|c| prev[f(c, d, amt)]).collect();
    }
    gather_out(cx, x, per_axis(x.shape(), &maps), None)
}

fn flip(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    Ok(vec![axis_maps(
        cx,
        cx.input(0),
        |c, d, _| d - 1 - c,
        "axes",
        None,
    )?])
}

fn roll(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let shifts = cx.ints("shifts")?.to_vec();
    let f = |c: usize, d: usize, s: i64| (c as i64 - s).rem_euclid(d as i64) as usize;
    Ok(vec![axis_maps(cx, cx.input(0), f, "axes", Some(&shifts))?])
}

fn tile(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ty = cx.out_type(0);
    let maps: Vec<Vec<Option<usize>>> = (0..x.shape().rank())
        .map(|k| {
            (0..ty.shape.dims()[k])
                .map(|c| Some(c % x.shape().dims()[k].max(1)))
                .collect()
        })
        .collect();
    Ok(vec![gather_out(cx, x, per_axis(x.shape(), &maps), None)?])
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("reshape", same_elements),
    ("squeeze", same_elements),
    ("unsqueeze", same_elements),
    ("identity", same_elements),
    ("transfer", same_elements),
    ("stop_gradient", same_elements),
    ("permute", permute),
    ("broadcast", broadcast),
    ("narrow", narrow),
    ("slice", slice),
    ("concat", concat),
    ("split", split),
    ("pad", pad),
    ("flip", flip),
    ("roll", roll),
    ("tile", tile),
];
