//! Kernels of a graph without a GPU: the same compile pipeline as
//! `rlx::compile_with` (optimize with CPU constant folding → legalize for
//! this backend's claims → memory plan) and then `lower`. This is what
//! `rlx kernels` prints and what the translation tests check.

use crate::backend::WgpuBackend;
use crate::lower::{lower_with_options, Caps};
use crate::wgsl::Kernel;
use rlx_ir::lir::Program;
use rlx_ir::Graph;
use rlx_runtime::options::WgpuOptions;
use rlx_runtime::{legalize, Device, DispatchOptions};

/// The WGSL kernels `graph` compiles to for `device` (a wgpu device kind).
/// f16 is stored as f16 (an adapter with `shader-f16`).
pub fn kernels_of(graph: &Graph, device: Device) -> Result<Vec<Kernel>, String> {
    kernels_of_with(graph, device, true)
}

/// [`kernels_of`], choosing how f16 is held: `f16_native = false` gives the
/// kernels of adapters without `shader-f16` (f16 in f32 words) — the form
/// GLSL needs, since naga's GLSL writer has no 16-bit floats (and wgpu's GL
/// adapters do not offer `shader-f16`).
pub fn kernels_of_with(
    graph: &Graph,
    device: Device,
    f16_native: bool,
) -> Result<Vec<Kernel>, String> {
    kernels_of_for(
        graph,
        device,
        Caps {
            f16_native,
            ..Caps::default()
        },
    )
}

/// [`kernels_of`] for an adapter with `caps` (e.g. the cooperative-matrix
/// matmuls, which no browser has).
pub fn kernels_of_for(graph: &Graph, device: Device, caps: Caps) -> Result<Vec<Kernel>, String> {
    kernels_of_options(graph, device, caps, &WgpuOptions::default())
}

/// [`kernels_of_for`] with the generators following `opts`.
pub fn kernels_of_options(
    graph: &Graph,
    device: Device,
    caps: Caps,
    opts: &WgpuOptions,
) -> Result<Vec<Kernel>, String> {
    let program = program_of(graph, device)?;
    Ok(lower_with_options(&program, caps, opts)
        .map_err(|e| e.to_string())?
        .kernels)
}

/// The LIR program `rlx::compile_with` would hand this backend.
pub fn program_of(graph: &Graph, device: Device) -> Result<Program, String> {
    graph.verify().map_err(|e| e.to_string())?;
    let eval =
        |g: &Graph, x: &[rlx_ir::HostTensor]| rlx_ref::run_graph(g, x).map_err(|e| e.to_string());
    let (g, _) = rlx_opt::compile_pipeline(graph, eval).map_err(|e| format!("optimizer: {e}"))?;
    let backend = WgpuBackend::new(device);
    let legal = legalize(&g, &backend, &DispatchOptions::default()).map_err(|e| e.to_string())?;
    rlx_opt::plan(legal.graph).map_err(|e| format!("memory planner: {e}"))
}
