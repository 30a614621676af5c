//! f32 GEMM on 128-bit vectors, written for wasm32 `simd128` under V8:
//! the browser build's f32 products run here (the fast engine's
//! `matmul`/`matmul_bias_act` and attention's two products on wasm32;
//! natively the `gemm` crate runs them and this code is only tested).
//!
//! Why not the `gemm` crate's simd128 micro-kernel: its 12×4 tile keeps
//! 12 accumulators, 3 lhs vectors and a broadcast live — 16 v128 values,
//! and V8's x64 backend has 15 allocatable xmm registers (one is its
//! scratch), so the tile spills in the inner loop. The tile here is
//! `MR` = 4 rows × [`NR`] = 8 columns: 8 accumulators and two weight
//! vectors; LLVM emits a step's four row broadcasts (`v128.load32_splat`)
//! before their second use, so 14 values are live — it fits. 5 and 6
//! rows (17 and 20 live) and a K loop unrolled by hand (all broadcasts of
//! both steps hoisted) spill and run at 0.55–0.75× the 4-row speed in
//! Node 20; V8 unrolls the plain loop itself. simd128 has no FMA, so each
//! step is a multiply and an add. Measured (`benches/wasm/sgemm.mjs`):
//! 36–41 GFLOP/s at MiniLM's shapes vs 28–32 for the `gemm` crate in the
//! same run (`benches/results/wasm-vs-native.md`).
//!
//! Layout: `b` (the weight) is packed into panels of [`NR`] columns, each
//! panel k-major over the whole K (`panel[p·NR + j] = b[p][j0 + j]`, zero
//! past the last column), so any K block of a panel is contiguous and one
//! packing serves every K block. `a` is packed per (row block, K block)
//! into strips of `MR` rows, k-major (`strip[p·MR + r]`), so the kernel's
//! broadcasts come from one pointer. K is blocked (`KC`) so a panel's block
//! (`KC·NR` floats) stays in L1 while the row strips stream past it.
//!
//! The vector type is `core::arch::wasm32::v128` on wasm32 with simd128;
//! elsewhere a portable `[f32; 4]` with the same operations, multiply then
//! add, unfused — the same roundings as the wasm build — so the native
//! tests check the same blocking, packing and edge code.
//!
//! Relaxed SIMD (cargo feature `relaxed-simd`, `./scripts/build-wasm
//! --relaxed`): each step is one `f32x4.relaxed_madd`, which V8 turns
//! into one `vfmadd231ps` on x64 with FMA3 — 14 wasm instructions per K
//! step instead of 22. Measured in Node 20 (`benches/wasm/sgemm.mjs`, same
//! run): 4×8 at 44–52 GFLOP/s against 36–44 for plain simd128 (1.14–1.24×)
//! at MiniLM's shapes; 5×8 and 6×8 still spill and stay slower than 4×8.
//! The madd rounds once (fused) or twice depending on the machine; the
//! tests' f64 bounds hold for both (natively the feature fuses the
//! portable vectors, `f32::mul_add`).
// Raw pointers in the micro-kernel: every load and store stays inside a
// buffer whose length is checked (or made) before the kernel is entered.
#![allow(unsafe_code)]

use super::gemm::Mat;
use std::cell::RefCell;

/// The instruction set the wasm32 kernel is built for, as the dispatch
/// report names it: plain `simd128` (a multiply and an add per step), or
/// with relaxed SIMD's multiply-add where the build enables it (cargo
/// feature `relaxed-simd`, `./scripts/build-wasm --relaxed`; Node 20 needs
/// `--experimental-wasm-relaxed-simd`, Chrome ≥ 114 runs it as is).
pub const VARIANT: &str = if cfg!(all(
    target_arch = "wasm32",
    target_feature = "simd128",
    feature = "relaxed-simd"
)) {
    "simd128+relaxed-madd"
} else {
    "simd128"
};

/// Columns per packed panel and per tile: two 4-lane vectors.
pub const NR: usize = 8;
/// Rows per tile of the kernel [`gemm()`] uses (the fastest in Node 20; see
/// the module docs).
pub const MR: usize = 4;
/// Longest K block: a panel's block is `KC · NR · 4` bytes (12 KiB).
const KC: usize = 384;
/// Most rows packed per A block (`MC · KC · 4` bytes = 384 KiB, in L2);
/// more rows are split into even blocks.
const MC: usize = 256;

/// `b` packed for the kernel ([`with_packed`], [`gemm_packed`]): `k × n`,
/// panels of [`NR`] columns, each k-major over all of K.
#[derive(Default, Debug, Clone)]
pub struct PackedB {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

/// Consecutive panels of a [`PackedB`]: all of them, or the columns a
/// thread takes when a product with few rows is split by columns.
#[derive(Clone, Copy)]
pub struct Panels<'a> {
    k: usize,
    n: usize,
    data: &'a [f32],
}

impl PackedB {
    /// Every panel.
    pub fn all(&self) -> Panels<'_> {
        Panels {
            k: self.k,
            n: self.n,
            data: &self.data,
        }
    }

    /// Panels `r`: columns `r.start·NR .. min(r.end·NR, n)`.
    pub fn panels(&self, r: std::ops::Range<usize>) -> Panels<'_> {
        let end = r.end.min(self.n.div_ceil(NR));
        let start = r.start.min(end);
        Panels {
            k: self.k,
            n: (end * NR).min(self.n) - start * NR,
            data: &self.data[start * self.k * NR..end * self.k * NR],
        }
    }

    /// Pack `b` (any strides: row-major or a transposed weight).
    pub fn pack(b: Mat<f32>) -> PackedB {
        let mut p = PackedB::default();
        p.repack(b);
        p
    }

    /// Pack `b` into this buffer, reusing its allocation (grows only).
    /// Every element is written (the padding too), so the buffer is never
    /// cleared first.
    pub fn repack(&mut self, b: Mat<f32>) {
        let (k, n) = (b.rows, b.cols);
        assert!(b_in_bounds(&b), "gemm128: weight strides leave the slice");
        self.k = k;
        self.n = n;
        self.data.resize(n.div_ceil(NR) * k * NR, 0.0);
        if k == 0 || n == 0 {
            return;
        }
        let full = n / NR;
        if b.col_stride == 1 {
            // Row-major: groups of GROUP panels, each row's piece of a
            // group read once (two cache lines) and its 8-float parts
            // stored to the group's panels in step. Row by row across all
            // panels (stores at a stride of k·NR floats, a multiple of
            // 4 KiB at MiniLM's K) or one panel at a time took 0.36–0.45
            // ns per float in Node against 0.17–0.20 for 4 panels
            // (`sgemm_pack` in examples/wasm_sgemm.rs, hot weights).
            // Fixed-size copies: two vector loads and stores.
            const GROUP: usize = 4;
            for g0 in (0..full).step_by(GROUP) {
                let g1 = (g0 + GROUP).min(full);
                for p in 0..k {
                    let row = &b.data[p * b.row_stride + g0 * NR..][..(g1 - g0) * NR];
                    for (jp, src) in (g0..g1).zip(row.chunks_exact(NR)) {
                        let src: &[f32; NR] = src.try_into().unwrap();
                        let dst: &mut [f32; NR] = (&mut self.data[(jp * k + p) * NR..][..NR])
                            .try_into()
                            .unwrap();
                        *dst = *src;
                    }
                }
            }
        } else {
            // Transposed (or general): NR columns at a time, each read
            // along K (contiguous when `row_stride == 1`).
            for jp in 0..full {
                let panel = &mut self.data[jp * k * NR..][..k * NR];
                let col = |j: usize| (jp * NR + j) * b.col_stride;
                let cols: [usize; NR] = std::array::from_fn(col);
                for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    for (d, &c0) in dst.iter_mut().zip(&cols) {
                        *d = b.data[c0 + p * b.row_stride];
                    }
                }
            }
        }
        // The last, partial panel (zero past column n), element by element.
        if full * NR < n {
            let panel = &mut self.data[full * k * NR..][..k * NR];
            for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                for (j, d) in dst.iter_mut().enumerate() {
                    let col = full * NR + j;
                    *d = if col < n {
                        b.data[p * b.row_stride + col * b.col_stride]
                    } else {
                        0.0
                    };
                }
            }
        }
    }

    pub fn k(&self) -> usize {
        self.k
    }
    pub fn n(&self) -> usize {
        self.n
    }
}

fn b_in_bounds(b: &Mat<f32>) -> bool {
    b.rows == 0
        || b.cols == 0
        || (b.rows - 1)
            .checked_mul(b.row_stride)
            .zip((b.cols - 1).checked_mul(b.col_stride))
            .and_then(|(r, c)| r.checked_add(c))
            .is_some_and(|last| last < b.data.len())
}

thread_local! {
    /// Per-thread packing buffers, kept between calls so a steady-state
    /// run does not allocate: A's strips, and the weight packed by
    /// [`with_packed`].
    static A_BUF: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static B_BUF: RefCell<PackedB> = RefCell::new(PackedB::default());
}

static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Products computed here so far in this process (tests check that a
/// graph took this path).
pub fn calls() -> usize {
    CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// `f(b packed)`, packed into the per-thread buffer, so several products
/// with one weight ([`gemm_packed`] on blocks of rows) pack it once.
/// (Packing pays even for a row-major weight: reading its rows in place,
/// 8 floats per row and K step, measured 0.6–1.0×, mostly ~0.7×, the
/// packed speed in Node at MiniLM's shapes, packing included.) Panics if `f` calls
/// `with_packed`, [`gemm()`] or [`gemm_scaled`] (the buffer is in use).
pub fn with_packed<T>(b: Mat<f32>, f: impl FnOnce(&PackedB) -> T) -> T {
    B_BUF.with(|pb| {
        let mut pb = pb.borrow_mut();
        pb.repack(b);
        f(&pb)
    })
}

/// `c (m×n, row stride ldc) = a (m×k) · b (k×n)`. Panics on mismatched
/// shapes or strides that leave a slice (callers derive them from
/// verified shapes).
pub fn gemm(a: Mat<f32>, b: Mat<f32>, c: &mut [f32], ldc: usize) {
    gemm_scaled(a, b, c, ldc, 1.0)
}

/// `c = scale · a · b` ([`gemm()`] with the scale applied as the tiles are
/// stored).
pub fn gemm_scaled(a: Mat<f32>, b: Mat<f32>, c: &mut [f32], ldc: usize, scale: f32) {
    gemm_scaled_acc(a, b, c, ldc, scale, false)
}

/// [`gemm_scaled`], adding onto `c` with `accumulate`.
pub fn gemm_scaled_acc(
    a: Mat<f32>,
    b: Mat<f32>,
    c: &mut [f32],
    ldc: usize,
    scale: f32,
    accumulate: bool,
) {
    assert!(a.cols == b.rows, "gemm128: inner dimensions differ");
    with_packed(b, |w| {
        A_BUF.with(|abuf| {
            run::<MR>(
                a,
                w.all(),
                c,
                ldc,
                scale,
                accumulate,
                &mut abuf.borrow_mut(),
            )
        })
    });
}

/// [`gemm()`] with a chosen tile height (4, 5 or 6 rows; the benchmark
/// compares them).
pub fn gemm_tuned<const R: usize>(a: Mat<f32>, b: Mat<f32>, c: &mut [f32], ldc: usize) {
    // The edge-tile buffer in `run` holds 6 rows.
    const { assert!(R >= 1 && R <= 6, "gemm128: 1 to 6 rows per tile") };
    assert!(a.cols == b.rows, "gemm128: inner dimensions differ");
    with_packed(b, |w| {
        A_BUF.with(|abuf| run::<R>(a, w.all(), c, ldc, 1.0, false, &mut abuf.borrow_mut()))
    });
}

/// `c (m×n, row stride ldc) = a (m×k) · w`, `w` packed beforehand.
pub fn gemm_packed(a: Mat<f32>, w: &PackedB, c: &mut [f32], ldc: usize) {
    gemm_packed_into(a, w, c, ldc, false)
}

/// [`gemm_packed`], or with `accumulate` `c += a · w` (c holds a residual).
pub fn gemm_packed_into(a: Mat<f32>, w: &PackedB, c: &mut [f32], ldc: usize, accumulate: bool) {
    gemm_panels_into(a, w.all(), c, ldc, accumulate)
}

/// [`gemm_packed_into`] over some of the weight's panels ([`PackedB::panels`]):
/// `c` holds just their columns.
pub fn gemm_panels_into(a: Mat<f32>, w: Panels<'_>, c: &mut [f32], ldc: usize, accumulate: bool) {
    A_BUF.with(|abuf| run::<MR>(a, w, c, ldc, 1.0, accumulate, &mut abuf.borrow_mut()));
}

// With `relaxed-simd` the relaxed instructions are enabled here only (the
// kernel and `v4::madd` are inlined into this function).
#[cfg_attr(
    all(target_arch = "wasm32", feature = "relaxed-simd"),
    target_feature(enable = "relaxed-simd")
)]
fn run<const R: usize>(
    a: Mat<f32>,
    b: Panels<'_>,
    c: &mut [f32],
    ldc: usize,
    scale: f32,
    accumulate: bool,
    abuf: &mut Vec<f32>,
) {
    let (m, k, n) = (a.rows, b.k, b.n);
    assert!(a.cols == k, "gemm128: inner dimensions differ");
    assert!(b_in_bounds(&a), "gemm128: operand strides leave the slice");
    assert!(
        ldc >= n && (m == 0 || n == 0 || (m - 1) * ldc + n <= c.len()),
        "gemm128: output slice too small"
    );
    if m == 0 || n == 0 {
        return;
    }
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if k == 0 {
        if !accumulate {
            for row in c.chunks_mut(ldc).take(m) {
                row[..n].fill(0.0);
            }
        }
        return;
    }
    // Even K blocks of at most KC; even row blocks of at most MC.
    let kc_max = k.div_ceil(k.div_ceil(KC));
    let mc_max = m.div_ceil(m.div_ceil(MC)).div_ceil(R) * R;
    abuf.resize(mc_max * kc_max, 0.0);
    let mut tile = [0f32; 6 * NR];
    for p0 in (0..k).step_by(kc_max) {
        let kc = kc_max.min(k - p0);
        // The first K block stores its tiles, later ones add to them.
        let first = p0 == 0 && !accumulate;
        for i0 in (0..m).step_by(mc_max) {
            let mc = mc_max.min(m - i0);
            pack_a::<R>(&a, i0, mc, p0, kc, abuf);
            for jp in 0..n.div_ceil(NR) {
                let j0 = jp * NR;
                let cols = (n - j0).min(NR);
                let panel = &b.data[jp * k * NR + p0 * NR..][..kc * NR];
                for (si, strip) in abuf[..mc.div_ceil(R) * R * kc]
                    .chunks_exact(R * kc)
                    .enumerate()
                {
                    let r0 = i0 + si * R;
                    let rows = (m - r0).min(R);
                    let out = r0 * ldc + j0;
                    if rows == R && cols == NR {
                        // SAFETY: `strip` holds R·kc and `panel` kc·NR
                        // floats; rows r0..r0+R, columns j0..j0+NR of `c`
                        // lie inside it (`(m-1)·ldc + n ≤ c.len()`,
                        // asserted above).
                        unsafe {
                            kernel::<R>(
                                kc,
                                strip.as_ptr(),
                                panel.as_ptr(),
                                c.as_mut_ptr().add(out),
                                ldc,
                                !first,
                                scale,
                            )
                        }
                    } else {
                        // An edge tile: computed whole into `tile`, then the
                        // valid part moved out.
                        let t = &mut tile[..R * NR];
                        // SAFETY: as above, with `t` (R rows of NR) as the output.
                        unsafe {
                            kernel::<R>(
                                kc,
                                strip.as_ptr(),
                                panel.as_ptr(),
                                t.as_mut_ptr(),
                                NR,
                                false,
                                scale,
                            )
                        }
                        for r in 0..rows {
                            let dst = &mut c[out + r * ldc..][..cols];
                            let src = &t[r * NR..][..cols];
                            if first {
                                dst.copy_from_slice(src);
                            } else {
                                for (d, &s) in dst.iter_mut().zip(src) {
                                    *d += s;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Rows i0..i0+mc, K p0..p0+kc of `a` into strips of R rows, k-major;
/// rows past `m` are zero.
fn pack_a<const R: usize>(
    a: &Mat<f32>,
    i0: usize,
    mc: usize,
    p0: usize,
    kc: usize,
    buf: &mut [f32],
) {
    for (si, strip) in buf[..mc.div_ceil(R) * R * kc]
        .chunks_exact_mut(R * kc)
        .enumerate()
    {
        for r in 0..R {
            let i = si * R + r;
            if i >= mc {
                for p in 0..kc {
                    strip[p * R + r] = 0.0;
                }
                continue;
            }
            let row = (i0 + i) * a.row_stride + p0 * a.col_stride;
            if a.col_stride == 1 {
                for (p, &x) in a.data[row..row + kc].iter().enumerate() {
                    strip[p * R + r] = x;
                }
            } else {
                for p in 0..kc {
                    strip[p * R + r] = a.data[row + p * a.col_stride];
                }
            }
        }
    }
}

/// The R × NR tile: `c (=|+=) scale · Σ_p a[p·R + r] · b[p·NR + j]`,
/// 2·R vector accumulators held across all `kc` steps. (Unrolling the K
/// loop here was slower in Node: LLVM then hoists every broadcast of the
/// unrolled steps, and the live vectors outgrow V8's registers; V8 unrolls
/// the plain loop itself.)
///
/// # Safety
/// `a` readable for `R·kc` floats, `b` for `kc·NR`, `c` writable (and readable with `acc`) for R rows of NR at row
/// stride `ldc`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn kernel<const R: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    acc: bool,
    scale: f32,
) {
    use v4::*;
    let mut s = [[zero(); 2]; R];
    let (mut a, mut b) = (a, b);
    for _ in 0..kc {
        let b0 = load(b);
        let b1 = load(b.add(4));
        for (r, sr) in s.iter_mut().enumerate() {
            let x = splat(a.add(r));
            sr[0] = madd(sr[0], x, b0);
            sr[1] = madd(sr[1], x, b1);
        }
        a = a.add(R);
        b = b.add(NR);
    }
    if scale != 1.0 {
        let sv = splat_val(scale);
        for sr in s.iter_mut() {
            sr[0] = mul(sr[0], sv);
            sr[1] = mul(sr[1], sv);
        }
    }
    for (r, sr) in s.iter().enumerate() {
        let o = c.add(r * ldc);
        if acc {
            store(o, add(load(o), sr[0]));
            store(o.add(4), add(load(o.add(4)), sr[1]));
        } else {
            store(o, sr[0]);
            store(o.add(4), sr[1]);
        }
    }
}

/// The browser's vectors: wasm simd128.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod v4 {
    use core::arch::wasm32::*;
    pub type V = v128;
    #[inline(always)]
    pub fn zero() -> V {
        f32x4_splat(0.0)
    }
    #[inline(always)]
    pub unsafe fn load(p: *const f32) -> V {
        v128_load(p as *const v128)
    }
    #[inline(always)]
    pub unsafe fn splat(p: *const f32) -> V {
        v128_load32_splat(p as *const u32)
    }
    #[inline(always)]
    pub unsafe fn store(p: *mut f32, v: V) {
        v128_store(p as *mut v128, v)
    }
    #[inline(always)]
    pub fn add(x: V, y: V) -> V {
        f32x4_add(x, y)
    }
    #[inline(always)]
    pub fn mul(x: V, y: V) -> V {
        f32x4_mul(x, y)
    }
    #[inline(always)]
    pub fn splat_val(x: f32) -> V {
        f32x4_splat(x)
    }
    /// `acc + x·y`, two roundings (simd128 has no FMA).
    #[cfg(not(feature = "relaxed-simd"))]
    #[inline(always)]
    pub fn madd(acc: V, x: V, y: V) -> V {
        f32x4_add(acc, f32x4_mul(x, y))
    }
    /// `acc + x·y` in one relaxed-SIMD instruction: V8 emits one FMA
    /// (`vfmadd231ps`) where the CPU has it, else a multiply and an add, so
    /// the result is rounded once or twice depending on the machine.
    #[cfg(feature = "relaxed-simd")]
    #[target_feature(enable = "relaxed-simd")]
    #[inline]
    pub fn madd(acc: V, x: V, y: V) -> V {
        f32x4_relaxed_madd(x, y, acc)
    }
}

/// Elsewhere: the same operations on `[f32; 4]` (LLVM vectorizes them).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod v4 {
    pub type V = [f32; 4];
    #[inline(always)]
    pub fn zero() -> V {
        [0.0; 4]
    }
    #[inline(always)]
    pub unsafe fn load(p: *const f32) -> V {
        (p as *const V).read_unaligned()
    }
    #[inline(always)]
    pub unsafe fn splat(p: *const f32) -> V {
        [*p; 4]
    }
    #[inline(always)]
    pub unsafe fn store(p: *mut f32, v: V) {
        (p as *mut V).write_unaligned(v)
    }
    #[inline(always)]
    pub fn add(x: V, y: V) -> V {
        [x[0] + y[0], x[1] + y[1], x[2] + y[2], x[3] + y[3]]
    }
    #[inline(always)]
    pub fn mul(x: V, y: V) -> V {
        [x[0] * y[0], x[1] * y[1], x[2] * y[2], x[3] * y[3]]
    }
    #[inline(always)]
    pub fn splat_val(x: f32) -> V {
        [x; 4]
    }
    /// `acc + x·y`, two roundings, as in the simd128 build.
    #[cfg(not(feature = "relaxed-simd"))]
    #[inline(always)]
    pub fn madd(acc: V, x: V, y: V) -> V {
        add(acc, mul(x, y))
    }
    /// With `relaxed-simd`, fused (one rounding), as relaxed madd rounds
    /// on a machine with FMA: `cargo test -p rlx-cpu --features
    /// relaxed-simd` checks the tolerances against that case too.
    #[cfg(feature = "relaxed-simd")]
    #[inline(always)]
    pub fn madd(acc: V, x: V, y: V) -> V {
        std::array::from_fn(|i| x[i].mul_add(y[i], acc[i]))
    }
}

/// Shapes (m, k, n, weight read transposed) whose m, n, k are no
/// multiples of the tile or the K block, with k = 1, n < NR and K over one
/// block: the f64 checks of the unit tests and of the in-wasm check
/// (`examples/wasm_sgemm.rs`) run them.
#[doc(hidden)]
pub const RAGGED: [(usize, usize, usize, bool); 8] = [
    (1, 1, 1, false),
    (3, 1, 5, false),
    (7, 5, 3, true),
    (13, 17, 9, false),
    (6, 384, 8, false),
    (29, 385, 23, true),
    (121, 777, 17, false),
    (130, 40, 130, true),
];

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A uniform f32 in [-1, 1) from an LCG state (the kernels' tests).
    pub(crate) fn rnd(s: &mut u64) -> f32 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Every tile height against f64 sums, within the f32 accumulation
    /// bound k · 2⁻²³ · Σ|a·b| (two roundings per step; one when fused,
    /// with `relaxed-simd`, is inside it), on shapes whose
    /// m, n, k are not multiples of the tile or blocks, k = 1, n < NR, K
    /// over one block, a transposed weight and a strided `a`.
    #[test]
    fn matches_f64_reference_on_ragged_shapes() {
        let mut s = 7u64;
        for &(m, k, n, bt) in RAGGED.iter().chain(&[(4, 0, 9, false)]) {
            let lda = k + 2;
            let a: Vec<f32> = (0..m * lda).map(|_| rnd(&mut s)).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rnd(&mut s)).collect();
            // b's (p, j): row-major k × n, or an n × k matrix read transposed.
            let (rs, cs) = if bt { (1, k) } else { (n, 1) };
            let am = Mat {
                data: &a,
                rows: m,
                cols: k,
                row_stride: lda,
                col_stride: 1,
            };
            let bm = Mat {
                data: &b,
                rows: k,
                cols: n,
                row_stride: rs,
                col_stride: cs,
            };
            let ldc = n + 3;
            let len = (m - 1) * ldc + n;
            for r in [4, 5, 6] {
                let mut c = vec![f32::NAN; m * ldc];
                match r {
                    4 => gemm(am, bm, &mut c[..len], ldc),
                    5 => gemm_tuned::<5>(am, bm, &mut c[..len], ldc),
                    _ => gemm_tuned::<6>(am, bm, &mut c[..len], ldc),
                }
                for i in 0..m {
                    for j in 0..n {
                        let (mut want, mut mag) = (0f64, 0f64);
                        for p in 0..k {
                            let x = a[i * lda + p] as f64 * b[p * rs + j * cs] as f64;
                            want += x;
                            mag += x.abs();
                        }
                        let got = c[i * ldc + j] as f64;
                        let tol = k as f64 * 2f64.powi(-23) * mag;
                        assert!(
                            (got - want).abs() <= tol,
                            "MR={r} {m}x{k}x{n} ({i},{j}): {got} vs {want} (tol {tol})"
                        );
                    }
                    // Columns between rows are not written.
                    for j in n..ldc.min(len - i * ldc) {
                        assert!(
                            c[i * ldc + j].is_nan(),
                            "MR={r} {m}x{k}x{n}: wrote ({i},{j})"
                        );
                    }
                }
            }
        }
    }

    /// A weight packed beforehand, and one prepared once for two blocks
    /// of rows, give the same bits as one call.
    #[test]
    fn prepared_once_matches_per_call() {
        let mut s = 3u64;
        let (m, k, n) = (9, 20, 11);
        let a: Vec<f32> = (0..m * k).map(|_| rnd(&mut s)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rnd(&mut s)).collect();
        let (am, bm) = (Mat::row_major(&a, m, k), Mat::row_major(&b, k, n));
        let pb = PackedB::pack(bm);
        let (mut c1, mut c2, mut c3) = (vec![0f32; m * n], vec![1f32; m * n], vec![2f32; m * n]);
        gemm(am, bm, &mut c1, n);
        gemm_packed(am, &pb, &mut c2, n);
        with_packed(bm, |w| {
            let (top, bottom) = c3.split_at_mut(4 * n);
            let a2 = Mat {
                data: &a[4 * k..],
                rows: m - 4,
                ..am
            };
            gemm_packed(Mat { rows: 4, ..am }, w, top, n);
            gemm_packed(a2, w, bottom, n);
        });
        assert_eq!(c1, c2);
        assert_eq!(c1, c3);
    }

    /// The scaled product is the product times the scale (a power of two:
    /// exact), over two K blocks and an edge tile.
    #[test]
    fn scaled_matches_unscaled_times_scale() {
        let mut s = 5u64;
        let (m, k, n) = (7, 500, 13);
        let a: Vec<f32> = (0..m * k).map(|_| rnd(&mut s)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rnd(&mut s)).collect();
        let (am, bm) = (Mat::row_major(&a, m, k), Mat::row_major(&b, k, n));
        let (mut c1, mut c2) = (vec![0f32; m * n], vec![0f32; m * n]);
        gemm(am, bm, &mut c1, n);
        gemm_scaled(am, bm, &mut c2, n, 0.125);
        for (x, y) in c1.iter().zip(&c2) {
            assert_eq!(x * 0.125, *y);
        }
    }

    #[test]
    #[should_panic(expected = "inner dimensions")]
    fn mismatched_shapes_panic() {
        let x = [0f32; 6];
        gemm(
            Mat::row_major(&x, 2, 3),
            Mat::row_major(&x, 2, 3),
            &mut [0f32; 9],
            3,
        );
    }
}
