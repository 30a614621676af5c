//! The [`Pass`] trait and the [`PassManager`] that runs a list of passes to
//! a bounded fixpoint, recording what each run did.

use crate::const_fold::{ConstFold, Evaluator};
use crate::cse::Cse;
use crate::dce::Dce;
use crate::equiv::graphs_identical;
use crate::error::OptError;
use crate::layout::Layout;
use crate::rebuild::count_nodes;
use crate::simplify::Simplify;
use rlx_ir::Graph;
use std::fmt;

/// A MIR → MIR transformation that preserves what the graph computes
/// (its inputs and outputs, in order and type, are never changed).
pub trait Pass {
    /// A short name for reports (`dce`, `cse`, ...).
    fn name(&self) -> &str;
    /// The transformed graph (a copy; `g` is untouched).
    fn run(&self, g: &Graph) -> Result<Graph, OptError>;
}

/// One run of one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassStat {
    /// Fixpoint round, from 1.
    pub round: usize,
    /// The pass's name.
    pub pass: String,
    /// Nodes before the run (sub-graph nodes included).
    pub nodes_before: usize,
    /// Nodes after the run.
    pub nodes_after: usize,
    /// Whether the graph changed at all (not only its node count).
    pub changed: bool,
}

/// What a [`PassManager`] run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Every pass run, in order.
    pub stats: Vec<PassStat>,
    /// Rounds run.
    pub rounds: usize,
    /// Whether the last round changed nothing (false: stopped at the bound).
    pub converged: bool,
    /// Nodes of the input graph.
    pub nodes_before: usize,
    /// Nodes of the result.
    pub nodes_after: usize,
}

impl PassReport {
    /// Nodes removed in total (negative when passes added nodes).
    pub fn removed(&self) -> isize {
        self.nodes_before as isize - self.nodes_after as isize
    }
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} -> {} nodes in {} round{}{}",
            self.nodes_before,
            self.nodes_after,
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            if self.converged {
                ""
            } else {
                " (stopped at the round limit)"
            }
        )?;
        for s in &self.stats {
            writeln!(
                f,
                "  round {} {:<12} {:>6} -> {:<6}{}",
                s.round,
                s.pass,
                s.nodes_before,
                s.nodes_after,
                if s.changed { " changed" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// Runs passes in order, round after round, until a whole round changes
/// nothing or `max_rounds` is reached. Every intermediate graph is verified.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    max_rounds: usize,
}

impl Default for PassManager {
    fn default() -> Self {
        Self::new()
    }
}

impl PassManager {
    /// No passes; at most 8 rounds.
    pub fn new() -> Self {
        PassManager {
            passes: Vec::new(),
            max_rounds: 8,
        }
    }

    /// Builder-style [`PassManager::add`].
    pub fn with(mut self, pass: impl Pass + 'static) -> Self {
        self.add(Box::new(pass));
        self
    }

    /// Append a pass.
    pub fn add(&mut self, pass: Box<dyn Pass>) {
        self.passes.push(pass);
    }

    /// Bound the number of rounds (at least 1).
    pub fn max_rounds(mut self, n: usize) -> Self {
        self.max_rounds = n.max(1);
        self
    }

    /// The passes' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Run to a fixpoint.
    pub fn run(&self, g: &Graph) -> Result<(Graph, PassReport), OptError> {
        self.run_observed(g, &mut |_, _| Ok(()))
    }

    /// Run to a fixpoint, calling `observe(pass name, graph)` after every
    /// pass run (tests use it to check each intermediate graph); an error
    /// from `observe` stops the run.
    pub fn run_observed(
        &self,
        g: &Graph,
        observe: &mut dyn FnMut(&str, &Graph) -> Result<(), String>,
    ) -> Result<(Graph, PassReport), OptError> {
        let mut report = PassReport {
            nodes_before: count_nodes(g),
            ..PassReport::default()
        };
        let mut cur = g.clone();
        for round in 1..=self.max_rounds {
            report.rounds = round;
            let mut round_changed = false;
            for p in &self.passes {
                let next = p.run(&cur)?;
                next.verify()
                    .map_err(|e| OptError::pass(p.name(), format!("invalid result: {e}")))?;
                if next.inputs.len() != cur.inputs.len()
                    || next.input_types() != cur.input_types()
                    || next.output_types() != cur.output_types()
                {
                    return Err(OptError::pass(
                        p.name(),
                        "changed the graph's inputs or outputs",
                    ));
                }
                observe(p.name(), &next).map_err(|e| OptError::pass(p.name(), e))?;
                let changed = !graphs_identical(&cur, &next);
                report.stats.push(PassStat {
                    round,
                    pass: p.name().to_string(),
                    nodes_before: count_nodes(&cur),
                    nodes_after: count_nodes(&next),
                    changed,
                });
                round_changed |= changed;
                cur = next;
            }
            if !round_changed {
                report.converged = true;
                break;
            }
        }
        report.nodes_after = count_nodes(&cur);
        Ok((cur, report))
    }
}

/// The standard cleanup pipeline: layout, simplify, cse, const_fold
/// (with `evaluator`, outputs of at most [`ConstFold::DEFAULT_MAX_ELEMENTS`]
/// elements), dce.
pub fn standard_pipeline(evaluator: impl Evaluator + 'static) -> PassManager {
    PassManager::new()
        .with(Layout::new())
        .with(Simplify::new())
        .with(Cse)
        .with(ConstFold::new(evaluator))
        .with(Dce)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{Attrs, DType, GraphBuilder, HostTensor, TensorType};

    struct Fail;
    impl Pass for Fail {
        fn name(&self) -> &str {
            "fail"
        }
        fn run(&self, g: &Graph) -> Result<Graph, OptError> {
            let mut h = g.clone();
            h.outputs.clear();
            Ok(h)
        }
    }

    fn sample() -> Graph {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [2, 3]));
        let one = b.constant(HostTensor::scalar(1.0f32)).unwrap();
        let y = b.binary("mul", x, one).unwrap();
        let p = b
            .op1("permute", &[y], Attrs::new().with("perm", vec![1i64, 0]))
            .unwrap();
        let q = b
            .op1("permute", &[p], Attrs::new().with("perm", vec![1i64, 0]))
            .unwrap();
        let e1 = b.unary("exp", q).unwrap();
        let e2 = b.unary("exp", q).unwrap();
        let s = b.binary("add", e1, e2).unwrap();
        let _dead = b.unary("tanh", s).unwrap();
        b.finish(&[s]).unwrap()
    }

    #[test]
    fn pipeline_reaches_a_fixpoint_and_reports() {
        let g = sample();
        let pm = standard_pipeline(|_: &Graph, _: &[HostTensor]| Err("no evaluator".to_string()));
        let (h, rep) = pm.run(&g).unwrap();
        assert!(rep.converged);
        // x*1, both permutes, the duplicate exp and the dead tanh are gone.
        assert_eq!(
            h.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>(),
            ["exp", "add"]
        );
        assert_eq!(rep.nodes_before, 8);
        assert_eq!(rep.nodes_after, 2);
        assert_eq!(rep.removed(), 6);
        let text = rep.to_string();
        assert!(text.contains("8 -> 2 nodes"), "{text}");
        // The last round changed nothing.
        let last = rep.rounds;
        assert!(rep
            .stats
            .iter()
            .filter(|s| s.round == last)
            .all(|s| !s.changed));
    }

    #[test]
    fn a_pass_that_breaks_the_interface_is_reported() {
        let err = PassManager::new().with(Fail).run(&sample()).unwrap_err();
        assert!(err.to_string().contains("pass `fail`"), "{err}");
    }

    #[test]
    fn observer_sees_every_run_and_round_bound_holds() {
        let g = sample();
        let mut seen = Vec::new();
        let pm = PassManager::new()
            .with(Simplify::new())
            .with(Dce)
            .max_rounds(1);
        let (_, rep) = pm
            .run_observed(&g, &mut |name, _| {
                seen.push(name.to_string());
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, ["simplify", "dce"]);
        assert_eq!(rep.rounds, 1);
        assert!(!rep.converged);
    }
}
