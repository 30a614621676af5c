//! Single-thread f32 GEMM at MiniLM's shapes: the AMX tiles
//! (`kernels::amx`, resident weight split once) against the `gemm` crate.
//! `cargo run --release -p rlx-cpu --example amx_gemm`
use rlx_cpu::kernels::amx;
use rlx_cpu::{gemm_into, Mat};
use std::time::Instant;

fn main() {
    if !amx::available() {
        eprintln!("no AMX tiles on this machine");
        return;
    }
    println!("| m | k | n | gemm crate GFLOP/s | AMX bf16x6 GFLOP/s | ratio |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for &(m, k, n) in &[
        (64, 384, 1152),
        (64, 1536, 384),
        (128, 384, 1152),
        (128, 384, 384),
        (128, 384, 1536),
        (128, 1536, 384),
        (1024, 384, 1536),
        (1024, 1536, 384),
    ] {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let (am, bm) = (Mat::row_major(&a, m, k), Mat::row_major(&b, k, n));
        let mut c = vec![0f32; m * n];
        let mut p = amx::PackedB::default();
        p.repack(bm);
        let mut s = vec![0u16; amx::scratch_len(k)];
        let time = |f: &mut dyn FnMut()| {
            f();
            let reps = (2e9 / (2.0 * (m * n * k) as f64)).max(3.0) as usize;
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            2.0 * (m * n * k) as f64 * reps as f64 / t.elapsed().as_secs_f64() / 1e9
        };
        let g = time(&mut || gemm_into(am, bm, &mut c, n, false, false));
        let x = time(&mut || amx::gemm(am, &p, &mut c, n, false, &mut s));
        println!("| {m} | {k} | {n} | {g:.0} | {x:.0} | {:.2} |", x / g);
    }
}
