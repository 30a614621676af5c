//! `gpu parity`: the reference-vector cases, and extra cases (attention,
//! embeddings) the vectors lack, against the expected outputs and the CPU.

use super::*;

const EXTRA: &[(&str, &str)] = &[
    ("attention_64_heads_causal", "graph @g(%q: f32[4,16,24,32], %k: f32[4,16,24,32], %v: f32[4,16,24,32]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ("attention_64_heads_keep_mask", "graph @g(%q: f32[4,16,24,32], %k: f32[4,16,24,32], %v: f32[4,16,24,32], %m: bool[4,1,1,24]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  return %o\n}"),
    ("attention_64_heads_bias", "graph @g(%q: f32[64,24,32], %k: f32[64,40,32], %v: f32[64,40,16], %m: f32[64,24,40]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("attention_permute_reshape", "graph @g(%q: f32[2,4,16,8], %k: f32[2,4,16,8], %v: f32[2,4,16,8]) {\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,16,32]}\n  return %r\n}"),
    ("attention_64_heads_permute_reshape", "graph @g(%q: f32[4,16,24,8], %k: f32[4,16,24,8], %v: f32[4,16,24,8]) {\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[4,24,128]}\n  return %r\n}"),
    // Tensor-core attention (f16/bf16 only; the f32 run takes the other
    // kernels): partial 16-row tiles, a bias mask, 1- and 4-warp blocks, a
    // causal mask, a keep mask broadcast over heads with the merged-heads layout.
    ("attention_tc_bias_partial_rows", "graph @g(%q: f32[2,4,40,64], %k: f32[2,4,128,64], %v: f32[2,4,128,32], %m: f32[2,1,40,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("attention_tc_causal_4_warps", "graph @g(%q: f32[144,100,32], %k: f32[144,112,32], %v: f32[144,112,16]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ("attention_tc_keep_mask_merged_heads", "graph @g(%q: f32[2,12,128,32], %k: f32[2,12,128,32], %v: f32[2,12,128,32], %m: bool[2,1,1,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  return %r\n}"),
    // q/k/v computed into the arena, heads split by views, merged again:
    // the memory planner may give the merged output q's, k's or v's buffer
    // (the tensor-core kernel then writes in place, as in MiniLM).
    ("attention_tc_in_place_merged_heads", "graph @g(%x: f32[2,128,384], %y: f32[2,128,384], %z: f32[2,128,384]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,128,12,32]}\n  %rb = reshape(%b) {shape=[2,128,12,32]}\n  %rc = reshape(%c) {shape=[2,128,12,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  return %r\n}"),
    // q's buffer still read after the attention, so the merged output may
    // take k's: written in place only with one block per head.
    ("attention_tc_in_place_over_k", "graph @g(%x: f32[2,128,384], %y: f32[2,128,384], %z: f32[2,128,384]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,128,12,32]}\n  %rb = reshape(%b) {shape=[2,128,12,32]}\n  %rc = reshape(%c) {shape=[2,128,12,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,128,384]}\n  %s = add(%r, %a)\n  return %s\n}"),
    // Sibling GEMMs batched into one (weights and biases grouped, a bias per
    // batch), with plain and with transposed (permute view) weights. (Each
    // output is compared on its own: a sum of two of them, ~±13 each, lost
    // 2 ulps to cancellation at f16/bf16 in the first H200 run.)
    ("qkv_siblings", "graph @g(%x: f32[2,16,32], %wq: f32[32,24], %bq: f32[24], %wk: f32[32,24], %bk: f32[24], %wv: f32[32,24], %bv: f32[24]) {\n  %q = matmul_bias_act(%x, %wq, %bq)\n  %k = matmul_bias_act(%x, %wk, %bk)\n  %v = matmul_bias_act(%x, %wv, %bv)\n  return %q, %k, %v\n}"),
    ("qkv_siblings_transposed_weights", "graph @g(%x: f32[2,16,32], %wq: f32[24,32], %bq: f32[24], %wk: f32[24,32], %bk: f32[24], %wv: f32[24,32], %bv: f32[24]) {\n  %tq = permute(%wq) {perm=[1,0]}\n  %q = matmul_bias_act(%x, %tq, %bq)\n  %tk = permute(%wk) {perm=[1,0]}\n  %k = matmul_bias_act(%x, %tk, %bk)\n  %tv = permute(%wv) {perm=[1,0]}\n  %v = matmul_bias_act(%x, %tv, %bv)\n  return %q, %k, %v\n}"),
    ("linear_bias_residual", "graph @g(%x: f32[3,8,16], %w: f32[16,16], %b: f32[16], %r: f32[3,8,16]) {\n  %y = matmul_bias_act(%x, %w, %b)\n  %z = add(%y, %r)\n  return %z\n}"),
    // Reductions with fused neighbours: an elementwise producer computed
    // in the reduction's loop, an elementwise epilogue on the reduced
    // value, and a consumer over the input's shape reading the value per
    // row (MiniLM's mean pooling + L2 normalize; a row max subtracted over
    // a middle axis; an epilogue with an operand of its own).
    ("reduce_fusions_pooling", "graph @g(%x: f32[3,7,40], %m: f32[3,7,1]) {\n  %me = exp(%m)\n  %a = mul(%x, %me)\n  %s = reduce_sum(%a) {axes=[1]}\n  %c = reduce_sum(%me) {axes=[1]}\n  %cc = clamp(%c) {min=1e-9}\n  %mean = div(%s, %cc)\n  %sq = mul(%mean, %mean)\n  %n = reduce_sum(%sq) {axes=[1], keepdim=true}\n  %r = sqrt(%n)\n  %y = div(%mean, %r)\n  return %y\n}"),
    ("reduce_fusions_middle_axis_consumer", "graph @g(%x: f32[4,9,6]) {\n  %mx = reduce_max(%x) {axes=[1], keepdim=true}\n  %y = sub(%x, %mx)\n  return %y\n}"),
    ("reduce_fusions_column_consumer", "graph @g(%x: f32[6,10]) {\n  %s = reduce_sum(%x) {axes=[0]}\n  %y = mul(%x, %s)\n  return %y\n}"),
    // Reductions over a middle axis with many outputs: 32 neighbouring
    // outputs per block (a partial last block), 8 threads per output.
    ("reduce_columns_producer_epilogue", "graph @g(%x: f32[3,50,700], %m: f32[3,50,1]) {\n  %a = mul(%x, %m)\n  %s = reduce_sum(%a) {axes=[1]}\n  %y = neg(%s)\n  return %y\n}"),
    ("reduce_columns_max_mean", "graph @g(%x: f32[40,1100]) {\n  %mx = reduce_max(%x) {axes=[0]}\n  %mn = reduce_mean(%x) {axes=[0]}\n  return %mx, %mn\n}"),
    ("reduce_fusions_epilogue_operand", "graph @g(%x: f32[5,300], %b: f32[5]) {\n  %s = reduce_mean(%x) {axes=[1]}\n  %y = add(%s, %b)\n  return %y\n}"),
    // Rows of a multiple of 128: the 4-elements-per-lane norm kernel.
    ("layer_norm_384", "graph @g(%x: f32[10,384], %g: f32[384], %b: f32[384]) {\n  %y = layer_norm(%x, %g, %b) {eps=1e-5}\n  return %y\n}"),
    ("rms_norm_256", "graph @g(%x: f32[5,256], %g: f32[256]) {\n  %y = rms_norm(%x, %g) {eps=1e-6}\n  return %y\n}"),
    ("layer_norm_1000", "graph @g(%x: f32[6,1000], %g: f32[1000], %b: f32[1000]) {\n  %y = layer_norm(%x, %g, %b) {eps=1e-5}\n  return %y\n}"),
    // Gathers read by their elementwise reader (never stored): along a
    // middle axis with an outer one; BERT's three embedding lookups summed
    // (positions from a constant arange) inside the layer norm after them.
    // Integer inputs are indices 0..2 (see `extra_inputs`).
    ("gather_read_by_elementwise_outer_axis", "graph @g(%t: f32[4,5,6], %i: i64[7], %b: f32[6]) {\n  %x = gather(%t, %i) {axis=1}\n  %y = add(%x, %b)\n  return %y\n}"),
    ("embeddings_sum_in_layer_norm", EMBEDDINGS_LN),
    // A padding mask `ids != 0` read only by attention (which then reads
    // the ids): the tensor-core kernel at f16/bf16 (heads of 32), the
    // tiled one at f32.
    ("attention_tc_nonzero_ids_mask", "graph @g(%q: f32[2,12,128,32], %k: f32[2,12,128,32], %v: f32[2,12,128,32], %ids: i64[2,128]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,128]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}"),
];

/// BERT's embedding block (as the optimizer leaves it): three lookups, one
/// fused sum, a layer norm.
const EMBEDDINGS_LN: &str = "graph @g(%ids: i64[2,16], %tt: i64[2,16], %w: f32[10,64], %p: f32[16,64], %ty: f32[3,64], %g: f32[64], %be: f32[64]) {\n  %pi = arange() {dtype=i64, len=16, start=0.0, step=1.0}\n  %a = embedding(%w, %ids)\n  %b = embedding(%p, %pi)\n  %c = embedding(%ty, %tt)\n  %s = fused_elementwise(%a, %c, %b) {body=graph @region(%in0: f32[2,16,64], %in1: f32[2,16,64], %in2: f32[16,64]) {\n    %3 = add(%in0, %in1) : f32[2,16,64]\n    %4 = add(%in2, %3) : f32[2,16,64]\n    return %4\n  }}\n  %n = layer_norm(%s, %g, %be) {axis=2, eps=1e-5}\n  return %n\n}";

/// Random inputs of `g` for the extra cases: floats normal, integers
/// (indices) cycling through 0, 1, 2.
pub(super) fn extra_inputs(g: &Graph, rng: &mut Rng) -> Vec<HostTensor> {
    g.input_types()
        .iter()
        .map(|ty| {
            let z = HostTensor::zeros(ty.dtype, ty.shape.clone()).unwrap();
            if matches!(ty.dtype, DType::I32 | DType::I64) {
                let v = (0..z.numel()).map(|k| ((k * 5 + 1) % 3) as f64).collect();
                HostTensor::from_f64(ty.dtype, ty.shape.clone(), v).unwrap()
            } else {
                random_like(&z, rng)
            }
        })
        .collect()
}

pub(super) fn parity(dir: &str) -> usize {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("vector dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let (mut pass, mut fail) = (0usize, 0usize);
    let mut covered = std::collections::BTreeSet::new();
    let mut covered_narrow = std::collections::BTreeSet::new();
    let mut rng = Rng(0x5eed);
    let claims = rlx_cuda::claims();
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let op = v["op"].as_str().unwrap_or("?").to_string();
        for case in v["cases"].as_array().cloned().unwrap_or_default() {
            let name = format!("{op}/{}", case["name"].as_str().unwrap_or("?"));
            if case.get("moments").is_some() {
                continue;
            }
            let Ok(g) = text::parse(case["graph"].as_str().unwrap_or("")) else {
                continue;
            };
            let Ok(c) = compile_cuda(&g, true) else {
                continue;
            }; // not native on CUDA
            let inputs: Vec<HostTensor> = match case["inputs"]
                .as_array()
                .map(|a| a.iter().map(tensor).collect::<Result<Vec<_>, _>>())
            {
                Some(Ok(t)) => t,
                _ => continue,
            };
            let refs: Vec<&HostTensor> = inputs.iter().collect();
            let mut result = |what: &str, r: Result<(), String>| match r {
                Ok(()) => pass += 1,
                Err(e) => {
                    fail += 1;
                    println!("FAIL {name} ({what}): {e}");
                }
            };
            let got = c.run_refs(&refs);
            if let Some(want) = case.get("error").and_then(|e| e.as_str()) {
                result(
                    "expected error",
                    match got {
                        Err(e) => {
                            println!("ok   {name}: typed error: {e} (reference: {want})");
                            Ok(())
                        }
                        Ok(_) => Err(format!("ran, but the reference fails with {want:?}")),
                    },
                );
                continue;
            }
            let want: Vec<HostTensor> = case["outputs"]
                .as_array()
                .map(|a| a.iter().filter_map(|t| tensor(t).ok()).collect())
                .unwrap_or_default();
            let (rt, at) = (
                case["rtol"].as_f64().unwrap_or(1e-6),
                case["atol"].as_f64().unwrap_or(1e-6),
            );
            let r = got.map_err(|e| e.to_string()).and_then(|outs| {
                outs.iter()
                    .zip(&want)
                    .enumerate()
                    .try_for_each(|(k, (o, w))| {
                        let (rt, at) = loosen(w.dtype(), rt, at);
                        close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                    })
            });
            let ok = r.is_ok();
            result("vectors", r);
            // The same graph on random inputs against the CPU reference.
            let rand: Vec<HostTensor> = inputs.iter().map(|t| random_like(t, &mut rng)).collect();
            let rrefs: Vec<&HostTensor> = rand.iter().collect();
            if let Ok(cpu) = rlx_cpu::run_graph(&g, &rand) {
                let r = c
                    .run_refs(&rrefs)
                    .map_err(|e| e.to_string())
                    .and_then(|outs| {
                        outs.iter()
                            .zip(&cpu)
                            .enumerate()
                            .try_for_each(|(k, (o, w))| {
                                let (rt, at) = loosen(w.dtype(), 1e-4, 1e-5);
                                close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                            })
                    });
                let ok2 = r.is_ok();
                result("random vs cpu", r);
                // The f32 graph again in f16 and bf16 (storage), against the
                // CPU reference on the same narrow graph.
                let src = case["graph"].as_str().unwrap_or("");
                for narrow in ["f16", "bf16"] {
                    if !src.contains("f32") {
                        break;
                    }
                    let Ok(gn) = text::parse(&src.replace("f32", narrow)) else {
                        continue;
                    };
                    let Ok(cn) = compile_cuda(&gn, true) else {
                        continue;
                    };
                    let rn: Vec<HostTensor> = gn
                        .input_types()
                        .iter()
                        .zip(&rand)
                        .map(|(ty, t)| {
                            if ty.dtype == t.dtype() {
                                t.clone()
                            } else {
                                HostTensor::from_f64(
                                    ty.dtype,
                                    t.shape().clone(),
                                    t.to_f64_vec().unwrap(),
                                )
                                .unwrap()
                            }
                        })
                        .collect();
                    let Ok(cpu) = rlx_cpu::run_graph(&gn, &rn) else {
                        continue;
                    };
                    let r = cn
                        .run_refs(&rn.iter().collect::<Vec<_>>())
                        .map_err(|e| e.to_string())
                        .and_then(|outs| {
                            outs.iter()
                                .zip(&cpu)
                                .enumerate()
                                .try_for_each(|(k, (o, w))| {
                                    let (rt, at) = loosen(w.dtype(), 1e-4, 1e-5);
                                    close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                                })
                        });
                    if r.is_ok() {
                        for n in &gn.nodes {
                            covered_narrow.insert(format!("{}<{narrow}>", n.op.name()));
                        }
                    }
                    result(
                        if narrow == "f16" {
                            "f16 random vs cpu"
                        } else {
                            "bf16 random vs cpu"
                        },
                        r,
                    );
                }
                if ok && ok2 {
                    for n in &g.nodes {
                        covered.insert(n.op.name().to_string());
                    }
                }
            }
        }
    }
    // Shapes the vectors do not reach: many heads (the cuBLAS attention
    // path), GEMM epilogues with a residual (cuBLASLt), long norm rows.
    // The tensor-core cases again under forced block widths of
    // `CudaOptions::attn_split` (the backend `compile_cuda` finds), besides
    // the automatic pick.
    let splits = |name: &str| -> &'static [&'static str] {
        if name.starts_with("attention_tc") {
            &["", "w1", "w2", "w8"]
        } else {
            &[""]
        }
    };
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    for ((name, src), split) in EXTRA
        .iter()
        .flat_map(|e| splits(e.0).iter().map(move |s| (e, *s)))
    {
        // The split asked for (empty: the environment's), on the backend
        // `compile_cuda` finds.
        let opts = CudaOptions {
            attn_split: match split.strip_prefix('w') {
                Some(w) => rlx_cuda::plan::AttnSplit::Warps(w.parse().expect("a width")),
                None => env_opts().attn_split,
            },
            ..env_opts()
        };
        rlx_runtime::register_backend(Arc::new(base.options(opts)));
        let name = if split.is_empty() {
            name.to_string()
        } else {
            format!("{name}[split={split}]")
        };
        for dt in ["f32", "f16", "bf16"] {
            if !split.is_empty() && dt == "f32" {
                continue;
            }
            let Ok(g) = text::parse(&src.replace("f32", dt)) else {
                continue;
            };
            let c = match compile_cuda(&g, true) {
                Ok(c) => c,
                Err(e) => {
                    fail += 1;
                    println!("FAIL extra/{name}<{dt}>: does not compile natively: {e}");
                    continue;
                }
            };
            let ins = extra_inputs(&g, &mut rng);
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let r = c
                .run_refs(&ins.iter().collect::<Vec<_>>())
                .map_err(|e| e.to_string())
                .and_then(|outs| {
                    outs.iter()
                        .zip(&want)
                        .enumerate()
                        .try_for_each(|(k, (o, w))| {
                            let (rt, at) = loosen(w.dtype(), 1e-4, 1e-5);
                            close(o, w, rt, at).map_err(|e| format!("output {k}: {e}"))
                        })
                });
            match r {
                Ok(()) => {
                    pass += 1;
                    println!("ok   extra/{name}<{dt}>");
                }
                Err(e) => {
                    fail += 1;
                    println!("FAIL extra/{name}<{dt}>: {e}");
                }
            }
        }
    }
    rlx_runtime::register_backend(Arc::new(base));
    // An index out of range inside the fused embedding block is the same
    // typed error the gather kernel reports, naming the embedding node.
    {
        let g = text::parse(EMBEDDINGS_LN).unwrap();
        let mut ins = extra_inputs(&g, &mut rng);
        let mut ids = vec![1f64; 32];
        ids[17] = 10.0;
        ins[0] = HostTensor::from_f64(DType::I64, ins[0].shape().clone(), ids).unwrap();
        let r = compile_cuda(&g, true)
            .map_err(|e| e.to_string())
            .and_then(|c| match c.run_refs(&ins.iter().collect::<Vec<_>>()) {
                Err(e) if e.to_string().contains("embedding") => Ok(()),
                Err(e) => Err(format!("error does not name the embedding: {e}")),
                Ok(_) => Err("no error for index 10 of 10 rows".into()),
            });
        match r {
            Ok(()) => {
                pass += 1;
                println!("ok   extra/embeddings_index_out_of_range");
            }
            Err(e) => {
                fail += 1;
                println!("FAIL extra/embeddings_index_out_of_range: {e}");
            }
        }
    }
    let untested: Vec<&String> = claims
        .ops
        .keys()
        .filter(|o| !covered.contains(*o) && o.as_str() != "transfer")
        .collect();
    println!(
        "ops claimed: {}; ops with passing parity cases: {}",
        claims.ops.len(),
        covered.len()
    );
    println!("claimed ops without a passing case: {untested:?}");
    println!(
        "op<dtype> pairs passing in f16/bf16: {}",
        covered_narrow.len()
    );
    println!("{pass} passed, {fail} failed");
    fail
}
