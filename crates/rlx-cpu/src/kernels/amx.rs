//! f32 matrix product on Intel AMX tiles, as accurate as an f32 GEMM.
//!
//! AMX multiplies bf16 tiles into f32 accumulators (`tdpbf16ps`): 16×16
//! outputs, 32 products each, per instruction — 16 times the multiply-adds
//! per cycle of AVX-512's f32 FMA. bf16 alone would lose 16 of f32's 24
//! significand bits, so each operand is split into three bf16 parts
//! (`x = x₁ + x₂ + x₃`, each the rounded remainder of the one before; 3 × 8
//! bits cover the 24) and the product is the sum of the six part products
//! that matter: x₁y₁, x₁y₂, x₁y₃, x₂y₁, x₂y₂, x₃y₁. The three left out are
//! below 2⁻²⁴ of the product. A product of two bf16 is exact in f32 and
//! the tile unit adds into its f32 accumulators rounding to nearest even,
//! as an f32 FMA does, so the result has an f32 GEMM's error (measured
//! against f64: 4–8·10⁻⁸ of Σ|aᵢbᵢ| where a sequential f32 FMA sum gives
//! 8–11·10⁻⁸; the tests hold it to 2⁻²²). Six products at 16× the rate:
//! still 2.7× the f32 FMA peak on paper.
//!
//! What differs from an f32 GEMM: the unit treats subnormal inputs and
//! results as zero, so parts below 2⁻¹²⁶ are lost (values under ~10⁻³³ keep
//! fewer bits). Non-finite values would meet zero parts in the tiles (inf ·
//! 0 = NaN where f32 gives ±inf): left-operand rows holding one are
//! computed in plain f32 instead, and a weight holding one reports it
//! ([`PackedB::finite`]) so the engine keeps it off the tiles.
//!
//! Measured: 1.2–1.7× the `gemm` crate's f32 GEMM at MiniLM's shapes, one
//! thread (`examples/amx_gemm.rs`) — the tile loads (18 per 24 products,
//! from L2) hold the unit to about half its peak.
//!
//! The weight is split and packed once ([`PackedB`], resident weights
//! only); the left operand's rows are split into per-thread scratch, in
//! blocks of [`ROWS`] rows, by each call. Used by the fast engine for f32
//! matmuls with a resident weight and at least [`MIN_ROWS`] rows, on
//! x86-64 Linux when the CPU has AMX-BF16 and the kernel grants the tile
//! state (`RLX_CPU_AMX=0` turns it off). The dispatch report names it.
// Inline assembly for the tile instructions (Rust has no stable AMX
// intrinsics or target feature): every tile load and store stays inside
// the slices, checked before the loops.
#![allow(unsafe_code)]

use super::gemm::Mat;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rows of the left operand split per block: the block's three parts
/// (3 × 128 × K bf16, 1.2 MB at K = 1536) stay in L2 while every column
/// panel of the weight passes over them.
pub const ROWS: usize = 128;
/// Fewer rows than this run on the `gemm` crate: the tiles compute 32 rows
/// at a time, so a short product would be mostly padding.
pub const MIN_ROWS: usize = 32;

thread_local! {
    static OFF: Cell<bool> = const { Cell::new(false) };
}

/// Whether this process runs f32 products on AMX: the CPU has AMX-BF16,
/// Linux grants the tile state, the compile's `CpuOptions::amx` is on, and
/// the calling thread is not inside [`without`].
pub fn available() -> bool {
    !OFF.with(Cell::get) && crate::options::current().amx && supported()
}

/// `f` with [`available`] false on this thread: the engine decides at
/// compile time, so tests compile programs for the other kernels here.
pub fn without<R>(f: impl FnOnce() -> R) -> R {
    let before = OFF.with(|o| o.replace(true));
    let r = f();
    OFF.with(|o| o.set(before));
    r
}

fn supported() -> bool {
    static S: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *S.get_or_init(tiles::enable)
}

/// `x` rounded to bf16 (nearest, ties to even), as f32 bits; a finite `x`
/// that would round past bf16's largest value is truncated instead, and
/// inf and NaN keep their class (a NaN stays quiet).
#[inline(always)]
fn bf16_bits(x: f32) -> u32 {
    let u = x.to_bits();
    let trunc = u & 0xffff_0000;
    let round = u.wrapping_add(0x7fff + ((u >> 16) & 1)) & 0xffff_0000;
    let finite = u & 0x7f80_0000 != 0x7f80_0000;
    let overflows = round & 0x7fff_ffff == 0x7f80_0000;
    let nan_bit = if u & 0x007f_ffff != 0 { 0x0040_0000 } else { 0 };
    if !finite {
        trunc | nan_bit
    } else if overflows {
        trunc
    } else {
        round
    }
}

/// `x`'s three bf16 parts (see the module docs); a non-finite `x` is all
/// in the first.
#[inline(always)]
fn split(x: f32) -> [u16; 3] {
    let h = bf16_bits(x);
    let finite = x.is_finite();
    let r = if finite { x - f32::from_bits(h) } else { 0.0 };
    let m = bf16_bits(r);
    let l = bf16_bits(r - f32::from_bits(m));
    [(h >> 16) as u16, (m >> 16) as u16, (l >> 16) as u16]
}

crate::fast::simd::simd_fn! {
    /// The parts of a contiguous row into three part rows (each as long
    /// as `x`), vectorized.
    fn split_row(x: &[f32], p0: &mut [u16], p1: &mut [u16], p2: &mut [u16]) {
        let n = x.len();
        let (p0, p1, p2) = (&mut p0[..n], &mut p1[..n], &mut p2[..n]);
        for i in 0..n {
            let [a, b, c] = split(x[i]);
            p0[i] = a;
            p1[i] = b;
            p2[i] = c;
        }
    }
}

/// [`split_row`] on AVX512-BF16's rounding conversion (`vcvtneps2bf16`,
/// 16 lanes per instruction: ~2.5× fewer instructions than the bit
/// arithmetic), which every AMX CPU has. It treats subnormal inputs as
/// zero, as the tiles do anyway; a row with a non-finite first part (inf,
/// NaN, or a finite value rounding past bf16's range) is split again by
/// [`split_row`], which keeps those exact.
///
/// Returns whether every element of `x` is finite.
fn split_row_fast(x: &[f32], p0: &mut [u16], p1: &mut [u16], p2: &mut [u16]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static CVT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let cvt = *CVT.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512bf16")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
        });
        let n = x.len();
        assert!(p0.len() >= n && p1.len() >= n && p2.len() >= n);
        // SAFETY: the CPU has the features (checked above) and every part
        // row holds x.len() elements (asserted).
        if cvt && unsafe { split_row_cvt(x, p0, p1, p2) } {
            return true;
        }
    }
    split_row(x, p0, p1, p2);
    x.iter().all(|v| v.is_finite())
}

/// # Safety
/// The CPU has AVX512F/BW/VL/BF16, and `p0`…`p2` hold `x.len()` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn split_row_cvt(x: &[f32], p0: &mut [u16], p1: &mut [u16], p2: &mut [u16]) -> bool {
    use std::arch::x86_64::*;
    let n = x.len();
    // bf16 lanes back to f32 (the bf16 bits in the high half).
    let widen = |h: __m256bh| -> __m512 {
        let w = _mm512_cvtepu16_epi32(std::mem::transmute::<__m256bh, __m256i>(h));
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(w))
    };
    let exp = _mm256_set1_epi16(0x7f80);
    let mut bad = 0u16;
    let mut i = 0;
    while i < n {
        let left = n - i;
        let m: u16 = if left >= 16 {
            0xffff
        } else {
            (1u16 << left) - 1
        };
        let v = _mm512_maskz_loadu_ps(m, x.as_ptr().add(i));
        let h = _mm512_cvtneps_pbh(v);
        let hi = std::mem::transmute::<__m256bh, __m256i>(h);
        bad |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(hi, exp), exp);
        let r = _mm512_sub_ps(v, widen(h));
        let mid = _mm512_cvtneps_pbh(r);
        let lo = _mm512_cvtneps_pbh(_mm512_sub_ps(r, widen(mid)));
        _mm256_mask_storeu_epi16(p0.as_mut_ptr().add(i) as *mut i16, m, hi);
        let mid = std::mem::transmute::<__m256bh, __m256i>(mid);
        _mm256_mask_storeu_epi16(p1.as_mut_ptr().add(i) as *mut i16, m, mid);
        let lo = std::mem::transmute::<__m256bh, __m256i>(lo);
        _mm256_mask_storeu_epi16(p2.as_mut_ptr().add(i) as *mut i16, m, lo);
        i += 16;
    }
    bad == 0
}

/// K padded to whole tiles (32 bf16).
fn padded_k(k: usize) -> usize {
    k.div_ceil(32) * 32
}

/// bf16 elements of scratch one call needs for a weight of `k` rows.
pub fn scratch_len(k: usize) -> usize {
    3 * ROWS * padded_k(k) + ALIGN
}

/// Elements skipped at the start of a buffer so the tiles' 64-byte rows
/// start on cache lines: a row across two lines costs two loads, which
/// halved the kernel's speed.
const ALIGN: usize = 32;

fn aligned(s: &[u16]) -> &[u16] {
    &s[s.as_ptr().align_offset(64)..]
}

fn aligned_mut(s: &mut [u16]) -> &mut [u16] {
    let o = s.as_ptr().align_offset(64);
    &mut s[o..]
}

/// A weight split and packed for the tiles: `k × n`, in panels of 16
/// columns; per panel, its three parts one after another, each `kp / 2`
/// rows of 16 (column) × 2 (consecutive K) bf16 — one 64-byte tile row per
/// K pair, the layout `tdpbf16ps` reads its right operand in. Zero past
/// the edges (K to a multiple of 32, N to a multiple of 32). Not `Clone`:
/// the data starts at the buffer's first cache line, which a copy of the
/// buffer would not keep.
#[derive(Default, Debug)]
pub struct PackedB {
    k: usize,
    n: usize,
    data: Vec<u16>,
    /// Whether every element is finite (see [`Self::finite`]).
    finite: bool,
    /// Products run with it (tests check the engine chose the tiles).
    uses: AtomicUsize,
}

impl PackedB {
    pub fn k(&self) -> usize {
        self.k
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Whether every element of the weight is finite. An inf or NaN in the
    /// weight meets the left operand's zero lower parts in the tiles (NaN
    /// where f32 gives ±inf), so the engine runs such a weight's products
    /// on the `gemm` crate instead (the report's kernel name says so).
    pub fn finite(&self) -> bool {
        self.finite
    }

    /// Element (kk, j) of the weight, from its parts (exact: they sum to
    /// it), `packed` being `aligned(&self.data)`.
    fn value(&self, packed: &[u16], kk: usize, j: usize) -> f32 {
        let part = self.part_len();
        let at = (j / 16) * 3 * part + (kk / 2) * 32 + (j % 16) * 2 + (kk & 1);
        let f = |s: usize| f32::from_bits((packed[at + s * part] as u32) << 16);
        f(0) + (f(1) + f(2))
    }

    /// Calls of [`gemm()`] made with this weight so far.
    pub fn uses(&self) -> usize {
        self.uses.load(Ordering::Relaxed)
    }

    /// bf16 elements of one part of one panel.
    fn part_len(&self) -> usize {
        padded_k(self.k) / 2 * 32
    }

    /// Split and pack `b` (any strides) into this buffer, reusing its
    /// allocation; every element is written, the padding too.
    pub fn repack(&mut self, b: Mat<f32>) {
        let (k, n) = (b.rows, b.cols);
        assert!(
            k == 0 || n == 0 || (k - 1) * b.row_stride + (n - 1) * b.col_stride < b.data.len(),
            "amx: weight strides leave the slice"
        );
        self.k = k;
        self.n = n;
        self.finite = true;
        let part = self.part_len();
        let panels = n.div_ceil(32) * 2;
        self.data.clear();
        self.data.resize(panels * 3 * part + ALIGN, 0);
        if k == 0 || n == 0 {
            return;
        }
        let data = aligned_mut(&mut self.data);
        let at =
            |kk: usize, j: usize| (j / 16) * 3 * part + (kk / 2) * 32 + (j % 16) * 2 + (kk & 1);
        // A contiguous column (a transposed weight: PyTorch's (out, in))
        // or row goes through the vectorized split, then is scattered.
        let line = if b.row_stride == 1 { k } else { n };
        let mut t = vec![0u16; 3 * line];
        let (t0, rest) = t.split_at_mut(line);
        let (t1, t2) = rest.split_at_mut(line);
        if b.row_stride == 1 || b.col_stride == 1 {
            let by_cols = b.row_stride == 1;
            let (lines, stride) = if by_cols {
                (n, b.col_stride)
            } else {
                (k, b.row_stride)
            };
            for l in 0..lines {
                self.finite &= split_row_fast(&b.data[l * stride..][..line], t0, t1, t2);
                for (s, p) in [&*t0, &*t1, &*t2].into_iter().enumerate() {
                    for (e, &v) in p.iter().enumerate() {
                        let (kk, j) = if by_cols { (e, l) } else { (l, e) };
                        data[at(kk, j) + s * part] = v;
                    }
                }
            }
            return;
        }
        for kk in 0..k {
            for j in 0..n {
                let v = b.data[kk * b.row_stride + j * b.col_stride];
                self.finite &= v.is_finite();
                for (s, v) in split(v).into_iter().enumerate() {
                    data[at(kk, j) + s * part] = v;
                }
            }
        }
    }
}

/// `c` (`a.rows × b.n`, row stride `ldc`) = `a · b`, or `c += a · b` with
/// `acc`, on this thread. `scratch` holds [`scratch_len`]`(b.k)` elements.
/// Panics unless [`available`] said yes in this process.
pub fn gemm(a: Mat<f32>, b: &PackedB, c: &mut [f32], ldc: usize, acc: bool, scratch: &mut [u16]) {
    let (m, k, n) = (a.rows, b.k, b.n);
    assert_eq!(a.cols, k, "amx: inner dimensions differ");
    if m == 0 || n == 0 {
        return;
    }
    assert!(supported(), "amx: tiles used where they are not available");
    assert!(
        (m - 1) * ldc + n <= c.len(),
        "amx: the output is shorter than its rows"
    );
    assert!(
        k == 0 || (m - 1) * a.row_stride + (k - 1) * a.col_stride < a.data.len(),
        "amx: left operand strides leave the slice"
    );
    let kp = padded_k(k);
    let scratch = aligned_mut(&mut scratch[..scratch_len(k)]);
    let packed = aligned(&b.data);
    b.uses.fetch_add(1, Ordering::Relaxed);
    tiles::configure();
    for r0 in (0..m).step_by(ROWS) {
        let rows = ROWS.min(m - r0);
        let rp = rows.div_ceil(32) * 32;
        // The block's rows split into the three part matrices (rp × kp,
        // zero padded).
        let (p0, rest) = scratch.split_at_mut(ROWS * kp);
        let (p1, p2) = rest.split_at_mut(ROWS * kp);
        // Rows holding inf or NaN: in the tiles an infinity meets zero
        // parts (NaN where f32 gives ±inf), so these rows are not written
        // from the tiles but computed below in plain f32.
        let mut nonfinite = [false; ROWS];
        for (i, bad) in nonfinite[..rp].iter_mut().enumerate() {
            let span = i * kp..(i + 1) * kp;
            let (d0, d1, d2) = (&mut p0[span.clone()], &mut p1[span.clone()], &mut p2[span]);
            if i >= rows {
                d0.fill(0);
                d1.fill(0);
                d2.fill(0);
                continue;
            }
            let src = r0 + i;
            if a.col_stride == 1 {
                let x = &a.data[src * a.row_stride..][..k];
                *bad = !split_row_fast(x, d0, d1, d2);
            } else {
                // A strided row (not the engine's case): element by element.
                for kk in 0..k {
                    let v = a.data[src * a.row_stride + kk * a.col_stride];
                    *bad |= !v.is_finite();
                    let [x, y, z] = split(v);
                    (d0[kk], d1[kk], d2[kk]) = (x, y, z);
                }
            }
            d0[k..].fill(0);
            d1[k..].fill(0);
            d2[k..].fill(0);
        }
        let parts = [&p0[..rp * kp], &p1[..rp * kp], &p2[..rp * kp]];
        let mut out = [0f32; 32 * 32];
        for c0 in (0..n).step_by(32) {
            let panel = &packed[(c0 / 16) * 3 * b.part_len()..][..6 * b.part_len()];
            for i0 in (0..rp).step_by(32) {
                // SAFETY: `supported()` holds and `configure` ran on this
                // thread; the part rows i0..i0+32 and the panel pair exist
                // (sliced above), each tile load reads 16 rows of 64 bytes
                // inside them, and `out` holds the four 16×16 f32 tiles.
                unsafe { tiles::block(&parts, i0, kp, panel, b.part_len(), &mut out) };
                let valid_rows = 32.min(rows.saturating_sub(i0));
                let cols = 32.min(n - c0);
                for (i, o) in out.chunks_exact(32).take(valid_rows).enumerate() {
                    if nonfinite[i0 + i] {
                        continue;
                    }
                    let dst = &mut c[(r0 + i0 + i) * ldc + c0..][..cols];
                    if acc {
                        for (d, &v) in dst.iter_mut().zip(o) {
                            *d += v;
                        }
                    } else {
                        dst.copy_from_slice(&o[..cols]);
                    }
                }
            }
        }
        for i in (0..rows).filter(|&i| nonfinite[i]) {
            let src = r0 + i;
            for j in 0..n {
                let mut s = 0f32;
                for kk in 0..k {
                    s += a.data[src * a.row_stride + kk * a.col_stride] * b.value(packed, kk, j);
                }
                let d = &mut c[src * ldc + j];
                *d = if acc { *d + s } else { s };
            }
        }
    }
    tiles::release();
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tiles {
    use std::arch::asm;

    /// Ask Linux for the AMX tile state (`arch_prctl(ARCH_REQ_XCOMP_PERM,
    /// XFEATURE_XTILEDATA)`), after CPUID says AMX-TILE and AMX-BF16.
    pub fn enable() -> bool {
        let ext = std::arch::x86_64::__cpuid_count(7, 0);
        let (bf16, tile) = (ext.edx & (1 << 22) != 0, ext.edx & (1 << 24) != 0);
        if !(bf16 && tile) {
            return false;
        }
        const SYS_ARCH_PRCTL: i64 = 158;
        const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
        const XFEATURE_XTILEDATA: i64 = 18;
        let ret: i64;
        // SAFETY: a plain system call that changes only this process's
        // permitted extended state; it clobbers rcx and r11.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") SYS_ARCH_PRCTL => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret == 0
    }

    /// Load the tile configuration on this thread: palette 1, eight tiles
    /// of 16 rows × 64 bytes (tmm0–3 the f32 accumulators, tmm4–5 left
    /// parts, tmm6–7 right parts).
    pub fn configure() {
        let mut cfg = [0u8; 64];
        cfg[0] = 1;
        for t in 0..8 {
            cfg[16 + 2 * t] = 64;
            cfg[48 + t] = 16;
        }
        // SAFETY: a valid palette-1 configuration, 64 bytes; callers
        // checked `supported()`.
        unsafe { asm!("ldtilecfg [{}]", in(reg) cfg.as_ptr(), options(nostack, readonly)) };
    }

    pub fn release() {
        // SAFETY: only resets this thread's tile state.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }

    /// Part products, as (left part, right part): grouped by left part
    /// so each pair of left tiles is loaded once for all of its right
    /// parts.
    const PAIRS: [(usize, usize); 6] = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)];

    macro_rules! load {
        ($t:literal, $p:expr, $stride:expr) => {
            asm!(concat!("tileloadd tmm", $t, ", [{}+{}*1]"), in(reg) $p, in(reg) $stride,
                 options(nostack, readonly))
        };
    }
    macro_rules! dp {
        ($c:literal, $a:literal, $b:literal) => {
            asm!(
                concat!("tdpbf16ps tmm", $c, ", tmm", $a, ", tmm", $b),
                options(nostack, nomem)
            )
        };
    }
    macro_rules! store {
        ($t:literal, $p:expr) => {
            asm!(concat!("tilestored [{}+{}*1], tmm", $t), in(reg) $p, in(reg) 128usize,
                 options(nostack))
        };
    }

    /// One 32×32 output block: rows `i0..i0+32` of the left parts (row
    /// stride `kp`) times the two 16-column panels at `panel` (each three
    /// parts of `part` elements), summed over K, into `out` (32 × 32).
    ///
    /// # Safety
    /// The tile configuration of [`configure`] is loaded on this thread;
    /// `parts[s]` has rows `i0..i0 + 32` of `kp` elements, `panel` has 6 ×
    /// `part` elements and `part == kp / 2 * 32`.
    pub unsafe fn block(
        parts: &[&[u16]; 3],
        i0: usize,
        kp: usize,
        panel: &[u16],
        part: usize,
        out: &mut [f32; 1024],
    ) {
        debug_assert!(parts.iter().all(|p| p.len() >= (i0 + 32) * kp));
        debug_assert!(panel.len() >= 6 * part && part == kp / 2 * 32);
        let lda = kp * 2;
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, nomem)
            );
            for kb in (0..kp).step_by(32) {
                let mut last = usize::MAX;
                for (sa, sb) in PAIRS {
                    if sa != last {
                        let a = parts[sa].as_ptr().add(i0 * kp + kb);
                        load!("4", a, lda);
                        load!("5", a.add(16 * kp), lda);
                        last = sa;
                    }
                    let b = panel.as_ptr().add(sb * part + kb / 2 * 32);
                    load!("6", b, 64usize);
                    load!("7", b.add(3 * part), 64usize);
                    dp!("0", "4", "6");
                    dp!("1", "4", "7");
                    dp!("2", "5", "6");
                    dp!("3", "5", "7");
                }
            }
            let o = out.as_mut_ptr();
            store!("0", o);
            store!("1", o.add(16));
            store!("2", o.add(512));
            store!("3", o.add(528));
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod tiles {
    pub fn enable() -> bool {
        false
    }
    pub fn configure() {}
    pub fn release() {}
    /// # Safety
    /// Never called: [`super::supported`] is false here.
    pub unsafe fn block(
        _: &[&[u16]; 3],
        _: usize,
        _: usize,
        _: &[u16],
        _: usize,
        _: &mut [f32; 1024],
    ) {
        unreachable!("amx: no tiles on this target")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm128::tests::rnd as lcg;

    #[test]
    fn parts_sum_to_the_value() {
        let mut s = 7;
        for _ in 0..100_000 {
            let x = lcg(&mut s) * 10f32.powi((lcg(&mut s) * 30.0) as i32);
            let p = split(x);
            let sum: f64 = p
                .iter()
                .map(|&h| f32::from_bits((h as u32) << 16) as f64)
                .sum();
            assert_eq!(sum, x as f64, "{x}: parts {p:?}");
        }
        for x in [f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -f32::MAX] {
            let p = split(x);
            assert_eq!(
                f32::from_bits((p[0] as u32) << 16).is_infinite(),
                x.is_infinite(),
                "{x}"
            );
        }
        assert!(f32::from_bits((split(f32::NAN)[0] as u32) << 16).is_nan());
    }

    /// The conversion-instruction split gives the same parts as the exact
    /// one wherever no part is subnormal, at every tail length; rows with
    /// inf, NaN or values past bf16's range fall back to the exact split.
    #[test]
    fn fast_split_matches_exact_split() {
        let mut s = 3;
        for n in 0..70 {
            for special in [None, Some(f32::INFINITY), Some(f32::NAN), Some(-f32::MAX)] {
                let mut x: Vec<f32> = (0..n)
                    .map(|_| lcg(&mut s) * 10f32.powi((lcg(&mut s) * 25.0) as i32))
                    .collect();
                if let (Some(v), true) = (special, n > 0) {
                    x[n / 2] = v;
                }
                let mut fast = vec![vec![0u16; n]; 3];
                let [f0, f1, f2] = &mut fast[..] else {
                    unreachable!()
                };
                split_row_fast(&x, f0, f1, f2);
                for (i, &v) in x.iter().enumerate() {
                    let want = split(v);
                    let got = [fast[0][i], fast[1][i], fast[2][i]];
                    assert_eq!(got, want, "n {n} [{i}] = {v:e}");
                }
            }
        }
    }

    /// Left-operand rows holding inf or NaN give what f32 gives: ±inf,
    /// or NaN where infinities cancel (in the tiles their zero lower parts
    /// would meet the weight's parts and an exactly representable weight's
    /// zero parts: inf · 0 = NaN). A weight with an inf or NaN says so.
    #[test]
    fn non_finite_values_give_f32_results() {
        if !available() {
            eprintln!("amx: no AMX tiles on this machine; the kernel is not used here");
            return;
        }
        let (m, k, n) = (40, 50, 20);
        let mut s = 5;
        let mut a: Vec<f32> = (0..m * k).map(|_| lcg(&mut s)).collect();
        let mut b: Vec<f32> = (0..k * n).map(|_| lcg(&mut s)).collect();
        // Exactly bf16: its lower parts are zero.
        b[7 * n] = 0.5;
        a[3 * k + 7] = f32::INFINITY;
        a[5 * k + 1] = f32::NAN;
        a[9 * k + 2] = f32::NEG_INFINITY;
        a[9 * k + 3] = f32::INFINITY;
        a[39 * k + 7] = -f32::INFINITY;
        let mut p = PackedB::default();
        p.repack(Mat::row_major(&b, k, n));
        assert!(p.finite());
        for acc in [false, true] {
            let c0: Vec<f32> = (0..m * n).map(|i| i as f32 * 0.25).collect();
            let mut c = if acc { c0.clone() } else { vec![0.0; m * n] };
            let mut scratch = vec![0u16; scratch_len(k)];
            gemm(Mat::row_major(&a, m, k), &p, &mut c, n, acc, &mut scratch);
            for i in 0..m {
                for j in 0..n {
                    let base = if acc { c0[i * n + j] as f64 } else { 0.0 };
                    let want = (0..k).fold(base, |t, kk| {
                        t + a[i * k + kk] as f64 * b[kk * n + j] as f64
                    });
                    let got = c[i * n + j] as f64;
                    let ok = if want.is_nan() {
                        got.is_nan()
                    } else if want.is_infinite() {
                        got == want
                    } else {
                        (got - want).abs() <= 1e-5 * (1.0 + want.abs())
                    };
                    assert!(ok, "acc {acc} [{i}, {j}]: {got} vs {want}");
                }
            }
        }
        b[10] = f32::NAN;
        p.repack(Mat::row_major(&b, k, n));
        assert!(!p.finite());
        b[10] = f32::INFINITY;
        p.repack(Mat::row_major(&b, n, k).t());
        assert!(!p.finite());
    }

    /// Against an f64 product of the same f32 values: the error, relative
    /// to Σ|aᵢbᵢ| of each output, stays under 2⁻²² — an f32 GEMM's bound
    /// at these sizes — at edge shapes (rows, K and N not multiples of a
    /// tile, a transposed weight and left operand, accumulation).
    #[test]
    fn matches_f64_at_f32_accuracy() {
        if !available() {
            eprintln!("amx: no AMX tiles on this machine; the kernel is not used here");
            return;
        }
        let mut s = 1;
        for &(m, k, n, bt, at, acc) in &[
            (32, 32, 32, false, false, false),
            (33, 17, 7, false, false, false),
            (130, 384, 70, true, false, true),
            (300, 100, 45, false, true, false),
            (64, 1536, 384, true, false, false),
        ] {
            let a: Vec<f32> = (0..m * k).map(|_| lcg(&mut s)).collect();
            let b: Vec<f32> = (0..k * n).map(|_| lcg(&mut s)).collect();
            let c0: Vec<f32> = (0..m * n).map(|_| lcg(&mut s)).collect();
            let am = if at {
                Mat::row_major(&a, k, m).t()
            } else {
                Mat::row_major(&a, m, k)
            };
            let bm = if bt {
                Mat::row_major(&b, n, k).t()
            } else {
                Mat::row_major(&b, k, n)
            };
            let mut p = PackedB::default();
            p.repack(bm);
            let mut c = if acc { c0.clone() } else { vec![0.0; m * n] };
            let mut scratch = vec![0u16; scratch_len(k)];
            gemm(am, &p, &mut c, n, acc, &mut scratch);
            let mut worst = 0f64;
            for i in 0..m {
                for j in 0..n {
                    let (mut r, mut mag) = (if acc { c0[i * n + j] as f64 } else { 0.0 }, 0f64);
                    mag += r.abs();
                    for kk in 0..k {
                        let x = am.data[i * am.row_stride + kk * am.col_stride] as f64
                            * bm.data[kk * bm.row_stride + j * bm.col_stride] as f64;
                        r += x;
                        mag += x.abs();
                    }
                    worst = worst.max((c[i * n + j] as f64 - r).abs() / mag);
                }
            }
            assert!(
                worst < 2f64.powi(-22),
                "{m}x{k}x{n}: error {worst:e} of sum |ab|"
            );
        }
    }
}
