//! `TfIdfVectorizer` on integer tokens: n-gram counts over a pool of
//! n-grams known at import, optionally skipping (the grams of a row taken
//! every d-th token, d = 1 … max_skip_count + 1; single tokens counted
//! once), weighted as TF, IDF or TF-IDF (a weight per pool n-gram, as the
//! spec and ONNX Runtime have it) — the counts of ONNX's reference.
//!
//! Per gram length n and distance d: the windows of the row (`n` strided
//! slices stacked, [rows, L, n]) compared with every pool gram of that
//! length ([G, n]) → [rows, L, G] matches → counts [rows, G]; the counts
//! of all lengths land on their output columns through a 0/1 matrix.

use super::*;

pub(super) fn tfidf(mut n: N, _op: &str) -> R {
    if n.attr("pool_strings").is_some() {
        return Err("string n-grams (pool_strings): rlx has no string tensors".into());
    }
    let pool = n.aints("pool_int64s").ok_or("no pool_int64s")?;
    let counts = n.aints("ngram_counts").ok_or("no ngram_counts")?;
    let indexes = n.aints("ngram_indexes").ok_or("no ngram_indexes")?;
    let (min_n, max_n) = (n.ai("min_gram_length", 1), n.ai("max_gram_length", 1));
    let max_skip = n.ai("max_skip_count", 0);
    let mode = n.astr("mode").unwrap_or_default();
    let weights: Vec<f64> = n
        .attr("weights")
        .map(|a| a.floats.iter().map(|&w| w as f64).collect())
        .unwrap_or_default();
    if min_n < 1 || max_n < min_n || max_skip < 0 {
        return Err(format!(
            "gram lengths {min_n}..={max_n} and max_skip_count {max_skip} do not make sense"
        ));
    }
    let out_size = indexes.iter().max().map_or(0, |&m| m + 1) as usize;
    if indexes.iter().any(|&i| i < 0) {
        return Err("negative ngram_indexes".into());
    }
    // The pool's grams by length: (length, first gram id, grams), in pool order.
    let mut groups = Vec::new();
    let mut id = 0usize;
    for (i, &start) in counts.iter().enumerate() {
        let len = i as i64 + 1;
        let end = counts.get(i + 1).copied().unwrap_or(pool.len() as i64);
        if start < 0 || end < start || end as usize > pool.len() {
            return Err(format!(
                "ngram_counts {counts:?} do not fit a pool of {}",
                pool.len()
            ));
        }
        let items = &pool[start as usize..end as usize];
        let grams = items.len() / len as usize;
        if (min_n..=max_n).contains(&len) && grams > 0 {
            groups.push((len as usize, id, items[..grams * len as usize].to_vec()));
        }
        id += grams;
    }
    if indexes.len() < id {
        return Err(format!("{} ngram_indexes for {id} n-grams", indexes.len()));
    }
    let x = n.v(0)?;
    let xd = n.dims(x);
    let (rows, c) = match xd.as_slice() {
        [c] => (1, *c),
        [r, c] => (*r, *c),
        _ => return Err(format!("X must be rank 1 or 2, got {xd:?}")),
    };
    let x = n.cast_to(x, DType::I64)?;
    let x = n.op(
        "reshape",
        &[x],
        Attrs::new().with("shape", vec![rows as i64, c as i64]),
    )?;
    // Counts per pool gram (columns in gram-id order), then the output columns.
    let mut total: Option<ValueId> = None;
    let mut map = vec![0f64; id * out_size];
    for (g, &o) in indexes.iter().take(id).enumerate() {
        map[g * out_size + o as usize] = 1.0;
    }
    let mut cols = Vec::new(); // (gram ids, counts [rows, G])
    for (len, first, grams) in &groups {
        let g = grams.len() / len;
        let p = HostTensor::from_i64(DType::I64, vec![1, 1, g, *len], grams.clone())
            .map_err(|e| e.to_string())?;
        let p = n.cx.b.constant(p).map_err(|e| e.to_string())?;
        let mut acc: Option<ValueId> = None;
        for d in 1..=(max_skip as usize + 1) {
            // Single tokens are counted at distance 1 only.
            if *len == 1 && d > 1 {
                break;
            }
            let span = (len - 1) * d;
            if span >= c {
                continue;
            }
            let l = c - span;
            let mut parts = Vec::new();
            for j in 0..*len {
                let s = n.op(
                    "narrow",
                    &[x],
                    Attrs::new()
                        .with("axis", 1i64)
                        .with("start", (j * d) as i64)
                        .with("len", l as i64),
                )?;
                parts.push(n.op("unsqueeze", &[s], Attrs::new().with("axes", vec![2i64]))?);
            }
            let w = if parts.len() == 1 {
                parts[0]
            } else {
                n.op("concat", &parts, Attrs::new().with("axis", 2i64))?
            };
            // [rows, L, 1, n] against [1, 1, G, n]
            let w = n.op("unsqueeze", &[w], Attrs::new().with("axes", vec![2i64]))?;
            let eq = n.op("eq", &[w, p], Attrs::new())?;
            let all = n.op(
                "reduce_all",
                &[eq],
                Attrs::new().with("axes", vec![3i64]).with("keepdim", false),
            )?;
            let f = n.cast_to(all, DType::F32)?;
            let cnt = n.op(
                "reduce_sum",
                &[f],
                Attrs::new().with("axes", vec![1i64]).with("keepdim", false),
            )?;
            acc = Some(match acc {
                Some(a) => n.op("add", &[a, cnt], Attrs::new())?,
                None => cnt,
            });
        }
        if let Some(a) = acc {
            cols.push((*first, g, a));
        }
    }
    for (first, g, cnt) in cols {
        let rows_of_map: Vec<f64> = map[first * out_size..(first + g) * out_size].to_vec();
        let m = HostTensor::from_f64(DType::F32, vec![g, out_size], rows_of_map)
            .map_err(|e| e.to_string())?;
        let m = n.cx.b.constant(m).map_err(|e| e.to_string())?;
        let y = n.op("matmul", &[cnt, m], Attrs::new())?;
        total = Some(match total {
            Some(t) => n.op("add", &[t, y], Attrs::new())?,
            None => y,
        });
    }
    let tf = match total {
        Some(t) => t,
        None => {
            let z =
                HostTensor::zeros(DType::F32, vec![rows, out_size]).map_err(|e| e.to_string())?;
            n.cx.b.constant(z).map_err(|e| e.to_string())?
        }
    };
    // A weight per pool n-gram (the spec, and ONNX Runtime), on its column.
    let w = if weights.is_empty() {
        None
    } else {
        if weights.len() < id {
            return Err(format!("{} weights for {id} n-grams", weights.len()));
        }
        let mut col = vec![0f64; out_size];
        for (k, &o) in indexes.iter().take(id).enumerate() {
            col[o as usize] = weights[k];
        }
        let t = HostTensor::from_f64(DType::F32, vec![out_size], col).map_err(|e| e.to_string())?;
        Some(n.cx.b.constant(t).map_err(|e| e.to_string())?)
    };
    let y = match (mode.as_str(), w) {
        ("TF", _) | ("TFIDF", None) => tf,
        ("TFIDF", Some(w)) => n.op("mul", &[tf, w], Attrs::new())?,
        ("IDF", w) => {
            let zero = n.scalar(0.0, DType::F32)?;
            let seen = n.op("gt", &[tf, zero], Attrs::new())?;
            let seen = n.cast_to(seen, DType::F32)?;
            match w {
                Some(w) => n.op("mul", &[seen, w], Attrs::new())?,
                None => seen,
            }
        }
        (m, _) => return Err(format!("mode `{m}` (ONNX knows TF, IDF, TFIDF)")),
    };
    let shape: Vec<i64> = if xd.len() == 1 {
        vec![out_size as i64]
    } else {
        vec![rows as i64, out_size as i64]
    };
    n.one("reshape", &[y], Attrs::new().with("shape", shape))
}
