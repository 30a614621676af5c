//! The compile pipeline of the optimizer: cleanup to a fixpoint, fusion,
//! a last DCE — with what each step did and how many kernels the graph
//! launches before and after fusion.

use crate::autocast::{Autocast, AutocastReport};
use crate::const_fold::Evaluator;
use crate::cse::Cse;
use crate::dce::{dce, Dce};
use crate::error::OptError;
use crate::fuse::{Fuse, FuseReport};
use crate::memory::plan;
use crate::pass::{standard_pipeline, PassManager, PassReport, PassStat};
use crate::rebuild::count_nodes;
use rlx_ir::Graph;
use std::collections::BTreeMap;
use std::fmt;

/// What [`compile_pipeline`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineReport {
    /// Every pass run: the cleanup rounds, then `fuse` and `dce` (one more
    /// round); node counts of the input and the result.
    pub passes: PassReport,
    /// What fusion fired.
    pub fusion: FuseReport,
    /// Kernels the cleaned-up graph launches ([`kernel_count`]), before fusion.
    pub kernels_before: usize,
    /// Kernels of the result.
    pub kernels_after: usize,
    /// Ops of the cleaned-up graph before fusion (top level, by name).
    pub ops_before: BTreeMap<&'static str, usize>,
    /// Ops of the result.
    pub ops_after: BTreeMap<&'static str, usize>,
    /// What mixed precision did, when it was asked for.
    pub autocast: Option<AutocastReport>,
}

impl fmt::Display for PipelineReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.passes)?;
        writeln!(f, "{}", self.fusion)?;
        if let Some(a) = &self.autocast {
            write!(f, "{a}")?;
        }
        write!(
            f,
            "kernels: {} before fusion, {} after",
            self.kernels_before, self.kernels_after
        )
    }
}

/// Kernels `g` launches: the steps of its memory plan (nodes that become
/// views launch nothing), constants not counted.
pub fn kernel_count(g: &Graph) -> Result<usize, OptError> {
    let p = plan(g.clone())?;
    Ok(p.steps.iter().filter(|s| s.kernel != "constant").count())
}

/// Run layout, simplify, CSE, constant folding (through `evaluator`) and
/// DCE to a fixpoint, then [`Fuse`], then DCE. Returns the graph and the
/// report (the facade's compile calls this).
pub fn compile_pipeline(
    graph: &Graph,
    evaluator: impl Evaluator + 'static,
) -> Result<(Graph, PipelineReport), OptError> {
    compile_pipeline_with(graph, evaluator, None)
}

/// [`compile_pipeline`] with mixed precision: after the cleanup, the named
/// patterns are fused first (so autocast sees `layer_norm`, `attention`,
/// `matmul_bias_act`, ... and not their pieces), then [`Autocast`] runs,
/// then CSE and DCE, then the whole of [`Fuse`] (elementwise regions
/// form around the casts). f32 inputs read only through a 16-bit cast are
/// taken in that dtype ([`crate::autocast::narrow_inputs`]): the result's
/// interface differs there, and [`AutocastReport::narrowed`] lists them
/// for the caller to convert.
pub fn compile_pipeline_with(
    graph: &Graph,
    evaluator: impl Evaluator + 'static,
    autocast: Option<&Autocast>,
) -> Result<(Graph, PipelineReport), OptError> {
    let (clean, mut passes) = standard_pipeline(evaluator).run(graph)?;
    let kernels_before = kernel_count(&clean)?;
    let ops_before = clean.op_histogram();
    let mut steps: Vec<(&str, Graph)> = vec![];
    let mut amp = None;
    let (fused, fusion) = match autocast {
        None => Fuse::new().apply(&clean)?,
        Some(ac) => {
            let (patterns, first) = Fuse::new().without_regions().apply(&clean)?;
            let (cast, rep) = ac.apply(&patterns)?;
            cast.verify()?;
            let (tidy, _) = PassManager::new()
                .with(Cse)
                .with(Dce)
                .max_rounds(2)
                .run(&cast)?;
            let (tidy, narrowed) = crate::autocast::narrow_inputs(&tidy)?;
            let mut rep = rep;
            rep.narrowed = narrowed
                .into_iter()
                .map(|(i, d)| {
                    let v = tidy.inputs[i];
                    let name = tidy.values[v.index()]
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("in{i}"));
                    (i, name, d)
                })
                .collect();
            amp = Some(rep);
            let (fused, mut fusion) = Fuse::new().apply(&tidy)?;
            for (k, v) in first.fired {
                *fusion.fired.entry(k).or_default() += v;
            }
            fusion.rounds += first.rounds;
            steps.push(("fuse", patterns));
            steps.push(("autocast", tidy));
            (fused, fusion)
        }
    };
    fused.verify()?;
    let done = dce(&fused)?;
    steps.push(("fuse", fused));
    steps.push(("dce", done.clone()));
    let round = passes.rounds + 1;
    let mut before = &clean;
    for (name, after) in &steps {
        passes.stats.push(PassStat {
            round,
            pass: name.to_string(),
            nodes_before: count_nodes(before),
            nodes_after: count_nodes(after),
            changed: !crate::equiv::graphs_identical(before, after),
        });
        before = after;
    }
    passes.nodes_after = count_nodes(&done);
    let report = PipelineReport {
        passes,
        fusion,
        kernels_before,
        kernels_after: kernel_count(&done)?,
        ops_before,
        ops_after: done.op_histogram(),
        autocast: amp,
    };
    Ok((done, report))
}
