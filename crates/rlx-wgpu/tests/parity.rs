//! Parity with the CPU reference on seeded random inputs, for every op and
//! dtype the wgpu backend claims, run on the machine's Vulkan adapter
//! (Mesa lavapipe in CI). The cases are data in `common/cases.rs`, shared
//! with the browser suite (`browser.rs`, WebGPU in headless Chromium);
//! this file runs them blocking, one `#[test]` per group.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType};

const F: DType = DType::F32;

#[test]
fn f16_twins() {
    run_group(cases::f16_twins());
}

#[test]
fn unary_f32() {
    run_group(cases::unary_f32());
}

#[test]
fn unary_int_and_bool() {
    run_group(cases::unary_int_and_bool());
}

#[test]
fn binary_with_broadcasting() {
    run_group(cases::binary_with_broadcasting());
}

#[test]
fn where_clamp_cast() {
    run_group(cases::where_clamp_cast());
}

#[test]
fn reductions() {
    run_group(cases::reductions());
}

#[test]
fn softmax_and_norms() {
    run_group(cases::softmax_and_norms());
}

#[test]
fn matmul_shapes_and_epilogues() {
    run_group(cases::matmul_shapes_and_epilogues());
}

#[test]
fn attention_masks() {
    run_group(cases::attention_masks());
}

#[test]
fn gather_embedding() {
    run_group(cases::gather_embedding());
}

#[test]
fn dequant_matmul_block_types() {
    run_group(cases::dequant_matmul());
}

#[test]
fn conv_and_pool() {
    run_group(cases::conv_and_pool());
}

#[test]
fn shape_ops_and_views() {
    run_group(cases::shape_ops_and_views());
}

#[test]
fn mixed_graph() {
    run_group(cases::mixed_graph());
}

#[test]
fn fused_region_is_one_kernel() {
    init();
    let c = rlx::compile(&cases::fused_chain(), rlx::Device::Vulkan).unwrap();
    let ops = kernel_ops(&c.program().graph);
    assert_eq!(ops, ["fused_elementwise"], "the chain is fused");
    run_group(cases::fused_regions());
}

#[test]
fn residual_add_head_merge_and_split_k_kernels() {
    init();
    // The folds rlx-opt decides (matmul_residual, attention_merged) are one
    // kernel each here.
    for (g, want) in [
        (cases::residual_matmul(), "_matmul_residual_f32"),
        (cases::merged_heads(), "_attention_merged_f32"),
    ] {
        let names: Vec<String> = rlx_wgpu::kernels_of(&g, rlx::Device::Vulkan)
            .unwrap()
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(names.len(), 1, "one kernel: {names:?}");
        assert!(names[0].ends_with(want), "{names:?}");
    }
    run_group(cases::kernel_fusions());
    // A long K over few output tiles is split: partials, then a reducer.
    let g = one_op(
        "matmul",
        &[(F, vec![33, 520]), (F, vec![520, 7])],
        Attrs::new(),
    );
    let names: Vec<String> = rlx_wgpu::kernels_of(&g, rlx::Device::Vulkan)
        .unwrap()
        .into_iter()
        .map(|k| k.name)
        .collect();
    assert!(
        names.len() == 2 && names[1].ends_with("_splitk"),
        "{names:?}"
    );
}

#[test]
fn unclaimed_ops_decompose_or_fail_with_the_dispatch_error() {
    init();
    let c = rlx::compile(&cases::group_norm(), rlx::Device::Vulkan).unwrap();
    let report = c.dispatch_report().to_string();
    assert!(report.contains("group_norm"), "{report}");
    run_group(cases::decomposed());
}

#[test]
fn typed_errors() {
    init();
    let cases = cases::error_cases();
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|c| check_error_native(c).err())
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn every_claimed_op_has_a_parity_case() {
    init();
    let claims = rlx_wgpu::claims::claims();
    assert!(
        claims.ops.len() >= 80,
        "{} op kinds claimed",
        claims.ops.len()
    );
    let cases = all_cases();
    let seen = exercised(&cases, rlx::Device::Vulkan).unwrap();
    let missing = uncovered(&seen);
    assert!(
        missing.is_empty(),
        "claimed (op, dtype) pairs no case hands the backend: {}",
        missing.join(", ")
    );
    let pairs: usize = claims.ops.values().map(|d| d.len().max(1)).sum();
    eprintln!(
        "{} op kinds ({pairs} op-dtype pairs) claimed, {} cases",
        claims.ops.len(),
        cases.len()
    );
}

#[test]
fn oversized_tensors_and_missing_adapters_are_typed_errors() {
    init();
    // One input over lavapipe's 128 MiB storage binding (the limit comes
    // from the adapter, so this is checked against whatever it reports).
    let limit = rlx_wgpu::WgpuBackend::new(rlx::Device::Vulkan)
        .context()
        .unwrap()
        .info
        .max_storage_binding;
    let n = (limit / 4 + 1024) as usize;
    let g = one_op("exp", &[(F, vec![n])], Attrs::new());
    let Err(err) = rlx::compile(&g, rlx::Device::Vulkan) else {
        panic!("an oversized input compiled")
    };
    let err = err.to_string();
    assert!(
        err.contains("maxStorageBufferBindingSize") && err.contains(&limit.to_string()),
        "{err}"
    );
    // Metal is compiled in on macOS only: elsewhere a typed "no adapter"
    // error, not a panic.
    if cfg!(target_os = "macos") {
        return;
    }
    let Err(e) = pollster::block_on(rlx_wgpu::GpuContext::create(rlx::Device::Metal)) else {
        panic!("a Metal adapter off macOS")
    };
    assert!(matches!(e, rlx_wgpu::WgpuError::NoAdapter { .. }), "{e}");
}

#[test]
fn gpu_device_picks_the_best_adapter() {
    init();
    let mut rng = Rng::new(13);
    let g = one_op("softmax", &[(F, vec![3, 5])], Attrs::new());
    let x = rand(&mut rng, F, &[3, 5], -1.0, 1.0);
    let want = run_on(&g, rlx::Device::Cpu, std::slice::from_ref(&x)).unwrap();
    let got = run_on(&g, rlx::Device::Gpu, &[x]).unwrap();
    assert_close("softmax on `gpu`", &got[0], &want[0], 1e-6, 1e-5);
}

/// The same kernels through wgpu's OpenGL back end (desktop GL 4.5 or GLES
/// 3.1 via EGL: Mesa's llvmpipe here, which lacks `shader-f16`, so f16 takes
/// the f32-held path): every group against the CPU reference except the
/// f16 twins, which the browser suite and `f16_wide.rs` run on that path
/// (GL pipelines are slow to build on llvmpipe: the twins would double the
/// time).
#[test]
fn opengl_runs_the_parity_cases() {
    init();
    let mut failed = Vec::new();
    let mut n = 0;
    for (name, group) in cases::groups() {
        if name == "f16_twins" {
            continue;
        }
        for mut c in group() {
            n += 1;
            let want = match reference(&c) {
                Ok(w) => w,
                Err(e) => {
                    failed.push(e);
                    continue;
                }
            };
            c.name = format!("{name}/{} (opengl)", c.name);
            let got = rlx::compile(&c.graph, rlx::Device::OpenGl).and_then(|m| m.run(&c.inputs));
            match got {
                Ok(got) => {
                    if let Err(e) = compare_all(&c, &got, &want) {
                        failed.push(e);
                    }
                }
                Err(e) => failed.push(format!("{}: {e}", c.name)),
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {n} cases differ on OpenGL:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
