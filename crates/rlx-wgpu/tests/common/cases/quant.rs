//! `dequant_matmul` with GGUF block-quantized weights: every block type the
//! WGSL decoders read, at decode (M = 1), small (M = 7) and prompt-sized
//! (M = 33, batched x) shapes, K of one and several blocks, N odd. Part of
//! `cases` (same helpers), split out by what it holds.

use super::*;
use rlx::ir::TensorData;

/// Byte offsets of a block's f16 scales (d, and the min where there is one).
fn scale_offsets(d: DType) -> &'static [usize] {
    match d {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K => &[0, 2],
        DType::Q6K => &[208],
        _ => &[],
    }
}

/// An (n, k) weight of `d` with random bytes (every bit pattern of the
/// quants, sub-block scales and qh planes) except the f16 scales, which
/// are random up to a bound that makes the weights O(0.1) (so a dot
/// product of K terms is O(1)); small ones are f16 subnormals.
pub fn random_blocks(rng: &mut Rng, d: DType, n: usize, k: usize) -> HostTensor {
    let rlx::ir::dtype::Storage::Block { block, bytes } = d.storage() else {
        panic!("{d} is not a block type")
    };
    let mut b: Vec<u8> = (0..n * k / block * bytes)
        .map(|_| (rng.next_f64() * 256.0) as u8)
        .collect();
    let max = match d {
        DType::Q8_0 => 0.003,
        DType::Q5_0 | DType::Q5_1 => 0.025,
        DType::Q4K | DType::Q5K => 0.0005,
        DType::Q6K => 0.0002,
        _ => 0.05,
    };
    for blk in b.chunks_exact_mut(bytes) {
        for &o in scale_offsets(d) {
            let v = half::f16::from_f64(rng.uniform(-max, max));
            blk[o..o + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    HostTensor::new(d, vec![n, k], TensorData::Packed(b)).unwrap()
}

/// The block types the WGSL kernels decode.
pub const QUANT: [DType; 8] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

fn case(rng: &mut Rng, xd: DType, d: DType, xs: &[usize], n: usize, tol: (f64, f64)) -> Case {
    let k = *xs.last().unwrap();
    let g = one_op(
        "dequant_matmul",
        &[(xd, xs.to_vec()), (d, vec![n, k])],
        Attrs::new(),
    );
    let x = rand(rng, F, xs, -1.0, 1.0);
    let x = if xd == F {
        x
    } else {
        HostTensor::from_f64(xd, x.shape().clone(), x.to_f64_vec().unwrap()).unwrap()
    };
    let w = random_blocks(rng, d, n, k);
    Case::new(
        format!("dequant_matmul {xd} x{xs:?} · {d}[{n}, {k}]ᵀ"),
        g,
        vec![x, w],
        tol,
    )
}

pub fn dequant_matmul() -> Vec<Case> {
    let mut rng = Rng::new(21);
    let mut v = Vec::new();
    for d in QUANT {
        let big = if matches!(d, DType::Q4K | DType::Q5K | DType::Q6K) {
            768
        } else {
            576
        };
        // Decode (gemv), a few rows (gemv over 7 rows), a prompt (tiled).
        v.push(case(&mut rng, F, d, &[1, big], 67, TIGHT));
        v.push(case(&mut rng, F, d, &[7, 256], 13, TIGHT));
        v.push(case(&mut rng, F, d, &[3, 11, big], 67, TIGHT));
    }
    // f16 activations (stored as f16, or as f32 words without shader-f16).
    v.push(case(
        &mut rng,
        DType::F16,
        DType::Q8_0,
        &[1, 256],
        9,
        F16_ONE,
    ));
    v.push(case(
        &mut rng,
        DType::F16,
        DType::Q4K,
        &[2, 9, 256],
        5,
        F16_ONE,
    ));
    v
}

/// f32 rounding of the dot products: 1e-5 of the outputs' O(1) scale
/// (the reference sums in f64; K ≤ 768 terms of O(0.05)).
const TIGHT: (f64, f64) = (1e-5, 1e-5);
