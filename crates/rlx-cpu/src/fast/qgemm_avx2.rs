//! The AVX2 register tile of [`super::qgemm`]: 4 activation rows × 8
//! weight rows (one half of a 16-row panel tile), `vpmaddubsw` (u8 × s8
//! pairs summed to i16) then `vpmaddwd` by ones (i16 pairs to i32) per
//! four values. The levels of Q4–Q6 (≤ 63) times |q| ≤ 127 keep a pair
//! within i16; Q8_0 (levels 0..255) goes as |w| × (x with w's sign),
//! ≤ 2·128·127.
#![allow(unsafe_code)]

use super::qdot_x86::has_min;
use super::qgemm::{group, signed_on_avx2, Panel, Rows, NR};
use rlx_ir::DType;
use std::arch::x86_64::*;

/// Activation rows per register tile (16 vector registers on AVX2).
pub(super) const MR: usize = 4;

/// `M` (≤ MR) rows of x from `r0` against half `h` (weight rows 8h..8h+8)
/// of register tile `t`: `dst[r][8h + j]`, for the tile's first `cols`
/// weight rows.
///
/// # Safety
/// AVX2, FMA; the tile and rows are in bounds, `dst[r]` has room for
/// `cols` values.
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const M: usize, const G: usize, const MIN: bool, const SIGNED: bool>(
    p: &Panel,
    t: usize,
    h: usize,
    xr: &Rows,
    r0: usize,
    k: usize,
    dst: &[*mut f32; super::qgemm::MR],
    cols: usize,
) {
    let (nb, ng) = (k / 32, k / G);
    let u = p.u.as_ptr().add(t * NR * k + 32 * h);
    let s = p.s.as_ptr().add(t * NR * ng + 8 * h);
    let min = p.min.as_ptr().add(t * NR * nb + 8 * h);
    let xq = xr.q.q.as_ptr().add(r0 * k);
    let xd = xr.q.d.as_ptr().add(r0 * nb);
    let xs = xr.q.sum.as_ptr().add(r0 * nb);
    let start = xr.start.as_ptr().add(r0 * ng);
    let ones = _mm256_set1_epi16(1);
    let flip = _mm256_set1_epi8(0x80u8 as i8);
    let mut acc = [_mm256_setzero_ps(); M];
    for g in 0..ng {
        let mut dot = [_mm256_setzero_si256(); M];
        for (r, v) in dot.iter_mut().enumerate() {
            *v = _mm256_set1_epi32(*start.add(r * ng + g));
        }
        for kk in 0..G / 4 {
            let at = g * G + 4 * kk;
            let wv = _mm256_loadu_si256(u.add(at * NR) as *const __m256i);
            // Q8_0's levels are its values + 128: back to signed.
            let ws = _mm256_xor_si256(wv, flip);
            let aw = if SIGNED { _mm256_sign_epi8(ws, ws) } else { wv };
            for (r, v) in dot.iter_mut().enumerate() {
                let xb = _mm256_set1_epi32((xq.add(r * k + at) as *const i32).read_unaligned());
                let xb = if SIGNED { _mm256_sign_epi8(xb, ws) } else { xb };
                let pairs = _mm256_maddubs_epi16(aw, xb);
                *v = _mm256_add_epi32(*v, _mm256_madd_epi16(pairs, ones));
            }
        }
        let b = g * G / 32;
        let sv = _mm256_loadu_ps(s.add(g * NR));
        for r in 0..M {
            let scale = _mm256_mul_ps(sv, _mm256_set1_ps(*xd.add(r * nb + b)));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), scale, acc[r]);
        }
        if MIN {
            let mv = _mm256_loadu_ps(min.add(b * NR));
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fnmadd_ps(mv, _mm256_set1_ps(*xs.add(r * nb + b)), *a);
            }
        }
    }
    let n = cols.saturating_sub(8 * h).min(8) as i32;
    let mask = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    for r in 0..M {
        _mm256_maskstore_ps(dst[r].add(8 * h), mask, acc[r]);
    }
}

/// [`tile`] for both halves of tile `t`, with the row count, group size,
/// min term and sign trick as constants.
///
/// # Safety
/// As [`tile`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tile_any(
    d: DType,
    rows: usize,
    p: &Panel,
    t: usize,
    xr: &Rows,
    r0: usize,
    k: usize,
    dst: &[*mut f32; super::qgemm::MR],
    cols: usize,
) {
    macro_rules! by_rows {
        ($g:literal, $min:literal, $signed:literal) => {
            for h in 0..cols.div_ceil(8) {
                match rows {
                    1 => tile::<1, $g, $min, $signed>(p, t, h, xr, r0, k, dst, cols),
                    2 => tile::<2, $g, $min, $signed>(p, t, h, xr, r0, k, dst, cols),
                    3 => tile::<3, $g, $min, $signed>(p, t, h, xr, r0, k, dst, cols),
                    _ => tile::<MR, $g, $min, $signed>(p, t, h, xr, r0, k, dst, cols),
                }
            }
        };
    }
    match (group(d), has_min(d), signed_on_avx2(d)) {
        (16, _, _) => by_rows!(16, false, false),
        (_, true, _) => by_rows!(32, true, false),
        (_, _, true) => by_rows!(32, false, true),
        _ => by_rows!(32, false, false),
    }
}
