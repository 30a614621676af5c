//! AVX-512 VNNI decode-and-dot with 8-bit activations: the few-rows path
//! of [`super::qmatmul`]'s `q8` option (a decode step of an LLM) where the
//! CPU has AVX-512 VNNI; [`super::qdot_x86::gemv_q8`] is the AVX2 one.
//!
//! The arithmetic is [`super::qgemm`]'s: `w = s·(u − o) − min` per group,
//! activations `x ≈ dx·q` per 32 values, and
//!
//! `Σ w·x ≈ dx·s·(Σ u·q − o·Σ q) − min·Σ x`.
//!
//! Here one 512-bit vector holds the levels of two 32-value groups of one
//! weight row (64 values, a "pair"), decoded in registers from the GGUF
//! bytes; one `vpdpbusd` multiplies them with the 64 activation bytes, and
//! for the types with an offset a second one, of `o` and the same bytes,
//! gives `o·Σ q` to subtract, so each 32-bit lane holds `Σ (u − o)·q` of
//! four values of one group. The lanes are converted to f32 once per pair
//! and scaled by their group's weight scale times its activation scale
//! (both spread to the lanes by one permute). The activations take k
//! bytes and k / 8 bytes of scales per row: a long row (K = 14336, a
//! feed-forward down projection) stays in L1 beside the streaming weights.
//! (A first version kept `−o·Σ q` and the scales per lane in memory, 3k
//! bytes a row: at K = 14336 it ran at half the AVX2 kernel's speed, every
//! activation load missing L1.)
//!
//! Where one group's bytes are 16 nibble bytes (Q4_0, Q4_1, Q5_0), a pair
//! is `[a 0–15, b 0–15, a 16–31, b 16–31]` (the low and the high nibbles of
//! both blocks' bytes), and the activations are permuted to that order once
//! per call ([`element`]); the k-quants and Q8_0 are in natural order.
#![allow(unsafe_code)]

use super::qdot_x512k::{high8, k_scales};
use super::qdot_x86::{block_bytes, f16, Q8Rows, TYPES};
use super::qgemm::offset;
use rlx_ir::DType;
use std::arch::x86_64::*;

/// Whether this CPU runs these kernels.
pub fn available() -> bool {
    super::qgemm::Isa::Vnni.available()
}

/// Whether a pair of `d` holds its two blocks' nibble bytes interleaved.
fn interleaved(d: DType) -> bool {
    matches!(d, DType::Q4_0 | DType::Q4_1 | DType::Q5_0)
}

/// The element (0..64) of a pair that byte `p` of its vector holds.
fn element(d: DType, p: usize) -> usize {
    if interleaved(d) {
        let (lane, i) = (p / 16, p % 16);
        32 * (lane % 2) + 16 * (lane / 2) + i
    } else {
        p
    }
}

/// The activations of one call, prepared once for every weight row:
/// rows of `kp` (k rounded up to a pair, zero-padded) bytes in the pairs'
/// order, and each 32 values' scale (rows of kp / 32).
pub struct Prepared {
    q: Vec<i8>,
    dx: Vec<f32>,
    /// Each 32 values' exact f32 sum (rows of k / 32), for the min terms.
    sum: Vec<f32>,
    kp: usize,
}

/// Prepares `m` rows of `k` values rounded to 8 bits ([`Q8Rows`]) for
/// [`gemv`] on `d`.
pub fn prepare(d: DType, xq: Q8Rows, m: usize, k: usize) -> Prepared {
    let kp = k.next_multiple_of(64);
    if kp == k && !interleaved(d) {
        // Already in the pairs' order with no padding (the k-quants, Q8_0
        // on an even block count): the rounded rows as they are.
        return Prepared {
            q: xq.q,
            dx: xq.d,
            sum: xq.sum,
            kp,
        };
    }
    let (nb, nbp) = (k / 32, kp / 32);
    let order: [usize; 64] = std::array::from_fn(|p| element(d, p));
    let mut q = vec![0i8; m * kp];
    let mut dx = vec![0.0f32; m * nbp];
    for r in 0..m {
        dx[r * nbp..r * nbp + nb].copy_from_slice(&xq.d[r * nb..(r + 1) * nb]);
        for pair in 0..kp / 64 {
            let at = r * kp + 64 * pair;
            for (pos, &e) in order.iter().enumerate() {
                let v = 64 * pair + e;
                if v < k {
                    q[at + pos] = xq.q[r * k + v];
                }
            }
        }
    }
    Prepared {
        q,
        dx,
        sum: xq.sum,
        kp,
    }
}

/// Blocks `b` and `b + 1` (`b` alone when `one`: the last block of an odd
/// count) of a 32-value type: 64 levels in [`element`]'s order, and the
/// two blocks' scales and min terms (Q4_1's m) as lanes `[s_b, s_b+1, m_b,
/// m_b+1]` (one f16 conversion for all four).
#[inline(always)]
unsafe fn pair32(d: DType, row: *const u8, b: usize, one: bool) -> (__m512i, __m128) {
    let bb = block_bytes(d);
    let pa = row.add(b * bb);
    let pb = pa.add(bb);
    let half = |p: *const u8, at: usize| (p.add(at) as *const u16).read_unaligned() as u32;
    let (sb, mb) = if one {
        (0, 0)
    } else {
        (half(pb, 0), if d == DType::Q4_1 { half(pb, 2) } else { 0 })
    };
    let ma = if d == DType::Q4_1 { half(pa, 2) } else { 0 };
    let scales = _mm_cvtph_ps(_mm_setr_epi32(
        (half(pa, 0) | sb << 16) as i32,
        (ma | mb << 16) as i32,
        0,
        0,
    ));
    if d == DType::Q8_0 {
        let lo = _mm256_loadu_si256(pa.add(2) as *const __m256i);
        let hi = if one {
            _mm256_setzero_si256()
        } else {
            _mm256_loadu_si256(pb.add(2) as *const __m256i)
        };
        // u = q + 128 (offset 128): signed bytes as vpdpbusd's unsigned side.
        let u = _mm512_xor_si512(
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi),
            _mm512_set1_epi8(-128),
        );
        return (u, scales);
    }
    let qoff = bb - 16;
    let lo = _mm_loadu_si128(pa.add(qoff) as *const __m128i);
    let hi = if one {
        _mm_setzero_si128()
    } else {
        _mm_loadu_si128(pb.add(qoff) as *const __m128i)
    };
    let y = _mm256_set_m128i(hi, lo);
    let z = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y), _mm256_srli_epi16::<4>(y));
    let mut u = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
    if d == DType::Q5_0 {
        // The fifth bits: element e of a block is bit e of its qh.
        let ha = (pa.add(2) as *const u32).read_unaligned() as u64;
        let hb = if one {
            0
        } else {
            (pb.add(2) as *const u32).read_unaligned() as u64
        };
        let bits = (ha & 0xFFFF) | (hb & 0xFFFF) << 16 | (ha >> 16) << 32 | (hb >> 16) << 48;
        u = _mm512_mask_add_epi8(u, bits, u, _mm512_set1_epi8(16));
    }
    (u, scales)
}

/// `out[r·ldo + j] = x[r] · w[j0 + j]` for the `M` rows of `x` and `cols`
/// weight rows of `row_bytes` bytes each.
///
/// # Safety
/// VNNI ([`available`]); `w` must hold rows `j0..j0 + cols` of `k / 32`
/// blocks of `d` (k a multiple of 256 for the k-quants), `x` the m rows of
/// k values prepared for `d`, `out` room for `(m − 1)·ldo + cols` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemv<const M: usize, const D: u8>(
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    x: &Prepared,
    k: usize,
    out: &mut [f32],
    ldo: usize,
    cols: usize,
) {
    // A constant: every per-type branch below folds away.
    let d = TYPES[D as usize];
    let nb = k / 32;
    let kp = x.kp;
    let nbp = kp / 32;
    let o = offset(d);
    let ov = _mm512_set1_epi8(o as i8);
    let (xq, dx, sum) = (x.q.as_ptr(), x.dx.as_ptr(), x.sum.as_ptr());
    let low = _mm512_set1_epi8(0x0F);
    // The lanes of each of a pair's two groups, for spreading per-group scales.
    let spread = if interleaved(d) {
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1)
    } else {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
    };
    for j in 0..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        // Two accumulators per row (even and odd pairs): the FMA's latency
        // is longer than a pair's work.
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let mut mins = [[_mm_setzero_ps(); 2]; M];
        let mut kmins = [_mm256_setzero_ps(); M];
        // Pair `$p` of every row `$r`: levels `$u`, the scale per lane
        // (weight's times activations') `$s`.
        macro_rules! dot {
            ($u:expr, $r:ident => $s:expr, $p:expr, $parity:literal) => {{
                let (u, p) = ($u, $p);
                for $r in 0..M {
                    let qv = _mm512_loadu_si512(xq.add($r * kp + 64 * p) as *const _);
                    let mut sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, qv);
                    if o != 0 {
                        let oq = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ov, qv);
                        sums = _mm512_sub_epi32(sums, oq);
                    }
                    let a = &mut acc[$r][$parity];
                    *a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), $s, *a);
                }
            }};
        }
        match d {
            DType::Q4K | DType::Q5K => {
                let bb = block_bytes(d);
                for sb in 0..nb / 8 {
                    let p = row.add(sb * bb);
                    let f = k_scales(p.add(4), f16(p), f16(p.add(2)));
                    let (fs, fm) = (_mm512_castps512_ps256(f), high8(f));
                    // Per row: the 8 sub-blocks' weight scales times their
                    // activation scales (lanes 0–7).
                    let mut sdx = [_mm512_setzero_ps(); M];
                    for (r, km) in kmins.iter_mut().enumerate() {
                        let xs = _mm256_loadu_ps(sum.add(r * nb + 8 * sb));
                        *km = _mm256_fmadd_ps(fm, xs, *km);
                        let xd = _mm256_loadu_ps(dx.add(r * nbp + 8 * sb));
                        sdx[r] = _mm512_castps256_ps512(_mm256_mul_ps(fs, xd));
                    }
                    let qs = p.add(if d == DType::Q4K { 16 } else { 48 });
                    let qh = if d == DType::Q5K {
                        let h = _mm256_loadu_si256(p.add(16) as *const __m256i);
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(h),
                            _mm256_srli_epi16::<1>(h),
                        )
                    } else {
                        _mm512_setzero_si512()
                    };
                    // Group g's 32 bytes: low nibbles are sub-block 2g, high
                    // nibbles 2g + 1; Q5_K's fifth bits are bits 2g, 2g + 1 of qh.
                    macro_rules! group {
                        ($g:literal, $par:literal) => {{
                            let y = _mm256_loadu_si256(qs.add(32 * $g) as *const __m256i);
                            let z = _mm512_inserti64x4::<1>(
                                _mm512_castsi256_si512(y),
                                _mm256_srli_epi16::<4>(y),
                            );
                            let mut u = _mm512_and_si512(z, low);
                            if d == DType::Q5K {
                                // Bit 2g of each byte to bit 4 (16-bit shifts:
                                // what crosses bytes lands outside bit 4).
                                let h = if 2 * $g <= 4 {
                                    _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - 2 * $g))
                                } else {
                                    _mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * $g - 4))
                                };
                                u = _mm512_or_si512(u, _mm512_and_si512(h, _mm512_set1_epi8(0x10)));
                            }
                            let idx = _mm512_setr_epi32(
                                2 * $g, 2 * $g, 2 * $g, 2 * $g, 2 * $g, 2 * $g, 2 * $g, 2 * $g,
                                2 * $g + 1, 2 * $g + 1, 2 * $g + 1, 2 * $g + 1, 2 * $g + 1,
                                2 * $g + 1, 2 * $g + 1, 2 * $g + 1,
                            );
                            dot!(u, r => _mm512_permutexvar_ps(idx, sdx[r]), 4 * sb + $g, $par);
                        }};
                    }
                    group!(0, 0);
                    group!(1, 1);
                    group!(2, 0);
                    group!(3, 1);
                }
            }
            DType::Q6K => {
                for sb in 0..nb / 8 {
                    let p = row.add(sb * 210);
                    let sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                        p.add(192) as *const __m128i
                    )));
                    let f = _mm512_mul_ps(sc, _mm512_set1_ps(f16(p.add(208))));
                    // Per row: the 16 scales (one per 16 values) times the
                    // activation scale of their 32 (lane i: block i / 2).
                    let mut sdx = [_mm512_setzero_ps(); M];
                    for (r, v) in sdx.iter_mut().enumerate() {
                        let xd = _mm256_loadu_ps(dx.add(r * nbp + 8 * sb));
                        let xd = _mm512_permutexvar_ps(
                            _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                            _mm512_castps256_ps512(xd),
                        );
                        *v = _mm512_mul_ps(f, xd);
                    }
                    // Half h: 64 bytes of low 4 bits, 32 of high 2 bits;
                    // its first pair takes the low nibbles and qh bits 0–1
                    // (elements 0–31) and 2–3 (32–63), its second the high
                    // nibbles and bits 4–5, 6–7.
                    macro_rules! half {
                        ($h:literal) => {{
                            let l = _mm512_loadu_si512(p.add(64 * $h) as *const _);
                            let h32 = _mm256_loadu_si256(p.add(128 + 32 * $h) as *const __m256i);
                            let hh = _mm512_inserti64x4::<1>(
                                _mm512_castsi256_si512(h32),
                                _mm256_srli_epi16::<2>(h32),
                            );
                            let top = _mm512_set1_epi8(0x30);
                            let u0 = _mm512_or_si512(
                                _mm512_and_si512(l, low),
                                _mm512_and_si512(_mm512_slli_epi16::<4>(hh), top),
                            );
                            let u1 = _mm512_or_si512(
                                _mm512_and_si512(_mm512_srli_epi16::<4>(l), low),
                                _mm512_and_si512(hh, top),
                            );
                            // Lane i of pair P holds values 64P + 4i..: scale 4P + i/4.
                            macro_rules! scales {
                                ($p:expr) => {{
                                    let b = 4 * $p;
                                    _mm512_setr_epi32(
                                        b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 2, b + 2,
                                        b + 2, b + 2, b + 3, b + 3, b + 3, b + 3,
                                    )
                                }};
                            }
                            let (i0, i1) = (scales!(2 * $h), scales!(2 * $h + 1));
                            dot!(u0, r => _mm512_permutexvar_ps(i0, sdx[r]), 4 * sb + 2 * $h, 0);
                            dot!(u1, r => _mm512_permutexvar_ps(i1, sdx[r]), 4 * sb + 2 * $h + 1, 1);
                        }};
                    }
                    half!(0);
                    half!(1);
                }
            }
            _ => {
                // Pair `$pr` (blocks 2·pr, 2·pr + 1, or the last block
                // alone: `$one`) into accumulators `$par`.
                macro_rules! pair {
                    ($pr:expr, $one:literal, $par:literal) => {{
                        let pr = $pr;
                        let (u, sm) = pair32(d, row, 2 * pr, $one);
                        let at = |r: usize| r * nbp + 2 * pr;
                        dot!(u, r => {
                            let xd = _mm_castpd_ps(_mm_load_sd(dx.add(at(r)) as *const f64));
                            let sd = _mm512_castps128_ps512(_mm_mul_ps(sm, xd));
                            _mm512_permutexvar_ps(spread, sd)
                        }, pr, $par);
                        if d == DType::Q4_1 {
                            // Lanes 0, 1: the two blocks' m times their Σ x.
                            let m2 = _mm_movehl_ps(sm, sm);
                            for (r, mv) in mins.iter_mut().enumerate() {
                                let xs = if $one {
                                    _mm_load_ss(sum.add(r * nb + 2 * pr))
                                } else {
                                    _mm_castpd_ps(_mm_load_sd(sum.add(r * nb + 2 * pr) as *const f64))
                                };
                                mv[$par] = _mm_fmadd_ps(m2, xs, mv[$par]);
                            }
                        }
                    }};
                }
                let pairs = nb / 2;
                for pr in (0..pairs / 2).map(|i| 2 * i) {
                    pair!(pr, false, 0);
                    pair!(pr + 1, false, 1);
                }
                if pairs % 2 == 1 {
                    pair!(pairs - 1, false, 0);
                }
                if nb % 2 == 1 {
                    pair!(pairs, true, 1);
                }
            }
        }
        for r in 0..M {
            let total = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
            let kmin = if matches!(d, DType::Q4K | DType::Q5K) {
                _mm512_reduce_add_ps(_mm512_zextps256_ps512(kmins[r]))
            } else {
                0.0
            };
            // Lanes 0 and 1 (2 and 3 may hold 0 · m).
            let m = _mm_add_ps(mins[r][0], mins[r][1]);
            let m = _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
            *out.get_unchecked_mut(r * ldo + j) = total + m - kmin;
        }
    }
}
