//! `RLX_DISPATCH` and `RLX_DEVICE` through the edge (a test binary of its
//! own: `rlx::env::apply` sets process-wide state).

use rlx::ir::text;
use rlx::{CompileOptions, DispatchOptions, DispatchPath, HostTensor, Policy, Target};

#[test]
fn environment_overrides_policy_and_device() {
    let env = rlx::env::from_lookup(|n| match n {
        "RLX_DISPATCH" => Some("common_ir_only,softmax=native_only".into()),
        "RLX_DEVICE" => Some("gpu,cpu".into()),
        _ => None,
    })
    .unwrap();
    rlx::env::apply(&env).unwrap();
    let g = text::parse(
        "graph @g(%x: f32[2,4]) {\n  %y = softmax(%x)\n  %z = gelu(%y)\n  return %z\n}",
    )
    .unwrap();
    // The override wins over the options passed in.
    let opts = CompileOptions {
        dispatch: DispatchOptions::new(Policy::NativeOnly),
        ..Default::default()
    };
    let m = rlx::compile_with(&g, Target::Auto, &opts).unwrap();
    let r = m.dispatch_report();
    assert_eq!(
        r.nodes.iter().map(|n| n.path).collect::<Vec<_>>(),
        vec![DispatchPath::Native, DispatchPath::CommonIr]
    );
    assert_eq!(r.options.policy, Policy::CommonIrOnly);
    // RLX_DEVICE: no gpu backend in this build, so the router chose the CPU and says so.
    let routing = r.routing.as_ref().expect("routed");
    assert_eq!(m.device(), rlx::Device::Cpu);
    assert!(
        routing.tried[0]
            .1
            .as_deref()
            .unwrap()
            .contains("no `gpu` backend"),
        "{routing:?}"
    );
    let x = HostTensor::from_slice(&[0.5f32, 1.0, -1.0, 2.0, 0.0, 0.0, 3.0, -3.0], [2, 4]).unwrap();
    assert_eq!(m.run(&[x]).unwrap()[0].shape().dims(), &[2, 4]);
}
