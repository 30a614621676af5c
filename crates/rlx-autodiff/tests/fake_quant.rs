//! Quantization-aware training's fake quantization: the forward value is
//! the weight a quantized model uses (the `gguf` package's Q4_0/Q8_0
//! encoding, checked through the reference dequantizer), and the gradient
//! passes straight through (identity).

use rlx_autodiff::nets::fake_quant;
use rlx_autodiff::value_and_grad;
use rlx_ir::{DType, GraphBuilder, HostTensor, TensorData, TensorType};

#[test]
fn fake_quant_has_the_quantized_value_and_a_straight_through_gradient() {
    let (k, n) = (64usize, 3usize);
    for dtype in [DType::Q8_0, DType::Q4_0] {
        let mut b = GraphBuilder::new("qat");
        let w = b.input("w", TensorType::new(DType::F32, [k, n]));
        let c = b.input("c", TensorType::new(DType::F32, [k, n]));
        let wq = fake_quant(&mut b, w, dtype).unwrap();
        let p = b.binary("mul", wq, c).unwrap();
        let loss = b.op1("reduce_sum", &[p], rlx_ir::Attrs::new()).unwrap();
        let g = b.finish(&[loss]).unwrap();
        let vg = value_and_grad(&g, &[0]).unwrap();

        let wv: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37) % 29) as f32 / 7.0 - 2.0)
            .collect();
        let cv: Vec<f32> = (0..k * n)
            .map(|i| ((i * 13) % 11) as f32 / 5.0 - 1.0)
            .collect();
        let wt = HostTensor::from_slice(&wv, [k, n]).unwrap();
        let ct = HostTensor::from_slice(&cv, [k, n]).unwrap();
        let out = rlx::compile(&vg, rlx::Device::Cpu)
            .unwrap()
            .run(&[wt, ct])
            .unwrap();

        // The quantized weight: columns of w are the rows of wᵀ (n × k).
        let wt_rows: Vec<f32> = (0..n)
            .flat_map(|j| (0..k).map(move |i| (i, j)))
            .map(|(i, j)| wv[i * n + j])
            .collect();
        let bytes = rlx_ref::kernels::quant::quantize_values(dtype, &wt_rows).unwrap();
        let deq = rlx_ref::kernels::quant::dequantize_values(
            &HostTensor::new(dtype, [n, k], TensorData::Packed(bytes)).unwrap(),
        )
        .unwrap();
        let want: f64 = (0..k)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| deq[j * k + i] * cv[i * n + j] as f64)
            .sum();
        let value = out[0].to_vec::<f32>().unwrap()[0] as f64;
        assert!(
            (value - want).abs() <= 1e-4 * want.abs().max(1.0),
            "{dtype}: {value} vs {want}"
        );
        // The quantized weights differ from w, so a gradient of c is the
        // straight-through estimator, not the true (zero almost everywhere) one.
        assert!(deq
            .iter()
            .zip(&wt_rows)
            .any(|(a, b)| (*a as f32 - b).abs() > 1e-3));
        assert_eq!(out[1].to_vec::<f32>().unwrap(), cv, "{dtype}: gradient");
    }
}

#[test]
fn the_quantized_mlp_computes_with_quantized_weights() {
    use rlx_autodiff::nets::{mlp, mlp_quant};
    let sizes = [64, 64, 10];
    let f = mlp(&sizes, 4, 3).unwrap();
    let q = mlp_quant(&sizes, 4, 3, Some(DType::Q4_0)).unwrap();
    let x = HostTensor::from_slice(
        &(0..4 * 64)
            .map(|i| (i % 17) as f32 / 17.0)
            .collect::<Vec<_>>(),
        [4, 64],
    )
    .unwrap();
    let mut ins = f.init.clone();
    ins.push(x);
    let a = rlx::compile(&f.logits, rlx::Device::Cpu)
        .unwrap()
        .run(&ins)
        .unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    let b = rlx::compile(&q.logits, rlx::Device::Cpu)
        .unwrap()
        .run(&ins)
        .unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(diff > 1e-4, "q4_0 logits equal the f32 ones ({diff})");
    assert!(rlx_ir::text::print(&q.logits).contains("quantize"));
}
