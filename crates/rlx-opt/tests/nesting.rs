//! Deeply nested control-flow regions through the whole path: text parse,
//! the optimizer pipeline and the CPU reference. Each used to redo the
//! work of every deeper level (copies of sub-regions, re-verification of
//! every sub-tree per level): depth 200 took seconds, 500 over a minute,
//! 5000 overflowed the stack. Now the work is near linear, and past
//! `limits().max_nesting_depth` every stage returns a typed limit error.
//! One test: it changes the process-wide limits.

use rlx_ir::{limits, set_limits, Graph, HostTensor, IrError, Limits};
use rlx_opt::OptError;
use std::time::{Duration, Instant};

/// `if` nested `depth` times in text form: each then-branch holds the next
/// `if`, the innermost computes exp, every else-branch negates.
fn nested_if_text(depth: usize) -> String {
    let mut s = String::new();
    for k in 0..depth {
        s.push_str(&format!(
            "graph @g{k}(%c: bool[], %x: f32[2]) {{\n  %r = if(%c, %c, %x) {{then_branch="
        ));
    }
    s.push_str("graph @leaf(%c: bool[], %x: f32[2]) {\n  %r = exp(%x)\n  return %r\n}");
    for _ in 0..depth {
        s.push_str(", else_branch=graph @e(%c: bool[], %x: f32[2]) {\n  %r = neg(%x)\n  return %r\n}}\n  return %r\n}");
    }
    s
}

fn cpu(g: &Graph, x: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    rlx_cpu::run_graph(g, x).map_err(|e| e.to_string())
}

/// Parse, optimize and run a nested program; returns the time taken.
fn parse_optimize_run(depth: usize) -> Duration {
    let start = Instant::now();
    let g = rlx_ir::text::parse(&nested_if_text(depth)).unwrap();
    let (h, _) = rlx_opt::compile_pipeline(&g, cpu).unwrap();
    let x = [
        HostTensor::scalar(true),
        HostTensor::from_slice(&[0.0f32, 1.0], [2]).unwrap(),
    ];
    let out = rlx_cpu::run_graph(&h, &x).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [1.0, std::f32::consts::E]);
    start.elapsed()
}

fn is_nesting_limit(e: &IrError) -> bool {
    matches!(e, IrError::Limit(l) if l.limit == "max_nesting_depth")
}

#[test]
fn nested_regions_are_fast_within_the_limit_and_typed_errors_beyond() {
    let t = parse_optimize_run(200);
    assert!(t < Duration::from_secs(1), "depth 200 took {t:?}");

    // Depth 500 under a raised limit: fast too (took over a minute).
    let default = limits();
    set_limits(Limits {
        max_nesting_depth: 600,
        ..default
    });
    let t = parse_optimize_run(500);
    let deep = rlx_ir::text::parse(&nested_if_text(300)).unwrap();
    set_limits(default);
    // Well under a second unloaded; the bound leaves room for a busy
    // machine and still fails the old behaviour (over a minute).
    assert!(t < Duration::from_secs(3), "depth 500 took {t:?}");

    // Past the default limit: a typed error from each stage, no overflow.
    let e = rlx_ir::text::parse(&nested_if_text(5000)).unwrap_err();
    assert!(is_nesting_limit(&e), "parse: {e}");
    match rlx_opt::compile_pipeline(&deep, cpu) {
        Err(OptError::Ir(e)) if is_nesting_limit(&e) => {}
        other => panic!("compile_pipeline: expected a nesting limit, got {other:?}"),
    }
    let x = [
        HostTensor::scalar(true),
        HostTensor::from_slice(&[0.0f32, 1.0], [2]).unwrap(),
    ];
    match rlx_cpu::run_graph(&deep, &x) {
        Err(rlx_cpu::CpuError::Ir(e)) if is_nesting_limit(&e) => {}
        other => panic!("run_graph: expected a nesting limit, got {other:?}"),
    }
}
