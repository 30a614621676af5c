//! The legalizer: one dispatch path per MIR node.

use crate::backend::{Claims, Device};
use rlx_ir::decompose::expand_fused;
use rlx_ir::{DType, Graph, OpDef, Shape};
use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// How one node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchPath {
    /// The backend has a kernel for the op.
    Native,
    /// The op's decomposition into primitives runs instead.
    CommonIr,
}

/// One row of the dispatch report.
#[derive(Clone, Debug, Serialize)]
pub struct NodeDispatch {
    pub node: usize,
    pub op: String,
    pub dtype: DType,
    pub shape: Shape,
    pub path: DispatchPath,
    pub device: Device,
}

/// Per node of the original graph: how it runs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DispatchReport {
    pub nodes: Vec<NodeDispatch>,
}

impl fmt::Display for DispatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>4}  {:<18} {:<6} {:<16} {:<10} device",
            "node", "op", "dtype", "shape", "path"
        )?;
        for n in &self.nodes {
            let path = match n.path {
                DispatchPath::Native => "native",
                DispatchPath::CommonIr => "common-ir",
            };
            writeln!(
                f,
                "{:>4}  {:<18} {:<6} {:<16} {:<10} {}",
                n.node,
                n.op,
                n.dtype.name(),
                n.shape.to_string(),
                path,
                n.device
            )?;
        }
        Ok(())
    }
}

/// A node no path can run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unsupported {
    pub node: usize,
    pub op: String,
    pub dtype: DType,
    pub shape: Shape,
    pub why: String,
}

/// Compilation refused: every unsupported node, with the reason.
#[derive(Clone, Debug, PartialEq, Error, Serialize)]
#[error("{} node(s) cannot run on {device}:\n{}\nTry another device, or register a kernel for the op.", nodes.len(), list(nodes))]
pub struct DispatchError {
    pub device: Device,
    pub nodes: Vec<Unsupported>,
}

fn list(nodes: &[Unsupported]) -> String {
    nodes
        .iter()
        .map(|u| {
            format!(
                "  node {} `{}` ({}{}): {}",
                u.node, u.op, u.dtype, u.shape, u.why
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Can `op` run on a backend with `claims`, natively or by decomposition?
fn runnable(
    op: &OpDef,
    claims: &Claims,
    dtype: DType,
    depth: usize,
) -> Result<DispatchPath, String> {
    if claims.claims(op.name, Some(dtype)) {
        return Ok(DispatchPath::Native);
    }
    match op.decompose {
        Some(_) if depth < 8 => Ok(DispatchPath::CommonIr),
        Some(_) => Err("decomposition too deep".into()),
        None => Err(format!(
            "not claimed natively for {dtype}, and `{}` has no decomposition",
            op.name
        )),
    }
}

/// Pick a path for every node; expand fused ops that are not claimed.
/// Returns the graph to schedule and the report, or every unsupported node.
pub fn legalize(
    g: &Graph,
    device: Device,
    claims: &Claims,
) -> Result<(Graph, DispatchReport), DispatchError> {
    let mut report = DispatchReport::default();
    let mut bad = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let out = n.outputs.first().map(|&v| g.ty(v).clone());
        let dtype = n
            .inputs
            .first()
            .map(|&v| g.ty(v).dtype)
            .or(out.as_ref().map(|t| t.dtype))
            .unwrap_or(DType::F32);
        let shape = out.map(|t| t.shape).unwrap_or_default();
        match runnable(n.op.def(), claims, dtype, 0) {
            Ok(path) => report.nodes.push(NodeDispatch {
                node: i,
                op: n.op.name().into(),
                dtype,
                shape,
                path,
                device,
            }),
            Err(why) => bad.push(Unsupported {
                node: i,
                op: n.op.name().into(),
                dtype,
                shape,
                why,
            }),
        }
    }
    if !bad.is_empty() {
        return Err(DispatchError { device, nodes: bad });
    }
    let lowered =
        expand_fused(g, &|op| !claims.claims(op.name, None)).map_err(|e| DispatchError {
            device,
            nodes: vec![Unsupported {
                node: 0,
                op: "<graph>".into(),
                dtype: DType::F32,
                shape: Shape::default(),
                why: e.to_string(),
            }],
        })?;
    // Primitives produced by decompositions must themselves be claimed.
    let missing: Vec<Unsupported> = lowered
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !claims.claims(n.op.name(), None))
        .map(|(i, n)| Unsupported {
            node: i,
            op: n.op.name().into(),
            dtype: n
                .outputs
                .first()
                .map(|&v| lowered.ty(v).dtype)
                .unwrap_or(DType::F32),
            shape: Shape::default(),
            why: "produced by a decomposition but not claimed by the backend".into(),
        })
        .collect();
    if !missing.is_empty() {
        return Err(DispatchError {
            device,
            nodes: missing,
        });
    }
    Ok((lowered, report))
}
