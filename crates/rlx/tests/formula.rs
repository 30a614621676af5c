//! The ops defined by a scalar formula (`rlx_ir::Lowering::Formula`) on the
//! CPU the way users compile them: the optimizer inlines the formula and
//! fuses it into one region, which the fast engine runs natively; the
//! results match the committed reference vectors (SciPy). Every formula
//! op is covered without a test of its own.

use rlx::conformance::{engine, exact, is_formula, run_file_on, vector_files, Extra};
use rlx::{CompileOptions, Device, DispatchOptions, Graph, Policy};
use std::path::Path;

fn vectors() -> Vec<serde_json::Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/ops");
    vector_files(&dir, is_formula).unwrap()
}

#[test]
fn formula_ops_match_the_vectors_compiled_for_the_cpu() {
    rlx::init();
    let opts = CompileOptions {
        dispatch: DispatchOptions::new(Policy::NativeOnly),
        ..Default::default()
    };
    let cpu = engine(Device::Cpu, opts);
    let x = Extra {
        label: " (cpu, compiled)",
        runs: &|_| true,
        engine: &cpu,
        tol: &exact,
    };
    let files = vectors();
    for f in &files {
        let r = run_file_on(f, &x);
        assert!(r.failures.is_empty(), "{}", r.failures.join("\n"));
        assert_eq!(r.skipped, 0, "{}: cases refused on the CPU", r.op);
        assert!(r.runs > 0, "{}: no case ran", r.op);
    }
}

#[test]
fn a_formula_becomes_one_native_region() {
    rlx::init();
    for f in vectors() {
        let case = &f["cases"][0];
        let g: Graph = rlx::ir::text::parse(case["graph"].as_str().unwrap()).unwrap();
        let c = rlx::compile(&g, Device::Cpu).unwrap();
        let passes = c.pass_report().unwrap();
        assert_eq!(passes.fusion.fired.get("formula"), Some(&1), "{}", f["op"]);
        let ops: Vec<&str> = c
            .program()
            .steps
            .iter()
            .map(|s| s.kernel.as_str())
            .collect();
        assert_eq!(ops, ["fused_elementwise"], "{}: {ops:?}", f["op"]);
        let report = c.dispatch_report().to_string();
        assert!(report.contains("cpu::fast"), "{report}");
    }
}
