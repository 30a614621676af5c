//! Fusion preserves semantics, property-tested on seeded random graphs:
//!
//! * the random graphs of `random_graphs.rs` (as generated, with fused
//!   softmax/layer_norm, and expanded to primitives);
//! * graphs composed of fusable patterns in primitive form — softmax,
//!   log_softmax, layer/rms norm (decomposition and importer forms), gelu,
//!   gelu_tanh, silu, matmul epilogues, attention with every mask form,
//!   elementwise chains — mixed with near misses (wrong axis, wrong
//!   constant, row-varying bias) and with random intermediates made graph
//!   outputs (so patterns are not closed).
//!
//! Each graph `g` goes through `Fuse` (→ `h`) and `Unfuse` (→ `u`). `u`
//! must compute what `g` computes (1e-5 relative: the same primitives come
//! back), and `h` must too, compared in f64 (both graphs widened, so the
//! fused kernels' single rounding is not mistaken for a difference). The
//! tolerance there is 1e-4 relative: the fused ops use exact constants
//! (1/√2, eps = 1e-5, ...) where the primitives hold them rounded to the
//! graph's dtype, which a normalization of nearly equal values amplifies.
//! Wrong fusions (axis, constant, mask) differ by far more. `h` is also
//! memory-planned, the plan checked, and run through the arena-only LIR
//! simulator; and fusing `h` again must change nothing.

mod common;

use common::gen::random_graph;
use common::{close_results, cpu, execute, inputs_f64, inputs_for, same_results, to_f64, Rng};
use rlx_ir::decompose::expand_all;
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType, ValueId};
use rlx_opt::{kernel_count, Fuse, Pass, Unfuse};
use std::collections::BTreeMap;

/// Graphs per generator (both generators run this many).
const GRAPHS: u64 = 500;

#[derive(Default)]
struct Totals {
    graphs: usize,
    fired: BTreeMap<&'static str, usize>,
    regions: usize,
    region_ops: usize,
    kernels_before: usize,
    kernels_after: usize,
    in_place: usize,
}

/// Fuse, unfuse, and compare all three; accumulate statistics.
fn check(g: &Graph, inputs: &[HostTensor], what: &str, t: &mut Totals) {
    let ctx = || format!("{what}\n{}", rlx_ir::text::print(g));
    let (h, rep) = Fuse::new()
        .apply(g)
        .unwrap_or_else(|e| panic!("{}: fuse: {e}", ctx()));
    h.verify().unwrap();
    assert_eq!(h.input_types(), g.input_types());
    assert_eq!(h.output_types(), g.output_types());
    let u = Unfuse::new().run(&h).unwrap();
    assert!(u.nodes.iter().all(|n| !n.op.is_fused()));
    // Unfused: the primitives come back (those of `g`'s own fused ops too).
    let g_prims = expand_all(g).unwrap();
    let want_prims = cpu(&g_prims, inputs).unwrap_or_else(|e| panic!("{}: {e}", ctx()));
    same_results(&want_prims, &cpu(&u, inputs).unwrap()).unwrap_or_else(|e| {
        panic!(
            "{}: unfused result differs: {e}\nfused:\n{}",
            ctx(),
            rlx_ir::text::print(&h)
        )
    });
    // Fused, in f64.
    let wide_in = inputs_f64(inputs);
    let a = cpu(&to_f64(g), &wide_in).unwrap();
    let b = cpu(&to_f64(&h), &wide_in).unwrap();
    close_results(&a, &b, 1e-4, 1e-7).unwrap_or_else(|e| {
        panic!(
            "{}: fused result differs (f64): {e}\nfused:\n{}",
            ctx(),
            rlx_ir::text::print(&h)
        )
    });
    // Planned (regions in place where they can be), checked, and run
    // through the arena-only LIR simulator.
    let (p, mem) = rlx_opt::plan_with_report(h.clone()).unwrap();
    rlx_opt::check_plan(&p).unwrap_or_else(|e| panic!("{}: plan: {e}", ctx()));
    let planned = execute(&p, inputs).unwrap_or_else(|e| panic!("{}: LIR run: {e}", ctx()));
    same_results(&cpu(&h, inputs).unwrap(), &planned)
        .unwrap_or_else(|e| panic!("{}: planned run differs: {e}", ctx()));
    t.in_place += mem.in_place;
    // Fusing again changes nothing.
    let (again, rep2) = Fuse::new().apply(&h).unwrap();
    assert!(
        rlx_opt::equiv::graphs_identical(&h, &again),
        "{}: fusion is not idempotent ({rep2})",
        ctx()
    );
    t.graphs += 1;
    for (k, v) in rep.fired {
        *t.fired.entry(k).or_default() += v;
    }
    t.regions += rep.regions;
    t.region_ops += rep.region_ops;
    t.kernels_before += kernel_count(g).unwrap();
    t.kernels_after += kernel_count(&h).unwrap();
}

#[test]
fn fuse_and_unfuse_preserve_the_random_graphs() {
    let mut t = Totals::default();
    for seed in 0..GRAPHS {
        let (g, inputs) = random_graph(seed);
        check(&g, &inputs, &format!("seed {seed}"), &mut t);
        let e = expand_all(&g).unwrap();
        check(&e, &inputs, &format!("seed {seed} (expanded)"), &mut t);
    }
    println!(
        "{} random graphs (as generated and expanded): fired {:?}; {} regions of {} ops; kernels {} -> {}; {} in-place buffers",
        t.graphs, t.fired, t.regions, t.region_ops, t.kernels_before, t.kernels_after, t.in_place
    );
    assert!(t.graphs >= 1000);
    for rule in ["softmax", "log_softmax", "layer_norm_shift", "matmul_act"] {
        assert!(
            t.fired.get(rule).copied().unwrap_or(0) > 0,
            "{rule} never fired"
        );
    }
    assert!(t.regions > 0 && t.kernels_after < t.kernels_before);
}

// ------------------------------------------------ the pattern generator

struct Pat<'r> {
    rng: &'r mut Rng,
    b: GraphBuilder,
    dt: DType,
    pool: Vec<ValueId>,
}

impl Pat<'_> {
    fn c(&mut self, v: f64) -> ValueId {
        self.b.scalar(v, self.dt).unwrap()
    }
    fn u(&mut self, op: &str, x: ValueId) -> ValueId {
        self.b.unary(op, x).unwrap()
    }
    fn bin(&mut self, op: &str, a: ValueId, b: ValueId) -> ValueId {
        self.b.binary(op, a, b).unwrap()
    }
    fn op(&mut self, op: &str, ins: &[ValueId], attrs: Attrs) -> ValueId {
        self.b.op1(op, ins, attrs).unwrap()
    }
    fn konst(&mut self, dims: &[usize]) -> ValueId {
        let t = self.rng.tensor(self.dt, dims);
        self.b.constant(t).unwrap()
    }
    fn dims(&self, v: ValueId) -> Vec<usize> {
        self.b.ty(v).dims().to_vec()
    }
    fn pick(&mut self) -> ValueId {
        let n = self.pool.len();
        self.pool[n - 1 - self.rng.below(n.min(3))]
    }

    /// One block of primitives (or a fused op, expanded later), on a pool value.
    fn block(&mut self) {
        let x = self.pick();
        let d = self.dims(x);
        let rank = d.len();
        let axis = self.rng.below(rank) as i64;
        let last = *d.last().unwrap();
        let y = match self.rng.below(15) {
            0 => self.op("softmax", &[x], Attrs::new().with("axis", axis)),
            1 => {
                // Near miss: max and sum over different axes.
                let other = ((axis as usize + 1) % rank) as i64;
                let m = self.b.reduce_keep("reduce_max", x, &[axis]).unwrap();
                let df = self.bin("sub", x, m);
                let e = self.u("exp", df);
                let s = self.b.reduce_keep("reduce_sum", e, &[other]).unwrap();
                self.bin("div", e, s)
            }
            2 => self.op("log_softmax", &[x], Attrs::new().with("axis", axis)),
            3 | 4 => {
                let tail = d[axis as usize..].to_vec();
                let g = self.konst(&tail);
                let bt = self.konst(&tail);
                if self.rng.chance(0.5) {
                    self.op("layer_norm", &[x, g, bt], Attrs::new().with("axis", axis))
                } else {
                    let axes: Vec<i64> = (axis..rank as i64).collect();
                    let mean = self.b.reduce_keep("reduce_mean", x, &axes).unwrap();
                    let df = self.bin("sub", x, mean);
                    let two = self.c(2.0);
                    let sq = self.bin("pow", df, two);
                    let var = self.b.reduce_keep("reduce_mean", sq, &axes).unwrap();
                    let eps = self.c(1e-5);
                    let ve = self.bin("add", var, eps);
                    let sd = self.u("sqrt", ve);
                    let n = self.bin("div", df, sd);
                    let y = self.bin("mul", n, g);
                    self.bin("add", y, bt)
                }
            }
            5 => {
                let tail = d[axis as usize..].to_vec();
                let g = self.konst(&tail);
                self.op("rms_norm", &[x, g], Attrs::new().with("axis", axis))
            }
            6 => {
                let op = self.rng.pick(&["gelu", "gelu_tanh", "silu"]);
                self.op(op, &[x], Attrs::new())
            }
            7 => {
                // gelu with a constant that is close but wrong.
                let k = self.c(0.75);
                let u = self.bin("mul", x, k);
                let e = self.u("erf", u);
                let one = self.c(1.0);
                let t = self.bin("add", e, one);
                let h = self.c(0.5);
                let hx = self.bin("mul", x, h);
                self.bin("mul", hx, t)
            }
            8 => {
                let n = self.rng.range(1, 4);
                let w = self.konst(&[last, n]);
                let per_row = self.rng.chance(0.3) && rank >= 2;
                let bias_dims = if per_row {
                    vec![d[rank - 2], 1]
                } else {
                    vec![n]
                };
                let bias = self.konst(&bias_dims);
                let act = self
                    .rng
                    .pick(&["none", "relu", "gelu", "silu", "tanh", "sigmoid"]);
                if per_row {
                    let m = self.bin("matmul", x, w);
                    self.bin("add", m, bias)
                } else {
                    let a = Attrs::new().with("activation", act);
                    self.op("matmul_bias_act", &[x, w, bias], a)
                }
            }
            9 if rank >= 2 => self.attention(x),
            10 if rank >= 2 => self.packed_attention(x),
            11 if rank >= 2 => {
                // Two ropes sharing tables, on two projections of x.
                let (s, dim) = (d[rank - 2], d[rank - 1]);
                let w = self.konst(&[dim, 2 * dim]);
                let p = self.bin("matmul", x, w);
                let cos = self.konst(&[s, dim]);
                let sin = self.konst(&[s, dim]);
                let il = Attrs::new().with("interleaved", self.rng.chance(0.5));
                let e = self.u("tanh", p);
                let a = self.op("rope", &[p, cos, sin], il.clone());
                let b = self.op("rope", &[e, cos, sin], il);
                self.bin("add", a, b)
            }
            12 => {
                let up = self.konst(&d);
                let s = self.op("silu", &[x], Attrs::new());
                self.bin("mul", s, up)
            }
            _ => {
                let mut v = x;
                for _ in 0..self.rng.range(1, 4) {
                    v = if self.rng.chance(0.5) {
                        let op = self
                            .rng
                            .pick(&["tanh", "neg", "sigmoid", "exp", "abs", "sin"]);
                        self.u(op, v)
                    } else {
                        let op = self.rng.pick(&["add", "mul", "sub", "max"]);
                        let dv = self.dims(v);
                        let from = self.rng.below(dv.len() + 1);
                        let c = self.konst(&dv[from..]);
                        self.bin(op, v, c)
                    };
                }
                v
            }
        };
        self.pool.push(y);
    }

    /// Attention on three slices of one packed projection of x.
    fn packed_attention(&mut self, x: ValueId) -> ValueId {
        let dim = *self.dims(x).last().unwrap();
        let w = self.konst(&[dim, 3 * dim]);
        let qkv = self.bin("matmul", x, w);
        let parts: Vec<ValueId> = (0..3i64)
            .map(|i| {
                let a = Attrs::new()
                    .with("axis", -1i64)
                    .with("start", i * dim as i64)
                    .with("len", dim as i64);
                self.op("narrow", &[qkv], a)
            })
            .collect();
        let kind = self.rng.pick(&["none", "causal"]);
        self.op("attention", &parts, Attrs::new().with("mask_kind", kind))
    }

    /// Attention of x (…, S, D) with itself as q, k, v (through weights).
    fn attention(&mut self, x: ValueId) -> ValueId {
        let d = self.dims(x);
        let (r, s, dim) = (d.len(), d[d.len() - 2], d[d.len() - 1]);
        let proj = |p: &mut Self| {
            let w = p.konst(&[dim, dim]);
            p.bin("matmul", x, w)
        };
        let (q, k, v) = (proj(self), proj(self), proj(self));
        let kind = self
            .rng
            .pick(&["none", "causal", "sliding_window", "bias", "custom"]);
        let mut ins = vec![q, k, v];
        let mut attrs = Attrs::new().with("mask_kind", kind).with("window", 2i64);
        match kind {
            "bias" => ins.push(self.konst(&[s, s])),
            "custom" => {
                let keep: Vec<bool> = (0..s * s)
                    .map(|i| i % s == 0 || self.rng.chance(0.6))
                    .collect();
                ins.push(
                    self.b
                        .constant(HostTensor::from_slice(&keep, [s, s]).unwrap())
                        .unwrap(),
                );
            }
            _ => {}
        }
        if self.rng.chance(0.4) {
            attrs.set("scale", 0.3);
        }
        let _ = r;
        self.op("attention", &ins, attrs)
    }
}

/// A graph of patterns in primitive form, some intermediates made outputs.
fn pattern_graph(seed: u64) -> (Graph, Vec<HostTensor>) {
    let mut rng = Rng(seed ^ 0xF05E_F05E);
    let dt = if rng.chance(0.7) {
        DType::F32
    } else {
        DType::F64
    };
    let rank = rng.range(1, 3);
    let dims: Vec<usize> = (0..rank).map(|_| rng.range(1, 4)).collect();
    let mut p = Pat {
        rng: &mut rng,
        b: GraphBuilder::new(format!("patterns{seed}")),
        dt,
        pool: Vec::new(),
    };
    let x = p.b.input("x", TensorType::new(dt, dims));
    p.pool.push(x);
    for _ in 0..p.rng.range(2, 6) {
        p.block();
    }
    let out = *p.pool.last().unwrap();
    let g = p.b.finish(&[out]).unwrap();
    // Primitives everywhere but the ropes (which are paired, not rebuilt).
    let mut e = rlx_ir::decompose::expand_fused(&g, &|d| d.name != "rope").unwrap();
    // Make a few intermediates outputs: the patterns around them are not closed.
    let extra = p.rng.below(3);
    for _ in 0..extra {
        let node = &e.nodes[p.rng.below(e.nodes.len())];
        let v = node.outputs[0];
        if !e.outputs.contains(&v) {
            e.outputs.push(v);
        }
    }
    e.verify().unwrap();
    let inputs = inputs_for(&e, seed);
    (e, inputs)
}

#[test]
fn fuse_and_unfuse_preserve_pattern_graphs() {
    let mut t = Totals::default();
    for seed in 0..GRAPHS {
        let (g, inputs) = pattern_graph(seed);
        check(&g, &inputs, &format!("pattern seed {seed}"), &mut t);
    }
    println!(
        "{} pattern graphs: fired {:?}; {} regions of {} ops; kernels {} -> {}; {} in-place buffers",
        t.graphs, t.fired, t.regions, t.region_ops, t.kernels_before, t.kernels_after, t.in_place
    );
    assert!(t.graphs >= 500);
    for rule in [
        "softmax",
        "log_softmax",
        "rms_normalize",
        "rms_norm_scale",
        "layer_norm_center",
        "layer_norm_shift",
        "gelu",
        "gelu_tanh",
        "silu",
        "matmul_bias",
        "matmul_act",
        "attention",
        "packed_qkv_attention",
        "qk_rope",
        "swiglu",
    ] {
        assert!(
            t.fired.get(rule).copied().unwrap_or(0) > 0,
            "{rule} never fired"
        );
    }
    assert!(t.kernels_after < t.kernels_before);
}
