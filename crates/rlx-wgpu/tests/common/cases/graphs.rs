//! The parity cases over whole graphs rather than single ops: a fused
//! chain and fused regions, decompositions, a mixed graph, and the error
//! cases. Part of `cases` (same helpers), split out by what it holds.

use super::*;

/// The chain `exp(tanh(a·b) + a)`: one `fused_elementwise` kernel (the
/// native suite also checks that it is one node).
pub fn fused_chain() -> Graph {
    let t = Trace::new("region");
    let a = t.input("a", F, vec![4, 9]);
    let b = t.input("b", F, vec![9]);
    let y = a
        .apply1("mul", &[&b], Attrs::new())
        .unwrap()
        .apply1("tanh", &[], Attrs::new())
        .unwrap()
        .apply1("add", &[&a], Attrs::new())
        .unwrap()
        .apply1("exp", &[], Attrs::new())
        .unwrap();
    t.finish(&[&y]).unwrap()
}

pub fn fused_regions() -> Vec<Case> {
    let mut rng = Rng::new(11);
    let ins = vec![
        rand(&mut rng, F, &[4, 9], -1.0, 1.0),
        rand(&mut rng, F, &[9], -1.0, 1.0),
    ];
    let mut v = vec![Case::new("fused region", fused_chain(), ins, (1e-6, 1e-5))];
    let i = DType::I32;
    // i32: max((a + b) * a, b) wraps like the reference on overflow.
    let t = Trace::new("region i32");
    let a = t.input("a", i, vec![3, 8]);
    let b = t.input("b", i, vec![8]);
    let y = a
        .apply1("add", &[&b], Attrs::new())
        .unwrap()
        .apply1("mul", &[&a], Attrs::new())
        .unwrap()
        .apply1("max", &[&b], Attrs::new())
        .unwrap();
    let g = t.finish(&[&y]).unwrap();
    let ins = vec![
        rand(&mut rng, i, &[3, 8], -3e4, 3e4),
        rand(&mut rng, i, &[8], -3e4, 3e4),
    ];
    v.push(Case::new("fused region i32", g, ins, EXACT));
    // bool: not(a xor b) or c.
    let t = Trace::new("region bool");
    let a = t.input("a", DType::Bool, vec![2, 9]);
    let b = t.input("b", DType::Bool, vec![9]);
    let c = t.input("c", DType::Bool, vec![2, 9]);
    let y = a
        .apply1("xor", &[&b], Attrs::new())
        .unwrap()
        .apply1("not", &[], Attrs::new())
        .unwrap()
        .apply1("or", &[&c], Attrs::new())
        .unwrap();
    let g = t.finish(&[&y]).unwrap();
    let ins = vec![
        rand(&mut rng, DType::Bool, &[2, 9], 0.0, 1.0),
        rand(&mut rng, DType::Bool, &[9], 0.0, 1.0),
        rand(&mut rng, DType::Bool, &[2, 9], 0.0, 1.0),
    ];
    v.push(Case::new("fused region bool", g, ins, EXACT));
    // i64 in a region: equality on both words, then bool logic.
    let t = Trace::new("region i64");
    let a = t.input("a", DType::I64, vec![6]);
    let b = t.input("b", DType::I64, vec![6]);
    let c = t.input("c", DType::Bool, vec![6]);
    let y = a
        .apply1("ne", &[&b], Attrs::new())
        .unwrap()
        .apply1("not", &[], Attrs::new())
        .unwrap()
        .apply1("and", &[&c], Attrs::new())
        .unwrap();
    let g = t.finish(&[&y]).unwrap();
    let ins = vec![
        HostTensor::from_slice(&[0i64, 1, -1, 1 << 40, (1 << 40) + 1, 7], vec![6]).unwrap(),
        HostTensor::from_slice(&[0i64, 1, 1, 1 << 40, 1 << 40, 7], vec![6]).unwrap(),
        HostTensor::from_slice(&[true, true, true, true, true, false], vec![6]).unwrap(),
    ];
    v.push(Case::new("fused region i64", g, ins, EXACT));
    v
}

/// group_norm has no WGSL kernel: it runs through its decomposition (the
/// native suite also checks the dispatch report says so).
pub fn group_norm() -> Graph {
    one_op(
        "group_norm",
        &[(F, vec![2, 4, 3]), (F, vec![4]), (F, vec![4])],
        Attrs::new().with("groups", 2i64),
    )
}

pub fn decomposed() -> Vec<Case> {
    let mut rng = Rng::new(12);
    let ins = vec![
        rand(&mut rng, F, &[2, 4, 3], -1.0, 1.0),
        rand(&mut rng, F, &[4], 0.5, 1.5),
        rand(&mut rng, F, &[4], -1.0, 1.0),
    ];
    vec![Case::new(
        "group_norm via common IR",
        group_norm(),
        ins,
        ACCUMULATED,
    )]
}

/// An MLP-with-attention-shaped mix: matmul epilogue, softmax, layer norm,
/// a fused elementwise region, a reduction, attention — kernels feeding
/// each other through the arena.
pub fn mixed_graph() -> Vec<Case> {
    let mut rng = Rng::new(7);
    let t = Trace::new("mixed");
    let x = t.input("x", F, vec![2, 8, 16]);
    let w = t.input("w", F, vec![16, 16]);
    let b = t.input("b", F, vec![16]);
    let h = x
        .apply1(
            "matmul_bias_act",
            &[&w, &b],
            Attrs::new().with("activation", "gelu"),
        )
        .unwrap();
    let s = h.softmax(-1).unwrap();
    let n = s.layer_norm(&b, &b, 1e-5).unwrap();
    let e = n
        .apply1("mul", &[&x], Attrs::new())
        .unwrap()
        .apply1("tanh", &[], Attrs::new())
        .unwrap();
    let r = e.sum(&[1], false).unwrap();
    let a = x
        .apply1(
            "attention",
            &[&h, &e],
            Attrs::new().with("mask_kind", "causal"),
        )
        .unwrap();
    let g = t.finish(&[&r, &a]).unwrap();
    let ins = vec![
        rand(&mut rng, F, &[2, 8, 16], -1.0, 1.0),
        rand(&mut rng, F, &[16, 16], -0.5, 0.5),
        rand(&mut rng, F, &[16], 0.5, 1.5),
    ];
    vec![Case::new("mixed graph", g, ins, ACCUMULATED)]
}

/// Where a typed error must surface.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stage {
    /// Compiling for the GPU device fails (the dispatch contract).
    Compile,
    /// Compiling succeeds; the run returns the error.
    Run,
}

/// Bad input or an unsupported op: a typed error whose message names the
/// problem, never a panic or a wrong number.
pub struct ErrorCase {
    pub name: &'static str,
    pub graph: Graph,
    pub inputs: Vec<HostTensor>,
    pub stage: Stage,
    /// Substrings the error message must contain.
    pub expect: Vec<&'static str>,
}

pub fn error_cases() -> Vec<ErrorCase> {
    let embedding = one_op(
        "embedding",
        &[(F, vec![5, 2]), (DType::I64, vec![3])],
        Attrs::new(),
    );
    let gather = one_op(
        "gather",
        &[(F, vec![2, 3]), (DType::I32, vec![2])],
        Attrs::new().with("axis", 1i64),
    );
    vec![
        ErrorCase {
            name: "embedding index past the table",
            graph: embedding.clone(),
            inputs: vec![
                HostTensor::from_slice(&[0f32; 10], vec![5, 2]).unwrap(),
                HostTensor::from_slice(&[1i64, 5, 0], vec![3]).unwrap(),
            ],
            stage: Stage::Run,
            expect: vec!["out of range"],
        },
        ErrorCase {
            name: "gather index below -len",
            graph: gather,
            inputs: vec![
                HostTensor::from_slice(&[0f32; 6], vec![2, 3]).unwrap(),
                HostTensor::from_slice(&[-4i32, 1], vec![2]).unwrap(),
            ],
            stage: Stage::Run,
            expect: vec!["out of range"],
        },
        ErrorCase {
            // cumsum has neither a WGSL kernel nor a decomposition.
            name: "unclaimed op without a decomposition",
            graph: one_op("cumsum", &[(F, vec![5])], Attrs::new().with("axis", 0i64)),
            inputs: vec![HostTensor::from_slice(&[1f32; 5], vec![5]).unwrap()],
            stage: Stage::Compile,
            expect: vec!["cumsum", "no kernel"],
        },
    ]
}
