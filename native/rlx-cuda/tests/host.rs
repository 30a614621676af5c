//! Host-side tests: they need no GPU and run in CI. The GPU tests are
//! `examples/gpu.rs`, run on the H200 by `tests/gpu/run.sh`.

use rlx_cuda::{claims, plan, CudaBackend, CudaError};
use rlx_ir::text::parse;
use rlx_runtime::{legalize, Backend, DispatchOptions};

#[test]
fn claims_cover_at_least_80_op_kinds_that_exist() {
    let c = claims();
    assert!(c.ops.len() >= 80, "only {} ops claimed", c.ops.len());
    for op in c.ops.keys() {
        assert!(
            rlx_ir::lookup(op).is_some(),
            "claimed op `{op}` is not in the op registry"
        );
    }
}

#[test]
fn no_driver_is_a_typed_error_not_a_panic() {
    // CI and this build machine have no NVIDIA driver.
    if rlx_cuda::device::libraries_present().is_ok() {
        return; // on a GPU machine this test has nothing to check
    }
    match CudaBackend::new() {
        Err(CudaError::LibraryMissing { lib }) => assert_eq!(lib, "libcuda"),
        other => panic!("expected LibraryMissing, got {other:?}"),
    }
}

/// A backend stand-in with the CUDA claims, so legalization and planning
/// run without a GPU.
struct ClaimsOnly;
impl Backend for ClaimsOnly {
    fn device(&self) -> rlx_runtime::Device {
        rlx_runtime::Device::Cuda
    }
    fn claims(&self) -> rlx_runtime::Claims {
        claims()
    }
    fn compile(
        &self,
        _: rlx_ir::lir::Program,
    ) -> Result<Box<dyn rlx_runtime::Executable>, rlx_runtime::RuntimeError> {
        unreachable!("planning only")
    }
    fn upload(
        &self,
        _: &rlx_ir::HostTensor,
    ) -> Result<rlx_runtime::DeviceTensor, rlx_runtime::RuntimeError> {
        unreachable!()
    }
    fn download(
        &self,
        _: &rlx_runtime::DeviceTensor,
    ) -> Result<rlx_ir::HostTensor, rlx_runtime::RuntimeError> {
        unreachable!()
    }
}

fn planned(text: &str) -> plan::Plan {
    let g = parse(text).unwrap();
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let program = rlx_opt_plan(l.graph);
    plan::plan(&program).unwrap()
}

fn rlx_opt_plan(g: rlx_ir::Graph) -> rlx_ir::lir::Program {
    rlx_ir::lir::Program::from_graph(g)
}

#[test]
fn elementwise_chain_generates_one_kernel_per_node_with_baked_strides() {
    let p = planned(
        "graph @g(%a: f32[2,3], %b: f32[3]) {\n  %c = add(%a, %b)\n  %d = exp(%c)\n  return %d\n}",
    );
    // add (broadcast stride 0 on the first axis of b), exp; transfers of
    // inputs alias their buffers, the output transfer is a copy.
    assert!(p.source.contains("expf("), "{}", p.source);
    assert!(p.source.contains("(x0 + x1)"), "{}", p.source);
    assert!(p.launches.len() >= 2);
}

#[test]
fn softmax_layer_norm_matmul_and_attention_lower() {
    let p = planned(
        "graph @g(%x: f32[2,4,8], %w: f32[8,8], %g: f32[8], %b: f32[8]) {\n  %y = matmul(%x, %w)\n  %n = layer_norm(%y, %g, %b)\n  %s = softmax(%n)\n  return %s\n}",
    );
    assert!(p
        .launches
        .iter()
        .any(|l| matches!(l, plan::Launch::Gemm { .. })));
    assert!(p.source.contains("sqrtf"), "layer norm kernel missing");
    let a = planned(
        "graph @g(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}",
    );
    assert_eq!(a.consts.len(), 1, "the causal mask becomes a constant");
    assert!(a.source.contains("warp_max"));
}

#[test]
fn movement_ops_take_their_index_map_from_the_reference() {
    let p = planned("graph @g(%x: f32[2,3]) {\n  %y = flip(%x) {axes=[1]}\n  return %y\n}");
    // The table for flip along axis 1 of [[0,1,2],[3,4,5]].
    let t = p.consts.last().unwrap().to_i64_vec().unwrap();
    assert_eq!(t, vec![2, 1, 0, 5, 4, 3]);
}

#[test]
fn unsupported_dtypes_are_typed_errors() {
    let g = parse("graph @g(%x: c64[2]) {\n  return %x\n}").unwrap();
    let program = rlx_ir::lir::Program::from_graph(g);
    assert!(matches!(plan::plan(&program), Err(CudaError::Input(_))));
}
