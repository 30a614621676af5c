//! AVX2 + FMA (+ F16C for the scales) decode-and-dot for GGUF blocks (Q4_0, Q4_1, Q5_0, Q8_0,
//! Q4_K, Q5_K, Q6_K): the few-rows path of [`super::qmatmul`].
//!
//! Each block's integer levels are widened to f32 in registers (4 × 8
//! lanes) and multiplied with the f32 activations; the block's scale is
//! applied once to the block's sum: `Σ d·(q − 8)·x = d · Σ (q − 8)·x`. So
//! no activation is rounded (unlike integer dot products), and the result
//! differs from dequantize-then-matmul only by f32 rounding of the sums.
//! The lanes hold a block's values in whatever order widens them in the
//! fewest instructions; the activations are permuted to that order once
//! per call ([`prepare`]), not once per weight row.
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
pub(super) fn has_min(d: DType) -> bool {
    matches!(d, DType::Q4_1 | DType::Q4K | DType::Q5K)
}

/// 32 level bytes (signed or unsigned) as 4 × 8 f32 lanes without a
/// shuffle: vector `c` holds byte `c` of each 32-bit lane, so lane `i` of
/// vector `c` is element `4i + c`. The activations are permuted to match
/// once per call ([`prepare`]).
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

/// The 6-bit (scale, min) pair `j` of Q4_K/Q5_K.
#[inline(always)]
pub(super) unsafe fn scale_min(s: *const u8, j: usize) -> (u8, u8) {
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

/// All 8 6-bit (scale, min) pairs of a Q4_K/Q5_K super-block (12 bytes
/// at `s`) at once, as four words of bytes: scales 0–3, scales 4–7, mins
/// 0–3, mins 4–7. Pairs 0–3 are the low 6 bits of bytes 0–3 (scales) and
/// 4–7 (mins); 4–7 take 4 bits from bytes 8–11 and their top 2 from the
/// high bits of bytes 0–3 and 4–7 (as [`scale_min`] one at a time).
#[inline(always)]
pub(super) unsafe fn k_scale_bytes(s: *const u8) -> [i32; 4] {
    let w = |i: usize| (s.add(4 * i) as *const u32).read_unaligned();
    let (a0, a1, a2) = (w(0), w(1), w(2));
    let (six, four, two) = (0x3F3F_3F3Fu32, 0x0F0F_0F0Fu32, 0x0303_0303u32);
    [
        (a0 & six) as i32,
        ((a2 & four) | ((a0 >> 6) & two) << 4) as i32,
        (a1 & six) as i32,
        (((a2 >> 4) & four) | ((a1 >> 6) & two) << 4) as i32,
    ]
}

/// Bytes per block (per super-block for the k-quants) of `d`.
pub(super) fn block_bytes(d: DType) -> usize {
    match d.storage() {
        rlx_ir::dtype::Storage::Block { bytes, .. } => bytes,
        _ => 0,
    }
}

/// An f16 scale, converted by F16C (exact, as `half` is).
#[inline(always)]
pub(super) unsafe fn f16(p: *const u8) -> f32 {
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

/// The element of a 32-value block that position `p` (vector `p / 8`,
/// lane `p % 8`) of [`unit`]'s widened vectors holds.
fn element(d: DType, p: usize) -> usize {
    let (v, i) = (p / 8, p % 8);
    match d {
        // Lane i of a zero-extended u16 holds bytes 2i and 2i + 1 (see `unit`).
        DType::Q4_0 | DType::Q4_1 | DType::Q4K => 16 * (v / 2) + 2 * i + v % 2,
        DType::Q8_0 => p,
        // [`widen`]'s order.
        _ => 4 * i + v,
    }
}

/// The activations of one call, prepared once for every weight row:
/// permuted to [`unit`]'s order (rows of `k`), with each 32 values' f32
/// sum (natural order) for the types with a min term.
pub struct Prepared {
    pub(super) x: Vec<f32>,
    pub(super) sum: Vec<f32>,
}

/// Prepares `m` rows of `k` values (k a multiple of 32) for [`gemv`] on `d`.
pub fn prepare(d: DType, x: &[f32], m: usize, k: usize) -> Prepared {
    prepare_in(d, x, m, k, |p| element(d, p))
}

/// [`prepare`] in natural order (for [`super::qdot_x512`]).
pub fn prepare_natural(d: DType, x: &[f32], m: usize, k: usize) -> Prepared {
    prepare_in(d, x, m, k, |p| p)
}

fn prepare_in(
    d: DType,
    x: &[f32],
    m: usize,
    k: usize,
    element: impl Fn(usize) -> usize,
) -> Prepared {
    let x = &x[..m * k];
    let order: [usize; 32] = std::array::from_fn(element);
    let mut px = vec![0.0f32; x.len()];
    for (o, blk) in px.chunks_exact_mut(32).zip(x.chunks_exact(32)) {
        for (o, &e) in o.iter_mut().zip(&order) {
            *o = blk[e];
        }
    }
    let sum = if has_min(d) {
        x.chunks_exact(32).map(|b| b.iter().sum()).collect()
    } else {
        Vec::new()
    };
    Prepared { x: px, sum }
}

/// Eight u16 (16 bytes at `p`) zero-extended to the eight 32-bit lanes.
#[inline(always)]
unsafe fn zx16(p: *const u8) -> __m256i {
    _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i))
}

/// The four nibbles of [`zx16`]'s lanes (bits 0-3, 4-7, 8-11, 12-15) as
/// f32: unsigned, or (`signed`, after flipping each nibble's top bit)
/// sign-extended, which maps q to q − 8.
#[inline(always)]
unsafe fn nibbles(w: __m256i, signed: bool) -> [__m256; 4] {
    let v = if signed {
        let w = _mm256_xor_si256(w, _mm256_set1_epi32(0x8888));
        [
            _mm256_srai_epi32::<28>(_mm256_slli_epi32::<28>(w)),
            _mm256_srai_epi32::<28>(_mm256_slli_epi32::<24>(w)),
            _mm256_srai_epi32::<28>(_mm256_slli_epi32::<20>(w)),
            _mm256_srai_epi32::<28>(_mm256_slli_epi32::<16>(w)),
        ]
    } else {
        let m = _mm256_set1_epi32(0x0F);
        [
            _mm256_and_si256(w, m),
            _mm256_and_si256(_mm256_srli_epi32::<4>(w), m),
            _mm256_and_si256(_mm256_srli_epi32::<8>(w), m),
            _mm256_srli_epi32::<12>(w),
        ]
    };
    [
        _mm256_cvtepi32_ps(v[0]),
        _mm256_cvtepi32_ps(v[1]),
        _mm256_cvtepi32_ps(v[2]),
        _mm256_cvtepi32_ps(v[3]),
    ]
}

/// Eight i8 at `p` as f32.
#[inline(always)]
unsafe fn i8x8(p: *const u8) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i)))
}

/// Nibble `c` (bits 4c..4c + 3) of [`zx16`]'s lanes as f32.
#[inline(always)]
unsafe fn nibble(w: __m256i, c: usize) -> __m256 {
    let v = _mm256_srl_epi32(w, _mm_cvtsi32_si128(4 * c as i32));
    _mm256_cvtepi32_ps(if c == 3 {
        v
    } else {
        _mm256_and_si256(v, _mm256_set1_epi32(0x0F))
    })
}

/// Weight block `b` (of 32 values) of `row` widened to f32 in the order
/// of [`element`], its scale per lane, and its min (x = scale·q − min).
/// Q4_0, Q4_1, Q4_K and Q8_0 widen with one zero/sign extension per 8 or
/// 16 values (fewer instructions than [`widen`], which the rest use).
#[inline(always)]
unsafe fn unit(d: DType, row: *const u8, b: usize) -> ([__m256; 4], __m256, f32) {
    match d {
        DType::Q4_0 | DType::Q4_1 => {
            let q4_1 = d == DType::Q4_1;
            let p = row.add(b * if q4_1 { 20 } else { 18 });
            // Lane i: byte 2i (elements 2i, 2i + 16), byte 2i + 1 (2i + 1, 2i + 17).
            let [a, b, c, e] = nibbles(zx16(p.add(if q4_1 { 4 } else { 2 })), !q4_1);
            let min = if q4_1 { -f16(p.add(2)) } else { 0.0 };
            ([a, c, b, e], _mm256_set1_ps(f16(p)), min)
        }
        DType::Q8_0 => {
            let p = row.add(b * 34 + 2);
            let v = [i8x8(p), i8x8(p.add(8)), i8x8(p.add(16)), i8x8(p.add(24))];
            (v, _mm256_set1_ps(f16(p.sub(2))), 0.0)
        }
        DType::Q4K => {
            let p = row.add(b / 8 * 144);
            let j = b % 8;
            let (sc, m) = scale_min(p.add(4), j);
            // Sub-blocks 2g and 2g + 1 are the low and high nibbles of the
            // same 32 bytes: lane i of each half holds bytes 2i and 2i + 1.
            let qs = p.add(16 + 32 * (j / 2));
            let t = j % 2;
            let (lo, hi) = (zx16(qs), zx16(qs.add(16)));
            let v = [
                nibble(lo, t),
                nibble(lo, 2 + t),
                nibble(hi, t),
                nibble(hi, 2 + t),
            ];
            (
                v,
                _mm256_set1_ps(f16(p) * sc as f32),
                f16(p.add(2)) * m as f32,
            )
        }
        _ => {
            let (q, signed, s_lo, s_hi, min) = levels(d, row, b);
            // Lanes 0-3 are elements 0-15, lanes 4-7 elements 16-31:
            // Q6_K's two scales per 32 split the lanes.
            let scales = if d == DType::Q6K {
                _mm256_setr_ps(s_lo, s_lo, s_lo, s_lo, s_hi, s_hi, s_hi, s_hi)
            } else {
                _mm256_set1_ps(s_lo)
            };
            (widen(q, signed), scales, min)
        }
    }
}

/// `out[r·ldo + j] = x[r] · w[j0 + j]` for the `M` rows of `x` (prepared
/// by [`prepare`]) and `cols` weight rows of `row_bytes` bytes each.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]); `w` must hold rows
/// `j0..j0 + cols` of `k / 32` blocks of `d`, `x` m·k values prepared for
/// `d`, `out` room for `(m − 1)·ldo + cols` values.
#[target_feature(enable = "avx2,fma,f16c")]
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
    let nb = k / 32;
    // One weight row at a time: two interleaved rows (independent
    // accumulators, shared activation loads) ran no faster from cache and
    // up to 1.8× slower from memory (Q8_0), and prefetching ahead slowed
    // Q4_1 (measured on AVX2, Zen 3).
    for j in 0..cols {
        let row = w.as_ptr().add((j0 + j) * row_bytes);
        let mut acc = [_mm256_setzero_ps(); M];
        let mut mins = [0.0f32; M];
        // A macro, not a closure: a closure does not inherit the target
        // features, and its intrinsics would stay calls.
        macro_rules! step {
            ($b:expr) => {{
                let b = $b;
                let (v, scales, min) = unit(d, row, b);
                for r in 0..M {
                    let xp = x.x.as_ptr().add(r * k + b * 32);
                    let mut s0 = _mm256_mul_ps(v[0], _mm256_loadu_ps(xp));
                    let mut s1 = _mm256_mul_ps(v[1], _mm256_loadu_ps(xp.add(8)));
                    s0 = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(xp.add(16)), s0);
                    s1 = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(xp.add(24)), s1);
                    acc[r] = _mm256_fmadd_ps(scales, _mm256_add_ps(s0, s1), acc[r]);
                    if has_min(d) {
                        mins[r] -= min * x.sum.get_unchecked(r * nb + b);
                    }
                }
            }};
        }
        if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) {
            // The 8 sub-blocks of a k-quant super-block written out, so
            // that `b % 8` is a constant in each (its scales' and bytes'
            // offsets); with `b % 8` unknown, Q4_K ran 2× slower.
            for s in 0..nb / 8 {
                let g = 8 * s;
                step!(g);
                step!(g + 1);
                step!(g + 2);
                step!(g + 3);
                step!(g + 4);
                step!(g + 5);
                step!(g + 6);
                step!(g + 7);
            }
        } else {
            for b in 0..nb {
                step!(b);
            }
        }
        for r in 0..M {
            *out.get_unchecked_mut(r * ldo + j) = hsum(acc[r]) + mins[r];
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
/// q = round(x/d) (half away from zero). Vectorized where the CPU has
/// AVX2 (the only callers' kernels need it anyway), else [`quantize_scalar`].
pub fn quantize_rows(x: &[f32], m: usize, k: usize) -> Q8Rows {
    let nb = m * k / 32;
    let mut r = Q8Rows {
        d: vec![0.0; nb],
        q: vec![0; m * k],
        sum: vec![0.0; nb],
    };
    if available() {
        // SAFETY: the CPU has AVX2 (checked); the buffers hold nb blocks.
        unsafe { quantize_avx2(&x[..m * k], &mut r) };
    } else {
        quantize_scalar(&x[..m * k], &mut r);
    }
    r
}

/// [`quantize_rows`] one value at a time: the definition the vector
/// version is tested against.
pub(super) fn quantize_scalar(x: &[f32], r: &mut Q8Rows) {
    for (b, blk) in x.chunks_exact(32).enumerate() {
        let amax = blk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        r.d[b] = d;
        r.sum[b] = blk.iter().sum();
        for (q, v) in r.q[32 * b..32 * b + 32].iter_mut().zip(blk) {
            *q = round_half_away(v * id) as i8;
        }
    }
}

/// `a.round()` (half away from zero): `a − trunc(a)` is exact.
#[inline(always)]
fn round_half_away(a: f32) -> f32 {
    let t = a.trunc();
    if (a - t).abs() >= 0.5 {
        t + 1.0f32.copysign(a)
    } else {
        t
    }
}

/// [`quantize_scalar`] with 8 lanes: the same max, scale and rounding per
/// value (the block sum adds in another order).
///
/// # Safety
/// AVX2 ([`available`]); `r` holds `x.len() / 32` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_avx2(x: &[f32], r: &mut Q8Rows) {
    let sign = _mm256_set1_ps(-0.0);
    let half = _mm256_set1_ps(0.5);
    let one = _mm256_set1_ps(1.0);
    // packs interleave 128-bit lanes; this puts the 4-byte groups back.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (b, blk) in x.chunks_exact(32).enumerate() {
        let p = blk.as_ptr();
        let v = [0, 8, 16, 24].map(|o| _mm256_loadu_ps(p.add(o)));
        let a = v.map(|v| _mm256_andnot_ps(sign, v));
        let m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        let s = _mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3]));
        let amax = hmax(m);
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        *r.d.get_unchecked_mut(b) = d;
        *r.sum.get_unchecked_mut(b) = hsum(s);
        let idv = _mm256_set1_ps(id);
        let q = v.map(|v| {
            let y = _mm256_mul_ps(v, idv);
            let t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(y, t));
            let away = _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), one);
            let rounded = _mm256_add_ps(t, _mm256_or_ps(away, _mm256_and_ps(y, sign)));
            _mm256_cvtps_epi32(rounded)
        });
        let bytes = _mm256_packs_epi16(
            _mm256_packs_epi32(q[0], q[1]),
            _mm256_packs_epi32(q[2], q[3]),
        );
        let bytes = _mm256_permutevar8x32_epi32(bytes, order);
        _mm256_storeu_si256(r.q.as_mut_ptr().add(32 * b) as *mut __m256i, bytes);
    }
}

/// The largest of 8 lanes.
#[inline(always)]
unsafe fn hmax(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    _mm_cvtss_f32(m)
}

/// One 32-element sub-block's weight levels as bytes (element order),
/// whether they are signed (offset removed) or unsigned, the scales of its
/// two halves of 16, and its min (x = scale·q − min).
#[inline(always)]
pub(super) unsafe fn levels(d: DType, row: *const u8, b: usize) -> (__m256i, bool, f32, f32, f32) {
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
    if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) {
        // The k-quants a super-block at a time (qdot_avx2k).
        super::qdot_avx2k::gemv_q8::<M, D>(w, row_bytes, j0, xq, k, out, ldo, cols);
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector rounding equals the scalar definition value for value,
    /// ties (x.5 after scaling: the block's max is 127, so the scale is 1)
    /// and zero blocks included; block sums agree to f32 rounding.
    #[test]
    fn vector_quantization_equals_the_scalar_one() {
        if !available() {
            return;
        }
        let mut x: Vec<f32> = (0..32 * 40)
            .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 37.0)
            .collect();
        for (i, v) in x[32..64].iter_mut().enumerate() {
            *v = i as f32 - 15.5; // ties at every value
        }
        x[63] = 127.0;
        x[64..96].fill(0.0);
        let mut want = Q8Rows {
            d: vec![0.0; 40],
            q: vec![0; x.len()],
            sum: vec![0.0; 40],
        };
        quantize_scalar(&x, &mut want);
        let got = quantize_rows(&x, 40, 32);
        assert_eq!(got.q, want.q);
        assert_eq!(got.d, want.d);
        for (g, w) in got.sum.iter().zip(&want.sum) {
            assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{g} vs {w}");
        }
        // The ties went away from zero: 15.5 → 16, −15.5 → −16.
        assert_eq!((want.q[32], want.q[62]), (-16, 15));
    }
}
