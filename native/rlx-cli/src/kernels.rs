//! `rlx kernels`: the GPU kernels a graph compiles to (one WGSL kernel per
//! LIR step, rlx-wgpu's generator), optionally translated by naga to MSL,
//! HLSL, GLSL or SPIR-V. Needs no GPU. `--dtype f16` turns the graph's f32
//! into f16; `--coop` / `--subgroups` show the kernels of an adapter with
//! f16 cooperative matrices (tensor cores) / subgroups.

use crate::out::{CliError, CliResult, Out};
use rlx_wgpu::{kernels_of_for, translate, Caps, Lang, Translated};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct KernelArgs {
    /// A MIR file, @encoder-block or @minilm.
    file: PathBuf,
    /// The wgpu device whose kernels to show.
    #[arg(long, short = 'd', value_enum, default_value = "webgpu")]
    device: GpuDevice,
    /// The language: wgsl, msl, hlsl, glsl, spirv.
    #[arg(long, default_value = "wgsl")]
    lang: String,
    /// Write one file per kernel into DIR instead of printing.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Turn the graph's f32 into f16 (or keep f32).
    #[arg(long, value_enum, default_value = "f32")]
    dtype: KernelDType,
    /// The kernels of an adapter with f16 cooperative matrices (tensor cores).
    #[arg(long)]
    coop: bool,
    /// The kernels of an adapter with subgroups.
    #[arg(long)]
    subgroups: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum GpuDevice {
    Webgpu,
    Vulkan,
    Opengl,
    Metal,
    Directx,
    Gpu,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum KernelDType {
    F32,
    F16,
}

pub fn kernels(a: KernelArgs) -> CliResult {
    let device = match a.device {
        GpuDevice::Webgpu => rlx::Device::WebGpu,
        GpuDevice::Vulkan => rlx::Device::Vulkan,
        GpuDevice::Opengl => rlx::Device::OpenGl,
        GpuDevice::Metal => rlx::Device::Metal,
        GpuDevice::Directx => rlx::Device::DirectX,
        GpuDevice::Gpu => rlx::Device::Gpu,
    };
    let lang = Lang::parse(&a.lang).map_err(CliError::usage)?;
    let (f16, coop, subgroups, out) = (a.dtype == KernelDType::F16, a.coop, a.subgroups, a.out);
    let (mut g, _) = crate::inspect::graph_arg(&a.file)?;
    if f16 {
        let text = rlx::ir::text::print(&g).replace("f32", "f16");
        g = rlx::ir::text::parse(&text)
            .map_err(|e| CliError::input(format!("rlx kernels: --dtype f16: {e}")))?;
    }
    if (coop || subgroups) && !matches!(lang, Lang::Wgsl | Lang::Spirv) {
        return Err(CliError::usage(format!(
            "rlx kernels: --coop / --subgroups kernels exist for native Vulkan only; use --lang wgsl or spirv, not {}",
            lang.name()
        )));
    }
    // naga's GLSL writer has no f16: GLSL gets the f16-held-as-f32 kernels
    // (what an OpenGL adapter, which lacks `shader-f16`, runs).
    let caps = Caps {
        f16_native: lang != Lang::Glsl,
        coop_f16: coop,
        subgroups,
    };
    let ks = kernels_of_for(&g, device, caps).map_err(CliError::failure)?;
    let mut o = Out::new();
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::failure(format!("{}: {e}", dir.display())))?;
    }
    let ext = match lang {
        Lang::Wgsl => "wgsl",
        Lang::Msl => "metal",
        Lang::Hlsl => "hlsl",
        Lang::Glsl => "comp",
        Lang::Spirv => "spv",
    };
    for k in &ks {
        let t = translate(&k.name, &k.wgsl, lang).map_err(|e| CliError::failure(e.to_string()))?;
        match (&out, t) {
            (Some(dir), t) => {
                let path = dir.join(format!("{}.{ext}", k.name));
                let bytes = match t {
                    Translated::Text(s) => s.into_bytes(),
                    Translated::Spirv(w) => w.iter().flat_map(|x| x.to_le_bytes()).collect(),
                };
                std::fs::write(&path, bytes)
                    .map_err(|e| CliError::failure(format!("{}: {e}", path.display())))?;
            }
            (None, Translated::Text(s)) => writeln!(
                o,
                "// ==== kernel {} ({} workgroups {:?}) ====\n{s}",
                k.name,
                lang.name(),
                k.groups
            )?,
            (None, Translated::Spirv(w)) => writeln!(
                o,
                "kernel {}: {} SPIR-V words (use --out DIR to write .spv files)",
                k.name,
                w.len()
            )?,
        }
    }
    o.flush()?;
    eprintln!(
        "{} kernels for {device} in {}{}",
        ks.len(),
        lang.name(),
        out.map(|d| format!(", written to {}", d.display()))
            .unwrap_or_default()
    );
    Ok(())
}
