//! `WgpuOptions` reach the WGSL generators: each forced choice changes the
//! generated kernels (and they still validate). No GPU needed: this is
//! code generation only.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType, Device, Graph};
use rlx_wgpu::{kernels_of_options, Caps, CoopTile, WgpuAttention, WgpuOptions};

/// The kernels of `g` under `opts`, validated; (name, source) pairs.
fn wgsl(g: &Graph, caps: Caps, opts: WgpuOptions) -> Vec<(String, String)> {
    init();
    let ks = kernels_of_options(g, Device::Vulkan, caps, &opts).unwrap();
    for k in &ks {
        rlx_wgpu::translate::validate(&k.name, &k.wgsl)
            .unwrap_or_else(|e| panic!("{opts:?}: {}: {e}", k.name));
    }
    ks.into_iter().map(|k| (k.name, k.wgsl)).collect()
}

const F16: Caps = Caps {
    f16_native: true,
    coop_f16: false,
    subgroups: false,
};

fn matmul(m: usize, k: usize, n: usize, dtype: DType) -> Graph {
    one_op(
        "matmul",
        &[(dtype, vec![m, k]), (dtype, vec![k, n])],
        Attrs::new(),
    )
}

#[test]
fn matmul_block_and_split_k_change_the_kernel() {
    let g = matmul(128, 1024, 384, DType::F32);
    let default = wgsl(&g, F16, WgpuOptions::default());
    let forced = |r| {
        wgsl(
            &g,
            F16,
            WgpuOptions {
                matmul_block: Some(r),
                ..Default::default()
            },
        )
    };
    let (b2, b8) = (forced(2), forced(8));
    assert_ne!(b2, b8, "the forced register block changes the kernel");
    assert!(b2 == default || b8 == default || forced(4) == default);
    // A small product with a long K is split over more workgroups (a
    // second, reducing kernel) unless split-K is off.
    let no_split = wgsl(
        &g,
        F16,
        WgpuOptions {
            split_k: false,
            ..Default::default()
        },
    );
    assert!(
        default.iter().any(|(n, _)| n.contains("splitk")),
        "{default:?}"
    );
    assert!(no_split.iter().all(|(n, _)| !n.contains("splitk")));
}

#[test]
fn attention_variant_and_slices_change_the_kernel() {
    let shapes = vec![
        (DType::F32, vec![2, 3, 64, 32]),
        (DType::F32, vec![2, 3, 64, 32]),
        (DType::F32, vec![2, 3, 64, 32]),
    ];
    let g = one_op("attention", &shapes, Attrs::new().with("mask_kind", "none"));
    let tiled = wgsl(&g, F16, WgpuOptions::default());
    let row = wgsl(
        &g,
        F16,
        WgpuOptions {
            attention: WgpuAttention::Row,
            ..Default::default()
        },
    );
    assert_ne!(tiled, row);
    let one_slice = wgsl(
        &g,
        F16,
        WgpuOptions {
            attn_slices: Some(1),
            ..Default::default()
        },
    );
    assert_ne!(tiled, one_slice);
}

#[test]
fn coop_tile_and_k_step_change_the_kernel() {
    let caps = Caps {
        coop_f16: true,
        ..F16
    };
    let g = matmul(256, 512, 256, DType::F16);
    let default = wgsl(&g, caps, WgpuOptions::default());
    assert!(
        default.iter().any(|(n, _)| n.contains("_coop")),
        "{default:?}"
    );
    let big = wgsl(
        &g,
        caps,
        WgpuOptions {
            coop_tile: CoopTile::parse("128x128"),
            ..Default::default()
        },
    );
    assert_ne!(default, big);
    let bk16 = wgsl(
        &g,
        caps,
        WgpuOptions {
            coop_bk: Some(16),
            ..Default::default()
        },
    );
    assert_ne!(default, bk16);
}
