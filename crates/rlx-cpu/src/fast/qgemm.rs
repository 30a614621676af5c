//! Many rows with 8-bit activations: the integer GEMM of
//! [`super::qmatmul`]'s `q8` path (a prompt, a batch of sentences), on
//! AVX-512 VNNI or AVX2 ([`Isa`]).
//!
//! Every weight type here is `w = s·(u − o) − min` per group of 16 or 32
//! values: `u` an unsigned level (a nibble, 5 or 6 bits, or Q8_0's byte
//! plus 128), `o` the type's offset, `s` the group's scale. Activations are
//! rounded per 32 values (`x ≈ dx·q`, [`quantize_rows`]), so
//!
//! `Σ w·x ≈ dx·s·(Σ u·q − o·Σ q) − min·Σ x`
//!
//! `Σ u·q` is `vpdpbusd` (u8 × s8, four products per 32-bit lane) on
//! VNNI, `vpmaddubsw` + `vpmaddwd` on AVX2 ([`super::qgemm_avx2`]); its
//! accumulator starts at `−o·Σ q` (per activation row and group, made once),
//! and the group's float scale is applied once per 16 or 32 values. The
//! min term uses the exact f32 sums of x, as the few-rows kernel does.
//! (On AVX2 a pair of u8 × s8 products must fit an i16: the levels of
//! Q4–Q6 do, Q8_0's 0..255 do not, so Q8_0 is multiplied as |q| × (x with
//! q's sign) there, with no offset.)
//!
//! Weights are unpacked per call, `NR` rows at a time, into their levels
//! in the order the kernel reads them (`[k / 4][NR][4]` bytes, one 64-byte
//! vector per four values of sixteen rows) with their scales; a task
//! unpacks a panel of a few such tiles (in L2) and runs every row of x
//! through it, `MR` rows per register tile.
#![allow(unsafe_code)]

use super::par;
use super::qdot_x86::{has_min, levels, quantize_rows, Q8Rows};
use rlx_ir::DType;
use std::arch::x86_64::*;

/// Weight rows per register tile: one vector of 16 lanes (two on AVX2).
pub(super) const NR: usize = 16;
/// Activation rows per register tile (two vectors each: i32 and f32).
pub(super) const MR: usize = 8;
/// Register tiles of weight rows a task unpacks at once.
const PANEL_TILES: usize = 8;

/// The instruction set a GEMM runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 VNNI: `vpdpbusd`, 8 × 16 register tiles.
    Vnni,
    /// AVX2: `vpmaddubsw` + `vpmaddwd`, 4 × 8 register tiles.
    Avx2,
}

impl Isa {
    /// Whether this CPU has it.
    pub fn available(self) -> bool {
        let avx2 = super::qdot_x86::available();
        match self {
            Isa::Avx2 => avx2,
            Isa::Vnni => {
                avx2 && std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vnni")
            }
        }
    }

    /// Every one this CPU has, best first.
    pub fn all() -> Vec<Isa> {
        [Isa::Vnni, Isa::Avx2]
            .into_iter()
            .filter(|i| i.available())
            .collect()
    }

    /// The best this CPU has.
    pub fn best() -> Option<Isa> {
        [Isa::Vnni, Isa::Avx2].into_iter().find(|i| i.available())
    }

    /// For the dispatch report.
    pub fn describe(self) -> &'static str {
        match self {
            Isa::Vnni => "AVX-512 VNNI integer GEMM",
            Isa::Avx2 => "AVX2 integer GEMM",
        }
    }
}

/// Whether `d` has this kernel.
pub fn handles(d: DType) -> bool {
    matches!(
        d,
        DType::Q4_0
            | DType::Q4_1
            | DType::Q5_0
            | DType::Q8_0
            | DType::Q4K
            | DType::Q5K
            | DType::Q6K
    )
}

/// The level offset `o` of `d` (w = s·(u − o) − min).
pub(super) fn offset(d: DType) -> i32 {
    match d {
        DType::Q4_0 => 8,
        DType::Q5_0 => 16,
        DType::Q8_0 => 128,
        DType::Q6K => 32,
        _ => 0,
    }
}

/// Values per scale: Q6_K has one per 16, the rest one per 32.
pub(super) fn group(d: DType) -> usize {
    if d == DType::Q6K {
        16
    } else {
        32
    }
}

/// A panel of unpacked weight rows: `tiles` register tiles of `NR` rows.
pub(super) struct Panel {
    /// Levels, per tile `[k / 4][NR][4]`.
    pub u: Vec<u8>,
    /// Scales, per tile `[k / group][NR]`.
    pub s: Vec<f32>,
    /// Min terms, per tile `[k / 32][NR]` (types with one).
    pub min: Vec<f32>,
}

/// Unpacks weight rows `j0..j0 + rows` (`rows` ≤ tiles·NR; missing rows
/// of the last tile are zero) of `k / 32` blocks each.
///
/// # Safety
/// AVX2 ([`Isa::available`]); `w` holds the rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack(
    d: DType,
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    rows: usize,
    k: usize,
    p: &mut Panel,
) {
    let (nb, g) = (k / 32, group(d));
    let tiles = rows.div_ceil(NR);
    p.u.clear();
    p.u.resize(tiles * NR * k, 0);
    p.s.clear();
    p.s.resize(tiles * NR * (k / g), 0.0);
    p.min.clear();
    p.min.resize(tiles * NR * nb, 0.0);
    let to_u = _mm256_set1_epi8(offset(d) as u8 as i8);
    let mut bytes = [0u32; 8];
    for r in 0..rows {
        let (t, lane) = (r / NR, r % NR);
        let row = w.as_ptr().add((j0 + r) * row_bytes);
        let u = p.u.as_mut_ptr().add(t * NR * k) as *mut u32;
        let s = p.s.as_mut_ptr().add(t * NR * (k / g));
        let min = p.min.as_mut_ptr().add(t * NR * nb);
        for b in 0..nb {
            let (q, signed, s_lo, s_hi, mn) = levels(d, row, b);
            let q = if signed { _mm256_add_epi8(q, to_u) } else { q };
            _mm256_storeu_si256(bytes.as_mut_ptr() as *mut __m256i, q);
            for (kk, v) in bytes.iter().enumerate() {
                *u.add((b * 8 + kk) * NR + lane) = *v;
            }
            if g == 16 {
                *s.add(2 * b * NR + lane) = s_lo;
                *s.add((2 * b + 1) * NR + lane) = s_hi;
            } else {
                *s.add(b * NR + lane) = s_lo;
            }
            *min.add(b * NR + lane) = mn;
        }
    }
}

/// Activation rows: the rounded values with, per row and scale group,
/// `−o·Σ q` (the accumulator's start).
pub(super) struct Rows {
    pub q: Q8Rows,
    pub start: Vec<i32>,
}

/// Whether AVX2 multiplies `d` with the sign trick (levels over 127).
pub(super) fn signed_on_avx2(d: DType) -> bool {
    d == DType::Q8_0
}

fn rows_for(d: DType, isa: Isa, x: &[f32], m: usize, k: usize) -> Rows {
    // Rows in parallel chunks (at 2 threads a serial pass was about a
    // tenth of a 512 × 2048 × 2048 product), then joined.
    let per = par::chunk_len(m, 1, 16);
    let mut parts: Vec<Option<Q8Rows>> = (0..m.div_ceil(per)).map(|_| None).collect();
    par::for_chunks(&mut parts, 1, |ci, part| {
        let r0 = ci * per;
        let rows = per.min(m - r0);
        part[0] = Some(quantize_rows(&x[r0 * k..(r0 + rows) * k], rows, k));
    });
    let mut q = Q8Rows {
        d: Vec::with_capacity(m * k / 32),
        q: Vec::with_capacity(m * k),
        sum: Vec::with_capacity(m * k / 32),
    };
    for p in parts.into_iter().flatten() {
        q.d.extend_from_slice(&p.d);
        q.q.extend_from_slice(&p.q);
        q.sum.extend_from_slice(&p.sum);
    }
    let o = if isa == Isa::Avx2 && signed_on_avx2(d) {
        0
    } else {
        offset(d)
    };
    let start =
        q.q.chunks_exact(group(d))
            .map(|c| -o * c.iter().map(|&v| v as i32).sum::<i32>())
            .collect();
    Rows { q, start }
}

/// `M` (≤ MR) rows of x from `r0` against one register tile of weights:
/// `dst[r][j]` = row r0 + r of x · weight row j of the tile, for the
/// first `cols` weight rows (stored straight from the registers).
///
/// # Safety
/// VNNI ([`Isa::available`]); the tile and rows are in bounds, `dst[r]` has room for
/// `cols` (≤ NR) values.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
unsafe fn tile<const M: usize, const G: usize, const MIN: bool>(
    p: &Panel,
    t: usize,
    xr: &Rows,
    r0: usize,
    k: usize,
    dst: &[*mut f32; MR],
    cols: usize,
) {
    let (nb, ng) = (k / 32, k / G);
    let u = p.u.as_ptr().add(t * NR * k);
    let s = p.s.as_ptr().add(t * NR * ng);
    let min = p.min.as_ptr().add(t * NR * nb);
    let xq = xr.q.q.as_ptr().add(r0 * k);
    let xd = xr.q.d.as_ptr().add(r0 * nb);
    let xs = xr.q.sum.as_ptr().add(r0 * nb);
    let start = xr.start.as_ptr().add(r0 * ng);
    let mut acc = [_mm512_setzero_ps(); M];
    for g in 0..ng {
        let mut dot = [_mm512_setzero_si512(); M];
        for (r, v) in dot.iter_mut().enumerate() {
            *v = _mm512_set1_epi32(*start.add(r * ng + g));
        }
        for kk in 0..G / 4 {
            let at = g * G + 4 * kk;
            let wv = _mm512_loadu_si512(u.add(at * NR) as *const _);
            for (r, v) in dot.iter_mut().enumerate() {
                let xv = (xq.add(r * k + at) as *const i32).read_unaligned();
                *v = _mm512_dpbusd_epi32(*v, wv, _mm512_set1_epi32(xv));
            }
        }
        let b = g * G / 32;
        let sv = _mm512_loadu_ps(s.add(g * NR));
        for r in 0..M {
            let scale = _mm512_mul_ps(sv, _mm512_set1_ps(*xd.add(r * nb + b)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r]), scale, acc[r]);
        }
        if MIN {
            let mv = _mm512_loadu_ps(min.add(b * NR));
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fnmadd_ps(mv, _mm512_set1_ps(*xs.add(r * nb + b)), *a);
            }
        }
    }
    let mask: __mmask16 = if cols >= NR { !0 } else { (1u16 << cols) - 1 };
    for r in 0..M {
        _mm512_mask_storeu_ps(dst[r], mask, acc[r]);
    }
}

/// [`tile`] with its row count, group size and min term as constants.
///
/// # Safety
/// As [`tile`].
#[allow(clippy::too_many_arguments)]
unsafe fn tile_any(
    d: DType,
    rows: usize,
    p: &Panel,
    t: usize,
    xr: &Rows,
    r0: usize,
    k: usize,
    dst: &[*mut f32; MR],
    cols: usize,
) {
    macro_rules! by_rows {
        ($g:literal, $min:literal) => {
            match rows {
                1 => tile::<1, $g, $min>(p, t, xr, r0, k, dst, cols),
                2 => tile::<2, $g, $min>(p, t, xr, r0, k, dst, cols),
                3 => tile::<3, $g, $min>(p, t, xr, r0, k, dst, cols),
                4 => tile::<4, $g, $min>(p, t, xr, r0, k, dst, cols),
                5 => tile::<5, $g, $min>(p, t, xr, r0, k, dst, cols),
                6 => tile::<6, $g, $min>(p, t, xr, r0, k, dst, cols),
                7 => tile::<7, $g, $min>(p, t, xr, r0, k, dst, cols),
                _ => tile::<MR, $g, $min>(p, t, xr, r0, k, dst, cols),
            }
        };
    }
    match (group(d), has_min(d)) {
        (16, _) => by_rows!(16, false),
        (_, true) => by_rows!(32, true),
        _ => by_rows!(32, false),
    }
}

/// `out (m × n) = x (m × k) · wᵀ` for `w` (n × k, rows of `row_bytes`) of
/// type `d` ([`handles`]), activations rounded to 8 bits per 32 values.
///
/// # Safety
/// `isa` available; `k` a multiple of 32 (of 256 for k-quants), `w` holds
/// `n` rows, `x` m·k values, `out` m·n.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm(
    isa: Isa,
    d: DType,
    w: &[u8],
    row_bytes: usize,
    x: &[f32],
    m: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
) {
    let xr = rows_for(d, isa, x, m, k);
    let tiles = n.div_ceil(NR);
    // At least two tasks per thread so that a thread finishing early
    // takes more; at most PANEL_TILES tiles each (the panel stays in L2).
    let tasks = tiles
        .div_ceil(PANEL_TILES)
        .max(2 * par::threads())
        .min(tiles);
    let per = tiles.div_ceil(tasks);
    let tasks = tiles.div_ceil(per);
    let mr_max = match isa {
        Isa::Vnni => MR,
        Isa::Avx2 => super::qgemm_avx2::MR,
    };
    let dst = par::Disjoint::new(&mut out[..m * n]);
    par::for_each(tasks, |task| {
        let j0 = task * per * NR;
        let rows = (per * NR).min(n - j0);
        let mut p = Panel {
            u: Vec::new(),
            s: Vec::new(),
            min: Vec::new(),
        };
        // SAFETY: the caller checked the CPU and the sizes.
        unsafe { unpack(d, w, row_bytes, j0, rows, k, &mut p) };
        for r0 in (0..m).step_by(mr_max) {
            let mr = mr_max.min(m - r0);
            for t in 0..rows.div_ceil(NR) {
                let c0 = j0 + t * NR;
                let cols = NR.min(n - c0);
                let mut ptrs = [std::ptr::null_mut(); MR];
                for (r, p) in ptrs.iter_mut().enumerate().take(mr) {
                    let at = (r0 + r) * n + c0;
                    // SAFETY: this task alone writes columns
                    // j0..j0 + rows of every row.
                    *p = unsafe { dst.range(at..at + cols) }.as_mut_ptr();
                }
                // SAFETY: as above; tile t and rows r0..r0 + mr exist,
                // each pointer has room for `cols` values.
                unsafe {
                    match isa {
                        Isa::Vnni => tile_any(d, mr, &p, t, &xr, r0, k, &ptrs, cols),
                        Isa::Avx2 => {
                            super::qgemm_avx2::tile_any(d, mr, &p, t, &xr, r0, k, &ptrs, cols)
                        }
                    }
                }
            }
        }
    });
}
