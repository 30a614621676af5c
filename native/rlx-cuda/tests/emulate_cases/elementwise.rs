//! Elementwise, gather and whole-model plans in the CPU emulation (part
//! of `emulate.rs`, split out by what it holds): fused gathers, vectorized
//! loads and stores, values recomputed by their readers, a small BERT end
//! to end, the error flag of an out-of-range index.

use super::*;
use crate::attention::EMBEDDINGS_LN;

#[test]
fn gather_read_by_its_elementwise_reader() {
    check(
        "gather_outer",
        "graph @g(%t: f32[4,5,6], %i: i64[7], %b: f32[6]) {\n  %x = gather(%t, %i) {axis=1}\n  %y = add(%x, %b)\n  return %y\n}",
    );
}

#[test]
fn vectorized_elementwise_kernels() {
    // Bias + GELU after a GEMM (8 f16 / 4 f32 per thread), a row broadcast
    // along the last axis, an elementwise chain in place.
    check(
        "bias_gelu",
        "graph @g(%x: f32[4,64], %w: f32[64,48], %b: f32[48]) {\n  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}\n  return %y\n}",
    );
    check(
        "row_broadcast",
        "graph @g(%x: f32[8,16], %y: f32[8,1]) {\n  %z = mul(%x, %y)\n  %e = exp(%z)\n  return %e\n}",
    );
}

/// sentence-transformers' pooling head as rlx-models builds it: the
/// mask's cast is read by the masked sum and the count, the mean by the
/// squared norm and the final division.
const POOLING: &str = "graph @g(%x: f32[2,8,16], %m: i64[2,8]) {\n  %mf = cast(%m) {dtype=f32}\n  %m3 = unsqueeze(%mf) {axes=[-1]}\n  %hm = mul(%x, %m3)\n  %s = reduce_sum(%hm) {axes=[1]}\n  %c = reduce_sum(%m3) {axes=[1]}\n  %cc = clamp(%c) {min=1e-9}\n  %mean = div(%s, %cc)\n  %sq = mul(%mean, %mean)\n  %ss = reduce_sum(%sq) {axes=[-1], keepdim=true}\n  %nc = fused_elementwise(%ss) {body=graph @region(%in0: f32[2,1]) {\n    %1 = sqrt(%in0) : f32[2,1]\n    %2 = clamp(%1) {min=1e-12} : f32[2,1]\n    return %2\n  }}\n  %o = div(%mean, %nc)\n  return %o\n}";

/// A value read by two standalone elementwise kernels, one through a
/// transposing view.
const TWO_READERS: &str = "graph @g(%x: f32[4,8], %y: f32[4,8], %z: f32[8,4]) {\n  %a = exp(%x)\n  %b = add(%a, %y)\n  %t = permute(%a) {perm=[1, 0]}\n  %c = mul(%t, %z)\n  return %b, %c\n}";

#[test]
fn values_recomputed_by_their_readers() {
    // The pooling head: the cast and the mean are not kernels of their
    // own (launches: masked sum, count + clamp, squared norm + sqrt +
    // clamp + division), and the results match the CPU in every dtype.
    let kernels_of = |text: &str| {
        let p = plan_of(text).unwrap();
        let ops: Vec<String> = p
            .kernels
            .iter()
            .map(|(n, _)| p.node_ops[*n].clone())
            .collect();
        (p.launches.len(), ops)
    };
    let (n, ops) = kernels_of(POOLING);
    assert_eq!(n, 3, "pooling launches: {ops:?}");
    assert_eq!(ops, ["reduce_sum", "reduce_sum", "reduce_sum"]);
    check("pooling_recomputed", POOLING);
    let (n, ops) = kernels_of(TWO_READERS);
    assert_eq!(n, 2, "launches: {ops:?}");
    assert!(!ops.contains(&"exp".to_string()));
    check("two_readers_recomputed", TWO_READERS);
}

#[test]
fn small_bert_end_to_end() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    // f32 strict; f16 against the CPU's f16 run of the same graph, with
    // the plain and the tensor-core attention.
    for (dt, tc, tol) in [
        ("f32", false, 1e-5),
        ("f16", false, 2e-3),
        ("f16", true, 2e-3),
    ] {
        let (p, g, ins) = small_bert(dt, tc);
        let kernels = p.source.replace(rlx_cuda::ctype::PREAMBLE, "");
        assert_eq!(kernels.contains("mma_f16("), tc);
        // Per layer: QKV GEMM, attention (one kernel: tensor-core or
        // tiled f32), output GEMM + residual, norm, up GEMM, bias + GELU,
        // down GEMM + residual, norm; embeddings + norm one kernel; the
        // pooling head three reductions (the mask's cast and the mean
        // recomputed by their readers).
        let tail: Vec<&str> = p.kernels[p.kernels.len() - 3..]
            .iter()
            .map(|(n, _)| p.node_ops[*n].as_str())
            .collect();
        assert_eq!(tail, ["reduce_sum"; 3], "{dt} pooling head");
        assert_eq!(p.launches.len(), 1 + 2 * 8 + 3, "{dt} tc {tc} launches");
        let exe = build(&format!("small_bert_{dt}_{tc}"), &[&p]).unwrap();
        let (got, err) = exec(&exe, 0, &p, &ins).unwrap();
        assert_eq!(err, 0);
        let want = rlx_cpu::run_graph(&g, &ins).unwrap();
        for (k, (o, w)) in got.iter().zip(&want).enumerate() {
            let d = max_rel(o, w);
            eprintln!("small BERT {dt} (tensor cores: {tc}) output {k}: max rel diff {d:e}");
            assert!(
                d <= tol,
                "small BERT {dt} (tensor cores: {tc}) output {k}: max rel diff {d:e} > {tol:e}"
            );
        }
    }
}

#[test]
fn an_index_out_of_range_in_a_fused_gather_sets_the_error_flag() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let mut ins = inputs_for(EMBEDDINGS_LN);
    let mut ids = vec![1f64; 32];
    ids[17] = 10.0;
    ins[0] = HostTensor::from_f64(DType::I64, ins[0].shape().clone(), ids).unwrap();
    let (_, err) = emulate("embeddings_oob", EMBEDDINGS_LN, &ins);
    // Node index + 1 of the word-embedding lookup.
    let g = parse(EMBEDDINGS_LN).unwrap();
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let ir = rlx_opt::plan(l.graph).unwrap();
    let p = plan::plan(&ir).unwrap();
    assert!(err > 0, "no error reported");
    assert_eq!(p.node_ops[(err - 1) as usize], "embedding");
}

/// YOLOv8's box decoding: two narrows of one stored value, each read by
/// two elementwise nodes (x1y1 = a − lt, x2y2 = rb + a; wh = x2y2 − x1y1,
/// centre = (x1y1 + x2y2) / 2), then concats. On the GPU the centres came
/// out wrong while wh was right.
const BOX_TAIL: &str = "graph @g(%d: f32[1,4,64], %a: f32[1,2,64], %s: f32[1,64]) {
  %0 = exp(%d)
  %1 = narrow(%0) {axis=1, start=0, len=2}
  %2 = narrow(%0) {axis=1, start=2, len=2}
  %3 = sub(%a, %1)
  %4 = add(%2, %a)
  %5 = sub(%4, %3)
  %h = constant() {value=tensor<f32[1]> [0.5]}
  %6 = add(%3, %4)
  %7 = mul(%6, %h)
  %8 = concat(%7, %5) {axis=1}
  %9 = mul(%8, %s)
  return %9
}";

#[test]
fn box_decoding_reads_narrowed_operands_before_they_are_overwritten() {
    check("box_tail", BOX_TAIL);
}

/// YOLOv8's whole head after the last convs: concat of the three scales,
/// the box and class narrows, DFL, box decoding, strides, concat.
const HEAD: &str = "graph @g(%p: f32[1,82,48], %q: f32[1,82,16], %w: f32[1,16,1,1], %a: f32[1,2,64], %s: f32[1,64]) {
  %c = concat(%p, %q) {axis=2}
  %b = narrow(%c) {axis=1, start=0, len=64}
  %k = narrow(%c) {axis=1, start=64, len=18}
  %sg = sigmoid(%k)
  %0 = reshape(%b) {shape=[1, 4, 16, 64]}
  %1 = permute(%0) {perm=[0, 2, 1, 3]}
  %2 = softmax(%1) {axis=1}
  %3 = conv(%2, %w)
  %4 = reshape(%3) {shape=[1, 4, 64]}
  %l = narrow(%4) {axis=1, start=0, len=2}
  %r = narrow(%4) {axis=1, start=2, len=2}
  %x1 = sub(%a, %l)
  %x2 = add(%r, %a)
  %wh = sub(%x2, %x1)
  %h = constant() {value=tensor<f32[1]> [0.5]}
  %6 = add(%x1, %x2)
  %7 = mul(%6, %h)
  %8 = concat(%7, %wh) {axis=1}
  %9 = mul(%8, %s)
  %o = concat(%9, %sg) {axis=1}
  return %o
}";

#[test]
fn the_yolo_head() {
    check_in("yolo_head", HEAD, &[("f32", 1e-5)]);
}

/// A whole model's graph (text in RLX_EMULATE_GRAPH) emulated against the
/// CPU: for debugging by hand. The graph goes through rlx-opt's pipeline
/// first, as `rlx::compile` sends it to CUDA: planned unoptimized, its
/// memory plan differs from the one the GPU runs (YOLOv8n's overwritten
/// box distances did not show that way).
#[test]
#[ignore]
fn a_whole_graph_from_a_file() {
    let Ok(path) = std::env::var("RLX_EMULATE_GRAPH") else {
        return;
    };
    let g = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let eval =
        |g: &rlx_ir::Graph, i: &[HostTensor]| rlx_cpu::run_graph(g, i).map_err(|e| e.to_string());
    let (opt, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
    check_in("whole_graph", &rlx_ir::text::print(&opt), &[("f32", 1e-3)]);
}
