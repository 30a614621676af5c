//! f16 matmuls and small-batch attention on cooperative matrices (tensor
//! cores).
//!
//! `coop_kernels_validate`: the generated kernels parse, validate and
//! translate to SPIR-V with naga (no GPU needed; runs in CI).
//! `coop_matches_cpu`: on an adapter that offers 16×16×16 f16 cooperative
//! matrices (NVIDIA's Vulkan driver; not Mesa's lavapipe, which CI has),
//! every case against the CPU reference; elsewhere it says it was skipped.
//! `benches/wgpu/run.sh` runs it on the H200 and fails if it skipped.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType, Device, Graph, HostTensor};
use rlx_wgpu::{kernels_of_for, translate, Caps, Lang};

const H: DType = DType::F16;

fn half(rng: &mut Rng, shape: &[usize]) -> HostTensor {
    let n: usize = shape.iter().product();
    HostTensor::from_f64(
        H,
        shape.to_vec(),
        (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect(),
    )
    .unwrap()
}

/// (name, graph, inputs): partial tiles in every dimension, K not a
/// multiple of the K step, split K, batches, transposed operands, the
/// fused epilogues (bias + GELU, residual add), a MiniLM FFN shape.
fn cases() -> Vec<(String, Graph, Vec<HostTensor>)> {
    let mut rng = Rng::new(77);
    let mut v = Vec::new();
    for (sa, sb, act) in [
        (vec![2, 37, 70], vec![70, 45], "gelu"),
        (vec![130, 9], vec![9, 131], "none"),
        (vec![16, 1024], vec![1024, 64], "none"),
        // Deep enough for the 16-wide K step, with partial tiles.
        (vec![40, 2048], vec![2048, 72], "none"),
        (vec![256, 384], vec![384, 1536], "gelu"),
    ] {
        let g = one_op(
            "matmul_bias_act",
            &[(H, sa.clone()), (H, sb.clone()), (H, vec![sb[1]])],
            Attrs::new().with("activation", act),
        );
        let ins = vec![
            half(&mut rng, &sa),
            half(&mut rng, &sb),
            half(&mut rng, &[sb[1]]),
        ];
        v.push((format!("{sa:?} @ {sb:?} + bias, {act}"), g, ins));
    }
    // Batched on both sides.
    let g = one_op(
        "matmul",
        &[(H, vec![3, 64, 48]), (H, vec![3, 48, 80])],
        Attrs::new(),
    );
    let ins = vec![half(&mut rng, &[3, 64, 48]), half(&mut rng, &[3, 48, 80])];
    v.push(("batched [3,64,48] @ [3,48,80]".into(), g, ins));
    // Transposed operands (m-contiguous lhs, k-contiguous weight): odd
    // extents stage one element at a time; multiples of 4 four at a time
    // (MiniLM's weights arrive k-contiguous like this).
    for (what, xs, ws) in [
        ("transposed operands", [70, 45], [33, 70]),
        ("transposed operands, 4-wide staging", [64, 48], [40, 64]),
    ] {
        let g = transposed_matmul(H, xs, ws);
        let ins = vec![half(&mut rng, &xs), half(&mut rng, &ws)];
        v.push((what.into(), g, ins));
    }
    // A residual add fused into the epilogue (as after MiniLM's projections).
    let t = rlx::Trace::new("mm_res");
    let x = t.input("x", H, vec![128, 384]);
    let w = t.input("w", H, vec![384, 384]);
    let r = t.input("r", H, vec![128, 384]);
    let y = x.matmul(&w).unwrap() + &r;
    let g = t.finish(&[&y]).unwrap();
    let ins = vec![
        half(&mut rng, &[128, 384]),
        half(&mut rng, &[384, 384]),
        half(&mut rng, &[128, 384]),
    ];
    v.push(("residual add epilogue".into(), g, ins));
    // Attention on the tensor cores: partial query tiles, keys padded to a
    // fragment, dv ≠ d, every mask kind; a MiniLM-sized head with padding.
    let (q, k, vv) = (vec![2, 3, 40, 32], vec![2, 3, 50, 32], vec![2, 3, 50, 16]);
    let qkv = [(H, q.clone()), (H, k.clone()), (H, vv.clone())];
    for (kind, mask) in [
        ("none", None),
        ("causal", None),
        ("custom", Some((DType::Bool, vec![2, 1, 1, 50]))),
        ("bias", Some((H, vec![40, 50]))),
    ] {
        let mut shapes = qkv.to_vec();
        shapes.extend(mask.clone());
        let g = one_op("attention", &shapes, Attrs::new().with("mask_kind", kind));
        let mut ins = vec![half(&mut rng, &q), half(&mut rng, &k), half(&mut rng, &vv)];
        match mask {
            // Key 0 kept: no row fully masked.
            Some((DType::Bool, s)) => {
                let keep: Vec<bool> = (0..100)
                    .map(|i| i % 50 == 0 || rng.next_f64() < 0.6)
                    .collect();
                ins.push(HostTensor::from_slice(&keep, s).unwrap());
            }
            Some((_, s)) => ins.push(half(&mut rng, &s)),
            None => {}
        }
        v.push((format!("attention {kind} [2,3,40|50,32->16]"), g, ins));
    }
    let head = vec![1, 12, 128, 32];
    let g = one_op(
        "attention",
        &[
            (H, head.clone()),
            (H, head.clone()),
            (H, head.clone()),
            (DType::Bool, vec![1, 1, 1, 128]),
        ],
        Attrs::new().with("mask_kind", "custom"),
    );
    let keep: Vec<bool> = (0..128).map(|i| i < 100).collect();
    let ins = vec![
        half(&mut rng, &head),
        half(&mut rng, &head),
        half(&mut rng, &head),
        HostTensor::from_slice(&keep, vec![1, 1, 1, 128]).unwrap(),
    ];
    v.push(("attention MiniLM head, padded keys".into(), g, ins));
    v
}

const COOP: Caps = Caps {
    f16_native: true,
    coop_f16: true,
    subgroups: false,
};

#[test]
fn coop_kernels_validate() {
    init();
    let mut n = 0;
    for (name, g, _) in cases() {
        let ks = kernels_of_for(&g, Device::Vulkan, COOP).unwrap();
        let coop: Vec<_> = ks.iter().filter(|k| k.name.contains("_coop")).collect();
        assert!(
            !coop.is_empty(),
            "{name}: no cooperative-matrix kernel in {:?}",
            ks.iter().map(|k| &k.name).collect::<Vec<_>>()
        );
        for k in ks {
            translate(&k.name, &k.wgsl, Lang::Spirv)
                .unwrap_or_else(|e| panic!("{name}: {}: {e}\n{}", k.name, k.wgsl));
            n += 1;
        }
        // Without the capability the same graph has no such kernel.
        let plain = kernels_of_for(
            &g,
            Device::Vulkan,
            Caps {
                f16_native: true,
                ..Caps::default()
            },
        )
        .unwrap();
        assert!(plain.iter().all(|k| !k.name.contains("_coop")), "{name}");
    }
    assert!(n >= 13);
}

#[test]
fn coop_matches_cpu() {
    init();
    let ctx = rlx_wgpu::WgpuBackend::new(Device::Vulkan)
        .context()
        .unwrap();
    if !ctx.caps().coop_f16 {
        eprintln!(
            "coop_matches_cpu: skipped: {} offers no 16x16x16 f16 cooperative matrices",
            ctx.info.name
        );
        return;
    }
    let mut n = 0;
    for (name, g, ins) in cases() {
        let c = rlx::compile(&g, Device::Vulkan).unwrap();
        let report = c.dispatch_report().to_string();
        assert!(
            report.contains("cooperative matrices"),
            "{name}: the report does not name the tensor-core path:\n{report}"
        );
        // f16 results: one or two f16 steps apart from the CPU's (it rounds
        // the product before the bias and activation; we round once).
        parity(&name, &g, &ins, 4e-3, 4e-3);
        n += 1;
    }
    eprintln!("coop_matches_cpu: {n} cases on {} passed", ctx.info.name);
}
