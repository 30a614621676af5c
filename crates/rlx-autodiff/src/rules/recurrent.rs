//! Recurrent cells, differentiated by rewriting them into primitive ops
//! (PyTorch's cell equations) before the sweeps. The finite-difference
//! tests run the original cell kernels, so they also check that these
//! equations match the op's semantics.

use super::Rule;
use crate::emit::*;
use crate::error::Result;
use rlx_ir::{Attrs, ValueId};

/// x·Wᵀ + b for x (B, I), W (G, I), b (G).
fn affine(b: &mut B, x: ValueId, w: ValueId, bias: ValueId) -> Result<ValueId> {
    let wt = permute(b, w, &[1, 0])?;
    let m = b.binary("matmul", x, wt)?;
    add(b, m, bias)
}

/// Split the last axis of `v` into `k` equal chunks.
fn chunks(b: &mut B, v: ValueId, k: usize) -> Result<Vec<ValueId>> {
    let d = b.shape(v).dims()[1] / k;
    Ok(b.op(
        "split",
        &[v],
        Attrs::new()
            .with("axis", 1i64)
            .with("sizes", vec![d as i64; k]),
    )?)
}

fn rnn(b: &mut B, x: &[ValueId], a: &Attrs) -> Result<Vec<ValueId>> {
    let gi = affine(b, x[0], x[2], x[4])?;
    let gh = affine(b, x[1], x[3], x[5])?;
    let s = add(b, gi, gh)?;
    let act = if a.str("nonlinearity")? == "relu" {
        "relu"
    } else {
        "tanh"
    };
    Ok(vec![un(b, act, s)?])
}

/// Gates i, f, g, o; c' = f·c + i·g; h' = o·tanh(c').
fn lstm(b: &mut B, x: &[ValueId], _: &Attrs) -> Result<Vec<ValueId>> {
    let gi = affine(b, x[0], x[3], x[5])?;
    let gh = affine(b, x[1], x[4], x[6])?;
    let s = add(b, gi, gh)?;
    let g = chunks(b, s, 4)?;
    let i = un(b, "sigmoid", g[0])?;
    let f = un(b, "sigmoid", g[1])?;
    let gg = un(b, "tanh", g[2])?;
    let o = un(b, "sigmoid", g[3])?;
    let fc = mul(b, f, x[2])?;
    let ig = mul(b, i, gg)?;
    let c = add(b, fc, ig)?;
    let tc = un(b, "tanh", c)?;
    let h = mul(b, o, tc)?;
    Ok(vec![h, c])
}

/// Gates r, z, n; n = tanh(n_i + r·n_h); h' = (1 − z)·n + z·h.
fn gru(b: &mut B, x: &[ValueId], _: &Attrs) -> Result<Vec<ValueId>> {
    let gi = affine(b, x[0], x[2], x[4])?;
    let gh = affine(b, x[1], x[3], x[5])?;
    let i = chunks(b, gi, 3)?;
    let h = chunks(b, gh, 3)?;
    let rs = add(b, i[0], h[0])?;
    let r = un(b, "sigmoid", rs)?;
    let zs = add(b, i[1], h[1])?;
    let z = un(b, "sigmoid", zs)?;
    let rn = mul(b, r, h[2])?;
    let ns = add(b, i[2], rn)?;
    let n = un(b, "tanh", ns)?;
    // (1 − z)·n + z·h = n + z·(h − n)
    let d = sub(b, x[1], n)?;
    let zd = mul(b, z, d)?;
    Ok(vec![add(b, n, zd)?])
}

pub static RULES: &[(&str, Rule)] = &[
    ("rnn_cell", Rule::Expand(rnn)),
    ("lstm_cell", Rule::Expand(lstm)),
    ("gru_cell", Rule::Expand(gru)),
];
