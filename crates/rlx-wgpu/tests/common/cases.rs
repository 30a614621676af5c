//! The parity cases, as data: one list per group, each case a graph, its
//! seeded random inputs and a tolerance. The native test (`parity.rs`,
//! Vulkan / lavapipe, blocking) and the browser test (`browser.rs`, WebGPU
//! in headless Chromium, async) both run exactly these lists, so the two
//! suites cannot drift apart. Shapes are small: lavapipe and SwiftShader
//! both run on the CPU.

use super::{one_op, rand, Rng};
use rlx::{Attrs, DType, Graph, HostTensor, Trace};

const F: DType = DType::F32;

/// One graph checked against the CPU reference.
pub struct Case {
    pub name: String,
    pub graph: Graph,
    pub inputs: Vec<HostTensor>,
    /// Floats agree within `atol + rtol·|reference|`; other dtypes exactly.
    pub atol: f64,
    pub rtol: f64,
}

impl Case {
    fn new(
        name: impl Into<String>,
        graph: Graph,
        inputs: Vec<HostTensor>,
        tol: (f64, f64),
    ) -> Case {
        Case {
            name: name.into(),
            graph,
            inputs,
            atol: tol.0,
            rtol: tol.1,
        }
    }
}

/// Exact (integers, bools, data movement).
const EXACT: (f64, f64) = (0.0, 0.0);
/// One elementwise float op.
const ELEMENTWISE: (f64, f64) = (2e-6, 2e-5);
/// Reductions, norms, matmul, attention (accumulation order differs).
const ACCUMULATED: (f64, f64) = (1e-5, 1e-4);

/// A group's case list, built on demand (inputs are seeded, so every
/// build gives the same cases).
pub type Group = fn() -> Vec<Case>;

/// Every group by name, in the order the suites run them.
pub fn groups() -> Vec<(&'static str, Group)> {
    vec![
        ("unary_f32", unary_f32),
        ("unary_int_and_bool", unary_int_and_bool),
        ("binary_with_broadcasting", binary_with_broadcasting),
        ("where_clamp_cast", where_clamp_cast),
        ("reductions", reductions),
        ("softmax_and_norms", softmax_and_norms),
        ("matmul_shapes_and_epilogues", matmul_shapes_and_epilogues),
        ("attention_masks", attention_masks),
        ("gather_embedding", gather_embedding),
        ("dequant_matmul", dequant_matmul),
        ("conv_and_pool", conv_and_pool),
        ("shape_ops_and_views", shape_ops_and_views),
        ("fused_regions", fused_regions),
        ("decomposed", decomposed),
        ("mixed_graph", mixed_graph),
        ("kernel_fusions", kernel_fusions),
        ("f16_twins", f16_twins),
    ]
}

/// f16 against the reference, which rounds every op's output to f16 while
/// the GPU rounds once per kernel (at its store): one f16 step (2^-10
/// relative) for an op, a few along a fused chain.
const F16_ONE: (f64, f64) = (1e-3, 2e-3);
const F16_CHAIN: (f64, f64) = (4e-3, 8e-3);

/// `x·w + b + r` (the residual add folds into the matmul's epilogue) and
/// attention whose heads are merged by permute + reshape (the attention
/// kernel stores through the merged layout's strides): graphs the lowering
/// fuses (the native suite checks the kernel names).
pub fn residual_matmul() -> Graph {
    let t = Trace::new("residual_matmul");
    let x = t.input("x", F, vec![2, 9, 24]);
    let w = t.input("w", F, vec![24, 20]);
    let b = t.input("b", F, vec![20]);
    let r = t.input("r", F, vec![2, 9, 20]);
    let y = x
        .matmul(&w)
        .unwrap()
        .apply1("add", &[&b], Attrs::new())
        .unwrap()
        .apply1("add", &[&r], Attrs::new())
        .unwrap();
    t.finish(&[&y]).unwrap()
}

pub fn merged_heads() -> Graph {
    let t = Trace::new("merged_heads");
    let (b, h, s, d) = (2, 3, 10, 8);
    let q = t.input("q", F, vec![b, h, s, d]);
    let k = t.input("k", F, vec![b, h, s, d]);
    let v = t.input("v", F, vec![b, h, s, d]);
    let y = q
        .apply1(
            "attention",
            &[&k, &v],
            Attrs::new().with("mask_kind", "none"),
        )
        .unwrap()
        .permute(&[0, 2, 1, 3])
        .unwrap()
        .reshape(&[b as i64, s as i64, (h * d) as i64])
        .unwrap();
    t.finish(&[&y]).unwrap()
}

pub fn kernel_fusions() -> Vec<Case> {
    let mut rng = Rng::new(12);
    let ins = [vec![2, 9, 24], vec![24, 20], vec![20], vec![2, 9, 20]]
        .iter()
        .map(|sh| rand(&mut rng, F, sh, -1.0, 1.0))
        .collect();
    let mut v = vec![Case::new(
        "matmul + bias + residual add",
        residual_matmul(),
        ins,
        ACCUMULATED,
    )];
    let ins = (0..3)
        .map(|_| rand(&mut rng, F, &[2, 3, 10, 8], -1.0, 1.0))
        .collect();
    v.push(Case::new(
        "attention + merged heads",
        merged_heads(),
        ins,
        ACCUMULATED,
    ));
    v
}

/// The f16 twin of every f32 case of the float groups: the graph's f32
/// types (cast targets too) become f16 through the text form, f32 inputs
/// are rounded to f16. Exact cases stay exact (movement, selection, casts).
pub fn f16_twins() -> Vec<Case> {
    let groups: [Group; 12] = [
        unary_f32,
        binary_with_broadcasting,
        where_clamp_cast,
        reductions,
        softmax_and_norms,
        matmul_shapes_and_epilogues,
        attention_masks,
        gather_embedding,
        shape_ops_and_views,
        fused_regions,
        kernel_fusions,
        conv_and_pool,
    ];
    let text = rlx::ir::text::print;
    groups
        .iter()
        .flat_map(|g| g())
        .filter(|c| text(&c.graph).contains("f32"))
        .map(|c| {
            let src = text(&c.graph).replace("f32", "f16");
            let graph = rlx::ir::text::parse(&src)
                .unwrap_or_else(|e| panic!("{}: f16 twin does not parse: {e}", c.name));
            let inputs = c
                .inputs
                .iter()
                .map(|t| match t.dtype() {
                    DType::F32 => {
                        HostTensor::from_f64(DType::F16, t.shape().clone(), t.to_f64_vec().unwrap())
                            .unwrap()
                    }
                    _ => t.clone(),
                })
                .collect();
            let tol = if (c.atol, c.rtol) == EXACT {
                EXACT
            } else if graph.nodes.len() > 1 {
                F16_CHAIN
            } else {
                F16_ONE
            };
            Case::new(format!("{} f16", c.name), graph, inputs, tol)
        })
        .collect()
}

/// Input range per unary op (the op's domain, away from poles).
fn domain(op: &str) -> (f64, f64) {
    match op {
        "log" | "log2" | "sqrt" | "rsqrt" | "reciprocal" => (0.05, 4.0),
        "asin" | "acos" | "atanh" => (-0.95, 0.95),
        "acosh" => (1.05, 4.0),
        "log1p" => (-0.9, 3.0),
        "tan" => (-1.2, 1.2),
        "round" | "floor" | "ceil" | "trunc" => (-4.0, 4.0),
        _ => (-3.0, 3.0),
    }
}

/// Values rounded to integers (as f32): ties and equal pairs.
fn rounded(rng: &mut Rng, shape: &[usize], lo: f64, hi: f64) -> HostTensor {
    let v = rand(rng, F, shape, lo, hi).to_f64_vec().unwrap();
    HostTensor::from_f64(F, shape.to_vec(), v.iter().map(|x| x.round()).collect()).unwrap()
}

pub fn unary_f32() -> Vec<Case> {
    let ops = [
        "abs",
        "neg",
        "sign",
        "square",
        "relu",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log1p",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "sigmoid",
        "softplus",
        "floor",
        "ceil",
        "round",
        "trunc",
        "isnan",
        "isinf",
        "isfinite",
        "gelu",
        "gelu_tanh",
        "silu",
    ];
    let mut rng = Rng::new(1);
    let mut v: Vec<Case> = ops
        .iter()
        .map(|&op| {
            let (lo, hi) = domain(op);
            let g = one_op(op, &[(F, vec![3, 37])], Attrs::new());
            let x = rand(&mut rng, F, &[3, 37], lo, hi);
            Case::new(op, g, vec![x], ELEMENTWISE)
        })
        .collect();
    // Rotary-embedding-sized angles: far outside [-pi, pi], where WGSL's
    // builtins promise nothing (positions x frequencies reach 1e4).
    for op in ["sin", "cos"] {
        let g = one_op(op, &[(F, vec![64])], Attrs::new());
        let x = rand(&mut rng, F, &[64], -1e4, 1e4);
        v.push(Case::new(
            format!("{op} of large angles"),
            g,
            vec![x],
            ELEMENTWISE,
        ));
    }
    v
}

pub fn unary_int_and_bool() -> Vec<Case> {
    let mut rng = Rng::new(2);
    let mut v = Vec::new();
    for op in ["abs", "neg", "sign", "square", "relu", "bitwise_not"] {
        let g = one_op(op, &[(DType::I32, vec![50])], Attrs::new());
        let x = rand(&mut rng, DType::I32, &[50], -100.0, 100.0);
        v.push(Case::new(format!("{op} i32"), g, vec![x], EXACT));
    }
    for op in ["not", "bitwise_not"] {
        let g = one_op(op, &[(DType::Bool, vec![17])], Attrs::new());
        let x = rand(&mut rng, DType::Bool, &[17], 0.0, 1.0);
        v.push(Case::new(format!("{op} bool"), g, vec![x], EXACT));
    }
    v
}

pub fn binary_with_broadcasting() -> Vec<Case> {
    let mut rng = Rng::new(3);
    let mut v = Vec::new();
    let shapes = [(vec![2, 3, 5], vec![3, 1]), (vec![4], vec![2, 4])];
    for op in [
        "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "eq", "ne", "lt", "le",
        "gt", "ge",
    ] {
        for (sa, sb) in &shapes {
            let g = one_op(op, &[(F, sa.clone()), (F, sb.clone())], Attrs::new());
            let (a, b) = if matches!(op, "eq" | "ne" | "le" | "ge") {
                // Some equal pairs, so equality is exercised.
                (
                    rounded(&mut rng, sa, -2.0, 2.0),
                    rounded(&mut rng, sb, -2.0, 2.0),
                )
            } else if op == "pow" {
                (
                    rand(&mut rng, F, sa, 0.1, 2.0),
                    rand(&mut rng, F, sb, -2.0, 2.0),
                )
            } else {
                (
                    rand(&mut rng, F, sa, -3.0, 3.0),
                    rand(&mut rng, F, sb, -3.0, 3.0),
                )
            };
            v.push(Case::new(
                format!("{op} {sa:?} {sb:?}"),
                g,
                vec![a, b],
                ELEMENTWISE,
            ));
        }
    }
    let g = one_op(
        "swiglu",
        &[(F, vec![3, 11]), (F, vec![3, 11])],
        Attrs::new(),
    );
    let ins = vec![
        rand(&mut rng, F, &[3, 11], -3.0, 3.0),
        rand(&mut rng, F, &[3, 11], -3.0, 3.0),
    ];
    v.push(Case::new("swiglu", g, ins, ELEMENTWISE));
    // pow of a negative base with integral exponents (sign by parity).
    let g = one_op("pow", &[(F, vec![6]), (F, vec![6])], Attrs::new());
    let a = HostTensor::from_slice(&[-2.0f32, -2.0, -1.5, 0.0, 0.0, -3.0], vec![6]).unwrap();
    let b = HostTensor::from_slice(&[3.0f32, 2.0, 0.5, -1.0, 2.0, 0.0], vec![6]).unwrap();
    v.push(Case::new("pow negative base", g, vec![a, b], (1e-6, 1e-6)));
    for op in [
        "add",
        "sub",
        "mul",
        "max",
        "min",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "shl",
        "shr",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    ] {
        let g = one_op(
            op,
            &[(DType::I32, vec![3, 8]), (DType::I32, vec![8])],
            Attrs::new(),
        );
        let (lo, hi) = if matches!(op, "shl" | "shr") {
            (-2.0, 35.0)
        } else {
            (-1e9, 1e9)
        };
        let a = rand(&mut rng, DType::I32, &[3, 8], -1e9, 1e9);
        let b = rand(&mut rng, DType::I32, &[8], lo, hi);
        v.push(Case::new(format!("{op} i32"), g, vec![a, b], EXACT));
    }
    for op in [
        "and",
        "or",
        "xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "eq",
        "ne",
    ] {
        let g = one_op(
            op,
            &[(DType::Bool, vec![2, 9]), (DType::Bool, vec![9])],
            Attrs::new(),
        );
        let a = rand(&mut rng, DType::Bool, &[2, 9], 0.0, 1.0);
        let b = rand(&mut rng, DType::Bool, &[9], 0.0, 1.0);
        v.push(Case::new(format!("{op} bool"), g, vec![a, b], EXACT));
    }
    // i64 equality is exact on both words: pairs that differ only in the
    // high word, only in the low word, and only in sign.
    let a = HostTensor::from_slice(&[0i64, 1, -1, 1 << 40, (1 << 40) + 1, 7], vec![6]).unwrap();
    let b = HostTensor::from_slice(&[0i64, 1, 1, 1 << 40, 1 << 40, 8], vec![6]).unwrap();
    for op in ["eq", "ne"] {
        let g = one_op(
            op,
            &[(DType::I64, vec![6]), (DType::I64, vec![6])],
            Attrs::new(),
        );
        v.push(Case::new(
            format!("{op} i64"),
            g,
            vec![a.clone(), b.clone()],
            EXACT,
        ));
    }
    v
}

pub fn where_clamp_cast() -> Vec<Case> {
    let mut rng = Rng::new(4);
    let mut v = Vec::new();
    let g = one_op(
        "where",
        &[(DType::Bool, vec![4, 1]), (F, vec![4, 6]), (F, vec![6])],
        Attrs::new(),
    );
    let ins = vec![
        rand(&mut rng, DType::Bool, &[4, 1], 0.0, 1.0),
        rand(&mut rng, F, &[4, 6], -1.0, 1.0),
        rand(&mut rng, F, &[6], -1.0, 1.0),
    ];
    v.push(Case::new("where", g, ins, EXACT));
    for (d, lo, hi) in [(F, -5.0, 5.0), (DType::I32, -50.0, 50.0)] {
        let g = one_op(
            "clamp",
            &[(d, vec![40])],
            Attrs::new().with("min", -1.5).with("max", 2.5),
        );
        let x = rand(&mut rng, d, &[40], lo, hi);
        v.push(Case::new(format!("clamp {d}"), g, vec![x], EXACT));
    }
    let casts = [
        (F, DType::I32, -1e3, 1e3),
        (F, DType::Bool, -1.0, 1.0),
        (DType::I32, F, -1e6, 1e6),
        (DType::Bool, F, 0.0, 1.0),
        (DType::I64, F, -1e6, 1e6),
        (DType::I64, DType::I32, -1e6, 1e6),
        (DType::I32, DType::Bool, -2.0, 2.0),
    ];
    for (from, to, lo, hi) in casts {
        let g = one_op("cast", &[(from, vec![33])], Attrs::new().with("dtype", to));
        let x = rand(&mut rng, from, &[33], lo, hi);
        v.push(Case::new(format!("cast {from}->{to}"), g, vec![x], EXACT));
    }
    v
}

pub fn reductions() -> Vec<Case> {
    let mut rng = Rng::new(5);
    let mut v = Vec::new();
    let ops = [
        "reduce_sum",
        "reduce_mean",
        "reduce_prod",
        "reduce_max",
        "reduce_min",
        "reduce_logsumexp",
        "reduce_variance",
    ];
    for op in ops {
        for (axes, keep) in [(vec![1i64], false), (vec![0, 2], true), (vec![], false)] {
            let mut a = Attrs::new()
                .with("axes", axes.clone())
                .with("keepdim", keep);
            if op == "reduce_variance" {
                a = a.with("correction", 1i64);
            }
            let g = one_op(op, &[(F, vec![3, 300, 4])], a);
            let (lo, hi) = if op == "reduce_prod" {
                (0.9, 1.1)
            } else {
                (-2.0, 2.0)
            };
            let x = rand(&mut rng, F, &[3, 300, 4], lo, hi);
            v.push(Case::new(format!("{op} {axes:?}"), g, vec![x], ACCUMULATED));
        }
    }
    for op in ["reduce_any", "reduce_all"] {
        let g = one_op(
            op,
            &[(DType::Bool, vec![5, 3])],
            Attrs::new().with("axes", vec![1i64]),
        );
        let x = rand(&mut rng, DType::Bool, &[5, 3], 0.0, 1.0);
        v.push(Case::new(op, g, vec![x], EXACT));
    }
    for op in ["argmax", "argmin"] {
        for ax in [0i64, -1] {
            let g = one_op(op, &[(F, vec![7, 301])], Attrs::new().with("axis", ax));
            // Rounded values: ties, where the first index must win.
            let x = rounded(&mut rng, &[7, 301], -3.0, 3.0);
            v.push(Case::new(format!("{op} axis {ax}"), g, vec![x], EXACT));
        }
    }
    v
}

pub fn softmax_and_norms() -> Vec<Case> {
    let mut rng = Rng::new(6);
    let mut v = Vec::new();
    for op in ["softmax", "log_softmax"] {
        for ax in [1i64, -1] {
            let g = one_op(op, &[(F, vec![3, 20, 7])], Attrs::new().with("axis", ax));
            let x = rand(&mut rng, F, &[3, 20, 7], -4.0, 4.0);
            v.push(Case::new(format!("{op} {ax}"), g, vec![x], (1e-6, 1e-5)));
        }
    }
    let g = one_op(
        "layer_norm",
        &[(F, vec![4, 3, 10]), (F, vec![3, 10]), (F, vec![3, 10])],
        Attrs::new().with("axis", 1i64).with("eps", 1e-5),
    );
    let ins = vec![
        rand(&mut rng, F, &[4, 3, 10], -2.0, 2.0),
        rand(&mut rng, F, &[3, 10], 0.5, 1.5),
        rand(&mut rng, F, &[3, 10], -1.0, 1.0),
    ];
    v.push(Case::new("layer_norm", g, ins, ACCUMULATED));
    let g = one_op(
        "rms_norm",
        &[(F, vec![6, 33]), (F, vec![33])],
        Attrs::new().with("eps", 1e-6),
    );
    let ins = vec![
        rand(&mut rng, F, &[6, 33], -2.0, 2.0),
        rand(&mut rng, F, &[33], 0.5, 1.5),
    ];
    v.push(Case::new("rms_norm", g, ins, ACCUMULATED));
    // Rows past the packed kernel's 1024 (one workgroup per row), and
    // MiniLM's width with a last workgroup of one live row.
    let g = one_op(
        "softmax",
        &[(F, vec![2, 1500])],
        Attrs::new().with("axis", -1i64),
    );
    let x = rand(&mut rng, F, &[2, 1500], -4.0, 4.0);
    v.push(Case::new(
        "softmax, 1500-long rows",
        g,
        vec![x],
        (1e-6, 1e-5),
    ));
    let g = one_op(
        "layer_norm",
        &[(F, vec![9, 384]), (F, vec![384]), (F, vec![384])],
        Attrs::new().with("axis", -1i64).with("eps", 1e-12),
    );
    let ins = vec![
        rand(&mut rng, F, &[9, 384], -2.0, 2.0),
        rand(&mut rng, F, &[384], 0.5, 1.5),
        rand(&mut rng, F, &[384], -1.0, 1.0),
    ];
    v.push(Case::new("layer_norm, 9 rows of 384", g, ins, ACCUMULATED));
    v
}

pub fn matmul_shapes_and_epilogues() -> Vec<Case> {
    let mut rng = Rng::new(7);
    let mut v = Vec::new();
    let shapes: [(Vec<usize>, Vec<usize>); 5] = [
        (vec![2, 5, 7], vec![7, 9]),
        (vec![5, 7], vec![2, 7, 3]),
        (vec![7], vec![7, 4]),
        (vec![3, 7], vec![7]),
        (vec![70, 130], vec![130, 67]),
    ];
    for (sa, sb) in shapes {
        let g = one_op("matmul", &[(F, sa.clone()), (F, sb.clone())], Attrs::new());
        let ins = vec![
            rand(&mut rng, F, &sa, -1.0, 1.0),
            rand(&mut rng, F, &sb, -1.0, 1.0),
        ];
        v.push(Case::new(
            format!("matmul {sa:?} {sb:?}"),
            g,
            ins,
            ACCUMULATED,
        ));
    }
    // Long K over few output tiles: split-K (partials + a reducer kernel
    // that runs the epilogue).
    for (sa, sb, act) in [
        (vec![2, 40, 600], vec![600, 50], "gelu"),
        (vec![33, 520], vec![520, 7], "none"),
        // 64² tiles (both sides ≥ 64), split too.
        (vec![70, 640], vec![640, 66], "relu"),
    ] {
        let g = one_op(
            "matmul_bias_act",
            &[(F, sa.clone()), (F, sb.clone()), (F, vec![sb[1]])],
            Attrs::new().with("activation", act),
        );
        let ins = vec![
            rand(&mut rng, F, &sa, -1.0, 1.0),
            rand(&mut rng, F, &sb, -1.0, 1.0),
            rand(&mut rng, F, &[sb[1]], -1.0, 1.0),
        ];
        v.push(Case::new(
            format!("matmul_bias_act {act} split-K {sa:?} {sb:?}"),
            g,
            ins,
            ACCUMULATED,
        ));
    }
    for act in [
        "none",
        "relu",
        "gelu",
        "gelu_tanh",
        "silu",
        "sigmoid",
        "tanh",
    ] {
        let g = one_op(
            "matmul_bias_act",
            &[(F, vec![2, 17, 40]), (F, vec![40, 33]), (F, vec![33])],
            Attrs::new().with("activation", act),
        );
        let ins = vec![
            rand(&mut rng, F, &[2, 17, 40], -1.0, 1.0),
            rand(&mut rng, F, &[40, 33], -1.0, 1.0),
            rand(&mut rng, F, &[33], -1.0, 1.0),
        ];
        v.push(Case::new(
            format!("matmul_bias_act {act}"),
            g,
            ins,
            ACCUMULATED,
        ));
    }
    v
}

pub fn attention_masks() -> Vec<Case> {
    let mut rng = Rng::new(8);
    let mut v = Vec::new();
    let (b, h, sq, sk, d) = (2, 3, 5, 7, 8);
    let qkv = |rng: &mut Rng| {
        vec![
            rand(rng, F, &[b, h, sq, d], -1.0, 1.0),
            rand(rng, F, &[b, h, sk, d], -1.0, 1.0),
            rand(rng, F, &[b, h, sk, d], -1.0, 1.0),
        ]
    };
    let shapes = vec![
        (F, vec![b, h, sq, d]),
        (F, vec![b, h, sk, d]),
        (F, vec![b, h, sk, d]),
    ];
    for kind in ["none", "causal"] {
        let g = one_op("attention", &shapes, Attrs::new().with("mask_kind", kind));
        v.push(Case::new(
            format!("attention {kind}"),
            g,
            qkv(&mut rng),
            ACCUMULATED,
        ));
    }
    let g = one_op(
        "attention",
        &shapes,
        Attrs::new()
            .with("mask_kind", "sliding_window")
            .with("window", 3i64),
    );
    v.push(Case::new(
        "attention sliding_window",
        g,
        qkv(&mut rng),
        ACCUMULATED,
    ));
    let mut s = shapes.clone();
    s.push((DType::Bool, vec![b, 1, 1, sk]));
    let g = one_op("attention", &s, Attrs::new().with("mask_kind", "custom"));
    let mut ins = qkv(&mut rng);
    // Keep key 0 so no row is fully masked.
    let keep: Vec<bool> = (0..b * sk)
        .map(|i| i % sk == 0 || rng.next_f64() < 0.6)
        .collect();
    ins.push(HostTensor::from_slice(&keep, vec![b, 1, 1, sk]).unwrap());
    v.push(Case::new("attention custom", g, ins, ACCUMULATED));
    let mut s = shapes.clone();
    s.push((F, vec![sq, sk]));
    let g = one_op(
        "attention",
        &s,
        Attrs::new().with("mask_kind", "bias").with("scale", 0.5),
    );
    let mut ins = qkv(&mut rng);
    ins.push(rand(&mut rng, F, &[sq, sk], -2.0, 0.0));
    v.push(Case::new("attention bias", g, ins, ACCUMULATED));
    // Head dims that are not multiples of 4 take the row kernel; a long
    // key axis spans several key blocks of the tiled one (and 70 query
    // rows, more than one tile).
    for (d, dv, sq, sk) in [(6, 5, 5, 7), (8, 12, 70, 300)] {
        let shapes = vec![
            (F, vec![b, sq, d]),
            (F, vec![b, sk, d]),
            (F, vec![b, sk, dv]),
        ];
        for kind in ["none", "causal"] {
            let g = one_op("attention", &shapes, Attrs::new().with("mask_kind", kind));
            let ins = vec![
                rand(&mut rng, F, &[b, sq, d], -1.0, 1.0),
                rand(&mut rng, F, &[b, sk, d], -1.0, 1.0),
                rand(&mut rng, F, &[b, sk, dv], -1.0, 1.0),
            ];
            v.push(Case::new(
                format!("attention {kind} d={d} dv={dv} sq={sq} sk={sk}"),
                g,
                ins,
                ACCUMULATED,
            ));
        }
    }
    // A decoder step over a cache (`attention_cached`): GQA as the LLM
    // writes it (q (1, kv, g, T, D), keys (1, kv, 1, S, D)), a cache of
    // 70 slots of which 50 are filled (the key blocks of the tiled kernel
    // straddle the cache's end), and 2 new keys seen causally.
    let (kv, g, t, cap, d) = (2, 3, 2, 70, 8);
    let keep: Vec<bool> = (0..t * (cap + t))
        .map(|i| {
            let (r, j) = (i / (cap + t), i % (cap + t));
            j < 50 || (j >= cap && j - cap <= r)
        })
        .collect();
    let shapes = vec![
        (F, vec![1, kv, g, t, d]),
        (F, vec![1, kv, 1, cap, d]),
        (F, vec![1, kv, 1, cap, d]),
        (F, vec![1, kv, 1, t, d]),
        (F, vec![1, kv, 1, t, d]),
        (DType::Bool, vec![t, cap + t]),
    ];
    let g_cached = one_op("attention_cached", &shapes, Attrs::new().with("scale", 0.3));
    let mut ins: Vec<HostTensor> = shapes[..5]
        .iter()
        .map(|(_, s)| rand(&mut rng, F, s, -1.0, 1.0))
        .collect();
    ins.push(HostTensor::from_slice(&keep, vec![t, cap + t]).unwrap());
    v.push(Case::new(
        "attention_cached gqa step",
        g_cached,
        ins,
        ACCUMULATED,
    ));
    v
}

mod conv;
mod graphs;
mod movement;
mod quant;
pub use conv::*;
pub use graphs::*;
pub use movement::*;
pub use quant::*;
