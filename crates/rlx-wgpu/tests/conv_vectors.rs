//! Convolutions and pools on the machine's Vulkan adapter (lavapipe in
//! CI) against the committed reference vectors (PyTorch, made by
//! tests/vectors/generate.py): every f32 case of conv, conv_act,
//! conv_transpose, max_pool and avg_pool — 1-D, 2-D and 3-D, groups,
//! dilations, asymmetric pads — runs natively (no decomposition) within
//! the case's tolerance (max_pool on i32 too).
#![cfg(not(target_arch = "wasm32"))]

mod common;
use rlx::conformance::{engine, exact, run_file_on, vector_files, Extra};
use rlx::{CompileOptions, Device, DispatchOptions, Policy};
use std::path::Path;

const OPS: [&str; 5] = ["conv", "conv_act", "conv_transpose", "max_pool", "avg_pool"];

#[test]
fn convs_and_pools_match_the_vectors_on_vulkan() {
    common::init();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/ops");
    let files = vector_files(&dir, |op| OPS.contains(&op)).unwrap();
    assert_eq!(files.len(), OPS.len());
    let opts = CompileOptions {
        dispatch: DispatchOptions::new(Policy::NativeOnly),
        ..Default::default()
    };
    let vk = engine(Device::Vulkan, opts);
    let x = Extra {
        label: " (vulkan)",
        runs: &|_| true,
        engine: &vk,
        tol: &exact,
    };
    let mut ran = 0;
    for f in &files {
        let mut f = f.clone();
        if let Some(cases) = f["cases"].as_array_mut() {
            // wgpu holds no f64, i8 or u8 (its claims say so).
            cases.retain(|c| {
                let g = c["graph"].as_str().unwrap_or("");
                !["f64", "i8[", "u8["].iter().any(|d| g.contains(d))
            });
            ran += cases.len();
        }
        let r = run_file_on(&f, &x);
        assert!(r.failures.is_empty(), "{}", r.failures.join("\n"));
        assert_eq!(r.skipped, 0, "{}: cases refused on Vulkan", r.op);
    }
    eprintln!("{ran} conv and pool vector cases on vulkan");
    assert!(ran >= 30, "only {ran} cases");
}
