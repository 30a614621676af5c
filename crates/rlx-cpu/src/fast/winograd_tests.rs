//! Winograd F(4×4, 3×3) convs against the reference kernel (f64 sums):
//! odd channel counts (padding lanes), asymmetric pads, outputs that are
//! not whole tiles, batches, a bias and an activation; the filter
//! transformed at compile time (a constant weight) and by each run (a
//! weight that is an input).

use super::tests::{random_inputs, tensor};
use super::*;
use crate::options::{scoped, CpuOptions};

/// Largest |got − want| over the largest |want|. The Winograd transforms
/// reassociate the sums (and scale by up to 8 and 1/24), so the error is
/// measured against the output's size, not element by element.
fn rel_err(got: &HostTensor, want: &HostTensor) -> f64 {
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    assert_eq!(g.len(), w.len());
    let scale = w.iter().fold(0f64, |m, v| m.max(v.abs()));
    let err = g
        .iter()
        .zip(&w)
        .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
    err / scale.max(1e-30)
}

/// A `constant()` literal of `t`.
fn literal(t: &HostTensor) -> String {
    let dims: Vec<String> = t.shape().dims().iter().map(|d| d.to_string()).collect();
    let vals: Vec<String> = t
        .to_f64_vec()
        .unwrap()
        .iter()
        .map(|v| format!("{:?}", *v as f32))
        .collect();
    format!("tensor<f32[{}]> [{}]", dims.join(","), vals.join(", "))
}

#[test]
fn winograd_matches_the_reference() {
    // (n, c, h, w, m, pads [top, left, bottom, right], activation)
    let cases = [
        (1, 8, 8, 8, 8, [1, 1, 1, 1], "none"),
        (2, 19, 13, 11, 21, [1, 0, 2, 1], "silu"),
        (1, 16, 20, 20, 32, [1, 1, 1, 1], "relu"),
        (1, 33, 9, 17, 17, [0, 0, 0, 0], "none"),
        (1, 64, 10, 10, 64, [1, 1, 1, 1], "silu"),
        // Big enough for threads (`par::threads_for`): the output
        // channels split (64), or the tile rows (8 channels: one group).
        (1, 64, 24, 24, 64, [1, 1, 1, 1], "none"),
        (1, 64, 32, 32, 8, [1, 1, 1, 1], "relu"),
    ];
    for (n, c, h, w, m, p, act) in cases {
        let wt = tensor(&[m, c, 3, 3], 7);
        let pads = format!("[{}, {}, {}, {}]", p[0], p[1], p[2], p[3]);
        for constant in [true, false] {
            let (params, weight) = if constant {
                (
                    String::new(),
                    format!("  %w = constant() {{value={}}}\n", literal(&wt)),
                )
            } else {
                (format!(", %w: f32[{m},{c},3,3]"), String::new())
            };
            let src = format!(
                "graph @g(%x: f32[{n},{c},{h},{w}], %b: f32[{m}]{params}) {{
{weight}  %y = conv_act(%x, %w, %b) {{pads={pads}, activation=\"{act}\"}}
  return %y
}}"
            );
            let g = rlx_ir::text::parse(&src).unwrap();
            let what = format!("{n}x{c}x{h}x{w} -> {m}, pads {pads}, {act}, constant {constant}");
            let conv = g.nodes.iter().find(|n| n.op.name() == "conv_act").unwrap();
            let types: Vec<&TensorType> = conv.inputs.iter().map(|&v| g.ty(v)).collect();
            let name = kernel_name("conv_act", &types, &conv.attrs, DType::F32);
            assert!(name.contains("Winograd"), "{what}: {name}");
            let fp = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
            let filter = fp.steps.iter().find_map(|s| match s {
                step::Step::Fast {
                    kind: Kind::Conv { winograd, .. },
                    ..
                } => *winograd,
                _ => None,
            });
            match (constant, filter) {
                (true, Some(Filter::Const(_))) | (false, Some(Filter::PerRun)) => {}
                other => panic!("{what}: filter {other:?}"),
            }
            let mut ins = random_inputs(&g, 40);
            if !constant {
                ins[2] = wt.clone();
            }
            let refs: Vec<&HostTensor> = ins.iter().collect();
            let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
            let err = rel_err(&fp.run(&refs).unwrap()[0], want);
            eprintln!("{what}: relative error {err:.2e}");
            assert!(err < 1e-5, "{what}: relative error {err:.2e}");
        }
    }
}

/// With `CpuOptions::winograd` off, the same conv runs as im2col + GEMM,
/// and the report says so.
#[test]
fn winograd_can_be_turned_off() {
    let src = "graph @g(%x: f32[1,16,12,12], %w: f32[16,16,3,3]) {
  %y = conv(%x, %w) {pads=[1, 1, 1, 1]}
  return %y
}";
    let g = rlx_ir::text::parse(src).unwrap();
    let conv = &g.nodes[0];
    let types: Vec<&TensorType> = conv.inputs.iter().map(|&v| g.ty(v)).collect();
    let off = CpuOptions {
        winograd: false,
        ..CpuOptions::default()
    };
    let name = scoped(off, || kernel_name("conv", &types, &conv.attrs, DType::F32));
    assert!(name.contains("im2col"), "{name}");
    let fp = scoped(off, || {
        FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap()
    });
    let ins = random_inputs(&g, 3);
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
    assert!(rel_err(&fp.run(&refs).unwrap()[0], want) < 1e-6);
}
