//! ONNX `Attention` (opset 23): fused onto the IR's `attention` where it
//! expresses the node (mask kinds none / custom / bias, grouped heads,
//! past key/value, causal), else step by step as the reference computes it.

use super::*;

/// ONNX Attention (opset 23) onto the IR's `attention`: 3-D inputs split
/// into heads, grouped-query K/V repeated to the query heads, past K/V
/// concatenated (and returned as present), `is_causal` as an upper-left
/// keep mask combined with `attn_mask` (bool: keep; float: added).
pub(super) fn attention(n: &mut N) -> R {
    let node = n.node;
    let softcap = n.af("softcap", 0.0);
    let want_qk = node.output.get(3).is_some_and(|o| !o.is_empty());
    let (q, k, v) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let three_d = n.dims(q).len() == 3;
    // [B, S, H·D] → [B, H, S, D].
    let heads = |n: &mut N, x: ValueId, h: i64| -> Result<ValueId, String> {
        if !three_d {
            return Ok(x);
        }
        let d = n.dims(x);
        if d.len() != 3 {
            return Err("with 3-d Q, K and V must be 3-d too".into());
        }
        if h <= 0 || d[2] as i64 % h != 0 {
            return Err(format!("{} features do not split into {h} heads", d[2]));
        }
        let r = n.op(
            "reshape",
            &[x],
            Attrs::new().with("shape", vec![d[0] as i64, d[1] as i64, h, d[2] as i64 / h]),
        )?;
        n.op(
            "permute",
            &[r],
            Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
        )
    };
    let (hq, hkv) = (n.ai("q_num_heads", 0), n.ai("kv_num_heads", 0));
    let q = heads(n, q, hq)?;
    let mut k = heads(n, k, hkv)?;
    let mut v = heads(n, v, hkv)?;
    let mut past = 0;
    if n.name(4).is_some() || n.name(5).is_some() {
        let (pk, pv) = (n.v(4)?, n.v(5)?);
        past = n.dims(pk).get(2).copied().unwrap_or(0);
        k = n.op("concat", &[pk, k], Attrs::new().with("axis", 2i64))?;
        v = n.op("concat", &[pv, v], Attrs::new().with("axis", 2i64))?;
    }
    let (present_k, present_v) = (k, v);
    if [q, k, v].iter().any(|&x| n.dims(x).len() != 4) {
        return Err("Q, K and V must be 3-d (with head counts) or 4-d".into());
    }
    let (qd, kd) = (n.dims(q), n.dims(k));
    let (nq, nk) = (qd[1], kd[1]);
    if nk == 0 || nq % nk != 0 {
        return Err(format!(
            "{nq} query heads are not a multiple of {nk} key heads"
        ));
    }
    if nq != nk {
        // Each K/V head serves nq/nk query heads, adjacent ones.
        let g = (nq / nk) as i64;
        let rep = |n: &mut N, x: ValueId| -> Result<ValueId, String> {
            let d: Vec<i64> = n.dims(x).iter().map(|&v| v as i64).collect();
            let u = n.op("unsqueeze", &[x], Attrs::new().with("axes", vec![2i64]))?;
            let b = n.op(
                "broadcast",
                &[u],
                Attrs::new().with("shape", vec![d[0], d[1], g, d[2], d[3]]),
            )?;
            n.op(
                "reshape",
                &[b],
                Attrs::new().with("shape", vec![d[0], d[1] * g, d[2], d[3]]),
            )
        };
        k = rep(n, k)?;
        v = rep(n, v)?;
    }
    let (sq, sk) = (qd[2], kd[2]);
    let mask = match n.name(3) {
        Some(_) => Some(n.v(3)?),
        None => None,
    };
    let short_mask = mask.is_some_and(|m| n.dims(m).last().is_some_and(|&l| l < sk));
    if softcap != 0.0 || want_qk || short_mask || n.name(6).is_some() {
        let parts = Parts {
            q,
            k,
            v,
            mask,
            past,
            causal: n.ai("is_causal", 0) == 1,
        };
        let (y, qk) = attention_steps(n, &parts, softcap)?;
        let y = merge_heads(n, y, three_d)?;
        return Ok(vec![
            Out::Value(y),
            Out::Value(present_k),
            Out::Value(present_v),
            Out::Value(qk),
        ]);
    }
    let mut ins = vec![q, k, v];
    let mut a = Attrs::new();
    if let Some(sc) = n.attr("scale") {
        a = a.with("scale", sc.f() as f64);
    }
    let causal = n.ai("is_causal", 0) == 1;
    let keep = if causal {
        // Row i sees keys up to i + past (the cache comes first).
        let m: Vec<bool> = (0..sq * sk).map(|e| e % sk <= e / sk + past).collect();
        let t = HostTensor::from_slice(&m, [sq, sk]).map_err(|e| e.to_string())?;
        Some(n.cx.b.constant(t).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let kind = match (mask, keep) {
        (None, None) => "none",
        (None, Some(c)) => {
            ins.push(c);
            "custom"
        }
        (Some(m), c) if n.cx.b.dtype(m) == DType::Bool => {
            let m = match c {
                Some(c) => n.op("and", &[m, c], Attrs::new())?,
                None => m,
            };
            ins.push(m);
            "custom"
        }
        (Some(m), c) => {
            let d = n.cx.b.dtype(m);
            let m = match c {
                Some(c) => {
                    let ninf = n.scalar(f64::NEG_INFINITY, d)?;
                    n.op("where", &[c, m, ninf], Attrs::new())?
                }
                None => m,
            };
            let qdt = n.cx.b.dtype(q);
            let m = n.cast_to(m, qdt)?;
            ins.push(m);
            "bias"
        }
    };
    a = a.with("mask_kind", kind);
    let y = n.op("attention", &ins, a)?;
    let y = merge_heads(n, y, three_d)?;
    Ok(vec![
        Out::Value(y),
        Out::Value(present_k),
        Out::Value(present_v),
    ])
}

/// [B, H, S, D] → [B, S, H·D] when the model's Q was 3-d.
fn merge_heads(n: &mut N, y: ValueId, three_d: bool) -> Result<ValueId, String> {
    if !three_d {
        return Ok(y);
    }
    let d = n.dims(y);
    let p = n.op(
        "permute",
        &[y],
        Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
    )?;
    n.op(
        "reshape",
        &[p],
        Attrs::new().with(
            "shape",
            vec![d[0] as i64, d[2] as i64, (d[1] * d[3]) as i64],
        ),
    )
}

/// Attention's operands in [B, H, S, D] (K and V already repeated for
/// grouped heads), its mask and where the cache ends.
struct Parts {
    q: ValueId,
    k: ValueId,
    v: ValueId,
    mask: Option<ValueId>,
    past: usize,
    causal: bool,
}

/// Attention step by step, as ONNX's reference computes it — for what the
/// fused op does not express (softcap, the qk_matmul_output output, a
/// mask shorter than the keys, nonpad_kv_seqlen): (Q·√s)(K·√s)ᵀ, softcap,
/// then the additive bias (mask, causal, padding), softmax, ·V. Returns
/// the output and the qk output its qk_matmul_output_mode asks for.
fn attention_steps(n: &mut N, p: &Parts, softcap: f64) -> Result<(ValueId, ValueId), String> {
    let d = n.cx.b.dtype(p.q);
    let (qd, kd) = (n.dims(p.q), n.dims(p.k));
    let (b, sq, sk) = (qd[0], qd[2], kd[2]);
    let scale = match n.attr("scale") {
        Some(a) => a.f() as f64,
        None => 1.0 / (qd[3] as f64).sqrt(),
    };
    let rs = n.scalar(scale.sqrt(), d)?;
    let qs = n.op("mul", &[p.q, rs], Attrs::new())?;
    let ks = n.op("mul", &[p.k, rs], Attrs::new())?;
    let kt = n.op(
        "permute",
        &[ks],
        Attrs::new().with("perm", vec![0i64, 1, 3, 2]),
    )?;
    let mut qk = n.op("matmul", &[qs, kt], Attrs::new())?;
    if softcap > 0.0 {
        let c = n.scalar(softcap, d)?;
        let t = n.op("div", &[qk, c], Attrs::new())?;
        let t = n.op("tanh", &[t], Attrs::new())?;
        qk = n.op("mul", &[t, c], Attrs::new())?;
    }
    // The additive bias: 0 where a key is seen, −∞ where masked.
    let (zero, ninf) = (n.scalar(0.0, d)?, n.scalar(f64::NEG_INFINITY, d)?);
    let mut bias: Option<ValueId> = None;
    let mut add = |n: &mut N, t: ValueId| -> Result<(), String> {
        bias = Some(match bias {
            None => t,
            Some(b) => n.op("add", &[b, t], Attrs::new())?,
        });
        Ok(())
    };
    if let Some(m) = p.mask {
        let md = n.dims(m);
        let len = *md.last().ok_or("the mask is a scalar")?;
        let mut m = if n.cx.b.dtype(m) == DType::Bool {
            n.op("where", &[m, zero, ninf], Attrs::new())?
        } else {
            n.cast_to(m, d)?
        };
        if len < sk {
            // A mask over the first keys only: the rest are masked.
            let mut pads = vec![0i64; 2 * md.len()];
            pads[2 * md.len() - 1] = (sk - len) as i64;
            m = n.op(
                "pad",
                &[m],
                Attrs::new()
                    .with("pads", pads)
                    .with("value", f64::NEG_INFINITY),
            )?;
        }
        add(n, m)?;
    }
    if p.causal {
        let v: Vec<f64> = (0..sq * sk)
            .map(|e| {
                if e % sk <= e / sk + p.past {
                    0.0
                } else {
                    f64::NEG_INFINITY
                }
            })
            .collect();
        let t = HostTensor::from_f64(d, vec![sq, sk], v).map_err(|e| e.to_string())?;
        let c = n.cx.b.constant(t).map_err(|e| e.to_string())?;
        add(n, c)?;
    }
    if n.name(6).is_some() {
        // nonpad_kv_seqlen: per batch item, keys from that length on are padding.
        let lens = n.v(6)?;
        let lens = n.cast_to(lens, DType::I64)?;
        let lens = n.op(
            "reshape",
            &[lens],
            Attrs::new().with("shape", vec![b as i64, 1, 1, 1]),
        )?;
        let pos = n.op(
            "arange",
            &[],
            Attrs::new()
                .with("len", sk as i64)
                .with("dtype", DType::I64),
        )?;
        let keep = n.op("lt", &[pos, lens], Attrs::new())?;
        let m = n.op("where", &[keep, zero, ninf], Attrs::new())?;
        add(n, m)?;
    }
    let with_bias = match bias {
        Some(bias) => n.op("add", &[qk, bias], Attrs::new())?,
        None => qk,
    };
    let sm = n.op("softmax", &[with_bias], Attrs::new().with("axis", -1i64))?;
    let y = n.op("matmul", &[sm, p.v], Attrs::new())?;
    let out = match n.ai("qk_matmul_output_mode", 0) {
        0 | 1 => qk,
        2 => with_bias,
        3 => sm,
        o => return Err(format!("qk_matmul_output_mode = {o}")),
    };
    Ok((y, out))
}

/// ONNX `RotaryEmbedding` (opset 23): the rotation of the first
/// `rotary_embedding_dim` features of each head by cos/sin caches (looked
/// up by `position_ids` when given), halves or interleaved pairs, as
/// elementwise ops on views.
pub(super) fn rotary_embedding(mut n: N, _op: &str) -> R {
    let x = n.v(0)?;
    let xd = n.dims(x);
    // To [B, S, H, D].
    let (x4, rank) = match xd.len() {
        4 => (
            n.op(
                "permute",
                &[x],
                Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
            )?,
            4,
        ),
        3 => {
            let h = n.ai("num_heads", 0);
            if h <= 0 || xd[2] as i64 % h != 0 {
                return Err(format!("num_heads = {h} does not split {} features", xd[2]));
            }
            let shape = vec![xd[0] as i64, xd[1] as i64, h, xd[2] as i64 / h];
            (n.op("reshape", &[x], Attrs::new().with("shape", shape))?, 3)
        }
        r => return Err(format!("the input must be 3-d or 4-d, got rank {r}")),
    };
    let d4 = n.dims(x4);
    let head = d4[3];
    let rot = match n.ai("rotary_embedding_dim", 0) {
        0 => head,
        r if r > 0 && (r as usize) <= head && r % 2 == 0 => r as usize,
        r => return Err(format!("rotary_embedding_dim = {r} for heads of {head}")),
    };
    let half = rot / 2;
    let (mut cos, mut sin) = (n.v(1)?, n.v(2)?);
    if n.name(3).is_some() {
        let pos = n.v(3)?;
        cos = n.op("gather", &[cos, pos], Attrs::new().with("axis", 0i64))?;
        sin = n.op("gather", &[sin, pos], Attrs::new().with("axis", 0i64))?;
    }
    if n.dims(cos).last() != Some(&half) {
        return Err(format!(
            "the caches' last axis is {:?}, rotary_embedding_dim / 2 is {half}",
            n.dims(cos).last()
        ));
    }
    // [B, S, R/2] → [B, S, 1, R/2], against [B, S, H, R/2].
    let cos = n.op("unsqueeze", &[cos], Attrs::new().with("axes", vec![2i64]))?;
    let sin = n.op("unsqueeze", &[sin], Attrs::new().with("axes", vec![2i64]))?;
    let narrow = |n: &mut N, v: ValueId, start: usize, len: usize| {
        n.op(
            "narrow",
            &[v],
            Attrs::new()
                .with("axis", 3i64)
                .with("start", start as i64)
                .with("len", len as i64),
        )
    };
    let xr = narrow(&mut n, x4, 0, rot)?;
    let interleaved = n.ai("interleaved", 0) == 1;
    let (x1, x2) = if interleaved {
        let every = |n: &mut N, start: i64| {
            n.op(
                "slice",
                &[xr],
                Attrs::new()
                    .with("starts", vec![start])
                    .with("ends", vec![rot as i64])
                    .with("axes", vec![3i64])
                    .with("steps", vec![2i64]),
            )
        };
        (every(&mut n, 0)?, every(&mut n, 1)?)
    } else {
        (
            narrow(&mut n, xr, 0, half)?,
            narrow(&mut n, xr, half, half)?,
        )
    };
    let mul = |n: &mut N, a: ValueId, b: ValueId| n.op("mul", &[a, b], Attrs::new());
    let (c1, s2) = (mul(&mut n, cos, x1)?, mul(&mut n, sin, x2)?);
    let real = n.op("sub", &[c1, s2], Attrs::new())?;
    let (s1, c2) = (mul(&mut n, sin, x1)?, mul(&mut n, cos, x2)?);
    let imag = n.op("add", &[s1, c2], Attrs::new())?;
    let mut y = if interleaved {
        let r = n.op("unsqueeze", &[real], Attrs::new().with("axes", vec![4i64]))?;
        let i = n.op("unsqueeze", &[imag], Attrs::new().with("axes", vec![4i64]))?;
        let pairs = n.op("concat", &[r, i], Attrs::new().with("axis", 4i64))?;
        let shape: Vec<i64> = vec![d4[0] as i64, d4[1] as i64, d4[2] as i64, rot as i64];
        n.op("reshape", &[pairs], Attrs::new().with("shape", shape))?
    } else {
        n.op("concat", &[real, imag], Attrs::new().with("axis", 3i64))?
    };
    if rot < head {
        let rest = narrow(&mut n, x4, rot, head - rot)?;
        y = n.op("concat", &[y, rest], Attrs::new().with("axis", 3i64))?;
    }
    if rank == 4 {
        n.one(
            "permute",
            &[y],
            Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
        )
    } else {
        let shape: Vec<i64> = xd.iter().map(|&v| v as i64).collect();
        n.one("reshape", &[y], Attrs::new().with("shape", shape))
    }
}

/// [B, T, H·D] → [B, H, T, D].
fn split_heads(n: &mut N, x: ValueId, h: usize) -> Result<ValueId, String> {
    let d = n.dims(x);
    if d.len() != 3 || h == 0 || !d[2].is_multiple_of(h) {
        return Err(format!("{d:?} does not split into {h} heads"));
    }
    let r = n.op(
        "reshape",
        &[x],
        Attrs::new().with(
            "shape",
            vec![d[0] as i64, d[1] as i64, h as i64, (d[2] / h) as i64],
        ),
    )?;
    n.op(
        "permute",
        &[r],
        Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
    )
}

/// Step `t` of a [B, H, T, D] tensor: [B, H, D].
fn step(n: &mut N, x: ValueId, t: usize) -> Result<ValueId, String> {
    let s = n.op(
        "narrow",
        &[x],
        Attrs::new()
            .with("axis", 2i64)
            .with("start", t as i64)
            .with("len", 1i64),
    )?;
    n.op("squeeze", &[s], Attrs::new().with("axes", vec![2i64]))
}

/// ONNX `LinearAttention`: the recurrent state S (B, H_kv, d_k, d_v)
/// updated per step — decayed by exp(decay) (gated rules), corrected by β
/// toward v (delta rules), plus kᵀv — and read as scale · q·S; unrolled
/// over the (static) sequence, in f32.
pub(super) fn linear_attention(mut n: N, _op: &str) -> R {
    let rule = n
        .astr("update_rule")
        .unwrap_or_else(|| "gated_delta".into());
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        o => return Err(format!("update_rule {o:?}")),
    };
    let (hq, hkv) = (n.ai("q_num_heads", 0), n.ai("kv_num_heads", 0));
    if hq <= 0 || hkv <= 0 || hq % hkv != 0 {
        return Err(format!(
            "q_num_heads {hq} must be a positive multiple of kv_num_heads {hkv}"
        ));
    }
    let (hq, hkv) = (hq as usize, hkv as usize);
    if gating != n.name(4).is_some() || delta != n.name(5).is_some() {
        return Err(format!(
            "update_rule {rule:?} with decay / beta inputs that do not fit it"
        ));
    }
    let q0 = n.v(0)?;
    let out_d = n.cx.b.dtype(q0);
    let f = |n: &mut N, k: usize| -> Result<ValueId, String> {
        let v = n.v(k)?;
        n.cast_to(v, DType::F32)
    };
    let (q, k, v) = (f(&mut n, 0)?, f(&mut n, 1)?, f(&mut n, 2)?);
    let qd = n.dims(q);
    if qd.len() != 3 {
        return Err(format!("query must be rank 3 (B, T, H·D), got {qd:?}"));
    }
    let (b, t_len) = (qd[0], qd[1]);
    if t_len > 4096 {
        return Err(format!(
            "a sequence of {t_len} steps is longer than rlx unrolls (4096)"
        ));
    }
    let q4 = split_heads(&mut n, q, hq)?;
    let k4 = split_heads(&mut n, k, hkv)?;
    let v4 = split_heads(&mut n, v, hkv)?;
    let (dk, dv) = (n.dims(k4)[3], n.dims(v4)[3]);
    if n.dims(q4)[3] != dk {
        return Err("query and key head sizes differ".into());
    }
    // Decay as [B, H_kv, T, 1 or d_k]; β as [B, H_kv or 1, T, 1].
    let per_head = |n: &mut N, x: ValueId, heads: usize| -> Result<ValueId, String> {
        let d = n.dims(x);
        let last = *d.last().ok_or("a scalar decay or beta")?;
        if d.len() != 3 || !last.is_multiple_of(heads) {
            return Err(format!("{d:?} does not fit {heads} heads"));
        }
        split_heads(n, x, heads)
    };
    let decay = if gating {
        let g = f(&mut n, 4)?;
        let last = *n.dims(g).last().unwrap_or(&0);
        if last != hkv && last != hkv * dk {
            return Err(format!(
                "decay's last axis {last} must be {hkv} or {}",
                hkv * dk
            ));
        }
        Some(per_head(&mut n, g, hkv)?)
    } else {
        None
    };
    let beta = if delta {
        let bt = f(&mut n, 5)?;
        let last = *n.dims(bt).last().unwrap_or(&0);
        if last != hkv && last != 1 {
            return Err(format!("beta's last axis {last} must be {hkv} or 1"));
        }
        Some(per_head(&mut n, bt, last)?)
    } else {
        None
    };
    let mut s = match n.name(3) {
        Some(_) => {
            let p = f(&mut n, 3)?;
            if n.dims(p) != [b, hkv, dk, dv] {
                return Err(format!(
                    "past_state {:?}, expected {:?}",
                    n.dims(p),
                    [b, hkv, dk, dv]
                ));
            }
            p
        }
        None => {
            let z =
                HostTensor::zeros(DType::F32, vec![b, hkv, dk, dv]).map_err(|e| e.to_string())?;
            n.cx.b.constant(z).map_err(|e| e.to_string())?
        }
    };
    // An absent or zero scale is 1/√d_k.
    let scale = match n.af("scale", 0.0) {
        0.0 => 1.0 / (dk as f64).sqrt(),
        x => x,
    };
    let sc = n.scalar(scale, DType::F32)?;
    let group = hq / hkv;
    let unsq = |n: &mut N, x: ValueId, axis: i64| {
        n.op("unsqueeze", &[x], Attrs::new().with("axes", vec![axis]))
    };
    let mut outs = Vec::with_capacity(t_len);
    for t in 0..t_len {
        let (kt, mut vt) = (step(&mut n, k4, t)?, step(&mut n, v4, t)?);
        if let Some(g) = decay {
            let gt = step(&mut n, g, t)?;
            let e = n.op("exp", &[gt], Attrs::new())?;
            let e = unsq(&mut n, e, -1)?;
            s = n.op("mul", &[s, e], Attrs::new())?;
        }
        if let Some(bt) = beta {
            // retrieved = k · S: [B, H, 1, d_k] @ [B, H, d_k, d_v].
            let k1 = unsq(&mut n, kt, 2)?;
            let r = n.op("matmul", &[k1, s], Attrs::new())?;
            let r = n.op("squeeze", &[r], Attrs::new().with("axes", vec![2i64]))?;
            let diff = n.op("sub", &[vt, r], Attrs::new())?;
            let bs = step(&mut n, bt, t)?;
            vt = n.op("mul", &[bs, diff], Attrs::new())?;
        }
        let kc = unsq(&mut n, kt, -1)?;
        let vr = unsq(&mut n, vt, 2)?;
        let kv = n.op("mul", &[kc, vr], Attrs::new())?;
        s = n.op("add", &[s, kv], Attrs::new())?;
        // Each key head serves `group` adjacent query heads.
        let read = if group == 1 {
            s
        } else {
            let u = unsq(&mut n, s, 2)?;
            let bc = n.op(
                "broadcast",
                &[u],
                Attrs::new().with(
                    "shape",
                    vec![b as i64, hkv as i64, group as i64, dk as i64, dv as i64],
                ),
            )?;
            n.op(
                "reshape",
                &[bc],
                Attrs::new().with("shape", vec![b as i64, hq as i64, dk as i64, dv as i64]),
            )?
        };
        let qt = step(&mut n, q4, t)?;
        let q1 = unsq(&mut n, qt, 2)?;
        let o = n.op("matmul", &[q1, read], Attrs::new())?;
        outs.push(n.op("mul", &[o, sc], Attrs::new())?);
    }
    // [B, Hq, T, d_v] → [B, T, Hq·d_v]
    let y = if outs.len() == 1 {
        outs[0]
    } else {
        n.op("concat", &outs, Attrs::new().with("axis", 2i64))?
    };
    let y = n.op(
        "permute",
        &[y],
        Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
    )?;
    let y = n.op(
        "reshape",
        &[y],
        Attrs::new().with("shape", vec![b as i64, t_len as i64, (hq * dv) as i64]),
    )?;
    let state_d = match n.name(3) {
        Some(_) => {
            let p = n.v(3)?;
            n.cx.b.dtype(p)
        }
        None => out_d,
    };
    let y = n.cast_to(y, out_d)?;
    let s = n.cast_to(s, state_d)?;
    Ok(vec![Out::Value(y), Out::Value(s)])
}
