//! Workgroup sums that start with `subgroupAdd` (reductions, long-row
//! norms), where the adapter grants subgroups ≤ 32 wide: lavapipe does
//! (8 wide), so CI runs this. The reduction and row-op parity cases run
//! with them and, with `RLX_WGPU_SUBGROUPS=0`, without; the generated
//! kernels must use them exactly when granted. One test function: the
//! variable is process-wide.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType, Device};
use rlx_wgpu::{kernels_of_for, Caps};

#[test]
fn subgroup_sums_match_cpu_and_are_used_when_granted() {
    init();
    let g = one_op(
        "reduce_sum",
        &[(DType::F32, vec![3, 700])],
        Attrs::new().with("axes", vec![1i64]),
    );
    for sg in [true, false] {
        let caps = Caps {
            f16_native: true,
            subgroups: sg,
            ..Caps::default()
        };
        let ks = kernels_of_for(&g, Device::Vulkan, caps).unwrap();
        let uses = ks.iter().any(|k| k.wgsl.contains("subgroupAdd"));
        assert_eq!(
            uses,
            sg,
            "subgroups {sg}: {:?}",
            ks.iter().map(|k| &k.name).collect::<Vec<_>>()
        );
        for k in &ks {
            rlx_wgpu::translate::validate(&k.name, &k.wgsl).unwrap();
        }
    }
    let ctx = rlx_wgpu::WgpuBackend::new(Device::Vulkan)
        .context()
        .unwrap();
    eprintln!(
        "adapter {}: subgroups {}",
        ctx.info.name,
        ctx.caps().subgroups
    );
    for on in [true, false] {
        init_with(rlx_wgpu::WgpuOptions {
            subgroups: on,
            ..Default::default()
        });
        check_group(cases::reductions());
        check_group(cases::softmax_and_norms());
    }
}
