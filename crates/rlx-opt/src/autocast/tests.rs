use super::*;
use crate::autocast::narrow_inputs;
use rlx_ir::TensorType;

fn f32t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims.to_vec())
}

fn count(g: &Graph, op: &str) -> usize {
    g.nodes.iter().filter(|n| n.op.name() == op).count()
}

/// The dtype of the first node of `op` (its first output).
fn dtype_of(g: &Graph, op: &str) -> DType {
    let n = g.nodes.iter().find(|n| n.op.name() == op).unwrap();
    g.ty(n.outputs[0]).dtype
}

/// x @ w1 -> relu -> @ w2 -> softmax: the classifier head of an MLP.
fn mlp() -> Graph {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", f32t(&[4, 8]));
    let w1 = b.input("w1", f32t(&[8, 16]));
    let w2 = b.input("w2", f32t(&[16, 3]));
    let h = b.binary("matmul", x, w1).unwrap();
    let h = b.unary("relu", h).unwrap();
    let half = b.scalar(0.5, DType::F32).unwrap();
    let h = b.binary("mul", h, half).unwrap();
    let y = b.binary("matmul", h, w2).unwrap();
    let p = b
        .op1("softmax", &[y], Attrs::new().with("axis", -1i64))
        .unwrap();
    b.finish(&[p, y]).unwrap()
}

#[test]
fn contractions_go_low_sensitive_ops_stay_f32_interface_kept() {
    for dt in [DType::BF16, DType::F16] {
        let g = mlp();
        let (h, rep) = Autocast::new(dt).unwrap().apply(&g).unwrap();
        h.verify().unwrap();
        assert_eq!(h.input_types(), g.input_types());
        assert_eq!(h.output_types(), g.output_types());
        assert_eq!(dtype_of(&h, "matmul"), dt);
        // relu and the scale by a constant follow their 16-bit input.
        assert_eq!(dtype_of(&h, "relu"), dt);
        assert_eq!(dtype_of(&h, "mul"), dt);
        assert_eq!(dtype_of(&h, "softmax"), DType::F32);
        assert_eq!(rep.lowered.get("matmul"), Some(&2));
        assert_eq!(rep.followed.get("relu"), Some(&1));
        assert_eq!(rep.kept_f32.get("softmax"), Some(&1));
        assert!(rep.refused.is_empty(), "{rep}");
        // x, w1, w2 down; the second matmul's result up once, shared by
        // softmax and the graph output.
        assert_eq!(rep.casts, 4, "{rep}");
        assert_eq!(count(&h, "cast"), 4);
        // The scalar constant was converted, not cast.
        let m = h.nodes.iter().find(|n| n.op.name() == "mul").unwrap();
        assert_eq!(h.ty(m.inputs[1]).dtype, dt);
    }
}

#[test]
fn results_match_the_f32_graph_within_16_bit_rounding() {
    let g = mlp();
    let x = HostTensor::from_f64(
        DType::F32,
        [4, 8],
        (0..32).map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0).collect(),
    )
    .unwrap();
    let w1 = HostTensor::from_f64(
        DType::F32,
        [8, 16],
        (0..128)
            .map(|i| ((i * 5 % 13) as f64 - 6.0) / 8.0)
            .collect(),
    )
    .unwrap();
    let w2 = HostTensor::from_f64(
        DType::F32,
        [16, 3],
        (0..48).map(|i| ((i * 3 % 7) as f64 - 3.0) / 5.0).collect(),
    )
    .unwrap();
    let ins = [x, w1, w2];
    let want = rlx_cpu::run_graph(&g, &ins).unwrap();
    for (dt, tol) in [(DType::F16, 5e-3), (DType::BF16, 4e-2)] {
        let (h, _) = Autocast::new(dt).unwrap().apply(&g).unwrap();
        let got = rlx_cpu::run_graph(&h, &ins).unwrap();
        for (w, o) in want.iter().zip(&got) {
            assert_eq!(o.dtype(), DType::F32);
            let (w, o) = (w.to_f64_vec().unwrap(), o.to_f64_vec().unwrap());
            let err = w
                .iter()
                .zip(&o)
                .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
                .fold(0.0, f64::max);
            assert!(err < tol, "{dt}: error {err}");
            // And it is not the f32 result: the arithmetic did change.
            assert!(w != o, "{dt}: no rounding at all");
        }
    }
}

#[test]
fn a_mixed_elementwise_op_is_promoted_to_f32() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[2, 3]));
    let w = b.input("w", f32t(&[3, 3]));
    let bias = b.input("bias", f32t(&[3]));
    let y = b.binary("matmul", x, w).unwrap();
    let y = b.binary("add", y, bias).unwrap();
    let g = b.finish(&[y]).unwrap();
    let (h, rep) = Autocast::new(DType::BF16).unwrap().apply(&g).unwrap();
    // bias is an f32 tensor, not a constant: it votes, and wins.
    assert_eq!(dtype_of(&h, "add"), DType::F32);
    assert!(rep.followed.is_empty());
    assert_eq!(rep.casts, 3);
}

#[test]
fn lists_are_editable_and_checked() {
    let g = mlp();
    let ac = Autocast::new(DType::F16)
        .unwrap()
        .keep_f32("matmul")
        .unwrap()
        .lower("softmax")
        .unwrap();
    let (h, rep) = ac.apply(&g).unwrap();
    assert_eq!(dtype_of(&h, "matmul"), DType::F32);
    assert_eq!(dtype_of(&h, "softmax"), DType::F16);
    assert!(!rep.lowered.contains_key("matmul"));
    // Following: relu no longer sees a 16-bit input.
    let ac = Autocast::new(DType::F16)
        .unwrap()
        .follow("softmax")
        .unwrap();
    let (h, _) = ac.apply(&g).unwrap();
    assert_eq!(dtype_of(&h, "softmax"), DType::F16);

    let e = Autocast::new(DType::F16).unwrap().lower("no_such_op");
    assert!(e.unwrap_err().to_string().contains("no_such_op"));
    let e = Autocast::new(DType::F32).unwrap_err();
    assert!(e.to_string().contains("f16 or bf16"), "{e}");
}

#[test]
fn f64_integers_and_control_flow_are_untouched() {
    let mut body = GraphBuilder::new("body");
    let c = body.input("c", f32t(&[]));
    let e = body.input("e", f32t(&[]));
    let s = body.binary("add", c, e).unwrap();
    let body = body.finish(&[s, s]).unwrap();

    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[3, 3]));
    let d = b.input("d", TensorType::new(DType::F64, [3, 3]));
    let i = b.input("i", TensorType::new(DType::I64, [3, 3]));
    let xx = b.binary("matmul", x, x).unwrap();
    let dd = b.binary("matmul", d, d).unwrap();
    let ii = b.binary("matmul", i, i).unwrap();
    let init = b.op1("reduce_max", &[xx], Attrs::new()).unwrap();
    let xs = b
        .op1("reshape", &[xx], Attrs::new().with("shape", vec![9i64]))
        .unwrap();
    let sc = b
        .op(
            "scan",
            &[init, xs],
            Attrs::new().with("body", body).with("num_carry", 1i64),
        )
        .unwrap();
    let g = b.finish(&[xx, dd, ii, sc[0]]).unwrap();
    let (h, rep) = Autocast::new(DType::BF16).unwrap().apply(&g).unwrap();
    assert_eq!(rep.lowered.get("matmul"), Some(&1), "{rep}");
    let scan = h.nodes.iter().find(|n| n.op.name() == "scan").unwrap();
    for &v in &scan.inputs {
        assert_eq!(h.ty(v).dtype, DType::F32);
    }
    assert_eq!(h.output_types(), g.output_types());
}

#[test]
fn a_refusing_op_is_kept_in_f32_and_reported() {
    // `quantize` reads f32 only: put on the lower list, its type rule
    // refuses bf16, so the node stays f32 and the report says why.
    let mut b = GraphBuilder::new("q");
    let x = b.input("x", f32t(&[2, 32]));
    let w = b.input("w", f32t(&[32, 32]));
    let y = b.binary("matmul", x, w).unwrap();
    let q = b
        .op1("quantize", &[y], Attrs::new().with("dtype", DType::Q8_0))
        .unwrap();
    let g = b.finish(&[q]).unwrap();
    let ac = Autocast::new(DType::BF16)
        .unwrap()
        .lower("quantize")
        .unwrap();
    let (h, rep) = ac.apply(&g).unwrap();
    h.verify().unwrap();
    assert_eq!(rep.refused.len(), 1, "{rep}");
    assert_eq!(rep.refused[0].0, "quantize");
    assert!(
        rep.to_string().contains("(refused 16 bits): quantize"),
        "{rep}"
    );
    let qn = h.nodes.iter().find(|n| n.op.name() == "quantize").unwrap();
    assert_eq!(h.ty(qn.inputs[0]).dtype, DType::F32);
    assert_eq!(dtype_of(&h, "matmul"), DType::BF16);
}

#[test]
fn weights_read_through_casts_and_movement_become_16_bit_inputs() {
    // w is read as cast(permute(w)) — the shape autocast leaves a weight
    // of `x @ wᵀ` in — and x through a cast: both narrow. b is read by a
    // cast and by an f32 op, o is an output: neither does.
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[2, 3]));
    let w = b.input("w", f32t(&[4, 3]));
    let bias = b.input("b", f32t(&[4]));
    let o = b.input("o", f32t(&[4]));
    let wt = b
        .op1("permute", &[w], Attrs::new().with("perm", vec![1i64, 0]))
        .unwrap();
    let y = b.binary("matmul", x, wt).unwrap();
    let y = b.binary("add", y, bias).unwrap();
    let e = b.unary("exp", bias).unwrap();
    let s = b.binary("add", e, o).unwrap();
    let g = b.finish(&[y, s, o]).unwrap();
    let (h, _) = Autocast::bf16().apply(&g).unwrap();
    let (n, narrowed) = narrow_inputs(&h).unwrap();
    n.verify().unwrap();
    assert_eq!(narrowed, [(0, DType::BF16), (1, DType::BF16)]);
    assert_eq!(n.ty(n.inputs[1]).dtype, DType::BF16);
    assert_eq!(n.ty(n.inputs[2]).dtype, DType::F32);
    assert_eq!(n.output_types(), g.output_types());
    // w's cast is gone; the permute reads the 16-bit input.
    let p = n.nodes.iter().find(|k| k.op.name() == "permute").unwrap();
    assert_eq!(p.inputs[0], n.inputs[1]);
    assert_eq!(count(&n, "cast"), count(&h, "cast") - 2);
    // The same numbers, given w rounded to bf16 by the caller.
    let xv = vec![0.5, -1.0, 2.0, 1.5, 0.25, -0.75];
    let xs = HostTensor::from_f64(DType::F32, [2, 3], xv.clone()).unwrap();
    let x16 = HostTensor::from_f64(DType::BF16, [2, 3], xv).unwrap();
    let wv: Vec<f64> = (0..12).map(|i| (i as f64 - 5.5) / 3.0).collect();
    let ws = HostTensor::from_f64(DType::F32, [4, 3], wv.clone()).unwrap();
    let w16 = HostTensor::from_f64(DType::BF16, [4, 3], wv).unwrap();
    let bs = HostTensor::from_f64(DType::F32, [4], vec![0.1, 0.2, 0.3, 0.4]).unwrap();
    let os = HostTensor::from_f64(DType::F32, [4], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let want = rlx_cpu::run_graph(&h, &[xs, ws, bs.clone(), os.clone()]).unwrap();
    let got = rlx_cpu::run_graph(&n, &[x16, w16, bs, os]).unwrap();
    assert_eq!(want, got);
}

/// A block-quantized matmul (an LLM's layers): x goes to 16 bits, the
/// Q8_0 weight is not touched (quantized values are never cast), the
/// product is 16-bit and the output is cast back to f32.
#[test]
fn dequant_matmul_takes_16_bit_x_and_keeps_its_blocks() {
    let mut b = GraphBuilder::new("qlinear");
    let x = b.input("x", f32t(&[2, 64]));
    let w = b.input("w", TensorType::new(DType::Q8_0, vec![16, 64]));
    let y = b.binary("dequant_matmul", x, w).unwrap();
    let g = b.finish(&[y]).unwrap();
    let (h, rep) = Autocast::new(DType::F16).unwrap().apply(&g).unwrap();
    h.verify().unwrap();
    assert_eq!(h.input_types(), g.input_types());
    assert_eq!(h.output_types(), g.output_types());
    assert_eq!(dtype_of(&h, "dequant_matmul"), DType::F16);
    assert_eq!(rep.lowered.get("dequant_matmul"), Some(&1), "{rep}");
    let n = h
        .nodes
        .iter()
        .find(|n| n.op.name() == "dequant_matmul")
        .unwrap();
    assert_eq!(h.ty(n.inputs[1]).dtype, DType::Q8_0);
    // x down, the product up: the weight needs no cast.
    assert_eq!(rep.casts, 2, "{rep}");
}
