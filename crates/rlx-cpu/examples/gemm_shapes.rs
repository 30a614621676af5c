//! MiniLM's f32 GEMM shapes at one batch through the CPU backend's GEMM,
//! with the weight hot (the same matrix every call) and cold (cycling
//! through enough weights to miss every cache, as a model's forward does).
//! One JSON line per shape.
//!
//!     RLX_NUM_THREADS=2 cargo run --release -p rlx-cpu --example gemm_shapes -- [batch]

use std::time::Instant;

fn main() {
    let batch: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let m = 128 * batch;
    for (k, n) in [(384, 384), (384, 1152), (384, 1536), (1536, 384)] {
        // ~96 MB of weights for the cold case.
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
        let mut time = |cold: bool| {
            let reps = 60;
            let mut ts = Vec::new();
            for r in 0..reps {
                let w = if cold { &ws[r % copies] } else { &ws[0] };
                let t = Instant::now();
                rlx_cpu::sgemm(m, k, n, &a, w, &mut c);
                ts.push(t.elapsed().as_secs_f64());
            }
            ts.sort_by(f64::total_cmp);
            ts[reps / 2]
        };
        let hot = time(false);
        let cold = time(true);
        // The same product, its columns split in two halves, one per thread.
        let mut split = |cold: bool| {
            let reps = 60;
            let mut ts = Vec::new();
            for r in 0..reps {
                let w = if cold { &ws[r % copies] } else { &ws[0] };
                let cp = c.as_mut_ptr() as usize;
                let t = Instant::now();
                rayon::scope(|s| {
                    for h in 0..2 {
                        let (a, w) = (&a, &w);
                        s.spawn(move |_| {
                            let n0 = h * n / 2;
                            let nn = n / 2;
                            unsafe {
                                gemm::gemm(
                                    m,
                                    nn,
                                    k,
                                    (cp as *mut f32).add(n0),
                                    1,
                                    n as isize,
                                    false,
                                    a.as_ptr(),
                                    1,
                                    k as isize,
                                    w.as_ptr().add(n0),
                                    1,
                                    n as isize,
                                    0.0,
                                    1.0,
                                    false,
                                    false,
                                    false,
                                    gemm::Parallelism::None,
                                );
                            }
                        });
                    }
                });
                ts.push(t.elapsed().as_secs_f64());
            }
            ts.sort_by(f64::total_cmp);
            ts[reps / 2]
        };
        let (sh, sc) = (split(false), split(true));
        println!(
            "split: hot {:.3} ms {:.1} GFLOP/s, cold {:.3} ms {:.1}",
            sh * 1e3,
            flop / sh / 1e9,
            sc * 1e3,
            flop / sc / 1e9
        );
        println!(
            "{{\"m\": {m}, \"k\": {k}, \"n\": {n}, \"hot_ms\": {:.3}, \"hot_gflops\": {:.1}, \"cold_ms\": {:.3}, \"cold_gflops\": {:.1}}}",
            hot * 1e3,
            flop / hot / 1e9,
            cold * 1e3,
            flop / cold / 1e9
        );
    }
}
