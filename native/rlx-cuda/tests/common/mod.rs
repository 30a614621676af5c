//! Shared by the host-side tests (`host.rs`, `emulate.rs`).

use rlx_runtime::Backend;

/// A backend stand-in with the CUDA claims, so legalization and planning
/// run without a GPU.
pub struct ClaimsOnly;

impl Backend for ClaimsOnly {
    fn device(&self) -> rlx_runtime::Device {
        rlx_runtime::Device::Cuda
    }
    fn claims(&self) -> rlx_runtime::Claims {
        rlx_cuda::claims()
    }
    fn select(&self, node: &rlx_runtime::NodeQuery) -> Result<String, String> {
        rlx_cuda::select::check(node)?;
        Ok(self.kernel_name(node.op, node.dtype))
    }
    fn compile(
        &self,
        _: rlx_ir::lir::Program,
    ) -> Result<Box<dyn rlx_runtime::Executable>, rlx_runtime::RuntimeError> {
        unreachable!("planning only")
    }
}
