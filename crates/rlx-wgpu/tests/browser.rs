//! The same parity checks in the browser: compiled to wasm32 and run by
//! wasm-bindgen-test in headless Chromium's WebGPU (SwiftShader there), via
//! the async path (`GpuContext::create(..).await`, `run_async`), against
//! the CPU reference compiled into the same wasm module.
//! Run: scripts/test-wgpu-browser.
#![cfg(target_arch = "wasm32")]

use rlx::{Attrs, DType, Device, Graph, HostTensor, Trace};
use rlx_wgpu::{program_of, GpuContext, WgpuExecutable};
use std::sync::Mutex;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn rand(seed: &mut u64, shape: &[usize], lo: f64, hi: f64) -> HostTensor {
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((*seed >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    HostTensor::from_f64(DType::F32, shape.to_vec(), v).unwrap()
}

async fn check(ctx: &std::sync::Arc<GpuContext>, what: &str, g: &Graph, inputs: &[HostTensor]) {
    let want = rlx_cpu::run_graph(g, inputs).unwrap();
    let cache = Mutex::new(Default::default());
    let exe =
        WgpuExecutable::build_async(ctx.clone(), &cache, &program_of(g, Device::WebGpu).unwrap())
            .await
            .unwrap();
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let got = exe.run_async(&refs).await.unwrap();
    for (a, b) in got.iter().zip(&want) {
        let (a, b) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 + 1e-4 * y.abs(),
                "{what}: element {i}: webgpu {x} vs cpu {y}"
            );
        }
    }
}

#[wasm_bindgen_test]
async fn webgpu_matches_the_cpu_reference() {
    let ctx = std::sync::Arc::new(
        GpuContext::create(Device::WebGpu)
            .await
            .expect("a WebGPU adapter (run Chromium with --enable-unsafe-webgpu)"),
    );
    let mut seed = 7u64;
    // An MLP-with-attention-shaped mix: matmul epilogue, softmax, layer norm,
    // a fused elementwise region, a reduction, attention.
    let t = Trace::new("browser");
    let x = t.input("x", DType::F32, vec![2, 8, 16]);
    let w = t.input("w", DType::F32, vec![16, 16]);
    let b = t.input("b", DType::F32, vec![16]);
    let h = x
        .apply1(
            "matmul_bias_act",
            &[&w, &b],
            Attrs::new().with("activation", "gelu"),
        )
        .unwrap();
    let s = h.softmax(-1).unwrap();
    let n = s.layer_norm(&b, &b, 1e-5).unwrap();
    let e = n
        .apply1("mul", &[&x], Attrs::new())
        .unwrap()
        .apply1("tanh", &[], Attrs::new())
        .unwrap();
    let r = e.sum(&[1], false).unwrap();
    let a = x
        .apply1(
            "attention",
            &[&h, &e],
            Attrs::new().with("mask_kind", "causal"),
        )
        .unwrap();
    let g = t.finish(&[&r, &a]).unwrap();
    let ins = [
        rand(&mut seed, &[2, 8, 16], -1.0, 1.0),
        rand(&mut seed, &[16, 16], -0.5, 0.5),
        rand(&mut seed, &[16], 0.5, 1.5),
    ];
    check(&ctx, "mixed graph", &g, &ins).await;
}
