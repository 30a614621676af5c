//! AVX-512 decode-and-dot of the k-quants (Q4_K, Q5_K, Q6_K) with f32
//! activations: [`super::qdot_x512`]'s path for these three types, a
//! super-block (256 values) at a time.
//!
//! Per super-block the 8 (Q6_K: 16) scales and the 8 mins are decoded
//! into one vector (`k_scales`); each sub-block's scale is spread from it
//! by one permute and multiplied into the 16-entry table of levels (Q4_K,
//! Q5_K: the levels come out of `vpermps` already scaled) or into the
//! converted levels (Q6_K), so a sub-block of 32 values costs two FMAs
//! with x and no scalar work. The min terms are one 8-lane FMA per
//! super-block (the 8 mins times the 8 sub-blocks' sums of x). The
//! per-sub-block path (`qdot_x512::unit`) spent about 20 operations per
//! 32 values, most of them scalar scale and min arithmetic. One Zen 5
//! thread, weights from memory (`examples/qmatmul.rs`, ms, per-sub-block →
//! this; both runs in benches/results/quant-kquant-kernels.md): 4864 × 896 Q4_K 0.21 → 0.14, Q5_K 0.24 → 0.24, Q6_K 0.23 →
//! 0.23; 896 × 4864 Q4_K 0.23 → 0.15, Q5_K 0.27 → 0.23, Q6_K 0.31 → 0.24;
//! 8192 × 2048 Q4_K 0.85 → 0.58, Q5_K 1.0 → 0.96, Q6_K 1.1 → 0.99. A
//! single row of x past 8192 values takes `qdot_x512`'s passes of four
//! weight rows instead: whole rows here, x no longer in L1, ran slower
//! (4096 × 14336 Q4_K 4.1–4.4 vs 2.7–3.6 ms), and passes over 4096 values
//! of x at a time slower still (each row's stretch a new page for the
//! prefetcher: Q6_K 11 ms).
//!
//! Same arithmetic as the other f32 kernels: each weight value is
//! `d·scale·q − dmin·min` exactly as the reference decodes it (the scale
//! products are rounded to f32 once, as there), multiplied with the f32
//! activations; results differ from dequantize-then-matmul only by the
//! order of f32 sums.
#![allow(unsafe_code)]

use super::qdot_x86::{block_bytes, f16, k_scale_bytes, Prepared, TYPES};
use rlx_ir::DType;
use std::arch::x86_64::*;

/// The 6-bit scales and mins of a Q4_K/Q5_K super-block (12 bytes at
/// `s`) as f32 lanes: 0–7 `d·scale_j`, 8–15 `dmin·min_j`.
#[inline(always)]
pub(super) unsafe fn k_scales(s: *const u8, d: f32, dmin: f32) -> __m512 {
    let [sc_lo, sc_hi, mn_lo, mn_hi] = k_scale_bytes(s);
    let v = _mm_setr_epi32(sc_lo, sc_hi, mn_lo, mn_hi);
    _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)),
        _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d), _mm512_set1_ps(dmin)),
    )
}

/// Lanes 8–15 of `v`.
#[inline(always)]
pub(super) unsafe fn high8(v: __m512) -> __m256 {
    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)))
}

/// 16 bytes at `p`, zero-extended to the 16 lanes.
#[inline(always)]
unsafe fn bytes16(p: *const u8) -> __m512i {
    _mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i))
}

/// Lane `i` of `v` in every lane.
#[inline(always)]
unsafe fn lane(v: __m512, i: i32) -> __m512 {
    _mm512_permutexvar_ps(_mm512_set1_epi32(i), v)
}

/// `out[r·ldo + j] = x[r] · w[j0 + j]` for the `M` rows of `x` (prepared
/// in natural order) and `cols` weight rows.
///
/// # Safety
/// AVX-512F, AVX2, FMA and F16C (`qdot_x512::available`); `D` a k-quant of
/// [`TYPES`]; `w` must hold rows `j0..j0 + cols` of `k / 256` super-blocks,
/// `x` m·k values and their block sums, `out` room for `(m − 1)·ldo + cols`.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemv<const M: usize, const D: u8>(
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    x: &Prepared,
    k: usize,
    out: &mut [f32],
    ldo: usize,
    cols: usize,
) {
    let d = TYPES[D as usize];
    debug_assert!(matches!(d, DType::Q4K | DType::Q5K | DType::Q6K));
    let (nb, bb) = (k / 32, block_bytes(d));
    // A single chain of FMAs per accumulator is latency-bound: with one
    // row, alternate sub-blocks take separate accumulators.
    let alternate = M == 1;
    let table = _mm512_setr_ps(
        0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
    );
    let low = _mm512_set1_epi32(0x0F);
    for j in 0..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        let mut acc = [[_mm512_setzero_ps(); 4]; M];
        let mut kmin = [_mm256_setzero_ps(); M];
        for sb in 0..k / 256 {
            let p = row.add(sb * bb);
            // The super-block's scales (and mins).
            let s = if d == DType::Q6K {
                let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(192) as *const __m128i));
                _mm512_mul_ps(_mm512_cvtepi32_ps(sc), _mm512_set1_ps(f16(p.add(208))))
            } else {
                k_scales(p.add(4), f16(p), f16(p.add(2)))
            };
            if d != DType::Q6K {
                for (r, km) in kmin.iter_mut().enumerate() {
                    let xs = _mm256_loadu_ps(x.sum.as_ptr().add(r * nb + 8 * sb));
                    *km = _mm256_fmadd_ps(high8(s), xs, *km);
                }
            }
            // Sub-block `$j` (0..8) of the super-block: its two halves'
            // levels, already scaled, into the accumulators.
            macro_rules! sub {
                ($j:literal) => {{
                    let v = decode::<$j>(d, p, s, table, low);
                    for r in 0..M {
                        let xp = x.x.as_ptr().add(r * k + sb * 256 + 32 * $j);
                        let (x0, x1) = (_mm512_loadu_ps(xp), _mm512_loadu_ps(xp.add(16)));
                        let a = if alternate { 2 * ($j % 2) } else { 0 };
                        acc[r][a] = _mm512_fmadd_ps(v[0], x0, acc[r][a]);
                        acc[r][a + 1] = _mm512_fmadd_ps(v[1], x1, acc[r][a + 1]);
                    }
                }};
            }
            sub!(0);
            sub!(1);
            sub!(2);
            sub!(3);
            sub!(4);
            sub!(5);
            sub!(6);
            sub!(7);
        }
        for r in 0..M {
            let [a0, a1, a2, a3] = acc[r];
            let total = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
            let m = _mm512_reduce_add_ps(_mm512_zextps256_ps512(kmin[r]));
            *out.get_unchecked_mut(r * ldo + j) = _mm512_reduce_add_ps(total) - m;
        }
    }
}

/// Sub-block `J` (32 values) of the super-block at `p` as two vectors of
/// f32 weights (elements 0–15, 16–31): levels times their scale; `s` the
/// super-block's scales ([`k_scales`], or Q6_K's 16 times d).
#[inline(always)]
unsafe fn decode<const J: usize>(
    d: DType,
    p: *const u8,
    s: __m512,
    table: __m512,
    low: __m512i,
) -> [__m512; 2] {
    match d {
        DType::Q4K | DType::Q5K => {
            // Sub-blocks 2g and 2g + 1 are the low and high nibbles of the
            // same 32 bytes.
            let qs = p.add(if d == DType::Q4K { 16 } else { 48 } + 32 * (J / 2));
            let (mut lo, mut hi) = (bytes16(qs), bytes16(qs.add(16)));
            if J % 2 == 1 {
                lo = _mm512_srli_epi32::<4>(lo);
                hi = _mm512_srli_epi32::<4>(hi);
            }
            let t = _mm512_mul_ps(table, lane(s, J as i32));
            if d == DType::Q4K {
                // vpermps reads only an index's low 4 bits: no mask needed.
                [_mm512_permutexvar_ps(lo, t), _mm512_permutexvar_ps(hi, t)]
            } else {
                // Levels 16–31 from a second table; the level's fifth bit
                // (bit J of qh's byte i for element i) picks it.
                let t16 = _mm512_mul_ps(
                    _mm512_add_ps(table, _mm512_set1_ps(16.0)),
                    lane(s, J as i32),
                );
                let bit = _mm512_set1_epi32(1 << J);
                let (h0, h1) = (bytes16(p.add(16)), bytes16(p.add(32)));
                let sixteen = _mm512_set1_epi32(16);
                let i0 = _mm512_and_si512(lo, low);
                let i1 = _mm512_and_si512(hi, low);
                let i0 = _mm512_mask_or_epi32(i0, _mm512_test_epi32_mask(h0, bit), i0, sixteen);
                let i1 = _mm512_mask_or_epi32(i1, _mm512_test_epi32_mask(h1, bit), i1, sixteen);
                [
                    _mm512_permutex2var_ps(t, i0, t16),
                    _mm512_permutex2var_ps(t, i1, t16),
                ]
            }
        }
        _ => {
            // Q6_K: half h = J / 4 of 128 values; quarter q = J % 4 takes
            // the low (q < 2) or high nibbles of ql[l] (q even) or
            // ql[l + 32] (q odd) and bits 2q, 2q + 1 of qh[l], l = 0..32.
            let (h, q) = (J / 4, J % 4);
            let ql = p.add(64 * h + 32 * (q % 2));
            let qh = p.add(128 + 32 * h);
            // A macro: a closure would not inherit the target features.
            macro_rules! level {
                ($l:expr) => {{
                    let b = bytes16(ql.add($l));
                    let nib = if q < 2 {
                        _mm512_and_si512(b, low)
                    } else {
                        _mm512_srli_epi32::<4>(b)
                    };
                    let hb = _mm512_and_si512(
                        _mm512_srl_epi32(bytes16(qh.add($l)), _mm_cvtsi32_si128(2 * q as i32)),
                        _mm512_set1_epi32(3),
                    );
                    let u = _mm512_or_si512(nib, _mm512_slli_epi32::<4>(hb));
                    _mm512_cvtepi32_ps(_mm512_sub_epi32(u, _mm512_set1_epi32(32)))
                }};
            }
            // Scales per 16 values: 2J and 2J + 1.
            [
                _mm512_mul_ps(level!(0), lane(s, 2 * J as i32)),
                _mm512_mul_ps(level!(16), lane(s, 2 * J as i32 + 1)),
            ]
        }
    }
}
