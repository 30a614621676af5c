//! AVX2 integer decode-and-dot of the k-quants (Q4_K, Q5_K, Q6_K) with
//! 8-bit activations: [`super::qdot_x86::gemv_q8`]'s path for these three
//! types, a super-block (256 values) at a time — the CPUs without AVX-512
//! (AVX2 only: most laptops and desktops) decoding an LLM token.
//!
//! Per super-block the 8 scales and 8 mins (Q6_K: 16 scales) are decoded
//! into vectors once; a sub-block's scale is one `vpermps` from them, the
//! 8 min terms one FMA with the 8 sub-blocks' sums of x. The per-block
//! path (`qdot_x86::levels`) unpacked a 6-bit scale and min with scalar
//! code for every 32 values and kept the mins in a scalar chain. The
//! integer products are the same (`vpmaddubsw` + `vpmaddwd`, Q6_K's
//! signed levels as |q| × (x with q's sign)), so results agree with the
//! per-block kernel up to the order of f32 sums. One Zen 5 thread forced
//! onto this AVX2 kernel (`examples/qmatmul.rs --decode --one-weight`, ms,
//! per-block → this, two runs each; benches/results/quant-kquant-kernels.md): 4096 × 14336 Q4_K 2.55 → 1.93–2.00,
//! Q5_K 3.0–3.1 → 2.9–3.1, Q6_K 3.35 → 2.5–2.8; 4864 × 896 Q4_K
//! 0.15–0.23 → 0.15, Q5_K 0.22–0.27 → 0.14, Q6_K 0.33 → 0.14; 896 × 4864
//! Q4_K 0.17 → 0.13–0.15, Q5_K 0.20 → 0.18, Q6_K 0.22 → 0.17.
#![allow(unsafe_code)]

use super::qdot_x86::{block_bytes, f16, k_scale_bytes, Q8Rows, TYPES};
use rlx_ir::DType;
use std::arch::x86_64::*;

/// The 6-bit scales and mins of a Q4_K/Q5_K super-block (12 bytes at
/// `s`): `d·scale_j` and `dmin·min_j`, 8 lanes each.
#[inline(always)]
unsafe fn k_scales8(s: *const u8, d: f32, dmin: f32) -> (__m256, __m256) {
    let [sc_lo, sc_hi, mn_lo, mn_hi] = k_scale_bytes(s);
    let (sc, mn) = (
        _mm_setr_epi32(sc_lo, sc_hi, 0, 0),
        _mm_setr_epi32(mn_lo, mn_hi, 0, 0),
    );
    // (No closure here: it would not inherit the caller's target features.)
    (
        _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)),
            _mm256_set1_ps(d),
        ),
        _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)),
            _mm256_set1_ps(dmin),
        ),
    )
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
}

/// `out[r·ldo + j] = x[r] · w[j0 + j]` for the `M` rows of `xq` and `cols`
/// weight rows of `row_bytes` bytes each.
///
/// # Safety
/// AVX2, FMA and F16C (`qdot_x86::available`); `D` a k-quant of [`TYPES`];
/// `w` must hold rows `j0..j0 + cols` of `k / 256` super-blocks, `xq` m
/// rows of k values, `out` room for `(m − 1)·ldo + cols` values.
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemv_q8<const M: usize, const D: u8>(
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    xq: &Q8Rows,
    k: usize,
    out: &mut [f32],
    ldo: usize,
    cols: usize,
) {
    let d = TYPES[D as usize];
    debug_assert!(matches!(d, DType::Q4K | DType::Q5K | DType::Q6K));
    let (nb, bb) = (k / 32, block_bytes(d));
    let ones = _mm256_set1_epi16(1);
    let low = _mm256_set1_epi8(0x0F);
    let (xqp, xd, xs) = (xq.q.as_ptr(), xq.d.as_ptr(), xq.sum.as_ptr());
    for j in 0..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        // Two accumulators per row (even and odd sub-blocks): the FMA's
        // latency is longer than a sub-block's work.
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        let mut kmin = [_mm256_setzero_ps(); M];
        for sb in 0..nb / 8 {
            let p = row.add(sb * bb);
            // Sub-block `$j`'s levels `$q` (bytes, signed for Q6_K) with
            // their scale per 32-bit lane `$s`, into accumulator `$j % 2`.
            macro_rules! dot {
                ($j:literal, $q:expr, $s:expr) => {{
                    let (q, s) = ($q, $s);
                    let aw = if d == DType::Q6K {
                        _mm256_sign_epi8(q, q)
                    } else {
                        q
                    };
                    for r in 0..M {
                        let i = r * nb + 8 * sb + $j;
                        let x = _mm256_loadu_si256(xqp.add(32 * i) as *const __m256i);
                        // |w| · (x with w's sign) = w · x for Q6_K's signed levels.
                        let xs = if d == DType::Q6K {
                            _mm256_sign_epi8(x, q)
                        } else {
                            x
                        };
                        let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones);
                        let sc = _mm256_mul_ps(s, _mm256_broadcast_ss(&*xd.add(i)));
                        let a = &mut acc[r][$j % 2];
                        *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), sc, *a);
                    }
                }};
            }
            if d == DType::Q6K {
                let sc = _mm_loadu_si128(p.add(192) as *const __m128i);
                let dd = _mm256_set1_ps(f16(p.add(208)));
                let s = [
                    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), dd),
                    _mm256_mul_ps(
                        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(sc))),
                        dd,
                    ),
                ];
                // Sub-block j: half g = j / 4 (ql at 64g, qh at 128 + 32g),
                // quarter t = j % 4: low (t < 2) or high nibbles of ql[32·(t % 2)..],
                // bits 2t, 2t + 1 of qh; scales 2j, 2j + 1 (lanes 0–3, 4–7).
                macro_rules! six {
                    ($j:literal) => {{
                        let (g, t) = ($j / 4, $j % 4);
                        let ql = _mm256_loadu_si256(p.add(64 * g + 32 * (t % 2)) as *const __m256i);
                        let lo = _mm256_and_si256(
                            if t < 2 {
                                ql
                            } else {
                                _mm256_srli_epi16::<4>(ql)
                            },
                            low,
                        );
                        let qh = _mm256_loadu_si256(p.add(128 + 32 * g) as *const __m256i);
                        let hi = _mm256_and_si256(
                            _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * t as i32)),
                            _mm256_set1_epi8(3),
                        );
                        let q = _mm256_sub_epi8(
                            _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hi)),
                            _mm256_set1_epi8(32),
                        );
                        let (a, b) = (2 * ($j % 4), 2 * ($j % 4) + 1);
                        let idx = _mm256_setr_epi32(a, a, a, a, b, b, b, b);
                        dot!($j, q, _mm256_permutevar8x32_ps(s[$j / 4], idx));
                    }};
                }
                six!(0);
                six!(1);
                six!(2);
                six!(3);
                six!(4);
                six!(5);
                six!(6);
                six!(7);
            } else {
                let (sc, mn) = k_scales8(p.add(4), f16(p), f16(p.add(2)));
                for (r, km) in kmin.iter_mut().enumerate() {
                    let sums = _mm256_loadu_ps(xs.add(r * nb + 8 * sb));
                    *km = _mm256_fmadd_ps(mn, sums, *km);
                }
                let qs = p.add(if d == DType::Q4K { 16 } else { 48 });
                let qh = _mm256_loadu_si256(p.add(16) as *const __m256i);
                // Sub-block j: the low (j even) or high nibbles of 32 bytes
                // at 32·(j / 2); Q5_K's fifth bit is bit j of qh's byte.
                macro_rules! four {
                    ($j:literal) => {{
                        let raw = _mm256_loadu_si256(qs.add(32 * ($j / 2)) as *const __m256i);
                        let mut q = _mm256_and_si256(
                            if $j % 2 == 0 {
                                raw
                            } else {
                                _mm256_srli_epi16::<4>(raw)
                            },
                            low,
                        );
                        if d == DType::Q5K {
                            // Bit j of each byte to bit 4 (16-bit shifts: what
                            // crosses bytes lands outside bit 4).
                            let h = if $j <= 4 {
                                _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - $j))
                            } else {
                                _mm256_srl_epi16(qh, _mm_cvtsi32_si128($j - 4))
                            };
                            q = _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
                        }
                        dot!($j, q, _mm256_permutevar8x32_ps(sc, _mm256_set1_epi32($j)));
                    }};
                }
                four!(0);
                four!(1);
                four!(2);
                four!(3);
                four!(4);
                four!(5);
                four!(6);
                four!(7);
            }
        }
        for r in 0..M {
            let total = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
            *out.get_unchecked_mut(r * ldo + j) = total - hsum(kmin[r]);
        }
    }
}
