//! Structural rewrites: the "rewritten" dispatch path. Unlike a fused op's
//! decomposition (which defines the op), a rewrite is one of several valid
//! ways to express a *primitive* through other primitives — chosen only
//! when a backend lacks the op. Each rule states when it applies.

use rlx_ir::op::DecomposeFn;
use rlx_ir::ops::linalg::Window;
use rlx_ir::{Attrs, GraphBuilder, IrError, TensorType, ValueId};

/// One rewrite rule.
pub struct Rewrite {
    pub name: &'static str,
    /// The op it replaces.
    pub op: &'static str,
    /// `Ok` when the rule applies to these input types and attributes.
    pub applies: fn(&[TensorType], &Attrs) -> Result<(), String>,
    pub apply: DecomposeFn,
}

type Out = Result<Vec<ValueId>, IrError>;

fn always(_: &[TensorType], _: &Attrs) -> Result<(), String> {
    Ok(())
}

fn global_pool(b: &mut GraphBuilder, x: &[ValueId], reduce: &str) -> Out {
    let r = b.shape(x[0]).rank() as i64;
    let axes: Vec<i64> = (2..r).collect();
    Ok(vec![b.reduce_keep(reduce, x[0], &axes)?])
}
fn global_avg(b: &mut GraphBuilder, x: &[ValueId], _: &Attrs) -> Out {
    global_pool(b, x, "reduce_mean")
}
fn global_max(b: &mut GraphBuilder, x: &[ValueId], _: &Attrs) -> Out {
    global_pool(b, x, "reduce_max")
}

fn embedding_as_gather(b: &mut GraphBuilder, x: &[ValueId], _: &Attrs) -> Out {
    b.op("gather", x, Attrs::new().with("axis", 0i64))
}

fn index_select_as_gather(b: &mut GraphBuilder, x: &[ValueId], a: &Attrs) -> Out {
    b.op("gather", x, Attrs::new().with("axis", a.int("axis")?))
}

fn axes(a: &Attrs, name: &str, rank: usize) -> Result<Vec<usize>, IrError> {
    a.ints(name)?
        .iter()
        .map(|&v| rlx_ir::shape::normalize_axis(v, rank))
        .collect()
}

/// dot_general as batched matmul: permute each operand to (batch, free,
/// contract) / (batch, contract, free), flatten, multiply, restore.
fn dot_general_as_matmul(b: &mut GraphBuilder, x: &[ValueId], a: &Attrs) -> Out {
    let (ld, rd) = (b.shape(x[0]).dims().to_vec(), b.shape(x[1]).dims().to_vec());
    let (lb, lc) = (
        axes(a, "lhs_batch", ld.len())?,
        axes(a, "lhs_contract", ld.len())?,
    );
    let (rb, rc) = (
        axes(a, "rhs_batch", rd.len())?,
        axes(a, "rhs_contract", rd.len())?,
    );
    let lf: Vec<usize> = (0..ld.len())
        .filter(|i| !lb.contains(i) && !lc.contains(i))
        .collect();
    let rf: Vec<usize> = (0..rd.len())
        .filter(|i| !rb.contains(i) && !rc.contains(i))
        .collect();
    let prod = |d: &[usize], ix: &[usize]| ix.iter().map(|&i| d[i] as i64).product::<i64>();
    let (bn, m, k, n) = (
        prod(&ld, &lb),
        prod(&ld, &lf),
        prod(&ld, &lc),
        prod(&rd, &rf),
    );
    let perm = |v: Vec<&[usize]>| {
        v.concat()
            .into_iter()
            .map(|i| i as i64)
            .collect::<Vec<i64>>()
    };
    let lp = b.op1(
        "permute",
        &[x[0]],
        Attrs::new().with("perm", perm(vec![&lb, &lf, &lc])),
    )?;
    let rp = b.op1(
        "permute",
        &[x[1]],
        Attrs::new().with("perm", perm(vec![&rb, &rc, &rf])),
    )?;
    let l3 = b.op1("reshape", &[lp], Attrs::new().with("shape", vec![bn, m, k]))?;
    let r3 = b.op1("reshape", &[rp], Attrs::new().with("shape", vec![bn, k, n]))?;
    let y = b.binary("matmul", l3, r3)?;
    let mut out: Vec<i64> = lb.iter().map(|&i| ld[i] as i64).collect();
    out.extend(lf.iter().map(|&i| ld[i] as i64));
    out.extend(rf.iter().map(|&i| rd[i] as i64));
    Ok(vec![b.op1(
        "reshape",
        &[y],
        Attrs::new().with("shape", out),
    )?])
}

fn conv_applies(t: &[TensorType], a: &Attrs) -> Result<(), String> {
    if a.int("groups").map_err(|e| e.to_string())? != 1 {
        return Err("im2col handles groups = 1 only".into());
    }
    if t[0].shape.numel() == 0 || t[1].shape.numel() == 0 {
        return Err("empty tensors".into());
    }
    Ok(())
}

/// conv as im2col + matmul: one strided slice of the padded input per
/// kernel offset, stacked into columns (N, C·K, P), multiplied by the
/// flattened weight (Cout, C·K).
fn conv_as_im2col(b: &mut GraphBuilder, x: &[ValueId], a: &Attrs) -> Out {
    let xd = b.shape(x[0]).dims().to_vec();
    let wd = b.shape(x[1]).dims().to_vec();
    let n = xd.len() - 2;
    let win = Window::read(a, wd[2..].to_vec()).map_err(IrError::msg)?;
    let outd = win.out_dims(&xd[2..]).map_err(IrError::msg)?;
    let mut src = x[0];
    if win.pads_begin.iter().chain(&win.pads_end).any(|&p| p > 0) {
        let mut pads = vec![0i64, 0];
        pads.extend(win.pads_begin.iter().map(|&p| p as i64));
        pads.extend([0, 0]);
        pads.extend(win.pads_end.iter().map(|&p| p as i64));
        src = b.op1("pad", &[src], Attrs::new().with("pads", pads))?;
    }
    let kk: usize = wd[2..].iter().product();
    let mut cols = Vec::with_capacity(kk);
    for flat in 0..kk {
        // Kernel offset of this column block, row-major over the kernel axes.
        let mut rem = flat;
        let mut off = vec![0usize; n];
        for i in (0..n).rev() {
            off[i] = rem % wd[2 + i];
            rem /= wd[2 + i];
        }
        let starts: Vec<i64> = (0..n).map(|i| (off[i] * win.dilations[i]) as i64).collect();
        let ends: Vec<i64> = (0..n)
            .map(|i| starts[i] + ((outd[i] - 1) * win.strides[i] + 1) as i64)
            .collect();
        let steps: Vec<i64> = win.strides.iter().map(|&s| s as i64).collect();
        let ax: Vec<i64> = (2..2 + n as i64).collect();
        let s = b.op1(
            "slice",
            &[src],
            Attrs::new()
                .with("starts", starts)
                .with("ends", ends)
                .with("steps", steps)
                .with("axes", ax),
        )?;
        cols.push(b.op1("unsqueeze", &[s], Attrs::new().with("axes", vec![2i64]))?);
    }
    let stacked = if cols.len() == 1 {
        cols[0]
    } else {
        b.op1("concat", &cols, Attrs::new().with("axis", 2i64))?
    };
    let p: usize = outd.iter().product();
    let ck = (xd[1] * kk) as i64;
    let cols = b.op1(
        "reshape",
        &[stacked],
        Attrs::new().with("shape", vec![xd[0] as i64, ck, p as i64]),
    )?;
    let w2 = b.op1(
        "reshape",
        &[x[1]],
        Attrs::new().with("shape", vec![wd[0] as i64, ck]),
    )?;
    let y = b.binary("matmul", w2, cols)?;
    let mut shape = vec![xd[0] as i64, wd[0] as i64];
    shape.extend(outd.iter().map(|&d| d as i64));
    let mut y = b.op1("reshape", &[y], Attrs::new().with("shape", shape))?;
    if let Some(&bias) = x.get(2) {
        let mut bs = vec![wd[0] as i64];
        bs.extend(std::iter::repeat_n(1, n));
        let bias = b.op1("reshape", &[bias], Attrs::new().with("shape", bs))?;
        y = b.binary("add", y, bias)?;
    }
    Ok(vec![y])
}

/// Every rewrite rule, in the order they are tried.
pub static REWRITES: &[Rewrite] = &[
    Rewrite {
        name: "conv→im2col+matmul",
        op: "conv",
        applies: conv_applies,
        apply: conv_as_im2col,
    },
    Rewrite {
        name: "dot_general→matmul",
        op: "dot_general",
        applies: always,
        apply: dot_general_as_matmul,
    },
    Rewrite {
        name: "global_avg_pool→reduce_mean",
        op: "global_avg_pool",
        applies: always,
        apply: global_avg,
    },
    Rewrite {
        name: "global_max_pool→reduce_max",
        op: "global_max_pool",
        applies: always,
        apply: global_max,
    },
    Rewrite {
        name: "embedding→gather",
        op: "embedding",
        applies: always,
        apply: embedding_as_gather,
    },
    Rewrite {
        name: "index_select→gather",
        op: "index_select",
        applies: always,
        apply: index_select_as_gather,
    },
];

/// The rules that replace `op`.
pub fn rewrites_for(op: &str) -> impl Iterator<Item = &'static Rewrite> + '_ {
    REWRITES.iter().filter(move |r| r.op == op)
}
