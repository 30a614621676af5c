//! Arithmetic, activations, reductions beyond the plain ones, and
//! selection (ArgMax, TopK, Hardmax) as IR ops.

use super::*;

/// ONNX `Max`, `Min`, `Sum`, `Mean`.
pub(super) fn max_op(mut n: N, op: &str) -> R {
    let node = n.node;
    let r = match op {
        "Max" => "max",
        "Min" => "min",
        _ => "add",
    };
    let count = node.input.len();
    let mut acc = n.v(0)?;
    for k in 1..count {
        let x = n.v(k)?;
        acc = n.op(r, &[acc, x], Attrs::new())?;
    }
    if op == "Mean" {
        let d = n.cx.b.dtype(acc);
        let c = n.scalar(count as f64, d)?;
        acc = n.op("div", &[acc, c], Attrs::new())?;
    }
    Ok(vec![Out::Value(acc)])
}

/// ONNX `MatMul`.
pub(super) fn mat_mul(mut n: N, _op: &str) -> R {
    let (a, b) = (n.v(0)?, n.v(1)?);
    n.one("matmul", &[a, b], Attrs::new())
}

/// ONNX `Gemm`.
pub(super) fn gemm(mut n: N, _op: &str) -> R {
    let (mut a, mut b) = (n.v(0)?, n.v(1)?);
    if n.ai("transA", 0) == 1 {
        a = n.op("permute", &[a], Attrs::new().with("perm", vec![1i64, 0]))?;
    }
    if n.ai("transB", 0) == 1 {
        b = n.op("permute", &[b], Attrs::new().with("perm", vec![1i64, 0]))?;
    }
    let mut y = n.op("matmul", &[a, b], Attrs::new())?;
    let d = n.cx.b.dtype(y);
    let alpha = n.af("alpha", 1.0);
    if alpha != 1.0 {
        let s = n.scalar(alpha, d)?;
        y = n.op("mul", &[y, s], Attrs::new())?;
    }
    if n.name(2).is_some() {
        let mut c = n.v(2)?;
        let beta = n.af("beta", 1.0);
        if beta != 1.0 {
            let s = n.scalar(beta, d)?;
            c = n.op("mul", &[c, s], Attrs::new())?;
        }
        y = n.op("add", &[y, c], Attrs::new())?;
    }
    Ok(vec![Out::Value(y)])
}

/// ONNX `Softmax`, `LogSoftmax`.
pub(super) fn softmax(mut n: N, op: &str) -> R {
    let r = if op == "Softmax" {
        "softmax"
    } else {
        "log_softmax"
    };
    let x = n.v(0)?;
    let dims = n.dims(x);
    let rank = dims.len();
    if n.cx.opset >= 13 {
        let axis = n.ai("axis", -1);
        return n.one(r, &[x], Attrs::new().with("axis", axis));
    }
    // Before opset 13: over the flattened trailing axes from `axis`.
    let axis = axis_in(n.ai("axis", 1), rank, rank.saturating_sub(1))?;
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis..].iter().product();
    let flat = n.op(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![outer as i64, inner as i64]),
    )?;
    let s = n.op(r, &[flat], Attrs::new().with("axis", 1i64))?;
    let back: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    n.one("reshape", &[s], Attrs::new().with("shape", back))
}

/// ONNX `Clip`.
pub(super) fn clip_op(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let bound = |n: &N, k: usize, attr: &str| -> Result<Option<f64>, String> {
        if n.cx.opset < 11 {
            return Ok(n.attr(attr).map(|a| a.f() as f64));
        }
        n.float_in(k)
    };
    let (lo, hi) = (bound(&n, 1, "min")?, bound(&n, 2, "max")?);
    let mut a = Attrs::new();
    if let Some(l) = lo {
        a = a.with("min", l);
    }
    if let Some(h) = hi {
        a = a.with("max", h);
    }
    n.one("clamp", &[x], a)
}

/// ONNX `LeakyRelu`.
pub(super) fn leaky_relu(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let d = n.cx.b.dtype(x);
    let alpha = n.af("alpha", 0.01);
    let (a, z) = (n.scalar(alpha, d)?, n.scalar(0.0, d)?);
    let ax = n.op("mul", &[x, a], Attrs::new())?;
    let neg = n.op("lt", &[x, z], Attrs::new())?;
    n.one("where", &[neg, ax, x], Attrs::new())
}

/// ONNX `IsInf`.
pub(super) fn is_inf(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let (pos, neg) = (n.ai("detect_positive", 1), n.ai("detect_negative", 1));
    let inf = n.op("isinf", &[x], Attrs::new())?;
    if pos == 1 && neg == 1 {
        return Ok(vec![Out::Value(inf)]);
    }
    let d = n.cx.b.dtype(x);
    let z = n.scalar(0.0, d)?;
    let side = n.op(if pos == 1 { "gt" } else { "lt" }, &[x, z], Attrs::new())?;
    n.one("and", &[inf, side], Attrs::new())
}

/// ONNX `ArgMax`, `ArgMin`.
pub(super) fn arg_max(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let axis = axis_in(n.ai("axis", 0), dims.len(), dims.len().saturating_sub(1))? as i64;
    let keep = n.ai("keepdims", 1) == 1;
    let r = op.to_lowercase();
    if n.ai("select_last_index", 0) == 0 {
        return n.one(
            &r,
            &[x],
            Attrs::new().with("axis", axis).with("keepdim", keep),
        );
    }
    // The last of equal extremes: the first one of the flipped axis,
    // counted back from the end.
    let f = n.op("flip", &[x], Attrs::new().with("axes", vec![axis]))?;
    let i = n.op(
        &r,
        &[f],
        Attrs::new().with("axis", axis).with("keepdim", keep),
    )?;
    let d = n.cx.b.dtype(i);
    let last = n.scalar(dims[axis as usize] as f64 - 1.0, d)?;
    n.one("sub", &[last, i], Attrs::new())
}

/// ONNX `Mod`.
pub(super) fn mod_op(mut n: N, _op: &str) -> R {
    let (a, b) = (n.v(0)?, n.v(1)?);
    if n.ai("fmod", 0) == 1 || n.cx.b.dtype(a).is_float() {
        // C fmod: the sign of the dividend (rlx `rem`).
        if n.ai("fmod", 0) != 1 {
            return Err("Mod with fmod = 0 on floats is not defined".into());
        }
        return n.one("rem", &[a, b], Attrs::new());
    }
    // Integer Mod: the sign of the divisor, ((a rem b) + b) rem b.
    let r = n.op("rem", &[a, b], Attrs::new())?;
    let s = n.op("add", &[r, b], Attrs::new())?;
    n.one("rem", &[s, b], Attrs::new())
}

/// ONNX `Dropout`.
pub(super) fn dropout(mut n: N, _op: &str) -> R {
    let training = n.cx.opset >= 12 && n.float_in(2)?.is_some_and(|t| t != 0.0)
        || n.cx.opset < 7 && n.ai("is_test", 0) == 0;
    // The ratio: an attribute before opset 12, then input 1.
    let ratio = if n.cx.opset >= 12 {
        n.float_in(1)?.unwrap_or(0.5)
    } else {
        n.af("ratio", 0.5)
    };
    if training && ratio != 0.0 {
        return Err("training mode (random dropout) is not supported yet".into());
    }
    let x = n.v(0)?;
    let y = n.op("identity", &[x], Attrs::new())?;
    // Nothing is dropped: the mask keeps every element.
    let dims = n.dims(x);
    let numel = check_elems_of(DType::Bool, &dims)?;
    let mask =
        HostTensor::from_f64(DType::Bool, dims, vec![1.0; numel]).map_err(|e| e.to_string())?;
    Ok(vec![Out::Value(y), Out::Const(mask)])
}

/// ONNX `BitShift` (direction LEFT or RIGHT).
pub(super) fn bit_shift(mut n: N, _op: &str) -> R {
    let (x, s) = (n.v(0)?, n.v(1)?);
    let r = match n.astr("direction").as_deref() {
        Some("LEFT") => "shl",
        Some("RIGHT") => "shr",
        o => return Err(format!("direction {o:?} must be LEFT or RIGHT")),
    };
    n.one(r, &[x, s], Attrs::new())
}

/// ONNX `CumSum`, `CumProd`.
pub(super) fn cum_sum(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let axis = n
        .ints_in(1)?
        .and_then(|a| a.first().copied())
        .ok_or("CumSum needs its axis")?;
    let (ex, rev) = (n.ai("exclusive", 0) == 1, n.ai("reverse", 0) == 1);
    let r = if op == "CumSum" { "cumsum" } else { "cumprod" };
    n.one(
        r,
        &[x],
        Attrs::new()
            .with("axis", axis)
            .with("exclusive", ex)
            .with("reverse", rev),
    )
}

/// ONNX `ReduceL1`, `ReduceL2`, `ReduceSumSquare`.
pub(super) fn reduce_l1(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let rank = n.dims(x).len();
    let axes = match n.aints("axes") {
        Some(a) => Some(a),
        None => n.ints_in(1)?,
    };
    let axes: Vec<i64> = match axes {
        Some(a) if !a.is_empty() => a,
        _ => (0..rank as i64).collect(),
    };
    let keep = n.ai("keepdims", 1) == 1;
    let t = if op == "ReduceL1" {
        n.op("abs", &[x], Attrs::new())?
    } else {
        n.op("mul", &[x, x], Attrs::new())?
    };
    let s = n.op(
        "reduce_sum",
        &[t],
        Attrs::new().with("axes", axes).with("keepdim", keep),
    )?;
    if op == "ReduceL2" {
        n.one("sqrt", &[s], Attrs::new())
    } else {
        Ok(vec![Out::Value(s)])
    }
}

/// ONNX `Softsign`, `Elu`, `Selu`, `Celu`, `HardSigmoid`, `HardSwish`, `ThresholdedRelu`, `Mish`.
pub(super) fn softsign(mut n: N, op: &str) -> R {
    let x = n.v(0)?;
    let d = n.cx.b.dtype(x);
    let c = |n: &mut N, v: f64| n.scalar(v, d);
    let y = match op {
        "Softsign" => {
            let (a, one) = (n.op("abs", &[x], Attrs::new())?, c(&mut n, 1.0)?);
            let den = n.op("add", &[a, one], Attrs::new())?;
            n.op("div", &[x, den], Attrs::new())?
        }
        "Elu" | "Selu" | "Celu" => {
            let alpha = n.af(
                "alpha",
                match op {
                    "Selu" => 1.673_263_2,
                    _ => 1.0,
                },
            );
            let gamma = if op == "Selu" {
                n.af("gamma", 1.050_701)
            } else {
                1.0
            };
            // alpha·(exp(x/alpha) − 1) for Celu, alpha·(exp(x) − 1) otherwise, where x < 0.
            let xin = if op == "Celu" {
                let a = c(&mut n, alpha)?;
                n.op("div", &[x, a], Attrs::new())?
            } else {
                x
            };
            let e = n.op("expm1", &[xin], Attrs::new())?;
            let a = c(&mut n, alpha)?;
            let neg = n.op("mul", &[e, a], Attrs::new())?;
            let z = c(&mut n, 0.0)?;
            let lt = n.op("lt", &[x, z], Attrs::new())?;
            let y = n.op("where", &[lt, neg, x], Attrs::new())?;
            if gamma != 1.0 {
                let g = c(&mut n, gamma)?;
                n.op("mul", &[y, g], Attrs::new())?
            } else {
                y
            }
        }
        "HardSigmoid" | "HardSwish" => {
            let (alpha, beta) = if op == "HardSwish" {
                (1.0 / 6.0, 0.5)
            } else {
                (n.af("alpha", 0.2), n.af("beta", 0.5))
            };
            let (a, b) = (c(&mut n, alpha)?, c(&mut n, beta)?);
            let ax = n.op("mul", &[x, a], Attrs::new())?;
            let s = n.op("add", &[ax, b], Attrs::new())?;
            let h = n.op(
                "clamp",
                &[s],
                Attrs::new().with("min", 0.0).with("max", 1.0),
            )?;
            if op == "HardSwish" {
                n.op("mul", &[x, h], Attrs::new())?
            } else {
                h
            }
        }
        "ThresholdedRelu" => {
            let alpha = n.af("alpha", 1.0);
            let t = c(&mut n, alpha)?;
            let z = c(&mut n, 0.0)?;
            let gt = n.op("gt", &[x, t], Attrs::new())?;
            n.op("where", &[gt, x, z], Attrs::new())?
        }
        _ => {
            let sp = n.op("softplus", &[x], Attrs::new())?;
            let t = n.op("tanh", &[sp], Attrs::new())?;
            n.op("mul", &[x, t], Attrs::new())?
        }
    };
    Ok(vec![Out::Value(y)])
}

/// ONNX `PRelu`.
pub(super) fn p_relu(mut n: N, _op: &str) -> R {
    let (x, slope) = (n.v(0)?, n.v(1)?);
    let d = n.cx.b.dtype(x);
    let z = n.scalar(0.0, d)?;
    let sx = n.op("mul", &[x, slope], Attrs::new())?;
    let lt = n.op("lt", &[x, z], Attrs::new())?;
    n.one("where", &[lt, sx, x], Attrs::new())
}

/// ONNX `Gelu`.
pub(super) fn gelu(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let r = match n.astr("approximate").as_deref() {
        None | Some("none") => "gelu",
        Some("tanh") => "gelu_tanh",
        Some(o) => return Err(format!("approximate = {o:?}")),
    };
    n.one(r, &[x], Attrs::new())
}

/// ONNX `TopK`.
pub(super) fn top_k(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let k = n
        .ints_in(1)?
        .and_then(|k| k.first().copied())
        .ok_or("TopK needs k")?;
    let axis = n.ai("axis", -1);
    let largest = n.ai("largest", 1) == 1;
    if n.ai("sorted", 1) != 1 {
        return Err("sorted = 0 is not supported yet".into());
    }
    let outs =
        n.cx.b
            .op(
                "topk",
                &[x],
                Attrs::new()
                    .with("k", k)
                    .with("axis", axis)
                    .with("largest", largest),
            )
            .map_err(|e| e.to_string())?;
    Ok(outs.into_iter().map(Out::Value).collect())
}

/// ONNX `Hardmax`.
pub(super) fn hardmax(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let dims = n.dims(x);
    let rank = dims.len();
    if n.cx.opset < 13 {
        return Err("Hardmax before opset 13 (flattened axes) is not supported yet".into());
    }
    let axis = axis_in(n.ai("axis", -1), rank, rank.saturating_sub(1))?;
    let i = n.op(
        "argmax",
        &[x],
        Attrs::new()
            .with("axis", axis as i64)
            .with("keepdim", false),
    )?;
    let d = n.cx.b.dtype(x);
    n.one(
        "one_hot",
        &[i],
        Attrs::new()
            .with("depth", dims[axis] as i64)
            .with("axis", axis as i64)
            .with("dtype", d),
    )
}

/// ONNX `Det` of [..., M, M] for M ≤ 3, in closed form (the 2×2 cross
/// product, the 3×3 rule of Sarrus): exact, no pivoting needed.
pub(super) fn det(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let d = n.dims(x);
    let r = d.len();
    if r < 2 || d[r - 1] != d[r - 2] {
        return Err(format!("Det takes square matrices [..., M, M], got {d:?}"));
    }
    let m = d[r - 1];
    if m > 3 {
        return Err(format!("Det of {m}×{m} matrices (rlx does M ≤ 3)"));
    }
    // a(i, j): element (i, j) of every matrix, [..., 1, 1].
    let a = |n: &mut N, i: usize, j: usize| -> Result<ValueId, String> {
        let row = n.op(
            "narrow",
            &[x],
            Attrs::new()
                .with("axis", r as i64 - 2)
                .with("start", i as i64)
                .with("len", 1i64),
        )?;
        n.op(
            "narrow",
            &[row],
            Attrs::new()
                .with("axis", r as i64 - 1)
                .with("start", j as i64)
                .with("len", 1i64),
        )
    };
    let mul = |n: &mut N, p: ValueId, q: ValueId| n.op("mul", &[p, q], Attrs::new());
    let y = match m {
        1 => a(&mut n, 0, 0)?,
        2 => {
            let (p, q) = (a(&mut n, 0, 0)?, a(&mut n, 1, 1)?);
            let (s, t) = (a(&mut n, 0, 1)?, a(&mut n, 1, 0)?);
            let (u, v) = (mul(&mut n, p, q)?, mul(&mut n, s, t)?);
            n.op("sub", &[u, v], Attrs::new())?
        }
        _ => {
            // Σ over the three diagonals minus the three anti-diagonals.
            let term = |n: &mut N, cols: [usize; 3]| -> Result<ValueId, String> {
                let e0 = a(n, 0, cols[0])?;
                let e1 = a(n, 1, cols[1])?;
                let e2 = a(n, 2, cols[2])?;
                let p = mul(n, e0, e1)?;
                mul(n, p, e2)
            };
            let plus = [[0, 1, 2], [1, 2, 0], [2, 0, 1]];
            let minus = [[2, 1, 0], [0, 2, 1], [1, 0, 2]];
            let mut acc = term(&mut n, plus[0])?;
            for c in &plus[1..] {
                let t = term(&mut n, *c)?;
                acc = n.op("add", &[acc, t], Attrs::new())?;
            }
            for c in minus {
                let t = term(&mut n, c)?;
                acc = n.op("sub", &[acc, t], Attrs::new())?;
            }
            acc
        }
    };
    n.one(
        "squeeze",
        &[y],
        Attrs::new().with("axes", vec![r as i64 - 2, r as i64 - 1]),
    )
}
