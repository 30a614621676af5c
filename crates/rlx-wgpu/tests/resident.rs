//! `Compiled::update_resident`: inputs promised resident change in place
//! (a decoder's key/value cache), on the CPU engine and on wgpu (Vulkan;
//! lavapipe in CI). After each update the outputs equal a float64
//! reference computed from the caller's changed tensors: a weight read
//! transposed (the CPU prepares a copy of it) and a tensor read directly,
//! updated by whole rows and by strided runs; runs outside the tensor
//! are an error.
#![cfg(not(target_arch = "wasm32"))]

use rlx::ir::GraphBuilder;
use rlx::{DType, Device, HostTensor, Runs, TensorType};

const M: usize = 4;
const K: usize = 16;
const N: usize = 8;

/// y = x · wᵀ + c.
fn graph() -> rlx::Graph {
    let mut b = GraphBuilder::new("resident");
    let x = b.input("x", TensorType::new(DType::F32, [M, K]));
    let w = b.input("w", TensorType::new(DType::F32, [N, K]));
    let c = b.input("c", TensorType::new(DType::F32, [M, N]));
    let wt = b
        .op1(
            "permute",
            &[w],
            rlx::Attrs::new().with("perm", vec![1i64, 0]),
        )
        .unwrap();
    let y = b.binary("matmul", x, wt).unwrap();
    let y = b.binary("add", y, c).unwrap();
    b.finish(&[y]).unwrap()
}

fn values(n: usize, k: f64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f64 * k).sin() * 2.0) as f32)
        .collect()
}

fn reference(x: &[f32], w: &[f32], c: &[f32]) -> Vec<f64> {
    let mut y = vec![0f64; M * N];
    for i in 0..M {
        for j in 0..N {
            let dot: f64 = (0..K)
                .map(|k| x[i * K + k] as f64 * w[j * K + k] as f64)
                .sum();
            y[i * N + j] = dot + c[i * N + j] as f64;
        }
    }
    y
}

/// Write `vals` into `data` at `at` (what the caller does to its tensor).
fn write(data: &mut [f32], at: Runs, vals: &[f32]) {
    for (r, s) in at.starts().enumerate() {
        data[s..s + at.len].copy_from_slice(&vals[r * at.len..(r + 1) * at.len]);
    }
}

fn check(device: Device) {
    rlx::init();
    rlx_wgpu::register();
    let c = rlx::compile(&graph(), device).unwrap();
    let x = values(M * K, 0.37);
    let mut w = values(N * K, 0.11);
    let mut cc = values(M * N, 0.53);
    let t = |v: &[f32], d: [usize; 2]| HostTensor::from_slice(v, d).unwrap();
    let run = |w: &[f32], cc: &[f32]| -> Vec<f64> {
        let out = c
            .run(&[t(&x, [M, K]), t(w, [N, K]), t(cc, [M, N])])
            .unwrap();
        out[0].to_f64_vec().unwrap()
    };
    let close = |got: &[f64], want: &[f64], what: &str| {
        let err = got
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-4, "{device}: {what}: max error {err}");
    };
    close(&run(&w, &cc), &reference(&x, &w, &cc), "first run");
    assert!(c.keep_resident(&[1, 2]));
    // Whole rows 2..4 of the weight, and a strided block of c: columns
    // 1..3 of every row (runs of 2, one per row, 8 apart).
    let rows = Runs {
        start: 2 * K,
        count: 1,
        len: 2 * K,
        stride: 2 * K,
    };
    let cols = Runs {
        start: 1,
        count: M,
        len: 2,
        stride: N,
    };
    for round in 0..3 {
        // Run once on the resident copies first (uploaded on this run).
        close(&run(&w, &cc), &reference(&x, &w, &cc), "resident");
        let new_w = values(rows.numel(), 0.7 + round as f64);
        let new_c = values(cols.numel(), 1.3 + round as f64);
        write(&mut w, rows, &new_w);
        write(&mut cc, cols, &new_c);
        c.update_resident(
            1,
            rows,
            &HostTensor::from_slice(&new_w, [rows.numel()]).unwrap(),
        )
        .unwrap();
        c.update_resident(
            2,
            cols,
            &HostTensor::from_slice(&new_c, [cols.numel()]).unwrap(),
        )
        .unwrap();
        close(
            &run(&w, &cc),
            &reference(&x, &w, &cc),
            &format!("after update {round}"),
        );
    }
    // Runs past the end, or values that do not fill them: errors.
    let past = Runs {
        start: M * N - 1,
        count: 1,
        len: 2,
        stride: 2,
    };
    let two = HostTensor::from_slice(&[0f32, 0.0], [2]).unwrap();
    let e = c.update_resident(2, past, &two).unwrap_err().to_string();
    assert!(e.contains("reaches past"), "{e}");
    let e = c.update_resident(2, cols, &two).unwrap_err().to_string();
    assert!(e.contains("2 values for 4 runs"), "{e}");
    assert!(c.update_resident(3, cols, &two).is_err());
    let ints = HostTensor::from_slice(&[0i32; 8], [8]).unwrap();
    let e = c.update_resident(2, cols, &ints).unwrap_err().to_string();
    assert!(e.contains("the values are i32"), "{e}");
}

#[test]
fn resident_inputs_update_in_place_on_the_cpu() {
    check(Device::Cpu);
}

#[test]
fn resident_inputs_update_in_place_on_vulkan() {
    check(Device::Vulkan);
}
