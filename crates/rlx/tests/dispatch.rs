//! The dispatch contract, proved with a fake device that claims a tiny op
//! set: every path (native, common-IR, rewritten), the failure message
//! (snapshotted), compiled-out ops, transfers, policies and routing. The
//! fake executes programs with the CPU interpreter after checking that
//! every node it was given is one it claims — so a legalizer bug that let
//! an unclaimed op through fails here.

use rlx::custom::{register_backend, Backend, Claims, Executable};
use rlx::ir::lir::Program;
use rlx::ir::{text, DType};
use rlx::{
    CompileOptions, Device, DeviceRouter, DispatchOptions, DispatchPath, HostTensor, Policy,
};
use rlx_runtime::RuntimeError;
use std::sync::{Arc, Once};

const FAKE: Device = Device::Named("fake");
const SLIM: Device = Device::Named("slim");

struct Fake {
    device: Device,
    claims: Claims,
    gflops: f64,
}

struct FakeExe(Program, Claims);

impl Executable for FakeExe {
    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        for n in &self.0.graph.nodes {
            assert!(
                self.1.ops.contains_key(n.op.name()),
                "legalizer let `{}` through to the fake device",
                n.op.name()
            );
        }
        rlx_cpu::run_graph_refs(&self.0.graph, inputs).map_err(|e| RuntimeError::Backend {
            device: FAKE,
            msg: e.to_string(),
        })
    }
}

impl Backend for Fake {
    fn device(&self) -> Device {
        self.device
    }
    fn claims(&self) -> Claims {
        self.claims.clone()
    }
    fn throughput_gflops(&self) -> f64 {
        self.gflops
    }
    fn compile(&self, p: Program) -> Result<Box<dyn Executable>, RuntimeError> {
        Ok(Box::new(FakeExe(p, self.claims.clone())))
    }
}

const FAKE_OPS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "exp",
    "log",
    "rsqrt",
    "matmul",
    "reshape",
    "permute",
    "pad",
    "slice",
    "unsqueeze",
    "concat",
    "gather",
    "reduce_sum",
    "reduce_max",
    "reduce_mean",
    "constant",
    "stop_gradient",
    "where",
    "transfer",
    "if",
];

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        rlx::init();
        register_backend(Arc::new(Fake {
            device: FAKE,
            claims: Claims::all_of(FAKE_OPS.iter().copied()),
            gflops: 1000.0,
        }));
        let mut slim = Claims::all_of(["transfer", "add"]);
        slim.compiled_out.insert("fft".into(), "fft".into());
        register_backend(Arc::new(Fake {
            device: SLIM,
            claims: slim,
            gflops: 1.0,
        }));
    });
}

fn graph(src: &str) -> rlx::Graph {
    text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn run_on(
    g: &rlx::Graph,
    target: impl Into<rlx::Target>,
    opts: &CompileOptions,
    inputs: &[HostTensor],
) -> (Vec<f32>, rlx::DispatchReport) {
    let m = rlx::compile_with(g, target, opts).unwrap_or_else(|e| panic!("{e}"));
    let out = m.run(inputs).unwrap();
    (out[0].to_vec::<f32>().unwrap(), m.dispatch_report().clone())
}

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * scale)
        .collect()
}

fn assert_close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-4 * y.abs().max(1.0),
            "element {i}: {x} vs {y}"
        );
    }
}

#[test]
fn native_path_names_the_kernel_and_moves_data_explicitly() {
    setup();
    let g = graph("graph @g(%a: f32[2,3], %b: f32[3]) {\n  %c = add(%a, %b)\n  return %c\n}");
    let av = seq(6, 1.0);
    let a = HostTensor::from_slice(&av, [2, 3]).unwrap();
    let b = HostTensor::from_slice(&[1.0f32, 2.0, 3.0], [3]).unwrap();
    let (out, r) = run_on(&g, FAKE, &CompileOptions::default(), &[a, b]);
    let want: Vec<f32> = av
        .iter()
        .enumerate()
        .map(|(i, x)| x + (i % 3 + 1) as f32)
        .collect();
    assert_eq!(out, want);
    assert_eq!(r.nodes.len(), 1);
    assert_eq!(r.nodes[0].path, DispatchPath::Native);
    assert_eq!(r.nodes[0].kernels, vec!["fake::add<f32>".to_string()]);
    // Two inputs up, one output down, as explicit nodes with byte counts.
    let moves: Vec<_> = r
        .transfers
        .iter()
        .map(|t| (t.value.as_str(), t.from, t.to, t.bytes))
        .collect();
    assert_eq!(
        moves,
        vec![
            ("a", Device::Cpu, FAKE, 24),
            ("b", Device::Cpu, FAKE, 12),
            ("c", FAKE, Device::Cpu, 24)
        ]
    );
    let json = r.to_json();
    assert_eq!(json["transfers"].as_array().unwrap().len(), 3);
    assert_eq!(json["nodes"][0]["path"], "native");
    // On the CPU (host memory) there is nothing to move.
    let m = rlx::compile(&g, Device::Cpu).unwrap();
    assert!(m.dispatch_report().transfers.is_empty());
}

#[test]
fn common_ir_path_runs_the_decomposition_and_agrees_with_the_native_kernel() {
    setup();
    let g = graph("graph @g(%x: f32[3,5]) {\n  %y = softmax(%x) {axis=-1}\n  return %y\n}");
    let x = HostTensor::from_slice(&seq(15, 0.3), [3, 5]).unwrap();
    let (fake, r) = run_on(
        &g,
        FAKE,
        &CompileOptions::default(),
        std::slice::from_ref(&x),
    );
    assert_eq!(r.nodes[0].path, DispatchPath::CommonIr);
    assert!(
        r.nodes[0].kernels.iter().all(|k| k.starts_with("fake::")) && r.nodes[0].kernels.len() >= 5,
        "{:?}",
        r.nodes[0].kernels
    );
    let (cpu, rc) = run_on(&g, Device::Cpu, &CompileOptions::default(), &[x]);
    assert_eq!(rc.nodes[0].path, DispatchPath::Native);
    assert_close(&fake, &cpu);
}

#[test]
fn rewritten_path_conv_as_im2col_matches_the_cpu_conv() {
    setup();
    for (x_shape, w_shape, attrs, bias) in [
        ("[1,2,5,5]", "[3,2,3,3]", "{pads=[1, 1, 1, 1]}", false),
        (
            "[2,3,7,6]",
            "[4,3,3,2]",
            "{strides=[2, 1], dilations=[1, 2], pads=[0, 1, 2, 0]}",
            true,
        ),
        ("[2,2,9]", "[3,2,4]", "{strides=[3]}", true),
    ] {
        let bias_decl = if bias { ", %b: f32[WOUT]" } else { "" };
        let bias_use = if bias { ", %b" } else { "" };
        let cout: usize = w_shape[1..w_shape.len() - 1]
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let src = format!("graph @g(%x: f32{x_shape}, %w: f32{w_shape}{}) {{\n  %y = conv(%x, %w{bias_use}) {attrs}\n  return %y\n}}", bias_decl.replace("WOUT", &cout.to_string()));
        let g = graph(&src);
        let dims = |s: &str| {
            s[1..s.len() - 1]
                .split(',')
                .map(|d| d.parse::<usize>().unwrap())
                .collect::<Vec<_>>()
        };
        let (xd, wd) = (dims(x_shape), dims(w_shape));
        let mut inputs = vec![
            HostTensor::from_slice(&seq(xd.iter().product(), 0.1), xd).unwrap(),
            HostTensor::from_slice(&seq(wd.iter().product(), 0.05), wd).unwrap(),
        ];
        if bias {
            inputs.push(HostTensor::from_slice(&seq(cout, 0.5), [cout]).unwrap());
        }
        let (fake, r) = run_on(&g, FAKE, &CompileOptions::default(), &inputs);
        assert_eq!(r.nodes[0].path, DispatchPath::Rewritten, "{src}");
        assert_eq!(r.nodes[0].rewrite.as_deref(), Some("conv→im2col+matmul"));
        let (cpu, _) = run_on(&g, Device::Cpu, &CompileOptions::default(), &inputs);
        assert_close(&fake, &cpu);
    }
}

#[test]
fn rewritten_path_dot_general_and_global_pool() {
    setup();
    let g = graph("graph @g(%a: f32[2,3,4], %b: f32[4,2,5]) {\n  %y = dot_general(%a, %b) {lhs_batch=[0], rhs_batch=[1], lhs_contract=[2], rhs_contract=[0]}\n  return %y\n}");
    let inputs = [
        HostTensor::from_slice(&seq(24, 0.2), [2, 3, 4]).unwrap(),
        HostTensor::from_slice(&seq(40, 0.1), [4, 2, 5]).unwrap(),
    ];
    let (fake, r) = run_on(&g, FAKE, &CompileOptions::default(), &inputs);
    assert_eq!(r.nodes[0].rewrite.as_deref(), Some("dot_general→matmul"));
    let (cpu, _) = run_on(&g, Device::Cpu, &CompileOptions::default(), &inputs);
    assert_close(&fake, &cpu);

    let g = graph("graph @g(%x: f32[2,3,4,4]) {\n  %y = global_avg_pool(%x)\n  return %y\n}");
    let x = [HostTensor::from_slice(&seq(96, 0.1), [2, 3, 4, 4]).unwrap()];
    let (fake, r) = run_on(&g, FAKE, &CompileOptions::default(), &x);
    assert_eq!(r.nodes[0].path, DispatchPath::Rewritten);
    let (cpu, _) = run_on(&g, Device::Cpu, &CompileOptions::default(), &x);
    assert_close(&fake, &cpu);
}

const REFUSED: &str = "graph @refused(%x: f32[2,8], %t: f32[8]) {
  %s = sin(%x)
  %c = cumsum(%s) {axis=1}
  %p = softmax(%c) {axis=-1}
  %n = layer_norm(%p, %t, %t)
  %e = exp(%n)
  return %e
}";

#[test]
fn unsupported_nodes_are_all_listed_with_every_reason_and_what_to_do() {
    setup();
    let g = graph(REFUSED);
    let opts = CompileOptions {
        dispatch: DispatchOptions::new(Policy::PreferNative).with_op("softmax", Policy::NativeOnly),
        ..Default::default()
    };
    let err = rlx::compile_with(&g, FAKE, &opts).unwrap_err().to_string();
    let want = "cannot compile `refused` for fake (policy prefer_native): 3 nodes cannot run
  node 0 `sin` (f32[2,8]):
    native:    no kernel on this backend
    common-ir: no decomposition (`sin` is a primitive op)
    rewritten: no rewrite rule for `sin`
  node 1 `cumsum` (f32[2,8]):
    native:    no kernel on this backend
    common-ir: no decomposition (`cumsum` is a primitive op)
    rewritten: no rewrite rule for `cumsum`
  node 2 `softmax` (f32[2,8]):
    native:    no kernel on this backend
    common-ir: not tried (policy native_only); the op has a decomposition
what you can do:
  - compile for `cpu`: it runs `sin` (f32) natively
  - compile for `cpu`: it runs `cumsum` (f32) natively
  - compile for `cpu`: it runs `softmax` (f32) natively
  - use policy prefer_native for `softmax` so its decomposition may run
  - register a kernel for the op on this backend (rlx::custom), or express it with ops the backend has";
    assert_eq!(err, want, "\n--- got ---\n{err}\n--- want ---\n{want}");
    // layer_norm (node 3) is not listed: its decomposition is legal on the fake.
}

#[test]
fn compiled_out_is_distinguished_from_unsupported() {
    setup();
    let g = graph("graph @g(%x: c64[8]) {\n  %y = fft(%x)\n  return %y\n}");
    let err = rlx::compile_with(&g, SLIM, &CompileOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("native:    compiled out of this build (enable cargo feature `fft`)"),
        "{err}"
    );
    assert!(err.contains("rebuild with cargo feature `fft`"), "{err}");
}

#[test]
fn policies_choose_the_path() {
    setup();
    let g = graph("graph @g(%x: f32[2,4]) {\n  %y = softmax(%x)\n  %z = gelu(%y)\n  return %z\n}");
    let x = [HostTensor::from_slice(&seq(8, 0.4), [2, 4]).unwrap()];
    let paths = |opts: CompileOptions| -> Vec<DispatchPath> {
        let m = rlx::compile_with(&g, Device::Cpu, &opts).unwrap();
        m.run(&x).unwrap();
        m.dispatch_report().nodes.iter().map(|n| n.path).collect()
    };
    use DispatchPath::*;
    assert_eq!(paths(CompileOptions::default()), vec![Native, Native]);
    let common = CompileOptions {
        dispatch: DispatchOptions::new(Policy::CommonIrOnly),
        ..Default::default()
    };
    assert_eq!(paths(common), vec![CommonIr, CommonIr]);
    let per_op = CompileOptions {
        dispatch: DispatchOptions::default().with_op("gelu", Policy::CommonIrOnly),
        ..Default::default()
    };
    assert_eq!(paths(per_op), vec![Native, CommonIr]);
    // Common-IR and native agree numerically.
    let a = rlx::compile(&g, Device::Cpu).unwrap().run(&x).unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    let common = CompileOptions {
        dispatch: DispatchOptions::new(Policy::CommonIrOnly),
        ..Default::default()
    };
    let b = rlx::compile_with(&g, Device::Cpu, &common)
        .unwrap()
        .run(&x)
        .unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    assert_close(&a, &b);
}

#[test]
fn routing_picks_the_first_device_that_compiles_and_says_why() {
    setup();
    let chain = DeviceRouter::parse("fake,cpu").unwrap();
    let only_add = graph("graph @g(%a: f32[2]) {\n  %b = add(%a, %a)\n  return %b\n}");
    let m = rlx::compile_with(&only_add, chain.clone(), &CompileOptions::default()).unwrap();
    assert_eq!(m.device(), FAKE);
    let r = m.dispatch_report().routing.clone().unwrap();
    assert_eq!(
        r.reason,
        "first device of the chain; the graph legalizes on it"
    );

    let with_sin = graph("graph @g(%a: f32[2]) {\n  %b = sin(%a)\n  return %b\n}");
    let m = rlx::compile_with(&with_sin, chain, &CompileOptions::default()).unwrap();
    assert_eq!(m.device(), Device::Cpu);
    let r = m.dispatch_report().routing.clone().unwrap();
    assert!(r.reason.contains("not on: fake"), "{}", r.reason);
    assert!(r.tried[0].1.as_deref().unwrap().contains("`sin`"));
    // The routed graph always compiles and runs on the chosen device.
    let out = m
        .run(&[HostTensor::from_slice(&[0.0f32, 1.0], [2]).unwrap()])
        .unwrap();
    assert_close(&out[0].to_vec::<f32>().unwrap(), &[0.0, 1.0f32.sin()]);

    // Cost model: the fake claims 1000 GFLOP/s, the CPU backend 1. A big
    // matmul goes to the fake despite its transfers; a tiny add stays on the
    // CPU, where it needs no transfers and fewer launches.
    let big = graph("graph @g(%a: f32[256,256]) {\n  %b = matmul(%a, %a)\n  return %b\n}");
    let cheapest = DeviceRouter::parse("cheapest:cpu,fake").unwrap();
    let m = rlx::compile_with(&big, cheapest.clone(), &CompileOptions::default()).unwrap();
    assert_eq!(m.device(), FAKE);
    assert!(m
        .dispatch_report()
        .routing
        .as_ref()
        .unwrap()
        .reason
        .contains("lowest estimated cost"));
    let m = rlx::compile_with(&only_add, cheapest, &CompileOptions::default()).unwrap();
    assert_eq!(m.device(), Device::Cpu);

    // No device can: every device's reasons are in the error.
    let err = rlx::compile_with(
        &with_sin,
        DeviceRouter::parse("fake,slim").unwrap(),
        &CompileOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("--- fake ---") && err.contains("--- slim ---") && err.contains("`sin`"),
        "{err}"
    );
    let err = rlx::compile_with(
        &only_add,
        DeviceRouter::parse("cuda,fake").unwrap(),
        &CompileOptions::default(),
    )
    .unwrap();
    assert_eq!(err.device(), FAKE);
    assert!(err.dispatch_report().routing.as_ref().unwrap().tried[0]
        .1
        .as_deref()
        .unwrap()
        .contains("no `cuda` backend"));
}

#[test]
fn subgraph_bodies_obey_the_contract_too() {
    setup();
    let g = graph("graph @g(%c: bool[], %x: f32[2]) {\n  %y = if(%c, %x) {then_branch=graph @t(%a: f32[2]) {\n    %1 = sin(%a)\n    return %1\n  }, else_branch=graph @e(%a: f32[2]) {\n    return %a\n  }}\n  return %y\n}");
    let err = rlx::compile(&g, FAKE).unwrap_err().to_string();
    assert!(
        err.contains("`if`") && err.contains("then_branch") && err.contains("`sin`"),
        "{err}"
    );
    let _ = DType::F32;
}
