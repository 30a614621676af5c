//! Every generated WGSL kernel through naga: validation, and translation to
//! MSL (Metal), HLSL (DirectX), GLSL (OpenGL) and SPIR-V (Vulkan). Buffer
//! `binding(k)` of group 0 maps to slot/register/binding `k` in each
//! language, so the output is usable as is (no placeholder bindings).

use crate::error::WgpuError;
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::Module;
#[cfg(feature = "translate")]
use naga::{ResourceBinding, ShaderStage};

/// A target shading language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Wgsl,
    Msl,
    Hlsl,
    Glsl,
    Spirv,
}

impl Lang {
    pub const ALL: [Lang; 5] = [Lang::Wgsl, Lang::Msl, Lang::Hlsl, Lang::Glsl, Lang::Spirv];

    pub fn name(self) -> &'static str {
        match self {
            Lang::Wgsl => "wgsl",
            Lang::Msl => "msl",
            Lang::Hlsl => "hlsl",
            Lang::Glsl => "glsl",
            Lang::Spirv => "spirv",
        }
    }

    pub fn parse(s: &str) -> Result<Lang, String> {
        Lang::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| format!("unknown shading language `{s}` (wgsl, msl, hlsl, glsl, spirv)"))
    }
}

/// A translated kernel: text, or SPIR-V words.
#[derive(Clone, Debug)]
pub enum Translated {
    Text(String),
    Spirv(Vec<u32>),
}

fn parse_validate(name: &str, wgsl: &str) -> Result<(Module, ModuleInfo), WgpuError> {
    let shader = |why: String| WgpuError::Shader {
        kernel: name.into(),
        why,
    };
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| shader(e.emit_to_string(wgsl)))?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .map_err(|e| shader(e.emit_to_string(wgsl)))?;
    Ok((module, info))
}

/// Check a kernel with naga's WGSL front end and validator.
pub fn validate(name: &str, wgsl: &str) -> Result<(), WgpuError> {
    parse_validate(name, wgsl).map(|_| ())
}

#[cfg(feature = "translate")]
fn bindings(m: &Module) -> Vec<(ResourceBinding, bool)> {
    m.global_variables
        .iter()
        .filter_map(|(_, g)| {
            let b = g.binding?;
            let mutable = matches!(g.space, naga::AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE));
            Some((b, mutable))
        })
        .collect()
}

/// Translate one WGSL kernel (entry point `main`) to `lang` (WGSL only
/// when the crate is built without its `translate` feature, e.g. the slim
/// browser build: the other languages are then a typed error).
#[cfg(not(feature = "translate"))]
pub fn translate(name: &str, wgsl: &str, lang: Lang) -> Result<Translated, WgpuError> {
    match lang {
        Lang::Wgsl => Ok(Translated::Text(wgsl.to_string())),
        _ => Err(WgpuError::Translate {
            kernel: name.into(),
            lang: lang.name().into(),
            why: "this build has no naga back ends (rlx-wgpu's cargo feature `translate`)".into(),
        }),
    }
}

/// Translate one WGSL kernel (entry point `main`) to `lang`.
#[cfg(feature = "translate")]
pub fn translate(name: &str, wgsl: &str, lang: Lang) -> Result<Translated, WgpuError> {
    let (module, info) = parse_validate(name, wgsl)?;
    let err = |why: String| WgpuError::Translate {
        kernel: name.into(),
        lang: lang.name().into(),
        why,
    };
    let binds = bindings(&module);
    match lang {
        Lang::Wgsl => Ok(Translated::Text(wgsl.to_string())),
        Lang::Msl => {
            let mut res = naga::back::msl::EntryPointResources::default();
            for (b, mutable) in &binds {
                res.resources.insert(
                    *b,
                    naga::back::msl::BindTarget {
                        buffer: Some(b.binding as u8),
                        mutable: *mutable,
                        ..Default::default()
                    },
                );
            }
            // Array lengths come from a sizes buffer after the bindings.
            res.sizes_buffer = Some(binds.len() as u8);
            let mut opts = naga::back::msl::Options {
                lang_version: (2, 1),
                fake_missing_bindings: false,
                ..Default::default()
            };
            opts.per_entry_point_map.insert("main".into(), res);
            let pipe = naga::back::msl::PipelineOptions {
                entry_point: Some((ShaderStage::Compute, "main".into())),
                ..Default::default()
            };
            naga::back::msl::write_string(&module, &info, &opts, &pipe)
                .map(|(s, _)| Translated::Text(s))
                .map_err(|e| err(e.to_string()))
        }
        Lang::Hlsl => {
            let mut opts = naga::back::hlsl::Options {
                shader_model: naga::back::hlsl::ShaderModel::V5_1,
                fake_missing_bindings: false,
                ..Default::default()
            };
            for (b, mutable) in &binds {
                // UAVs (u#) for read-write buffers, SRVs (t#) for read-only:
                // naga picks the register class; we pick the number.
                let _ = mutable;
                opts.binding_map.insert(
                    *b,
                    naga::back::hlsl::BindTarget {
                        space: 0,
                        register: b.binding,
                        ..Default::default()
                    },
                );
            }
            let pipe = naga::back::hlsl::PipelineOptions {
                entry_point: Some((ShaderStage::Compute, "main".into())),
            };
            let mut s = String::new();
            let mut w = naga::back::hlsl::Writer::new(&mut s, &opts, &pipe);
            w.write(&module, &info, None)
                .map_err(|e| err(e.to_string()))?;
            Ok(Translated::Text(s))
        }
        Lang::Glsl => {
            let mut opts = naga::back::glsl::Options {
                version: naga::back::glsl::Version::Desktop(430),
                ..Default::default()
            };
            opts.writer_flags = naga::back::glsl::WriterFlags::empty();
            for (b, _) in &binds {
                opts.binding_map.insert(*b, b.binding as u8);
            }
            let pipe = naga::back::glsl::PipelineOptions {
                shader_stage: ShaderStage::Compute,
                entry_point: "main".into(),
                multiview: None,
            };
            let mut s = String::new();
            let mut w = naga::back::glsl::Writer::new(
                &mut s,
                &module,
                &info,
                &opts,
                &pipe,
                naga::proc::BoundsCheckPolicies::default(),
            )
            .map_err(|e| err(e.to_string()))?;
            w.write().map_err(|e| err(e.to_string()))?;
            Ok(Translated::Text(s))
        }
        Lang::Spirv => {
            let opts = naga::back::spv::Options {
                lang_version: (1, 3),
                ..Default::default()
            };
            let pipe = naga::back::spv::PipelineOptions {
                shader_stage: ShaderStage::Compute,
                entry_point: "main".into(),
            };
            naga::back::spv::write_vec(&module, &info, &opts, Some(&pipe))
                .map(Translated::Spirv)
                .map_err(|e| err(e.to_string()))
        }
    }
}
