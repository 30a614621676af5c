//! Attention, fused: softmax(q·kᵀ·scale + mask)·v with one workgroup per
//! query row. Scores for the row live in shared memory (so Sk is bounded by
//! the workgroup storage), masks are applied in place (custom bool keep,
//! additive bias, causal, sliding window), and fully masked rows give NaN
//! as the op's definition says.

use super::expr::f32_lit;
use super::{grid, unravel, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use std::fmt::Write;

/// Largest key length one workgroup holds (f32 scores in shared memory).
pub const MAX_SK: usize = 4096;

#[allow(clippy::too_many_arguments)]
pub fn kernel(
    name: &str,
    q: &TensorRef,
    k: &TensorRef,
    v: &TensorRef,
    mask: Option<&TensorRef>,
    kind: &str,
    window: i64,
    scale: Option<f64>,
    out: &TensorRef,
) -> Result<Kernel, WgpuError> {
    let r = q.dims.len();
    let (sq, d, sk, dv) = (q.dims[r - 2], q.dims[r - 1], k.dims[r - 2], v.dims[r - 1]);
    if sk > MAX_SK {
        return Err(WgpuError::Unsupported {
            op: "attention".into(),
            why: format!("key length {sk} over the {MAX_SK} one workgroup holds"),
        });
    }
    let batch: Vec<usize> = out.dims[..r - 2].to_vec();
    let nb: usize = batch.iter().product();
    let rows = nb * sq;
    let groups = grid(rows, 1);
    let full = |t: &TensorRef, x: usize, y: usize| {
        let mut dd = batch.clone();
        dd.extend([x, y]);
        t.broadcast_to(&dd)
    };
    let (q, k, v) = (full(q, sq, d), full(k, sk, d), full(v, sk, dv));
    let mut b = Builder::default();
    let (bu, bi) = unravel("bz", &batch, "z");
    let base = |t: &TensorRef| {
        let mut bt = t.clone();
        bt.dims.truncate(r - 2);
        bt.strides.truncate(r - 2);
        Builder::addr(&bt, &bi)
    };
    let lq = b.load(&q, &format!("qb + i32(dd) * {}", q.strides[r - 1]));
    let lk = b.load(
        &k,
        &format!(
            "kb + i32(j) * {} + i32(dd) * {}",
            k.strides[r - 2],
            k.strides[r - 1]
        ),
    );
    let lv = b.load(
        &v,
        &format!(
            "vb + i32(j) * {} + i32(c) * {}",
            v.strides[r - 2],
            v.strides[r - 1]
        ),
    );
    // Threads per row: enough for the keys and value columns, no more
    // (small workgroups let many rows share a compute unit).
    let wg_: u32 = (sk.max(dv) as u32).next_power_of_two().clamp(32, 256);
    let sc = f32_lit(scale.unwrap_or(1.0 / (d as f64).sqrt()));
    let ninf = "bits_(0xff800000u)";
    let mut mask_code = String::new();
    let off = sk as i64 - sq as i64;
    match (kind, mask) {
        ("custom" | "bias", Some(m)) => {
            let mf = full(m, sq, sk);
            let mb = base(&mf);
            let a = format!(
                "({mb}) + i32(qi) * {} + i32(j) * {}",
                mf.strides[r - 2],
                mf.strides[r - 1]
            );
            let l = b.load(&mf, &a);
            if kind == "custom" {
                let _ = writeln!(mask_code, "if (!{l}) {{ s = {ninf}; }}");
            } else {
                let _ = writeln!(mask_code, "s = s + {l};");
            }
        }
        ("causal", None) => {
            let _ = writeln!(mask_code, "if (i32(j) > i32(qi) + {off}) {{ s = {ninf}; }}");
        }
        ("sliding_window", None) => {
            let _ = writeln!(
                mask_code,
                "let qp = i32(qi) + {off}; if (i32(j) > qp || qp - i32(j) >= {window}) {{ s = {ninf}; }}"
            );
        }
        ("none", None) => {}
        _ => {
            return Err(WgpuError::Unsupported {
                op: "attention".into(),
                why: format!("mask kind {kind:?}"),
            })
        }
    }
    let st = b.store(
        out,
        &format!("{} + i32(row) * {dv} + i32(c)", out.offset),
        "o / t",
    );
    // P·V: with threads to spare (dv ≤ wg/2), `g` sets of dv threads each
    // sum a strided share of the keys, then one set adds the partials
    // (fewer serial steps per row than one thread per column).
    let g = wg_ as usize / dv.max(1);
    let pv = if g >= 2 {
        format!(
            "let c: u32 = lid % {dv}u;\nlet gi: u32 = lid / {dv}u;\nvar o: f32 = 0.0;\nif (gi < {g}u) {{\n  for (var j: u32 = gi; j < {sk}u; j = j + {g}u) {{ o = fma(sc[j], {lv}, o); }}\n}}\npo[lid] = o;\nworkgroupBarrier();\nif (lid < {dv}u) {{\n  var o2: f32 = 0.0;\n  for (var q: u32 = 0u; q < {g}u; q = q + 1u) {{ o2 = o2 + po[q * {dv}u + lid]; }}\n  let o = o2;\n  {st}\n}}\n"
        )
    } else {
        format!(
            "for (var c: u32 = lid; c < {dv}u; c = c + {wg_}u) {{\n  var o: f32 = 0.0;\n  for (var j: u32 = 0u; j < {sk}u; j = j + 1u) {{ o = fma(sc[j], {lv}, o); }}\n  {st}\n}}\n"
        )
    };
    let s = format!(
        r#"var<workgroup> sc: array<f32, {sk}>;
var<workgroup> sh: array<f32, {wg_}>;
var<workgroup> po: array<f32, {wg_}>;
@compute @workgroup_size({wg_})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
let row: u32 = wg.x + wg.y * {gx}u;
if (row >= {rows}u) {{ return; }}
let qi: u32 = row % {sq}u;
let bz: u32 = row / {sq}u;
{bu}let qb: i32 = {qbase} + i32(qi) * {qs};
let kb: i32 = {kbase};
let vb: i32 = {vbase};
var acc: f32 = {ninf};
for (var j: u32 = lid; j < {sk}u; j = j + {wg_}u) {{
  var s: f32 = 0.0;
  for (var dd: u32 = 0u; dd < {d}u; dd = dd + 1u) {{ s = fma({lq}, {lk}, s); }}
  s = s * {sc};
{mask_code}  sc[j] = s;
  acc = fmax_(acc, s);
}}
{tmax}var acc2: f32 = 0.0;
for (var j: u32 = lid; j < {sk}u; j = j + {wg_}u) {{
  let e = exp(sc[j] - m);
  sc[j] = e;
  acc2 = acc2 + e;
}}
{tsum}{pv}}}
"#,
        gx = groups[0],
        pv = pv,
        qbase = base(&q),
        qs = q.strides[r - 2],
        kbase = base(&k),
        vbase = base(&v),
        tmax = super::reduce::tree_n("acc", "m", "fmax_(a, b)", wg_),
        tsum = super::reduce::tree_n("acc2", "t", "a + b", wg_),
    );
    Ok(b.finish(name.to_string(), s, groups))
}
