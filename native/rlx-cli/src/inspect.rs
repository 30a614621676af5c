//! The commands that look at graphs without running a model: `ops`, `ir`,
//! `dispatch`, `compile`, `coverage`, and `demo`.

use crate::device::Env;
use crate::out::{CliError, CliResult, Out};
use clap::Args;
use rlx::ir::{all_ops, text, OpDef};
use rlx::{DType, HostTensor, Trace};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Reads a file whole, bounded by `max_file_bytes` (so `rlx ir /dev/zero`
/// fails at the limit instead of reading forever).
pub fn read_text(path: &Path) -> CliResult<String> {
    use rlx::ir::limits::ReadError;
    rlx::ir::limits::read_bounded_to_string(path).map_err(|e| {
        let exit = match e {
            ReadError::Limit(_) => crate::out::Exit::Limit,
            _ => crate::out::Exit::Input,
        };
        CliError::new(exit, e.to_string())
    })
}

/// Parses a MIR file: JSON when it ends in `.json`, text otherwise.
pub fn parse_graph(path: &Path) -> CliResult<rlx::Graph> {
    let src = read_text(path)?;
    let shown = path.display();
    if path.extension().is_some_and(|e| e == "json") {
        let v: serde_json::Value = serde_json::from_str(&src)
            .map_err(|e| CliError::input(format!("{shown}: not JSON: {e}")))?;
        rlx::Graph::from_json(&v).map_err(|e| CliError::input(format!("{shown}: {e}")))
    } else {
        text::parse(&src).map_err(|e| {
            let mut c = CliError::from(e);
            c.msg = format!("{shown}:{}", c.msg);
            c
        })
    }
}

/// A graph named on the command line: a MIR file, `@encoder-block` (the
/// DSL-written MiniLM block) or `@minilm` (the HIR model, with its outline).
pub fn graph_arg(file: &Path) -> CliResult<(rlx::Graph, Option<String>)> {
    let e = |e: rlx::Error| CliError::from(e);
    Ok(match file.to_str() {
        Some("@encoder-block") => (
            rlx_models::dsl_block::encoder_block(rlx_models::dsl_block::BlockShape::MINILM)
                .map_err(e)?,
            None,
        ),
        Some("@minilm") => {
            // all-MiniLM-L6-v2's architecture (weights are graph inputs), batch 1, seq 128.
            let cfg = rlx_models::bert::BertConfig::from_json(
                r#"{"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
                    "intermediate_size": 1536, "max_position_embeddings": 512, "layer_norm_eps": 1e-12}"#,
            )
            .map_err(|e| CliError::failure(e.to_string()))?;
            let bert = rlx_models::bert::Bert::new(cfg, true);
            let outline = bert.model(1, 128).outline();
            (
                bert.graph(1, 128)
                    .map_err(|e| CliError::failure(e.to_string()))?,
                Some(outline),
            )
        }
        _ => (parse_graph(file)?, None),
    })
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

fn category(d: &OpDef) -> String {
    serde_json::to_value(d.category)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

pub fn ops(json: bool) -> CliResult {
    let defs = all_ops();
    let mut o = Out::new();
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
        let v = serde_json::json!({"count": rows.len(), "ops": rows});
        serde_json::to_writer_pretty(&mut o, &v).map_err(std::io::Error::from)?;
        writeln!(o)?;
        return Ok(o.flush()?);
    }
    writeln!(
        o,
        "{:<18} {:<11} {:<5} {:<6} {:<8} dtypes",
        "kind", "category", "arity", "fused", "backends"
    )?;
    for d in &defs {
        writeln!(
            o,
            "{:<18} {:<11} {:<5} {:<6} {:<8} {}",
            d.name,
            category(d),
            d.arity.to_string(),
            if d.is_fused() { "yes" } else { "" },
            backends(d).join(","),
            dtype_list(d)
        )?;
    }
    writeln!(o, "\n{} op kinds", defs.len())?;
    Ok(o.flush()?)
}

pub fn ir(path: &Path) -> CliResult {
    let g = parse_graph(path)?;
    let mut o = Out::new();
    writeln!(o, "{}", text::print(&g))?;
    o.flush()?;
    eprintln!(
        "{}: ok — {} inputs, {} nodes, {} outputs",
        path.display(),
        g.inputs.len(),
        g.nodes.len(),
        g.outputs.len()
    );
    Ok(())
}

#[derive(Args)]
pub struct DispatchArgs {
    /// The model: a MIR file (text or .json) or an ONNX model (.onnx).
    file: PathBuf,
    #[command(flatten)]
    shape: crate::model::ShapeArgs,
    /// A device (cpu, vulkan, ...) or a chain (`vulkan,cpu`, `cheapest:vulkan,cpu`).
    #[arg(long, short = 'd')]
    device: Option<String>,
    /// The dispatch policy for every op (native_only, prefer_native, common_ir_only, ...).
    #[arg(long)]
    policy: Option<String>,
    /// A policy for one op: OP=POLICY (repeatable).
    #[arg(long = "op", value_name = "OP=POLICY")]
    ops: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn dispatch(a: DispatchArgs, env: &Env) -> CliResult {
    let mut opts = rlx::CompileOptions::default();
    let target = match a.device.as_deref().or(env.device.as_deref()) {
        None => rlx::Target::Device(rlx::Device::Cpu),
        Some(v) if v.contains(',') || v.contains(':') => {
            rlx::Target::Route(rlx::DeviceRouter::parse(v).map_err(CliError::usage)?)
        }
        Some(_) => {
            let flags = crate::RunFlags {
                device: a.device.clone(),
                threads: None,
            };
            rlx::Target::Device(crate::device::resolve(&flags, env)?)
        }
    };
    if let Some(p) = &a.policy {
        opts.dispatch.policy = rlx::Policy::parse(p).map_err(CliError::usage)?;
    }
    for v in &a.ops {
        let (op, p) = v
            .split_once('=')
            .ok_or_else(|| CliError::usage(format!("--op {v}: expected OP=POLICY")))?;
        opts.dispatch.per_op.insert(
            op.to_string(),
            rlx::Policy::parse(p).map_err(CliError::usage)?,
        );
    }
    let g = crate::model::load(&a.file, &a.shape, &[])?;
    let m = rlx::compile_with(&g, target, &opts)?;
    let mut o = Out::new();
    if a.json {
        serde_json::to_writer_pretty(&mut o, &m.dispatch_report().to_json())
            .map_err(std::io::Error::from)?;
        writeln!(o)?;
    } else {
        writeln!(o, "{}", m.dispatch_report())?;
    }
    Ok(o.flush()?)
}

#[derive(Args)]
pub struct CompileArgs {
    /// A MIR file, an ONNX model (.onnx), @encoder-block (the DSL-written
    /// MiniLM block) or @minilm (HIR).
    file: PathBuf,
    #[command(flatten)]
    shape: crate::model::ShapeArgs,
    #[command(flatten)]
    run: crate::RunFlags,
    #[command(flatten)]
    amp: crate::AmpFlag,
    /// Stages to print, comma-separated: hir, mir, fusion, lir, plan, all.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    print: Vec<Stage>,
    /// Skip the optimizer (fusion, CSE, folding).
    #[arg(long)]
    no_opt: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    Hir,
    Mir,
    Fusion,
    Lir,
    Plan,
    All,
}

pub fn compile(a: CompileArgs, env: &Env) -> CliResult {
    let device = crate::device::resolve(&a.run, env)?;
    let opts = rlx::CompileOptions {
        optimize: !a.no_opt,
        amp: a.amp.amp(),
        ..Default::default()
    };
    let (g, hir) = if crate::model::is_onnx(&a.file) {
        (crate::model::load(&a.file, &a.shape, &[])?, None)
    } else {
        graph_arg(&a.file)?
    };
    let m = rlx::compile_with(&g, device, &opts)?;
    let p = m.program();
    let has = |s: Stage| a.print.contains(&s) || a.print.contains(&Stage::All);
    let mut o = Out::new();
    if has(Stage::Hir) {
        match &hir {
            Some(h) => writeln!(o, "== HIR ==\n{h}\n")?,
            None => writeln!(
                o,
                "== HIR ==\n({} was written as MIR or with the DSL; HIR exists for @minilm)\n",
                a.file.display()
            )?,
        }
    }
    if has(Stage::Mir) {
        writeln!(
            o,
            "== MIR (input): {} nodes ==\n{}\n",
            g.nodes.len(),
            text::print(&g)
        )?;
        writeln!(
            o,
            "== MIR (optimized, legalized for {}): {} nodes ==\n{}\n",
            m.device(),
            p.graph.nodes.len(),
            text::print(&p.graph)
        )?;
    }
    if has(Stage::Fusion) {
        match m.pass_report() {
            Some(r) => writeln!(o, "== passes and fusion ==\n{r}\n")?,
            None => writeln!(o, "== passes and fusion ==\n(optimizer off)\n")?,
        }
    }
    if has(Stage::Lir) {
        writeln!(o, "== LIR: {} kernels ==", p.steps.len())?;
        for (i, s) in p.steps.iter().enumerate() {
            let ins: Vec<String> = s.inputs.iter().map(|v| format!("%{}", v.0)).collect();
            let outs: Vec<String> = s.outputs.iter().map(|v| format!("%{}", v.0)).collect();
            writeln!(
                o,
                "  {i:>3}  {:<20} ({}) -> {}",
                s.kernel,
                ins.join(", "),
                outs.join(", ")
            )?;
        }
        writeln!(o)?;
    }
    if has(Stage::Plan) {
        writeln!(o, "== memory plan ==\n{}", m.memory_report())?;
        writeln!(
            o,
            "  {:>6}  {:>10}  {:>10}  value",
            "slot", "offset", "bytes"
        )?;
        for s in &p.slots {
            writeln!(
                o,
                "  {:>6}  {:>10}  {:>10}  %{}: {}",
                format!("%{}", s.value.0),
                s.offset,
                s.bytes,
                s.value.0,
                s.ty
            )?;
        }
        for v in &p.views {
            writeln!(
                o,
                "  view    %{} of %{} at +{} strides {:?}",
                v.value.0, v.base.0, v.offset, v.strides
            )?;
        }
    }
    o.flush()?;
    eprintln!(
        "{}: {} kernels, {}",
        g.name,
        m.kernel_count(),
        m.memory_report()
    );
    Ok(())
}

/// The op-coverage table: one row per op, one column per registered
/// backend, and CUDA's (docs/op-coverage.md is this output, checked by a
/// test).
pub fn coverage() -> CliResult {
    rlx::init();
    let backends = rlx::custom::backends_sorted();
    let mut s = String::from("# Op coverage\n\nGenerated by `rlx coverage` from the backends' claims (op × dtype); a test fails when this file is stale. Limits the claims cannot express (shapes, attributes, region ops) are each backend's `select`, asked per node at legalization: the dispatch report shows a node it refused and why (`↳ not native: ...`).\n`native`: a kernel; `formula`: defined by a scalar formula, which the optimizer inlines into a fused region (one native kernel; a graph compiled without the optimizer runs the formula's ops); `decomp`: runs through its registered decomposition; `rewrite`: a structural rewrite; `-`: cannot run; `off`: compiled out of this build.\n\n");
    #[allow(unused_mut)]
    let mut claims: Vec<_> = backends.iter().map(|b| (b.device(), b.claims())).collect();
    // CUDA registers only when asked for (it opens libcuda), but its claims
    // need no GPU: the column is there whether or not this machine has one.
    #[cfg(feature = "cuda")]
    if !claims.iter().any(|(d, _)| *d == rlx::Device::Cuda) {
        claims.push((rlx::Device::Cuda, rlx_cuda::claims()));
    }
    s.push_str("| op | category | fused |");
    for (d, _) in &claims {
        s.push_str(&format!(" {d} |"));
    }
    s.push_str("\n|---|---|---|");
    s.push_str(&"---|".repeat(claims.len()));
    s.push('\n');
    let defs = all_ops();
    for d in &defs {
        s.push_str(&format!(
            "| `{}` | {} | {} |",
            d.name,
            category(d),
            if d.is_formula() {
                "formula"
            } else if d.is_fused() {
                "yes"
            } else {
                ""
            }
        ));
        for (_, c) in &claims {
            let cell = if c.ops.contains_key(d.name) {
                "native"
            } else if c.compiled_out.contains_key(d.name) {
                "off"
            } else if d.is_formula() {
                "formula"
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
    let mut o = Out::new();
    write!(o, "{s}")?;
    Ok(o.flush()?)
}

pub fn demo() -> CliResult {
    // A 4 → 8 → 3 MLP with fixed weights, traced with the lazy DSL.
    let t = Trace::new("mlp");
    let x = t.input("x", DType::F32, [2, 4]);
    let w1: Vec<f32> = (0..32)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let w2: Vec<f32> = (0..24)
        .map(|i| ((i * 5 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let w1 = t.tensor(&w1, [4, 8])?;
    let b1 = t.tensor(&[0.1f32; 8], [8])?;
    let w2 = t.tensor(&w2, [8, 3])?;
    let h = (x.matmul(&w1)? + &b1).gelu();
    let logits = h.matmul(&w2)?;
    let probs = logits.softmax(-1)?;
    let graph = t.finish(&[&probs])?;

    let mut o = Out::new();
    writeln!(o, "== MIR ==\n{}\n", text::print(&graph))?;
    let model = rlx::compile(&graph, rlx::Device::Cpu)?;
    writeln!(o, "== dispatch (cpu) ==\n{}", model.dispatch_report())?;
    let input = HostTensor::from_slice(&[1.0f32, -0.5, 0.25, 2.0, 0.0, 1.0, -1.0, 0.5], [2, 4])?;
    let out = model.run(&[input])?;
    let p = out[0].to_vec::<f32>()?;
    writeln!(o, "== output: softmax probabilities, 2 rows × 3 classes ==")?;
    for row in p.chunks(3) {
        writeln!(
            o,
            "  [{}]  (sum {:.6})",
            row.iter()
                .map(|v| format!("{v:.6}"))
                .collect::<Vec<_>>()
                .join(", "),
            row.iter().sum::<f32>()
        )?;
    }
    Ok(o.flush()?)
}
