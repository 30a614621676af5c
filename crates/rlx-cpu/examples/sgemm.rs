//! sgemm throughput of the CPU backend's GEMM (the `gemm` crate wrapper),
//! square sizes, row-major, C = A·B. Prints one JSON line per size so
//! `benches/sgemm/run.py` can put it next to NumPy/OpenBLAS.
//!
//!     cargo run --release -p rlx-cpu --example sgemm -- 256 512 1024 2048

use std::time::Instant;

fn main() {
    // RLX_* settings (threads, AMX, ...) through the one edge.
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![256, 512, 1024, 2048]
    } else {
        sizes
    };
    for n in sizes {
        let a: Vec<f32> = (0..n * n)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let b: Vec<f32> = (0..n * n)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
            .collect();
        let mut c = vec![0f32; n * n];
        let flop = 2.0 * (n as f64).powi(3);
        // Enough repetitions for ~0.5 s per size, at least 3.
        rlx_cpu::sgemm(n, n, n, &a, &b, &mut c);
        let t = Instant::now();
        rlx_cpu::sgemm(n, n, n, &a, &b, &mut c);
        let once = t.elapsed().as_secs_f64();
        let reps = ((0.5 / once) as usize).clamp(3, 1000);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            rlx_cpu::sgemm(n, n, n, &a, &b, &mut c);
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let p50 = times[times.len() / 2];
        println!(
            "{{\"n\": {n}, \"p50_ms\": {:.4}, \"gflops\": {:.1}, \"reps\": {reps}}}",
            p50 * 1e3,
            flop / p50 / 1e9
        );
    }
}
