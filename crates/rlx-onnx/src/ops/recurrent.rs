//! ONNX `RNN`, `GRU` and `LSTM`, unrolled over their (static) sequence:
//! the input projections of every step as one matmul, then per step the
//! recurrent projection and the gates as IR ops. Directions forward,
//! reverse and bidirectional; initial states, biases, peepholes, clip,
//! `linear_before_reset`, batch-first layout.

use super::*;

/// The longest sequence unrolled (each step adds a few dozen nodes).
const MAX_STEPS: usize = 4096;

/// An activation by its ONNX name (the parameterless ones).
fn act(n: &mut N, name: &str, v: ValueId) -> Result<ValueId, String> {
    let op = match name.to_ascii_lowercase().as_str() {
        "sigmoid" => "sigmoid",
        "tanh" => "tanh",
        "relu" => "relu",
        o => return Err(format!("activation {o:?} is not supported yet")),
    };
    n.op(op, &[v], Attrs::new())
}

/// `v` clipped to [−clip, clip] when the node has a clip.
fn clip(n: &mut N, v: ValueId, c: Option<f64>) -> Result<ValueId, String> {
    match c {
        Some(c) => n.op("clamp", &[v], Attrs::new().with("min", -c).with("max", c)),
        None => Ok(v),
    }
}

/// Gate `k` of `gates` (a [batch, G·hidden] product): columns k·h..(k+1)·h.
fn gate(n: &mut N, gates: ValueId, k: usize, h: usize) -> Result<ValueId, String> {
    n.op(
        "narrow",
        &[gates],
        Attrs::new()
            .with("axis", 1i64)
            .with("start", (k * h) as i64)
            .with("len", h as i64),
    )
}

/// Direction `d` of a per-direction tensor ([dirs, ...]) without its axis.
fn dir(n: &mut N, v: ValueId, d: usize) -> Result<ValueId, String> {
    let p = n.op(
        "narrow",
        &[v],
        Attrs::new()
            .with("axis", 0i64)
            .with("start", d as i64)
            .with("len", 1i64),
    )?;
    n.op("squeeze", &[p], Attrs::new().with("axes", vec![0i64]))
}

/// ONNX `RNN`, `GRU`, `LSTM`.
pub(super) fn recurrent(mut n: N, op: &str) -> R {
    let gates = match op {
        "RNN" => 1,
        "GRU" => 3,
        _ => 4,
    };
    let mut x = n.v(0)?;
    let (w, r) = (n.v(1)?, n.v(2)?);
    let batch_first = n.ai("layout", 0) == 1;
    if batch_first {
        x = n.op("permute", &[x], Attrs::new().with("perm", vec![1i64, 0, 2]))?;
    }
    let xd = n.dims(x);
    if xd.len() != 3 {
        return Err(format!("X must be rank 3, got {xd:?}"));
    }
    let (seq, batch, input) = (xd[0], xd[1], xd[2]);
    if seq > MAX_STEPS {
        return Err(format!(
            "a sequence of {seq} steps is longer than rlx unrolls ({MAX_STEPS})"
        ));
    }
    let wd = n.dims(w);
    let h = usize::try_from(n.ai("hidden_size", 0)).unwrap_or(0);
    let h = if h == 0 {
        wd.get(1).copied().unwrap_or(0) / gates
    } else {
        h
    };
    let dirs = match n.astr("direction").as_deref().unwrap_or("forward") {
        "bidirectional" => 2,
        "forward" | "reverse" => 1,
        o => return Err(format!("direction {o:?}")),
    };
    let reverse_only = n.astr("direction").as_deref() == Some("reverse");
    if wd != [dirs, gates * h, input] {
        return Err(format!(
            "W is {wd:?}, expected [{dirs}, {}, {input}]",
            gates * h
        ));
    }
    if n.name(4).is_some() {
        // sequence_lens: only when every sequence is full length.
        let lens = n.ints_in(4)?;
        if lens.is_some_and(|l| l.iter().any(|&v| v != seq as i64)) {
            return Err(
                "sequences shorter than the input (sequence_lens) are not supported yet".into(),
            );
        }
    }
    let clip_v = n.attr("clip").map(|a| a.f() as f64);
    let names: Vec<String> = n
        .attr("activations")
        .map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let per_dir = if op == "RNN" {
        1
    } else {
        2 + (op == "LSTM") as usize
    };
    let default: Vec<&str> = match op {
        "RNN" => vec!["Tanh"],
        "GRU" => vec!["Sigmoid", "Tanh"],
        _ => vec!["Sigmoid", "Tanh", "Tanh"],
    };
    let linear_before_reset = n.ai("linear_before_reset", 0) != 0;
    let input_forget = n.ai("input_forget", 0) != 0;
    if input_forget {
        return Err("input_forget = 1 is not supported yet".into());
    }
    let d = n.cx.b.dtype(x);
    let x2 = n.op(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![(seq * batch) as i64, input as i64]),
    )?;
    let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for di in 0..dirs {
        let f: Vec<String> = (0..per_dir)
            .map(|k| {
                names
                    .get(di * per_dir + k)
                    .cloned()
                    .unwrap_or_else(|| default[k].to_string())
            })
            .collect();
        let wt = dir(&mut n, w, di)?;
        let wt = n.op("permute", &[wt], Attrs::new().with("perm", vec![1i64, 0]))?;
        let rt = dir(&mut n, r, di)?;
        let rt = n.op("permute", &[rt], Attrs::new().with("perm", vec![1i64, 0]))?;
        // Every step's input projection at once: [seq·batch, G·h].
        let mut xw = n.op("matmul", &[x2, wt], Attrs::new())?;
        let (mut wb, mut rb) = (None, None);
        if n.name(3).is_some() {
            let b = n.v(3)?;
            let b = dir(&mut n, b, di)?;
            let half = |n: &mut N, k: i64| {
                n.op(
                    "narrow",
                    &[b],
                    Attrs::new()
                        .with("axis", 0i64)
                        .with("start", k * (gates * h) as i64)
                        .with("len", (gates * h) as i64),
                )
            };
            wb = Some(half(&mut n, 0)?);
            rb = Some(half(&mut n, 1)?);
        }
        if let Some(b) = wb {
            xw = n.op("add", &[xw, b], Attrs::new())?;
        }
        let state0 = |n: &mut N, k: usize| -> Result<ValueId, String> {
            match n.name(k) {
                Some(_) => {
                    let s = n.v(k)?;
                    dir(n, s, di)
                }
                None => {
                    let z = HostTensor::zeros(d, vec![batch, h]).map_err(|e| e.to_string())?;
                    n.cx.b.constant(z).map_err(|e| e.to_string())
                }
            }
        };
        let mut hcur = state0(&mut n, 5)?;
        let mut ccur = if op == "LSTM" {
            Some(state0(&mut n, 6)?)
        } else {
            None
        };
        let peep = if op == "LSTM" && n.name(7).is_some() {
            let p = n.v(7)?;
            Some(dir(&mut n, p, di)?)
        } else {
            None
        };
        let backward = reverse_only || di == 1;
        let mut outs = vec![hcur; seq];
        for step in 0..seq {
            let t = if backward { seq - 1 - step } else { step };
            let xt = n.op(
                "narrow",
                &[xw],
                Attrs::new()
                    .with("axis", 0i64)
                    .with("start", (t * batch) as i64)
                    .with("len", batch as i64),
            )?;
            let mut hr = n.op("matmul", &[hcur, rt], Attrs::new())?;
            if let Some(b) = rb {
                hr = n.op("add", &[hr, b], Attrs::new())?;
            }
            match op {
                "RNN" => {
                    let s = n.op("add", &[xt, hr], Attrs::new())?;
                    let s = clip(&mut n, s, clip_v)?;
                    hcur = act(&mut n, &f[0], s)?;
                }
                "GRU" => {
                    let pre = |n: &mut N, k: usize| -> Result<(ValueId, ValueId), String> {
                        Ok((gate(n, xt, k, h)?, gate(n, hr, k, h)?))
                    };
                    let (xz, hz) = pre(&mut n, 0)?;
                    let (xr, hrr) = pre(&mut n, 1)?;
                    let z = n.op("add", &[xz, hz], Attrs::new())?;
                    let z = clip(&mut n, z, clip_v)?;
                    let z = act(&mut n, &f[0], z)?;
                    let rg = n.op("add", &[xr, hrr], Attrs::new())?;
                    let rg = clip(&mut n, rg, clip_v)?;
                    let rg = act(&mut n, &f[0], rg)?;
                    let xh = gate(&mut n, xt, 2, h)?;
                    let hh = if linear_before_reset {
                        let hh = gate(&mut n, hr, 2, h)?;
                        n.op("mul", &[rg, hh], Attrs::new())?
                    } else {
                        // (r ⊙ H) · Rhᵀ + Rbh
                        let rh = n.op("mul", &[rg, hcur], Attrs::new())?;
                        let rht = gate(&mut n, rt, 2, h)?;
                        let mut v = n.op("matmul", &[rh, rht], Attrs::new())?;
                        if let Some(b) = rb {
                            let bh = n.op(
                                "narrow",
                                &[b],
                                Attrs::new()
                                    .with("axis", 0i64)
                                    .with("start", (2 * h) as i64)
                                    .with("len", h as i64),
                            )?;
                            v = n.op("add", &[v, bh], Attrs::new())?;
                        }
                        v
                    };
                    let s = n.op("add", &[xh, hh], Attrs::new())?;
                    let s = clip(&mut n, s, clip_v)?;
                    let cand = act(&mut n, &f[1], s)?;
                    // H = (1 − z) ⊙ h̃ + z ⊙ H₋₁ = h̃ + z ⊙ (H₋₁ − h̃)
                    let diff = n.op("sub", &[hcur, cand], Attrs::new())?;
                    let zd = n.op("mul", &[z, diff], Attrs::new())?;
                    hcur = n.op("add", &[cand, zd], Attrs::new())?;
                }
                _ => {
                    let c_prev = ccur.ok_or("LSTM without a cell state")?;
                    let s = n.op("add", &[xt, hr], Attrs::new())?;
                    let peep_of =
                        |n: &mut N, k: usize, c: ValueId| -> Result<Option<ValueId>, String> {
                            match peep {
                                Some(p) => {
                                    let pk = n.op(
                                        "narrow",
                                        &[p],
                                        Attrs::new()
                                            .with("axis", 0i64)
                                            .with("start", (k * h) as i64)
                                            .with("len", h as i64),
                                    )?;
                                    Ok(Some(n.op("mul", &[pk, c], Attrs::new())?))
                                }
                                None => Ok(None),
                            }
                        };
                    let pre =
                        |n: &mut N, k: usize, extra: Option<ValueId>| -> Result<ValueId, String> {
                            let g = gate(n, s, k, h)?;
                            let g = match extra {
                                Some(e) => n.op("add", &[g, e], Attrs::new())?,
                                None => g,
                            };
                            clip(n, g, clip_v)
                        };
                    // Gate order i, o, f, c; peepholes i, o, f.
                    let pi = peep_of(&mut n, 0, c_prev)?;
                    let i = pre(&mut n, 0, pi)?;
                    let i = act(&mut n, &f[0], i)?;
                    let pf = peep_of(&mut n, 2, c_prev)?;
                    let fg = pre(&mut n, 2, pf)?;
                    let fg = act(&mut n, &f[0], fg)?;
                    let c = pre(&mut n, 3, None)?;
                    let c = act(&mut n, &f[1], c)?;
                    let fc = n.op("mul", &[fg, c_prev], Attrs::new())?;
                    let ic = n.op("mul", &[i, c], Attrs::new())?;
                    let cnew = n.op("add", &[fc, ic], Attrs::new())?;
                    let po = peep_of(&mut n, 1, cnew)?;
                    let o = pre(&mut n, 1, po)?;
                    let o = act(&mut n, &f[0], o)?;
                    let hc = act(&mut n, &f[2], cnew)?;
                    hcur = n.op("mul", &[o, hc], Attrs::new())?;
                    ccur = Some(cnew);
                }
            }
            outs[t] = hcur;
        }
        // Y for this direction: [seq, 1, batch, h].
        let steps: Vec<ValueId> = outs
            .iter()
            .map(|&o| n.op("unsqueeze", &[o], Attrs::new().with("axes", vec![0i64, 1])))
            .collect::<Result<_, _>>()?;
        ys.push(if steps.len() == 1 {
            steps[0]
        } else {
            n.op("concat", &steps, Attrs::new().with("axis", 0i64))?
        });
        hs.push(n.op("unsqueeze", &[hcur], Attrs::new().with("axes", vec![0i64]))?);
        if let Some(c) = ccur {
            cs.push(n.op("unsqueeze", &[c], Attrs::new().with("axes", vec![0i64]))?);
        }
    }
    let cat = |n: &mut N, v: &[ValueId], axis: i64| -> Result<ValueId, String> {
        if v.len() == 1 {
            Ok(v[0])
        } else {
            n.op("concat", v, Attrs::new().with("axis", axis))
        }
    };
    let mut y = cat(&mut n, &ys, 1)?;
    let mut yh = cat(&mut n, &hs, 0)?;
    let mut yc = if cs.is_empty() {
        None
    } else {
        Some(cat(&mut n, &cs, 0)?)
    };
    if batch_first {
        // Y [batch, seq, dirs, h]; Y_h, Y_c [batch, dirs, h].
        y = n.op(
            "permute",
            &[y],
            Attrs::new().with("perm", vec![2i64, 0, 1, 3]),
        )?;
        yh = n.op(
            "permute",
            &[yh],
            Attrs::new().with("perm", vec![1i64, 0, 2]),
        )?;
        if let Some(c) = yc {
            yc = Some(n.op("permute", &[c], Attrs::new().with("perm", vec![1i64, 0, 2]))?);
        }
    }
    let mut out = vec![Out::Value(y), Out::Value(yh)];
    if let Some(c) = yc {
        out.push(Out::Value(c));
    }
    Ok(out)
}
