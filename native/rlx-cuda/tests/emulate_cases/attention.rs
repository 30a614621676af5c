//! Embeddings and attention kernels in the CPU emulation (part of
//! `emulate.rs`, split out by what it holds): the fused embedding + layer
//! norm, masked, tiled and many-head attention, the tensor-core attention
//! at every block split.

use super::*;

pub(crate) const EMBEDDINGS_LN: &str = "graph @g(%ids: i64[2,16], %tt: i64[2,16], %w: f32[10,64], %p: f32[16,64], %ty: f32[3,64], %g: f32[64], %be: f32[64]) {\n  %pi = arange() {dtype=i64, len=16, start=0.0, step=1.0}\n  %a = embedding(%w, %ids)\n  %b = embedding(%p, %pi)\n  %c = embedding(%ty, %tt)\n  %s = fused_elementwise(%a, %c, %b) {body=graph @region(%in0: f32[2,16,64], %in1: f32[2,16,64], %in2: f32[16,64]) {\n    %3 = add(%in0, %in1) : f32[2,16,64]\n    %4 = add(%in2, %3) : f32[2,16,64]\n    return %4\n  }}\n  %n = layer_norm(%s, %g, %be) {axis=2, eps=1e-5}\n  return %n\n}";

#[test]
fn embeddings_summed_inside_the_layer_norm() {
    check("embeddings_ln", EMBEDDINGS_LN);
}

#[test]
fn attention_reads_the_ids_of_a_nonzero_mask() {
    check(
        "nonzero_mask",
        "graph @g(%q: f32[2,4,16,8], %k: f32[2,4,16,8], %v: f32[2,4,16,8], %ids: i64[2,16]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,16]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}",
    );
}

#[test]
fn tiled_attention_over_keys_past_one_warp() {
    // 100 and 40 keys: 4 and 2 keys per lane, the last ones partial (the
    // lanes past the end read the last key and drop it); a bias and a
    // causal mask; query rows past one block.
    check(
        "attention_keys_100_bias",
        "graph @g(%q: f32[3,37,32], %k: f32[3,100,32], %v: f32[3,100,48], %m: f32[3,37,100]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}",
    );
    check(
        "attention_keys_40_causal",
        "graph @g(%q: f32[2,2,40,16], %k: f32[2,2,40,16], %v: f32[2,2,40,8]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}",
    );
}

#[test]
fn four_rows_per_warp_f32_attention_over_many_heads() {
    // 48+ heads in f32 take `attention_rows` (f16/bf16 there run cuBLAS
    // batched GEMMs, which the emulation lacks): a keep mask and a bias
    // the same for every row (read once per key), over 48 and 20 keys
    // (lanes past the last key); a bias per row; float4 staging of K and
    // V (head dims 32, 12) and the scalar copy (V rows of 6).
    const F32: &[(&str, f64)] = &[("f32", 1e-5)];
    for (name, text) in [
        ("rows_keep_per_key", "graph @g(%q: f32[4,12,40,32], %k: f32[4,12,48,32], %v: f32[4,12,48,32], %m: bool[4,1,1,48]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  return %o\n}"),
        ("rows_bias_per_key", "graph @g(%q: f32[48,9,12], %k: f32[48,20,12], %v: f32[48,20,8], %m: f32[48,1,20]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
        ("rows_bias_per_row", "graph @g(%q: f32[48,9,12], %k: f32[48,20,12], %v: f32[48,20,8], %m: f32[48,9,20]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
        ("rows_scalar_staging_causal", "graph @g(%q: f32[48,10,8], %k: f32[48,12,8], %v: f32[48,12,6]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ] {
        let p = plan_of(text).expect("plannable");
        // attention_rows' marks: 4 rows of probabilities per warp, and
        // the float4 staging where the head dims allow it.
        assert!(p.source.contains("float sc[4]"), "{name}: not attention_rows");
        assert_eq!(
            p.source.contains("x[u] = *(const float4*)"),
            name != "rows_scalar_staging_causal",
            "{name}: staging"
        );
        check_in(name, text, F32);
    }
}

/// Tensor-core attention shapes (f16/bf16): a bias per row with partial
/// 16-row tiles and dh 64; a causal mask over 100 rows (7 row tiles);
/// a padding keep-mask and a bias broadcast over rows (staged in shared
/// memory); a mask read from ids; fewer rows than one warp's 16; heads
/// merged again by a permute + reshape, with q/k/v computed into the
/// arena (the planner may give the output q's, k's or v's buffer).
const TC_CASES: &[(&str, &str)] = &[
    ("tc_bias_rows", "graph @g(%q: f32[2,2,40,64], %k: f32[2,2,128,64], %v: f32[2,2,128,32], %m: f32[2,1,40,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("tc_causal_100", "graph @g(%q: f32[3,100,32], %k: f32[3,112,32], %v: f32[3,112,16]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ("tc_keep_merged", "graph @g(%q: f32[2,3,48,32], %k: f32[2,3,48,32], %v: f32[2,3,48,32], %m: bool[2,1,1,48]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,48,96]}\n  return %r\n}"),
    ("tc_bias_broadcast", "graph @g(%q: f32[2,2,24,32], %k: f32[2,2,32,32], %v: f32[2,2,32,16], %m: f32[2,1,1,32]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("tc_ids_mask", "graph @g(%q: f32[2,2,64,32], %k: f32[2,2,64,32], %v: f32[2,2,64,32], %ids: i64[2,64]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,64]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}"),
    ("tc_few_rows", "graph @g(%q: f32[3,5,16], %k: f32[3,16,16], %v: f32[3,16,8]) {\n  %o = attention(%q, %k, %v)\n  return %o\n}"),
    ("tc_in_place", "graph @g(%x: f32[2,64,64], %y: f32[2,64,64], %z: f32[2,64,64]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,64,2,32]}\n  %rb = reshape(%b) {shape=[2,64,2,32]}\n  %rc = reshape(%c) {shape=[2,64,2,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,64,64]}\n  return %r\n}"),
    // q's buffer still read after the attention: the output may take k's.
    ("tc_in_place_k", "graph @g(%x: f32[2,64,64], %y: f32[2,64,64], %z: f32[2,64,64]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,64,2,32]}\n  %rb = reshape(%b) {shape=[2,64,2,32]}\n  %rc = reshape(%c) {shape=[2,64,2,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,64,64]}\n  %s = add(%r, %a)\n  return %s\n}"),
];

/// The tensor-core attention under every block split (the automatic pick,
/// 1/2/4/8 warps per block), planned as users compile (rlx-opt's folds:
/// the cases with a head merge run as `attention_merged`), against the CPU
/// reference: f16 to 3e-3 and bf16 to 2.5e-2 max rel diff (P is rounded
/// to the storage type before P·V, as on the GPU). A wrong fragment index
/// or a block reading K/V another block already overwrote is off by O(1).
#[test]
fn tensor_core_attention_every_split() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let splits = [
        AttnSplit::Auto,
        AttnSplit::Warps(1),
        AttnSplit::Warps(2),
        AttnSplit::Warps(4),
        AttnSplit::Warps(8),
    ];
    // One executable per dtype holding every (case, split) plan: one g++
    // run each instead of one per case.
    for (dt, tol) in [("f16", 3e-3), ("bf16", 2.5e-2)] {
        let mut runs = Vec::new();
        for (name, text) in TC_CASES {
            let t = text.replace("f32", dt);
            let g = parse(&t).unwrap();
            let ins = inputs_for(&t);
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let eval = |g: &rlx_ir::Graph, i: &[rlx_ir::HostTensor]| {
                rlx_cpu::run_graph(g, i).map_err(|e| e.to_string())
            };
            let (fused, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
            let l = legalize(&fused, &ClaimsOnly, &DispatchOptions::default()).unwrap();
            let ir = rlx_opt::plan(l.graph).unwrap();
            for &s in &splits {
                let p = plan::plan_with(&ir, true, s).unwrap();
                assert!(
                    p.source
                        .replace(rlx_cuda::ctype::PREAMBLE, "")
                        .contains(&format!("mma_{dt}(")),
                    "{name}<{dt}> {s:?}: not the tensor-core kernel"
                );
                assert!(emulable(&p), "{name}<{dt}> {s:?}");
                runs.push((format!("{name}<{dt}> {s:?}"), p, ins.clone(), want.clone()));
            }
        }
        let plans: Vec<&plan::Plan> = runs.iter().map(|r| &r.1).collect();
        let exe = build(&format!("tensor_core_attention_{dt}"), &plans).unwrap();
        for (k, (label, p, ins, want)) in runs.iter().enumerate() {
            let (got, err) = exec(&exe, k, p, ins).unwrap();
            assert_eq!(err, 0, "{label}: error flag");
            for (o, w) in got.iter().zip(want) {
                let d = max_rel(o, w);
                eprintln!("{label}: max rel diff {d:e}");
                assert!(d <= tol, "{label}: max rel diff {d:e} > {tol:e}");
            }
        }
    }
}

/// A few query rows over many keys (a decoder's step): the keys split
/// over blocks, the chunks' partials merged. One row of 9 heads over 257
/// keys of which only the first 40 are kept (most chunks entirely
/// masked: they must add nothing); Gemma-3's heads of 256 over 513 keys;
/// three rows with a bias per row and a merged-heads output.
#[test]
fn split_keys_attention_for_decode_steps() {
    for (name, text) in [
        ("split_keep_first_40", "graph @g(%q: f32[1,9,1,64], %k: f32[1,9,257,64], %v: f32[1,9,257,64]) {\n  %pi = arange() {dtype=i64, len=257, start=0.0, step=1.0}\n  %c = constant() {value=tensor<i64[]> [40]}\n  %m = lt(%pi, %c)\n  %r = reshape(%m) {shape=[1,1,1,257]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}"),
        ("split_heads_of_256", "graph @g(%q: f32[4,1,256], %k: f32[4,513,256], %v: f32[4,513,256]) {\n  %o = attention(%q, %k, %v)\n  return %o\n}"),
        ("split_bias_rows_merged", "graph @g(%q: f32[2,3,3,32], %k: f32[2,3,100,32], %v: f32[2,3,100,16], %m: f32[2,1,3,100]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,3,48]}\n  return %r\n}"),
    ] {
        let p = plan_of(text).expect("plannable");
        assert!(
            p.source.contains("A chunk whose keys are all masked"),
            "{name}: not the split-keys kernel"
        );
        // Every dtype once (the loads and stores); the rest in f32 (CI time).
        if name == "split_keep_first_40" {
            check(name, text);
        } else {
            check_in(name, text, &[("f32", 1e-5)]);
        }
    }
}
