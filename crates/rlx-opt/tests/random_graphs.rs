//! Semantic preservation, property-tested: hundreds of seeded random MIR
//! graphs (elementwise ops with broadcasting, reductions, movement ops,
//! casts, matmul, softmax, layer_norm, constants — with x*1, x+0, double
//! permutes, reshape chains, cast chains and duplicate subexpressions
//! planted on purpose) are evaluated with the reference CPU interpreter
//! before and after every pass, and after the whole pipeline; the results
//! must agree (bitwise for integers and bools, 1e-5 relative for floats).
//! Each graph, before and after optimization, is also memory-planned, the
//! plan checked for overlaps, and run through an LIR simulator whose only
//! storage is the planned arena.

mod common;

use common::gen::random_graph;
use common::{cpu, execute, same_results};
use rlx_ir::{Graph, HostTensor};
use rlx_opt::{
    check_plan, plan_with_report, standard_pipeline, ConstFold, Cse, Dce, Layout, Pass, Simplify,
};
use std::collections::BTreeMap;

/// Graphs per run; `RLX_OPT_GRAPHS=N` runs more (or fewer, at least 500 is asserted).
const GRAPHS: u64 = 600;

#[derive(Default)]
struct Totals {
    graphs: usize,
    nodes_before: usize,
    nodes_after: usize,
    dead_in_original: usize,
    per_pass_removed: BTreeMap<String, isize>,
    per_pass_changed: BTreeMap<String, usize>,
    fired: BTreeMap<&'static str, usize>,
    naive: usize,
    arena_before: usize,
    arena_after: usize,
    in_place: usize,
    views: usize,
    rounds: usize,
}

fn check_plan_and_run(
    g: &Graph,
    inputs: &[HostTensor],
    want: &[HostTensor],
    what: &str,
) -> rlx_opt::MemoryReport {
    let (p, rep) = plan_with_report(g.clone()).unwrap_or_else(|e| panic!("{what}: plan: {e}"));
    check_plan(&p).unwrap_or_else(|e| panic!("{what}: plan check: {e}"));
    assert!(rep.arena_bytes <= rep.naive_bytes, "{what}: {rep}");
    assert!(rep.peak_bytes <= rep.arena_bytes, "{what}: {rep}");
    let got = execute(&p, inputs).unwrap_or_else(|e| panic!("{what}: LIR run: {e}"));
    same_results(want, &got).unwrap_or_else(|e| panic!("{what}: LIR run differs: {e}"));
    rep
}

#[test]
fn passes_preserve_semantics_on_random_graphs() {
    let passes: Vec<Box<dyn Pass>> = vec![
        Box::new(Dce),
        Box::new(Cse),
        Box::new(ConstFold::new(cpu)),
        Box::new(Simplify::new()),
        Box::new(Layout::new()),
    ];
    let pipeline = standard_pipeline(cpu);
    let mut t = Totals::default();
    let graphs = std::env::var("RLX_OPT_GRAPHS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(GRAPHS);
    for seed in 0..graphs {
        let (g, inputs) = random_graph(seed);
        let ctx = |what: &str| format!("seed {seed} ({what})\n{}", rlx_ir::text::print(&g));
        let want = cpu(&g, &inputs).unwrap_or_else(|e| panic!("{}: {e}", ctx("reference")));

        // Every pass on its own.
        for p in &passes {
            let h = p
                .run(&g)
                .unwrap_or_else(|e| panic!("{}: {e}", ctx(p.name())));
            h.verify().unwrap();
            assert_eq!(h.input_types(), g.input_types());
            let got = cpu(&h, &inputs).unwrap_or_else(|e| panic!("{}: {e}", ctx(p.name())));
            same_results(&want, &got).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}\nafter:\n{}",
                    ctx(p.name()),
                    rlx_ir::text::print(&h)
                )
            });
        }
        for fired in [
            Simplify::new().apply(&g).unwrap().1,
            Layout::new().apply(&g).unwrap().1,
        ] {
            for (rule, k) in fired {
                *t.fired.entry(rule).or_default() += k;
            }
        }

        // The pipeline, checked after every pass run.
        let (opt, rep) = pipeline
            .run_observed(&g, &mut |name, h| {
                let got = cpu(h, &inputs).map_err(|e| format!("{name}: {e}"))?;
                same_results(&want, &got)
                    .map_err(|e| format!("{e}\nafter:\n{}", rlx_ir::text::print(h)))
            })
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("pipeline")));
        let got = cpu(&opt, &inputs).unwrap();
        same_results(&want, &got).unwrap();
        for s in &rep.stats {
            *t.per_pass_removed.entry(s.pass.clone()).or_default() +=
                s.nodes_before as isize - s.nodes_after as isize;
            *t.per_pass_changed.entry(s.pass.clone()).or_default() += s.changed as usize;
        }
        t.rounds += rep.rounds;
        assert!(rep.converged, "{}: no fixpoint\n{rep}", ctx("pipeline"));

        // A second pipeline run changes nothing.
        let (again, _) = pipeline.run(&opt).unwrap();
        assert!(
            rlx_opt::equiv::graphs_identical(&opt, &again),
            "{}: not idempotent",
            ctx("pipeline")
        );

        // Memory planning, before and after optimization.
        let before = check_plan_and_run(&g, &inputs, &want, &ctx("plan original"));
        let after = check_plan_and_run(&opt, &inputs, &want, &ctx("plan optimized"));
        t.graphs += 1;
        t.nodes_before += g.nodes.len();
        t.nodes_after += opt.nodes.len();
        t.dead_in_original += g.nodes.len() - rlx_opt::dce::dce(&g).unwrap().nodes.len();
        t.naive += before.naive_bytes;
        t.arena_before += before.arena_bytes;
        t.arena_after += after.arena_bytes;
        t.in_place += after.in_place;
        t.views += after.views;
    }

    let removed = t.nodes_before - t.nodes_after;
    println!(
        "{} random graphs: {} nodes -> {} ({} removed, {:.1}%), {:.2} rounds on average",
        t.graphs,
        t.nodes_before,
        t.nodes_after,
        removed,
        100.0 * removed as f64 / t.nodes_before as f64,
        t.rounds as f64 / t.graphs as f64
    );
    let live = t.nodes_before - t.dead_in_original;
    println!(
        "of which dead code in the originals: {}; of the {live} live nodes, {} removed ({:.1}%) by the other passes",
        t.dead_in_original,
        live - t.nodes_after,
        100.0 * (live - t.nodes_after) as f64 / live as f64
    );
    println!("nodes removed per pass: {:?}", t.per_pass_removed);
    println!("pass runs that changed the graph: {:?}", t.per_pass_changed);
    println!("rule firings (single runs on the originals): {:?}", t.fired);
    println!(
        "memory: naive {} B; planned {} B unoptimized, {} B optimized; {} in-place buffers, {} views",
        t.naive, t.arena_before, t.arena_after, t.in_place, t.views
    );

    assert!(t.graphs >= 500);
    assert!(removed > 0);
    for rule in [
        "mul_one_rhs",
        "mul_one_lhs",
        "add_zero_rhs",
        "add_zero_lhs",
        "sub_zero",
        "div_one",
        "neg_neg",
        "identity",
        "cast_noop",
        "cast_chain",
        "broadcast_noop",
        "reshape_noop",
        "reshape_chain",
        "permute_chain",
        "commutative_order",
        "reduce_axes",
        "axis_nonnegative",
    ] {
        assert!(
            t.fired.get(rule).copied().unwrap_or(0) > 0,
            "rule {rule} never fired"
        );
    }
    for pass in ["layout", "simplify", "cse", "const_fold", "dce"] {
        assert!(
            t.per_pass_changed.get(pass).copied().unwrap_or(0) > 0,
            "{pass} never changed a graph"
        );
    }
    assert!(t.arena_after < t.naive);
}
