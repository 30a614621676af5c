//! The optimizer steps of `ai.onnx.preview.training` — Adagrad, Adam,
//! Momentum (standard and Nesterov) — as elementwise IR ops, each over
//! one or several tensors at once: inputs R (learning rate), T (step
//! count), then the tensors, their gradients and their states.

use super::*;

/// (R and T as f32 scalars, the number of optimized tensors) for a node
/// of `per` input groups after R and T.
fn common(n: &mut N, per: usize) -> Result<(ValueId, ValueId, usize), String> {
    let k = n.node.input.len().saturating_sub(2);
    if k == 0 || !k.is_multiple_of(per) {
        return Err(format!(
            "{} inputs do not make R, T and groups of {per}",
            n.node.input.len()
        ));
    }
    let (r, t) = (n.v(0)?, n.v(1)?);
    Ok((
        n.cast_to(r, DType::F32)?,
        n.cast_to(t, DType::F32)?,
        k / per,
    ))
}

fn s(n: &mut N, v: f64) -> Result<ValueId, String> {
    n.scalar(v, DType::F32)
}

fn bin(n: &mut N, op: &str, a: ValueId, b: ValueId) -> Result<ValueId, String> {
    n.op(op, &[a, b], Attrs::new())
}

/// ONNX `Adagrad`: r' = r / (1 + t·decay); g' = norm·x + g; h' = h + g'²;
/// x' = x − r'·g' / (√h' + ε). Outputs: every x', then every h'.
pub(super) fn adagrad(mut n: N, _op: &str) -> R {
    let (r, t, count) = common(&mut n, 3)?;
    let (decay, eps, norm) = (
        n.af("decay_factor", 0.0),
        n.af("epsilon", 0.0),
        n.af("norm_coefficient", 0.0),
    );
    let (dv, one) = (s(&mut n, decay)?, s(&mut n, 1.0)?);
    let td = bin(&mut n, "mul", t, dv)?;
    let den = bin(&mut n, "add", one, td)?;
    let rr = bin(&mut n, "div", r, den)?;
    let (nc, ev) = (s(&mut n, norm)?, s(&mut n, eps)?);
    let (mut xs, mut hs) = (Vec::new(), Vec::new());
    for i in 0..count {
        let (x, g, h) = (n.v(2 + i)?, n.v(2 + count + i)?, n.v(2 + 2 * count + i)?);
        let nx = bin(&mut n, "mul", nc, x)?;
        let gr = bin(&mut n, "add", nx, g)?;
        let g2 = bin(&mut n, "mul", gr, gr)?;
        let hn = bin(&mut n, "add", h, g2)?;
        let hs_ = n.op("sqrt", &[hn], Attrs::new())?;
        let hs_ = bin(&mut n, "add", hs_, ev)?;
        let step = bin(&mut n, "mul", rr, gr)?;
        let step = bin(&mut n, "div", step, hs_)?;
        xs.push(Out::Value(bin(&mut n, "sub", x, step)?));
        hs.push(Out::Value(hn));
    }
    xs.extend(hs);
    Ok(xs)
}

/// ONNX `Adam`; outputs every x', then every v', then every h'.
pub(super) fn adam(mut n: N, _op: &str) -> R {
    let (r, t, count) = common(&mut n, 4)?;
    let (alpha, beta) = (n.af("alpha", 0.9), n.af("beta", 0.999));
    let (eps, norm, post) = (
        n.af("epsilon", 1e-6),
        n.af("norm_coefficient", 0.0),
        n.af("norm_coefficient_post", 0.0),
    );
    // r' = r·√(1 − βᵗ) / (1 − αᵗ) when t > 0, else r.
    let (av, bv, one, zero) = (
        s(&mut n, alpha)?,
        s(&mut n, beta)?,
        s(&mut n, 1.0)?,
        s(&mut n, 0.0)?,
    );
    let at = bin(&mut n, "pow", av, t)?;
    let bt = bin(&mut n, "pow", bv, t)?;
    let nb = bin(&mut n, "sub", one, bt)?;
    let nb = n.op("sqrt", &[nb], Attrs::new())?;
    let na = bin(&mut n, "sub", one, at)?;
    let adj = bin(&mut n, "mul", r, nb)?;
    let adj = bin(&mut n, "div", adj, na)?;
    let pos = bin(&mut n, "gt", t, zero)?;
    let rr = n.op("where", &[pos, adj, r], Attrs::new())?;
    let (nc, ev) = (s(&mut n, norm)?, s(&mut n, eps)?);
    let (a1, b1, keep) = (
        s(&mut n, 1.0 - alpha)?,
        s(&mut n, 1.0 - beta)?,
        s(&mut n, 1.0 - post)?,
    );
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..count {
        let x = n.v(2 + i)?;
        let g = n.v(2 + count + i)?;
        let v = n.v(2 + 2 * count + i)?;
        let h = n.v(2 + 3 * count + i)?;
        let nx = bin(&mut n, "mul", nc, x)?;
        let gr = bin(&mut n, "add", nx, g)?;
        let va = bin(&mut n, "mul", av, v)?;
        let vg = bin(&mut n, "mul", a1, gr)?;
        let vn = bin(&mut n, "add", va, vg)?;
        let hb = bin(&mut n, "mul", bv, h)?;
        let g2 = bin(&mut n, "mul", gr, gr)?;
        let hg = bin(&mut n, "mul", b1, g2)?;
        let hn = bin(&mut n, "add", hb, hg)?;
        let hsq = n.op("sqrt", &[hn], Attrs::new())?;
        let hsq = bin(&mut n, "add", hsq, ev)?;
        let q = bin(&mut n, "div", vn, hsq)?;
        let step = bin(&mut n, "mul", rr, q)?;
        let xn = bin(&mut n, "sub", x, step)?;
        xs.push(Out::Value(bin(&mut n, "mul", keep, xn)?));
        vs.push(Out::Value(vn));
        hs.push(Out::Value(hn));
    }
    xs.extend(vs);
    xs.extend(hs);
    Ok(xs)
}

/// ONNX `Momentum` (mode standard or nesterov); outputs every x', then
/// every v'.
pub(super) fn momentum(mut n: N, _op: &str) -> R {
    let (r, t, count) = common(&mut n, 3)?;
    let (alpha, beta, norm) = (
        n.af("alpha", 0.0),
        n.af("beta", 0.0),
        n.af("norm_coefficient", 0.0),
    );
    let nesterov = n.astr("mode").as_deref() == Some("nesterov");
    let (av, bv, one, zero, nc) = (
        s(&mut n, alpha)?,
        s(&mut n, beta)?,
        s(&mut n, 1.0)?,
        s(&mut n, 0.0)?,
        s(&mut n, norm)?,
    );
    let pos = bin(&mut n, "gt", t, zero)?;
    let badj = n.op("where", &[pos, bv, one], Attrs::new())?;
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for i in 0..count {
        let (x, g, v) = (n.v(2 + i)?, n.v(2 + count + i)?, n.v(2 + 2 * count + i)?);
        let nx = bin(&mut n, "mul", nc, x)?;
        let gr = bin(&mut n, "add", nx, g)?;
        let va = bin(&mut n, "mul", av, v)?;
        let gb = bin(&mut n, "mul", badj, gr)?;
        let vn = bin(&mut n, "add", va, gb)?;
        let dir = if nesterov {
            let avn = bin(&mut n, "mul", av, vn)?;
            bin(&mut n, "add", gr, avn)?
        } else {
            vn
        };
        let step = bin(&mut n, "mul", r, dir)?;
        xs.push(Out::Value(bin(&mut n, "sub", x, step)?));
        vs.push(Out::Value(vn));
    }
    xs.extend(vs);
    Ok(xs)
}
