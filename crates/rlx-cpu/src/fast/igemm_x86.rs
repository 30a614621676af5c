//! The x86 register tiles of [`super::igemm`]: AVX-512 VNNI and AVX2.
#![allow(unsafe_code)]

use super::igemm::{Fix, Isa, Out};
use std::arch::x86_64::*;

pub fn has_vnni() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vnni")
}

/// Rows per register tile.
const MR_VNNI: usize = 8;
const MR_AVX2: usize = 4;
/// Columns per packed panel (one vector of i32 lanes).
const P_VNNI: usize = 16;
const P_AVX2: usize = 8;

/// Columns per register tile (two panels).
pub fn tile_cols(isa: Isa) -> usize {
    match isa {
        Isa::Vnni => 2 * P_VNNI,
        _ => 2 * P_AVX2,
    }
}

/// Columns `c0..c1` of every row (`c0` a multiple of [`tile_cols`]).
///
/// # Safety
/// `isa` is available; `b`/`wide` is the pack for that ISA of a K × n
/// matrix with K padded to `kp`; `a` holds `rows` rows of `kp` bytes;
/// `out` points at `rows × n` i32 that no other task writes in these columns.
#[allow(clippy::too_many_arguments)]
pub unsafe fn columns(
    isa: Isa,
    b: &[i8],
    wide: &[i16],
    a: &[u8],
    kp: usize,
    rows: usize,
    n: usize,
    c0: usize,
    c1: usize,
    fix: &Fix,
    out: Out,
) {
    let tc = tile_cols(isa);
    for c in (c0..c1).step_by(tc) {
        let two = c + tc / 2 < n;
        let mut r0 = 0;
        while r0 < rows {
            let left = rows - r0;
            match isa {
                Isa::Vnni => {
                    let p = b.as_ptr().add(c * kp);
                    macro_rules! t {
                        ($m:literal) => {
                            if two {
                                vnni::<$m, 2>(p, a, kp, r0, n, c, fix, out)
                            } else {
                                vnni::<$m, 1>(p, a, kp, r0, n, c, fix, out)
                            }
                        };
                    }
                    match left.min(MR_VNNI) {
                        8 => t!(8),
                        7 => t!(7),
                        6 => t!(6),
                        5 => t!(5),
                        4 => t!(4),
                        3 => t!(3),
                        2 => t!(2),
                        _ => t!(1),
                    }
                    r0 += left.min(MR_VNNI);
                }
                _ => {
                    let p = wide.as_ptr().add(c * kp);
                    macro_rules! t {
                        ($m:literal) => {
                            if two {
                                avx2::<$m, 2>(p, a, kp, r0, n, c, fix, out)
                            } else {
                                avx2::<$m, 1>(p, a, kp, r0, n, c, fix, out)
                            }
                        };
                    }
                    match left.min(MR_AVX2) {
                        4 => t!(4),
                        3 => t!(3),
                        2 => t!(2),
                        _ => t!(1),
                    }
                    r0 += left.min(MR_AVX2);
                }
            }
        }
    }
}

/// Lanes of columns `j..j + L` that exist (`j < n`).
fn valid(j: usize, n: usize, lanes: usize) -> usize {
    n.saturating_sub(j).min(lanes)
}

/// `M` rows × `NP` panels of 16 columns, starting at row `r0`, column `c`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn vnni<const M: usize, const NP: usize>(
    b: *const i8,
    a: &[u8],
    kp: usize,
    r0: usize,
    n: usize,
    c: usize,
    fix: &Fix,
    out: Out,
) {
    let stride = P_VNNI * kp;
    let ap = a.as_ptr().add(r0 * kp);
    let mut acc = [[_mm512_setzero_si512(); NP]; M];
    for k4 in 0..kp / 4 {
        let mut bv = [_mm512_setzero_si512(); NP];
        for (p, v) in bv.iter_mut().enumerate() {
            *v = _mm512_loadu_si512(b.add(p * stride + k4 * 64) as *const _);
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_epi32((ap.add(r * kp + 4 * k4) as *const i32).read_unaligned());
            for (v, w) in row.iter_mut().zip(&bv) {
                *v = _mm512_dpbusd_epi32(*v, av, *w);
            }
        }
    }
    // dot + zb·(K·za − Σa) − za·Σb, per lane.
    for (r, row) in acc.iter().enumerate() {
        let ri = r0 + r;
        let za = fix.za_of(ri);
        let f = _mm512_set1_epi32(fix.k.wrapping_mul(za).wrapping_sub(fix.row_sums[ri]));
        let zav = _mm512_set1_epi32(za);
        for (p, v) in row.iter().enumerate() {
            let j = c + p * P_VNNI;
            let zb = _mm512_loadu_si512(fix.zb.as_ptr().add(j) as *const _);
            let cs = _mm512_loadu_si512(fix.col_sums.as_ptr().add(j) as *const _);
            let y = _mm512_sub_epi32(
                _mm512_add_epi32(*v, _mm512_mullo_epi32(zb, f)),
                _mm512_mullo_epi32(zav, cs),
            );
            let lanes = valid(j, n, P_VNNI);
            let mask: __mmask16 = if lanes >= 16 { !0 } else { (1u16 << lanes) - 1 };
            match out {
                Out::I32(p) => _mm512_mask_storeu_epi32(p.add(ri * n + j) as *mut _, mask, y),
                Out::F32(p) => {
                    let s = _mm512_loadu_ps(fix.scale.unwrap_or(&[]).as_ptr().add(j));
                    let mut f = _mm512_mul_ps(_mm512_cvtepi32_ps(y), s);
                    if let Some(b) = fix.bias {
                        f = _mm512_add_ps(f, _mm512_loadu_ps(b.as_ptr().add(j)));
                    }
                    _mm512_mask_storeu_ps(p.add(ri * n + j), mask, f)
                }
            }
        }
    }
}

/// `M` rows × `NP` panels of 8 columns on AVX2 (16-bit pairs).
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn avx2<const M: usize, const NP: usize>(
    b: *const i16,
    a: &[u8],
    kp: usize,
    r0: usize,
    n: usize,
    c: usize,
    fix: &Fix,
    out: Out,
) {
    let stride = P_AVX2 * kp;
    let ap = a.as_ptr().add(r0 * kp);
    let mut acc = [[_mm256_setzero_si256(); NP]; M];
    for k2 in 0..kp / 2 {
        let mut bv = [_mm256_setzero_si256(); NP];
        for (p, v) in bv.iter_mut().enumerate() {
            *v = _mm256_loadu_si256(b.add(p * stride + k2 * 16) as *const _);
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let x = ap.add(r * kp + 2 * k2);
            let pair = (*x as i32) | ((*x.add(1) as i32) << 16);
            let av = _mm256_set1_epi32(pair);
            for (v, w) in row.iter_mut().zip(&bv) {
                *v = _mm256_add_epi32(*v, _mm256_madd_epi16(av, *w));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        let ri = r0 + r;
        let za = fix.za_of(ri);
        let f = _mm256_set1_epi32(fix.k.wrapping_mul(za).wrapping_sub(fix.row_sums[ri]));
        let zav = _mm256_set1_epi32(za);
        for (p, v) in row.iter().enumerate() {
            let j = c + p * P_AVX2;
            let zb = _mm256_loadu_si256(fix.zb.as_ptr().add(j) as *const _);
            let cs = _mm256_loadu_si256(fix.col_sums.as_ptr().add(j) as *const _);
            let y = _mm256_sub_epi32(
                _mm256_add_epi32(*v, _mm256_mullo_epi32(zb, f)),
                _mm256_mullo_epi32(zav, cs),
            );
            let lanes = valid(j, n, P_AVX2) as i32;
            let mask = _mm256_cmpgt_epi32(
                _mm256_set1_epi32(lanes),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            );
            match out {
                Out::I32(p) => _mm256_maskstore_epi32(p.add(ri * n + j), mask, y),
                Out::F32(p) => {
                    let s = _mm256_loadu_ps(fix.scale.unwrap_or(&[]).as_ptr().add(j));
                    let mut f = _mm256_mul_ps(_mm256_cvtepi32_ps(y), s);
                    if let Some(b) = fix.bias {
                        f = _mm256_add_ps(f, _mm256_loadu_ps(b.as_ptr().add(j)));
                    }
                    _mm256_maskstore_ps(p.add(ri * n + j), mask, f)
                }
            }
        }
    }
}
