//! Every fusion pattern: a positive case (the primitives fuse into the op,
//! with the right attributes, and compute what they computed) and a near
//! miss that must not fuse. Every fused graph is also unfused again and
//! compared with the original.

mod common;

use common::{close_results, cpu, inputs_for};
use rlx_ir::decompose::expand_all;
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType, ValueId};
use rlx_opt::{Fuse, FuseReport, Pass, Unfuse};

/// A small builder of f32 graphs from primitives.
struct G(GraphBuilder);

impl G {
    fn new() -> Self {
        G(GraphBuilder::new("g"))
    }
    fn input(&mut self, name: &str, dims: &[usize]) -> ValueId {
        self.0
            .input(name, TensorType::new(DType::F32, dims.to_vec()))
    }
    fn c(&mut self, v: f64) -> ValueId {
        self.0.scalar(v, DType::F32).unwrap()
    }
    fn u(&mut self, op: &str, x: ValueId) -> ValueId {
        self.0.unary(op, x).unwrap()
    }
    fn b(&mut self, op: &str, a: ValueId, b: ValueId) -> ValueId {
        self.0.binary(op, a, b).unwrap()
    }
    /// `a op const`.
    fn bc(&mut self, op: &str, a: ValueId, v: f64) -> ValueId {
        let c = self.c(v);
        self.b(op, a, c)
    }
    fn red(&mut self, op: &str, x: ValueId, axes: &[i64]) -> ValueId {
        self.0.reduce_keep(op, x, axes).unwrap()
    }
    fn op(&mut self, op: &str, ins: &[ValueId], attrs: Attrs) -> ValueId {
        self.0.op1(op, ins, attrs).unwrap()
    }
    fn finish(self, outs: &[ValueId]) -> Graph {
        self.0.finish(outs).unwrap()
    }
}

/// Fuse `g` (all patterns, regions when asked); check the result against
/// `g` numerically, and `Unfuse` of it too.
fn fuse_checked(g: &Graph, regions: bool) -> (Graph, FuseReport) {
    let fuse = if regions {
        Fuse::new()
    } else {
        Fuse::new().without_regions()
    };
    let (h, rep) = fuse.apply(g).unwrap();
    h.verify().unwrap();
    let text = rlx_ir::text::print(&h);
    assert_eq!(rlx_ir::text::parse(&text).unwrap(), h, "text round trip");
    let inputs = inputs_for(g, 11);
    let want = cpu(g, &inputs).unwrap();
    let got = cpu(&h, &inputs).unwrap();
    close_results(&want, &got, 1e-4, 1e-5).unwrap_or_else(|e| {
        panic!(
            "fused graph differs: {e}\n{}\n{text}",
            rlx_ir::text::print(g)
        )
    });
    let u = Unfuse::new().run(&h).unwrap();
    assert!(u.nodes.iter().all(|n| !n.op.is_fused()));
    close_results(&want, &cpu(&u, &inputs).unwrap(), 1e-4, 1e-5)
        .unwrap_or_else(|e| panic!("unfused graph differs: {e}"));
    (h, rep)
}

/// The ops of `g` that are not constants, in order.
fn ops(g: &Graph) -> Vec<&'static str> {
    g.nodes
        .iter()
        .map(|n| n.op.name())
        .filter(|&o| o != "constant")
        .collect()
}

fn fused_ops(g: &Graph) -> Vec<&'static str> {
    ops(&fuse_checked(g, false).0)
}

fn node<'g>(g: &'g Graph, op: &str) -> &'g rlx_ir::Node {
    g.nodes
        .iter()
        .find(|n| n.op.name() == op)
        .unwrap_or_else(|| panic!("no `{op}` in {:?}", ops(g)))
}

// ---------------------------------------------------------------- softmax

fn softmax_prims(g: &mut G, x: ValueId, max_axis: i64, sum_axis: i64, sg: bool) -> ValueId {
    let mut m = g.red("reduce_max", x, &[max_axis]);
    if sg {
        m = g.u("stop_gradient", m);
    }
    let d = g.b("sub", x, m);
    let e = g.u("exp", d);
    let s = g.red("reduce_sum", e, &[sum_axis]);
    g.b("div", e, s)
}

#[test]
fn softmax_over_any_axis_with_or_without_stop_gradient() {
    for (axis, sg) in [(-1, true), (0, false), (1, true)] {
        let mut g = G::new();
        let x = g.input("x", &[2, 3, 4]);
        let y = softmax_prims(&mut g, x, axis, axis, sg);
        let h = fuse_checked(&g.finish(&[y]), false).0;
        assert_eq!(ops(&h), ["softmax"]);
        let want = (axis + 3) % 3;
        assert_eq!(node(&h, "softmax").attrs.int("axis").unwrap(), want);
    }
}

#[test]
fn softmax_near_misses_stay() {
    // The max over another axis than the sum.
    let mut g = G::new();
    let x = g.input("x", &[2, 3]);
    let y = softmax_prims(&mut g, x, 0, 1, true);
    assert!(!fused_ops(&g.finish(&[y])).contains(&"softmax"));
    // The exponentials are also a graph output: not closed.
    let mut g = G::new();
    let x = g.input("x", &[2, 3]);
    let m = g.red("reduce_max", x, &[1]);
    let d = g.b("sub", x, m);
    let e = g.u("exp", d);
    let s = g.red("reduce_sum", e, &[1]);
    let y = g.b("div", e, s);
    assert!(!fused_ops(&g.finish(&[y, e])).contains(&"softmax"));
    // Over two axes.
    let mut g = G::new();
    let x = g.input("x", &[2, 3]);
    let y = softmax_prims(&mut g, x, 0, 0, false);
    let m = g.red("reduce_max", x, &[0, 1]);
    let d = g.b("sub", x, m);
    let e = g.u("exp", d);
    let s = g.red("reduce_sum", e, &[0, 1]);
    let z = g.b("div", e, s);
    assert_eq!(
        fused_ops(&g.finish(&[y, z]))
            .iter()
            .filter(|o| **o == "softmax")
            .count(),
        1
    );
}

#[test]
fn log_softmax_fuses_and_near_miss_stays() {
    let build = |log_axis: i64| {
        let mut g = G::new();
        let x = g.input("x", &[3, 5]);
        let m = g.red("reduce_max", x, &[1]);
        let d = g.b("sub", x, m);
        let e = g.u("exp", d);
        let s = g.red("reduce_sum", e, &[log_axis]);
        let l = g.u("log", s);
        let y = g.b("sub", d, l);
        g.finish(&[y])
    };
    assert_eq!(fused_ops(&build(1)), ["log_softmax"]);
    assert!(!fused_ops(&build(0)).contains(&"log_softmax"));
}

// ---------------------------------------------------------- normalization

/// The importer form: (x − mean) / sqrt(mean((x − mean)^2) + eps) · g + b.
fn layer_norm_importer(
    g: &mut G,
    x: ValueId,
    axes: &[i64],
    gamma: ValueId,
    beta: ValueId,
) -> ValueId {
    let mean = g.red("reduce_mean", x, axes);
    let d = g.b("sub", x, mean);
    let sq = g.bc("pow", d, 2.0);
    let var = g.red("reduce_mean", sq, axes);
    let ve = g.bc("add", var, 1e-5);
    let sd = g.u("sqrt", ve);
    let n = g.b("div", d, sd);
    let y = g.b("mul", gamma, n);
    g.b("add", beta, y)
}

#[test]
fn layer_norm_from_its_decomposition_and_the_importer_form() {
    for axis in [-1i64, 1] {
        let mut g = G::new();
        let x = g.input("x", &[2, 3, 4]);
        let tail: &[usize] = if axis == 1 { &[3, 4] } else { &[4] };
        let gamma = g.input("gamma", tail);
        let beta = g.input("beta", tail);
        let y = g.op(
            "layer_norm",
            &[x, gamma, beta],
            Attrs::new().with("axis", axis),
        );
        let dec = expand_all(&g.finish(&[y])).unwrap();
        let h = fuse_checked(&dec, false).0;
        assert_eq!(ops(&h), ["layer_norm"]);
        let ln = node(&h, "layer_norm");
        assert_eq!(ln.attrs.int("axis").unwrap(), (axis + 3) % 3);
        assert_eq!(ln.attrs.float("eps").unwrap(), 1e-5);
        assert_eq!(ln.inputs, h.inputs);
    }
    let mut g = G::new();
    let x = g.input("x", &[4, 8]);
    let gamma = g.input("gamma", &[8]);
    let beta = g.input("beta", &[8]);
    let y = layer_norm_importer(&mut g, x, &[-1], gamma, beta);
    assert_eq!(fused_ops(&g.finish(&[y])), ["layer_norm"]);
}

#[test]
fn layer_norm_near_misses_stay() {
    // Normalized over a leading axis (not a trailing range).
    let mut g = G::new();
    let x = g.input("x", &[4, 8]);
    let gamma = g.input("gamma", &[4, 1]);
    let beta = g.input("beta", &[4, 1]);
    let y = layer_norm_importer(&mut g, x, &[0], gamma, beta);
    let got = fused_ops(&g.finish(&[y]));
    assert!(
        !got.contains(&"layer_norm") && !got.contains(&"rms_norm"),
        "{got:?}"
    );
    // The mean subtracted over another axis than the variance.
    let mut g = G::new();
    let x = g.input("x", &[4, 8]);
    let mean = g.red("reduce_mean", x, &[0]);
    let d = g.b("sub", x, mean);
    let sq = g.b("mul", d, d);
    let var = g.red("reduce_mean", sq, &[1]);
    let ve = g.bc("add", var, 1e-5);
    let r = g.u("rsqrt", ve);
    let y = g.b("mul", d, r);
    let got = fused_ops(&g.finish(&[y]));
    assert!(!got.contains(&"layer_norm"), "{got:?}");
    // A gamma that is not of the normalized shape stays a mul (and the
    // shift an add): the normalization alone fuses.
    let mut g = G::new();
    let x = g.input("x", &[4, 8]);
    let gamma = g.input("gamma", &[4, 8]);
    let beta = g.input("beta", &[8]);
    let y = layer_norm_importer(&mut g, x, &[1], gamma, beta);
    assert_eq!(fused_ops(&g.finish(&[y])), ["layer_norm", "mul", "add"]);
}

#[test]
fn rms_norm_fuses_and_near_miss_stays() {
    let mut g = G::new();
    let x = g.input("x", &[2, 6]);
    let gamma = g.input("gamma", &[6]);
    let y = g.op("rms_norm", &[x, gamma], Attrs::new().with("eps", 1e-6));
    let h = fuse_checked(&expand_all(&g.finish(&[y])).unwrap(), false).0;
    assert_eq!(ops(&h), ["rms_norm"]);
    assert_eq!(node(&h, "rms_norm").attrs.float("eps").unwrap(), 1e-6);
    // Importer form: x / sqrt(mean(square(x)) + eps) * gamma.
    let mut g = G::new();
    let x = g.input("x", &[2, 6]);
    let gamma = g.input("gamma", &[6]);
    let sq = g.u("square", x);
    let ms = g.red("reduce_mean", sq, &[1]);
    let ve = g.bc("add", ms, 1e-6);
    let s = g.u("sqrt", ve);
    let n = g.b("div", x, s);
    let y = g.b("mul", n, gamma);
    assert_eq!(fused_ops(&g.finish(&[y])), ["rms_norm"]);
    // Near miss: the mean of x·z, not x².
    let mut g = G::new();
    let x = g.input("x", &[2, 6]);
    let z = g.input("z", &[2, 6]);
    let sq = g.b("mul", x, z);
    let ms = g.red("reduce_mean", sq, &[1]);
    let ve = g.bc("add", ms, 1e-6);
    let r = g.u("rsqrt", ve);
    let y = g.b("mul", x, r);
    assert!(!fused_ops(&g.finish(&[y])).contains(&"rms_norm"));
}

// ------------------------------------------------------------ activations

fn gelu_importer(g: &mut G, x: ValueId, k: f64, half: f64) -> ValueId {
    let u = g.bc("div", x, k);
    let e = g.u("erf", u);
    let one = g.c(1.0);
    let t = g.b("add", one, e);
    let hx = g.bc("mul", x, half);
    g.b("mul", hx, t)
}

#[test]
fn gelu_forms_fuse_and_wrong_constants_do_not() {
    let mut g = G::new();
    let x = g.input("x", &[3, 4]);
    let y = g.op("gelu", &[x], Attrs::new());
    assert_eq!(fused_ops(&expand_all(&g.finish(&[y])).unwrap()), ["gelu"]);
    let mut g = G::new();
    let x = g.input("x", &[3, 4]);
    let y = gelu_importer(&mut g, x, std::f64::consts::SQRT_2, 0.5);
    assert_eq!(fused_ops(&g.finish(&[y])), ["gelu"]);
    // x · (0.5 · (1 + erf(x · 0.70710678))).
    let mut g = G::new();
    let x = g.input("x", &[3, 4]);
    let u = g.bc("mul", x, std::f64::consts::FRAC_1_SQRT_2);
    let e = g.u("erf", u);
    let t = g.bc("add", e, 1.0);
    let h = g.bc("mul", t, 0.5);
    let y = g.b("mul", x, h);
    assert_eq!(fused_ops(&g.finish(&[y])), ["gelu"]);
    for (k, half) in [(1.5, 0.5), (std::f64::consts::SQRT_2, 0.6)] {
        let mut g = G::new();
        let x = g.input("x", &[3, 4]);
        let y = gelu_importer(&mut g, x, k, half);
        assert!(!fused_ops(&g.finish(&[y])).contains(&"gelu"));
    }
}

#[test]
fn gelu_tanh_fuses_and_a_wrong_constant_does_not() {
    let mut g = G::new();
    let x = g.input("x", &[3, 4]);
    let y = g.op("gelu_tanh", &[x], Attrs::new());
    assert_eq!(
        fused_ops(&expand_all(&g.finish(&[y])).unwrap()),
        ["gelu_tanh"]
    );
    let build = |k: f64| {
        let mut g = G::new();
        let x = g.input("x", &[3, 4]);
        let x3 = g.bc("pow", x, 3.0);
        let kx3 = g.bc("mul", x3, k);
        let inner = g.b("add", x, kx3);
        let w = g.bc("mul", inner, (2.0 / std::f64::consts::PI).sqrt());
        let t = g.u("tanh", w);
        let t1 = g.bc("add", t, 1.0);
        let p = g.b("mul", x, t1);
        let y = g.bc("mul", p, 0.5);
        g.finish(&[y])
    };
    assert_eq!(fused_ops(&build(0.044715)), ["gelu_tanh"]);
    assert!(!fused_ops(&build(0.05)).contains(&"gelu_tanh"));
}

#[test]
fn silu_and_swiglu_fuse_near_misses_stay() {
    let mut g = G::new();
    let x = g.input("x", &[2, 5]);
    let s = g.u("sigmoid", x);
    let y = g.b("mul", s, x);
    assert_eq!(fused_ops(&g.finish(&[y])), ["silu"]);
    let mut g = G::new();
    let x = g.input("x", &[2, 5]);
    let up = g.input("up", &[2, 5]);
    let s = g.u("sigmoid", x);
    let y = g.b("mul", x, s);
    let z = g.b("mul", up, y);
    assert_eq!(fused_ops(&g.finish(&[z])), ["swiglu"]);
    // x · sigmoid(y): not silu. silu(x) · up with up broadcasting: not swiglu.
    let mut g = G::new();
    let x = g.input("x", &[2, 5]);
    let w = g.input("w", &[2, 5]);
    let up = g.input("up", &[5]);
    let s = g.u("sigmoid", w);
    let y = g.b("mul", x, s);
    let sx = g.u("sigmoid", x);
    let sl = g.b("mul", x, sx);
    let z = g.b("mul", sl, up);
    let got = fused_ops(&g.finish(&[y, z]));
    assert_eq!(got, ["sigmoid", "mul", "silu", "mul"]);
}

// ------------------------------------------------------- matmul epilogues

#[test]
fn matmul_bias_activation_fuses_for_every_activation() {
    for act in [
        "none",
        "relu",
        "gelu",
        "gelu_tanh",
        "silu",
        "sigmoid",
        "tanh",
    ] {
        let mut g = G::new();
        let a = g.input("a", &[2, 3, 4]);
        let w = g.input("w", &[4, 5]);
        let bias = g.input("bias", &[5]);
        let y = g.op(
            "matmul_bias_act",
            &[a, w, bias],
            Attrs::new().with("activation", act),
        );
        let h = fuse_checked(&expand_all(&g.finish(&[y])).unwrap(), false).0;
        assert_eq!(ops(&h), ["matmul_bias_act"], "{act}");
        assert_eq!(
            node(&h, "matmul_bias_act").attrs.str("activation").unwrap(),
            act
        );
    }
    // relu(a @ w) without a bias.
    let mut g = G::new();
    let a = g.input("a", &[2, 4]);
    let w = g.input("w", &[4, 5]);
    let m = g.b("matmul", a, w);
    let y = g.u("relu", m);
    assert_eq!(fused_ops(&g.finish(&[y])), ["matmul_bias_act"]);
}

#[test]
fn a_bias_that_varies_between_rows_stays_an_add() {
    for bias_dims in [&[2usize, 1][..], &[2, 5], &[3, 1, 5]] {
        let mut g = G::new();
        let a = g.input("a", &[3, 2, 4]);
        let w = g.input("w", &[4, 5]);
        let bias = g.input("bias", bias_dims);
        let m = g.b("matmul", a, w);
        let y = g.b("add", m, bias);
        assert_eq!(
            fused_ops(&g.finish(&[y])),
            ["matmul", "add"],
            "{bias_dims:?}"
        );
    }
    // (1, 5) and a scalar do broadcast over rows only.
    for bias_dims in [&[1usize, 5][..], &[]] {
        let mut g = G::new();
        let a = g.input("a", &[2, 4]);
        let w = g.input("w", &[4, 5]);
        let bias = g.input("bias", bias_dims);
        let m = g.b("matmul", a, w);
        let y = g.b("add", bias, m);
        assert_eq!(fused_ops(&g.finish(&[y])), ["matmul_bias_act"]);
    }
}

// -------------------------------------------------------------- attention

/// softmax(q @ kᵀ · scale + mask) @ v from primitives; `mask` picks the form.
fn attention_prims(
    g: &mut G,
    q: ValueId,
    k: ValueId,
    v: ValueId,
    scale: Option<f64>,
    mask: Mask,
) -> ValueId {
    let kt = g.op(
        "permute",
        &[k],
        Attrs::new().with("perm", vec![0i64, 1, 3, 2]),
    );
    let mut s = g.b("matmul", q, kt);
    if let Some(c) = scale {
        s = g.bc("div", s, 1.0 / c);
    }
    match mask {
        Mask::None => {}
        Mask::Bias(m) => s = g.b("add", m, s),
        Mask::Keep(keep, fill) => {
            let f = g.c(fill);
            s = g.op("where", &[keep, s, f], Attrs::new());
        }
    }
    let p = softmax_prims(g, s, -1, -1, true);
    g.b("matmul", p, v)
}

enum Mask {
    None,
    Bias(ValueId),
    Keep(ValueId, f64),
}

fn qkv(g: &mut G, sq: usize, sk: usize) -> [ValueId; 3] {
    [
        g.input("q", &[2, 2, sq, 4]),
        g.input("k", &[2, 2, sk, 4]),
        g.input("v", &[2, 2, sk, 3]),
    ]
}

#[test]
fn attention_with_each_mask_form() {
    // No mask, default scale (1/√4 = 0.5): the attribute stays unset.
    let mut g = G::new();
    let [q, k, v] = qkv(&mut g, 3, 3);
    let y = attention_prims(&mut g, q, k, v, Some(0.5), Mask::None);
    let h = fuse_checked(&g.finish(&[y]), false).0;
    assert_eq!(ops(&h), ["attention"]);
    let a = node(&h, "attention");
    assert_eq!(a.attrs.str("mask_kind").unwrap(), "none");
    assert!(a.attrs.get("scale").is_none());
    assert_eq!(a.inputs, h.inputs);
    // An additive mask and another scale.
    let mut g = G::new();
    let [q, k, v] = qkv(&mut g, 3, 5);
    let m = g.input("m", &[2, 1, 3, 5]);
    let y = attention_prims(&mut g, q, k, v, Some(0.3), Mask::Bias(m));
    let h = fuse_checked(&g.finish(&[y]), false).0;
    assert_eq!(ops(&h), ["attention"]);
    let a = node(&h, "attention");
    assert_eq!(a.attrs.str("mask_kind").unwrap(), "bias");
    assert!((a.attrs.float("scale").unwrap() - 0.3).abs() < 1e-6);
    // A boolean keep-mask through where(·, ·, -inf); no scale at all.
    let mut g = G::new();
    let [q, k, v] = qkv(&mut g, 3, 5);
    let keep = g.0.input("keep", TensorType::new(DType::Bool, [3, 5]));
    let y = attention_prims(&mut g, q, k, v, None, Mask::Keep(keep, f64::NEG_INFINITY));
    let h = fuse_checked(&g.finish(&[y]), false).0;
    let a = node(&h, "attention");
    assert_eq!(a.attrs.str("mask_kind").unwrap(), "custom");
    assert_eq!(a.attrs.float("scale").unwrap(), 1.0);
}

#[test]
fn attention_recognizes_causal_and_sliding_window_constants() {
    for (kind, window) in [("causal", 0i64), ("sliding_window", 2)] {
        let (sq, sk) = (3, 5);
        let keep = rlx_ir::ops::fused::attention_mask(kind, sq, sk, window).unwrap();
        let mut g = G::new();
        let [q, k, v] = qkv(&mut g, sq, sk);
        let keep =
            g.0.constant(HostTensor::from_slice(&keep, [sq, sk]).unwrap())
                .unwrap();
        let y = attention_prims(
            &mut g,
            q,
            k,
            v,
            Some(0.5),
            Mask::Keep(keep, f64::NEG_INFINITY),
        );
        let h = fuse_checked(&g.finish(&[y]), false).0;
        assert_eq!(ops(&h), ["attention"]);
        let a = node(&h, "attention");
        assert_eq!(a.attrs.str("mask_kind").unwrap(), kind);
        assert_eq!(a.attrs.int("window").unwrap(), window);
        assert_eq!(a.inputs.len(), 3);
    }
}

#[test]
fn attention_near_misses_stay() {
    // Softmax over the query axis.
    let mut g = G::new();
    let [q, k, v] = qkv(&mut g, 3, 3);
    let kt = g.op(
        "permute",
        &[k],
        Attrs::new().with("perm", vec![0i64, 1, 3, 2]),
    );
    let s = g.b("matmul", q, kt);
    let p = softmax_prims(&mut g, s, 2, 2, true);
    let y = g.b("matmul", p, v);
    let got = fused_ops(&g.finish(&[y]));
    assert!(!got.contains(&"attention"), "{got:?}");
    // A finite fill value is not a mask.
    let mut g = G::new();
    let [q, k, v] = qkv(&mut g, 3, 3);
    let keep = g.0.input("keep", TensorType::new(DType::Bool, [3, 3]));
    let y = attention_prims(&mut g, q, k, v, Some(0.5), Mask::Keep(keep, -1e9));
    let got = fused_ops(&g.finish(&[y]));
    assert!(!got.contains(&"attention"), "{got:?}");
    // The scores are also an output.
    let mut g = G::new();
    let [q, k, v] = qkv(&mut g, 3, 3);
    let kt = g.op(
        "permute",
        &[k],
        Attrs::new().with("perm", vec![0i64, 1, 3, 2]),
    );
    let s = g.b("matmul", q, kt);
    let p = g.op("softmax", &[s], Attrs::new());
    let y = g.b("matmul", p, v);
    assert_eq!(
        fused_ops(&g.finish(&[y, s])),
        ["permute", "matmul", "softmax", "matmul"]
    );
}

#[test]
fn attention_round_trips_through_its_decomposition() {
    /// Mask kind, explicit scale, mask shape.
    type Case<'a> = (&'a str, Option<f64>, Option<&'a [usize]>);
    let cases: [Case; 6] = [
        ("none", None, None),
        ("none", Some(0.25), None),
        ("causal", None, None),
        ("sliding_window", None, None),
        ("bias", None, Some(&[1, 2, 3, 3])),
        ("custom", Some(0.7), Some(&[3, 3])),
    ];
    for (kind, scale, mask) in cases {
        let mut g = G::new();
        let [q, k, v] = qkv(&mut g, 3, 3);
        let mut ins = vec![q, k, v];
        if let Some(m) = &mask {
            let dt = if kind == "custom" {
                DType::Bool
            } else {
                DType::F32
            };
            ins.push(g.0.input("m", TensorType::new(dt, m.to_vec())));
        }
        let mut attrs = Attrs::new().with("mask_kind", kind).with("window", 2i64);
        if let Some(s) = scale {
            attrs.set("scale", s);
        }
        let y = g.op("attention", &ins, attrs);
        let orig = g.finish(&[y]);
        let h = fuse_checked(&expand_all(&orig).unwrap(), false).0;
        assert_eq!(ops(&h), ["attention"], "{kind}");
        let (a, b) = (node(&h, "attention"), node(&orig, "attention"));
        assert_eq!(a.attrs.str("mask_kind").unwrap(), kind);
        if let Some(s) = scale {
            assert!((a.attrs.float("scale").unwrap() - s).abs() < 1e-6);
        } else {
            assert!(a.attrs.get("scale").is_none());
        }
        if kind == "sliding_window" {
            assert_eq!(a.attrs.int("window"), b.attrs.int("window"));
        }
    }
}

// ----------------------------------------------------------- packed QKV

/// x (B, S, 12) @ w (12, 36) → three narrows/splits/slices → heads → attention.
fn packed(how: &str, heads: bool) -> Graph {
    let mut g = G::new();
    let x = g.input("x", &[2, 3, 12]);
    let w = g.input("w", &[12, 36]);
    let qkv = g.b("matmul", x, w);
    let parts: Vec<ValueId> = match how {
        "narrow" => (0..3)
            .map(|i| {
                let a = Attrs::new()
                    .with("axis", -1i64)
                    .with("start", 12 * i)
                    .with("len", 12i64);
                g.op("narrow", &[qkv], a)
            })
            .collect(),
        "split" => {
            g.0.op(
                "split",
                &[qkv],
                Attrs::new()
                    .with("axis", 2i64)
                    .with("sizes", vec![12i64, 12, 12]),
            )
            .unwrap()
        }
        _ => (0..3)
            .map(|i| {
                let a = Attrs::new()
                    .with("starts", vec![12 * i])
                    .with("ends", vec![12 * i + 12])
                    .with("axes", vec![2i64]);
                g.op("slice", &[qkv], a)
            })
            .collect(),
    };
    let split = |g: &mut G, t: ValueId| {
        if !heads {
            return t;
        }
        let r = g.op(
            "reshape",
            &[t],
            Attrs::new().with("shape", vec![2i64, 3, 2, 6]),
        );
        g.op(
            "permute",
            &[r],
            Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
        )
    };
    let [q, k, v] = [0, 1, 2].map(|i| split(&mut g, parts[i]));
    let y = g.op(
        "attention",
        &[q, k, v],
        Attrs::new().with("mask_kind", "causal"),
    );
    g.finish(&[y])
}

#[test]
fn packed_qkv_attention_reads_views_without_copies() {
    for how in ["narrow", "split", "slice"] {
        for heads in [true, false] {
            let g = packed(how, heads);
            let (h, rep) = fuse_checked(&g, false);
            assert_eq!(
                rep.fired.get("packed_qkv_attention"),
                Some(&1),
                "{how} {heads}"
            );
            // Planned: the projection and the attention are the only kernels;
            // the reshapes, the permute and the narrows are views.
            let p = rlx_opt::plan(h.clone()).unwrap();
            let kernels: Vec<&str> = p.steps.iter().map(|s| s.kernel.as_str()).collect();
            assert_eq!(kernels, ["matmul", "attention"], "{how} {heads}");
            let before = rlx_opt::plan(g).unwrap();
            assert!(before.steps.len() > p.steps.len());
        }
    }
}

#[test]
fn qkv_slices_of_different_sources_or_sizes_stay() {
    let mut g = G::new();
    let a = g.input("a", &[3, 24]);
    let b = g.input("b", &[3, 24]);
    let nar = |g: &mut G, t, s: i64, l: i64| {
        g.op(
            "narrow",
            &[t],
            Attrs::new()
                .with("axis", 1i64)
                .with("start", s)
                .with("len", l),
        )
    };
    let q = nar(&mut g, a, 0, 8);
    let k = nar(&mut g, b, 8, 8);
    let v = nar(&mut g, a, 16, 8);
    let y = g.op("attention", &[q, k, v], Attrs::new());
    let q2 = nar(&mut g, a, 0, 8);
    let k2 = nar(&mut g, a, 4, 8); // not a multiple of the slice length
    let v2 = nar(&mut g, a, 16, 8);
    let z = g.op("attention", &[q2, k2, v2], Attrs::new());
    let (_, rep) = fuse_checked(&g.finish(&[y, z]), false);
    assert!(!rep.fired.contains_key("packed_qkv_attention"));
}

// ------------------------------------------------------------------- rope

#[test]
fn two_ropes_sharing_tables_become_qk_rope() {
    let mut g = G::new();
    let q = g.input("q", &[2, 3, 8]);
    let k = g.input("k", &[1, 3, 8]);
    let cos = g.input("cos", &[3, 4]);
    let sin = g.input("sin", &[3, 4]);
    let sin2 = g.input("sin2", &[3, 4]);
    let rq = g.op("rope", &[q, cos, sin], Attrs::new());
    let e = g.u("exp", rq);
    let rk = g.op("rope", &[k, cos, sin], Attrs::new());
    let other = g.op("rope", &[k, cos, sin2], Attrs::new());
    let h = fuse_checked(&g.finish(&[e, rk, other]), false).0;
    assert_eq!(ops(&h), ["qk_rope", "exp", "rope"]);
    let mut g = G::new();
    let q = g.input("q", &[2, 3, 8]);
    let cos = g.input("cos", &[3, 4]);
    let sin = g.input("sin", &[3, 4]);
    let rq = g.op(
        "rope",
        &[q, cos, sin],
        Attrs::new().with("interleaved", true),
    );
    let rk = g.op("rope", &[q, cos, sin], Attrs::new());
    assert_eq!(fused_ops(&g.finish(&[rq, rk])), ["rope", "rope"]);
}

// ---------------------------------------------------------------- regions

#[test]
fn elementwise_chains_become_one_region() {
    let mut g = G::new();
    let x = g.input("x", &[4, 3]);
    let b = g.input("b", &[3]);
    let t = g.b("add", x, b);
    let e = g.u("tanh", t);
    let c = g.op(
        "clamp",
        &[e],
        Attrs::new().with("min", -0.5).with("max", 0.5),
    );
    let z = g.bc("mul", c, 3.0);
    let cond = g.bc("gt", z, 0.0);
    let w = g.op("where", &[cond, z, x], Attrs::new());
    let y = g.op("cast", &[w], Attrs::new().with("dtype", DType::F64));
    let (h, rep) = fuse_checked(&g.finish(&[y]), true);
    assert_eq!(ops(&h), ["fused_elementwise"]);
    assert_eq!((rep.regions, rep.region_ops), (1, 7));
    let body = node(&h, "fused_elementwise").attrs.graph("body").unwrap();
    assert_eq!(body.inputs.len(), 2); // x and b; the scalars live in the body
                                      // The planner sees one kernel and no intermediate buffers.
    let p = rlx_opt::plan(h).unwrap();
    assert_eq!(p.steps.len(), 1);
    assert_eq!(p.slots.len(), 1);
}

#[test]
fn shared_intermediates_and_shape_changes_split_regions() {
    let build = |a_is_output: bool| {
        let mut g = G::new();
        let x = g.input("x", &[4, 3]);
        let r = g.input("r", &[3]);
        let a = g.u("exp", x);
        let b = g.u("neg", a);
        let c = g.u("sin", b);
        let d = g.b("add", a, c); // a is read twice, both inside the region
        let e = g.u("exp", r); // (3): another shape than the region's
        let f = g.b("mul", d, e);
        let single = g.u("cos", x); // one op alone: no region
        let mut outs = vec![f, single];
        if a_is_output {
            outs.push(a);
        }
        fuse_checked(&g.finish(&outs), true)
    };
    let (h, rep) = build(false);
    assert_eq!(ops(&h), ["exp", "fused_elementwise", "cos"]);
    assert_eq!((rep.regions, rep.region_ops), (1, 5));
    // a also leaves the graph: it cannot be an intermediate of the region.
    let (h, rep) = build(true);
    assert_eq!(ops(&h), ["exp", "exp", "fused_elementwise", "cos"]);
    assert_eq!((rep.regions, rep.region_ops), (1, 4));
}

// ---------------------------------------------------- round trips, numbers

#[test]
fn decompositions_fuse_back_to_the_same_op() {
    let one = |op: &str, shapes: &[&[usize]], attrs: Attrs| {
        let mut g = G::new();
        let ins: Vec<ValueId> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| g.input(&format!("x{k}"), s))
            .collect();
        let y = g.op(op, &ins, attrs);
        g.finish(&[y])
    };
    let cases: Vec<(&str, Graph)> = vec![
        (
            "softmax",
            one("softmax", &[&[2, 5]], Attrs::new().with("axis", 0i64)),
        ),
        ("log_softmax", one("log_softmax", &[&[2, 5]], Attrs::new())),
        (
            "layer_norm",
            one("layer_norm", &[&[2, 5], &[5], &[5]], Attrs::new()),
        ),
        ("rms_norm", one("rms_norm", &[&[2, 5], &[5]], Attrs::new())),
        ("gelu", one("gelu", &[&[2, 5]], Attrs::new())),
        ("gelu_tanh", one("gelu_tanh", &[&[2, 5]], Attrs::new())),
        ("silu", one("silu", &[&[2, 5]], Attrs::new())),
        ("swiglu", one("swiglu", &[&[2, 5], &[2, 5]], Attrs::new())),
        (
            "attention",
            one(
                "attention",
                &[&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]],
                Attrs::new(),
            ),
        ),
    ];
    for (op, g) in cases {
        let h = fuse_checked(&expand_all(&g).unwrap(), true).0;
        assert_eq!(ops(&h), [op]);
        // Attributes as written, up to the canonical (non-negative) axis.
        let g = rlx_opt::Layout::new().run(&g).unwrap();
        assert_eq!(
            h.nodes.last().unwrap().attrs,
            g.nodes.last().unwrap().attrs,
            "{op}"
        );
    }
}

#[test]
fn patterns_and_regions_fuse_inside_subgraphs() {
    // scan: carry c, slices x: c' = softmax(c + x) from primitives, y = tanh(exp(c')).
    let mut body = G::new();
    let c = body.input("c", &[4]);
    let x = body.input("x", &[4]);
    let s = body.b("add", c, x);
    let p = softmax_prims(&mut body, s, 0, 0, true);
    let e = body.u("exp", p);
    let y = body.u("tanh", e);
    let body = body.finish(&[p, y]);
    let mut g = G::new();
    let init = g.input("init", &[4]);
    let xs = g.input("xs", &[3, 4]);
    let outs =
        g.0.op(
            "scan",
            &[init, xs],
            Attrs::new().with("body", body).with("num_carry", 1i64),
        )
        .unwrap();
    let (h, rep) = fuse_checked(&g.finish(&outs), true);
    assert_eq!(rep.fired.get("softmax"), Some(&1));
    assert_eq!(rep.regions, 1);
    let sub = node(&h, "scan").attrs.graph("body").unwrap();
    assert_eq!(ops(sub), ["add", "softmax", "fused_elementwise"]);
}
