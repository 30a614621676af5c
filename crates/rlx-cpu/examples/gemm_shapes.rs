//! MiniLM's f32 GEMM shapes at one batch, two ways side by side: one call
//! with the `gemm` crate's own threading, and [`rlx_cpu::gemm_cols`] (the
//! weight's columns split across the threads, what the fast engine uses
//! for products of ≤ 256 rows). Each with the weight hot (the same matrix
//! every call) and cold (cycling through ~96 MB of weights, as a model's
//! forward does). One JSON line per shape and way.
//!
//!     RLX_NUM_THREADS=2 cargo run --release -p rlx-cpu --example gemm_shapes -- [batch]

use rlx_cpu::{gemm_cols, gemm_into, Mat};
use std::time::Instant;

/// One way of computing c = a · w.
type Way<'a> = &'a dyn Fn(&[f32], &mut [f32]);

fn main() {
    let batch: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    // RLX_NUM_THREADS through the one edge; it sizes the global pool.
    rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let threads = rlx_cpu::fast::threads();
    let m = 128 * batch;
    for (k, n) in [(384, 384), (384, 1152), (384, 1536), (1536, 384)] {
        let copies = (96 << 20) / (k * n * 4) + 1;
        let ws: Vec<Vec<f32>> = (0..copies)
            .map(|c| {
                (0..k * n)
                    .map(|i| ((i * 5 + c) % 11) as f32 / 8.0 - 0.6)
                    .collect()
            })
            .collect();
        let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 / 8.0 - 0.7).collect();
        let mut c = vec![0f32; m * n];
        let flop = 2.0 * (m * k * n) as f64;
        let ways: [(&str, Way); 2] = [
            ("gemm crate threading", &|w, c| {
                gemm_into(
                    Mat::row_major(&a, m, k),
                    Mat::row_major(w, k, n),
                    c,
                    n,
                    false,
                    true,
                )
            }),
            ("gemm_cols", &|w, c| {
                gemm_cols(
                    Mat::row_major(&a, m, k),
                    Mat::row_major(w, k, n),
                    c,
                    n,
                    threads,
                    false,
                )
            }),
        ];
        for (way, f) in ways {
            let mut p50 = |cold: bool| {
                let reps = 60;
                let mut ts: Vec<f64> = (0..reps)
                    .map(|r| {
                        let w = if cold { &ws[r % copies] } else { &ws[0] };
                        let t = Instant::now();
                        f(w, &mut c);
                        t.elapsed().as_secs_f64()
                    })
                    .collect();
                ts.sort_by(f64::total_cmp);
                ts[reps / 2]
            };
            let (hot, cold) = (p50(false), p50(true));
            println!(
                "{{\"way\": \"{way}\", \"threads\": {threads}, \"m\": {m}, \"k\": {k}, \"n\": {n}, \"hot_ms\": {:.3}, \"hot_gflops\": {:.1}, \"cold_ms\": {:.3}, \"cold_gflops\": {:.1}}}",
                hot * 1e3,
                flop / hot / 1e9,
                cold * 1e3,
                flop / cold / 1e9
            );
        }
    }
}
