//! Tests of `qmatmul`: the fast decoders against the reference bit for
//! bit, both paths against dequantize-then-matmul, and the 8-bit
//! activation kernels against their rounding bound and each other.
use super::*;
use rlx_ir::{HostTensor, TensorData};

/// The types with 8-bit-activation kernels (`qdot_x86::TYPES`).
const Q8_TYPES: [DType; 7] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q8_0,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

/// Row `r` of x (rows of `k`) · weight row `j` of `wf` in f64, and the
/// sum of the products' magnitudes (the scale of its rounding error).
fn dot(x: &[f32], wf: &[f64], r: usize, j: usize, k: usize) -> (f64, f64) {
    (0..k).fold((0.0, 0.0), |(s, a), p| {
        let v = x[r * k + p] as f64 * wf[j * k + p];
        (s + v, a + v.abs())
    })
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .collect()
}

/// Random blocks with sane f16 scales (random bytes there could be
/// NaN or ±inf, which compare unequal to themselves).
fn blocks(d: DType, count: usize) -> Vec<u8> {
    let Storage::Block { bytes: bb, .. } = d.storage() else {
        unreachable!()
    };
    let mut b = random_bytes(count * bb, d as u64 + 7);
    let scale_at: &[usize] = match d {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K => &[0, 2],
        DType::Q2K => &[80, 82],
        DType::Q6K => &[208],
        _ => &[],
    };
    for blk in b.chunks_exact_mut(bb) {
        for &at in scale_at {
            blk[at + 1] &= 0x3B; // exponent well below inf/NaN
        }
        if matches!(d, DType::Mxfp4 | DType::Mxfp8) {
            blk[0] = 110 + blk[0] % 30; // scales 2^-17 .. 2^12
        }
        if d == DType::Mxfp8 {
            for c in &mut blk[1..] {
                *c &= 0xFE; // no S.1111.111 (NaN) code
            }
        }
    }
    b
}

#[test]
fn fast_decoders_equal_the_reference_bit_for_bit() {
    for d in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q8_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        DType::Mxfp4,
        DType::Mxfp8,
    ] {
        let Storage::Block { block, .. } = d.storage() else {
            unreachable!()
        };
        let b = blocks(d, 40);
        let mut got = vec![0.0f32; 40 * block];
        decode(d, &b, &mut got);
        let t = HostTensor::new(d, [40 * block], TensorData::Packed(b)).unwrap();
        let want = rlx_ref::kernels::quant::dequantize_values(&t).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), (*w as f32).to_bits(), "{d} element {i}");
        }
    }
}

#[test]
fn both_paths_match_dequantize_then_matmul() {
    for d in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q8_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        DType::Q5_1,
        DType::Q2K,
        DType::Mxfp4,
        DType::Mxfp8,
    ] {
        let Storage::Block { block, bytes: bb } = d.storage() else {
            unreachable!()
        };
        let (n, k) = (37, 2 * block);
        let wb = blocks(d, n * k / block);
        assert_eq!(wb.len(), n * k / block * bb);
        let t = HostTensor::new(d, [n, k], TensorData::Packed(wb.clone())).unwrap();
        let wf = rlx_ref::kernels::quant::dequantize_values(&t).unwrap();
        for (m, few) in [1, 3, GEMM_ROWS + 1]
            .into_iter()
            .flat_map(|m| FewRows::all(d).into_iter().map(move |f| (m, f)))
        {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 23) as f32 / 11.0 - 1.0)
                .collect();
            let mut y = vec![0.0f32; m * n];
            run_on(few, d, false, &wb, &x, m, n, k, &mut y);
            for r in 0..m {
                for j in 0..n {
                    let (want, scale) = dot(&x, &wf, r, j, k);
                    let err = (y[r * n + j] as f64 - want).abs();
                    assert!(
                        err <= 1e-5 * scale.max(1e-30),
                        "{d} m={m} {few:?} [{r},{j}]: {} vs {want}",
                        y[r * n + j]
                    );
                }
            }
        }
    }
}

/// A single long row of x (K past the AVX-512 kernel's `COLS_FROM_K`:
/// four weight rows per pass, plus a remainder column) on every kernel.
#[test]
fn a_long_row_matches_dequantize_then_matmul() {
    // The types with hand-written x86 kernels (the same list).
    for d in Q8_TYPES {
        let Storage::Block { block, .. } = d.storage() else {
            unreachable!()
        };
        let (n, k) = (9, 8448);
        let wb = blocks(d, n * k / block);
        let t = HostTensor::new(d, [n, k], TensorData::Packed(wb.clone())).unwrap();
        let wf = rlx_ref::kernels::quant::dequantize_values(&t).unwrap();
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 7919) % 23) as f32 / 11.0 - 1.0)
            .collect();
        for few in FewRows::all(d) {
            let mut y = vec![0.0f32; n];
            run_on(few, d, false, &wb, &x, 1, n, k, &mut y);
            for (j, &got) in y.iter().enumerate() {
                let (want, scale) = dot(&x, &wf, 0, j, k);
                let err = (got as f64 - want).abs();
                assert!(
                    err <= 1e-5 * scale.max(1e-30),
                    "{d} {few:?} [{j}]: {got} vs {want}"
                );
            }
        }
    }
}

/// With 8-bit activations each x is off by at most half its block's
/// step (max|x|/254), so |error| ≤ Σ |w|·max|x_block|/254 (+ f32
/// rounding): that bound, exactly, for every type and row.
#[test]
fn q8_activations_stay_within_their_rounding_bound() {
    for d in Q8_TYPES {
        if !q8_kernel(d) {
            continue;
        }
        let Storage::Block { block, .. } = d.storage() else {
            unreachable!()
        };
        let (n, k) = (21, 2 * block);
        let wb = blocks(d, n * k / block);
        let t = HostTensor::new(d, [n, k], TensorData::Packed(wb.clone())).unwrap();
        let wf = rlx_ref::kernels::quant::dequantize_values(&t).unwrap();
        // 1 and 5 rows: the few-rows kernel; 13 and 21: the integer
        // GEMM where the CPU has it (full and partial row tiles).
        for m in [1, 5, GEMM_ROWS + 5, 21] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 23) as f32 / 11.0 - 1.0)
                .collect();
            let mut y = vec![0.0f32; m * n];
            run(d, true, &wb, &x, m, n, k, &mut y);
            for r in 0..m {
                let amax: Vec<f64> = x[r * k..(r + 1) * k]
                    .chunks(32)
                    .map(|c| c.iter().fold(0.0f64, |a, v| a.max(v.abs() as f64)))
                    .collect();
                for j in 0..n {
                    let (want, scale) = dot(&x, &wf, r, j, k);
                    let bound: f64 = (0..k)
                        .map(|p| wf[j * k + p].abs() * amax[p / 32] / 254.0)
                        .sum::<f64>()
                        * 1.001
                        + 1e-5 * scale;
                    let err = (y[r * n + j] as f64 - want).abs();
                    assert!(
                        err <= bound,
                        "{d} m={m} [{r},{j}]: {} vs {want}, bound {bound}",
                        y[r * n + j]
                    );
                }
            }
        }
    }
}

/// The integer GEMMs (AVX-512 VNNI and AVX2, each forced where the
/// CPU has it) and the AVX2 few-rows kernel compute the same sums of
/// 8-bit products (in other orders): equal up to f32 rounding, for
/// every type, tile remainder and a k of many groups.
#[test]
#[cfg(target_arch = "x86_64")]
fn q8_gemm_equals_the_few_rows_integer_kernel() {
    for d in Q8_TYPES {
        if !q8_kernel(d) {
            continue;
        }
        let Storage::Block { block, .. } = d.storage() else {
            unreachable!()
        };
        let (n, k) = (37, 512.max(2 * block));
        let wb = blocks(d, n * k / block);
        let t = HostTensor::new(d, [n, k], TensorData::Packed(wb.clone())).unwrap();
        let wf = rlx_ref::kernels::quant::dequantize_values(&t).unwrap();
        for m in [GEMM_ROWS, 19] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 29) as f32 / 13.0 - 1.0)
                .collect();
            let mut want = vec![0.0f32; m * n];
            q8_groups(d, &wb, &x, m, n, k, &mut want);
            for isa in Q8Gemm::all() {
                let mut got = vec![0.0f32; m * n];
                assert!(run_q8_gemm(isa, d, &wb, &x, m, n, k, &mut got));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let (r, j) = (i / n, i % n);
                    let (_, scale) = dot(&x, &wf, r, j, k);
                    assert!(
                        ((g - w).abs() as f64) <= 1e-5 * scale,
                        "{d} {isa:?} m={m} [{r},{j}]: {g} vs {w}"
                    );
                }
            }
        }
    }
}

/// Each few-rows integer kernel (AVX-512 VNNI and AVX2, where the CPU
/// has them) against the 8-bit numerics written out in f64: the weights
/// dequantized by the reference, the activations rounded by the scalar
/// definition (`quantize_scalar`), so `Σ w·dx·q` — but a min term meets
/// the exact x (`Σ (w − min)·dx·q + Σ min·x`, the min found by
/// dequantizing again with it zeroed) — equal up to f32 rounding. Row counts 1, 3 and 7 (the register-tile sizes); an odd
/// count of 32-value blocks (the VNNI kernel's half pair) and several
/// k-quant super-blocks.
#[test]
#[cfg(target_arch = "x86_64")]
fn each_q8_few_rows_kernel_equals_the_8_bit_numerics() {
    for d in Q8_TYPES {
        let Storage::Block { block, .. } = d.storage() else {
            unreachable!()
        };
        let n = 19;
        for k in [3 * block, 4 * block.max(64)] {
            let wb = blocks(d, n * k / block);
            let t = HostTensor::new(d, [n, k], TensorData::Packed(wb.clone())).unwrap();
            let wf = rlx_ref::kernels::quant::dequantize_values(&t).unwrap();
            let Storage::Block { bytes: bb, .. } = d.storage() else {
                unreachable!()
            };
            // The min field (Q4_1's m, the k-quants' dmin) zeroed.
            let mut no_min = wb.clone();
            if matches!(d, DType::Q4_1 | DType::Q4K | DType::Q5K) {
                for blk in no_min.chunks_exact_mut(bb) {
                    blk[2..4].fill(0);
                }
            }
            let t0 = HostTensor::new(d, [n, k], TensorData::Packed(no_min)).unwrap();
            let w0 = rlx_ref::kernels::quant::dequantize_values(&t0).unwrap();
            let min: Vec<f64> = wf.iter().zip(&w0).map(|(a, b)| a - b).collect();
            for m in [1, 3, 7] {
                let x: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 7919) % 37) as f32 / 17.0 - 1.0)
                    .collect();
                let nb = m * k / 32;
                let mut xq = super::super::qdot_x86::Q8Rows {
                    d: vec![0.0; nb],
                    q: vec![0; m * k],
                    sum: vec![0.0; nb],
                };
                super::super::qdot_x86::quantize_scalar(&x, &mut xq);
                let xr: Vec<f32> = (0..m * k).map(|i| xq.q[i] as f32 * xq.d[i / 32]).collect();
                for isa in Q8Few::all(d) {
                    let mut y = vec![0.0f32; m * n];
                    assert!(run_q8_few(isa, d, &wb, &x, m, n, k, &mut y));
                    for r in 0..m {
                        for j in 0..n {
                            let (scaled, s0) = dot(&xr, &w0, r, j, k);
                            let (mins, s1) = dot(&x, &min, r, j, k);
                            let (want, scale) = (scaled + mins, s0 + s1);
                            let got = y[r * n + j] as f64;
                            assert!(
                                (got - want).abs() <= 2e-6 * scale.max(1e-30),
                                "{d} {isa:?} k={k} m={m} [{r},{j}]: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
