//! bf16 × bf16 → f32 matrix product on AVX512-BF16 dot products
//! (`vdpbf16ps`): one instruction multiplies 16 pairs of bf16 and adds
//! both products of each pair to one of 16 f32 accumulators — twice the
//! multiply-adds of an f32 FMA of the same width.
//!
//! The right operand (the weight) is packed once into panels of [`NR`]
//! columns with K taken in pairs, interleaved as the instruction wants
//! them (`lane j = b[2p][j] | b[2p+1][j] << 16`). The left operand is read
//! in place: its two adjacent bf16 of a K pair are one 32-bit word,
//! broadcast to every lane. Products of bf16 are exact in f32 and the sums
//! are f32; the instruction treats subnormal inputs and results as zero and
//! rounds to nearest even — that, and the order of the sums, is all that
//! differs from an f32 GEMM of the same (bf16) values.
//!
//! The fast engine uses it for bf16 `matmul` / `matmul_bias_act` whose
//! left operand is a bf16 activation with unit-stride rows and whose
//! weight is a 2-D bf16 graph input (plain or transposed); benchmark:
//! `examples/gemm_bf16.rs`.
// Intrinsics and raw pointers: the loads and stores stay inside the slices
// (bounds checked before the kernel is entered).
#![allow(unsafe_code)]

/// Columns per packed panel (two 16-lane registers) and rows per kernel
/// call: 16 accumulators, two weight registers and a broadcast fit the 32
/// vector registers.
pub const NR: usize = 32;
pub const MR: usize = 8;

/// A weight packed for [`gemm()`]: `k × n`, in panels of [`NR`] columns, K
/// in pairs (zero past the edges).
pub struct PackedB {
    k: usize,
    n: usize,
    // Read by the x86-64 kernel only (elsewhere `available()` is false).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    data: Vec<u32>,
}

impl PackedB {
    /// Pack `b`'s `k × n` bf16 bit patterns, element (i, j) at
    /// `b[i * rs + j * cs]` (row-major: `cs = 1`; a transposed weight:
    /// `rs = 1`).
    pub fn pack(b: &[u16], k: usize, n: usize, rs: usize, cs: usize) -> PackedB {
        let pairs = k.div_ceil(2);
        let panels = n.div_ceil(NR);
        let mut data = vec![0u32; panels * pairs * NR];
        let at = |i: usize, j: usize| -> u32 {
            if i < k && j < n {
                b[i * rs + j * cs] as u32
            } else {
                0
            }
        };
        for p in 0..panels {
            for q in 0..pairs {
                let row = &mut data[(p * pairs + q) * NR..][..NR];
                for (l, w) in row.iter_mut().enumerate() {
                    let j = p * NR + l;
                    *w = at(2 * q, j) | (at(2 * q + 1, j) << 16);
                }
            }
        }
        PackedB { k, n, data }
    }

    pub fn k(&self) -> usize {
        self.k
    }
    pub fn n(&self) -> usize {
        self.n
    }
}

static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many [`gemm()`] calls this process made (tests check that a graph
/// took this path).
pub fn calls() -> usize {
    CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether this CPU has the instructions (AVX-512 F and BF16), and the
/// compile's `CpuOptions::bf16_dot` does not decline them.
pub fn available() -> bool {
    if !crate::options::current().bf16_dot {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `c` (`m × b.n()`, row stride `ldc`) = `a` (`m × b.k()` bf16 bits, row
/// stride `lda`) · `b`, rows split over the fast engine's threads.
///
/// Panics if the CPU lacks the instructions ([`available`]) or a slice is
/// too short for the shapes — callers check both when they choose it.
pub fn gemm(a: &[u16], lda: usize, m: usize, b: &PackedB, c: &mut [f32], ldc: usize) {
    let (k, n) = (b.k, b.n);
    assert!(available(), "bf16 dot products need AVX512-BF16");
    assert!(n <= ldc && k <= lda, "row strides shorter than the rows");
    if m == 0 || n == 0 {
        return;
    }
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    assert!(a.len() >= (m - 1) * lda + k && c.len() >= (m - 1) * ldc + n);
    let rows_per = (m.div_ceil(super::par::threads()).div_ceil(MR) * MR).max(MR);
    let c = &mut c[..(m - 1) * ldc + n];
    // Whole rows of `c` per chunk (the last may be short of its stride).
    super::par::for_chunks(c, rows_per * ldc, |ci, cc| {
        let r0 = ci * rows_per;
        let rows = (cc.len() + ldc - n) / ldc;
        block(&a[r0 * lda..], lda, rows, b, cc, ldc);
    });
}

/// One thread's rows: for each panel, every 8-row strip.
#[cfg(target_arch = "x86_64")]
fn block(a: &[u16], lda: usize, m: usize, b: &PackedB, c: &mut [f32], ldc: usize) {
    let pairs = b.k.div_ceil(2);
    for p in 0..b.n.div_ceil(NR) {
        let panel = &b.data[p * pairs * NR..][..pairs * NR];
        let cols = (b.n - p * NR).min(NR);
        for r0 in (0..m).step_by(MR) {
            let rows = (m - r0).min(MR);
            // SAFETY: `available()` was checked by `gemm`; rows r0..r0+rows
            // of `a` hold `k` elements and those of `c` `p*NR + cols`
            // (asserted in `gemm`), and `panel` holds `pairs * NR` words.
            unsafe {
                kernel(
                    a.as_ptr().add(r0 * lda),
                    lda,
                    rows,
                    b.k,
                    panel.as_ptr(),
                    c.as_mut_ptr().add(r0 * ldc + p * NR),
                    ldc,
                    cols,
                )
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn block(_: &[u16], _: usize, _: usize, _: &PackedB, _: &mut [f32], _: usize) {
    unreachable!("bf16dot::gemm checks available() first")
}

/// `rows` (≤ 8) × `cols` (≤ 32) of the product: 16 accumulators over all
/// K pairs, then masked stores. Rows past `rows` repeat the last one (read,
/// never stored), so the unrolled loop has no row conditions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    a: *const u16,
    lda: usize,
    rows: usize,
    k: usize,
    panel: *const u32,
    c: *mut f32,
    ldc: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    let row = |r: usize| a.add(r.min(rows - 1) * lda);
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    let full = k / 2;
    // One K pair: the two weight registers, then each row's broadcast word.
    macro_rules! step {
        ($q:expr, $word:expr) => {{
            let w = panel.add($q * NR);
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(w as *const _));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(w.add(16) as *const _));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(($word)(r) as i32));
                acc_r[0] = _mm512_dpbf16_ps(acc_r[0], av, b0);
                acc_r[1] = _mm512_dpbf16_ps(acc_r[1], av, b1);
            }
        }};
    }
    for q in 0..full {
        step!(q, |r: usize| (row(r).add(2 * q) as *const u32)
            .read_unaligned());
    }
    if k % 2 == 1 {
        // The last, unpaired k: its partner (past the row) counts as zero.
        step!(full, |r: usize| *row(r).add(k - 1) as u32);
    }
    let lo = if cols >= 16 {
        0xffff
    } else {
        (1u32 << cols) as u16 - 1
    };
    let hi = if cols >= 32 {
        0xffff
    } else if cols > 16 {
        (1u32 << (cols - 16)) as u16 - 1
    } else {
        0
    };
    for (r, acc_r) in acc.iter().enumerate().take(rows) {
        let out = c.add(r * ldc);
        // Plain stores for whole panels (masked ones are slow on Zen 4).
        if cols == NR {
            _mm512_storeu_ps(out, acc_r[0]);
            _mm512_storeu_ps(out.add(16), acc_r[1]);
        } else {
            _mm512_mask_storeu_ps(out, lo, acc_r[0]);
            if hi != 0 {
                _mm512_mask_storeu_ps(out.add(16), hi, acc_r[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16(x: f32) -> u16 {
        half::bf16::from_f32(x).to_bits()
    }
    fn val(b: u16) -> f64 {
        half::bf16::from_bits(b).to_f64()
    }

    /// Against f64 sums of the same bf16 values: within the f32
    /// accumulation bound k · 2⁻²⁴ · Σ|a·b| per element.
    #[test]
    fn matches_f64_reference_on_ragged_shapes() {
        if !available() {
            eprintln!("skipped: no AVX512-BF16 here");
            return;
        }
        let mut s = 12345u64;
        let mut rnd = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        for &(m, k, n, transposed) in &[
            (1, 1, 1, false),
            (7, 5, 33, false),
            (9, 384, 40, true),
            (17, 77, 64, false),
            (128, 1536, 96, true),
        ] {
            let a: Vec<u16> = (0..m * k).map(|_| bf16(rnd())).collect();
            let b: Vec<u16> = (0..k * n).map(|_| bf16(rnd())).collect();
            // b's (i, j): row-major k × n, or the n × k transpose read as k × n.
            let (rs, cs) = if transposed { (1, k) } else { (n, 1) };
            let p = PackedB::pack(&b, k, n, rs, cs);
            let ldc = n + 3;
            let mut c = vec![f32::NAN; m * ldc];
            gemm(&a, k, m, &p, &mut c, ldc);
            for i in 0..m {
                for j in 0..n {
                    let (mut want, mut mag) = (0f64, 0f64);
                    for t in 0..k {
                        let x = val(a[i * k + t]) * val(b[t * rs + j * cs]);
                        want += x;
                        mag += x.abs();
                    }
                    let got = c[i * ldc + j] as f64;
                    let tol = k as f64 * 2f64.powi(-24) * mag + 1e-30;
                    assert!(
                        (got - want).abs() <= tol,
                        "{m}x{k}x{n} ({i},{j}): {got} vs {want} (tol {tol})"
                    );
                }
                // The padding between rows is not written.
                for j in n..ldc.min(c.len() - i * ldc) {
                    assert!(c[i * ldc + j].is_nan());
                }
            }
        }
    }
}
