//! A custom op registered from outside the core: it traces, verifies,
//! round-trips through the text IR, runs natively on the CPU, runs through
//! its decomposition when it has no kernel (and the dispatch report says
//! so), and both agree with the closed form.

use rlx::ir::text;
use rlx::{DType, HostTensor, Trace};
use rlx_custom_op_example::{register_softsign, register_softsign_without_kernel};

fn input() -> (Vec<f32>, HostTensor) {
    let v = vec![-3.0f32, -0.5, 0.0, 0.25, 2.0, 100.0];
    let t = HostTensor::from_slice(&v, [2, 3]).unwrap();
    (v, t)
}

fn closed_form(v: &[f32]) -> Vec<f64> {
    v.iter()
        .map(|&x| x as f64 / (1.0 + (x as f64).abs()))
        .collect()
}

fn run(op: &str) -> (Vec<f32>, rlx::DispatchReport, String) {
    let t = Trace::new("custom");
    let x = t.input("x", DType::F32, [2, 3]);
    let y = x.apply1(op, &[], rlx::Attrs::new()).unwrap();
    let g = t.finish(&[&y]).unwrap();
    let printed = text::print(&g);
    assert_eq!(text::print(&text::parse(&printed).unwrap()), printed);
    let m = rlx::compile(&g, rlx::Device::Cpu).unwrap();
    let out = m.run(&[input().1]).unwrap()[0].to_vec::<f32>().unwrap();
    (out, m.dispatch_report().clone(), printed)
}

#[test]
fn native_kernel_matches_closed_form() {
    register_softsign();
    let (out, report, printed) = run("softsign");
    assert!(printed.contains("softsign(%x)"));
    assert_eq!(report.nodes[0].path, rlx::DispatchPath::Native);
    for (a, b) in out.iter().zip(closed_form(&input().0)) {
        assert!(
            (*a as f64 - b).abs() <= 1e-6 * b.abs().max(1.0),
            "{a} vs {b}"
        );
    }
}

#[test]
fn without_a_kernel_it_runs_through_its_decomposition() {
    register_softsign_without_kernel();
    let (out, report, _) = run("softsign_decomposed");
    assert_eq!(report.nodes[0].path, rlx::DispatchPath::CommonIr);
    for (a, b) in out.iter().zip(closed_form(&input().0)) {
        assert!(
            (*a as f64 - b).abs() <= 1e-6 * b.abs().max(1.0),
            "{a} vs {b}"
        );
    }
}

#[test]
fn an_op_with_neither_kernel_nor_decomposition_is_refused_with_every_node_listed() {
    use rlx::custom::{register, Arity, Category, Grad, OpDef};
    static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let mut d = rlx_custom_op_example::def("softsign_nowhere");
        d.decompose = None;
        d.grad = Grad::NotDifferentiable;
        d.category = Category::Custom;
        d.arity = Arity::Exact(1);
        let _: OpDef = d;
        register(d, None).unwrap();
    });
    let t = Trace::new("refused");
    let x = t.input("x", DType::F32, [3]);
    let a = x
        .apply1("softsign_nowhere", &[], rlx::Attrs::new())
        .unwrap();
    let b = a
        .apply1("softsign_nowhere", &[], rlx::Attrs::new())
        .unwrap();
    let g = t.finish(&[&b]).unwrap();
    let err = rlx::compile(&g, rlx::Device::Cpu).unwrap_err().to_string();
    assert!(err.contains("2 nodes cannot run"), "{err}");
    assert!(
        err.contains("node 0 `softsign_nowhere`") && err.contains("node 1 `softsign_nowhere`"),
        "{err}"
    );
    assert!(err.contains("register a kernel for the op"), "{err}");
}
