//! Structure-aware fuzzing of the compile pipeline: the fuzz bytes drive a
//! generator of small valid graphs (a few f32 inputs of small shapes, then
//! a sequence of elementwise, broadcasting, matmul, reduce, softmax,
//! normalization and shape ops built through `GraphBuilder`, which infers
//! and checks every type). The graph is compiled for the CPU with the
//! default options (optimizer and fast engine), run on random inputs, and
//! compared with the reference interpreter on the unoptimized graph.
//!
//! A compile or run error is a pass; a panic, or an output that differs
//! from the reference beyond the tolerance, is a crash.

use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType, ValueId};

/// Reads choices from the fuzz bytes; zeros once they run out.
pub struct Choices<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Choices { data, pos: 0 }
    }
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    /// `0..n` (n ≥ 1).
    pub fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }
    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }
    /// An axis of a rank-`r` tensor, sometimes written negative.
    pub fn axis(&mut self, r: usize) -> i64 {
        let a = self.below(r.max(1)) as i64;
        if self.flag() {
            a - r as i64
        } else {
            a
        }
    }
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos.min(self.data.len())..]
    }
}

const UNARY: &[&str] = &[
    "neg",
    "abs",
    "relu",
    "tanh",
    "sigmoid",
    "gelu",
    "gelu_tanh",
    "silu",
    "sin",
    "cos",
    "square",
    "exp",
    "sqrt",
    "log",
    "rsqrt",
    "reciprocal",
    "floor",
    "ceil",
    "round",
    "erf",
    "softplus",
    "sign",
    "log1p",
    "expm1",
    "identity",
    "trunc",
    "atan",
    "stop_gradient",
];
const BINARY: &[&str] = &["add", "sub", "mul", "div", "max", "min", "atan2", "swiglu"];
const REDUCE: &[&str] = &[
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_logsumexp",
    "reduce_variance",
];

fn dims(b: &GraphBuilder, v: ValueId) -> Vec<usize> {
    b.shape(v).dims().to_vec()
}

/// One step: try an op on values from the pool; `None` when the builder
/// refused it (a type error is a skipped step, not a failure).
fn step(
    c: &mut Choices,
    b: &mut GraphBuilder,
    pool: &[ValueId],
    n_inputs: &mut usize,
) -> Option<Vec<ValueId>> {
    let x = pool[c.below(pool.len())];
    let y = pool[c.below(pool.len())];
    let d = dims(b, x);
    let r = d.len();
    let mut new_input = |b: &mut GraphBuilder, dims: Vec<usize>| {
        *n_inputs += 1;
        b.input(format!("w{n_inputs}"), TensorType::new(DType::F32, dims))
    };
    let kind = c.below(16);
    let res = match kind {
        0..=2 => b.unary(UNARY[c.below(UNARY.len())], x).map(|v| vec![v]),
        3..=4 => b
            .binary(BINARY[c.below(BINARY.len())], x, y)
            .map(|v| vec![v]),
        5 => {
            // matmul with a fresh weight [k, n] (or [batch, k, n]), or with
            // another value from the pool.
            let w = if c.flag() || r == 0 {
                y
            } else {
                let k = d[r - 1];
                let n = 1 + c.below(5);
                let wd = if r >= 3 && c.flag() {
                    vec![d[r - 3], k, n]
                } else {
                    vec![k, n]
                };
                new_input(b, wd)
            };
            b.binary("matmul", x, w).map(|v| vec![v])
        }
        6 => {
            let op = REDUCE[c.below(REDUCE.len())];
            let mut axes = vec![c.axis(r)];
            if r > 1 && c.flag() {
                axes.push(c.axis(r));
            }
            let mut a = Attrs::new().with("axes", axes).with("keepdim", c.flag());
            if op == "reduce_variance" {
                a = a.with("correction", c.below(2) as i64);
            }
            b.op1(op, &[x], a).map(|v| vec![v])
        }
        7 => {
            let op = if c.flag() { "softmax" } else { "log_softmax" };
            b.op1(op, &[x], Attrs::new().with("axis", c.axis(r)))
                .map(|v| vec![v])
        }
        8 => {
            let last = d.last().copied().unwrap_or(1);
            let g = new_input(b, vec![last]);
            let eps = [1e-5, 1e-3, 0.1][c.below(3)];
            if c.flag() {
                let be = new_input(b, vec![last]);
                b.op1("layer_norm", &[x, g, be], Attrs::new().with("eps", eps))
            } else {
                b.op1("rms_norm", &[x, g], Attrs::new().with("eps", eps))
            }
            .map(|v| vec![v])
        }
        9 => {
            let n: usize = d.iter().product();
            let shape: Vec<i64> = match c.below(5) {
                0 => vec![n as i64],
                1 => vec![-1],
                2 => std::iter::once(1)
                    .chain(d.iter().map(|&x| x as i64))
                    .collect(),
                3 => d.iter().rev().map(|&x| x as i64).collect(),
                _ if r >= 2 => {
                    let mut s: Vec<i64> = d[..r - 2].iter().map(|&x| x as i64).collect();
                    s.push((d[r - 2] * d[r - 1]) as i64);
                    s
                }
                _ => vec![1, -1],
            };
            b.op1("reshape", &[x], Attrs::new().with("shape", shape))
                .map(|v| vec![v])
        }
        10 => {
            let mut perm: Vec<i64> = (0..r as i64).collect();
            for i in (1..r).rev() {
                perm.swap(i, c.below(i + 1));
            }
            b.op1("permute", &[x], Attrs::new().with("perm", perm))
                .map(|v| vec![v])
        }
        11 => b
            .op1("concat", &[x, y], Attrs::new().with("axis", c.axis(r)))
            .map(|v| vec![v]),
        12 => {
            let ax = c.below(r.max(1));
            let len = d.get(ax).copied().unwrap_or(1);
            let start = c.below(len) as i64;
            let end = start + 1 + c.below(len - start as usize) as i64;
            let a = Attrs::new()
                .with("starts", vec![start])
                .with("ends", vec![end])
                .with("axes", vec![ax as i64]);
            b.op1("slice", &[x], a).map(|v| vec![v])
        }
        13 => {
            let cond = b.binary(["gt", "lt", "ge", "eq"][c.below(4)], x, y);
            match cond {
                Ok(cond) => b.op1("where", &[cond, x, y], Attrs::new()).map(|v| vec![v]),
                Err(e) => Err(e),
            }
        }
        14 => {
            let a = match c.below(5) {
                0 => ("clamp", Attrs::new().with("min", -1.0).with("max", 1.5)),
                1 => ("cumsum", Attrs::new().with("axis", c.axis(r))),
                2 => ("flip", Attrs::new().with("axes", vec![c.axis(r)])),
                3 => (
                    "unsqueeze",
                    Attrs::new().with("axes", vec![c.below(r + 1) as i64]),
                ),
                _ => ("squeeze", Attrs::new()),
            };
            b.op1(a.0, &[x], a.1).map(|v| vec![v])
        }
        _ => {
            let ax = c.axis(r);
            let len = d.get(c.below(r.max(1))).copied().unwrap_or(1);
            let a = 1 + c.below(len.max(1));
            let sizes = if a < len {
                vec![a as i64, (len - a) as i64]
            } else {
                vec![len as i64]
            };
            b.op(
                "split",
                &[x],
                Attrs::new().with("axis", ax).with("sizes", sizes),
            )
        }
    };
    res.ok()
}

/// The graph the bytes describe, and the bytes left for the input values.
pub fn generate(data: &[u8]) -> Option<(Graph, &[u8])> {
    let mut c = Choices::new(data);
    let mut b = GraphBuilder::new("fuzz");
    let mut pool = Vec::new();
    let mut n_inputs = 0;
    for k in 0..1 + c.below(3) {
        let rank = 1 + c.below(3);
        let dims: Vec<usize> = (0..rank).map(|_| 1 + c.below(4)).collect();
        pool.push(b.input(format!("x{k}"), TensorType::new(DType::F32, dims)));
    }
    let steps = 1 + c.below(12);
    let mut made = Vec::new();
    for _ in 0..steps {
        if let Some(outs) = step(&mut c, &mut b, &pool, &mut n_inputs) {
            // Only f32 results go back into the pool (comparisons give bool).
            for v in outs {
                if b.dtype(v) == DType::F32 {
                    pool.push(v);
                }
                made.push(v);
            }
        }
    }
    let last = *made.last()?;
    let mut outputs = vec![last];
    if made.len() > 1 && c.flag() {
        let other = made[c.below(made.len() - 1)];
        outputs.push(other);
    }
    let rest = c.rest();
    let built = b.graph().clone();
    match b.finish(&outputs) {
        Ok(g) => Some((g, rest)),
        Err(e) => panic!("GraphBuilder built a graph that verify rejects: {e}\n{built:?}"),
    }
}

/// Deterministic input values in [-2, 2] from the remaining bytes.
pub fn inputs(g: &Graph, seed_bytes: &[u8]) -> Vec<HostTensor> {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    for &b in seed_bytes {
        s = (s ^ b as u64).wrapping_mul(0x100_0000_01B3);
    }
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
    };
    g.input_types()
        .iter()
        .map(|t| {
            let n = t.shape.numel();
            let v: Vec<f64> = (0..n).map(|_| (next() * 64.0).round() / 64.0).collect();
            HostTensor::from_f64(t.dtype, t.shape.clone(), v).expect("an f32 input tensor")
        })
        .collect()
}

/// Generate, compile, run and compare (see the module docs).
pub fn check(data: &[u8]) {
    let Some((g, rest)) = generate(data) else {
        return;
    };
    if let Err(e) = g.verify() {
        panic!(
            "GraphBuilder built a graph that verify rejects: {e}\n{}",
            rlx_ir::text::print(&g)
        );
    }
    // Builder graphs may declare inputs between nodes, which the text
    // form lists first (renumbering values): the text of a built graph
    // must parse, and what it parses to must round-trip exactly.
    let printed = rlx_ir::text::print(&g);
    let g = match rlx_ir::text::parse(&printed) {
        Ok(g) => g,
        Err(e) => panic!("a built graph's text does not parse: {e}\n{printed}"),
    };
    let printed = rlx_ir::text::print(&g);
    match rlx_ir::text::parse(&printed) {
        Ok(g2) if g2 == g => {}
        Ok(g2) => {
            panic!("parse(print(g)) != g for a built graph\n{printed}\ng: {g:?}\nre-parsed: {g2:?}")
        }
        Err(e) => panic!("a built graph's text does not parse: {e}\n{printed}"),
    }
    let xs = inputs(&g, rest);
    let Ok(want) = rlx_cpu::run_graph(&g, &xs) else {
        return;
    };
    // Only well-conditioned cases are compared: a NaN, an infinity or a
    // huge value anywhere in the reference output means the f32 fast
    // engine and the f64 reference may legitimately part ways.
    let mut want_f = Vec::new();
    for t in &want {
        let Ok(v) = t.to_f64_vec() else { return };
        if v.iter().any(|x| !x.is_finite() || x.abs() > 1e4) {
            return;
        }
        want_f.push(v);
    }
    let compiled = match rlx::compile(&g, rlx::Device::Cpu) {
        Ok(c) => c,
        Err(_) => return,
    };
    let got = match compiled.run(&xs) {
        Ok(o) => o,
        Err(e) => {
            panic!("the reference runs this graph, the compiled program fails: {e}\n{printed}")
        }
    };
    assert_eq!(got.len(), want.len(), "output count\n{printed}");
    crate::note(|| {
        format!(
            "compile: compared {} nodes, {} outputs",
            g.nodes.len(),
            got.len()
        )
    });
    for (k, ((gt, wt), wv)) in got.iter().zip(&want).zip(&want_f).enumerate() {
        assert_eq!(gt.dtype(), wt.dtype(), "output {k} dtype\n{printed}");
        assert_eq!(gt.shape(), wt.shape(), "output {k} shape\n{printed}");
        let gv = gt.to_f64_vec().expect("f32 output");
        let scale = wv.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for (i, (a, w)) in gv.iter().zip(wv).enumerate() {
            let tol = 2e-3 * scale + 2e-3 * w.abs();
            // NaN compiled against a finite reference fails too.
            let close = (a - w).abs() <= tol;
            if !close {
                panic!(
                    "output {k}[{i}]: compiled {a}, reference {w} (tolerance {tol})\ninputs: {xs:?}\n{printed}"
                );
            }
        }
    }
}
