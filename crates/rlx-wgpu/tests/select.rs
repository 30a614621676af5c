//! Per-node selection: a node the claims admit but the WGSL kernels cannot
//! run is refused during legalization, with the reason, before anything is
//! built (no GPU needed). Before `select`, a `fused_elementwise` region
//! with two outputs passed legalization (the region op and its body ops
//! are claimed for f32) and failed only while lowering, so the
//! `DispatchError` listing every unsupported node never saw it, and the
//! default policy could not take the region's decomposition instead.

use rlx_ir::text;
use rlx_runtime::{legalize, Device, DispatchOptions, DispatchPath, Policy};
use rlx_wgpu::WgpuBackend;

const TWO_OUTPUTS: &str = "graph @g(%x: f32[4], %y: f32[4]) {\n  %r, %s = fused_elementwise(%x, %y) {body=graph @region(%in0: f32[4], %in1: f32[4]) {\n    %2 = add(%in0, %in1) : f32[4]\n    %3 = mul(%2, %in1) : f32[4]\n    return %2, %3\n  }}\n  return %r, %s\n}";

#[test]
fn a_region_the_kernels_cannot_run_is_refused_at_legalization_with_the_reason() {
    let g = text::parse(TWO_OUTPUTS).unwrap();
    let backend = WgpuBackend::new(Device::Vulkan);
    // Native only: the DispatchError names the node and why.
    let Err(e) = legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly)) else {
        panic!("the two-output region was not refused");
    };
    let s = e.to_string();
    assert!(s.contains("node 0 `fused_elementwise`"), "{s}");
    assert!(
        s.contains("no WGSL kernel for regions with several outputs (2)"),
        "{s}"
    );
    // The default policy takes the region's decomposition instead, and the
    // report says why the native kernel was not used.
    let l = legalize(&g, &backend, &DispatchOptions::default()).unwrap();
    let n = &l.report.nodes[0];
    assert_eq!(n.path, DispatchPath::CommonIr, "{n:?}");
    assert_eq!(n.kernels, ["wgsl::add<f32>", "wgsl::mul<f32>"], "{n:?}");
    assert_eq!(n.declined.len(), 1, "{n:?}");
    assert_eq!(n.declined[0].path, DispatchPath::Native);
    assert!(n.declined[0].why.contains("several outputs"), "{n:?}");
    let text = l.report.to_string();
    assert!(
        text.contains("↳ not native: no WGSL kernel for regions with several outputs (2)"),
        "{text}"
    );
}

#[test]
fn a_region_with_wgsl_forms_is_selected() {
    let src = "graph @g(%x: i32[4], %y: i32[4]) {\n  %r = fused_elementwise(%x, %y) {body=graph @region(%in0: i32[4], %in1: i32[4]) {\n    %2 = add(%in0, %in1) : i32[4]\n    %3 = mul(%2, %in1) : i32[4]\n    return %3\n  }}\n  return %r\n}";
    let g = text::parse(src).unwrap();
    let backend = WgpuBackend::new(Device::Vulkan);
    let l = legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly)).unwrap();
    assert_eq!(l.report.nodes[0].kernels, ["wgsl::fused_elementwise<i32>"]);
}

#[test]
fn dequant_matmul_is_selected_for_the_decoded_block_types_and_refused_for_others() {
    let backend = WgpuBackend::new(Device::Vulkan);
    let src = |w: &str| {
        format!(
            "graph @g(%x: f32[2, 256], %w: {w}[5, 256]) {{\n  %y = dequant_matmul(%x, %w) : f32[2, 5]\n  return %y\n}}"
        )
    };
    for w in [
        "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k",
    ] {
        let g = text::parse(&src(w)).unwrap();
        let l = legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly))
            .unwrap_or_else(|e| panic!("{w}: {e}"));
        let n = l.report.nodes.iter().find(|n| n.op == "dequant_matmul");
        assert_eq!(
            n.map(|n| n.kernels.clone()),
            Some(vec!["wgsl::dequant_matmul<f32>".to_string()]),
            "{w}"
        );
    }
    // Q2_K has no WGSL decoder: refused with the reason, before any build.
    let g = text::parse(&src("q2_k")).unwrap();
    let Err(e) = legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly)) else {
        panic!("a q2_k dequant_matmul was selected");
    };
    let s = e.to_string();
    assert!(
        s.contains("`dequant_matmul`") && s.contains("no WGSL kernel decodes q2_k weights"),
        "{s}"
    );
}

/// The fuser moves one-element constants into a region's body; the WGSL
/// kernels write them as literals. Before, every region holding one (any
/// `x * 0.5 + 1`) was refused and ran op by op through its decomposition.
#[test]
fn a_region_with_scalar_constants_is_native() {
    let src = "graph @g(%x: f32[4]) {\n  %r = fused_elementwise(%x) {body=graph @region(%in0: f32[4]) {\n    %1 = constant() {value=tensor<f32[]> [0.5]} : f32[]\n    %2 = mul(%in0, %1) : f32[4]\n    %3 = constant() {value=tensor<f32[]> [inf]} : f32[]\n    %4 = add(%2, %3) : f32[4]\n    return %4\n  }}\n  return %r\n}";
    let g = text::parse(src).unwrap();
    let backend = WgpuBackend::new(Device::Vulkan);
    let l = legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly)).unwrap();
    assert_eq!(l.report.nodes[0].path, DispatchPath::Native);
    assert_eq!(l.report.nodes[0].kernels, ["wgsl::fused_elementwise<f32>"]);
}

/// A matmul whose workgroup grid would pass WebGPU's 65,535 per axis (a
/// batch of 70,000 small products) is refused at legalization with the
/// reason — before, lowering found it while building, after the
/// `DispatchError` that lists every unsupported node. Its neighbours, and
/// the same product at a batch that fits, are native.
#[test]
fn a_matmul_past_the_dispatch_grid_is_refused_with_the_reason() {
    let backend = WgpuBackend::new(Device::Vulkan);
    let graph = |b: usize| {
        text::parse(&format!(
            "graph @g(%a: f32[{b},4,4], %w: f32[{b},4,4]) {{\n  %y = matmul(%a, %w)\n  %z = tanh(%y)\n  return %z\n}}"
        ))
        .unwrap()
    };
    let Err(e) = legalize(&graph(70_000), &backend, &DispatchOptions::default()) else {
        panic!("a 70,000-batch matmul was not refused");
    };
    let s = e.to_string();
    assert!(s.contains("node 0 `matmul`"), "{s}");
    assert!(s.contains("WebGPU allows 65535 per axis"), "{s}");
    assert_eq!(e.nodes.len(), 1, "only the matmul: {s}");
    assert!(legalize(&graph(60_000), &backend, &DispatchOptions::default()).is_ok());
}

#[test]
fn a_cast_to_a_type_wgsl_cannot_make_is_refused_at_legalization() {
    // Claimed by its input (i32), but i64 is only read in WGSL, never made:
    // it failed while lowering before (found by the ONNX node tests on
    // Vulkan: TfIdfVectorizer casts its int32 tokens to int64).
    let backend = WgpuBackend::new(Device::Vulkan);
    let g =
        text::parse("graph @g(%x: i32[4]) {\n  %y = cast(%x) {dtype=i64} : i64[4]\n  return %y\n}")
            .unwrap();
    let Err(e) = legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly)) else {
        panic!("the i32 → i64 cast was not refused");
    };
    assert!(
        e.to_string().contains("no WGSL cast from i32 to i64"),
        "{e}"
    );
    // i64 → i32 has a form.
    let g =
        text::parse("graph @g(%x: i64[4]) {\n  %y = cast(%x) {dtype=i32} : i32[4]\n  return %y\n}")
            .unwrap();
    assert!(legalize(&g, &backend, &DispatchOptions::new(Policy::NativeOnly)).is_ok());
}
