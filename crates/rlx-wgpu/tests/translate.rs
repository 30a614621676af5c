//! Every generated kernel of a set of graphs (the MiniLM encoder block and
//! one graph per kernel family) translates with naga to MSL, HLSL, GLSL and
//! SPIR-V; naga validates each module, and the SPIR-V and GLSL are checked
//! by Khronos' own validators (`spirv-val`, `glslangValidator`, from
//! Debian's spirv-tools / glslang-tools). No GPU needed.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use rlx::{Attrs, DType, Device};
use rlx_wgpu::{kernels_of_with, translate, Lang, Translated};
use std::process::Command;

fn graphs() -> Vec<rlx::Graph> {
    let f = DType::F32;
    let mut v =
        vec![
            rlx_models::dsl_block::encoder_block(rlx_models::dsl_block::BlockShape::MINILM)
                .unwrap(),
        ];
    v.push(common::one_op(
        "argmax",
        &[(f, vec![4, 9])],
        Attrs::new().with("axis", 1i64),
    ));
    v.push(common::one_op(
        "reduce_variance",
        &[(f, vec![4, 9])],
        Attrs::new().with("axes", vec![0i64]),
    ));
    v.push(common::one_op(
        "gather",
        &[(f, vec![4, 9]), (DType::I64, vec![3])],
        Attrs::new().with("axis", 1i64),
    ));
    v.push(common::one_op(
        "reduce_any",
        &[(DType::Bool, vec![4, 9])],
        Attrs::new(),
    ));
    v.push(common::one_op(
        "cast",
        &[(DType::I64, vec![5])],
        Attrs::new().with("dtype", f),
    ));
    v.push(common::one_op(
        "attention",
        &[(f, vec![2, 4, 8]), (f, vec![2, 6, 8]), (f, vec![2, 6, 8])],
        Attrs::new().with("mask_kind", "causal"),
    ));
    // dequant_matmul: the gemv kernel (word-aligned Q4_K blocks) and the
    // tiled one (2-byte-aligned Q8_0 blocks).
    v.push(common::one_op(
        "dequant_matmul",
        &[(f, vec![1, 256]), (DType::Q4K, vec![5, 256])],
        Attrs::new(),
    ));
    v.push(common::one_op(
        "dequant_matmul",
        &[(f, vec![33, 64]), (DType::Q8_0, vec![5, 64])],
        Attrs::new(),
    ));
    // The encoder block in f16: kernels over `array<f16>` buffers.
    let text = rlx::ir::text::print(&v[0]).replace("f32", "f16");
    v.push(rlx::ir::text::parse(&text).unwrap());
    v
}

fn tool(name: &str) -> String {
    let ok = Command::new(name).arg("--version").output().is_ok();
    assert!(
        ok,
        "`{name}` not found: install Debian's spirv-tools / glslang-tools (./scripts/setup does)"
    );
    name.to_string()
}

#[test]
fn every_kernel_translates_and_validates() {
    let dir = std::env::temp_dir().join(format!("rlx-wgpu-translate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (spirv_val, glslang) = (tool("spirv-val"), tool("glslangValidator"));
    let mut n = 0;
    for g in graphs() {
        for lang in Lang::ALL {
            // GLSL has no f16 in naga: it gets the f16-held-as-f32 kernels.
            for k in kernels_of_with(&g, Device::WebGpu, lang != Lang::Glsl).unwrap() {
                let t = translate(&k.name, &k.wgsl, lang).unwrap_or_else(|e| panic!("{e}"));
                match (lang, t) {
                    (Lang::Spirv, Translated::Spirv(words)) => {
                        let p = dir.join(format!("{}.spv", k.name));
                        std::fs::write(
                            &p,
                            words
                                .iter()
                                .flat_map(|w| w.to_le_bytes())
                                .collect::<Vec<u8>>(),
                        )
                        .unwrap();
                        let o = Command::new(&spirv_val)
                            .args(["--target-env", "vulkan1.1"])
                            .arg(&p)
                            .output()
                            .unwrap();
                        assert!(
                            o.status.success(),
                            "spirv-val {}: {}",
                            k.name,
                            String::from_utf8_lossy(&o.stderr)
                        );
                    }
                    (Lang::Glsl, Translated::Text(src)) => {
                        let p = dir.join(format!("{}.comp", k.name));
                        std::fs::write(&p, &src).unwrap();
                        let o = Command::new(&glslang).arg(&p).output().unwrap();
                        assert!(
                            o.status.success(),
                            "glslangValidator {}: {}\n{src}",
                            k.name,
                            String::from_utf8_lossy(&o.stdout)
                        );
                        assert!(
                            src.contains("binding = 0"),
                            "{}: GLSL has real bindings",
                            k.name
                        );
                    }
                    (Lang::Msl, Translated::Text(src)) => {
                        assert!(
                            src.contains("kernel void main_"),
                            "{}: MSL entry point",
                            k.name
                        );
                        assert!(
                            !src.contains("fake"),
                            "{}: MSL has real buffer slots",
                            k.name
                        );
                    }
                    (Lang::Hlsl, Translated::Text(src)) => {
                        assert!(src.contains("[numthreads("), "{}: HLSL", k.name)
                    }
                    (Lang::Wgsl, Translated::Text(src)) => assert_eq!(src, k.wgsl),
                    (l, _) => panic!("{l:?}: wrong output kind"),
                }
                n += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(n >= 5 * 15, "only {n} translations checked");
    eprintln!("{n} translations validated");
}
