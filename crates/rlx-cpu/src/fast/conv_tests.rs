//! The fast conv paths other than Winograd against the reference kernel
//! (f64 sums): depthwise rows of whole and partial 64-column register
//! blocks, strides and dilations along either axis; im2col + GEMM over
//! several position blocks (stride 2 rows copied as pairs), grouped; a
//! 1×1 conv as one GEMM; and the separable stride-1 max pool.

use super::tests::random_inputs;
use super::*;

fn check(src: &str, what: &str) {
    let g = rlx_ir::text::parse(src).unwrap_or_else(|e| panic!("{what}: {e}"));
    let fp = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
    assert_eq!(fp.counts().1, 0, "{what}: every node on a fast kernel");
    let ins = random_inputs(&g, 11);
    let refs: Vec<&HostTensor> = ins.iter().collect();
    let want = crate::run_graph_refs(&g, &refs).unwrap()[0]
        .to_f64_vec()
        .unwrap();
    let got = fp.run(&refs).unwrap()[0].to_f64_vec().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
            "{what} [{i}]: {a} vs {b}"
        );
    }
}

#[test]
fn depthwise_convs_match_the_reference() {
    // (channels, h, w, k, strides, dilations, pads)
    let cases = [
        (3, 9, 150, 5, [1, 1], [1, 1], [2, 2, 2, 2]),
        (4, 12, 64, 3, [2, 1], [1, 1], [1, 1, 1, 1]),
        (2, 7, 70, 3, [1, 2], [1, 1], [1, 0, 1, 2]),
        (5, 8, 20, 3, [1, 1], [2, 2], [2, 2, 2, 2]),
        (3, 6, 9, 5, [1, 1], [1, 1], [0, 0, 0, 0]),
    ];
    for (c, h, w, k, s, d, p) in cases {
        let src = format!(
            "graph @g(%x: f32[2,{c},{h},{w}], %w: f32[{c},1,{k},{k}], %b: f32[{c}]) {{
  %y = conv_act(%x, %w, %b) {{groups={c}, strides={s:?}, dilations={d:?}, pads={p:?}, activation=\"relu\"}}
  return %y
}}"
        );
        check(
            &src,
            &format!("depthwise c{c} {h}x{w} k{k} s{s:?} d{d:?} p{p:?}"),
        );
    }
}

#[test]
fn gemm_convs_match_the_reference() {
    // (c, h, w, m, k, strides, pads, groups): enough positions for several
    // blocks, stride 2 (rows as pairs), odd widths, groups, 1×1.
    let cases = [
        (3, 61, 67, 8, 3, [2, 2], [1, 1, 1, 1], 1),
        (6, 40, 40, 4, 3, [2, 2], [0, 1, 1, 0], 2),
        (5, 30, 33, 7, 5, [1, 1], [2, 2, 2, 2], 1),
        (16, 24, 24, 12, 1, [1, 1], [0, 0, 0, 0], 1),
        (8, 17, 19, 6, 3, [1, 3], [1, 1, 1, 1], 1),
        // Big enough for threads: position blocks on both, a split GEMM.
        (16, 40, 40, 32, 5, [1, 1], [2, 2, 2, 2], 1),
        (64, 40, 40, 64, 1, [1, 1], [0, 0, 0, 0], 1),
    ];
    for (c, h, w, m, k, s, p, groups) in cases {
        let src = format!(
            "graph @g(%x: f32[1,{c},{h},{w}], %w: f32[{m},{},{k},{k}], %b: f32[{m}]) {{
  %y = conv(%x, %w, %b) {{groups={groups}, strides={s:?}, pads={p:?}}}
  return %y
}}",
            c / groups
        );
        check(
            &src,
            &format!("conv c{c} {h}x{w} m{m} k{k} s{s:?} p{p:?} g{groups}"),
        );
    }
}

#[test]
fn stride_one_max_pools_match_the_reference() {
    for (k, p) in [(5, [2, 2, 2, 2]), (3, [0, 1, 1, 0]), (2, [0, 0, 0, 0])] {
        let src = format!(
            "graph @g(%x: f32[1,3,11,13]) {{
  %y = max_pool(%x) {{kernel=[{k}, {k}], pads={p:?}}}
  return %y
}}"
        );
        check(&src, &format!("max_pool k{k} p{p:?}"));
    }
}
