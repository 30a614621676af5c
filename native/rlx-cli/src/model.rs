//! Loading the model a command names: a MIR file (text, or JSON ending in
//! `.json`) or an imported format — ONNX (`.onnx`) or RTen (`.rten`, read
//! through the ONNX op mapping) — whose dynamic dimensions the shared
//! `--dim` / `--shape` flags bind.

use crate::device::Env;
use crate::out::{CliError, CliResult, Out};
use clap::Args;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How an imported model's dynamic dimensions are bound.
#[derive(Args, Clone, Debug, Default)]
pub struct ShapeArgs {
    /// The size of a symbolic dimension of an ONNX model: NAME=N (repeatable).
    #[arg(long = "dim", value_name = "NAME=N")]
    pub dims: Vec<String>,
    /// The whole shape of an ONNX model's input: NAME=D0,D1,... (repeatable;
    /// for `rlx run`, an --input file gives its input's shape by itself).
    #[arg(long = "shape", value_name = "NAME=D0,D1,...")]
    pub shapes: Vec<String>,
}

/// Whether `path` names an imported model (ONNX or .rten).
pub fn is_onnx(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "onnx" || e == "rten")
}

/// The model at `path` as a graph; `given` are input shapes known from
/// files (`rlx run --input`), used where no `--shape` names the input.
pub fn load(path: &Path, a: &ShapeArgs, given: &[(String, Vec<usize>)]) -> CliResult<rlx::Graph> {
    if !is_onnx(path) {
        if !a.dims.is_empty() || !a.shapes.is_empty() {
            return Err(CliError::usage(
                "--dim and --shape apply to ONNX and RTen models (.onnx, .rten) only",
            ));
        }
        return crate::inspect::parse_graph(path);
    }
    let t = Instant::now();
    let m = import_onnx(path, a, given)?;
    eprintln!(
        "{}: imported in {:.1} ms",
        path.display(),
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(m.graph)
}

/// The ONNX import options `a` and `given` describe.
fn options(a: &ShapeArgs, given: &[(String, Vec<usize>)]) -> CliResult<rlx_onnx::ImportOptions> {
    let mut opts = rlx_onnx::ImportOptions::default();
    for d in &a.dims {
        let (name, n) = d
            .split_once('=')
            .ok_or_else(|| CliError::usage(format!("--dim {d}: expected NAME=N")))?;
        let n: usize = n
            .parse()
            .map_err(|_| CliError::usage(format!("--dim {d}: {n} is not a size")))?;
        opts.dims.insert(name.to_string(), n);
    }
    for sh in &a.shapes {
        let bad = || CliError::usage(format!("--shape {sh}: expected NAME=D0,D1,... (sizes)"));
        let (name, list) = sh.split_once('=').ok_or_else(bad)?;
        let d: Vec<usize> = if list.is_empty() {
            Vec::new() // a scalar
        } else {
            list.split(',')
                .map(|v| v.trim().parse().map_err(|_| bad()))
                .collect::<CliResult<_>>()?
        };
        opts.shapes.insert(name.to_string(), d);
    }
    for (name, dims) in given {
        opts.shapes
            .entry(name.clone())
            .or_insert_with(|| dims.clone());
    }
    Ok(opts)
}

/// The model file's bytes, within the file-size limit.
pub fn read_model(path: &Path) -> CliResult<Vec<u8>> {
    use rlx::ir::limits::ReadError;
    rlx::ir::limits::read_bounded(path).map_err(|e| {
        let exit = match e {
            ReadError::Limit(_) => crate::out::Exit::Limit,
            _ => crate::out::Exit::Input,
        };
        CliError::new(exit, e.to_string())
    })
}

/// An ONNX (or .rten) model imported (exit 4 when ops cannot be mapped, every one
/// listed; 3 when the file is not a valid model).
pub fn import_onnx(
    path: &Path,
    a: &ShapeArgs,
    given: &[(String, Vec<usize>)],
) -> CliResult<rlx_onnx::Imported> {
    let mut opts = options(a, given)?;
    // External data: files beside the model (the importer checked that a
    // location stays inside this directory), read within the size limit.
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    opts.external = Some(rlx_onnx::ExternalData::new(move |loc| {
        rlx::ir::limits::read_bounded(dir.join(loc)).map_err(|e| e.to_string())
    }));
    let bytes = read_model(path)?;
    let shown = path.display();
    let imported = if rlx_onnx::is_rten(&bytes) {
        rlx_onnx::import_rten(&bytes, &opts)
    } else {
        rlx_onnx::import(&bytes, &opts)
    };
    imported.map_err(|e| match e {
        rlx_onnx::OnnxError::Unsupported(_) => {
            CliError::new(crate::out::Exit::Unsupported, format!("{shown}: {e}"))
        }
        e => CliError::input(format!("{shown}: {e}")),
    })
}

#[derive(Args)]
pub struct InspectArgs {
    /// The model (.onnx or .rten, or .gguf: metadata and tensors).
    model: PathBuf,
    /// Print JSON (GGUF files).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Devices to plan the dispatch for, comma-separated (cpu, vulkan,
    /// webgpu, opengl, cuda — whichever this build has).
    #[arg(long, short = 'd', value_delimiter = ',', default_value = "cpu")]
    device: Vec<String>,
}

/// `rlx inspect MODEL`: inputs and outputs (as declared and as bound), the
/// op histogram (ONNX ops, and the rlx ops they became), the metadata, and
/// per device how each node would run — or every node it cannot run.
pub fn inspect(a: InspectArgs, env: &Env) -> CliResult {
    if crate::gguf::is_gguf(&a.model) {
        return crate::gguf::inspect(&a.model, a.json);
    }
    if !is_onnx(&a.model) {
        return Err(CliError::usage(
            "rlx inspect reads models (.onnx, .rten, .gguf); for a MIR file use `rlx compile` or `rlx dispatch`",
        ));
    }
    let bytes = read_model(&a.model)?;
    let info = rlx_onnx::describe(&bytes)
        .map_err(|e| CliError::input(format!("{}: {e}", a.model.display())))?;
    let mut o = Out::new();
    let format = if rlx_onnx::is_rten(&bytes) {
        "RTen (read as ONNX)"
    } else {
        "ONNX"
    };
    writeln!(
        o,
        "{}: {format}, opset {}, producer {}",
        a.model.display(),
        info.opset,
        info.producer
    )?;
    writeln!(o, "inputs:")?;
    for (n, t) in &info.inputs {
        writeln!(o, "  {n}: {t}")?;
    }
    writeln!(o, "outputs:")?;
    for (n, t) in &info.outputs {
        writeln!(o, "  {n}: {t}")?;
    }
    writeln!(
        o,
        "{} initializers, {} nodes:",
        info.initializers, info.nodes
    )?;
    let mut hist: Vec<_> = info.op_types.iter().collect();
    hist.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let line: Vec<String> = hist.iter().map(|(k, v)| format!("{k} {v}")).collect();
    writeln!(o, "  {}", line.join(", "))?;
    if !info.metadata.is_empty() {
        let keys: Vec<String> = info
            .metadata
            .iter()
            .map(|(k, v)| format!("{k} ({} bytes)", v.len()))
            .collect();
        writeln!(o, "metadata: {}", keys.join(", "))?;
    }
    o.flush()?;
    // What the file declares is printed above even when this fails.
    let m = import_onnx(&a.model, &a.shape, &[])?;
    let mut ir: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &m.graph.nodes {
        *ir.entry(n.op.name()).or_default() += 1;
    }
    let mut o = Out::new();
    writeln!(o, "imported: {} rlx nodes", m.graph.nodes.len())?;
    let line: Vec<String> = ir.iter().map(|(k, v)| format!("{k} {v}")).collect();
    writeln!(o, "  {}", line.join(", "))?;
    for d in &a.device {
        let flags = crate::RunFlags {
            device: Some(d.clone()),
            threads: None,
        };
        let dev = match crate::device::resolve(&flags, env) {
            Ok(dev) => dev,
            Err(e) => {
                writeln!(o, "{d}: {}", e.msg)?;
                continue;
            }
        };
        match rlx::compile(&m.graph, dev) {
            Ok(c) => {
                writeln!(o, "{}", crate::run::dispatch_summary(&c))?;
                let r = c.dispatch_report();
                // The kernels that are not the fast ones, by name.
                let mut slow: BTreeMap<String, usize> = BTreeMap::new();
                for k in r.nodes.iter().flat_map(|n| &n.kernels) {
                    if k.contains("::ref::") {
                        *slow.entry(k.clone()).or_default() += 1;
                    }
                }
                for (k, v) in slow {
                    writeln!(o, "  reference kernel: {k} ×{v}")?;
                }
            }
            Err(e) => writeln!(o, "{d}: cannot compile: {e}")?,
        }
    }
    Ok(o.flush()?)
}
