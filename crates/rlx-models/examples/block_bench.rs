//! p50 latency of one MiniLM-sized encoder block (hidden 384, 12 heads,
//! ffn 1536, seq 128; DSL-built, deterministic weights) on the CPU backend
//! natively — the native side of `benches/wasm/run.py`, which runs the same
//! graph in the wasm32 build under Node. The weights are kept resident on
//! both sides, as for inference with a loaded model.
//!
//!     RLX_NUM_THREADS=1 cargo run --release -p rlx-models --example block_bench -- 1 2 4 8

use rlx::Device;
use rlx_models::dsl_block::{block_inputs, block_params, encoder_block, BlockShape};
use std::time::Instant;

fn main() -> Result<(), rlx::Error> {
    // RLX_* settings (threads, AMX, ...) through the one edge.
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let batches: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let batches = if batches.is_empty() {
        vec![1, 2, 4, 8]
    } else {
        batches
    };
    for b in batches {
        let g = encoder_block(BlockShape {
            batch: b,
            ..BlockShape::MINILM
        })?;
        let ins = block_inputs(&g, 42)?;
        let c = rlx::compile(&g, Device::Cpu)?;
        // Weights resident, as for a loaded model (the wasm side does the same).
        c.keep_resident(&block_params(&g));
        for _ in 0..2 {
            c.run(&ins)?;
        }
        let mut t: Vec<f64> = (0..20)
            .map(|_| {
                let s = Instant::now();
                c.run(&ins).map(|_| s.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<Result<_, _>>()?;
        t.sort_by(f64::total_cmp);
        // The matmuls' kernel, from the dispatch report (which GEMM is timed).
        let gemm = c
            .dispatch_report()
            .nodes
            .iter()
            .find(|n| n.op.starts_with("matmul"))
            .and_then(|n| n.kernels.first().cloned())
            .unwrap_or_default();
        println!(
            "{{\"batch\": {b}, \"p50_ms\": {:.3}, \"min_ms\": {:.3}, \"gemm\": {gemm:?}}}",
            t[t.len() / 2],
            t[0]
        );
    }
    Ok(())
}
