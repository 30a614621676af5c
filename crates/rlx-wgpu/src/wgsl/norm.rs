//! Row-wise fused ops: softmax, log_softmax, layer_norm, rms_norm.
//!
//! Rows of up to 1024 elements: 32 invocations per row and 8 rows per
//! workgroup; each invocation keeps its ≤ 32 elements in registers (the row
//! is read once) and the sums are 5-level trees in the row's slice of
//! shared memory. Longer rows: one workgroup per row, workgroup trees for
//! the max/sum/mean, the row read again for the write (cached).

use super::expr::f32_lit;
use super::reduce::{row_prologue, split, tree, tree_sum};
use super::{grid, unravel, Builder, Kernel, WG};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use std::fmt::Write;

/// `op` over `axes` of `x` (with `params` = gamma[, beta]) into `out`;
/// `sg`: long rows' sums start with subgroup sums.
#[allow(clippy::too_many_arguments)]
pub fn kernel(
    name: &str,
    op: &str,
    x: &TensorRef,
    axes: &[usize],
    params: &[TensorRef],
    eps: f64,
    out: &TensorRef,
    sg: bool,
) -> Result<Kernel, WgpuError> {
    let sp = split(x, axes);
    let so = split(out, axes);
    let rows = sp.kept.numel().max(1);
    let len = sp.red.numel();
    if len <= PACKED_MAX {
        return packed(name, op, x, params, eps, out, axes);
    }
    let groups = grid(rows, 1);
    let mut b = Builder::default();
    let mut s = row_prologue(
        &sp.kept,
        rows,
        groups,
        &format!("var<workgroup> sh: array<f32, {WG}>;"),
        sg,
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
    let mut pass = |body: &str, write: bool| {
        let body = if write {
            format!("let y: f32 = {body};\nSTORE")
        } else {
            body.to_string()
        };
        pass(&mut b, &body)
    };
    let tree = |acc: &str, out: &str, combine: &str| {
        if combine == "a + b" {
            tree_sum(acc, out, sg)
        } else {
            tree(acc, out, combine)
        }
    };
    s.push_str(&row_op(op, len, eps, &mut pass, &tree)?);
    s.push_str("}\n");
    Ok(b.finish(name.to_string(), s, groups))
}

/// Longest row the packed kernel takes (32 values per invocation).
const PACKED_MAX: usize = 1024;
/// Invocations per row and rows per workgroup of the packed kernel.
const LANES: usize = 32;
const ROWS: usize = WG as usize / LANES;

/// The packed form of [`kernel`] (rows of at most [`PACKED_MAX`]).
fn packed(
    name: &str,
    op: &str,
    x: &TensorRef,
    params: &[TensorRef],
    eps: f64,
    out: &TensorRef,
    axes: &[usize],
) -> Result<Kernel, WgpuError> {
    let sp = split(x, axes);
    let so = split(out, axes);
    let rows = sp.kept.numel().max(1);
    let len = sp.red.numel();
    let per = len.div_ceil(LANES).max(1);
    let groups = grid(rows.div_ceil(ROWS), 1);
    // f16 rows of whole 128-element blocks, contiguous and 4-aligned: each
    // invocation loads 4 neighbours at once (8 bytes instead of 2 per
    // load), element r = 128 i + 4 t + c of its 4 i + c-th register.
    let vec = x.is_half()
        && !x.wide
        && sp.red.dims.len() == 1
        && sp.red.strides[0] == 1
        && len.is_multiple_of(4 * LANES)
        && x.offset % 4 == 0
        && sp.kept.strides.iter().all(|s| s % 4 == 0);
    let mut b = Builder {
        half4: vec,
        ..Builder::default()
    };
    // The reduced index of register i, and whether it is inside the row.
    let (elem, valid) = if vec {
        (
            "128u * (i / 4u) + 4u * t + (i % 4u)".to_string(),
            "true".to_string(),
        )
    } else {
        (
            format!("t + i * {LANES}u"),
            format!("t + i * {LANES}u < {len}u"),
        )
    };
    let (ku, kq) = unravel("rowc", &sp.kept.dims, "k");
    let (ou, oq) = unravel("rowc", &so.kept.dims, "q");
    // Element i of this invocation: reduced index r = t + 32 i.
    let (ru, rj) = unravel("r", &sp.red.dims, "j");
    let ld = b.load(x, &format!("base + ({})", Builder::addr(&sp.red, &rj)));
    let mut gs = String::new();
    for (p, t) in params.iter().enumerate() {
        let v = b.load(t, &Builder::addr(t, &rj));
        let _ = writeln!(gs, "  let g{p}: f32 = {v};");
    }
    let st = b.store(
        out,
        &format!("obase + ({})", Builder::addr(&so.red, &rj)),
        "y",
    );
    // A sum (or max) over the row: this invocation's values, then a tree
    // in the row's 32 words of shared memory.
    let tree = |acc: &str, out: &str, combine: &str| {
        format!(
            "sh[lid] = {acc};\nworkgroupBarrier();\nfor (var s: u32 = {h}u; s > 0u; s = s >> 1u) {{\nif (t < s) {{ let a = sh[lid]; let b = sh[lid + s]; sh[lid] = {combine}; }}\nworkgroupBarrier();\n}}\nlet {out} = sh[seg];\nworkgroupBarrier();\n",
            h = LANES / 2
        )
    };
    let each = |body: &str| {
        format!("for (var i: u32 = 0u; i < {per}u; i = i + 1u) {{\n  if ({valid}) {{\n  let x: f32 = xs[i];\n  {body}\n  }}\n}}\n")
    };
    let fill = if vec {
        let l = b.load_half4(x, "base + i32(128u * i + 4u * t)");
        format!(
            "for (var i: u32 = 0u; i < {}u; i = i + 1u) {{\n  let v = {l};\n  xs[4u * i] = f32(v.x); xs[4u * i + 1u] = f32(v.y); xs[4u * i + 2u] = f32(v.z); xs[4u * i + 3u] = f32(v.w);\n}}\n",
            per / 4
        )
    } else {
        format!("for (var i: u32 = 0u; i < {per}u; i = i + 1u) {{\n  let r: u32 = t + i * {LANES}u;\n  if (r < {len}u) {{\n{ru}  xs[i] = {ld};\n  }}\n}}\n")
    };
    let mut s = format!(
        "var<workgroup> sh: array<f32, {WG}>;
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
let t: u32 = lid % {LANES}u;
let seg: u32 = lid - t;
let row: u32 = (wg.x + wg.y * {g0}u) * {ROWS}u + lid / {LANES}u;
// Rows past the end compute on the last row (every invocation reaches
// every barrier) and store nothing.
let live: bool = row < {rows}u;
let rowc: u32 = min(row, {last}u);
{ku}let base: i32 = {kb};
{ou}let obase: i32 = {ob};
var xs: array<f32, {per}>;
{fill}",
        g0 = groups[0],
        last = rows - 1,
        kb = Builder::addr(&sp.kept, &kq),
        ob = Builder::addr(&so.kept, &oq),
    );
    let write = |y: &str| {
        format!(
            "for (var i: u32 = 0u; i < {per}u; i = i + 1u) {{\n  let r: u32 = {elem};\n  if (live && {valid}) {{\n{ru}  let x: f32 = xs[i];\n{gs}  let y: f32 = {y};\n  {st}\n  }}\n}}\n"
        )
    };
    let mut pass = |body: &str, write_: bool| {
        if write_ {
            write(body)
        } else {
            each(body)
        }
    };
    s.push_str(&row_op(op, len, eps, &mut pass, &tree)?);
    s.push_str("}\n");
    Ok(b.finish(name.to_string(), s, groups))
}

/// The body of row op `op` over rows of `len`: `pass(body, false)` loops
/// over the row with `x` bound, `pass(y, true)` stores `y` per element,
/// `tree(acc, out, combine)` reduces `acc` over the row into `out`.
fn row_op(
    op: &str,
    len: usize,
    eps: f64,
    pass: &mut dyn FnMut(&str, bool) -> String,
    tree: &dyn Fn(&str, &str, &str) -> String,
) -> Result<String, WgpuError> {
    let n = format!("{len}.0");
    let e = f32_lit(eps);
    let mut s = String::new();
    match op {
        "softmax" | "log_softmax" => {
            s.push_str("var acc: f32 = bits_(0xff800000u);\n");
            s.push_str(&pass("acc = fmax_(acc, x);", false));
            s.push_str(&tree("acc", "m", "fmax_(a, b)"));
            s.push_str("var acc2: f32 = 0.0;\n");
            s.push_str(&pass("acc2 = acc2 + exp(x - m);", false));
            s.push_str(&tree("acc2", "tt", "a + b"));
            if op == "softmax" {
                s.push_str("let inv = 1.0 / tt;\n");
                s.push_str(&pass("exp(x - m) * inv", true));
            } else {
                s.push_str("let lt = log(tt);\n");
                s.push_str(&pass("x - m - lt", true));
            }
        }
        "layer_norm" => {
            s.push_str("var acc: f32 = 0.0;\n");
            s.push_str(&pass("acc = acc + x;", false));
            s.push_str(&tree("acc", "tt", "a + b"));
            let _ = writeln!(s, "let mean = tt / {n};\nvar acc2: f32 = 0.0;");
            s.push_str(&pass("let d = x - mean; acc2 = acc2 + d * d;", false));
            s.push_str(&tree("acc2", "q", "a + b"));
            let _ = writeln!(s, "let inv = 1.0 / sqrt(q / {n} + {e});");
            s.push_str(&pass("(x - mean) * inv * g0 + g1", true));
        }
        "rms_norm" => {
            s.push_str("var acc: f32 = 0.0;\n");
            s.push_str(&pass("acc = acc + x * x;", false));
            s.push_str(&tree("acc", "q", "a + b"));
            let _ = writeln!(s, "let inv = 1.0 / sqrt(q / {n} + {e});");
            s.push_str(&pass("x * inv * g0", true));
        }
        _ => {
            return Err(WgpuError::Unsupported {
                op: op.into(),
                why: "not a row op".into(),
            })
        }
    }
    Ok(s)
}
