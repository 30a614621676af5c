//! The ops defined by a scalar formula (`rlx_ir::Lowering::Formula`) on
//! the machine's Vulkan adapter (lavapipe in CI), compiled as users compile
//! them: the optimizer inlines each formula into one `fused_elementwise`
//! region, which becomes one WGSL kernel from the same expression table as
//! every region; results match the committed reference vectors (SciPy).
//! The backend has no table entry for any of these ops.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use rlx::conformance::{engine, exact, is_formula, run_file_on, vector_files, Extra};
use rlx::{CompileOptions, Device, DispatchOptions, DispatchPath, Graph, Policy};
use std::path::Path;

#[test]
fn formula_ops_match_the_vectors_on_vulkan() {
    common::init();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/ops");
    let files = vector_files(&dir, is_formula).unwrap();
    let opts = CompileOptions {
        dispatch: DispatchOptions::new(Policy::NativeOnly),
        ..Default::default()
    };
    let vk = engine(Device::Vulkan, opts);
    let x = Extra {
        label: " (vulkan, compiled)",
        runs: &|_| true,
        engine: &vk,
        tol: &exact,
    };
    for f in &files {
        // wgpu has no bf16 and no f64 (its claims say so); every other
        // case must run.
        let mut f = f.clone();
        if let Some(cases) = f["cases"].as_array_mut() {
            cases.retain(|c| {
                let g = c["graph"].as_str().unwrap_or("");
                !g.contains("bf16") && !g.contains("f64")
            });
        }
        let r = run_file_on(&f, &x);
        assert!(r.failures.is_empty(), "{}", r.failures.join("\n"));
        assert_eq!(r.skipped, 0, "{}: cases refused on Vulkan", r.op);
        // One kernel per case, named by the region's ops.
        let g: Graph = rlx::ir::text::parse(f["cases"][0]["graph"].as_str().unwrap()).unwrap();
        let c = rlx::compile(&g, Device::Vulkan).unwrap();
        let rep = c.dispatch_report();
        assert_eq!(rep.nodes.len(), 1, "{rep}");
        assert_eq!(rep.nodes[0].path, DispatchPath::Native, "{rep}");
        assert_eq!(
            rep.nodes[0].kernels,
            ["wgsl::fused_elementwise<f32>"],
            "{rep}"
        );
    }
}
