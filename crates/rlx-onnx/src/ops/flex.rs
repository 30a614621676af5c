//! `FlexAttention` (domain `ai.onnx.preview`): attention whose scores and
//! probabilities pass through user graphs. Y = prob_mod(softmax(score_mod(
//! Q·√s · (K·√s)ᵀ))) · V, with grouped K/V heads repeated for the query
//! heads; 16-bit inputs compute the softmax in f32 (or `softmax_precision`),
//! as ONNX's reference does. The mod graphs are inlined on the scores.

use super::*;
use crate::import::Bound;

pub(super) fn flex_attention(n: &mut N) -> R {
    let (q, k, v) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let (qd, kd, vd) = (n.dims(q), n.dims(k), n.dims(v));
    if qd.len() != 4 || kd.len() != 4 || vd.len() != 4 {
        return Err(format!(
            "Q, K, V must be rank 4, got {qd:?}, {kd:?}, {vd:?}"
        ));
    }
    let (hq, e, hkv) = (qd[1], qd[3], kd[1]);
    if kd[3] != e || vd[1] != hkv || vd[2] != kd[2] || hkv == 0 || hq % hkv != 0 {
        return Err(format!(
            "Q {qd:?}, K {kd:?}, V {vd:?} do not fit (K's width is Q's, V shares K's heads \
             and length, Q's heads a multiple of K's)"
        ));
    }
    let dt = n.cx.b.dtype(q);
    let scale = match n.attr("scale") {
        Some(a) => a.f() as f64,
        None => 1.0 / (e as f64).sqrt(),
    };
    let compute = match n.attr("softmax_precision") {
        Some(a) => dtype_of(a.i() as i32)?,
        None if matches!(dt, DType::F16 | DType::BF16) => DType::F32,
        None => dt,
    };
    // Repeat each K/V head for its group of query heads.
    let repeat = |n: &mut N, x: ValueId| -> Result<ValueId, String> {
        if hq == hkv {
            return Ok(x);
        }
        let d = n.dims(x);
        let u = n.op("unsqueeze", &[x], Attrs::new().with("axes", vec![2i64]))?;
        let to = vec![
            d[0] as i64,
            hkv as i64,
            (hq / hkv) as i64,
            d[2] as i64,
            d[3] as i64,
        ];
        let b = n.op("broadcast", &[u], Attrs::new().with("shape", to))?;
        let shape = vec![d[0] as i64, hq as i64, d[2] as i64, d[3] as i64];
        n.op("reshape", &[b], Attrs::new().with("shape", shape))
    };
    let (k, v) = (repeat(n, k)?, repeat(n, v)?);
    // √scale rounded to the input type, on both sides (the reference's order).
    let s = n.scalar((scale as f32).sqrt() as f64, dt)?;
    let qs = n.op("mul", &[q, s], Attrs::new())?;
    let ks = n.op("mul", &[k, s], Attrs::new())?;
    let kt = n.op(
        "permute",
        &[ks],
        Attrs::new().with("perm", vec![0i64, 1, 3, 2]),
    )?;
    let scores = n.op("matmul", &[qs, kt], Attrs::new())?;
    let mut scores = n.cast_to(scores, compute)?;
    if let Some(g) = n.attr("score_mod").and_then(|a| a.g.clone()) {
        scores = apply_mod(n, &g, "score_mod", scores, compute)?;
    }
    let mut probs = n.op("softmax", &[scores], Attrs::new().with("axis", -1i64))?;
    if let Some(g) = n.attr("prob_mod").and_then(|a| a.g.clone()) {
        probs = apply_mod(n, &g, "prob_mod", probs, compute)?;
    }
    let vc = n.cast_to(v, compute)?;
    let y = n.op("matmul", &[probs, vc], Attrs::new())?;
    let y = n.cast_to(y, n.cx.b.dtype(v))?;
    Ok(vec![Out::Value(y)])
}

/// One mod graph (one input, one output) inlined on `x`.
fn apply_mod(
    n: &mut N,
    g: &crate::proto::GraphProto,
    what: &str,
    x: ValueId,
    compute: DType,
) -> Result<ValueId, String> {
    if g.input.len() != 1 || g.output.len() != 1 {
        return Err(format!("{what} must take one input and give one output"));
    }
    let id = n.cx.next_instance();
    let outs =
        n.cx.inline(g, &format!("{what}{id}/"), vec![Bound::Value(x)])
            .map_err(|e| format!("{what}: {e}"))?;
    let y = n.cx.value_of(outs.into_iter().next().ok_or("no output")?)?;
    n.cast_to(y, compute)
}
