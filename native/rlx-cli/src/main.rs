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

mod embed;
mod kernels;

const USAGE: &str = "usage: rlx <command>

  ops [--json]                     list every op kind
  ir FILE                          parse, verify and pretty-print a MIR text file
  dispatch FILE [--device D|D1,D2] [--policy P] [--op OP=P]... [--json]
                                   how each node would run (or every reason it cannot)
  compile FILE|@encoder-block|@minilm [--device D] [--print hir|mir|fusion|lir|plan|all] [--no-opt]
                                   the graph after each stage, the fusion, the memory plan
  kernels FILE|@encoder-block|@minilm [--device webgpu] [--lang wgsl|msl|hlsl|glsl|spirv] [--out DIR] [--dtype f16] [--coop] [--subgroups]
                                   every generated GPU kernel, translated with naga
  coverage                         the op-coverage table (markdown) from the backends' claims
  embed [--json] [--model DIR] TEXT...
                                   sentence embeddings with all-MiniLM-L6-v2
  bench minilm [--batches 1,2,4] [--seq 128] [--runs 30] [--warmup 3] [--json]
                                   MiniLM encoder forward latency on the CPU
  demo                             build, compile and run a small MLP on the CPU
  playground [--port N]            build and serve the playground on 127.0.0.1 (needs this
                                   source tree, node and npm: it runs scripts/playground)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The GPU backends (`vulkan`, `gpu`): registered for dispatch, coverage
    // and compile; a device is only opened when something compiles for it.
    rlx_wgpu::register();
    let result = match args.first().map(String::as_str) {
        Some("ops") => ops(args.iter().any(|a| a == "--json")),
        Some("ir") => match args.get(1) {
            Some(f) => ir(f),
            None => Err("rlx ir: give a file".to_string()),
        },
        Some("demo") => demo(),
        Some("dispatch") => dispatch(&args[1..]),
        Some("compile") => compile(&args[1..]),
        Some("kernels") => kernels::kernels(&args[1..]),
        Some("embed") => embed::embed(&args[1..]),
        Some("bench") => embed::bench(&args[1..]),
        Some("coverage") => {
            print!("{}", coverage());
            Ok(())
        }
        Some("playground") => playground(&args[1..]),
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

/// `rlx playground`: the web app is built from the npm package and served
/// by the repository's script; the binary only knows where its source tree is.
fn playground(args: &[String]) -> Result<(), String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/playground");
    if !script.exists() {
        return Err(format!(
            "{} not found: `rlx playground` runs from the rlx source tree it was built in",
            script.display()
        ));
    }
    let status = std::process::Command::new(&script)
        .args(args)
        .status()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} exited with {status}", script.display()))
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
                let mut row = d.to_json();
                row["decomposition"] = serde_json::json!(d.is_fused().then_some("registered"));
                row["backends"] = serde_json::json!(backends(d));
                row
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

/// `rlx dispatch FILE ...`: legalize a text graph and print the report.
fn dispatch(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut target = rlx::Target::Device(rlx::Device::Cpu);
    let mut opts = rlx::CompileOptions::default();
    let mut json = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--device" => {
                let v = it.next().ok_or("--device needs a value")?;
                target = if v.contains(',') || v.contains(':') {
                    rlx::Target::Route(rlx::DeviceRouter::parse(v)?)
                } else {
                    rlx::Target::Device(rlx::Device::parse(v)?)
                };
            }
            "--policy" => {
                opts.dispatch.policy =
                    rlx::Policy::parse(it.next().ok_or("--policy needs a value")?)?
            }
            "--op" => {
                let v = it.next().ok_or("--op needs OP=POLICY")?;
                let (op, p) = v.split_once('=').ok_or("--op needs OP=POLICY")?;
                opts.dispatch
                    .per_op
                    .insert(op.to_string(), rlx::Policy::parse(p)?);
            }
            "--json" => json = true,
            f if file.is_none() && !f.starts_with("--") => file = Some(f.to_string()),
            other => return Err(format!("rlx dispatch: unexpected argument `{other}`")),
        }
    }
    let path = file.ok_or("rlx dispatch: give a file")?;
    let src = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let g = text::parse(&src).map_err(|e| format!("{path}:{e}"))?;
    let m = rlx::compile_with(&g, target, &opts).map_err(|e| e.to_string())?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&m.dispatch_report().to_json())
                .map_err(|e| e.to_string())?
        );
    } else {
        println!("{}", m.dispatch_report());
    }
    Ok(())
}

/// A graph named on the command line: a MIR text file, `@encoder-block`
/// (the DSL-written MiniLM block) or `@minilm` (the HIR model, with its
/// outline).
pub(crate) fn graph_arg(file: &str) -> Result<(rlx::Graph, Option<String>), String> {
    let mut hir = None;
    let g = if file == "@encoder-block" {
        rlx_models::dsl_block::encoder_block(rlx_models::dsl_block::BlockShape::MINILM)
            .map_err(|e| e.to_string())?
    } else if file == "@minilm" {
        // all-MiniLM-L6-v2's architecture (weights are graph inputs), batch 1, seq 128.
        let cfg = rlx_models::bert::BertConfig::from_json(
            r#"{"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
                "intermediate_size": 1536, "max_position_embeddings": 512, "layer_norm_eps": 1e-12}"#,
        )
        .map_err(|e| e.to_string())?;
        let bert = rlx_models::bert::Bert::new(cfg, true);
        hir = Some(bert.model(1, 128).outline());
        bert.graph(1, 128).map_err(|e| e.to_string())?
    } else {
        let src = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        text::parse(&src).map_err(|e| format!("{file}:{e}"))?
    };
    Ok((g, hir))
}

/// `rlx compile`: run the compile pipeline and show each stage.
fn compile(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut device = rlx::Device::Cpu;
    let mut show: Vec<String> = Vec::new();
    let mut opts = rlx::CompileOptions::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--device" => device = rlx::Device::parse(it.next().ok_or("--device needs a value")?)?,
            "--print" => show.extend(
                it.next()
                    .ok_or("--print needs a stage")?
                    .split(',')
                    .map(String::from),
            ),
            "--no-opt" => opts.optimize = false,
            f if file.is_none() && !f.starts_with("--") => file = Some(f.to_string()),
            o => return Err(format!("rlx compile: unexpected argument `{o}`")),
        }
    }
    if show.is_empty() || show.iter().any(|s| s == "all") {
        show = ["hir", "mir", "fusion", "lir", "plan"]
            .map(String::from)
            .to_vec();
    }
    let file = file.ok_or("rlx compile: give a MIR file, @encoder-block (DSL) or @minilm (HIR)")?;
    let (g, hir) = graph_arg(&file)?;
    let m = rlx::compile_with(&g, device, &opts).map_err(|e| e.to_string())?;
    let p = m.program();
    let has = |s: &str| show.iter().any(|x| x == s);
    if has("hir") {
        match &hir {
            Some(h) => println!("== HIR ==\n{h}\n"),
            None => println!(
                "== HIR ==\n({file} was written as MIR or with the DSL; HIR exists for @minilm)\n"
            ),
        }
    }
    if has("mir") {
        println!(
            "== MIR (input): {} nodes ==\n{}\n",
            g.nodes.len(),
            text::print(&g)
        );
        println!(
            "== MIR (optimized, legalized for {}): {} nodes ==\n{}\n",
            m.device(),
            p.graph.nodes.len(),
            text::print(&p.graph)
        );
    }
    if has("fusion") {
        match m.pass_report() {
            Some(r) => println!("== passes and fusion ==\n{r}\n"),
            None => println!("== passes and fusion ==\n(optimizer off)\n"),
        }
    }
    if has("lir") {
        println!("== LIR: {} kernels ==", p.steps.len());
        for (i, s) in p.steps.iter().enumerate() {
            let ins: Vec<String> = s.inputs.iter().map(|v| format!("%{}", v.0)).collect();
            let outs: Vec<String> = s.outputs.iter().map(|v| format!("%{}", v.0)).collect();
            println!(
                "  {i:>3}  {:<20} ({}) -> {}",
                s.kernel,
                ins.join(", "),
                outs.join(", ")
            );
        }
        println!();
    }
    if has("plan") {
        println!("== memory plan ==\n{}", m.memory_report());
        println!("  {:>6}  {:>10}  {:>10}  value", "slot", "offset", "bytes");
        for s in &p.slots {
            println!(
                "  {:>6}  {:>10}  {:>10}  %{}: {}",
                format!("%{}", s.value.0),
                s.offset,
                s.bytes,
                s.value.0,
                s.ty
            );
        }
        for v in &p.views {
            println!(
                "  view    %{} of %{} at +{} strides {:?}",
                v.value.0, v.base.0, v.offset, v.strides
            );
        }
    }
    eprintln!(
        "{}: {} kernels, {}",
        g.name,
        m.kernel_count(),
        m.memory_report()
    );
    Ok(())
}

/// The op-coverage table: one row per op, one column per registered
/// backend (docs/op-coverage.md is this output, checked by a test).
fn coverage() -> String {
    rlx::init();
    let backends = rlx::custom::backends_sorted();
    let mut s = String::from("# Op coverage\n\nGenerated by `rlx coverage` from the backends' claims; a test fails when this file is stale.\n`native`: a kernel; `decomp`: runs through its registered decomposition; `rewrite`: a structural rewrite; `-`: cannot run; `off`: compiled out of this build.\n\n");
    let claims: Vec<_> = backends.iter().map(|b| (b.device(), b.claims())).collect();
    s.push_str("| op | category | fused |");
    for (d, _) in &claims {
        s.push_str(&format!(" {d} |"));
    }
    s.push_str("\n|---|---|---|");
    s.push_str(&"---|".repeat(claims.len()));
    s.push('\n');
    let defs = all_ops();
    for d in &defs {
        let cat = serde_json::to_value(d.category)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        s.push_str(&format!(
            "| `{}` | {} | {} |",
            d.name,
            cat,
            if d.is_fused() { "yes" } else { "" }
        ));
        for (_, c) in &claims {
            let cell = if c.ops.contains_key(d.name) {
                "native"
            } else if c.compiled_out.contains_key(d.name) {
                "off"
            } else if d.is_fused() {
                "decomp"
            } else if rlx::custom::has_rewrite(d.name) {
                "rewrite"
            } else {
                "-"
            };
            s.push_str(&format!(" {cell} |"));
        }
        s.push('\n');
    }
    for (dev, c) in &claims {
        s.push_str(&format!(
            "\n{dev}: {} of {} ops native\n",
            c.ops.len(),
            defs.len()
        ));
    }
    s
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
