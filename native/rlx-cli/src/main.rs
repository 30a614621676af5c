//! `rlx`: the command-line tool.
//!
//! * `rlx ops [--json]` — every op kind: category, arity, dtypes, fused or
//!   not (with decomposition), which backends claim it.
//! * `rlx ir FILE` — parse a MIR text file, verify it, print it back.
//! * `rlx demo` — build a small MLP with the DSL, compile it for the CPU,
//!   print its IR, dispatch report and output.

use rlx::ir::{all_ops, text, OpDef};
use rlx::{DType, HostTensor, Trace};
use std::process::ExitCode;

const USAGE: &str = "usage: rlx <command>\n\n  ops [--json]   list every op kind\n  ir FILE        parse, verify and pretty-print a MIR text file\n  demo           build, compile and run a small MLP on the CPU\n";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ops") => ops(args.iter().any(|a| a == "--json")),
        Some("ir") => match args.get(1) {
            Some(f) => ir(f),
            None => Err("rlx ir: give a file".to_string()),
        },
        Some("demo") => demo(),
        Some("-h" | "--help" | "help") | None => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn dtype_list(d: &OpDef) -> String {
    if d.dtypes.is_empty() {
        "any".into()
    } else {
        d.dtypes
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn backends(d: &OpDef) -> Vec<&'static str> {
    let mut b = Vec::new();
    if rlx_cpu::has_kernel(d.name) {
        b.push("cpu");
    }
    b
}

fn ops(json: bool) -> Result<(), String> {
    let defs = all_ops();
    if json {
        let rows: Vec<serde_json::Value> = defs
            .iter()
            .map(|d| {
                serde_json::json!({
                    "kind": d.name,
                    "category": d.category,
                    "arity": d.arity.to_string(),
                    "dtypes": d.dtypes.iter().map(|t| t.name()).collect::<Vec<_>>(),
                    "attributes": d.attrs.iter().map(|a| serde_json::json!({"name": a.name, "kind": a.kind})).collect::<Vec<_>>(),
                    "fused": d.is_fused(),
                    "decomposition": d.is_fused().then_some("registered"),
                    "differentiable": d.grad,
                    "backends": backends(d),
                    "doc": d.doc,
                })
            })
            .collect();
        let out = serde_json::json!({"count": rows.len(), "ops": rows});
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "{:<18} {:<11} {:<5} {:<6} {:<8} dtypes",
        "kind", "category", "arity", "fused", "backends"
    );
    for d in &defs {
        let cat = serde_json::to_value(d.category)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        println!(
            "{:<18} {:<11} {:<5} {:<6} {:<8} {}",
            d.name,
            cat,
            d.arity.to_string(),
            if d.is_fused() { "yes" } else { "" },
            backends(d).join(","),
            dtype_list(d)
        );
    }
    println!("\n{} op kinds", defs.len());
    Ok(())
}

fn ir(path: &str) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let g = text::parse(&src).map_err(|e| format!("{path}:{e}"))?;
    println!("{}", text::print(&g));
    eprintln!(
        "{path}: ok — {} inputs, {} nodes, {} outputs",
        g.inputs.len(),
        g.nodes.len(),
        g.outputs.len()
    );
    Ok(())
}

fn demo() -> Result<(), String> {
    let e = |e: rlx::Error| e.to_string();
    // A 4 → 8 → 3 MLP with fixed weights, traced with the lazy DSL.
    let t = Trace::new("mlp");
    let x = t.input("x", DType::F32, [2, 4]);
    let w1: Vec<f32> = (0..32)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let w2: Vec<f32> = (0..24)
        .map(|i| ((i * 5 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let w1 = t.tensor(&w1, [4, 8]).map_err(e)?;
    let b1 = t.tensor(&[0.1f32; 8], [8]).map_err(e)?;
    let w2 = t.tensor(&w2, [8, 3]).map_err(e)?;
    let h = (x.matmul(&w1).map_err(e)? + &b1).gelu();
    let logits = h.matmul(&w2).map_err(e)?;
    let probs = logits.softmax(-1).map_err(e)?;
    let graph = t.finish(&[&probs]).map_err(e)?;

    println!("== MIR ==\n{}\n", text::print(&graph));
    let model = rlx::compile(&graph, rlx::Device::Cpu).map_err(e)?;
    println!("== dispatch (cpu) ==\n{}", model.dispatch_report());
    let input = HostTensor::from_slice(&[1.0f32, -0.5, 0.25, 2.0, 0.0, 1.0, -1.0, 0.5], [2, 4])
        .map_err(|e| e.to_string())?;
    let out = model.run(&[input]).map_err(e)?;
    let p = out[0].to_vec::<f32>().map_err(|e| e.to_string())?;
    println!("== output: softmax probabilities, 2 rows × 3 classes ==");
    for row in p.chunks(3) {
        println!(
            "  [{}]  (sum {:.6})",
            row.iter()
                .map(|v| format!("{v:.6}"))
                .collect::<Vec<_>>()
                .join(", "),
            row.iter().sum::<f32>()
        );
    }
    Ok(())
}
