//! A safe wrapper over the `gemm` crate's matrix product (f64, so the
//! reference semantics — accumulate in f64 — are kept, at BLAS-like speed).

/// `c (m×n) = a (m×k) · b (k×n)`, all row-major and contiguous.
pub(crate) fn gemm_f64(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "gemm_f64: slice lengths do not match the dimensions"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
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
            0.0f64,
            1.0f64,
            false,
            false,
            false,
            gemm::Parallelism::None,
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
