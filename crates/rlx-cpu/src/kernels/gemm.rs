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
    gemm_t(m, k, n, a, b, c, 0.0, 1.0)
}

/// The same in f32.
pub(crate) fn gemm_f32(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    gemm_t(m, k, n, a, b, c, 0.0, 1.0)
}

#[allow(clippy::too_many_arguments)]
fn gemm_t<T: Copy + 'static>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    b: &[T],
    c: &mut [T],
    zero: T,
    one: T,
) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "gemm_f64: slice lengths do not match the dimensions"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(zero);
        return;
    }
    // SAFETY: the lengths were checked above, so every index gemm forms from
    // (m, n, k) and the row strides (k for a, n for b and c) with column
    // stride 1 stays inside its slice; `c` is exclusively borrowed and does
    // not alias `a` or `b`; alpha = 0 with read_dst = false means `c` is
    // only written.
    #[allow(unsafe_code)]
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            zero,
            one,
            false,
            false,
            false,
            parallelism(m, n, k),
        );
    }
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
