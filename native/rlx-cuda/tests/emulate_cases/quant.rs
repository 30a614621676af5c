//! `dequant_matmul` kernels in the CPU emulation (part of `emulate.rs`,
//! split out by what it holds): every block type the CUDA kernels decode,
//! through the gemv kernel (M = 1 and M = 7), the decode + GEMM path (f32,
//! M = 70) and the tiled one (f16, M = 70: two row tiles, the second
//! partial; N = 67: a partial column tile), in one emulated executable,
//! against the CPU reference on random blocks (every bit pattern of the
//! quants) — f32 x to 1e-5 of the O(1) outputs, f16 x to CUDA's f16
//! tolerance.

use super::*;
#[path = "../support/quant.rs"]
#[allow(dead_code)] // shared with the host tests and the GPU suite
mod support;
use support::{dequant_graph, random_blocks, random_x, QRng};

#[test]
fn dequant_matmul_every_block_type_gemv_and_tiled() {
    if !gxx_ok() {
        eprintln!("no g++: dequant_matmul not emulated");
        return;
    }
    let mut rng = QRng(0xdeca);
    let mut cases = Vec::new();
    for d in rlx_cuda::codegen::kernels::quant::DTYPES {
        let k = if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) {
            512
        } else {
            96
        };
        for (xd, xs, n) in [
            (DType::F32, vec![1, k], 67),
            (DType::F32, vec![7, k], 13),
            (DType::F32, vec![70, k], 67),
            (DType::F16, vec![3, k], 5),
            (DType::F16, vec![2, 35, k], 9),
        ] {
            let text = dequant_graph(xd, &xs, d, n);
            let ins = vec![
                random_x(&mut rng, xd, &xs),
                random_blocks(&mut rng, d, n, k),
            ];
            let want = rlx_cpu::run_graph(&parse(&text).unwrap(), &ins).unwrap();
            let p = plan_of(&text).expect("plannable");
            cases.push((format!("{d} x {xd}{xs:?} n={n}"), p, ins, want));
        }
    }
    let plans: Vec<&plan::Plan> = cases.iter().map(|c| &c.1).collect();
    let exe = build("dequant_matmul", &plans).unwrap();
    for (k, (name, p, ins, want)) in cases.iter().enumerate() {
        let (got, err) = exec(&exe, k, p, ins).unwrap();
        assert_eq!(err, 0, "{name}: error flag");
        let tol = if want[0].dtype() == DType::F32 {
            1e-5
        } else {
            2e-3
        };
        let d = max_rel(&got[0], &want[0]);
        assert!(d <= tol, "{name}: max rel diff {d:e} > {tol:e}");
    }
}
