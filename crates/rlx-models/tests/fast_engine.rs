//! The fast CPU engine against the reference interpreter on the DSL
//! encoder block (primitive ops in; after the optimizer: fused attention
//! with a bias mask read through head-split permutes, layer norms, gelu
//! GEMM epilogues, in-place residual adds). Both start from the same
//! graph and seeded inputs; the reference widens to f64.

use rlx::{Device, HostTensor};
use rlx_models::dsl_block::{encoder_block, BlockShape};

/// Deterministic inputs in [-0.5, 0.5) (an LCG), with a padding mask.
fn inputs(g: &rlx::Graph, seed: u64) -> Vec<HostTensor> {
    let mut state = seed;
    g.inputs
        .iter()
        .map(|&v| {
            let ty = g.ty(v);
            let n = ty.shape.numel();
            let name = g.values[v.index()].name.clone().unwrap_or_default();
            let data: Vec<f32> = (0..n)
                .map(|i| {
                    if name == "mask" {
                        // Last quarter of the keys padded out.
                        let s = *ty.dims().last().unwrap();
                        if i % s >= s * 3 / 4 {
                            -1e4
                        } else {
                            0.0
                        }
                    } else {
                        state = state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                    }
                })
                .collect();
            HostTensor::new(ty.dtype, ty.shape.clone(), data.into()).unwrap()
        })
        .collect()
}

#[test]
fn encoder_block_fast_engine_matches_reference() {
    let shape = BlockShape {
        batch: 2,
        seq: 24,
        hidden: 48,
        heads: 4,
        ffn: 96,
    };
    let g = encoder_block(shape).unwrap();
    let ins = inputs(&g, 7);
    let want = rlx_cpu::run_graph(&g, &ins).unwrap();
    let compiled = rlx::compile(&g, Device::Cpu).unwrap();
    // Every kernel of the optimized block is one of the fast engine's.
    let kernels: Vec<&String> = compiled
        .dispatch_report()
        .nodes
        .iter()
        .flat_map(|n| &n.kernels)
        .collect();
    let slow: Vec<_> = kernels
        .iter()
        .filter(|k| k.starts_with("cpu::ref::"))
        .collect();
    assert!(slow.is_empty(), "reference kernels in the block: {slow:?}");
    assert!(kernels
        .iter()
        .any(|k| k.starts_with("cpu::fast::attention")));
    let got = compiled.run(&ins).unwrap();
    let (g0, w0) = (
        got[0].to_vec::<f32>().unwrap(),
        want[0].to_vec::<f32>().unwrap(),
    );
    assert_eq!(g0.len(), w0.len());
    let mut worst = 0f32;
    for (a, b) in g0.iter().zip(&w0) {
        worst = worst.max((a - b).abs() / (1.0 + b.abs()));
    }
    assert!(worst < 2e-5, "worst relative difference {worst}");
    // A second run reuses the arena and gives the same numbers.
    let again = compiled.run(&ins).unwrap();
    assert_eq!(again[0].to_vec::<f32>().unwrap(), g0);
}
