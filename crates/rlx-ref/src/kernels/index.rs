//! Gathers, scatters, one-hot and embedding.

use super::elementwise::concat_data;
use super::*;

fn gather_axis(
    cx: &KernelCx,
    x: &HostTensor,
    idx: &HostTensor,
    ax: usize,
) -> Result<HostTensor, CpuError> {
    let (outer, len, inner) = around(x.shape().dims(), ax);
    let ids = resolve_indices(cx, idx, len)?;
    let mut flat = Vec::with_capacity(outer * ids.len() * inner);
    for o in 0..outer {
        for &j in &ids {
            flat.extend((0..inner).map(|i| (o * len + j) * inner + i));
        }
    }
    Ok(x.take(&flat, cx.out_type(0).shape.clone())?)
}

fn gather(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    Ok(vec![gather_axis(cx, x, cx.input(1), ax)?])
}

fn embedding(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    Ok(vec![gather_axis(cx, cx.input(0), cx.input(1), 0)?])
}

/// For each index tuple (the last axis of `idx`), the flat offset into `x`
/// of the addressed slice, honouring `batch` leading batch axes.
fn nd_offsets(
    cx: &KernelCx,
    x: &Shape,
    idx: &HostTensor,
    batch: usize,
) -> Result<(Vec<usize>, usize), CpuError> {
    let k = *idx.shape().dims().last().unwrap_or(&0);
    let pos_dims = &idx.shape().dims()[..idx.shape().rank() - 1];
    let n: usize = pos_dims.iter().product();
    let raw = ints(idx)?;
    let strides = x.strides();
    let mut out = Vec::with_capacity(n);
    for p in 0..n {
        let pc = unravel(p, pos_dims);
        let mut flat = 0;
        for (a, &c) in pc.iter().take(batch).enumerate() {
            flat += c * strides[a];
        }
        for j in 0..k {
            let ax = batch + j;
            let d = x.dims()[ax] as i64;
            let i = raw[p * k + j];
            let r = if i < 0 { i + d } else { i };
            if r < 0 || r >= d {
                return Err(cx.fail(format!(
                    "index {i} is out of range for axis {ax} of extent {d}"
                )));
            }
            flat += r as usize * strides[ax];
        }
        out.push(flat);
    }
    Ok((out, x.dims()[batch + k..].iter().product()))
}

fn gather_nd(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let (offs, block) = nd_offsets(cx, x.shape(), cx.input(1), cx.int("batch_dims")? as usize)?;
    let flat: Vec<usize> = offs.iter().flat_map(|&o| o..o + block).collect();
    Ok(vec![x.take(&flat, cx.out_type(0).shape.clone())?])
}

/// Flat positions in x addressed by each element of an index tensor along `ax`.
fn element_targets(
    cx: &KernelCx,
    x: &Shape,
    idx: &HostTensor,
    ax: usize,
) -> Result<Vec<usize>, CpuError> {
    let raw = ints(idx)?;
    let strides = x.strides();
    let d = x.dims()[ax] as i64;
    (0..raw.len())
        .map(|p| {
            let mut c = unravel(p, idx.shape().dims());
            let i = raw[p];
            let r = if i < 0 { i + d } else { i };
            if r < 0 || r >= d {
                return Err(cx.fail(format!(
                    "index {i} is out of range for axis {ax} of extent {d}"
                )));
            }
            c[ax] = r as usize;
            Ok(c.iter().zip(&strides).map(|(a, b)| a * b).sum())
        })
        .collect()
}

fn gather_elements(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let t = element_targets(cx, x.shape(), cx.input(1), ax)?;
    Ok(vec![x.take(&t, cx.out_type(0).shape.clone())?])
}

/// Write `updates` at `targets` (last write wins), any dtype.
fn overwrite(
    cx: &KernelCx,
    x: &HostTensor,
    upd: &HostTensor,
    targets: &[usize],
    block: usize,
) -> Result<HostTensor, CpuError> {
    let n = x.numel();
    let mut src: Vec<usize> = (0..n).collect();
    for (k, &t) in targets.iter().enumerate() {
        for b in 0..block {
            src[t + b] = n + k * block + b;
        }
    }
    let all = concat_data(&[x.data(), upd.data()]).map_err(|e| cx.fail(e))?;
    Ok(HostTensor::new(
        x.dtype(),
        x.shape().clone(),
        all.take(&src)?,
    )?)
}

/// Combine `updates` into x at `targets` with a numeric reduction.
fn accumulate(
    x: &HostTensor,
    upd: &HostTensor,
    targets: &[usize],
    block: usize,
    how: &str,
    ty: &TensorType,
) -> Result<HostTensor, CpuError> {
    if x.dtype().is_float() {
        let (mut v, u) = (floats(x)?, floats(upd)?);
        for (k, &t) in targets.iter().enumerate() {
            for b in 0..block {
                let (o, n) = (&mut v[t + b], u[k * block + b]);
                *o = match how {
                    "add" => *o + n,
                    "mul" => *o * n,
                    "max" => o.max(n),
                    "min" => o.min(n),
                    _ => n,
                };
            }
        }
        return from_floats(ty, v);
    }
    let (mut v, u) = (ints(x)?, ints(upd)?);
    for (k, &t) in targets.iter().enumerate() {
        for b in 0..block {
            let (o, n) = (&mut v[t + b], u[k * block + b]);
            *o = match how {
                "add" => o.wrapping_add(n),
                "mul" => o.wrapping_mul(n),
                "max" => (*o).max(n),
                "min" => (*o).min(n),
                _ => n,
            };
        }
    }
    from_ints(ty, v)
}

fn scatter(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let t = element_targets(cx, x.shape(), cx.input(1), ax)?;
    Ok(vec![if cx.op == "scatter_add" {
        accumulate(x, cx.input(2), &t, 1, "add", cx.out_type(0))?
    } else {
        overwrite(cx, x, cx.input(2), &t, 1)?
    }])
}

fn scatter_nd(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let (t, block) = nd_offsets(cx, x.shape(), cx.input(1), 0)?;
    Ok(vec![match cx.str("reduction")? {
        "none" => overwrite(cx, x, cx.input(2), &t, block)?,
        how => accumulate(x, cx.input(2), &t, block, how, cx.out_type(0))?,
    }])
}

fn one_hot(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let idx = cx.input(0);
    let ty = cx.out_type(0);
    let depth = cx.int("depth")?;
    let ax = cx.axis("axis", ty.shape.rank())?;
    let raw = ints(idx)?;
    let (outer, _, inner) = around(ty.shape.dims(), ax);
    let mut out = vec![0.0; ty.shape.numel()];
    for o in 0..outer {
        for i in 0..inner {
            let v = raw[o * inner + i];
            let v = if (-depth..0).contains(&v) {
                v + depth
            } else {
                v
            };
            if (0..depth).contains(&v) {
                out[(o * depth as usize + v as usize) * inner + i] = 1.0;
            }
        }
    }
    Ok(vec![from_floats(ty, out)?])
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("gather", gather),
    ("index_select", gather),
    ("gather_nd", gather_nd),
    ("gather_elements", gather_elements),
    ("scatter", scatter),
    ("scatter_add", scatter),
    ("scatter_nd", scatter_nd),
    ("one_hot", one_hot),
    ("embedding", embedding),
];
