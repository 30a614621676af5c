//! `CompileOptions::cpu` reaches the CPU backend: the reference engine
//! runs every node on the reference kernels and the report says so; and
//! `rlx::env::apply` registers the environment's CPU options for every
//! later compile (its own test binary: the registry is process-wide).

use rlx::{CompileOptions, CpuEngine, CpuOptions, Device, HostTensor};

fn graph() -> rlx::Graph {
    rlx::ir::text::parse(
        "graph @g(%x: f32[2,3], %w: f32[3,2]) {\n  %y = matmul(%x, %w)\n  %z = relu(%y)\n  return %z\n}",
    )
    .unwrap()
}

fn kernels(m: &rlx::Compiled) -> Vec<String> {
    m.dispatch_report()
        .nodes
        .iter()
        .flat_map(|n| n.kernels.clone())
        .collect()
}

fn run(m: &rlx::Compiled) -> Vec<f32> {
    let x = HostTensor::from_slice(&[1.0f32, -2.0, 3.0, 0.5, 0.5, 0.5], [2, 3]).unwrap();
    let w = HostTensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], [3, 2]).unwrap();
    m.run(&[x, w]).unwrap()[0].to_vec::<f32>().unwrap()
}

#[test]
fn cpu_options_choose_the_engine() {
    let g = graph();
    let fast = rlx::compile(&g, Device::Cpu).unwrap();
    let reference = rlx::compile_with(
        &g,
        Device::Cpu,
        &CompileOptions {
            cpu: Some(CpuOptions {
                engine: CpuEngine::Reference,
                ..CpuOptions::default()
            }),
            ..CompileOptions::default()
        },
    )
    .unwrap();
    assert!(
        kernels(&fast).iter().all(|k| k.starts_with("cpu::fast::")),
        "{:?}",
        kernels(&fast)
    );
    assert!(
        kernels(&reference)
            .iter()
            .all(|k| k.starts_with("cpu::ref::")),
        "{:?}",
        kernels(&reference)
    );
    assert_eq!(run(&fast), run(&reference));
    assert_eq!(run(&reference), vec![4.0, 1.0, 1.0, 1.0]);

    // The environment's engine, registered by `apply`, for plain compiles.
    let env =
        rlx::env::from_lookup(|n| (n == "RLX_CPU_ENGINE").then(|| "reference".into())).unwrap();
    rlx::env::apply(&env).unwrap();
    let m = rlx::compile(&g, Device::Cpu).unwrap();
    assert!(
        kernels(&m).iter().all(|k| k.starts_with("cpu::ref::")),
        "{:?}",
        kernels(&m)
    );
}
