//! Algebraic simplification, as a table of [`Rule`]s ([`RULES`]).
//!
//! | rule | rewrite | condition |
//! |---|---|---|
//! | `mul_one_rhs`, `mul_one_lhs` | `x * 1`, `1 * x` → `x` | the constant is all ones and the result has `x`'s type (broadcasting may not grow `x`) |
//! | `add_zero_rhs`, `add_zero_lhs` | `x + 0`, `0 + x` → `x` | all zeros, same type condition |
//! | `sub_zero` | `x - 0` → `x` | all zeros, same type condition |
//! | `div_one` | `x / 1` → `x` | all ones, same type condition |
//! | `neg_neg` | `neg(neg(x))` → `x` | exact, integers included (wrapping is an involution) |
//! | `identity` | `identity(x)` → `x` | (`stop_gradient` is kept: it matters to autodiff) |
//! | `cast_noop` | `cast(x: d, d)` → `x` | |
//! | `cast_chain` | `cast(cast(x: a, b), c)` → `cast(x, c)` | `a → b` is exact ([`lossless`]): f16→f32→f64 shortens, f32→i32→f32 does not |
//! | `broadcast_noop` | `broadcast(x)` to `x`'s shape → `x` | |
//! | `reshape_noop` | `reshape`/`squeeze`/`unsqueeze` to `x`'s shape → `x` | |
//! | `reshape_chain` | `reshape(reshape(x))` (or squeeze/unsqueeze in any mix) → `reshape(x)` | |
//! | `movement_noop` | `narrow`, `pad`, `tile`, `concat` whose result has the type of input 0 → input 0 | (the full range, zero pads, repeats of 1, the other inputs empty) |
//! | `permute_noop` | `permute(x, identity)` → `x` | |
//! | `permute_chain` | `permute(permute(x, p), q)` → `permute(x, p∘q)` | (then `permute_noop` when the composition is the identity) |
//! | `batch_norm_into_conv` | `batch_norm(conv(x, w, b))` → `conv(x, w·k, (b − μ)·k + β)`, `k = s/√(σ²+eps)` | the weight, bias and norm parameters are constants, the conv is read only by the norm (`bn_fold.rs`) |
//! | `batch_norm_affine` | any other `batch_norm(x)` → `x·k + (β − μ·k)` | the norm parameters are constants (a multiply-add that fuses with its neighbours) |
//!
//! All rewrites are exact on the reference semantics, with two caveats:
//! IEEE `-0.0 + 0.0` is `+0.0`, so `x + 0 → x` may keep a `-0.0` that the
//! addition would have turned into `+0.0` (numerically equal); and the
//! folded batch norm rounds its new weights to the weight's dtype once.
//! Replacements are emitted through the rules again, and nodes made dead
//! are left for DCE.

use crate::error::OptError;
use crate::pass::Pass;
use crate::rules::{Candidate, Emitter, Rule, RuleCx, RuleSet};
use rlx_ir::shape::normalize_axis;
use rlx_ir::{Attrs, DType, Graph, ValueId};

/// Whether every value of `from` converts exactly to `to` and back, so
/// that `cast(cast(x, to), c) == cast(x, c)` for every `c` (the reference
/// casts are functions of the numeric value).
pub fn lossless(from: DType, to: DType) -> bool {
    use DType::*;
    if from == to {
        return true;
    }
    match from {
        Bool => matches!(to, I8 | U8 | I16 | I32 | I64 | F16 | BF16 | F32 | F64),
        I8 | U8 => matches!(to, I16 | I32 | I64 | F16 | BF16 | F32 | F64),
        I16 => matches!(to, I32 | I64 | F32 | F64),
        I32 => matches!(to, I64 | F64),
        F16 | BF16 => matches!(to, F32 | F64),
        F32 => to == F64,
        _ => false,
    }
}

/// `v` is a constant whose every element equals `want`.
pub(crate) fn constant_all(cx: &RuleCx, v: ValueId, want: f64) -> bool {
    cx.constant(v)
        .filter(|t| t.dtype().is_numeric())
        .and_then(|t| t.to_f64_vec().ok())
        .is_some_and(|xs| xs.iter().all(|&x| x == want))
}

/// Input `const_at` of a binary node is a constant filled with `want`, and
/// the other operand already has the result's type.
fn neutral(cx: &RuleCx, c: &Candidate, const_at: usize, want: f64) -> bool {
    let x = c.inputs[1 - const_at];
    constant_all(cx, c.inputs[const_at], want) && cx.ty(x) == &c.out_types[0]
}

fn forward0(_: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    Ok(vec![c.inputs[0]])
}
fn forward1(_: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    Ok(vec![c.inputs[1]])
}

/// The node's single output has the type of input 0.
pub(crate) fn same_type_as_input(cx: &RuleCx, c: &Candidate) -> bool {
    !c.inputs.is_empty() && c.out_types.len() == 1 && cx.ty(c.inputs[0]) == &c.out_types[0]
}

/// The producer of input 0's input 0 (`x` in `f(g(x))`).
fn inner_input(em: &Emitter, c: &Candidate) -> Result<ValueId, OptError> {
    em.cx()
        .producer(c.inputs[0])
        .and_then(|n| n.inputs.first().copied())
        .ok_or_else(|| OptError::pass("simplify", "pattern producer vanished"))
}

fn neg_neg(cx: &RuleCx, c: &Candidate) -> bool {
    cx.producer_if(c.inputs[0], "neg").is_some()
}
fn neg_neg_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    Ok(vec![inner_input(em, c)?])
}

fn cast_chain(cx: &RuleCx, c: &Candidate) -> bool {
    cx.producer_if(c.inputs[0], "cast")
        .is_some_and(|p| lossless(cx.ty(p.inputs[0]).dtype, cx.ty(c.inputs[0]).dtype))
}
fn cast_chain_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let x = inner_input(em, c)?;
    let to = c.out_types[0].dtype;
    em.emit("cast", &[x], Attrs::new().with("dtype", to))
}

const RESHAPES: &[&str] = &["reshape", "squeeze", "unsqueeze"];

fn reshape_chain(cx: &RuleCx, c: &Candidate) -> bool {
    cx.producer(c.inputs[0])
        .is_some_and(|p| RESHAPES.contains(&p.op.name()))
}
fn reshape_chain_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let x = inner_input(em, c)?;
    let shape: Vec<i64> = c.out_types[0].dims().iter().map(|&d| d as i64).collect();
    em.emit("reshape", &[x], Attrs::new().with("shape", shape))
}

/// The `perm` attribute with negative axes resolved.
pub(crate) fn perm_of(attrs: &Attrs, rank: usize) -> Option<Vec<usize>> {
    attrs
        .ints("perm")
        .ok()?
        .iter()
        .map(|&p| normalize_axis(p, rank).ok())
        .collect()
}

/// `permute` with the identity permutation.
pub(crate) fn permute_noop(cx: &RuleCx, c: &Candidate) -> bool {
    perm_of(&c.attrs, cx.ty(c.inputs[0]).rank())
        .is_some_and(|p| p.iter().enumerate().all(|(i, &a)| i == a))
}

fn permute_chain(cx: &RuleCx, c: &Candidate) -> bool {
    cx.producer_if(c.inputs[0], "permute").is_some()
}
fn permute_chain_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let cx = em.cx();
    let inner = cx
        .producer(c.inputs[0])
        .ok_or_else(|| OptError::pass("simplify", "pattern producer vanished"))?;
    let x = inner.inputs[0];
    let rank = cx.ty(x).rank();
    let bad = || OptError::pass("simplify", "malformed perm");
    let p = perm_of(&inner.attrs, rank).ok_or_else(bad)?;
    let q = perm_of(&c.attrs, rank).ok_or_else(bad)?;
    // out.dims[i] = mid.dims[q[i]] = x.dims[p[q[i]]].
    let composed: Vec<i64> = q.iter().map(|&i| p[i] as i64).collect();
    em.emit("permute", &[x], Attrs::new().with("perm", composed))
}

/// The simplification rules, tried in this order.
pub static RULES: &[Rule] = &[
    Rule {
        name: "mul_one_rhs",
        ops: &["mul"],
        matches: |cx, c| neutral(cx, c, 1, 1.0),
        replace: forward0,
        doc: "x * 1 → x",
    },
    Rule {
        name: "mul_one_lhs",
        ops: &["mul"],
        matches: |cx, c| neutral(cx, c, 0, 1.0),
        replace: forward1,
        doc: "1 * x → x",
    },
    Rule {
        name: "add_zero_rhs",
        ops: &["add"],
        matches: |cx, c| neutral(cx, c, 1, 0.0),
        replace: forward0,
        doc: "x + 0 → x",
    },
    Rule {
        name: "add_zero_lhs",
        ops: &["add"],
        matches: |cx, c| neutral(cx, c, 0, 0.0),
        replace: forward1,
        doc: "0 + x → x",
    },
    Rule {
        name: "sub_zero",
        ops: &["sub"],
        matches: |cx, c| neutral(cx, c, 1, 0.0),
        replace: forward0,
        doc: "x - 0 → x",
    },
    Rule {
        name: "div_one",
        ops: &["div"],
        matches: |cx, c| neutral(cx, c, 1, 1.0),
        replace: forward0,
        doc: "x / 1 → x",
    },
    Rule {
        name: "neg_neg",
        ops: &["neg"],
        matches: neg_neg,
        replace: neg_neg_replace,
        doc: "neg(neg(x)) → x",
    },
    Rule {
        name: "identity",
        ops: &["identity"],
        matches: |_, _| true,
        replace: forward0,
        doc: "identity(x) → x",
    },
    Rule {
        name: "cast_noop",
        ops: &["cast"],
        matches: same_type_as_input,
        replace: forward0,
        doc: "cast to x's own dtype → x",
    },
    Rule {
        name: "cast_chain",
        ops: &["cast"],
        matches: cast_chain,
        replace: cast_chain_replace,
        doc: "cast(cast(x, b), c) → cast(x, c) when x → b is exact",
    },
    Rule {
        name: "broadcast_noop",
        ops: &["broadcast"],
        matches: same_type_as_input,
        replace: forward0,
        doc: "broadcast to x's own shape → x",
    },
    Rule {
        name: "reshape_noop",
        ops: RESHAPES,
        matches: same_type_as_input,
        replace: forward0,
        doc: "reshape/squeeze/unsqueeze to x's own shape → x",
    },
    Rule {
        name: "reshape_chain",
        ops: RESHAPES,
        matches: reshape_chain,
        replace: reshape_chain_replace,
        doc: "reshape(reshape(x)) → reshape(x) (squeeze/unsqueeze count as reshapes)",
    },
    Rule {
        name: "movement_noop",
        ops: &["narrow", "pad", "tile", "concat"],
        matches: same_type_as_input,
        replace: forward0,
        doc: "narrow/pad/tile/concat that leaves input 0 as it is → input 0",
    },
    Rule {
        name: "permute_noop",
        ops: &["permute"],
        matches: permute_noop,
        replace: forward0,
        doc: "permute(x, identity) → x",
    },
    Rule {
        name: "permute_chain",
        ops: &["permute"],
        matches: permute_chain,
        replace: permute_chain_replace,
        doc: "permute(permute(x, p), q) → permute(x, p∘q)",
    },
    crate::bn_fold::BATCH_NORM_INTO_CONV,
    crate::bn_fold::BATCH_NORM_AFFINE,
];

/// The simplification pass ([`RULES`] as a [`RuleSet`] named `simplify`).
#[derive(Clone, Debug)]
pub struct Simplify {
    rules: RuleSet,
}

impl Default for Simplify {
    fn default() -> Self {
        Self::new()
    }
}

impl Simplify {
    /// The standard rules.
    pub fn new() -> Self {
        Simplify {
            rules: RuleSet::new("simplify", RULES.to_vec()),
        }
    }
    /// The underlying rule set (to add rules or count firings).
    pub fn rule_set(&mut self) -> &mut RuleSet {
        &mut self.rules
    }
    /// Simplify `g`; also returns how often each rule fired.
    pub fn apply(
        &self,
        g: &Graph,
    ) -> Result<(Graph, std::collections::BTreeMap<&'static str, usize>), OptError> {
        self.rules.apply(g)
    }
}

impl Pass for Simplify {
    fn name(&self) -> &str {
        "simplify"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        self.rules.run(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dce::dce;
    use rlx_ir::{GraphBuilder, HostTensor, TensorType};

    fn f32t(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    /// Simplify then DCE; the op names left.
    fn run(g: &Graph) -> (Graph, Vec<&'static str>) {
        let (h, _) = Simplify::new().apply(g).unwrap();
        let h = dce(&h).unwrap();
        let ops = h.nodes.iter().map(|n| n.op.name()).collect();
        (h, ops)
    }

    fn filled(b: &mut GraphBuilder, v: f32, shape: &[usize]) -> ValueId {
        let n = shape.iter().product();
        b.constant(HostTensor::from_slice(&vec![v; n], shape.to_vec()).unwrap())
            .unwrap()
    }

    #[test]
    fn neutral_elements_on_either_side() {
        for (op, val, swap) in [
            ("mul", 1.0, false),
            ("mul", 1.0, true),
            ("add", 0.0, false),
            ("add", 0.0, true),
            ("sub", 0.0, false),
            ("div", 1.0, false),
        ] {
            let mut b = GraphBuilder::new("g");
            let x = b.input("x", f32t(&[2, 3]));
            let c = filled(&mut b, val, &[3]);
            let y = if swap {
                b.binary(op, c, x).unwrap()
            } else {
                b.binary(op, x, c).unwrap()
            };
            let g = b.finish(&[y]).unwrap();
            let (h, ops) = run(&g);
            assert!(ops.is_empty(), "{op} {swap}: {ops:?}");
            assert_eq!(h.outputs[0], h.inputs[0]);
        }
    }

    #[test]
    fn neutral_elements_that_broadcast_or_differ_stay() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", f32t(&[3]));
        let ones = filled(&mut b, 1.0, &[2, 3]); // grows x: must stay
        let grown = b.binary("mul", x, ones).unwrap();
        let twos = filled(&mut b, 2.0, &[3]);
        let scaled = b.binary("mul", x, twos).unwrap();
        let zero = filled(&mut b, 0.0, &[3]);
        let zsub = b.binary("sub", zero, x).unwrap(); // 0 - x is not x
        let one = filled(&mut b, 1.0, &[]);
        let inv = b.binary("div", one, x).unwrap(); // 1 / x is not x
        let g = b.finish(&[grown, scaled, zsub, inv]).unwrap();
        let (_, ops) = run(&g);
        assert_eq!(ops.iter().filter(|o| **o != "constant").count(), 4);
    }

    #[test]
    fn integer_neutral_elements() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::I32, [4]));
        let one = b.constant(HostTensor::scalar(1i32)).unwrap();
        let y = b.binary("mul", x, one).unwrap();
        let g = b.finish(&[y]).unwrap();
        assert!(run(&g).1.is_empty());
    }

    #[test]
    fn double_negation_identity_and_noops() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", f32t(&[2, 3]));
        let n1 = b.unary("neg", x).unwrap();
        let n2 = b.unary("neg", n1).unwrap();
        let i = b.unary("identity", n2).unwrap();
        let c = b
            .op1("cast", &[i], Attrs::new().with("dtype", DType::F32))
            .unwrap();
        let bc = b
            .op1("broadcast", &[c], Attrs::new().with("shape", vec![2i64, 3]))
            .unwrap();
        let r = b
            .op1("reshape", &[bc], Attrs::new().with("shape", vec![2i64, -1]))
            .unwrap();
        let nw = b
            .op1(
                "narrow",
                &[r],
                Attrs::new()
                    .with("axis", 1i64)
                    .with("start", 0i64)
                    .with("len", 3i64),
            )
            .unwrap();
        let sg = b.unary("stop_gradient", nw).unwrap();
        let g = b.finish(&[sg]).unwrap();
        let (h, ops) = run(&g);
        assert_eq!(ops, ["stop_gradient"]);
        assert_eq!(h.nodes[0].inputs[0], h.inputs[0]);
    }

    #[test]
    fn cast_chains_only_when_lossless() {
        let chain = |from: DType, mid: DType, to: DType| {
            let mut b = GraphBuilder::new("g");
            let x = b.input("x", TensorType::new(from, [4]));
            let m = b
                .op1("cast", &[x], Attrs::new().with("dtype", mid))
                .unwrap();
            let y = b.op1("cast", &[m], Attrs::new().with("dtype", to)).unwrap();
            let g = b.finish(&[y]).unwrap();
            run(&g).1.len()
        };
        assert_eq!(chain(DType::F16, DType::F32, DType::F64), 1);
        assert_eq!(chain(DType::F32, DType::F64, DType::F32), 0);
        assert_eq!(chain(DType::I8, DType::I32, DType::F32), 1);
        assert_eq!(chain(DType::F32, DType::I32, DType::F32), 2);
        assert_eq!(chain(DType::F32, DType::F16, DType::F32), 2);
        assert_eq!(chain(DType::I64, DType::F64, DType::I64), 2);
    }

    #[test]
    fn permute_and_reshape_chains() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", f32t(&[2, 3, 4]));
        let p = |b: &mut GraphBuilder, v, perm: Vec<i64>| {
            b.op1("permute", &[v], Attrs::new().with("perm", perm))
                .unwrap()
        };
        let a = p(&mut b, x, vec![1, 2, 0]); // [3,4,2]
        let back = p(&mut b, a, vec![2, 0, 1]); // identity overall
        let c = p(&mut b, x, vec![2, 1, 0]); // [4,3,2]
        let d = p(&mut b, c, vec![0, 2, 1]); // [4,2,3] = x.perm [2,0,1]
        let r1 = b
            .op1("reshape", &[x], Attrs::new().with("shape", vec![6i64, 4]))
            .unwrap();
        let u = b
            .op1("unsqueeze", &[r1], Attrs::new().with("axes", vec![0i64]))
            .unwrap();
        let r2 = b
            .op1("reshape", &[u], Attrs::new().with("shape", vec![24i64]))
            .unwrap();
        let g = b.finish(&[back, d, r2]).unwrap();
        let (h, ops) = run(&g);
        assert_eq!(ops, ["permute", "reshape"]);
        assert_eq!(h.outputs[0], h.inputs[0]);
        assert_eq!(h.nodes[0].attrs.ints("perm").unwrap(), [2, 0, 1]);
        assert_eq!(h.ty(h.outputs[1]).dims(), [4, 2, 3]);
        assert_eq!(h.nodes[1].inputs[0], h.inputs[0]);
    }

    #[test]
    fn rules_fire_inside_subgraphs() {
        let mut body = GraphBuilder::new("body");
        let c = body.input("c", f32t(&[]));
        let e = body.input("e", f32t(&[]));
        let n1 = body.unary("neg", e).unwrap();
        let n2 = body.unary("neg", n1).unwrap();
        let s = body.binary("add", c, n2).unwrap();
        let body = body.finish(&[s, s]).unwrap();
        let mut b = GraphBuilder::new("g");
        let init = b.input("init", f32t(&[]));
        let xs = b.input("xs", f32t(&[3]));
        let outs = b
            .op(
                "scan",
                &[init, xs],
                Attrs::new().with("body", body).with("num_carry", 1i64),
            )
            .unwrap();
        let g = b.finish(&outs).unwrap();
        let (h, fired) = Simplify::new().apply(&g).unwrap();
        assert_eq!(fired["neg_neg"], 1);
        let sub = crate::dce::dce(h.nodes[0].attrs.graph("body").unwrap()).unwrap();
        assert_eq!(sub.nodes.len(), 1);
    }
}
