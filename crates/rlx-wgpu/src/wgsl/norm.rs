//! Row-wise fused ops: softmax, log_softmax, layer_norm, rms_norm. One
//! workgroup per row; workgroup trees for the max/sum/mean; the row is read
//! again for the write (rows are short and cached).

use super::expr::f32_lit;
use super::reduce::{row_prologue, split, tree};
use super::{grid, unravel, Builder, Kernel, WG};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use std::fmt::Write;

/// `op` over `axes` of `x` (with `params` = gamma[, beta]) into `out`.
pub fn kernel(
    name: &str,
    op: &str,
    x: &TensorRef,
    axes: &[usize],
    params: &[TensorRef],
    eps: f64,
    out: &TensorRef,
) -> Result<Kernel, WgpuError> {
    let sp = split(x, axes);
    let so = split(out, axes);
    let rows = sp.kept.numel().max(1);
    let len = sp.red.numel();
    let groups = grid(rows, 1);
    let mut b = Builder::default();
    let mut s = row_prologue(
        &sp.kept,
        rows,
        groups,
        &format!("var<workgroup> sh: array<f32, {WG}>;"),
    );
    let (ku, k) = unravel("row", &so.kept.dims, "q");
    let _ = writeln!(s, "{ku}let obase: i32 = {};", Builder::addr(&so.kept, &k));
    // One pass over the row: `body` sees x (f32) and the reduced index j*.
    let pass = |b: &mut Builder, body: &str| -> String {
        let (u, j) = unravel("r", &sp.red.dims, "j");
        let ld = b.load(x, &format!("base + ({})", Builder::addr(&sp.red, &j)));
        let mut extra = String::new();
        for (p, t) in params.iter().enumerate() {
            let v = b.load(t, &Builder::addr(t, &j));
            let _ = writeln!(extra, "let g{p}: f32 = {v};");
        }
        let st = b.store(
            out,
            &format!("obase + ({})", Builder::addr(&so.red, &j)),
            "y",
        );
        let body = body.replace("STORE", &st);
        format!("for (var r: u32 = lid; r < {len}u; r = r + {WG}u) {{\n{u}let x: f32 = {ld};\n{extra}{body}\n}}\n")
    };
    let n = format!("{len}.0");
    let e = f32_lit(eps);
    match op {
        "softmax" | "log_softmax" => {
            s.push_str("var acc: f32 = bits_(0xff800000u);\n");
            s.push_str(&pass(&mut b, "acc = fmax_(acc, x);"));
            s.push_str(&tree("acc", "m", "fmax_(a, b)"));
            s.push_str("var acc2: f32 = 0.0;\n");
            s.push_str(&pass(&mut b, "acc2 = acc2 + exp(x - m);"));
            s.push_str(&tree("acc2", "t", "a + b"));
            if op == "softmax" {
                s.push_str("let inv = 1.0 / t;\n");
                s.push_str(&pass(&mut b, "let y: f32 = exp(x - m) * inv;\nSTORE"));
            } else {
                s.push_str("let lt = log(t);\n");
                s.push_str(&pass(&mut b, "let y: f32 = x - m - lt;\nSTORE"));
            }
        }
        "layer_norm" => {
            s.push_str("var acc: f32 = 0.0;\n");
            s.push_str(&pass(&mut b, "acc = acc + x;"));
            s.push_str(&tree("acc", "t", "a + b"));
            let _ = writeln!(s, "let mean = t / {n};\nvar acc2: f32 = 0.0;");
            s.push_str(&pass(&mut b, "let d = x - mean; acc2 = acc2 + d * d;"));
            s.push_str(&tree("acc2", "q", "a + b"));
            let _ = writeln!(s, "let inv = 1.0 / sqrt(q / {n} + {e});");
            s.push_str(&pass(
                &mut b,
                "let y: f32 = (x - mean) * inv * g0 + g1;\nSTORE",
            ));
        }
        "rms_norm" => {
            s.push_str("var acc: f32 = 0.0;\n");
            s.push_str(&pass(&mut b, "acc = acc + x * x;"));
            s.push_str(&tree("acc", "q", "a + b"));
            let _ = writeln!(s, "let inv = 1.0 / sqrt(q / {n} + {e});");
            s.push_str(&pass(&mut b, "let y: f32 = x * inv * g0;\nSTORE"));
        }
        _ => {
            return Err(WgpuError::Unsupported {
                op: op.into(),
                why: "not a row op".into(),
            })
        }
    }
    s.push_str("}\n");
    Ok(b.finish(name.to_string(), s, groups))
}
