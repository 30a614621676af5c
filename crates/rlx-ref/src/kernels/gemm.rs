//! A safe wrapper over the `gemm` crate's matrix product: f64 (the
//! reference semantics, accumulate in f64) and f32 (f32 tensors: f32
//! accumulation with FMA, as every BLAS does).

/// Threads for one product: the shared CPU pool (`crate::threads`,
/// else all cores); small products stay on one thread (spawning costs
/// more than it saves). wasm32 has no threads here.
fn parallelism(m: usize, n: usize, k: usize) -> gemm::Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let t = crate::threads::threads();
        if t > 1 && m * n * k >= 1 << 18 {
            return gemm::Parallelism::Rayon(t);
        }
    }
    let _ = (m, n, k);
    gemm::Parallelism::None
}

/// `c (m×n) = a (m×k) · b (k×n)` in f64, all row-major and contiguous.
pub(crate) fn gemm_f64(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    let (a, b) = (Mat::row_major(a, m, k), Mat::row_major(b, k, n));
    gemm_into(a, b, c, n, false, true);
}

/// `c (m×n) = a (m×k) · b (k×n)` in f32, row-major and contiguous (f32
/// accumulation with FMA, as every BLAS does).
pub fn sgemm(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (a, b) = (Mat::row_major(a, m, k), Mat::row_major(b, k, n));
    gemm_into(a, b, c, n, false, true);
}

static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// GEMM calls made so far in this process. The `gemm` crate allocates its
/// packing buffer on each call, so this is the one per-run allocation the
/// fast engine cannot avoid; the steady-state allocation test counts it.
pub fn gemm_calls() -> usize {
    CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// A read-only matrix with element strides: a transposed operand is the
/// same memory with its strides swapped, so no copy is ever made for one.
#[derive(Clone, Copy, Debug)]
pub struct Mat<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a, T> Mat<'a, T> {
    pub fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        Mat {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose: no copy.
    pub fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Every element the strides address lies inside `data`.
    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1)
                .checked_mul(self.row_stride)
                .and_then(|r| (self.cols - 1).checked_mul(self.col_stride).map(|c| (r, c)))
                .and_then(|(r, c)| r.checked_add(c))
                .is_some_and(|last| last < self.data.len())
    }
}

/// `c = a · b` (or `c += a · b` with `accumulate`), `c` row-major with row
/// stride `ldc` (≥ its column count). `parallel` lets large products use
/// the thread pool; callers that already split work across threads pass
/// false. Panics on mismatched dimensions or
/// out-of-bounds strides: callers derive them from verified shapes, so a
/// mismatch is a bug in rlx, not bad input.
pub fn gemm_into<T>(a: Mat<T>, b: Mat<T>, c: &mut [T], ldc: usize, accumulate: bool, parallel: bool)
where
    T: GemmScalar + Copy + Default + 'static,
{
    gemm_scaled(a, b, c, ldc, accumulate, parallel, T::ONE)
}

/// [`gemm_into`] with the product scaled: `c (+)= scale · a · b`.
pub fn gemm_scaled<T>(
    a: Mat<T>,
    b: Mat<T>,
    c: &mut [T],
    ldc: usize,
    accumulate: bool,
    parallel: bool,
    scale: T,
) where
    T: GemmScalar + Copy + Default + 'static,
{
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(
        b.rows == k,
        "gemm: inner dimensions {k} and {} differ",
        b.rows
    );
    assert!(
        a.in_bounds() && b.in_bounds(),
        "gemm: operand strides leave the slice"
    );
    assert!(
        ldc >= n && (m == 0 || n == 0 || (m - 1) * ldc + n <= c.len()),
        "gemm: output slice too small"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for row in c.chunks_mut(ldc).take(m) {
                row[..n].fill(T::default());
            }
        }
        return;
    }
    let par = if parallel {
        parallelism(m, n, k)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: every index gemm forms from (m, n, k) and the strides stays
    // inside its slice (checked above: `in_bounds` for a and b, the
    // `(m-1)·ldc + n` bound for c); `c` is exclusively borrowed so it
    // aliases neither operand.
    #[allow(unsafe_code)]
    unsafe {
        gemm_raw(a, b, c.as_mut_ptr(), ldc, accumulate, scale, par)
    }
}

/// The crate call behind [`gemm_scaled`] and [`gemm_cols`]; without
/// `accumulate` (alpha = 0, read_dst = false) `c` is only written.
///
/// # Safety
/// `a` and `b` in bounds with `b.rows == a.cols`; `c` valid for writes of
/// the a.rows × b.cols elements at row stride `ldc`, written by no one else
/// meanwhile and overlapping neither operand.
#[allow(unsafe_code)]
unsafe fn gemm_raw<T>(
    a: Mat<T>,
    b: Mat<T>,
    c: *mut T,
    ldc: usize,
    accumulate: bool,
    scale: T,
    par: gemm::Parallelism,
) where
    T: GemmScalar + Copy + Default + 'static,
{
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    gemm::gemm(
        a.rows,
        b.cols,
        a.cols,
        c,
        1,
        ldc as isize,
        accumulate,
        a.data.as_ptr(),
        a.col_stride as isize,
        a.row_stride as isize,
        b.data.as_ptr(),
        b.col_stride as isize,
        b.row_stride as isize,
        if accumulate { T::ONE } else { T::default() },
        scale,
        false,
        false,
        false,
        par,
    );
}

/// `c = a · b` (f32) with `b`'s columns split into `parts` blocks (multiples
/// of 32, the widest AVX-512 micro-tile), one single-threaded product per
/// block on the rayon pool. For few rows (a batch-1 forward: 128) this
/// beats the crate's own threading: each thread packs only its share of the
/// weight and reads it once, instead of both waiting on a shared packing of
/// all of it (MiniLM's shapes at 128 rows with cold weights, 2 threads:
/// 1.04–1.21×, `benches/results/gemm-shapes.md`). With `accumulate`,
/// `c += a · b`.
#[cfg(not(target_arch = "wasm32"))]
pub fn gemm_cols(
    a: Mat<f32>,
    b: Mat<f32>,
    c: &mut [f32],
    ldc: usize,
    parts: usize,
    accumulate: bool,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let width = n.div_ceil(parts.max(1)).div_ceil(32) * 32;
    if parts <= 1 || width >= n || k == 0 {
        return gemm_into(a, b, c, ldc, accumulate, false);
    }
    assert!(
        b.rows == k && a.in_bounds() && b.in_bounds(),
        "gemm: operand shapes or strides do not fit"
    );
    assert!(
        ldc >= n && (m == 0 || (m - 1) * ldc + n <= c.len()),
        "gemm: output slice too small"
    );
    /// The output's base address, shared by the blocks' threads.
    #[derive(Clone, Copy)]
    struct Out(*mut f32);
    // SAFETY: each thread writes only its own block of columns (below).
    #[allow(unsafe_code)]
    unsafe impl Send for Out {}
    #[allow(unsafe_code)]
    unsafe impl Sync for Out {}
    // Blocks [lo, hi) of `width` columns, halved through rayon::join (no
    // heap job per block, so a steady-state run stays allocation-free).
    #[allow(clippy::too_many_arguments)]
    fn blocks(
        a: Mat<f32>,
        b: Mat<f32>,
        out: Out,
        ldc: usize,
        width: usize,
        acc: bool,
        lo: usize,
        hi: usize,
    ) {
        if hi - lo > 1 {
            let mid = (lo + hi) / 2;
            rayon::join(
                || blocks(a, b, out, ldc, width, acc, lo, mid),
                || blocks(a, b, out, ldc, width, acc, mid, hi),
            );
            return;
        }
        let n0 = lo * width;
        let bb = Mat {
            data: &b.data[n0 * b.col_stride..],
            cols: width.min(b.cols - n0),
            ..b
        };
        // SAFETY: columns n0.. of rows 0..m at stride ldc lie inside `c`
        // (asserted by the caller); the blocks' columns are disjoint, so no
        // two threads write one element, and `c` stays exclusively borrowed
        // until the caller's join returns; `bb` is a sub-block of the
        // in-bounds `b`.
        #[allow(unsafe_code)]
        unsafe {
            gemm_raw(a, bb, out.0.add(n0), ldc, acc, 1.0, gemm::Parallelism::None)
        }
    }
    let out = Out(c.as_mut_ptr());
    blocks(a, b, out, ldc, width, accumulate, 0, n.div_ceil(width));
}

/// One thread in wasm32: [`gemm_into`].
#[cfg(target_arch = "wasm32")]
pub fn gemm_cols(
    a: Mat<f32>,
    b: Mat<f32>,
    c: &mut [f32],
    ldc: usize,
    _parts: usize,
    accumulate: bool,
) {
    gemm_into(a, b, c, ldc, accumulate, false)
}

/// The element types the wrapper instantiates.
pub trait GemmScalar {
    const ONE: Self;
}
impl GemmScalar for f32 {
    const ONE: f32 = 1.0;
}
impl GemmScalar for f64 {
    const ONE: f64 = 1.0;
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_naive_product() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
        let mut c = vec![0.0; m * n];
        super::gemm_f64(m, k, n, &a, &b, &mut c);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert!((c[i * n + j] - want).abs() < 1e-12);
            }
        }
    }

    /// The column-split product equals the one-call product bit for bit
    /// (same micro-kernels, same k order per element) for widths that do
    /// and do not divide into the blocks, with a transposed (strided) `b`.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn column_split_matches_one_call() {
        use super::{gemm_cols, gemm_into, Mat};
        for (m, k, n, parts) in [
            (7, 33, 100, 2),
            (128, 64, 384, 2),
            (5, 16, 70, 3),
            (3, 8, 20, 2),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
                .collect();
            // b stored n × k (a weight), used as its transpose.
            let bt: Vec<f32> = (0..n * k)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
                .collect();
            let b = Mat::row_major(&bt, n, k).t();
            let (mut one, mut split) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
            gemm_into(Mat::row_major(&a, m, k), b, &mut one, n, false, false);
            gemm_cols(Mat::row_major(&a, m, k), b, &mut split, n, parts, false);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|p| a[i * k + p] as f64 * bt[j * k + p] as f64)
                        .sum();
                    assert!((one[i * n + j] as f64 - want).abs() < 1e-3 * (1.0 + want.abs()));
                }
            }
            assert_eq!(one, split, "m {m} k {k} n {n} parts {parts}");
        }
    }
}
