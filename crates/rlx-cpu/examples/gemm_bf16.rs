//! bf16 dot-product GEMM (`fast::bf16dot`, AVX512-BF16) against the f32
//! GEMM the fast engine uses today (the `gemm` crate) on the same values:
//! MiniLM's projection shapes at B = 1 and 32 (m = 128 · B) and squares.
//! One JSON line per shape; `benches/gemm-bf16/run.sh` adds PyTorch's bf16
//! matmul (oneDNN) on the same shapes.
//!
//!     cargo run --release -p rlx-cpu --example gemm_bf16

use rlx_cpu::fast::bf16dot::{self, PackedB};
use std::time::Instant;

fn p50(mut f: impl FnMut()) -> f64 {
    f();
    let t = Instant::now();
    f();
    let once = t.elapsed().as_secs_f64();
    let reps = ((0.4 / once) as usize).clamp(5, 2000);
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    assert!(bf16dot::available(), "this CPU has no AVX512-BF16");
    let shapes = [
        (128, 384, 384),
        (128, 384, 1536),
        (128, 1536, 384),
        (4096, 384, 384),
        (4096, 384, 1536),
        (4096, 1536, 384),
        (4096, 768, 384),
        (1024, 1024, 1024),
        (2048, 2048, 2048),
    ];
    for (m, k, n) in shapes {
        let val = |i: usize| ((i * 7919 % 2003) as f32 / 1001.0) - 1.0;
        let a32: Vec<f32> = (0..m * k)
            .map(|i| half::bf16::from_f32(val(i)).to_f32())
            .collect();
        let b32: Vec<f32> = (0..k * n)
            .map(|i| half::bf16::from_f32(val(i + 17)).to_f32())
            .collect();
        let a16: Vec<u16> = a32
            .iter()
            .map(|&x| half::bf16::from_f32(x).to_bits())
            .collect();
        let b16: Vec<u16> = b32
            .iter()
            .map(|&x| half::bf16::from_f32(x).to_bits())
            .collect();
        let packed = PackedB::pack(&b16, k, n, n, 1);
        let mut c16 = vec![0f32; m * n];
        let mut c32 = vec![0f32; m * n];
        let t16 = p50(|| bf16dot::gemm(&a16, k, m, &packed, &mut c16, n));
        let t32 = p50(|| rlx_cpu::sgemm(m, k, n, &a32, &b32, &mut c32));
        // Same values in: the two differ by the order of f32 sums only.
        let worst = c16
            .iter()
            .zip(&c32)
            .map(|(x, y)| ((x - y).abs() / y.abs().max(1.0)) as f64)
            .fold(0.0, f64::max);
        let flop = 2.0 * (m * k * n) as f64;
        println!(
            "{{\"m\": {m}, \"k\": {k}, \"n\": {n}, \"bf16_ms\": {:.4}, \"f32_ms\": {:.4}, \"bf16_gflops\": {:.1}, \"f32_gflops\": {:.1}, \"speedup\": {:.2}, \"max_rel_diff\": {worst:.2e}}}",
            t16 * 1e3,
            t32 * 1e3,
            flop / t16 / 1e9,
            flop / t32 / 1e9,
            t32 / t16
        );
    }
}
