//! `rlx kernels`: the GPU kernels a graph compiles to (one WGSL kernel per
//! LIR step, rlx-wgpu's generator), optionally translated by naga to MSL,
//! HLSL, GLSL or SPIR-V. Needs no GPU. `--dtype f16` turns the graph's f32
//! into f16; `--coop` / `--subgroups` show the kernels of an adapter with
//! f16 cooperative matrices (tensor cores) / subgroups.

use rlx_wgpu::{kernels_of_for, translate, Caps, Lang, Translated};
use std::path::PathBuf;

pub fn kernels(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut device = rlx::Device::WebGpu;
    let mut lang = Lang::Wgsl;
    let mut out: Option<PathBuf> = None;
    let (mut f16, mut coop, mut subgroups) = (false, false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--device" => {
                let d = it.next().ok_or("--device needs a value")?;
                device = match d.as_str() {
                    "webgpu" => rlx::Device::WebGpu,
                    "vulkan" => rlx::Device::Vulkan,
                    "opengl" => rlx::Device::OpenGl,
                    "metal" => rlx::Device::Metal,
                    "directx" => rlx::Device::DirectX,
                    "gpu" => rlx::Device::Gpu,
                    o => return Err(format!("rlx kernels: `{o}` is not a wgpu device (webgpu, vulkan, opengl, metal, directx, gpu)")),
                }
            }
            "--lang" => lang = Lang::parse(it.next().ok_or("--lang needs a value")?)?,
            "--out" => out = Some(PathBuf::from(it.next().ok_or("--out needs a directory")?)),
            "--dtype" => match it.next().map(|s| s.as_str()) {
                Some("f16") => f16 = true,
                Some("f32") => f16 = false,
                o => return Err(format!("rlx kernels: --dtype takes f32 or f16, not {o:?}")),
            },
            "--coop" => coop = true,
            "--subgroups" => subgroups = true,
            f if file.is_none() && !f.starts_with("--") => file = Some(f.to_string()),
            o => return Err(format!("rlx kernels: unexpected argument `{o}`")),
        }
    }
    let file = file.ok_or("rlx kernels: give a MIR file, @encoder-block or @minilm")?;
    let (mut g, _) = crate::graph_arg(&file)?;
    if f16 {
        let text = rlx::ir::text::print(&g).replace("f32", "f16");
        g = rlx::ir::text::parse(&text).map_err(|e| format!("rlx kernels: --dtype f16: {e}"))?;
    }
    if (coop || subgroups) && !matches!(lang, Lang::Wgsl | Lang::Spirv) {
        return Err(format!(
            "rlx kernels: --coop / --subgroups kernels exist for native Vulkan only; use --lang wgsl or spirv, not {}",
            lang.name()
        ));
    }
    // naga's GLSL writer has no f16: GLSL gets the f16-held-as-f32 kernels
    // (what an OpenGL adapter, which lacks `shader-f16`, runs).
    let caps = Caps {
        f16_native: lang != Lang::Glsl,
        coop_f16: coop,
        subgroups,
    };
    let ks = kernels_of_for(&g, device, caps)?;
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let ext = match lang {
        Lang::Wgsl => "wgsl",
        Lang::Msl => "metal",
        Lang::Hlsl => "hlsl",
        Lang::Glsl => "comp",
        Lang::Spirv => "spv",
    };
    for k in &ks {
        let t = translate(&k.name, &k.wgsl, lang).map_err(|e| e.to_string())?;
        match (&out, t) {
            (Some(dir), t) => {
                let path = dir.join(format!("{}.{ext}", k.name));
                let bytes = match t {
                    Translated::Text(s) => s.into_bytes(),
                    Translated::Spirv(w) => w.iter().flat_map(|x| x.to_le_bytes()).collect(),
                };
                std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            (None, Translated::Text(s)) => println!(
                "// ==== kernel {} ({} workgroups {:?}) ====\n{s}",
                k.name,
                lang.name(),
                k.groups
            ),
            (None, Translated::Spirv(w)) => println!(
                "kernel {}: {} SPIR-V words (use --out DIR to write .spv files)",
                k.name,
                w.len()
            ),
        }
    }
    eprintln!(
        "{} kernels for {device} in {}{}",
        ks.len(),
        lang.name(),
        out.map(|d| format!(", written to {}", d.display()))
            .unwrap_or_default()
    );
    Ok(())
}
