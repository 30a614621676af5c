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
use rlx_runtime::options::CoopTile;
use std::fmt::Write;

/// K step; shared-memory row padding (elements), which keeps fragment rows
/// 16-byte aligned while spreading them over the banks.
const BK: usize = 32;
const PAD16: usize = 8;
const PAD32: usize = 4;

/// The K step: 16 for deep products (K ≥ 2048), else [`BK`];
/// `WgpuOptions::coop_bk` = 16 or 32 forces one. Measured on the H200 (one run,
/// 64×64 tiles): 4096³ 78 → 122 TFLOP/s and 2048³ 65 → 79 with 16, while
/// MiniLM's products (K = 384, 1536) gained nothing (B=32 GPU pass 2.75 vs
/// 2.81 ms): half the staging memory per workgroup against twice the
/// barriers.
fn k_step(k: usize, forced: Option<u32>) -> usize {
    match forced {
        Some(16) => 16,
        Some(32) => 32,
        _ if k >= 2048 => 16,
        _ => BK,
    }
}

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
    const ALL: [(&'static str, Shape); 4] = [
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
        (
            "64x128",
            Shape {
                bm: 64,
                bn: 128,
                wm: 2,
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
    /// `WgpuOptions::coop_tile` (64x64, 128x64, 128x128 or 64x128) forces one.
    fn pick(nb: usize, m: usize, n: usize, forced: Option<CoopTile>) -> Shape {
        let forced = forced.map(|t| t.to_string());
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

/// The WGSL that stages one operand tile: its load function, per-thread
/// addresses and bounds computed once before the K loop, the prefetch
/// registers, their refill for the next K step, their store to shared memory.
struct Staged {
    fns: String,
    setup: String,
    regs: String,
    fetch: String,
    to_shared: String,
}

/// Stage operand `t` (logical `rows` × `cols` tile of a matrix with
/// `extent` = (rows, cols) overall) with `threads` invocations. Four f16 at
/// a time when the tile's unit-stride axis is unit-stride in memory and
/// every address and extent along it is a multiple of 4 (then a vector is
/// wholly inside or outside the matrix); one at a time otherwise.
///
/// Each invocation stages the same tile positions at every K step, so its
/// addresses (without the K offset), shared-memory slots and the bound
/// along M or N are computed once, before the loop: inside it a staging
/// load is an add, one compare and the load (the index arithmetic per
/// element per step had outnumbered the tensor-core instructions).
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
    let (x, arr, base) = match op {
        Operand::A => ("a", "As", "abase"),
        Operand::B => ("b", "Bs", "bbase"),
    };
    let (s_r, s_c) = (t.strides[rb], t.strides[rb + 1]);
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
    let (ty, load, zero) = if vec {
        ("vec4<f16>", bl.load_half4(t, "g"), "vec4<f16>()")
    } else {
        ("f16", format!("f16({})", bl.load(t, "g")), "f16(0.0)")
    };
    let fns = format!(
        "// A staging load of the {x} tile ({rows} x {cols}, {w} element(s)), zero outside.
fn ld{x}_(g: i32, ok: bool) -> {ty} {{
  if (ok) {{ return {load}; }}
  return {zero};
}}
"
    );
    let mut st = Staged {
        fns,
        setup: String::new(),
        regs: String::new(),
        fetch: String::new(),
        to_shared: String::new(),
    };
    // K runs along A's columns and B's rows.
    let k_stride = match op {
        Operand::A => s_c,
        Operand::B => s_r,
    };
    // Items walk the unit-stride axis first, `per_line` to a line (a row
    // of a row-major tile, a column of a column-major one). When the
    // threads cover whole lines, item q of a thread is item 0 moved by a
    // constant number of lines: its address, bound and slot are item 0's
    // plus constants the shader compiler can fold into the instructions.
    let per_line = if tile.row { cols / w } else { rows / w };
    let whole_lines = threads.is_multiple_of(per_line);
    let line_stride = if tile.row { s_r } else { s_c };
    for q in 0..rows * cols / w / threads {
        let (r, c) = (format!("{x}r{q}"), format!("{x}c{q}"));
        let lines = q * threads / per_line;
        // The item's line and position along it, then (r, c).
        let (line, pos) = if whole_lines {
            (
                format!("lid / {per_line}u + {lines}u"),
                format!("(lid % {per_line}u) * {w}u"),
            )
        } else {
            let e = format!("(lid + {}u)", q * threads);
            (
                format!("{e} / {per_line}u"),
                format!("({e} % {per_line}u) * {w}u"),
            )
        };
        let (r_, c_) = if tile.row { (line, pos) } else { (pos, line) };
        // Address without the K offset, the bound along M (A) or N (B),
        // and the item's offset along K within the step.
        let (g, ok, kq) = match op {
            Operand::A => (
                format!("{base} + i32(m0 + {r}) * {s_r} + i32({c}) * {s_c}"),
                format!("m0 + {r} < {}u", extent.0),
                c.clone(),
            ),
            Operand::B => (
                format!("{base} + i32({r}) * {s_r} + i32(n0 + {c}) * {s_c}"),
                format!("n0 + {c} < {}u", extent.1),
                r.clone(),
            ),
        };
        let (g, at) = if whole_lines && q > 0 {
            (
                format!("{x}g0 + {}", lines as i64 * line_stride),
                format!("{x}s0 + {}u", lines * tile.stride),
            )
        } else {
            (g, tile.at(&r, &c))
        };
        let _ = writeln!(
            st.setup,
            "let {r}: u32 = {r_}; let {c}: u32 = {c_};
let {x}g{q}: i32 = {g};
let {x}o{q}: bool = {ok};
let {x}s{q}: u32 = {at};"
        );
        let ld = |k: &str| {
            format!("ld{x}_({x}g{q} + i32({k}) * {k_stride}, {x}o{q} && {k} + {kq} < kend)")
        };
        let _ = writeln!(st.regs, "var p{x}{q}: {ty} = {};", ld("kbeg"));
        let _ = writeln!(st.fetch, "  p{x}{q} = {};", ld("kn"));
        if vec {
            // The four are consecutive in shared memory too (both layouts
            // keep the unit-stride axis contiguous).
            let _ = writeln!(
                st.to_shared,
                "  {arr}[{x}s{q}] = p{x}{q}.x; {arr}[{x}s{q} + 1u] = p{x}{q}.y; {arr}[{x}s{q} + 2u] = p{x}{q}.z; {arr}[{x}s{q} + 3u] = p{x}{q}.w;"
            );
        } else {
            let _ = writeln!(st.to_shared, "  {arr}[{x}s{q}] = p{x}{q};");
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
    let sh = Shape::pick(nb, m, n, mm.opts.coop_tile);
    let bk = k_step(k, mm.opts.coop_bk);
    let (bm, bn, threads) = (sh.bm, sh.bn, sh.threads());
    let (split, kc) = split_k(sh.tiles(nb, m, n), k, bk, mm.opts.split_k);
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
        Tile::for_operand(&a, rb, bm, bk),
        Tile::for_operand(&b, rb, bk, bn),
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
    // Measured on the H200 (MiniLM f16 B=32 GPU pass): all of a subgroup's
    // accumulators at once (18 KiB more workgroup memory, 1 barrier instead
    // of 8) 2.76 → 4.88 ms, a row of them at a time 3.68 ms — the kernel
    // lives on occupancy, and workgroup memory bounds it.
    let cs = 16 + PAD32;
    let csz = 16 * cs;
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
                r0 = 16 * i,
                c0 = 16 * j,
            );
        }
    }
    // Staging: the next K step's share of each tile is fetched into
    // registers while this one is multiplied out of shared memory.
    let sa = stage(&mut bl, Operand::A, &a, &at, (bm, bk), (m, k), rb, threads);
    let sb = stage(&mut bl, Operand::B, &b, &bt, (bk, bn), (k, n), rb, threads);
    let setup = sa.setup + &sb.setup;
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
{setup}{init}{regs}for (var k0: u32 = kbeg; k0 < kend; k0 = k0 + {bk}u) {{
{to_shared}  workgroupBarrier();
  let kn = k0 + {bk}u;
{fetch}  for (var kk: u32 = 0u; kk < {bk}u; kk = kk + 16u) {{
{mma}  }}
  workgroupBarrier();
}}
{spill}}}
"#,
        asz = at.words(bm, bk),
        bsz = bt.words(bk, bn),
        csz = sh.wm * sh.wn * csz,
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
        assert_eq!(Shape::pick(1, 4096, 384, None), Shape::ALL[0].1);
        assert_eq!(Shape::pick(1, 4096, 1536, None), Shape::ALL[0].1);
        assert_eq!(Shape::pick(1, 128, 384, None), Shape::ALL[0].1);
        assert_eq!(Shape::pick(1, 4096, 4096, None), Shape::ALL[2].1);
        // A forced tile wins over the choice by shape; every name maps to its shape.
        for (i, t) in CoopTile::ALL.iter().enumerate() {
            assert_eq!(t.to_string(), Shape::ALL[i].0);
            assert_eq!(Shape::pick(1, 4096, 4096, Some(*t)), Shape::ALL[i].1);
        }
    }
}
