//! Quantization of dense layers (`rlx::quant`) against ONNX Runtime's
//! quantization tools and NumPy (`tests/vectors/quant/make.py`): scales,
//! zero points and integers of activations and weights, percentile and
//! MSE ranges, and a statically quantized MLP against the same QDQ model
//! run by ONNX Runtime.

use rlx::ir::GraphBuilder;
use rlx::quant::{
    dense_sites, quantization_error, quantize_weight, Calibrator, Granularity, Observer, Plan,
    QParams, Range, Scheme,
};
use rlx::{DType, HostTensor, TensorType};
use serde_json::Value;

fn vectors() -> Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/quant/vectors.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn ints(v: &Value) -> Vec<i32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap() as i32)
        .collect()
}

#[test]
fn activation_grids_match_onnx_runtime() {
    let v = vectors();
    for case in v["activations"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let x = f32s(&case["x"]);
        let mut o = Observer::default();
        o.add(&x).unwrap();
        for (sym, key) in [(false, "asym"), (true, "sym")] {
            // Min-max: scale, zero point and every integer as ORT's QuantizeLinear.
            let (lo, hi) = o.range(Range::MinMax, sym).unwrap();
            let q = QParams::int8(lo, hi, sym);
            let r = &case[format!("minmax_{key}")];
            assert_eq!(q.scale, r["scale"].as_f64().unwrap() as f32, "{name} {key}");
            assert_eq!(q.zero_point as i64, r["zero_point"].as_i64().unwrap());
            let got: Vec<i32> = x.iter().map(|&v| q.quantize(v)).collect();
            assert_eq!(got, ints(&r["q"]), "{name} {key}: integers");
            // Percentiles as NumPy's (linear interpolation).
            for p in [99.0, 99.9] {
                let (lo, hi) = o.range(Range::Percentile(p), sym).unwrap();
                let want = f32s(&case[format!("percentile{p:.1}_{key}")]);
                for (g, w) in [(lo, want[0]), (hi, want[1])] {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1e-3),
                        "{name} {key} p{p}: {g} vs {w}"
                    );
                }
            }
            // MSE: the least error NumPy finds over the same candidates.
            let (lo, hi) = o.range(Range::Mse, sym).unwrap();
            let err = quantization_error(&x, &QParams::int8(lo, hi, sym));
            let want = case[format!("mse_{key}_error")].as_f64().unwrap();
            assert!(
                (err - want).abs() <= 1e-6 * want + 1e-12,
                "{name} {key} mse: {err} vs {want}"
            );
            if name == "outliers" {
                // A percentile clips the ten outliers min-max keeps; MSE
                // never does worse than min-max (one of its candidates).
                let (_, mm) = o.range(Range::MinMax, sym).unwrap();
                let (_, p99) = o.range(Range::Percentile(99.0), sym).unwrap();
                assert!(p99 < 0.2 * mm, "{name} {key}: p99 {p99} vs max {mm}");
                let (l, h) = o.range(Range::MinMax, sym).unwrap();
                assert!(err <= quantization_error(&x, &QParams::int8(l, h, sym)));
            }
        }
    }
}

#[test]
fn weight_grids_match_onnx_runtime() {
    let v = vectors();
    for case in v["weights"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let w = f32s(&case["w"]);
        let out_axis = case["out_axis"].as_u64().unwrap() as usize;
        let dims = if name == "out_in" { [6, 32] } else { [48, 5] };
        for bits in [8u8, 4] {
            for (g, key) in [
                (Granularity::Tensor, "tensor"),
                (Granularity::Channel, "channel"),
                (Granularity::Group(16), "group16"),
            ] {
                let r = &case[format!("int{bits}_{key}")];
                let q = quantize_weight(&w, dims, out_axis, bits, g).unwrap();
                assert_eq!(
                    q.scales,
                    f32s(&r["scales"]),
                    "{name} int{bits} {key}: scales"
                );
                let got: Vec<i32> = q.values.iter().map(|&v| v as i32).collect();
                assert_eq!(got, ints(&r["q"]), "{name} int{bits} {key}: values");
            }
        }
    }
    // A group that does not divide the inputs is an error saying so.
    let e = quantize_weight(&[0.0; 6 * 32], [6, 32], 0, 8, Granularity::Group(128)).unwrap_err();
    assert!(
        e.contains("32 inputs per output") && e.contains("groups of 128"),
        "{e}"
    );
    assert!(quantize_weight(&[0.0; 4], [2, 2], 0, 8, Granularity::Group(0)).is_err());
    assert!(quantize_weight(&[0.0; 4], [2, 2], 0, 3, Granularity::Tensor).is_err());
    assert!(quantize_weight(&[f32::NAN; 4], [2, 2], 0, 8, Granularity::Tensor).is_err());
}

/// x (5, 24) → matmul(x, permute(w1)) + b1 → relu → matmul(·, w2 (32, 8)).
fn mlp() -> rlx::Graph {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", TensorType::new(DType::F32, [5, 24]));
    let w1 = b.input("w1", TensorType::new(DType::F32, [32, 24]));
    let b1 = b.input("b1", TensorType::new(DType::F32, [32]));
    let w2 = b.input("w2", TensorType::new(DType::F32, [32, 8]));
    let perm = rlx::Attrs::new().with("perm", vec![1i64, 0]);
    let w1t = b.op1("permute", &[w1], perm).unwrap();
    let h = b.binary("matmul", x, w1t).unwrap();
    let h = b.binary("add", h, b1).unwrap();
    let h = b.unary("relu", h).unwrap();
    let y = b.binary("matmul", h, w2).unwrap();
    b.finish(&[y]).unwrap()
}

/// The MLP's quantized graph run on the CPU with the plan's i8 weights
/// (inputs 1 and 3) in place of the f32 ones: its output, and the inputs.
fn run_planned(qg: &rlx::Graph, plan: &Plan, ins: &[HostTensor]) -> (Vec<f32>, Vec<HostTensor>) {
    let mut qins = ins.to_vec();
    for k in [1, 3] {
        qins[k] = plan.weight(k).unwrap().unwrap();
    }
    let y = rlx::compile(qg, rlx::Device::Cpu)
        .unwrap()
        .run(&qins)
        .unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    (y, qins)
}

fn mlp_inputs(c: &Value) -> Vec<HostTensor> {
    let t = |k: &str, d: &[usize]| HostTensor::from_slice(&f32s(&c[k]), d.to_vec()).unwrap();
    vec![
        t("x", &[5, 24]),
        t("w1", &[32, 24]),
        t("b1", &[32]),
        t("w2", &[32, 8]),
    ]
}

#[test]
fn static_int8_mlp_matches_onnx_runtime_qdq() {
    let v = vectors();
    let c = &v["qdq_mlp"];
    let g = mlp();
    let ins = mlp_inputs(c);
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let (sites, skipped) = dense_sites(&g, &[1, 2, 3]).unwrap();
    assert_eq!(sites.len(), 2);
    assert!(sites[0].transposed && !sites[1].transposed);
    assert_eq!(
        skipped.len(),
        1,
        "the bias is not a dense weight: {skipped:?}"
    );

    let mut cal = Calibrator::new([1, 2, 3]);
    cal.observe(&g, &refs, None).unwrap();
    let plan = cal
        .plan(
            &g,
            &Scheme::static_int8(Range::MinMax, Granularity::Channel),
            &refs,
        )
        .unwrap();
    let qg = plan.apply(&g).unwrap();
    assert_eq!(qg.ty(qg.inputs[1]).dtype, DType::I8);
    // Both layers are integer products; the first one's stored (out, in)
    // weight is given transposed, so no permute is left.
    let ops: Vec<&str> = qg.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops.iter()
            .filter(|&&o| o == "matmul_integer_scaled")
            .count(),
        2,
        "{ops:?}"
    );
    assert!(
        !ops.contains(&"permute") && !ops.contains(&"matmul"),
        "{ops:?}"
    );
    let (w, p) = (&ins[1], &plan.sites[&1]);
    assert_eq!(p.input_dims(), [p.dims[1], p.dims[0]]);
    assert_eq!(
        plan.weight(1).unwrap().unwrap().shape().dims(),
        [w.shape().dims()[1], w.shape().dims()[0]]
    );
    // Element for element the transpose (a square weight's shape would
    // not tell).
    let t = plan.weight(1).unwrap().unwrap().to_vec::<i8>().unwrap();
    let [rows, cols] = p.dims;
    for o in 0..rows {
        for i in 0..cols {
            assert_eq!(t[i * rows + o], p.weight.values[o * cols + i], "({o}, {i})");
        }
    }
    let (y, qins) = run_planned(&qg, &plan, &ins);
    let want = f32s(&c["y"]);
    let f32_y = f32s(&c["y_f32"]);
    let diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    assert!(diff(&y, &want) < 1e-4, "vs ORT QDQ: {}", diff(&y, &want));
    // It is the quantized model, not the f32 one.
    assert!(diff(&y, &f32_y) > 1e-3, "vs f32: {}", diff(&y, &f32_y));
    // The same through the compile option: the f32 graph in, the plan
    // applied first, i8 weights given at run time.
    let opts = rlx::CompileOptions {
        ptq: rlx::Ptq::Int(std::sync::Arc::new(plan)),
        ..Default::default()
    };
    let c = rlx::compile_with(&g, rlx::Device::Cpu, &opts).unwrap();
    let y2 = c.run(&qins).unwrap()[0].to_vec::<f32>().unwrap();
    assert_eq!(y2, y);
    let e = c.run(&ins).unwrap_err().to_string();
    assert!(e.contains("i8"), "f32 weights where i8 are due: {e}");
}

#[test]
fn weight_only_groups_dequantize_in_the_graph() {
    let v = vectors();
    let c = &v["qdq_mlp"];
    let g = mlp();
    let ins = mlp_inputs(c);
    let refs: Vec<&HostTensor> = ins.iter().collect();
    for (bits, gran) in [(4, Granularity::Group(8)), (8, Granularity::Tensor)] {
        let scheme = Scheme::weight_only(bits, gran);
        let plan = Plan::weight_only(&g, &[1, 3], &scheme, &refs).unwrap();
        let qg = plan.apply(&g).unwrap();
        let mut qins = ins.clone();
        let mut deq = vec![];
        for (k, dims, axis) in [(1, [32, 24], 0), (3, [32, 8], 1)] {
            qins[k] = plan.weight(k).unwrap().unwrap();
            // The reference: the integers (checked against ORT above) times
            // their group's scale, by hand.
            let q =
                quantize_weight(&ins[k].to_vec::<f32>().unwrap(), dims, axis, bits, gran).unwrap();
            let (outs, inn) = (dims[axis], dims[1 - axis]);
            let per = q.scales.len() / outs;
            let mut w = vec![0f32; q.values.len()];
            for o in 0..outs {
                for i in 0..inn {
                    let j = if axis == 0 {
                        o * dims[1] + i
                    } else {
                        i * dims[1] + o
                    };
                    // One scale per group of inn / per inputs; per 0: one in all.
                    let s = q.scales[inn.checked_div(per).map_or(0, |g| (o * inn + i) / g)];
                    w[j] = q.values[j] as f32 * s;
                }
            }
            deq.push(HostTensor::from_slice(&w, dims.to_vec()).unwrap());
        }
        let run = |g: &rlx::Graph, ins: &[HostTensor]| {
            rlx::compile(g, rlx::Device::Cpu).unwrap().run(ins).unwrap()[0]
                .to_vec::<f32>()
                .unwrap()
        };
        let y = run(&qg, &qins);
        let want = run(
            &g,
            &[
                ins[0].clone(),
                deq[0].clone(),
                ins[2].clone(),
                deq[1].clone(),
            ],
        );
        for (a, b) in y.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "int{bits} {gran}: {a} vs {b}");
        }
    }
    // Int4 weights in groups of 128 of a 24-input layer: an error naming it.
    let e = Plan::weight_only(
        &g,
        &[1],
        &Scheme::weight_only(4, Granularity::Group(128)),
        &refs,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`w1`") && e.contains("groups of 128"), "{e}");
}

#[test]
fn bad_calibration_is_a_typed_error() {
    let v = vectors();
    let g = mlp();
    let mut ins = mlp_inputs(&v["qdq_mlp"]);
    let scheme = Scheme::static_int8(Range::Mse, Granularity::Tensor);
    let refs: Vec<&HostTensor> = ins.iter().collect();
    // No calibration run: the plan cannot be made.
    let e = Calibrator::new([1, 3])
        .plan(&g, &scheme, &refs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("never observed"), "{e}");
    let e = Plan::weight_only(&g, &[1, 3], &scheme, &refs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs calibration"), "{e}");
    // A NaN in a layer input names the layer.
    let mut x = ins[0].to_vec::<f32>().unwrap();
    x[7] = f32::NAN;
    ins[0] = HostTensor::from_slice(&x, [5, 24]).unwrap();
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let e = Calibrator::new([1, 3])
        .observe(&g, &refs, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`w1`") && e.contains("non-finite"), "{e}");
    // Row flags that do not fit.
    let e = Calibrator::new([1])
        .observe(&g, &refs, Some(&[true, false]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 row flags"), "{e}");
    assert!(Range::parse("percentile=40").is_err());
    assert_eq!(Range::parse("percentile=99.9"), Ok(Range::Percentile(99.9)));
    assert_eq!(Granularity::parse("group=128"), Ok(Granularity::Group(128)));
}

/// Quantizing rounds ties to even (ONNX Round, `numpy.round`): the fast
/// CPU engine's `round` (which the QDQ activations run on) does too.
#[test]
fn round_on_the_fast_engine_ties_to_even() {
    let mut b = GraphBuilder::new("round");
    let x = b.input("x", TensorType::new(DType::F32, [8]));
    let r = b.unary("round", x).unwrap();
    let g = b.finish(&[r]).unwrap();
    let c = rlx::compile(&g, rlx::Device::Cpu).unwrap();
    assert!(
        c.dispatch_report().to_string().contains("cpu::fast::round"),
        "{}",
        c.dispatch_report()
    );
    let x = [0.5f32, 1.5, 2.5, -0.5, -2.5, 3.5, 2.4999998, -7.5];
    let y = c.run(&[HostTensor::from_slice(&x, [8]).unwrap()]).unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    // numpy.round([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, 2.4999998, -7.5])
    assert_eq!(y, [0.0, 2.0, 2.0, -0.0, -2.0, 4.0, 2.0, -8.0]);
}

#[test]
fn dynamic_int8_needs_no_calibration_and_quantizes_each_run() {
    let v = vectors();
    let c = &v["qdq_mlp"];
    let g = mlp();
    let ins = mlp_inputs(c);
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let scheme = Scheme::dynamic_int8(Granularity::Channel);
    let plan = Plan::weight_only(&g, &[1, 2, 3], &scheme, &refs).unwrap();
    let qg = plan.apply(&g).unwrap();
    let ops: Vec<&str> = qg.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops.iter()
            .filter(|&&o| o == "dynamic_quantize_linear")
            .count(),
        2,
        "{ops:?}"
    );
    assert_eq!(
        ops.iter()
            .filter(|&&o| o == "matmul_integer_scaled")
            .count(),
        2,
        "{ops:?}"
    );
    let (y, _) = run_planned(&qg, &plan, &ins);
    let f32_y = f32s(&c["y_f32"]);
    let diff = y
        .iter()
        .zip(&f32_y)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let top = f32_y.iter().map(|v| v.abs()).fold(0f32, f32::max);
    // Within the int8 grids' error of f32, and not f32 itself.
    assert!(
        diff < 0.05 * top && diff > 1e-4,
        "max diff {diff} (max |y| {top})"
    );
    // Groups cannot be rescaled after an integer product.
    let e = Plan::weight_only(
        &g,
        &[1, 3],
        &Scheme::dynamic_int8(Granularity::Group(8)),
        &refs,
    );
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("per tensor or per output channel"));
}
