//! The matmul kernel at each register block size (2, 4, 8), forced with
//! `WgpuOptions::matmul_block`, against the CPU reference on shapes that
//! leave partial tiles in every dimension. One test function: the
//! registered backends are process-wide.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType};

#[test]
fn every_block_size_matches_cpu() {
    let mut rng = Rng::new(21);
    for r in [2, 4, 8] {
        init_with(rlx_wgpu::WgpuOptions {
            matmul_block: Some(r),
            ..Default::default()
        });
        for (sa, sb, act) in [
            (vec![2, 37, 70], vec![70, 45], "gelu"),
            (vec![130, 9], vec![9, 131], "none"),
        ] {
            let g = one_op(
                "matmul_bias_act",
                &[
                    (DType::F32, sa.clone()),
                    (DType::F32, sb.clone()),
                    (DType::F32, vec![sb[1]]),
                ],
                Attrs::new().with("activation", act),
            );
            let ins = [
                rand(&mut rng, DType::F32, &sa, -1.0, 1.0),
                rand(&mut rng, DType::F32, &sb, -1.0, 1.0),
                rand(&mut rng, DType::F32, &[sb[1]], -1.0, 1.0),
            ];
            parity(&format!("block {r}: {sa:?} @ {sb:?}"), &g, &ins, 1e-5, 1e-4);
        }
        // Transposed operands (k-contiguous weight, m-contiguous lhs): the
        // tile loads walk the unit-stride axis.
        let g = transposed_matmul(DType::F32, [70, 45], [33, 70]);
        let ins = [
            rand(&mut rng, DType::F32, &[70, 45], -1.0, 1.0),
            rand(&mut rng, DType::F32, &[33, 70], -1.0, 1.0),
        ];
        parity(
            &format!("block {r}: transposed operands"),
            &g,
            &ins,
            1e-5,
            1e-4,
        );
    }
}
