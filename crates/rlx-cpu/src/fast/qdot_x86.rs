//! AVX2 + FMA (+ F16C for the scales) decode-and-dot for GGUF blocks (Q4_0, Q4_1, Q5_0, Q8_0,
//! Q4_K, Q5_K, Q6_K): the few-rows path of [`super::qmatmul`].
//!
//! Each block's integer levels are widened to f32 in registers (4 × 8
//! lanes) and multiplied with the f32 activations; the block's scale is
//! applied once to the block's sum: `Σ d·(q − 8)·x = d · Σ (q − 8)·x`. So
//! no activation is rounded (unlike integer dot products), and the result
//! differs from dequantize-then-matmul only by f32 rounding of the sums.
#![allow(unsafe_code)]

use rlx_ir::DType;
use std::arch::x86_64::*;

/// Whether this CPU runs these kernels.
pub fn available() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c")
}

/// Whether `d` has a kernel here.
pub fn handles(d: DType) -> bool {
    type_index(d).is_some()
}

/// The types with kernels here, indexed by the kernels' const parameter.
pub const TYPES: [DType; 7] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q8_0,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

/// The index of `d` in [`TYPES`].
pub fn type_index(d: DType) -> Option<u8> {
    TYPES.iter().position(|&t| t == d).map(|i| i as u8)
}

/// Types whose weights have a min term (x = scale·q − min per 32).
fn has_min(d: DType) -> bool {
    matches!(d, DType::Q4_1 | DType::Q4K | DType::Q5K)
}

/// 32 level bytes (signed or unsigned) as 4 × 8 f32 lanes without a
/// shuffle: vector `c` holds byte `c` of each 32-bit lane, so lane `i` of
/// vector `c` is element `4i + c`. The activations are permuted to match
/// once per call ([`permute_x`]).
#[inline(always)]
unsafe fn widen(q: __m256i, signed: bool) -> [__m256; 4] {
    let byte = |c: i32| {
        let v = if signed {
            // Sign-extend byte c: move it to the top, shift back arithmetically.
            _mm256_srai_epi32(_mm256_sllv_epi32(q, _mm256_set1_epi32(24 - 8 * c)), 24)
        } else {
            _mm256_and_si256(
                _mm256_srlv_epi32(q, _mm256_set1_epi32(8 * c)),
                _mm256_set1_epi32(0xFF),
            )
        };
        _mm256_cvtepi32_ps(v)
    };
    [byte(0), byte(1), byte(2), byte(3)]
}

/// `x` (rows of k, k a multiple of 32) in the order [`widen`] produces:
/// per 32 values, position `8c + i` holds value `4i + c`.
fn permute_x(x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    for (o, blk) in out.chunks_exact_mut(32).zip(x.chunks_exact(32)) {
        for c in 0..4 {
            for i in 0..8 {
                o[8 * c + i] = blk[4 * i + c];
            }
        }
    }
    out
}

/// The 6-bit (scale, min) pair `j` of Q4_K/Q5_K.
#[inline(always)]
unsafe fn scale_min(s: *const u8, j: usize) -> (u8, u8) {
    let at = |i: usize| *s.add(i);
    if j < 4 {
        (at(j) & 0x3F, at(j + 4) & 0x3F)
    } else {
        (
            (at(j + 4) & 0x0F) | ((at(j - 4) >> 6) << 4),
            (at(j + 4) >> 4) | ((at(j) >> 6) << 4),
        )
    }
}

/// An f16 scale, converted by F16C (exact, as `half` is).
#[inline(always)]
unsafe fn f16(p: *const u8) -> f32 {
    let bits = (p as *const u16).read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    _mm_cvtss_f32(s)
}

/// `out[r·ldo + j] = x[r] · w[j0 + j]` for the `M` rows of `x` (M × k)
/// and `cols` weight rows of `row_bytes` bytes each.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]); `w` must hold rows
/// `j0..j0 + cols` of `k / 32` blocks of `d`, `x` m·k values, `out` room
/// for `(m − 1)·ldo + cols` values.
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemv<const M: usize, const D: u8>(
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    x: &[f32],
    k: usize,
    out: &mut [f32],
    ldo: usize,
    cols: usize,
) {
    debug_assert!(k.is_multiple_of(32));
    // A constant: every per-type branch below folds away.
    let d = TYPES[D as usize];
    let m = M;
    let nb = k / 32;
    // Minimums multiply the sum of each 32 values of x.
    let xq = permute_x(&x[..M * k]);
    let mut xsum = vec![0.0f32; if has_min(d) { M * nb } else { 0 }];
    for (i, s) in xsum.iter_mut().enumerate() {
        let (r, b) = (i / nb, i % nb);
        *s = x[r * k + b * 32..r * k + b * 32 + 32].iter().sum();
    }
    for j in 0..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        let mut acc = [_mm256_setzero_ps(); M];
        let mut mins = [0.0f32; M];
        // The 8 sub-blocks of a k-quant super-block as one unrolled
        // group, so its scales and shared bytes are read once.
        let group = if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) {
            8
        } else {
            1
        };
        for g in 0..nb / group {
            for jj in 0..group {
                let b = g * group + jj;
                // Levels (widened to f32), the scales of the two halves,
                // and the min.
                let (q, signed, s_lo, s_hi, min) = levels(d, row, b);
                let v = widen(q, signed);
                // Lanes 0-3 are elements 0-15, lanes 4-7 elements 16-31:
                // Q6_K's two scales per 32 split the lanes.
                let scales = if d == DType::Q6K {
                    _mm256_setr_ps(s_lo, s_lo, s_lo, s_lo, s_hi, s_hi, s_hi, s_hi)
                } else {
                    _mm256_set1_ps(s_lo)
                };
                for r in 0..m {
                    let xp = xq.as_ptr().add(r * k + b * 32);
                    let mut s0 = _mm256_mul_ps(v[0], _mm256_loadu_ps(xp));
                    let mut s1 = _mm256_mul_ps(v[1], _mm256_loadu_ps(xp.add(8)));
                    s0 = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(xp.add(16)), s0);
                    s1 = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(xp.add(24)), s1);
                    acc[r] = _mm256_fmadd_ps(scales, _mm256_add_ps(s0, s1), acc[r]);
                    if has_min(d) {
                        mins[r] -= min * xsum[r * nb + b];
                    }
                }
            }
        }
        for r in 0..m {
            out[r * ldo + j] = hsum(acc[r]) + mins[r];
        }
    }
}

// ------------------------------------------- 8-bit activations (opt-in)

/// Rows of activations rounded to 8 bits per 32 values: `x ≈ d·q`, with
/// each block's exact f32 sum for the types with a min term.
pub struct Q8Rows {
    pub d: Vec<f32>,
    pub q: Vec<i8>,
    pub sum: Vec<f32>,
}

/// Rounds `m` rows of `k` values (k a multiple of 32): d = max|x|/127,
/// q = round(x/d) (half away from zero).
pub fn quantize_rows(x: &[f32], m: usize, k: usize) -> Q8Rows {
    let nb = m * k / 32;
    let mut r = Q8Rows {
        d: Vec::with_capacity(nb),
        q: Vec::with_capacity(m * k),
        sum: Vec::with_capacity(nb),
    };
    for blk in x[..m * k].chunks_exact(32) {
        let amax = blk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        r.d.push(d);
        r.sum.push(blk.iter().sum());
        r.q.extend(blk.iter().map(|v| (v * id).round() as i8));
    }
    r
}

/// One 32-element sub-block's weight levels as bytes (element order),
/// whether they are signed (offset removed) or unsigned, the scales of its
/// two halves of 16, and its min (x = scale·q − min).
#[inline(always)]
unsafe fn levels(d: DType, row: *const u8, b: usize) -> (__m256i, bool, f32, f32, f32) {
    let mask = _mm256_set1_epi8(0x0F);
    let nib = |qs: *const u8| {
        let v = _mm_loadu_si128(qs as *const __m128i);
        let m = _mm_set1_epi8(0x0F);
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m))
    };
    match d {
        DType::Q4_0 => {
            let p = row.add(b * 18);
            (
                _mm256_sub_epi8(nib(p.add(2)), _mm256_set1_epi8(8)),
                true,
                f16(p),
                f16(p),
                0.0,
            )
        }
        DType::Q4_1 => {
            let p = row.add(b * 20);
            {
                let s = f16(p);
                (nib(p.add(4)), false, s, s, -f16(p.add(2)))
            }
        }
        DType::Q5_0 => {
            let p = row.add(b * 22);
            let h = (p.add(2) as *const u32).read_unaligned() as i32;
            // Byte i of the spread holds byte i/8 of qh; its bit i%8 is the
            // 5th bit of element i.
            let spread = _mm256_shuffle_epi8(
                _mm256_set1_epi32(h),
                _mm256_setr_epi8(
                    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                    3, 3, 3, 3, 3, 3,
                ),
            );
            let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits);
            let q = _mm256_or_si256(nib(p.add(6)), _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
            (
                _mm256_sub_epi8(q, _mm256_set1_epi8(16)),
                true,
                f16(p),
                f16(p),
                0.0,
            )
        }
        DType::Q8_0 => {
            let p = row.add(b * 34);
            (
                _mm256_loadu_si256(p.add(2) as *const __m256i),
                true,
                f16(p),
                f16(p),
                0.0,
            )
        }
        DType::Q4K | DType::Q5K => {
            let bb = if d == DType::Q4K { 144 } else { 176 };
            let p = row.add(b / 8 * bb);
            let j = b % 8;
            let (dd, dmin) = (f16(p), f16(p.add(2)));
            let (sc, m) = scale_min(p.add(4), j);
            let qs = if d == DType::Q4K {
                p.add(16)
            } else {
                p.add(48)
            };
            let raw = _mm256_loadu_si256(qs.add(32 * (j / 2)) as *const __m256i);
            let mut q = _mm256_and_si256(
                if j.is_multiple_of(2) {
                    raw
                } else {
                    _mm256_srli_epi16(raw, 4)
                },
                mask,
            );
            if d == DType::Q5K {
                let qh = _mm256_loadu_si256(p.add(16) as *const __m256i);
                let bit = _mm256_and_si256(
                    _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j as i32)),
                    _mm256_set1_epi8(1),
                );
                q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
            }
            let dl = dd * sc as f32;
            (q, false, dl, dl, dmin * m as f32)
        }
        _ => {
            let p = row.add(b / 8 * 210);
            let j = b % 8;
            let (g, s) = (j / 4, j % 4);
            let ql = _mm256_loadu_si256(p.add(64 * g + 32 * (s % 2)) as *const __m256i);
            let lo = _mm256_and_si256(if s < 2 { ql } else { _mm256_srli_epi16(ql, 4) }, mask);
            let qh = _mm256_loadu_si256(p.add(128 + 32 * g) as *const __m256i);
            let hi = _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * s as i32)),
                _mm256_set1_epi8(3),
            );
            let q = _mm256_sub_epi8(
                _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
                _mm256_set1_epi8(32),
            );
            let dd = f16(p.add(208));
            let sc = |i: usize| *p.add(192 + 8 * g + 2 * s + i) as i8 as f32;
            (q, true, dd * sc(0), dd * sc(1), 0.0)
        }
    }
}

/// [`gemv`] with activations rounded to 8 bits ([`quantize_rows`]): per
/// 32 values, the integer dot product of the weight levels and `xq`
/// (`maddubs` + `madd`), scaled by the weight's and the activations'
/// scales; min terms use the exact block sums of x.
///
/// # Safety
/// As [`gemv`]; `xq` holds `m` rows of `k` values.
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemv_q8<const M: usize, const D: u8>(
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    xq: &Q8Rows,
    k: usize,
    out: &mut [f32],
    ldo: usize,
    cols: usize,
) {
    debug_assert!(k.is_multiple_of(32));
    // A constant: every per-type branch below folds away.
    let d = TYPES[D as usize];
    let m = M;
    let nb = k / 32;
    let ones = _mm256_set1_epi16(1);
    for j in 0..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        let mut acc = [_mm256_setzero_ps(); M];
        let mut mins = [0.0f32; M];
        // The 8 sub-blocks of a k-quant super-block as one unrolled
        // group, so its scales and shared bytes are read once.
        let group = if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) {
            8
        } else {
            1
        };
        for g in 0..nb / group {
            for jj in 0..group {
                let b = g * group + jj;
                let (q, signed, s_lo, s_hi, min) = levels(d, row, b);
                let (aw, sign_src) = if signed {
                    (_mm256_sign_epi8(q, q), q)
                } else {
                    (q, _mm256_set1_epi8(1))
                };
                // Only Q6_K has two scales per 32 values.
                let scales = if d == DType::Q6K {
                    _mm256_setr_ps(s_lo, s_lo, s_lo, s_lo, s_hi, s_hi, s_hi, s_hi)
                } else {
                    _mm256_set1_ps(s_lo)
                };
                for r in 0..m {
                    let i = r * nb + b;
                    let x = _mm256_loadu_si256(xq.q.as_ptr().add(i * 32) as *const __m256i);
                    // |w| · (x with w's sign) = w · x, with |w| unsigned for maddubs.
                    let xs = if signed {
                        _mm256_sign_epi8(x, sign_src)
                    } else {
                        x
                    };
                    let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones);
                    let sc = _mm256_mul_ps(scales, _mm256_set1_ps(*xq.d.get_unchecked(i)));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), sc, acc[r]);
                    if min != 0.0 {
                        mins[r] -= min * xq.sum.get_unchecked(i);
                    }
                }
            }
        }
        for r in 0..m {
            out[r * ldo + j] = hsum(acc[r]) + mins[r];
        }
    }
}
