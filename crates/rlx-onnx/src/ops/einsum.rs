//! ONNX `Einsum` onto the IR: each operand's repeated labels become its
//! diagonal (a gather over the flattened pair), labels no one else needs
//! are summed away, and operands are combined pairwise as one batched
//! matmul (batch · free · contracted labels, grouped by permutes and
//! reshapes), then permuted to the output's order. `...` stands for the
//! leading axes an operand has beyond its letters.

use super::*;

/// One operand: its value and the label of each axis.
struct Term {
    v: ValueId,
    labels: Vec<char>,
}

/// The equation's input label lists and output labels, with `...`
/// expanded (to labels from `'A'` on, one per broadcast axis).
fn parse(eq: &str, ranks: &[usize]) -> Result<(Vec<Vec<char>>, Vec<char>), String> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let specs: Vec<&str> = lhs.split(',').collect();
    if specs.len() != ranks.len() {
        return Err(format!(
            "{} operands for {} inputs",
            specs.len(),
            ranks.len()
        ));
    }
    // The axes `...` stands for: the most any operand has.
    let mut ell = 0usize;
    for (s, &r) in specs.iter().zip(ranks) {
        if s.contains("...") {
            ell = ell.max(r.saturating_sub(s.replace("...", "").chars().count()));
        }
    }
    if ell > 26 {
        return Err(format!(
            "`...` stands for {ell} axes; at most 26 are supported"
        ));
    }
    let mut ins = Vec::new();
    for (s, &r) in specs.iter().zip(ranks) {
        let letters = s.replace("...", "");
        if letters.chars().any(|c| !c.is_ascii_alphabetic()) {
            return Err(format!(
                "operand `{s}` has a character that is not a letter"
            ));
        }
        let n = letters.chars().count();
        let mut labels = Vec::new();
        if s.contains("...") {
            let k = r
                .checked_sub(n)
                .ok_or(format!("operand `{s}` has more labels than axes ({r})"))?;
            ell = ell.max(k);
            let (a, b) = s.split_once("...").unwrap_or((s, ""));
            labels.extend(a.chars());
            // The broadcast axes, right-aligned across operands.
            labels.extend((0..k).map(|i| (b'A' + (ell - k + i) as u8) as char));
            labels.extend(b.chars());
        } else {
            if n != r {
                return Err(format!("operand `{s}` has {n} labels for {r} axes"));
            }
            labels.extend(s.chars());
        }
        ins.push(labels);
    }
    let broadcast: Vec<char> = (0..ell).map(|i| (b'A' + i as u8) as char).collect();
    let out = match rhs {
        Some(r) => {
            let (a, b) = r.split_once("...").unwrap_or((&r, ""));
            let mut o: Vec<char> = a.chars().collect();
            if r.contains("...") {
                o.extend(&broadcast);
            }
            o.extend(b.chars());
            o
        }
        None => {
            // Implicit: the broadcast axes, then labels seen once, sorted.
            let mut once: Vec<char> = ('a'..='z')
                .chain('A'..='Z')
                .filter(|c| !broadcast.contains(c))
                .filter(|c| ins.iter().flatten().filter(|l| *l == c).count() == 1)
                .collect();
            let mut o = broadcast.clone();
            o.append(&mut once);
            o
        }
    };
    Ok((ins, out))
}

/// `t` with every repeated label reduced to its diagonal.
fn diagonals(n: &mut N, mut t: Term) -> Result<Term, String> {
    while let Some((a, b)) = (0..t.labels.len())
        .flat_map(|i| (i + 1..t.labels.len()).map(move |j| (i, j)))
        .find(|&(i, j)| t.labels[i] == t.labels[j])
    {
        let d = n.dims(t.v);
        if d[a] != d[b] {
            return Err(format!(
                "label `{}` has extents {} and {}",
                t.labels[a], d[a], d[b]
            ));
        }
        // Move the pair last, flatten it, take every (size + 1)-th element.
        let rest: Vec<usize> = (0..d.len()).filter(|&k| k != a && k != b).collect();
        let mut perm: Vec<i64> = rest.iter().map(|&k| k as i64).collect();
        perm.extend([a as i64, b as i64]);
        let p = n.op("permute", &[t.v], Attrs::new().with("perm", perm))?;
        let mut shape: Vec<i64> = rest.iter().map(|&k| d[k] as i64).collect();
        shape.push((d[a] * d[a]) as i64);
        let flat = n.op("reshape", &[p], Attrs::new().with("shape", shape))?;
        let idx: Vec<f64> = (0..d[a]).map(|i| (i * (d[a] + 1)) as f64).collect();
        let it = HostTensor::from_f64(DType::I64, vec![d[a]], idx).map_err(|e| e.to_string())?;
        let it = n.cx.b.constant(it).map_err(|e| e.to_string())?;
        let axis = rest.len() as i64;
        let v = n.op("gather", &[flat, it], Attrs::new().with("axis", axis))?;
        let mut labels: Vec<char> = rest.iter().map(|&k| t.labels[k]).collect();
        labels.push(t.labels[a]);
        t = Term { v, labels };
    }
    Ok(t)
}

/// `t` with the labels not in `keep` summed away.
fn sum_out(n: &mut N, t: Term, keep: &[char]) -> Result<Term, String> {
    let axes: Vec<i64> = (0..t.labels.len())
        .filter(|&k| !keep.contains(&t.labels[k]))
        .map(|k| k as i64)
        .collect();
    if axes.is_empty() {
        return Ok(t);
    }
    let v = n.op(
        "reduce_sum",
        &[t.v],
        Attrs::new().with("axes", axes).with("keepdim", false),
    )?;
    let labels = t.labels.into_iter().filter(|c| keep.contains(c)).collect();
    Ok(Term { v, labels })
}

/// `t` permuted so that its labels read `order`.
fn permute_to(n: &mut N, t: Term, order: &[char]) -> Result<Term, String> {
    let perm: Vec<i64> = order
        .iter()
        .map(|c| t.labels.iter().position(|l| l == c).map(|p| p as i64))
        .collect::<Option<_>>()
        .ok_or("a label went missing (an Einsum bug)")?;
    if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
        return Ok(Term {
            v: t.v,
            labels: order.to_vec(),
        });
    }
    let v = n.op("permute", &[t.v], Attrs::new().with("perm", perm))?;
    Ok(Term {
        v,
        labels: order.to_vec(),
    })
}

/// The product of two terms, keeping the labels in `keep`.
fn pair(n: &mut N, a: Term, b: Term, keep: &[char]) -> Result<Term, String> {
    let extent =
        |n: &N, t: &Term, c: char| n.dims(t.v)[t.labels.iter().position(|&l| l == c).unwrap_or(0)];
    let shared: Vec<char> = a
        .labels
        .iter()
        .copied()
        .filter(|c| b.labels.contains(c))
        .collect();
    let batch: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| keep.contains(c))
        .collect();
    let contract: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| !keep.contains(c))
        .collect();
    let fa: Vec<char> = a
        .labels
        .iter()
        .copied()
        .filter(|c| !shared.contains(c))
        .collect();
    let fb: Vec<char> = b
        .labels
        .iter()
        .copied()
        .filter(|c| !shared.contains(c))
        .collect();
    for &c in &shared {
        if extent(n, &a, c) != extent(n, &b, c) {
            return Err(format!(
                "label `{c}` has extents {} and {}",
                extent(n, &a, c),
                extent(n, &b, c)
            ));
        }
    }
    let size =
        |n: &N, t: &Term, ls: &[char]| ls.iter().map(|&c| extent(n, t, c) as i64).product::<i64>();
    let (nb, nk, na, nf) = (
        size(n, &a, &batch),
        size(n, &a, &contract),
        size(n, &a, &fa),
        size(n, &b, &fb),
    );
    let dims_of = |n: &N, t: &Term, ls: &[char]| {
        ls.iter()
            .map(|&c| extent(n, t, c) as i64)
            .collect::<Vec<_>>()
    };
    let out_dims: Vec<i64> = [
        dims_of(n, &a, &batch),
        dims_of(n, &a, &fa),
        dims_of(n, &b, &fb),
    ]
    .concat();
    let order_a: Vec<char> = [batch.clone(), fa.clone(), contract.clone()].concat();
    let order_b: Vec<char> = [batch.clone(), contract.clone(), fb.clone()].concat();
    let a = permute_to(n, a, &order_a)?;
    let b = permute_to(n, b, &order_b)?;
    let am = n.op(
        "reshape",
        &[a.v],
        Attrs::new().with("shape", vec![nb, na, nk]),
    )?;
    let bm = n.op(
        "reshape",
        &[b.v],
        Attrs::new().with("shape", vec![nb, nk, nf]),
    )?;
    let p = n.op("matmul", &[am, bm], Attrs::new())?;
    let v = n.op("reshape", &[p], Attrs::new().with("shape", out_dims))?;
    Ok(Term {
        v,
        labels: [batch, fa, fb].concat(),
    })
}

/// ONNX `Einsum`.
pub(super) fn einsum(mut n: N, _op: &str) -> R {
    let eq = n.astr("equation").ok_or("Einsum without an equation")?;
    let vals: Vec<ValueId> = (0..n.node.input.len())
        .map(|k| n.v(k))
        .collect::<Result<_, _>>()?;
    let ranks: Vec<usize> = vals.iter().map(|&v| n.dims(v).len()).collect();
    let (ins, out) = parse(&eq, &ranks)?;
    let mut terms = Vec::new();
    for (v, labels) in vals.into_iter().zip(ins) {
        terms.push(diagonals(&mut n, Term { v, labels })?);
    }
    // Labels each step must keep: the output's and any later operand's.
    let labels: Vec<Vec<char>> = terms.iter().map(|t| t.labels.clone()).collect();
    let mut acc: Option<Term> = None;
    for (i, t) in terms.into_iter().enumerate() {
        let later = labels[i + 1..].iter().flatten().copied();
        let keep: Vec<char> = out.iter().copied().chain(later).collect();
        acc = Some(match acc {
            None => {
                // Sum labels only this operand has and nobody keeps.
                sum_out(&mut n, t, &keep)?
            }
            Some(a) => {
                let a = sum_out(&mut n, a, &[keep.clone(), t.labels.clone()].concat())?;
                let t = sum_out(&mut n, t, &[keep.clone(), a.labels.clone()].concat())?;
                pair(&mut n, a, t, &keep)?
            }
        });
    }
    let t = acc.ok_or("Einsum without operands")?;
    let t = sum_out(&mut n, t, &out)?;
    if t.labels.len() != out.len() {
        return Err(format!("output labels {out:?} are not all in the operands"));
    }
    let t = permute_to(&mut n, t, &out)?;
    // A copy, so that the output is a value of its own (`a->a`).
    n.one("identity", &[t.v], Attrs::new())
}
