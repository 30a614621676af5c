//! Attention, fused: softmax(q·kᵀ·scale + mask)·v. Two kernels:
//!
//! * **tiled** (head dims multiples of 4, d + dv ≤ 128): a workgroup per
//!   tile of query rows and `slices` threads per row, each taking every
//!   slices-th key; K and V stream through shared memory in blocks of keys
//!   read once per tile, the q row and the output accumulator stay in
//!   registers as vec4s, and softmax is online (running max and sum, the
//!   accumulator rescaled when the max grows) — no score row is ever
//!   stored. The slices' (max, sum, accumulator) are merged at the end
//!   through shared memory. Splitting the keys matters at small batch,
//!   where one thread per row left most of the GPU idle and each thread
//!   walked every key in one dependent chain;
//! * **row** (any shape): one workgroup per query row, the row's scores in
//!   shared memory (so Sk is bounded by the workgroup storage).
//!
//! Masks are applied in place (custom bool keep, additive bias, causal,
//! sliding window), and fully masked rows give NaN as the op's definition
//! says.

use super::expr::f32_lit;
use super::{batch_addr, grid, unravel, with_batch, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_runtime::options::{WgpuAttention, WgpuOptions};
use std::fmt::Write;

/// Largest key length one workgroup holds (f32 scores in shared memory).
pub const MAX_SK: usize = 4096;

/// Floats of K and V one tiled workgroup stages per key block (8 KiB: a
/// fraction of WebGPU's guaranteed 16 KiB, so several tiles share a unit).
const TILE_FLOATS: usize = 2048;

/// Most invocations of a tiled workgroup: rows × key slices.
const MAX_WG: usize = 256;

/// The tiled kernel's shape limit: q and the accumulator live in registers.
fn tiled_fits(d: usize, dv: usize) -> bool {
    d.is_multiple_of(4) && dv.is_multiple_of(4) && d > 0 && dv > 0 && d + dv <= 128
}

/// The mask statements for score `s` of query row `qi`, key `j` (u32s);
/// `full` lifts the mask to (batch, sq, sk), `base` addresses a batch.
pub(super) fn mask_code(
    b: &mut Builder,
    a: &Attention,
    full: &dyn Fn(&TensorRef) -> TensorRef,
    base: &dyn Fn(&TensorRef) -> String,
) -> Result<String, WgpuError> {
    let Dims { sq, sk, .. } = a.dims();
    let (kind, window, off) = (a.kind, a.window, sk as i64 - sq as i64);
    let ninf = "bits_(0xff800000u)";
    let mut code = String::new();
    match (kind, a.mask) {
        ("custom" | "bias", Some(m)) => {
            let mf = full(m);
            let r = mf.dims.len();
            let mb = base(&mf);
            let a = format!(
                "({mb}) + i32(qi) * {} + i32(j) * {}",
                mf.strides[r - 2],
                mf.strides[r - 1]
            );
            let l = b.load(&mf, &a);
            if kind == "custom" {
                let _ = writeln!(code, "if (!{l}) {{ s = {ninf}; }}");
            } else {
                let _ = writeln!(code, "s = s + {l};");
            }
        }
        ("causal", None) => {
            let _ = writeln!(code, "if (i32(j) > i32(qi) + {off}) {{ s = {ninf}; }}");
        }
        ("sliding_window", None) => {
            let _ = writeln!(
                code,
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
    Ok(code)
}

/// One attention node: its operands, mask and where it writes.
pub struct Attention<'a> {
    pub q: &'a TensorRef,
    pub k: &'a TensorRef,
    pub v: &'a TensorRef,
    /// `attention_cached`: the step's new keys and values, attended after
    /// `k` and `v` (the cache) and read where they are (tiled kernel only).
    pub new_kv: Option<(&'a TensorRef, &'a TensorRef)>,
    pub mask: Option<&'a TensorRef>,
    /// `none`, `causal`, `sliding_window`, `custom` (bool keep) or `bias`.
    pub kind: &'a str,
    pub window: i64,
    /// Default 1/sqrt(d).
    pub scale: Option<f64>,
    pub out: &'a TensorRef,
    /// Forced kernel variant and slices (A/B runs, tests).
    pub opts: &'a WgpuOptions,
}

/// Rank, query/key lengths and head dims.
struct Dims {
    r: usize,
    sq: usize,
    d: usize,
    sk: usize,
    dv: usize,
}

impl Attention<'_> {
    fn dims(&self) -> Dims {
        let r = self.q.dims.len();
        Dims {
            r,
            sq: self.q.dims[r - 2],
            d: self.q.dims[r - 1],
            sk: self.k.dims[r - 2] + self.new_kv.map_or(0, |(k, _)| k.dims[r - 2]),
            dv: self.v.dims[r - 1],
        }
    }
}

/// Whether the tiled kernel runs a node of these head dims (`attention_cached`
/// has no other kernel: `select` refuses it otherwise).
pub fn tiled_runs(d: usize, dv: usize, opts: &WgpuOptions) -> bool {
    tiled_fits(d, dv) && opts.attention != WgpuAttention::Row
}

pub fn kernel(name: &str, a: &Attention) -> Result<Kernel, WgpuError> {
    let Dims { d, dv, .. } = a.dims();
    if tiled_runs(d, dv, a.opts) {
        tiled(name, a)
    } else if a.new_kv.is_some() {
        Err(WgpuError::Unsupported {
            op: "attention_cached".into(),
            why: "only the tiled kernel reads a cache and new keys apart".into(),
        })
    } else {
        row(name, a)
    }
}

/// The tiled kernel (see the module docs).
fn tiled(name: &str, a: &Attention) -> Result<Kernel, WgpuError> {
    let (scale, out) = (a.scale, a.out);
    let Dims { r, sq, d, sk, dv } = a.dims();
    let batch: Vec<usize> = out.dims[..r - 2].to_vec();
    let nb: usize = batch.iter().product::<usize>().max(1);
    // Rows per tile: 64 when there are rows enough to fill the GPU twice
    // over, else 32 (more tiles at small batch).
    let tq = if nb * sq.div_ceil(64) >= 264 { 64 } else { 32 };
    // Threads per row (key slices): the workgroup is 256 invocations, the
    // portable maximum, whatever the tile. `WgpuOptions::attn_slices` = 1,
    // 2, 4 or 8 forces a count (A/B runs; 1 is one thread per row).
    let slices = match a.opts.attn_slices {
        Some(s @ (1 | 2 | 4)) => s as usize,
        Some(8) if tq == 32 => 8,
        _ => MAX_WG / tq,
    };
    let wg_size = tq * slices;
    let per_head = sq.div_ceil(tq);
    let tiles = nb * per_head;
    let groups = grid(tiles, 1);
    let kb = (TILE_FLOATS / (d + dv)).clamp(1, 64);
    let full = |t: &TensorRef, x: usize, y: usize| with_batch(t, &batch, x, y);
    // Keys in the first part (all of them but for `attention_cached`).
    let sk1 = a.k.dims[r - 2];
    let (q, k, v) = (full(a.q, sq, d), full(a.k, sk1, d), full(a.v, sk1, dv));
    let mut b = Builder::default();
    let (bu, bi) = unravel("bz", &batch, "z");
    let base = |t: &TensorRef| batch_addr(t, &bi);
    let (d4, dv4) = (d / 4, dv / 4);
    let quad = |b: &mut Builder, t: &TensorRef, row: &str, col: &str, scale: &str| {
        let l: Vec<String> = (0..4)
            .map(|c| {
                b.load(
                    t,
                    &format!(
                        "{row} + i32({col} + {c}u) * {}",
                        t.strides[t.dims.len() - 1]
                    ),
                )
            })
            .collect();
        format!("vec4<f32>({}){scale}", l.join(", "))
    };
    let sc = f32_lit(scale.unwrap_or(1.0 / (d as f64).sqrt()));
    let mut qload = String::new();
    let mut oinit = String::new();
    let mut dots = Vec::new();
    let mut rescale = String::new();
    let mut accum = String::new();
    let mut merge = String::new();
    for c in 0..d4 {
        let l = quad(
            &mut b,
            &q,
            "qb",
            &format!("{}u", 4 * c),
            &format!(" * {sc}"),
        );
        let _ = writeln!(qload, "let q{c}: vec4<f32> = {l};");
        dots.push(format!("dot(q{c}, Ks[kr + {c}u])"));
    }
    // Pairwise sums: a dependency chain of log2(d/4) adds, not d/4.
    while dots.len() > 1 {
        dots = dots
            .chunks(2)
            .map(|p| match p {
                [a, b] => format!("({a} + {b})"),
                [a] => a.clone(),
                _ => unreachable!(),
            })
            .collect();
    }
    let score = format!("var s: f32 = {};", dots[0]);
    for c in 0..dv4 {
        let _ = writeln!(oinit, "var o{c}: vec4<f32> = vec4<f32>(0.0);");
        let _ = writeln!(rescale, "    o{c} = o{c} * cf;");
        let _ = writeln!(accum, "    o{c} = fma(vec4<f32>(p), Vs[vr + {c}u], o{c});");
        // Column block c: every slice leaves its rescaled partial in Cs,
        // slice c % slices adds them up and stores.
        let _ = writeln!(
            merge,
            "workgroupBarrier();\nCs[lid] = o{c} * f;\nworkgroupBarrier();\nif (live && sl == {}u) {{\n  var o = Cs[row];\n  for (var u: u32 = 1u; u < {slices}u; u = u + 1u) {{ o = o + Cs[row + u * {tq}u]; }}",
            c % slices
        );
        for e in 0..4 {
            // Through the output's strides: it may be the merged-heads view.
            let mut idx = bi.clone();
            idx.extend(["qi".to_string(), format!("{}u", 4 * c + e)]);
            let st = b.store(out, &Builder::addr(out, &idx), &format!("o[{e}] / lt"));
            let _ = writeln!(merge, "  {st}");
        }
        merge.push_str(
            "}
",
        );
    }
    // The keys (and values) of position j: the cache's below `sk1`, the new
    // ones after (`attention_cached`), each read through its own strides.
    let staged = |b: &mut Builder, t: &TensorRef, tb: &str, new: Option<(&TensorRef, &str)>| {
        let first = quad(
            b,
            t,
            &format!("{tb} + i32(j) * {}", t.strides[r - 2]),
            "cc",
            "",
        );
        match new {
            None => format!("if (j < {sk}u) {{ x = {first}; }}"),
            Some((n, nb)) => {
                let second = quad(
                    b,
                    n,
                    &format!("{nb} + i32(j - {sk1}u) * {}", n.strides[r - 2]),
                    "cc",
                    "",
                );
                format!(
                    "if (j < {sk1}u) {{ x = {first}; }} else if (j < {sk}u) {{ x = {second}; }}"
                )
            }
        }
    };
    let newk = a
        .new_kv
        .map(|(nk, nv)| (full(nk, sk - sk1, d), full(nv, sk - sk1, dv)));
    let kload = staged(&mut b, &k, "kb", newk.as_ref().map(|(nk, _)| (nk, "knb")));
    let vload = staged(&mut b, &v, "vb", newk.as_ref().map(|(_, nv)| (nv, "vnb")));
    let new_bases = match &newk {
        Some((nk, nv)) => format!(
            "let knb: i32 = {};\nlet vnb: i32 = {};\n",
            base(nk),
            base(nv)
        ),
        None => String::new(),
    };
    let mask = mask_code(&mut b, a, &|t| full(t, sq, sk), &base)?;
    let ninf = "bits_(0xff800000u)";
    let s = format!(
        r#"var<workgroup> Ks: array<vec4<f32>, {ks}>;
var<workgroup> Vs: array<vec4<f32>, {vs}>;
var<workgroup> Cs: array<vec4<f32>, {wg_size}>;
@compute @workgroup_size({wg_size})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
let tile: u32 = wg.x + wg.y * {gx}u;
if (tile >= {tiles}u) {{ return; }}
let bz: u32 = tile / {per_head}u;
// Row of the tile, and key slice: a subgroup shares one slice, so its
// reads of the staged keys are broadcasts.
let row: u32 = lid % {tq}u;
let sl: u32 = lid / {tq}u;
let qrow: u32 = (tile % {per_head}u) * {tq}u + row;
let live: bool = qrow < {sq}u;
let qi: u32 = min(qrow, {sqm}u);
{bu}let qb: i32 = {qbase} + i32(qi) * {qs};
let kb: i32 = {kbase};
let vb: i32 = {vbase};
{new_bases}{qload}{oinit}var m: f32 = {ninf};
var lsum: f32 = 0.0;
for (var j0: u32 = 0u; j0 < {sk}u; j0 = j0 + {kb}u) {{
  workgroupBarrier();
  for (var e: u32 = lid; e < {kbd4}u; e = e + {wg_size}u) {{
    let j = j0 + e / {d4}u;
    let cc = (e % {d4}u) * 4u;
    var x = vec4<f32>(0.0);
    {kload}
    Ks[e] = x;
  }}
  for (var e: u32 = lid; e < {kbdv4}u; e = e + {wg_size}u) {{
    let j = j0 + e / {dv4}u;
    let cc = (e % {dv4}u) * 4u;
    var x = vec4<f32>(0.0);
    {vload}
    Vs[e] = x;
  }}
  workgroupBarrier();
  let nj = min({kb}u, {sk}u - j0);
  for (var jj: u32 = sl; jj < nj; jj = jj + {slices}u) {{
    let j = j0 + jj;
    let kr = jj * {d4}u;
    let vr = jj * {dv4}u;
    {score}
{mask}    if (s > m) {{
      // The running max grew: rescale what was summed under the old one.
      let cf = exp(m - s);
      lsum = lsum * cf;
{rescale}      m = s;
    }}
    let p = select(exp(s - m), 0.0, s == {ninf});
    lsum = lsum + p;
{accum}  }}
}}
// Merge the slices: the row's max over them, each slice's partials
// rescaled to it (a slice that saw only masked keys adds nothing).
workgroupBarrier();
Cs[lid] = vec4<f32>(m, lsum, 0.0, 0.0);
workgroupBarrier();
var mt: f32 = {ninf};
for (var u: u32 = 0u; u < {slices}u; u = u + 1u) {{ mt = max(mt, Cs[row + u * {tq}u].x); }}
var lt: f32 = 0.0;
for (var u: u32 = 0u; u < {slices}u; u = u + 1u) {{
  let e = Cs[row + u * {tq}u];
  lt = lt + select(e.y * exp(e.x - mt), 0.0, e.x == {ninf});
}}
let f = select(exp(m - mt), 0.0, m == {ninf});
{merge}}}
"#,
        ks = kb * d4,
        vs = kb * dv4,
        kbd4 = kb * d4,
        kbdv4 = kb * dv4,
        gx = groups[0],
        sqm = sq.max(1) - 1,
        qbase = base(&q),
        qs = q.strides[r - 2],
        kbase = base(&k),
        vbase = base(&v),
    );
    Ok(b.finish(name.to_string(), s, groups))
}

/// The row kernel (see the module docs).
fn row(name: &str, a: &Attention) -> Result<Kernel, WgpuError> {
    let (scale, out) = (a.scale, a.out);
    let Dims { r, sq, d, sk, dv } = a.dims();
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
    let full = |t: &TensorRef, x: usize, y: usize| with_batch(t, &batch, x, y);
    let (q, k, v) = (full(a.q, sq, d), full(a.k, sk, d), full(a.v, sk, dv));
    let mut b = Builder::default();
    let (bu, bi) = unravel("bz", &batch, "z");
    let base = |t: &TensorRef| batch_addr(t, &bi);
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
    let mask_code = mask_code(&mut b, a, &|t| full(t, sq, sk), &base)?;
    let mut idx = bi.clone();
    idx.extend(["qi".to_string(), "c".to_string()]);
    let st = b.store(out, &Builder::addr(out, &idx), "o / t");
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
