//! The rewrite-rule engine: rules are data.
//!
//! A [`Rule`] names the ops it applies to, a predicate over the node about
//! to be emitted (its [`Candidate`]) and the graph built so far
//! ([`RuleCx`]: types, producers, constants), and a replacement that emits
//! whatever should stand for the node through an [`Emitter`] and returns
//! the values that replace the node's outputs (which may be existing
//! values: `x * 1` returns `x`).
//!
//! A [`RuleSet`] is a table of rules run as a [`Pass`]: it rebuilds the
//! graph node by node, trying the rules whose `ops` list the node's op, in
//! table order; the first that matches replaces the node. Values emitted by
//! a replacement go through the rules again (to a bounded depth), so
//! `permute(permute(x))` becomes one permute, which, being the identity,
//! becomes `x` — in one run. Nodes left unused are for [`crate::dce`].
//!
//! The mechanism is not specific to simplification: a fusion pattern is a
//! rule whose `ops` is the root of the pattern (say `relu`), whose
//! predicate walks producers through [`RuleCx::producer`] (checking
//! [`RuleCx::uses`] for single use) and whose replacement emits the fused
//! op.

use crate::error::OptError;
use crate::pass::Pass;
use crate::rebuild::{map_subgraphs, use_counts, Rebuilder};
use rlx_ir::{Attrs, Graph, GraphBuilder, HostTensor, Node, Op, TensorType, ValueDef, ValueId};
use std::collections::BTreeMap;

/// The node a rule is asked about: its op, its inputs (values of the new
/// graph), attributes, and the output types it must keep.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The op.
    pub op: Op,
    /// Inputs, as values of the graph being built.
    pub inputs: Vec<ValueId>,
    /// Attributes (normalized: defaults present).
    pub attrs: Attrs,
    /// The output types any replacement must have.
    pub out_types: Vec<TensorType>,
}

/// Read access to the graph built so far.
pub struct RuleCx<'a> {
    graph: &'a Graph,
    uses: &'a [usize],
}

impl<'a> RuleCx<'a> {
    /// The graph built so far.
    pub fn graph(&self) -> &'a Graph {
        self.graph
    }
    /// The type of a value.
    pub fn ty(&self, v: ValueId) -> &'a TensorType {
        self.graph.ty(v)
    }
    /// The node that defines `v` (`None` for graph inputs).
    pub fn producer(&self, v: ValueId) -> Option<&'a Node> {
        match self.graph.values.get(v.index())?.def {
            ValueDef::Node { node, .. } => self.graph.nodes.get(node),
            ValueDef::Input(_) => None,
        }
    }
    /// The producer of `v` when its op is `op`.
    pub fn producer_if(&self, v: ValueId, op: &str) -> Option<&'a Node> {
        self.producer(v).filter(|n| n.op.name() == op)
    }
    /// The tensor of `v` when `v` is the output of a `constant` node.
    pub fn constant(&self, v: ValueId) -> Option<&'a HostTensor> {
        self.producer_if(v, "constant")?.attrs.tensor("value").ok()
    }
    /// An upper bound on how many times `v` is read in the finished graph:
    /// the uses, in the graph being rewritten, of the values `v` replaced.
    /// (Fusion rules check `uses(v) == 1` before absorbing `v`'s producer.)
    pub fn uses(&self, v: ValueId) -> usize {
        self.uses.get(v.index()).copied().unwrap_or(0)
    }
}

/// Whether a rule applies.
pub type MatchFn = fn(&RuleCx, &Candidate) -> bool;
/// Emit the replacement; returns one value per output of the candidate.
pub type ReplaceFn = fn(&mut Emitter, &Candidate) -> Result<Vec<ValueId>, OptError>;

/// One rewrite rule.
#[derive(Clone, Copy)]
pub struct Rule {
    /// Name, for statistics and errors.
    pub name: &'static str,
    /// The ops (of the root node) the rule is tried on.
    pub ops: &'static [&'static str],
    /// The predicate.
    pub matches: MatchFn,
    /// The replacement (called only when `matches` said yes).
    pub replace: ReplaceFn,
    /// What the rule does, one line (`x * 1 → x`).
    pub doc: &'static str,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({}: {})", self.name, self.doc)
    }
}

/// How deep replacements may re-enter the rules.
const MAX_DEPTH: usize = 16;

/// Emits nodes into the graph being built, applying the rules to each.
pub struct Emitter<'a> {
    builder: &'a mut GraphBuilder,
    rules: &'a [Rule],
    uses: &'a mut Vec<usize>,
    fired: &'a mut BTreeMap<&'static str, usize>,
    origin: Option<String>,
    depth: usize,
}

impl Emitter<'_> {
    /// Read access to the graph built so far.
    pub fn cx(&self) -> RuleCx<'_> {
        RuleCx {
            graph: self.builder.graph(),
            uses: self.uses,
        }
    }

    /// Emit `op(inputs) {attrs}`, itself subject to the rules.
    pub fn emit(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attrs: Attrs,
    ) -> Result<Vec<ValueId>, OptError> {
        let op = Op::named(op)?;
        let attrs = attrs.normalize(op.name(), op.attrs)?;
        let in_types: Vec<TensorType> = inputs.iter().map(|&v| self.cx().ty(v).clone()).collect();
        let out_types = rlx_ir::graph::infer(op, &in_types, &attrs)
            .map_err(|msg| OptError::Ir(rlx_ir::IrError::msg(format!("`{}`: {msg}", op.name()))))?;
        self.emit_candidate(Candidate {
            op,
            inputs: inputs.to_vec(),
            attrs,
            out_types,
        })
    }

    /// [`Emitter::emit`] for a single-output op.
    pub fn emit1(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attrs: Attrs,
    ) -> Result<ValueId, OptError> {
        let outs = self.emit(op, inputs, attrs)?;
        match outs.as_slice() {
            [v] => Ok(*v),
            _ => Err(OptError::Ir(rlx_ir::IrError::msg(format!(
                "`{op}` has {} outputs, expected one",
                outs.len()
            )))),
        }
    }

    /// Apply the first matching rule to `cand`, or append it as it is.
    pub fn emit_candidate(&mut self, cand: Candidate) -> Result<Vec<ValueId>, OptError> {
        if self.depth < MAX_DEPTH {
            let rules = self.rules;
            for rule in rules.iter().filter(|r| r.ops.contains(&cand.op.name())) {
                if !(rule.matches)(&self.cx(), &cand) {
                    continue;
                }
                self.depth += 1;
                let outs = (rule.replace)(self, &cand);
                self.depth -= 1;
                let outs = outs?;
                let types: Vec<&TensorType> = outs.iter().map(|&v| self.cx().ty(v)).collect();
                if types.len() != cand.out_types.len()
                    || types.iter().zip(&cand.out_types).any(|(a, b)| *a != b)
                {
                    return Err(OptError::Rule {
                        rule: rule.name.into(),
                        op: cand.op.name().into(),
                        msg: format!(
                            "replacement has types {types:?}, the node had {:?}",
                            cand.out_types
                        ),
                    });
                }
                *self.fired.entry(rule.name).or_insert(0) += 1;
                return Ok(outs);
            }
        }
        self.builder.set_origin(self.origin.clone());
        let outs = self.builder.push(cand.op, &cand.inputs, cand.attrs);
        self.builder.set_origin(None);
        let outs = outs?;
        self.uses.resize(self.builder.graph().values.len(), 0);
        Ok(outs)
    }
}

/// A named table of rules, run as a pass.
#[derive(Clone, Debug)]
pub struct RuleSet {
    name: &'static str,
    rules: Vec<Rule>,
}

impl RuleSet {
    /// A pass called `name` applying `rules` in order.
    pub fn new(name: &'static str, rules: Vec<Rule>) -> Self {
        RuleSet { name, rules }
    }

    /// The rules, in the order they are tried.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Add a rule after the existing ones.
    pub fn push(&mut self, rule: Rule) {
        self.rules.push(rule);
    }

    /// Rewrite `g` (and its sub-graphs); also returns how often each rule
    /// fired.
    pub fn apply(&self, g: &Graph) -> Result<(Graph, BTreeMap<&'static str, usize>), OptError> {
        let mut fired = BTreeMap::new();
        let g = self.apply_counting(g, &mut fired)?;
        Ok((g, fired))
    }

    fn apply_counting(
        &self,
        g: &Graph,
        fired: &mut BTreeMap<&'static str, usize>,
    ) -> Result<Graph, OptError> {
        let old_uses = use_counts(g);
        let mut r = Rebuilder::new(g);
        let mut uses = vec![0; r.graph().values.len()];
        for &v in &g.inputs {
            uses[r.get(v)?.index()] += old_uses[v.index()];
        }
        for node in &g.nodes {
            let inputs = r.inputs_of(node)?;
            let attrs = map_subgraphs(&node.attrs, &mut |sg| self.apply_counting(sg, fired))?;
            let cand = Candidate {
                op: node.op,
                inputs,
                attrs,
                out_types: node.outputs.iter().map(|&o| g.ty(o).clone()).collect(),
            };
            let mut em = Emitter {
                builder: r.builder(),
                rules: &self.rules,
                uses: &mut uses,
                fired,
                origin: node.origin.clone(),
                depth: 0,
            };
            let outs = em.emit_candidate(cand)?;
            r.bind_all(node, &outs)?;
            for (&o, &n) in node.outputs.iter().zip(&outs) {
                uses[n.index()] += old_uses[o.index()];
            }
        }
        r.finish()
    }
}

impl Pass for RuleSet {
    fn name(&self) -> &str {
        self.name
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        Ok(self.apply(g)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::DType;

    /// A toy pattern rule (not a valid rewrite): `relu(add(..))` whose add
    /// is used once becomes `tanh(add(..))` — it shows that a rule can
    /// look through producers and check use counts, as fusion will.
    fn single_use_add(cx: &RuleCx, c: &Candidate) -> bool {
        cx.producer_if(c.inputs[0], "add").is_some() && cx.uses(c.inputs[0]) == 1
    }
    fn to_tanh(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
        em.emit("tanh", &c.inputs, Attrs::new())
    }
    const RELU_OF_ADD: Rule = Rule {
        name: "relu_of_single_use_add",
        ops: &["relu"],
        matches: single_use_add,
        replace: to_tanh,
        doc: "test rule",
    };

    fn graph(shared: bool) -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [3]));
        let s = b.binary("add", x, x).unwrap();
        let r = b.unary("relu", s).unwrap();
        let outs = if shared { vec![r, s] } else { vec![r] };
        b.finish(&outs).unwrap()
    }

    #[test]
    fn rules_see_producers_and_use_counts() {
        let set = RuleSet::new("test", vec![RELU_OF_ADD]);
        let (h, fired) = set.apply(&graph(false)).unwrap();
        assert_eq!(h.nodes[1].op.name(), "tanh");
        assert_eq!(fired["relu_of_single_use_add"], 1);
        let (h, fired) = set.apply(&graph(true)).unwrap();
        assert_eq!(h.nodes[1].op.name(), "relu");
        assert!(fired.is_empty());
    }

    #[test]
    fn a_rule_returning_the_wrong_type_is_an_error() {
        fn bad(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
            Ok(vec![em.emit1(
                "cast",
                &c.inputs,
                Attrs::new().with("dtype", DType::F64),
            )?])
        }
        let set = RuleSet::new(
            "bad",
            vec![Rule {
                name: "bad",
                ops: &["relu"],
                matches: |_, _| true,
                replace: bad,
                doc: "wrong type",
            }],
        );
        let err = set.apply(&graph(false)).unwrap_err();
        assert!(matches!(err, OptError::Rule { .. }), "{err}");
    }

    #[test]
    fn runaway_rules_stop_at_the_depth_bound() {
        // A rule that re-emits its own node forever.
        fn again(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
            em.emit(c.op.name(), &c.inputs, c.attrs.clone())
        }
        let set = RuleSet::new(
            "loop",
            vec![Rule {
                name: "loop",
                ops: &["relu"],
                matches: |_, _| true,
                replace: again,
                doc: "never ends",
            }],
        );
        let (h, fired) = set.apply(&graph(false)).unwrap();
        assert_eq!(h.nodes.len(), 2);
        assert_eq!(fired["loop"], MAX_DEPTH);
    }
}
