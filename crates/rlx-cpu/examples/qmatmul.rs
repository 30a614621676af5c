//! The fast engine's `dequant_matmul` on one weight per block type: the
//! weight-streaming rate (GB/s of quantized weights read per second) for a
//! decode step (1 row) and the throughput of a prompt (`rows`, default 64), cycling
//! through ~128 MB of weights so they come from memory, not cache. One
//! line per type and row count (the median call). Not a comparison: llama.cpp's side goes in
//! benches/ (see docs/gguf.md).
//!
//! `--one-weight` repeats a single weight instead (as llama.cpp's
//! `test-backend-ops perf` does: what fits the last-level cache is read
//! from there); `--decode` times the one-row kernels only.
//!
//!     RLX_NUM_THREADS=2 cargo run --release -p rlx-cpu --example qmatmul -- [n] [k] [rows] [--one-weight] [--decode]

use rlx_cpu::fast::qmatmul;
use rlx_ir::dtype::Storage;
use rlx_ir::DType;
use std::time::Instant;

fn main() {
    let one_weight = std::env::args().any(|a| a == "--one-weight");
    let decode_only = std::env::args().any(|a| a == "--decode");
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, k, rows) = (arg(1, 1536), arg(2, 1536), arg(3, 64));
    rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    println!(
        "simd {}, {} threads, weight {n} x {k}",
        rlx_cpu::fast::simd::level_name(),
        rlx_cpu::fast::threads()
    );
    for d in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q8_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ] {
        let Storage::Block { block, bytes } = d.storage() else {
            continue;
        };
        let wbytes = n * k / block * bytes;
        let copies = if one_weight {
            1
        } else {
            (128 << 20) / wbytes + 1
        };
        let x: Vec<f32> = (0..n.max(rows) * k)
            .map(|i| ((i * 7) % 19) as f32 / 9.0 - 1.0)
            .collect();
        let q = rlx_ref::kernels::quant::quantize_values(d, &x).unwrap();
        let ws: Vec<Vec<u8>> = (0..copies).map(|_| q.clone()).collect();
        // The decode row on every f32 kernel this CPU has, then the
        // default kernel for the rest.
        let few = qmatmul::FewRows::all(d);
        let prompt = if decode_only {
            vec![]
        } else {
            vec![(rows, false, few[0]), (rows, true, few[0])]
        };
        let cases = few
            .iter()
            .filter(|&&f| !decode_only || f != qmatmul::FewRows::Portable)
            .map(|&f| (1usize, false, f))
            .chain(prompt);
        let reps_for = |m: usize| {
            if m > 1 {
                copies.min(8)
            } else if one_weight {
                32
            } else {
                4 * copies
            }
        };
        for (m, q8, path) in cases {
            if q8 && !qmatmul::q8_kernel(d) {
                continue;
            }
            let a = &x[..m * k];
            let mut c = vec![0f32; m * n];
            let reps = reps_for(m);
            qmatmul::run_on(path, d, q8, &ws[0], a, m, n, k, &mut c);
            let s = median(reps, |r| {
                qmatmul::run_on(path, d, q8, &ws[r % copies], a, m, n, k, &mut c);
            });
            let how = if q8 {
                "int8".to_string()
            } else {
                format!("{path:?}")
            };
            report(d, m, q8, &how, s, wbytes, n, k);
        }
        // The decode row on each 8-bit-activation kernel, best first.
        for isa in qmatmul::Q8Few::all(d) {
            let (a, reps) = (&x[..k], reps_for(1));
            let mut c = vec![0f32; n];
            qmatmul::run_q8_few(isa, d, &ws[0], a, 1, n, k, &mut c);
            let s = median(reps, |r| {
                qmatmul::run_q8_few(isa, d, &ws[r % copies], a, 1, n, k, &mut c);
            });
            report(d, 1, true, &format!("{isa:?}"), s, wbytes, n, k);
        }
        // Each integer GEMM this CPU has, on the prompt rows.
        #[cfg(target_arch = "x86_64")]
        for isa in qmatmul::Q8Gemm::all().into_iter().filter(|_| !decode_only) {
            let (a, reps) = (&x[..rows * k], copies.min(8));
            let mut c = vec![0f32; rows * n];
            if !qmatmul::run_q8_gemm(isa, d, &ws[0], a, rows, n, k, &mut c) {
                continue;
            }
            let s = median(reps, |r| {
                qmatmul::run_q8_gemm(isa, d, &ws[r % copies], a, rows, n, k, &mut c);
            });
            report(d, rows, true, &format!("{isa:?}"), s, wbytes, n, k);
        }
    }
}

/// The median time of `reps` calls of `f` (this machine is shared: a
/// mean takes in every stall).
fn median(reps: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut t: Vec<f64> = (0..reps)
        .map(|r| {
            let t = Instant::now();
            f(r);
            t.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

#[allow(clippy::too_many_arguments)]
fn report(d: DType, m: usize, q8: bool, how: &str, s: f64, wbytes: usize, n: usize, k: usize) {
    println!(
        "{:6} m={m:4}{} {:8}: {:8.3} ms  {:6.2} GB/s of weights  {:7.1} GFLOP/s",
        d.name(),
        if q8 { " q8" } else { "   " },
        how,
        s * 1e3,
        wbytes as f64 / s / 1e9,
        2.0 * (m * n * k) as f64 / s / 1e9
    );
}
