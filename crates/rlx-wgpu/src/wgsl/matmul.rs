//! Batched matmul with a fused epilogue (bias, activation): 16×16 threads
//! per workgroup, each holding an R×R register block (R = 2, 4 or 8, so
//! tiles of 32², 64² or 128²), K staged through shared memory. R is the
//! largest that still gives the GPU enough workgroups (small products get
//! small tiles). Operands are read through their strides, so transposed
//! weights (a `permute` view) cost no copy.

use super::expr::apply;
use super::{batch_addr, unravel, with_batch, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_ir::Attrs;
use rlx_runtime::options::WgpuOptions;
use std::fmt::Write;

/// Workgroups wanted before a larger register block is chosen (two waves
/// on a 132-SM GPU; small GPUs are not hurt by it).
pub(super) const WANT_GROUPS: usize = 264;

/// The register block side for an (batch, m, n) product;
/// `WgpuOptions::matmul_block` = 2, 4 or 8 forces one (tests, tuning).
pub fn block_for(nb: usize, m: usize, n: usize, opts: &WgpuOptions) -> usize {
    if let Some(r) = opts.matmul_block.filter(|r| [2, 4, 8].contains(r)) {
        return r as usize;
    }
    let t = 128;
    if nb * m.div_ceil(t) * n.div_ceil(t) >= WANT_GROUPS {
        return 8;
    }
    // 64² tiles otherwise, even when they are few (split-K fills the GPU
    // then): on the H200 they beat 32² tiles at every MiniLM batch
    // (B=2 1.9 -> 1.4 ms, B=8 4.0 -> 3.0, B=16 7.2 -> 5.3). 32² only for
    // products too thin to fill a 64² tile.
    if m.min(n) >= 64 {
        4
    } else {
        2
    }
}

/// Lift NumPy matmul operands to (batch..., m, k) and (batch..., k, n),
/// with the output's batch dims. Returns (a, b, batch dims, m, k, n).
pub fn operands(
    a: &TensorRef,
    b: &TensorRef,
) -> (TensorRef, TensorRef, Vec<usize>, usize, usize, usize) {
    let mut a = a.clone();
    let mut b = b.clone();
    if a.dims.len() == 1 {
        a.dims.insert(0, 1);
        a.strides.insert(0, 0);
    }
    if b.dims.len() == 1 {
        b.dims.push(1);
        b.strides.push(0);
    }
    let (ra, rb) = (a.dims.len(), b.dims.len());
    let (m, k, n) = (a.dims[ra - 2], a.dims[ra - 1], b.dims[rb - 1]);
    let ba = &a.dims[..ra - 2];
    let bb = &b.dims[..rb - 2];
    let r = ba.len().max(bb.len());
    let batch: Vec<usize> = (0..r)
        .map(|i| {
            let da = if i + ba.len() >= r {
                ba[i + ba.len() - r]
            } else {
                1
            };
            let db = if i + bb.len() >= r {
                bb[i + bb.len() - r]
            } else {
                1
            };
            da.max(db)
        })
        .collect();
    let full = |t: &TensorRef, x: usize, y: usize| {
        let mut d = batch.clone();
        d.extend([x, y]);
        t.broadcast_to(&d)
    };
    (full(&a, m, k), full(&b, k, n), batch, m, k, n)
}

/// One matmul step: act(a @ b + bias) (+ residual, broadcast to the
/// output) into contiguous `out`.
#[derive(Clone, Copy)]
pub struct Matmul<'a> {
    pub a: &'a TensorRef,
    pub b: &'a TensorRef,
    pub bias: Option<&'a TensorRef>,
    /// An activation of the expression table, or "none".
    pub act: &'a str,
    pub residual: Option<&'a TensorRef>,
    pub out: &'a TensorRef,
    /// Forced tile sizes and variants (A/B runs, tests).
    pub opts: &'a WgpuOptions,
}

/// How the register-blocked kernel covers a product of `nb` batches of
/// (m × k) · (k × n): register blocks `r` (tiles of 16r × 16r, K steps of
/// `bk`), K split into `split` chunks of `kc`, and the workgroup grid.
struct Tiling {
    r: usize,
    bk: usize,
    split: usize,
    kc: usize,
    groups: [usize; 3],
}

fn tiling(nb: usize, m: usize, k: usize, n: usize, opts: &WgpuOptions) -> Tiling {
    let r = block_for(nb, m, n, opts);
    let bt = 16 * r;
    let bk = if r == 8 { 8 } else { 16 };
    let tiles = nb * m.div_ceil(bt) * n.div_ceil(bt);
    let (split, kc) = split_k(tiles, k, bk, opts.split_k);
    let groups = [n.div_ceil(bt), m.div_ceil(bt), nb * split];
    Tiling {
        r,
        bk,
        split,
        kc,
        groups,
    }
}

/// Why the register-blocked kernel cannot run a product of `nb` batches of
/// (m × k) · (k × n), if it cannot: its grid has at most
/// [`super::MAX_GROUPS`] workgroups per axis. Asked by `select` at
/// legalization and again here, so a refusal is in the dispatch report
/// before anything is built.
pub fn grid_limit(
    nb: usize,
    m: usize,
    k: usize,
    n: usize,
    opts: &WgpuOptions,
) -> Result<(), String> {
    let g = tiling(nb, m, k, n, opts).groups;
    let max = super::MAX_GROUPS as usize;
    if g.iter().any(|&x| x > max) {
        return Err(format!(
            "{nb} batches of {m}×{k} · {k}×{n} need a {}×{}×{} workgroup grid; WebGPU allows {max} per axis",
            g[0], g[1], g[2]
        ));
    }
    Ok(())
}

/// The register-blocked kernel (plus a split-K reducer when K is split).
pub fn kernel(name: &str, mm: &Matmul) -> Result<Vec<Kernel>, WgpuError> {
    let out = mm.out;
    let (a, b_, batch, m, k, n) = operands(mm.a, mm.b);
    let nb: usize = batch.iter().product::<usize>().max(1);
    grid_limit(nb, m, k, n, mm.opts).map_err(|why| WgpuError::Unsupported {
        op: "matmul".into(),
        why,
    })?;
    let Tiling {
        r,
        bk,
        split,
        kc,
        groups,
    } = tiling(nb, m, k, n, mm.opts);
    let (bm, bn) = (16 * r, 16 * r);
    // Tile elements each of the 256 threads loads per operand.
    let per = bm * bk / 256;
    let groups = groups.map(|g| g as u32);
    let mut bl = Builder::default();
    let rb = batch.len();
    let (bu, bi) = unravel("zb", &batch, "z");
    let bidx = |t: &TensorRef| batch_addr(t, &bi);
    let la = bl.load(
        &a,
        &format!(
            "abase + i32(gm) * {} + i32(gk) * {}",
            a.strides[rb],
            a.strides[rb + 1]
        ),
    );
    let lb = bl.load(
        &b_,
        &format!(
            "bbase + i32(gk) * {} + i32(gn) * {}",
            b_.strides[rb],
            b_.strides[rb + 1]
        ),
    );
    // The epilogue runs here unless K is split (then the reducer runs it;
    // bindings this kernel would not use must not be declared).
    let (epi, st) = if split == 1 {
        let epi = epilogue(&mut bl, mm, &batch, &bi, m, n)?;
        let st = store_v(&mut bl, out, m, n);
        (epi, st)
    } else {
        (String::new(), String::new())
    };
    // Shared tiles are read as vectors (one wide load per w operands).
    let w = r.min(4);
    let vt = format!("vec{w}<f32>");
    // Tile loads: consecutive threads walk the operand's unit-stride axis,
    // so global reads coalesce (weights arrive transposed: k-contiguous).
    let amap = if a.strides[rb] == 1 && a.strides[rb + 1] != 1 {
        format!("let am = e % {bm}u; let ak = e / {bm}u;")
    } else {
        format!("let am = e / {bk}u; let ak = e % {bk}u;")
    };
    let bmap = if b_.strides[rb] == 1 && b_.strides[rb + 1] != 1 {
        format!("let bk_ = e % {bk}u; let bn_ = e / {bk}u;")
    } else {
        format!("let bk_ = e / {bn}u; let bn_ = e % {bn}u;")
    };
    // Bound only when used: auto layouts drop unused bindings.
    let arena = if split > 1 {
        bl.buf(crate::tref::BufId::Arena)
    } else {
        String::new()
    };
    // Unrolled register block: c{i}_{j} accumulators, a{i}/b{j} operands.
    let mut init = String::new();
    let mut inner = String::new();
    let mut stores = String::new();
    for i in 0..r {
        let (q, c) = (i / w, ["x", "y", "z", "w"][i % w]);
        let _ = writeln!(inner, "    let a{i} = As[ai + {q}u].{c};");
        let _ = writeln!(inner, "    let b{i} = Bs[bi + {q}u].{c};");
        for j in 0..r {
            let _ = writeln!(init, "var c{i}_{j}: f32 = 0.0;");
        }
    }
    for i in 0..r {
        for j in 0..r {
            let _ = writeln!(inner, "    c{i}_{j} = fma(a{i}, b{j}, c{i}_{j});");
            // Split K: the raw partial sum goes to scratch for the reducer.
            let put = if split > 1 {
                format!("{arena}[SCRATCH_BASE + wg.z * {mn}u + gm * {n}u + gn] = bitcast<u32>(c{i}_{j});", mn = m * n)
            } else {
                format!("var v: f32 = c{i}_{j};\n{epi}    {st}")
            };
            let _ = write!(
                stores,
                "{{\n  let gm = m0 + li.y * {r}u + {i}u;\n  let gn = n0 + li.x * {r}u + {j}u;\n  if (gm < {m}u && gn < {n}u) {{\n    {put}\n  }}\n}}\n"
            );
        }
    }
    // The next k-tile is fetched from global memory into registers while
    // this one is multiplied out of shared memory (the loads' latency
    // hides behind the FMAs); `per` elements of each operand per thread.
    let mut prologue = String::new();
    let mut to_shared = String::new();
    let mut prefetch = String::new();
    for t in 0..per {
        let e = format!("lid + {}u", t * 256);
        let _ = writeln!(prologue, "var pa{t}: f32 = lda_({e}, kbeg, m0, abase);");
        let _ = writeln!(prologue, "var pb{t}: f32 = ldb_({e}, kbeg, n0, bbase);");
        let _ = writeln!(
            to_shared,
            "  {{ let ia = ia_({e}); As[ia / {w}u][ia % {w}u] = pa{t}; let ib = ib_({e}); Bs[ib / {w}u][ib % {w}u] = pb{t}; }}"
        );
        let _ = writeln!(prefetch, "  pa{t} = lda_({e}, kn, m0, abase);");
        let _ = writeln!(prefetch, "  pb{t} = ldb_({e}, kn, n0, bbase);");
    }
    let s = format!(
        r#"var<workgroup> As: array<{vt}, {asz}>;
var<workgroup> Bs: array<{vt}, {bsz}>;
// A tile: {bm} rows x {bk} cols, stored k-major; element e of the tile.
fn lda_(e: u32, k0: u32, m0: u32, abase: i32) -> f32 {{
  {amap}
  let gm = m0 + am; let gk = k0 + ak;
  if (gm < {m}u && gk < {k}u) {{ return {la}; }}
  return 0.0;
}}
fn ia_(e: u32) -> u32 {{ {amap} return ak * {bm}u + am; }}
// B tile: {bk} rows x {bn} cols.
fn ldb_(e: u32, k0: u32, n0: u32, bbase: i32) -> f32 {{
  {bmap}
  let gk = k0 + bk_; let gn = n0 + bn_;
  if (gk < {k}u && gn < {n}u) {{ return {lb}; }}
  return 0.0;
}}
fn ib_(e: u32) -> u32 {{ {bmap} return bk_ * {bn}u + bn_; }}
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(local_invocation_id) li: vec3<u32>) {{
let zb: u32 = wg.z / {split}u;
// This workgroup's share of K (all of it unless K is split).
let kbeg: u32 = (wg.z % {split}u) * {kc}u;
let kend: u32 = min({k}u, kbeg + {kc}u);
{bu}let abase: i32 = {abase};
let bbase: i32 = {bbase};
let m0: u32 = wg.y * {bm}u;
let n0: u32 = wg.x * {bn}u;
{init}{prologue}for (var k0: u32 = kbeg; k0 < kend; k0 = k0 + {bk}u) {{
{to_shared}  workgroupBarrier();
  let kn = k0 + {bk}u;
{prefetch}  for (var kk: u32 = 0u; kk < {bk}u; kk = kk + 1u) {{
    let ai = (kk * {bm}u + li.y * {r}u) / {w}u;
    let bi = (kk * {bn}u + li.x * {r}u) / {w}u;
{inner}  }}
  workgroupBarrier();
}}
{stores}}}
"#,
        amap = amap,
        bmap = bmap,
        asz = bm * bk / w,
        bsz = bk * bn / w,
        abase = bidx(&a),
        bbase = bidx(&b_),
    );
    with_reducer(
        bl.finish(name.to_string(), s, groups),
        mm,
        &batch,
        (m, n, split),
    )
}

/// `main` alone, or, when K is split, with the reducer that sums its
/// partials from scratch and runs the epilogue.
pub(super) fn with_reducer(
    mut main: Kernel,
    mm: &Matmul,
    batch: &[usize],
    (m, n, split): (usize, usize, usize),
) -> Result<Vec<Kernel>, WgpuError> {
    if split == 1 {
        return Ok(vec![main]);
    }
    let nb: usize = batch.iter().product::<usize>().max(1);
    main.scratch_words = split * nb * m * n;
    let mut reduce = reducer(&format!("{}_splitk", main.name), mm, batch, (m, n, split))?;
    reduce.scratch_words = main.scratch_words;
    Ok(vec![main, reduce])
}

/// K split into `split` chunks of `kc` (a multiple of `bk`) when the output
/// has too few tiles to fill the GPU and K is long: small-batch products
/// are latency-bound on their serial k-loop otherwise.
/// `on` false (`WgpuOptions::split_k`) turns it off (A/B runs).
pub(super) fn split_k(tiles: usize, k: usize, bk: usize, on: bool) -> (usize, usize) {
    let off = !on;
    // Under one wave of a 132-unit GPU only: a two-way split of a wave and
    // a half cost more (the reducer, the scratch traffic) than it saved
    // (H200: MiniLM B=4 3.3 -> 4.0 ms).
    if off || 2 * tiles > WANT_GROUPS || k < 256 {
        return (1, k.max(1));
    }
    let want = WANT_GROUPS.div_ceil(tiles).min(k / 64).clamp(1, 16);
    let kc = k.div_ceil(want).div_ceil(bk) * bk;
    (k.div_ceil(kc), kc)
}

/// The epilogue on `v` at (batch `bi`, `gm`, `gn`): bias through its
/// broadcast strides, the activation, then the residual.
pub(super) fn epilogue(
    bl: &mut Builder,
    mm: &Matmul,
    batch: &[usize],
    bi: &[String],
    m: usize,
    n: usize,
) -> Result<String, WgpuError> {
    let rb = batch.len();
    let mut epi = String::new();
    let add = |bl: &mut Builder, t: &TensorRef, epi: &mut String| {
        let tf = with_batch(t, batch, m, n);
        let base = batch_addr(&tf, bi);
        let (s0, s1) = (tf.strides[rb], tf.strides[rb + 1]);
        let l = bl.load(&tf, &format!("({base}) + i32(gm) * {s0} + i32(gn) * {s1}"));
        let _ = writeln!(epi, "    v = v + {l};");
    };
    if let Some(bias) = mm.bias {
        add(bl, bias, &mut epi);
    }
    if mm.act != "none" {
        let e = apply(
            mm.act,
            &["v".to_string()],
            &[rlx_ir::DType::F32],
            rlx_ir::DType::F32,
            &Attrs::new(),
        )
        .ok_or_else(|| WgpuError::Unsupported {
            op: "matmul_bias_act".into(),
            why: format!("activation `{}`", mm.act),
        })?;
        let _ = writeln!(epi, "    v = {e};");
    }
    if let Some(res) = mm.residual {
        add(bl, res, &mut epi);
    }
    Ok(epi)
}

/// The statement storing `v` at (batch `zb`, `gm`, `gn`) of contiguous `out`.
pub(super) fn store_v(bl: &mut Builder, out: &TensorRef, m: usize, n: usize) -> String {
    let a = format!(
        "{} + i32(zb) * {} + i32(gm) * {n} + i32(gn)",
        out.offset,
        m * n
    );
    bl.store(out, &a, "v")
}

/// The second kernel of a split-K matmul: one thread per output element
/// sums the chunks' partials from scratch, then the epilogue and store.
fn reducer(
    name: &str,
    mm: &Matmul,
    batch: &[usize],
    (m, n, split): (usize, usize, usize),
) -> Result<Kernel, WgpuError> {
    let out = mm.out;
    let nb: usize = batch.iter().product::<usize>().max(1);
    let total = nb * m * n;
    let groups = super::grid(total, super::WG);
    let mut bl = Builder::default();
    let (bu, bi) = unravel("zb", batch, "z");
    let epi = epilogue(&mut bl, mm, batch, &bi, m, n)?;
    let arena = bl.buf(crate::tref::BufId::Arena);
    let st = bl.store(
        out,
        &format!(
            "{} + i32(zb) * {} + i32(gm) * {n} + i32(gn)",
            out.offset,
            m * n
        ),
        "v",
    );
    let s = format!(
        "{entry}let gn: u32 = idx % {n}u;\nlet gm: u32 = (idx / {n}u) % {m}u;\nlet zb: u32 = idx / {mn}u;\n{bu}var v: f32 = 0.0;\nfor (var s: u32 = 0u; s < {split}u; s = s + 1u) {{\n  v = v + bitcast<f32>({arena}[SCRATCH_BASE + (zb * {split}u + s) * {mn}u + gm * {n}u + gn]);\n}}\n{epi}{st}\n}}\n",
        entry = super::flat_entry(total, groups),
        mn = m * n,
    );
    Ok(bl.finish(name.to_string(), s, groups))
}
