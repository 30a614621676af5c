//! AVX-512 decode-and-dot for GGUF blocks: the few-rows path of
//! [`super::qmatmul`] where the CPU has AVX-512F (the same seven types as
//! [`super::qdot_x86`], same arithmetic: f32 activations, each block's
//! scale applied to the block's sum, so results differ from
//! dequantize-then-matmul only by f32 rounding).
//!
//! A 32-value block is two 16-lane vectors in natural order (elements
//! 0–15 and 16–31), so the activations need no permutation. 4-bit levels
//! become f32 by one `vpermps` from a 16-entry table per 16 values — the
//! permute reads only an index's low 4 bits, so a nibble needs no mask and
//! Q4_0's `q − 8` is in the table — instead of a mask, a shift and an
//! int→float conversion per 8 values as on AVX2. On Zen 4, which issues
//! a 512-bit op as two 256-bit halves, the decode row (1536 × 576, one
//! thread, `examples/qmatmul.rs`) ran at 0.95–1.05× the AVX2 kernel's rate
//! for most types: the per-block scalar work (the f16 scale, the min term)
//! bounds both. Q5_0 (most of Gemma-3's and Qwen2.5's layer weights in
//! their Q4_K_M files) takes its 5-bit levels from a two-table permute:
//! 1.45× the AVX2 path's rate (65536 × 640, one Zen 5 thread: 2.37 → 1.64
//! ms).
//! CPUs with full-width 512-bit units should gain more; that is not
//! measured yet.
#![allow(unsafe_code)]

use super::qdot_x86::{f16, has_min, levels, scale_min, Prepared, TYPES};
use rlx_ir::DType;
use std::arch::x86_64::*;

/// Weight rows per pass over a single long row of x (see [`gemv`]).
const COLS: usize = 4;

/// From this K on, a single row of x takes [`COLS`] weight rows per pass:
/// its 32 KiB of f32 no longer fit in L1 with the weights streaming past.
/// Measured on one Zen 5 thread (`examples/qmatmul.rs`, ms, one row
/// pass / four rows): at K = 14336 (4096 rows) Q4_0 4.5 / 3.1, Q8_0 7.5 /
/// 4.5, Q4_K 5.0 / 4.9; at K = 4864 (8192 rows) Q4_0 1.3 / 3.0, Q8_0
/// 1.7 / 3.8 — four interleaved row streams are slower while x fits.
const COLS_FROM_K: usize = 8192;

/// Whether this CPU runs these kernels.
pub fn available() -> bool {
    super::qdot_x86::available() && std::is_x86_feature_detected!("avx512f")
}

/// The 16 nibble values as f32, offset by `bias` (−8 for Q4_0's signed levels).
#[inline(always)]
unsafe fn nibble_table(bias: f32) -> __m512 {
    _mm512_add_ps(
        _mm512_setr_ps(
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
        ),
        _mm512_set1_ps(bias),
    )
}

/// 16 bytes at `p`, zero-extended to the 16 lanes.
#[inline(always)]
unsafe fn bytes16(p: *const u8) -> __m512i {
    _mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i))
}

/// Weight block `b` (32 values) of `row` as two vectors of f32 levels in
/// natural order, the scales of its two halves (equal but for Q6_K) and
/// its min (x = scale·q − min).
#[inline(always)]
unsafe fn unit(d: DType, row: *const u8, b: usize, t: __m512) -> ([__m512; 2], f32, f32, f32) {
    match d {
        DType::Q4_0 | DType::Q4_1 => {
            let q4_1 = d == DType::Q4_1;
            let p = row.add(b * if q4_1 { 20 } else { 18 });
            // Lane i holds byte i: its low nibble is element i, its high
            // nibble element i + 16.
            let q = bytes16(p.add(if q4_1 { 4 } else { 2 }));
            let v = [
                _mm512_permutexvar_ps(q, t),
                _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(q), t),
            ];
            let s = f16(p);
            (v, s, s, if q4_1 { -f16(p.add(2)) } else { 0.0 })
        }
        DType::Q5_0 => {
            // Levels 0–31 (q − 16 in the tables) through one two-table
            // permute per 16 values: the index's bit 4 (the level's 5th
            // bit, lane i's bit of qh set by a masked OR) picks the table.
            // About twice the AVX2 path's rate, which builds the level
            // bytes with shuffles and widens them.
            let p = row.add(b * 22);
            let h = std::ptr::read_unaligned(p.add(2) as *const u32);
            let q = bytes16(p.add(6));
            let sixteen = _mm512_set1_epi32(16);
            let lo = _mm512_and_si512(q, _mm512_set1_epi32(15));
            let hi = _mm512_srli_epi32::<4>(q);
            let lo = _mm512_mask_or_epi32(lo, h as u16, lo, sixteen);
            let hi = _mm512_mask_or_epi32(hi, (h >> 16) as u16, hi, sixteen);
            let (ta, tb) = (nibble_table(-16.0), nibble_table(0.0));
            let s = f16(p);
            (
                [
                    _mm512_permutex2var_ps(ta, lo, tb),
                    _mm512_permutex2var_ps(ta, hi, tb),
                ],
                s,
                s,
                0.0,
            )
        }
        DType::Q8_0 => {
            let p = row.add(b * 34);
            let lane = |o: usize| {
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                    p.add(2 + o) as *const __m128i
                )))
            };
            let s = f16(p);
            ([lane(0), lane(16)], s, s, 0.0)
        }
        DType::Q4K => {
            let p = row.add(b / 8 * 144);
            let j = b % 8;
            let (sc, m) = scale_min(p.add(4), j);
            // Sub-blocks 2g and 2g + 1 are the low and high nibbles of the
            // same 32 bytes, in order.
            let qs = p.add(16 + 32 * (j / 2));
            let (mut lo, mut hi) = (bytes16(qs), bytes16(qs.add(16)));
            if j % 2 == 1 {
                lo = _mm512_srli_epi32::<4>(lo);
                hi = _mm512_srli_epi32::<4>(hi);
            }
            let s = f16(p) * sc as f32;
            (
                [_mm512_permutexvar_ps(lo, t), _mm512_permutexvar_ps(hi, t)],
                s,
                s,
                f16(p.add(2)) * m as f32,
            )
        }
        _ => {
            // Q5_K, Q6_K: the AVX2 kernel's 32 level bytes (natural
            // order), widened half by half.
            let (q, signed, s_lo, s_hi, min) = levels(d, row, b);
            let halves = [_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q)];
            let v = halves.map(|h| {
                _mm512_cvtepi32_ps(if signed {
                    _mm512_cvtepi8_epi32(h)
                } else {
                    _mm512_cvtepu8_epi32(h)
                })
            });
            (v, s_lo, s_hi, min)
        }
    }
}

/// `acc + (v · x)` for one decoded block `v` (its two halves' scales
/// applied; Q6_K's halves have their own) and x's 32 values `x0`, `x1`.
#[inline(always)]
unsafe fn fma_block(
    d: DType,
    v: [__m512; 2],
    (s_lo, s_hi): (f32, f32),
    (x0, x1): (__m512, __m512),
    acc: __m512,
) -> __m512 {
    let lo = _mm512_mul_ps(v[0], x0);
    if d == DType::Q6K {
        let hi = _mm512_mul_ps(v[1], x1);
        let acc = _mm512_fmadd_ps(_mm512_set1_ps(s_lo), lo, acc);
        _mm512_fmadd_ps(_mm512_set1_ps(s_hi), hi, acc)
    } else {
        _mm512_fmadd_ps(_mm512_set1_ps(s_lo), _mm512_fmadd_ps(v[1], x1, lo), acc)
    }
}

/// `$step!(b)` for every block `b` of a row: the k-quants' 8 sub-blocks of
/// a super-block written out, so that `b % 8` is a constant in each (as in
/// the AVX2 kernel).
macro_rules! each_block {
    ($d:expr, $nb:expr, $step:ident) => {
        if matches!($d, DType::Q4K | DType::Q5K | DType::Q6K) {
            for s in 0..$nb / 8 {
                let g = 8 * s;
                $step!(g);
                $step!(g + 1);
                $step!(g + 2);
                $step!(g + 3);
                $step!(g + 4);
                $step!(g + 5);
                $step!(g + 6);
                $step!(g + 7);
            }
        } else {
            for b in 0..$nb {
                $step!(b);
            }
        }
    };
}

/// `out[r·ldo + j] = x[r] · w[j0 + j]` for the `M` rows of `x` (prepared
/// in natural order: [`super::qdot_x86::prepare_natural`]) and `cols`
/// weight rows of `row_bytes` bytes each.
///
/// # Safety
/// The CPU must have AVX-512F, AVX2, FMA and F16C ([`available`]); `w`
/// must hold rows `j0..j0 + cols` of `k / 32` blocks of `d`, `x` m·k
/// values, `out` room for `(m − 1)·ldo + cols` values.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
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
    debug_assert!(k.is_multiple_of(32) && x.x.len() >= M * k);
    // A constant: every per-type branch below folds away.
    let d = TYPES[D as usize];
    let long_row = M == 1 && k > COLS_FROM_K;
    if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) && !long_row {
        // The k-quants a super-block at a time (qdot_x512k); a long row of
        // x takes the passes of four rows below, which were faster there
        // (one Zen 5 thread, 4096 × 14336, ms: Q4_K 2.7–3.6 vs 4.1–4.4
        // whole rows of the super-block kernel; see qdot_x512k).
        super::qdot_x512k::gemv::<M, D>(w, row_bytes, j0, x, k, out, ldo, cols);
        return;
    }
    let nb = k / 32;
    let table = nibble_table(if d == DType::Q4_0 { -8.0 } else { 0.0 });
    // One long row of x (a decoded token, K past COLS_FROM_K): four
    // weight rows per pass over it, so each x block is loaded once for
    // four columns. A row of x that no longer fits in L1 was reloaded from
    // L2 for every weight row, more bytes than the weights themselves.
    let mut j = 0;
    if long_row {
        while j + COLS <= cols {
            let rows: [*const u8; COLS] =
                std::array::from_fn(|c| w.as_ptr().add((j0 + j + c) * row_bytes));
            let mut acc = [_mm512_setzero_ps(); COLS];
            let mut mins = [0.0f32; COLS];
            macro_rules! step4 {
                ($b:expr) => {{
                    let b = $b;
                    let xp = x.x.as_ptr().add(b * 32);
                    let (x0, x1) = (_mm512_loadu_ps(xp), _mm512_loadu_ps(xp.add(16)));
                    for c in 0..COLS {
                        let (v, s_lo, s_hi, min) = unit(d, rows[c], b, table);
                        acc[c] = fma_block(d, v, (s_lo, s_hi), (x0, x1), acc[c]);
                        if has_min(d) {
                            mins[c] -= min * x.sum.get_unchecked(b);
                        }
                    }
                }};
            }
            each_block!(d, nb, step4);
            for c in 0..COLS {
                *out.get_unchecked_mut(j + c) = _mm512_reduce_add_ps(acc[c]) + mins[c];
            }
            j += COLS;
        }
    }
    for j in j..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        let mut acc = [_mm512_setzero_ps(); M];
        let mut mins = [0.0f32; M];
        // A macro, not a closure: a closure does not inherit the target
        // features, and its intrinsics would stay calls.
        macro_rules! step {
            ($b:expr) => {{
                let b = $b;
                let (v, s_lo, s_hi, min) = unit(d, row, b, table);
                for r in 0..M {
                    let xp = x.x.as_ptr().add(r * k + b * 32);
                    let xs = (_mm512_loadu_ps(xp), _mm512_loadu_ps(xp.add(16)));
                    acc[r] = fma_block(d, v, (s_lo, s_hi), xs, acc[r]);
                    if has_min(d) {
                        mins[r] -= min * x.sum.get_unchecked(r * nb + b);
                    }
                }
            }};
        }
        each_block!(d, nb, step);
        for r in 0..M {
            *out.get_unchecked_mut(r * ldo + j) = _mm512_reduce_add_ps(acc[r]) + mins[r];
        }
    }
}
