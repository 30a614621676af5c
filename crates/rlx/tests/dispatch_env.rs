//! `RLX_DISPATCH` and `RLX_DEVICE` (a test binary of its own, because
//! `RLX_DISPATCH` is read once per process).

use rlx::ir::text;
use rlx::{CompileOptions, DispatchOptions, DispatchPath, HostTensor, Policy, Target};

#[test]
fn environment_overrides_policy_and_device() {
    // Set before anything reads them.
    std::env::set_var("RLX_DISPATCH", "common_ir_only,softmax=native_only");
    std::env::set_var("RLX_DEVICE", "gpu,cpu");
    let g = text::parse(
        "graph @g(%x: f32[2,4]) {\n  %y = softmax(%x)\n  %z = gelu(%y)\n  return %z\n}",
    )
    .unwrap();
    // The env wins over the options passed in.
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
