//! A safe wrapper over the `gemm` crate's matrix product: f64 (the
//! reference semantics, accumulate in f64) and f32 (f32 tensors: f32
//! accumulation with FMA, as every BLAS does).

/// Threads for one product: `RLX_NUM_THREADS` (read once), else all cores;
/// small products stay on one thread (spawning costs more than it saves).
/// wasm32 has no threads here.
fn parallelism(m: usize, n: usize, k: usize) -> gemm::Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let t = *THREADS.get_or_init(|| {
            std::env::var("RLX_NUM_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .max(1)
        });
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
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: every index gemm forms from (m, n, k) and the strides stays
    // inside its slice (checked above: `in_bounds` for a and b, the
    // `(m-1)·ldc + n` bound for c); `c` is exclusively borrowed so it
    // aliases neither operand; without `accumulate` (alpha = 0,
    // read_dst = false) `c` is only written.
    #[allow(unsafe_code)]
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
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
            if parallel {
                parallelism(m, n, k)
            } else {
                gemm::Parallelism::None
            },
        );
    }
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
}
