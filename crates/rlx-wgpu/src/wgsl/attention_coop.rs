//! f16 attention on cooperative matrices (tensor cores): a workgroup of two
//! subgroups per tile of 32 query rows of one head. The head's K and V and
//! the tile's q rows are staged into shared memory as f16, each subgroup
//! multiplies its 16 rows by Kᵀ into f32 scores in shared memory, the whole
//! score row is soft-maxed there (mask, scale, row max and sum over every
//! key at once, so no online rescaling of accumulators that cannot be
//! addressed per element), the probabilities go back as f16 over the K
//! staging, and P·V runs on the tensor cores again with f32 accumulation.
//!
//! Taken where q, k, v and the output are stored as f16, the head dims are
//! multiples of 16, the staging fits [`SHARED_MAX`] (key lengths up to a
//! few hundred at MiniLM's head size) and there are at most `MAX_TILES`
//! query tiles (small batches, where it is faster); the tiled kernel of
//! [`super::attention`] takes everything else.

use super::attention::{mask_code, Attention};
use super::{batch_addr, grid, unravel, with_batch, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use std::fmt::Write;

/// Invocations per workgroup.
const THREADS: usize = 64;
/// Key lengths up to this have the per-key scale and mask unrolled.
const UNROLL_KEYS: usize = 512;

/// Staging of a `rows` × `cols` block of `t` (rows from `row0`, valid
/// below `limit`) into `arr` at row stride `stride`: a load function
/// `ld{x}_`, the loads into registers `{x}_i`, and their stores.
#[allow(clippy::too_many_arguments)]
fn stage(
    b: &mut Builder,
    x: &str,
    t: &TensorRef,
    base: &str,
    (rows, cols): (usize, usize),
    limit: usize,
    row0: &str,
    arr: &str,
    stride: usize,
) -> (String, String, String) {
    let r = t.dims.len();
    let (rs, cs) = (t.strides[r - 2], t.strides[r - 1]);
    let vec = cs == 1
        && rs % 4 == 0
        && t.offset % 4 == 0
        && t.strides[..r - 2].iter().all(|s| s % 4 == 0);
    let w = if vec { 4 } else { 1 };
    let per = rows * cols / w / THREADS;
    let q = cols / w;
    let addr = format!("base_ + i32({row0} + r_) * {rs} + i32(c_) * {cs}");
    let (ty, load, zero) = if vec {
        ("vec4<f16>", b.load_half4(t, &addr), "vec4<f16>()")
    } else {
        ("f16", format!("f16({})", b.load(t, &addr)), "f16(0.0)")
    };
    let fns = format!(
        "fn ld{x}_(e: u32, {row0_}: u32, base_: i32) -> {ty} {{\n  let r_ = e / {q}u; let c_ = (e % {q}u) * {w}u;\n  if ({row0} + r_ < {limit}u) {{ return {load}; }}\n  return {zero};\n}}\n",
        row0_ = if row0 == "0u" { "unused_" } else { row0 },
    );
    let (mut loads, mut stores) = (String::new(), String::new());
    for i in 0..per {
        let e = format!("lid + {}u", i * THREADS);
        let _ = writeln!(loads, "let {x}_{i} = ld{x}_({e}, {row0}, {base});");
        let at = format!("(({e}) / {q}u) * {stride}u + (({e}) % {q}u) * {w}u");
        if vec {
            let _ = writeln!(
                stores,
                "{{ let i = {at}; {arr}[i] = {x}_{i}.x; {arr}[i + 1u] = {x}_{i}.y; {arr}[i + 2u] = {x}_{i}.z; {arr}[i + 3u] = {x}_{i}.w; }}"
            );
        } else {
            let _ = writeln!(stores, "{arr}[{at}] = {x}_{i};");
        }
    }
    (fns, loads, stores)
}

/// A subgroup's 16 rows of a product, `blocks` 16-column blocks each
/// summed over `steps` 16-deep fragments (`a(step)`, `b(block, step)`),
/// stored row-major into its rows of `Ss` (row stride `ss`).
fn product(
    blocks: usize,
    steps: usize,
    a: &dyn Fn(usize) -> String,
    b: &dyn Fn(usize, usize) -> String,
    ss: usize,
) -> String {
    let mut s = String::new();
    for j in 0..blocks {
        s.push_str("{\n  var acc = coop_mat16x16<f32, C>();\n");
        for kk in 0..steps {
            let _ = writeln!(s, "  acc = coopMultiplyAdd({}, {}, acc);", a(kk), b(j, kk));
        }
        let _ = writeln!(
            s,
            "  coopStoreT(acc, &Ss[w * {}u + {}u], {ss}u);\n}}",
            16 * ss,
            16 * j
        );
    }
    s
}

/// Query rows per workgroup: two subgroups of 16.
const ROWS: usize = 32;
/// Padding (elements) after each staged row: keeps rows apart in banks.
const PAD16: usize = 8;
const PAD32: usize = 4;
/// Workgroup memory the kernel may take: NVIDIA's Vulkan limit (48 KiB);
/// adapters with cooperative matrices offer at least that.
pub const SHARED_MAX: usize = 48 * 1024;

/// The staging layout: padded extents and the bytes it takes.
struct Layout {
    /// Keys rounded up to a fragment.
    skp: usize,
    /// Row strides (elements) of q, K (key-major), P, V and the scores.
    qs: usize,
    ks: usize,
    ps: usize,
    vs: usize,
    ss: usize,
    /// f16 words of the K / P overlay.
    kp_words: usize,
}

impl Layout {
    fn new(d: usize, sk: usize, dv: usize) -> Layout {
        let skp = sk.div_ceil(16) * 16;
        let (qs, ks, ps, vs) = (d + PAD16, d + PAD16, skp + PAD16, dv + PAD16);
        Layout {
            skp,
            qs,
            ks,
            ps,
            vs,
            ss: skp.max(dv) + PAD32,
            kp_words: (skp * ks).max(ROWS * ps),
        }
    }

    fn bytes(&self) -> usize {
        2 * (ROWS * self.qs + self.kp_words + self.skp * self.vs) + 4 * (ROWS * self.ss + 3 * 64)
    }
}

/// Most workgroups (query tiles) it is taken for. Measured on the H200,
/// MiniLM f16 GPU pass vs the tiled kernel: B=1 (48 tiles) 0.783 vs 0.830
/// ms, B=8 (384) 1.320 vs 1.372, B=32 (1536) 3.100 vs 2.782 — with many
/// tiles each re-staging its head's K and V, at 10 warps per SM (40 KiB of
/// workgroup memory each), it loses.
const MAX_TILES: usize = 512;

/// Whether `a` can run here (see the module docs).
pub fn applies(a: &Attention) -> bool {
    let r = a.q.dims.len();
    let (d, sk, dv) = (a.q.dims[r - 1], a.k.dims[r - 2], a.v.dims[r - 1]);
    let tiles = a.out.dims[..r - 2].iter().product::<usize>() * a.q.dims[r - 2].div_ceil(ROWS);
    a.new_kv.is_none()
        && [a.q, a.k, a.v, a.out].iter().all(|t| t.is_half())
        && d.is_multiple_of(16)
        && dv.is_multiple_of(16)
        && d > 0
        && dv > 0
        && sk > 0
        && Layout::new(d, sk, dv).bytes() <= SHARED_MAX
        && tiles <= MAX_TILES
        && a.opts.attn_coop
}

/// The kernel (see the module docs).
pub fn kernel(name: &str, a: &Attention) -> Result<Kernel, WgpuError> {
    let out = a.out;
    let r = a.q.dims.len();
    let (sq, d, sk, dv) = (
        a.q.dims[r - 2],
        a.q.dims[r - 1],
        a.k.dims[r - 2],
        a.v.dims[r - 1],
    );
    let l = Layout::new(d, sk, dv);
    let batch: Vec<usize> = out.dims[..r - 2].to_vec();
    let nb: usize = batch.iter().product::<usize>().max(1);
    let per_head = sq.div_ceil(ROWS);
    let tiles = nb * per_head;
    let groups = grid(tiles, 1);
    let full = |t: &TensorRef, x: usize, y: usize| with_batch(t, &batch, x, y);
    let (q, k, v) = (full(a.q, sq, d), full(a.k, sk, d), full(a.v, sk, dv));
    let mut b = Builder {
        coop: true,
        half4: true,
        ..Builder::default()
    };
    let (bu, bi) = unravel("bz", &batch, "z");
    let base = |t: &TensorRef| batch_addr(t, &bi);
    let Layout {
        skp,
        qs,
        ks,
        ps,
        vs,
        ss,
        kp_words,
    } = l;
    // Staging: every load of a thread issued before any store (the loads
    // overlap in flight), 4 f16 at a time where the rows allow.
    let mut fns = String::new();
    let mut loads = String::new();
    let mut stores = String::new();
    for (x, t, rows, cols, limit, row0, arr, stride) in [
        ("q", &q, ROWS, d, sq, "q0", "Qs", qs),
        ("k", &k, skp, d, sk, "0u", "KP", ks),
        ("v", &v, skp, dv, sk, "0u", "Vs", vs),
    ] {
        let (f, l, st) = stage(
            &mut b,
            x,
            t,
            &base(t),
            (rows, cols),
            limit,
            row0,
            arr,
            stride,
        );
        fns.push_str(&f);
        loads.push_str(&l);
        stores.push_str(&st);
    }
    let sc = super::expr::f32_lit(a.scale.unwrap_or(1.0 / (d as f64).sqrt()));
    let mask = mask_code(&mut b, a, &|t| full(t, sq, sk), &base)?;
    let ninf = "bits_(0xff800000u)";
    // S = q·Kᵀ: this subgroup's 16 rows against each 16-key block.
    let qk = product(
        skp / 16,
        d / 16,
        &|kk| {
            format!(
                "coopLoadT<coop_mat16x16<f16, A>>(&Qs[w * {}u + {}u], {qs}u)",
                16 * qs,
                16 * kk
            )
        },
        &|j, kk| {
            format!(
                "coopLoad<coop_mat16x16<f16, B>>(&KP[{}u], {ks}u)",
                16 * j * ks + 16 * kk
            )
        },
        ss,
    );
    // O = P·V: 16 rows × each 16-column block of V.
    let pv = product(
        dv / 16,
        skp / 16,
        &|kk| {
            format!(
                "coopLoadT<coop_mat16x16<f16, A>>(&KP[w * {}u + {}u], {ps}u)",
                16 * ps,
                16 * kk
            )
        },
        &|jn, kk| {
            format!(
                "coopLoadT<coop_mat16x16<f16, B>>(&Vs[{}u], {vs}u)",
                16 * kk * vs + 16 * jn
            )
        },
        ss,
    );
    // Scale and mask each score, unrolled where the keys are few: a mask
    // read from memory is a load per key, and in a loop each waited for
    // the one before (MiniLM at B=32 on the H200: 1.27 ms for 6 launches).
    let one = |j: &str, guard: bool| {
        let body = format!(
            "var s: f32 = Ss[rr * {ss}u + j] * {sc};\n{mask}Ss[rr * {ss}u + j] = s;\nmx = max(mx, s);"
        );
        if guard {
            format!("{{ let j: u32 = {j}; if (j < {sk}u) {{\n{body}\n}} }}\n")
        } else {
            format!("{{ let j: u32 = {j};\n{body}\n}}\n")
        }
    };
    let scale_mask = if sk <= UNROLL_KEYS {
        (0..sk.div_ceil(2))
            .map(|i| one(&format!("h + {}u", 2 * i), 2 * i + 1 >= sk))
            .collect::<String>()
    } else {
        format!(
            "for (var j0: u32 = h; j0 < {sk}u; j0 = j0 + 2u) {}",
            one("j0", false)
        )
    };
    let mut idx = bi.clone();
    idx.extend(["qi".to_string(), "c".to_string()]);
    let st = b.store(
        out,
        &Builder::addr(out, &idx),
        &format!("Ss[rr * {ss}u + c] * Ls[rr]"),
    );
    let s = format!(
        r#"{fns}var<workgroup> Qs: array<f16, {qw}>;
var<workgroup> KP: array<f16, {kp_words}>;
var<workgroup> Vs: array<f16, {vw}>;
var<workgroup> Ss: array<f32, {sw}>;
var<workgroup> Red: array<f32, 64>;
var<workgroup> Ls: array<f32, {ROWS}>;
@compute @workgroup_size({THREADS})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
let tile: u32 = wg.x + wg.y * {gx}u;
if (tile >= {tiles}u) {{ return; }}
let bz: u32 = tile / {per_head}u;
let q0: u32 = (tile % {per_head}u) * {ROWS}u;
{bu}// Subgroup w (invocations 32w..32w+31, 32-wide as checked when the
// feature was granted) owns rows 16w..16w+15 of the tile.
let w: u32 = lid / 32u;
// Stage q rows, K and V (f16, zero past the ends).
{loads}{stores}workgroupBarrier();
{qk}workgroupBarrier();
// Softmax over each score row: two invocations per row, each every other
// key; scale and mask applied here, padded keys excluded.
let rr: u32 = lid / 2u;
let h: u32 = lid % 2u;
let qi: u32 = min(q0 + rr, {sqm}u);
var mx: f32 = {ninf};
{scale_mask}Red[lid] = mx;
workgroupBarrier();
let m = max(Red[rr * 2u], Red[rr * 2u + 1u]);
workgroupBarrier();
// K is no longer read: P (unnormalized, ≤ 1) takes its place as f16.
var sum: f32 = 0.0;
for (var j: u32 = h; j < {skp}u; j = j + 2u) {{
  var p: f32 = 0.0;
  if (j < {sk}u) {{
    let s = Ss[rr * {ss}u + j];
    p = select(exp(s - m), 0.0, s == {ninf} && m != {ninf});
  }}
  sum = sum + p;
  KP[rr * {ps}u + j] = f16(p);
}}
Red[lid] = sum;
workgroupBarrier();
if (h == 0u) {{ Ls[rr] = 1.0 / (Red[rr * 2u] + Red[rr * 2u + 1u]); }}
workgroupBarrier();
{pv}workgroupBarrier();
// Out: the accumulators divided by the row sums (a fully masked row: NaN).
if (q0 + rr < {sq}u) {{
  for (var c: u32 = h; c < {dv}u; c = c + 2u) {{
    {st}
  }}
}}
}}
"#,
        qw = ROWS * qs,
        vw = skp * vs,
        sw = ROWS * ss,
        gx = groups[0],
        sqm = sq.max(1) - 1,
    );
    Ok(b.finish(format!("{name}_coop"), s, groups))
}
