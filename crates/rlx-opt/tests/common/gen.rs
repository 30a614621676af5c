//! The random MIR graph generator of the property tests: elementwise ops
//! with broadcasting, reductions, movement ops, casts, matmul, softmax,
//! layer_norm and constants, with neutral elements, double permutes,
//! reshape and cast chains and duplicate subexpressions planted on purpose.

use super::Rng;
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType, ValueId};

struct Gen<'r> {
    rng: &'r mut Rng,
    b: GraphBuilder,
    pool: Vec<ValueId>,
}

impl Gen<'_> {
    fn ty(&self, v: ValueId) -> TensorType {
        self.b.ty(v).clone()
    }

    fn shape(&mut self) -> Vec<usize> {
        let rank = self.rng.pick(&[0, 1, 1, 2, 2, 2, 3, 3]);
        (0..rank).map(|_| self.rng.range(1, 4)).collect()
    }

    /// A pool value satisfying `pred`, biased towards recent ones.
    fn pick(&mut self, pred: impl Fn(&TensorType) -> bool) -> Option<ValueId> {
        let ok: Vec<ValueId> = self
            .pool
            .iter()
            .copied()
            .filter(|&v| pred(self.b.ty(v)))
            .collect();
        if ok.is_empty() {
            return None;
        }
        let k = if self.rng.chance(0.5) {
            ok.len() - 1 - self.rng.below(ok.len().min(4))
        } else {
            self.rng.below(ok.len())
        };
        Some(ok[k])
    }
    fn float(&mut self) -> Option<ValueId> {
        self.pick(|t| t.dtype.is_float())
    }

    fn push(&mut self, op: &str, inputs: &[ValueId], attrs: Attrs) -> Option<ValueId> {
        let outs = self.b.op(op, inputs, attrs).ok()?;
        self.pool.extend(&outs);
        outs.first().copied()
    }
    fn konst(&mut self, dtype: DType, shape: &[usize]) -> ValueId {
        let t = self.rng.tensor(dtype, shape);
        self.b.constant(t).unwrap()
    }
    /// `x` with NaN replaced by 0 and clamped to ±1e9 (finite, inside
    /// i32); the nodes stay out of the pool and draw nothing from the rng,
    /// so the rest of the graph is what it was.
    fn finite(&mut self, x: ValueId) -> ValueId {
        let dt = self.ty(x).dtype;
        let not_nan = self.b.binary("eq", x, x).unwrap();
        let zero = self.filled(dt, &[], 0.0);
        let w = self
            .b
            .op1("where", &[not_nan, x, zero], Attrs::new())
            .unwrap();
        let bounds = Attrs::new().with("min", -1e9).with("max", 1e9);
        self.b.op1("clamp", &[w], bounds).unwrap()
    }
    fn filled(&mut self, dtype: DType, shape: &[usize], v: f64) -> ValueId {
        let n = shape.iter().product();
        let t = HostTensor::from_f64(dtype, shape.to_vec(), vec![v; n]).unwrap();
        self.b.constant(t).unwrap()
    }

    /// A shape that broadcasts against `dims`: a suffix with some 1s, and
    /// sometimes an extra leading axis (which grows the result).
    fn partner_shape(&mut self, dims: &[usize]) -> Vec<usize> {
        let keep = self.rng.below(dims.len() + 1);
        let mut s: Vec<usize> = dims[dims.len() - keep..]
            .iter()
            .map(|&d| if self.rng.chance(0.25) { 1 } else { d })
            .collect();
        if self.rng.chance(0.1) {
            s.insert(0, 2);
        }
        s
    }

    fn random_perm(&mut self, rank: usize) -> Vec<i64> {
        let mut p: Vec<i64> = (0..rank as i64).collect();
        for i in (1..rank).rev() {
            p.swap(i, self.rng.below(i + 1));
        }
        p
    }

    /// Some axis of a rank, negative half of the time.
    fn axis(&mut self, rank: usize) -> i64 {
        let a = self.rng.below(rank) as i64;
        if self.rng.chance(0.5) {
            a - rank as i64
        } else {
            a
        }
    }

    fn step(&mut self) {
        let kind = self.rng.below(20);
        let Some(x) = self.float() else { return };
        let tx = self.ty(x);
        let (dt, dims, rank) = (tx.dtype, tx.dims().to_vec(), tx.rank());
        match kind {
            0 | 1 => {
                let op = self.rng.pick(&[
                    "neg",
                    "abs",
                    "exp",
                    "tanh",
                    "sigmoid",
                    "relu",
                    "sin",
                    "square",
                    "floor",
                    "sqrt",
                    "log",
                    "reciprocal",
                ]);
                self.push(op, &[x], Attrs::new());
            }
            2 | 3 => {
                let op = self.rng.pick(&["add", "sub", "mul", "div", "max", "min"]);
                let y = if self.rng.chance(0.5) {
                    let s = self.partner_shape(&dims);
                    self.konst(dt, &s)
                } else {
                    self.pick(|t| t.dtype == dt).unwrap_or(x)
                };
                let (a, b) = if self.rng.chance(0.5) { (x, y) } else { (y, x) };
                self.push(op, &[a, b], Attrs::new());
            }
            4 | 5 => {
                // Planted neutral elements, on either side, sometimes with a
                // shape that broadcasts x bigger (which must not simplify).
                let (op, val, lhs_ok) = self.rng.pick(&[
                    ("mul", 1.0, true),
                    ("add", 0.0, true),
                    ("sub", 0.0, false),
                    ("div", 1.0, false),
                    ("add", -0.0, true),
                ]);
                let s = if self.rng.chance(0.5) {
                    vec![]
                } else {
                    self.partner_shape(&dims)
                };
                let c = self.filled(dt, &s, val);
                let swap = lhs_ok && self.rng.chance(0.5);
                let ins = if swap { [c, x] } else { [x, c] };
                self.push(op, &ins, Attrs::new());
            }
            6 => {
                let op = self.rng.pick(&["neg_neg", "identity", "cast", "broadcast"]);
                match op {
                    "neg_neg" => {
                        let n = self.push("neg", &[x], Attrs::new()).unwrap();
                        self.push("neg", &[n], Attrs::new());
                    }
                    "cast" => {
                        self.push("cast", &[x], Attrs::new().with("dtype", dt));
                    }
                    "broadcast" => {
                        let mut to: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
                        if self.rng.chance(0.5) {
                            to.insert(0, 2);
                        }
                        self.push("broadcast", &[x], Attrs::new().with("shape", to));
                    }
                    _ => {
                        self.push(op, &[x], Attrs::new());
                    }
                }
            }
            7 => {
                // Reshape, sometimes a chain, sometimes to the same shape.
                let n: usize = dims.iter().product();
                let target = |rng: &mut Rng| -> Vec<i64> {
                    match rng.below(4) {
                        0 => vec![n as i64],
                        1 => vec![-1],
                        2 => dims.iter().map(|&d| d as i64).collect(),
                        _ => {
                            let f = (1..=n).filter(|f| n.is_multiple_of(*f)).collect::<Vec<_>>();
                            let a = rng.pick(&f);
                            vec![a as i64, (n / a) as i64, 1]
                        }
                    }
                };
                let s1 = target(self.rng);
                let r = self
                    .push("reshape", &[x], Attrs::new().with("shape", s1))
                    .unwrap();
                if self.rng.chance(0.6) {
                    let s2 = target(self.rng);
                    self.push("reshape", &[r], Attrs::new().with("shape", s2));
                }
            }
            8 if rank >= 2 => {
                let p = self.random_perm(rank);
                let a = self
                    .push("permute", &[x], Attrs::new().with("perm", p.clone()))
                    .unwrap();
                if self.rng.chance(0.7) {
                    let q = if self.rng.chance(0.5) {
                        // The inverse: the pair is the identity.
                        let mut inv = vec![0i64; rank];
                        for (i, &pi) in p.iter().enumerate() {
                            inv[pi as usize] = i as i64;
                        }
                        inv
                    } else {
                        self.random_perm(rank)
                    };
                    self.push("permute", &[a], Attrs::new().with("perm", q));
                }
            }
            9 if rank >= 1 => {
                let ax = self.rng.below(rank);
                let d = dims[ax];
                let start = self.rng.below(d);
                let len = self.rng.range(1, d - start);
                let axis = if self.rng.chance(0.5) {
                    ax as i64 - rank as i64
                } else {
                    ax as i64
                };
                let attrs = Attrs::new()
                    .with("axis", axis)
                    .with("start", start as i64)
                    .with("len", len as i64);
                self.push("narrow", &[x], attrs);
            }
            10 if rank >= 1 => {
                let y = self
                    .pick(|t| t.dtype == dt && t.dims() == dims)
                    .unwrap_or(x);
                let axis = self.axis(rank);
                self.push("concat", &[x, y], Attrs::new().with("axis", axis));
            }
            11 => {
                let (d1, d2) = self.rng.pick(&[
                    (DType::F64, Some(DType::F32)),
                    (DType::F16, Some(DType::F32)),
                    (DType::F32, Some(DType::F64)),
                    (DType::I32, Some(DType::F32)),
                    (DType::I32, None),
                    (DType::BF16, Some(DType::F64)),
                ]);
                // NaN and ±inf have no integer value (casting one is a
                // runtime error): an integer detour starts from finite values.
                let src = if d1.is_int() { self.finite(x) } else { x };
                let c = self
                    .push("cast", &[src], Attrs::new().with("dtype", d1))
                    .unwrap();
                if let Some(d2) = d2 {
                    let c2 = self
                        .push("cast", &[c], Attrs::new().with("dtype", d2))
                        .unwrap();
                    if self.rng.chance(0.5) {
                        self.push("cast", &[c2], Attrs::new().with("dtype", DType::F64));
                    }
                } else {
                    // An integer detour: wrapping arithmetic, neutral
                    // elements and a comparison.
                    let one = self.filled(DType::I32, &[], 1.0);
                    let m = self.push("mul", &[c, one], Attrs::new()).unwrap();
                    let s = self.push("add", &[m, c], Attrs::new()).unwrap();
                    let n = self.push("neg", &[s], Attrs::new()).unwrap();
                    let n2 = self.push("neg", &[n], Attrs::new()).unwrap();
                    let z = self.filled(DType::I32, &[], 0.0);
                    let gt = self.push("gt", &[n2, z], Attrs::new()).unwrap();
                    let f = self
                        .push("cast", &[n2], Attrs::new().with("dtype", dt))
                        .unwrap();
                    self.push("where", &[gt, f, x], Attrs::new());
                }
            }
            12 => {
                let op = self
                    .rng
                    .pick(&["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"]);
                let mut axes = Vec::new();
                for a in 0..rank {
                    if self.rng.chance(0.5) {
                        axes.push(if self.rng.chance(0.5) {
                            a as i64 - rank as i64
                        } else {
                            a as i64
                        });
                    }
                }
                let keep = self.rng.chance(0.5);
                self.push(
                    op,
                    &[x],
                    Attrs::new().with("axes", axes).with("keepdim", keep),
                );
            }
            13 if rank >= 1 => {
                let k = dims[rank - 1];
                let n = self.rng.range(1, 4);
                let w = self
                    .pick(|t| t.dtype == dt && t.dims() == [k, n])
                    .unwrap_or_else(|| self.konst(dt, &[k, n]));
                self.push("matmul", &[x, w], Attrs::new());
            }
            14 if rank >= 1 => {
                let axis = self.axis(rank);
                if self.rng.chance(0.5) {
                    let op = self.rng.pick(&["softmax", "log_softmax"]);
                    self.push(op, &[x], Attrs::new().with("axis", axis));
                } else {
                    let ax = (axis + rank as i64) as usize % rank;
                    let tail = dims[ax..].to_vec();
                    let g = self.konst(dt, &tail);
                    let b = self.konst(dt, &tail);
                    self.push("layer_norm", &[x, g, b], Attrs::new().with("axis", axis));
                }
            }
            15 => {
                // Duplicate an existing node verbatim.
                let nodes = &self.b.graph().nodes;
                if nodes.is_empty() {
                    return;
                }
                let n = nodes[self.rng.below(nodes.len())].clone();
                self.push(n.op.name(), &n.inputs, n.attrs);
            }
            16 => {
                // A constant subexpression, combined with x.
                let s = if self.rng.chance(0.5) {
                    dims.clone()
                } else {
                    self.partner_shape(&dims)
                };
                let c1 = self.konst(dt, &s);
                let c2 = self.konst(dt, &[]);
                let op = self.rng.pick(&["add", "mul", "sub", "max"]);
                let c = self.push(op, &[c1, c2], Attrs::new()).unwrap();
                let e = self.push("tanh", &[c], Attrs::new()).unwrap();
                self.push("mul", &[x, e], Attrs::new());
            }
            17 => {
                let y = self.pick(|t| t.dtype == dt).unwrap_or(x);
                let op = self.rng.pick(&["gt", "lt", "eq", "ge"]);
                if let Some(c) = self.push(op, &[x, y], Attrs::new()) {
                    self.push("where", &[c, x, y], Attrs::new());
                }
            }
            18 => {
                let axis = self.rng.below(rank + 1) as i64;
                let u = self
                    .push("unsqueeze", &[x], Attrs::new().with("axes", vec![axis]))
                    .unwrap();
                let e = self.push("exp", &[u], Attrs::new()).unwrap();
                self.push("squeeze", &[e], Attrs::new().with("axes", vec![axis]));
            }
            _ => {
                // Commuted duplicates: a op b and b op a.
                let y = self.pick(|t| t.dtype == dt).unwrap_or(x);
                let op = self.rng.pick(&["add", "mul", "max", "min"]);
                let p = self.push(op, &[x, y], Attrs::new());
                let q = self.push(op, &[y, x], Attrs::new());
                if let (Some(p), Some(q)) = (p, q) {
                    self.push("sub", &[p, q], Attrs::new());
                }
            }
        }
    }
}

/// A random graph and inputs for it.
pub fn random_graph(seed: u64) -> (Graph, Vec<HostTensor>) {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5DEE_CE66);
    let mut gen = Gen {
        rng: &mut rng,
        b: GraphBuilder::new(format!("random{seed}")),
        pool: Vec::new(),
    };
    let mut types = Vec::new();
    for k in 0..gen.rng.range(1, 3) {
        let dt = gen
            .rng
            .pick(&[DType::F32, DType::F32, DType::F32, DType::F64, DType::F16]);
        let s = if k > 0 && gen.rng.chance(0.5) {
            types
                .last()
                .map(|t: &TensorType| t.dims().to_vec())
                .unwrap()
        } else {
            gen.shape()
        };
        let ty = TensorType::new(dt, s);
        let v = gen.b.input(format!("in{k}"), ty.clone());
        gen.pool.push(v);
        types.push(ty);
    }
    for _ in 0..gen.rng.range(6, 22) {
        gen.step();
    }
    // Outputs: the last value, and about half of the other values nobody
    // reads (so most of the graph is live and DCE does not dominate).
    let mut outs = vec![*gen.pool.last().unwrap()];
    let uses = rlx_opt::rebuild::use_counts(gen.b.graph());
    for &v in &gen.pool[..gen.pool.len() - 1] {
        let is_input = gen.b.graph().inputs.contains(&v);
        if uses[v.index()] == 0 && !is_input && outs.len() < 5 && gen.rng.chance(0.5) {
            outs.push(v);
        }
    }
    let g = gen.b.finish(&outs).unwrap();
    let inputs = types
        .iter()
        .map(|t| rng.tensor(t.dtype, t.dims()))
        .collect();
    (g, inputs)
}
