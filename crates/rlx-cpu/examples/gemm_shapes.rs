//! Scratch benchmark: GEMM layouts for MiniLM's shapes (not committed).
use rlx_cpu::{gemm_into, Mat};
use std::time::Instant;

fn time(f: &mut dyn FnMut()) -> f64 {
    f();
    let mut best = f64::MAX;
    for _ in 0..30 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    best * 1e3
}

fn main() {
    for &(m, k, n) in &[
        (128usize, 384usize, 384usize),
        (128, 384, 1536),
        (1024, 384, 1536),
        (1024, 1536, 384),
    ] {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let mut c = vec![0f32; m * n];
        let flop = 2.0 * (m * k * n) as f64;
        let rm = time(&mut || {
            gemm_into(
                Mat::row_major(&a, m, k),
                Mat::row_major(&b, k, n),
                &mut c,
                n,
                false,
                true,
            )
        });
        let tr = time(&mut || {
            gemm_into(
                Mat::row_major(&a, m, k),
                Mat::row_major(&b, n, k).t(),
                &mut c,
                n,
                false,
                true,
            )
        });
        let one = time(&mut || {
            gemm_into(
                Mat::row_major(&a, m, k),
                Mat::row_major(&b, k, n),
                &mut c,
                n,
                false,
                false,
            )
        });
        let one_t = time(&mut || {
            gemm_into(
                Mat::row_major(&a, m, k),
                Mat::row_major(&b, n, k).t(),
                &mut c,
                n,
                false,
                false,
            )
        });
        println!("{m}x{k}x{n}: rowmajor-par {rm:.3} ms ({:.0} GF/s) | transposed-par {tr:.3} ({:.0}) | rowmajor-1t {one:.3} ({:.0}) | transposed-1t {one_t:.3} ({:.0})",
            flop/rm/1e6, flop/tr/1e6, flop/one/1e6, flop/one_t/1e6);
    }
}
