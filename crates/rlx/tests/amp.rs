//! Compiling with mixed precision (`CompileOptions::amp`): the result is
//! the f32 reference's within 16-bit rounding, weights promised resident
//! are converted once (same answers on every run), a wrong input dtype is
//! a clear error, and the pass report says what moved.

use rlx::ir::GraphBuilder;
use rlx::{Amp, CompileOptions, DType, HostTensor, TensorType};

fn graph() -> rlx::Graph {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", TensorType::new(DType::F32, [4, 16]));
    let w = b.input("w", TensorType::new(DType::F32, [8, 16]));
    let bias = b.input("b", TensorType::new(DType::F32, [8]));
    let wt = b
        .op1(
            "permute",
            &[w],
            rlx::Attrs::new().with("perm", vec![1i64, 0]),
        )
        .unwrap();
    let y = b.binary("matmul", x, wt).unwrap();
    let y = b.binary("add", y, bias).unwrap();
    let y = b.unary("gelu", y).unwrap();
    let p = b
        .op1("softmax", &[y], rlx::Attrs::new().with("axis", -1i64))
        .unwrap();
    b.finish(&[p]).unwrap()
}

fn tensor(dims: &[usize], k: f64) -> HostTensor {
    let n: usize = dims.iter().product();
    let v = (0..n).map(|i| (i as f64 * k).sin() * 2.0).collect();
    HostTensor::from_f64(DType::F32, dims.to_vec(), v).unwrap()
}

#[test]
fn autocast_compiles_runs_and_converts_resident_weights_once() {
    let g = graph();
    let ins = [
        tensor(&[4, 16], 0.37),
        tensor(&[8, 16], 0.11),
        tensor(&[8], 0.7),
    ];
    let want = rlx_cpu::run_graph(&g, &ins).unwrap()[0]
        .to_f64_vec()
        .unwrap();
    for (amp, tol) in [(Amp::bf16(), 3e-2), (Amp::f16(), 4e-3)] {
        let opts = CompileOptions {
            amp,
            ..Default::default()
        };
        let c = rlx::compile_with(&g, rlx::Device::Cpu, &opts).unwrap();
        let report = c.pass_report().unwrap().to_string();
        assert!(report.contains("autocast to"), "{report}");
        assert!(
            report.contains("w:"),
            "the weight is converted before the run: {report}"
        );
        let check = |out: &[HostTensor]| {
            assert_eq!(out[0].dtype(), DType::F32);
            let got = out[0].to_f64_vec().unwrap();
            let err = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(err < tol, "error {err} over {tol}");
            assert!(err > 0.0, "no 16-bit rounding at all");
            got
        };
        let first = check(&c.run(&ins).unwrap());
        assert!(c.keep_resident(&[1, 2]));
        let second = check(&c.run(&ins).unwrap());
        let third = check(&c.run(&ins).unwrap());
        assert_eq!(first, second);
        assert_eq!(second, third);

        // A narrowed input given in another dtype: a typed error, no panic.
        let bad = HostTensor::from_f64(DType::F64, [4, 16], vec![0.0; 64]).unwrap();
        let c2 = rlx::compile_with(&g, rlx::Device::Cpu, &opts).unwrap();
        let e = c2.run(&[bad, ins[1].clone(), ins[2].clone()]).unwrap_err();
        assert!(e.to_string().contains("input 0"), "{e}");
    }
}

#[test]
fn amp_parses_the_cli_spelling() {
    assert_eq!(Amp::parse("bf16").unwrap(), Amp::bf16());
    assert_eq!(Amp::parse("none").unwrap(), Amp::None);
    let e = Amp::parse("fp8").unwrap_err();
    assert!(e.contains("none, f16 or bf16"), "{e}");
}
