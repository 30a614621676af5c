//! MaxPool's second output, `Indices`: for each window the flat index of
//! its maximum over the whole input tensor (row-major, or column-major
//! over the spatial axes with `storage_order = 1`), as ONNX's reference.
//! The windows are a table known at import ([out positions, kernel
//! positions] → input position, padding → a −∞ column): one gather, an
//! argmax (the first maximum), and the table looked up at the winner.

use super::*;

/// `x` [N, C, spatial…]; `out` the pooled spatial sizes; `pads` as
/// [begins…, ends…] (ceil mode already folded in).
#[allow(clippy::too_many_arguments)]
pub(super) fn indices(
    n: &mut N,
    x: ValueId,
    out: &[usize],
    kernel: &[i64],
    strides: &[i64],
    pads: &[i64],
    dil: &[i64],
    column_major: bool,
) -> Result<ValueId, String> {
    let dims = n.dims(x);
    let sp = dims.len() - 2;
    let spatial = &dims[2..];
    let s: usize = spatial.iter().product();
    let (p, k): (usize, usize) = (
        out.iter().product(),
        kernel.iter().map(|&v| v as usize).product(),
    );
    check_elems(DType::I64, p.saturating_mul(k))?;
    // The gather reads row-major positions (the tensor's layout); the
    // answer is in `storage_order`'s.
    let pos = |c: &mut dyn Iterator<Item = (usize, &i64)>| -> i64 {
        c.fold(0, |a, (i, &v)| a * spatial[i] as i64 + v)
    };
    let row = |c: &[i64]| pos(&mut c.iter().enumerate());
    let flat = |c: &[i64]| {
        if column_major {
            pos(&mut c.iter().enumerate().rev())
        } else {
            row(c)
        }
    };
    let (mut read, mut answer) = (Vec::with_capacity(p * k), Vec::with_capacity(p * k));
    let mut oc = vec![0usize; sp];
    for _ in 0..p {
        let mut kc = vec![0i64; sp];
        for _ in 0..k {
            let c: Vec<i64> = (0..sp)
                .map(|i| oc[i] as i64 * strides[i] - pads[i] + kc[i] * dil[i])
                .collect();
            let inside = c
                .iter()
                .zip(spatial)
                .all(|(&v, &d)| (0..d as i64).contains(&v));
            read.push(if inside { row(&c) } else { s as i64 });
            answer.push(if inside { flat(&c) } else { 0 });
            for i in (0..sp).rev() {
                kc[i] += 1;
                if kc[i] < kernel[i] {
                    break;
                }
                kc[i] = 0;
            }
        }
        for i in (0..sp).rev() {
            oc[i] += 1;
            if oc[i] < out[i] {
                break;
            }
            oc[i] = 0;
        }
    }
    let nc = (dims[0] * dims[1]) as i64;
    let d = n.cx.b.dtype(x);
    let x2 = n.op(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![nc, s as i64]),
    )?;
    let neg = n.scalar(f64::NEG_INFINITY, d)?;
    let pad_col = n.op("broadcast", &[neg], Attrs::new().with("shape", vec![nc, 1]))?;
    let xe = n.op("concat", &[x2, pad_col], Attrs::new().with("axis", 1i64))?;
    let table = |n: &mut N, v: Vec<i64>| -> Result<ValueId, String> {
        let t = HostTensor::from_i64(DType::I64, vec![p, k], v).map_err(|e| e.to_string())?;
        n.cx.b.constant(t).map_err(|e| e.to_string())
    };
    let read = table(n, read)?;
    let windows = n.op("gather", &[xe, read], Attrs::new().with("axis", 1i64))?; // [nc, p, k]
    let best = n.op(
        "argmax",
        &[windows],
        Attrs::new().with("axis", 2i64).with("keepdim", true),
    )?;
    let answer = table(n, answer)?;
    let answer = n.op(
        "broadcast",
        &[answer],
        Attrs::new().with("shape", vec![nc, p as i64, k as i64]),
    )?;
    let pos = n.op(
        "gather_elements",
        &[answer, best],
        Attrs::new().with("axis", 2i64),
    )?;
    // Plus the (n, c) slab's start: (n·C + c)·S.
    let base: Vec<i64> = (0..nc).map(|i| i * s as i64).collect();
    let base = HostTensor::from_i64(DType::I64, vec![nc as usize, 1, 1], base)
        .map_err(|e| e.to_string())?;
    let base = n.cx.b.constant(base).map_err(|e| e.to_string())?;
    let pos = n.op("add", &[pos, base], Attrs::new())?;
    let mut shape: Vec<i64> = vec![dims[0] as i64, dims[1] as i64];
    shape.extend(out.iter().map(|&o| o as i64));
    n.op("reshape", &[pos], Attrs::new().with("shape", shape))
}
