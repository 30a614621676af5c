//! The f16 path of adapters without `shader-f16`, forced on this one with
//! `WgpuF16::HeldAsF32` (its own test binary, so no other test sees the
//! registration): f16 tensors held as f32 words, rounded to f16 on every store.
//! Every f16 parity case must still match the CPU reference, and the
//! dispatch report must name the path.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType, Device};

#[test]
fn f16_held_as_f32_matches_reference_and_is_reported() {
    let opts = rlx_wgpu::WgpuOptions {
        f16: rlx_wgpu::WgpuF16::HeldAsF32,
        ..Default::default()
    };
    init_with(opts);
    check_group(cases::f16_twins());
    let ctx = rlx_wgpu::WgpuBackend::with_options(Device::Vulkan, opts)
        .context()
        .unwrap();
    assert!(!ctx.f16_native(), "HeldAsF32 forces the f32-held path");
    let g = one_op("exp", &[(DType::F16, vec![8])], Attrs::new());
    let report = rlx::compile(&g, Device::Vulkan)
        .unwrap()
        .dispatch_report()
        .to_string();
    assert!(
        report.contains("wgsl::exp<f16 held as f32: adapter lacks shader-f16>"),
        "{report}"
    );
}
