//! f16 matmul on cooperative matrices (tensor cores), for adapters that
//! offer 16×16×16 f16 × f16 + f32 on 32-wide subgroups (`Caps::coop_f16`).
//!
//! A workgroup of 4 or 8 subgroups computes a 64×64, 128×64 or 128×128
//! output tile; each subgroup owns a block of 16×16 f32 accumulator
//! matrices. K goes by 32: every invocation stages its share of the A and B
//! tiles into shared memory as f16 (zero past the edges, so any shape
//! works) while the next share is fetched into registers, then each
//! subgroup multiplies its fragments out of shared memory. The
//! accumulators leave through shared memory so the scalar epilogue (bias,
//! activation, residual, f16 rounding) and the bounds checks are those of
//! the register-blocked kernel. Split-K and its reducer are shared too.
//!
//! Precision is the scalar kernel's: f16 operands, products exact in f32,
//! f32 sums; only the order of the sums differs.

use super::matmul::{epilogue, operands, split_k, store_v, with_reducer, Matmul};
use super::{batch_addr, unravel, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::{BufId, TensorRef};
use std::fmt::Write;

/// K step; shared-memory row padding (elements), which keeps fragment rows
/// 16-byte aligned while spreading them over the banks.
const BK: usize = 32;
const PAD16: usize = 8;
const PAD32: usize = 4;

/// A workgroup's output tile and how its subgroups split it: `wm` × `wn`
/// subgroups, each owning (bm / wm) × (bn / wn) = `fi` × `fj` fragments.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Shape {
    bm: usize,
    bn: usize,
    wm: usize,
    wn: usize,
}

impl Shape {
    const ALL: [(&'static str, Shape); 3] = [
        (
            "64x64",
            Shape {
                bm: 64,
                bn: 64,
                wm: 2,
                wn: 2,
            },
        ),
        (
            "128x64",
            Shape {
                bm: 128,
                bn: 64,
                wm: 2,
                wn: 2,
            },
        ),
        (
            "128x128",
            Shape {
                bm: 128,
                bn: 128,
                wm: 4,
                wn: 2,
            },
        ),
    ];
    fn threads(self) -> usize {
        32 * self.wm * self.wn
    }
    fn fi(self) -> usize {
        self.bm / self.wm / 16
    }
    fn fj(self) -> usize {
        self.bn / self.wn / 16
    }
    fn tiles(self, nb: usize, m: usize, n: usize) -> usize {
        nb * m.div_ceil(self.bm) * n.div_ceil(self.bn)
    }

    /// 64×64, or 128×128 when those still make four waves of a 132-unit
    /// GPU (large products: twice the reuse per staged element). Measured
    /// on the H200: MiniLM at B=32 4.9 ms with 64×64 everywhere, 5.6 with
    /// 128×128, 7.5 with 128×64; 4096³ 67 / 81 / 76 TFLOP/s.
    /// `RLX_WGPU_COOP_TILE` = 64x64, 128x64 or 128x128 forces one.
    fn pick(nb: usize, m: usize, n: usize) -> Shape {
        let forced = std::env::var("RLX_WGPU_COOP_TILE").ok();
        if let Some(&(_, s)) = Shape::ALL
            .iter()
            .find(|(k, _)| Some(*k) == forced.as_deref())
        {
            return s;
        }
        let big = Shape::ALL[2].1;
        if big.tiles(nb, m, n) >= 4 * 132 {
            big
        } else {
            Shape::ALL[0].1
        }
    }
}

/// Whether `mm` can run here: both operands and the output are f16 stored
/// as f16 (bias and residual may be anything the epilogue reads).
pub fn applies(mm: &Matmul) -> bool {
    [mm.a, mm.b, mm.out].iter().all(|t| t.is_half())
}

/// How a staged operand tile is laid out in shared memory: `rows` × `cols`
/// of the logical (M×K for A, K×N for B) matrix, either row-major (`row`)
/// or column-major, with `stride` elements between lines.
struct Tile {
    row: bool,
    stride: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Operand {
    A,
    B,
}

/// The WGSL that stages one operand tile: load functions, the prefetch
/// registers, their refill for the next K step, their store to shared memory.
struct Staged {
    fns: String,
    regs: String,
    fetch: String,
    to_shared: String,
}

/// Stage operand `t` (logical `rows` × `cols` tile of a matrix with
/// `extent` = (rows, cols) overall) with `threads` invocations. Four f16 at
/// a time when the tile's unit-stride axis is unit-stride in memory and
/// every address and extent along it is a multiple of 4 (then a vector is
/// wholly inside or outside the matrix); one at a time otherwise.
#[allow(clippy::too_many_arguments)]
fn stage(
    bl: &mut Builder,
    op: Operand,
    t: &TensorRef,
    tile: &Tile,
    (rows, cols): (usize, usize),
    extent: (usize, usize),
    rb: usize,
    threads: usize,
) -> Staged {
    let (x, arr, base, o0) = match op {
        Operand::A => ("a", "As", "abase", "m0"),
        Operand::B => ("b", "Bs", "bbase", "n0"),
    };
    // Global (row, column) of tile element (r_, c_): A's rows are m and
    // its columns the K step; B's rows are the K step.
    let (gr, gc, rok, cok) = match op {
        Operand::A => (
            format!("{o0} + r_"),
            "k0 + c_".to_string(),
            format!("{o0} + r_ < {}u", extent.0),
            "k0 + c_ < kend".to_string(),
        ),
        Operand::B => (
            "k0 + r_".to_string(),
            format!("{o0} + c_"),
            "k0 + r_ < kend".to_string(),
            format!("{o0} + c_ < {}u", extent.1),
        ),
    };
    let (s_r, s_c) = (t.strides[rb], t.strides[rb + 1]);
    let addr = format!("{base} + i32({gr}) * {s_r} + i32({gc}) * {s_c}");
    let (unit_stride, other_stride, unit_extent) = if tile.row {
        (s_c, s_r, extent.1)
    } else {
        (s_r, s_c, extent.0)
    };
    let vec = t.is_half()
        && unit_stride == 1
        && other_stride % 4 == 0
        && t.offset % 4 == 0
        && t.strides[..rb].iter().all(|s| s % 4 == 0)
        && unit_extent % 4 == 0;
    let w = if vec { 4 } else { 1 };
    // (r_, c_) of staging item e, walking the unit-stride axis first.
    let walk = match (tile.row, w) {
        (true, 1) => format!("let r_ = e / {cols}u; let c_ = e % {cols}u;"),
        (false, 1) => format!("let r_ = e % {rows}u; let c_ = e / {rows}u;"),
        (true, _) => format!("let r_ = e / {q}u; let c_ = (e % {q}u) * 4u;", q = cols / 4),
        (false, _) => format!("let r_ = (e % {q}u) * 4u; let c_ = e / {q}u;", q = rows / 4),
    };
    let (ty, load, zero) = if vec {
        ("vec4<f16>", bl.load_half4(t, &addr), "vec4<f16>()")
    } else {
        ("f16", format!("f16({})", bl.load(t, &addr)), "f16(0.0)")
    };
    let at = tile.at("r_", "c_");
    let fns = format!(
        "// Staging item e of the {x} tile ({rows} x {cols}, {w} element(s)), zero outside.
fn ld{x}_(e: u32, k0: u32, kend: u32, {o0}: u32, {base}: i32) -> {ty} {{
  {walk}
  if ({rok} && {cok}) {{ return {load}; }}
  return {zero};
}}
fn i{x}_(e: u32) -> u32 {{ {walk} return {at}; }}
"
    );
    let mut st = Staged {
        fns,
        regs: String::new(),
        fetch: String::new(),
        to_shared: String::new(),
    };
    for q in 0..rows * cols / w / threads {
        let e = format!("lid + {}u", q * threads);
        let _ = writeln!(
            st.regs,
            "var p{x}{q}: {ty} = ld{x}_({e}, kbeg, kend, {o0}, {base});"
        );
        let _ = writeln!(st.fetch, "  p{x}{q} = ld{x}_({e}, kn, kend, {o0}, {base});");
        if vec {
            // The four are consecutive in shared memory too (both layouts
            // keep the unit-stride axis contiguous).
            let _ = writeln!(
                st.to_shared,
                "  {{ let i = i{x}_({e}); {arr}[i] = p{x}{q}.x; {arr}[i + 1u] = p{x}{q}.y; {arr}[i + 2u] = p{x}{q}.z; {arr}[i + 3u] = p{x}{q}.w; }}"
            );
        } else {
            let _ = writeln!(st.to_shared, "  {arr}[i{x}_({e})] = p{x}{q};");
        }
    }
    st
}

impl Tile {
    /// Row-major when the operand's column axis is unit-stride in memory,
    /// so consecutive invocations read consecutive addresses.
    fn for_operand(t: &TensorRef, rb: usize, rows: usize, cols: usize) -> Tile {
        let col_major = t.strides[rb] == 1 && t.strides[rb + 1] != 1;
        if col_major {
            Tile {
                row: false,
                stride: rows + PAD16,
            }
        } else {
            Tile {
                row: true,
                stride: cols + PAD16,
            }
        }
    }

    /// Shared-memory index of logical element (r, c).
    fn at(&self, r: &str, c: &str) -> String {
        if self.row {
            format!("({r}) * {}u + ({c})", self.stride)
        } else {
            format!("({c}) * {}u + ({r})", self.stride)
        }
    }

    /// A cooperative load of the 16×16 fragment at (r, c).
    fn load(&self, arr: &str, role: &str, r: &str, c: &str) -> String {
        let f = if self.row { "coopLoadT" } else { "coopLoad" };
        format!(
            "{f}<coop_mat16x16<f16, {role}>>(&{arr}[{}], {}u)",
            self.at(r, c),
            self.stride
        )
    }

    fn words(&self, rows: usize, cols: usize) -> usize {
        if self.row {
            rows * self.stride
        } else {
            cols * self.stride
        }
    }
}

/// The cooperative-matrix kernel (plus a split-K reducer when K is split).
pub fn kernel(name: &str, mm: &Matmul) -> Result<Vec<Kernel>, WgpuError> {
    let out = mm.out;
    let (a, b, batch, m, k, n) = operands(mm.a, mm.b);
    let nb: usize = batch.iter().product::<usize>().max(1);
    let sh = Shape::pick(nb, m, n);
    let (bm, bn, threads) = (sh.bm, sh.bn, sh.threads());
    let (split, kc) = split_k(sh.tiles(nb, m, n), k, BK);
    let groups = [
        n.div_ceil(bn) as u32,
        m.div_ceil(bm) as u32,
        (nb * split) as u32,
    ];
    if groups.iter().any(|&g| g > super::MAX_GROUPS) {
        return Err(WgpuError::Unsupported {
            op: "matmul".into(),
            why: format!("batch {nb}, m {m} or n {n} exceeds the dispatch grid"),
        });
    }
    let rb = batch.len();
    let mut bl = Builder {
        coop: true,
        half4: true,
        ..Builder::default()
    };
    let (bu, bi) = unravel("zb", &batch, "z");
    let (at, bt) = (
        Tile::for_operand(&a, rb, bm, BK),
        Tile::for_operand(&b, rb, BK, bn),
    );
    // The epilogue runs here unless K is split (then the reducer runs it).
    let put = if split == 1 {
        let epi = epilogue(&mut bl, mm, &batch, &bi, m, n)?;
        let st = store_v(&mut bl, out, m, n);
        format!("var v: f32 = x;\n{epi}    {st}")
    } else {
        let arena = bl.buf(BufId::Arena);
        format!(
            "{arena}[SCRATCH_BASE + wg.z * {mn}u + gm * {n}u + gn] = bitcast<u32>(x);",
            mn = m * n
        )
    };
    let (fi, fj) = (sh.fi(), sh.fj());
    // Per k-substep: fragments of A and B out of shared memory, then the
    // fi × fj multiply-adds of this subgroup.
    let mut mma = String::new();
    for i in 0..fi {
        let at_ = at.load("As", "A", &format!("wm + {}u", 16 * i), "kk");
        let _ = writeln!(mma, "    let a{i} = {at_};");
    }
    for j in 0..fj {
        let bt_ = bt.load("Bs", "B", "kk", &format!("wn + {}u", 16 * j));
        let _ = writeln!(mma, "    let b{j} = {bt_};");
    }
    // The accumulators leave one at a time through this subgroup's 16×16
    // corner of shared memory, where each lane takes 8 of them through the
    // scalar epilogue (bounds, bias, activation, residual, f16 store).
    let cs = 16 + PAD32;
    let mut init = String::new();
    let mut spill = String::new();
    for i in 0..fi {
        for j in 0..fj {
            let _ = writeln!(init, "var c{i}_{j} = coop_mat16x16<f32, C>();");
            let _ = writeln!(mma, "    c{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c{i}_{j});");
            let _ = write!(
                spill,
                "coopStoreT(c{i}_{j}, &Cs[w * {csz}u], {cs}u);
workgroupBarrier();
for (var t: u32 = 0u; t < 8u; t = t + 1u) {{
  let e = lane + t * 32u;
  let r_ = e / 16u; let c_ = e % 16u;
  let gm = m0 + wm + {r0}u + r_; let gn = n0 + wn + {c0}u + c_;
  if (gm < {m}u && gn < {n}u) {{
    let x = Cs[w * {csz}u + r_ * {cs}u + c_];
    {put}
  }}
}}
workgroupBarrier();
",
                csz = 16 * cs,
                r0 = 16 * i,
                c0 = 16 * j,
            );
        }
    }
    // Staging: the next K step's share of each tile is fetched into
    // registers while this one is multiplied out of shared memory.
    let sa = stage(&mut bl, Operand::A, &a, &at, (bm, BK), (m, k), rb, threads);
    let sb = stage(&mut bl, Operand::B, &b, &bt, (BK, bn), (k, n), rb, threads);
    let regs = sa.regs + &sb.regs;
    let fetch = sa.fetch + &sb.fetch;
    let to_shared = sa.to_shared + &sb.to_shared;
    let fns = sa.fns + &sb.fns;
    let (wm_, wn_) = (bm / sh.wm, bn / sh.wn);
    let s = format!(
        r#"var<workgroup> As: array<f16, {asz}>;
var<workgroup> Bs: array<f16, {bsz}>;
var<workgroup> Cs: array<f32, {csz}>;
{fns}@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
let zb: u32 = wg.z / {split}u;
let kbeg: u32 = (wg.z % {split}u) * {kc}u;
let kend: u32 = min({k}u, kbeg + {kc}u);
{bu}let abase: i32 = {abase};
let bbase: i32 = {bbase};
let m0: u32 = wg.y * {bm}u;
let n0: u32 = wg.x * {bn}u;
// Invocations 32w..32w+31 form subgroup w (32-wide subgroups, checked
// when the feature was granted); it owns rows wm.., columns wn...
let w: u32 = lid / 32u;
let lane: u32 = lid % 32u;
let wm: u32 = (w / {wn_count}u) * {wm_}u;
let wn: u32 = (w % {wn_count}u) * {wn_}u;
{init}{regs}for (var k0: u32 = kbeg; k0 < kend; k0 = k0 + {BK}u) {{
{to_shared}  workgroupBarrier();
  let kn = k0 + {BK}u;
{fetch}  for (var kk: u32 = 0u; kk < {BK}u; kk = kk + 16u) {{
{mma}  }}
  workgroupBarrier();
}}
{spill}}}
"#,
        asz = at.words(bm, BK),
        bsz = bt.words(BK, bn),
        csz = sh.wm * sh.wn * 16 * cs,
        wn_count = sh.wn,
        abase = batch_addr(&a, &bi),
        bbase = batch_addr(&b, &bi),
    );
    with_reducer(
        bl.finish(name.to_string(), s, groups),
        mm,
        &batch,
        (m, n, split),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_stages_whole_shares_in_whole_fragments() {
        for (_, s) in Shape::ALL {
            assert_eq!(s.bm * BK % s.threads(), 0);
            assert_eq!(BK * s.bn % s.threads(), 0);
            assert_eq!(s.bm % (16 * s.wm), 0);
            assert_eq!(s.bn % (16 * s.wn), 0);
        }
        // MiniLM's products take 64x64 tiles at every batch; 4096² 128x128.
        assert_eq!(Shape::pick(1, 4096, 384), Shape::ALL[0].1);
        assert_eq!(Shape::pick(1, 4096, 1536), Shape::ALL[0].1);
        assert_eq!(Shape::pick(1, 128, 384), Shape::ALL[0].1);
        assert_eq!(Shape::pick(1, 4096, 4096), Shape::ALL[2].1);
    }
}
