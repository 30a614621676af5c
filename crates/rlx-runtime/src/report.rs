//! The dispatch report: per node, how it runs — path, kernels, device —
//! and every host↔device transfer. Printable as a table and as JSON
//! (schema in docs/dispatch-report.md).

use crate::device::Device;
use crate::policy::DispatchOptions;
use rlx_ir::{DType, Shape};
use serde::Serialize;
use std::fmt;

/// How one node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchPath {
    /// The backend's own kernel for the op.
    Native,
    /// The op's registered decomposition into primitives.
    CommonIr,
    /// A structural rewrite (e.g. conv → im2col + matmul).
    Rewritten,
}

impl DispatchPath {
    pub fn name(self) -> &'static str {
        match self {
            DispatchPath::Native => "native",
            DispatchPath::CommonIr => "common-ir",
            DispatchPath::Rewritten => "rewritten",
        }
    }
}

/// One node of the source graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeDispatch {
    pub node: usize,
    /// The nodes of the legalized graph (the MIR the backend compiles)
    /// that this node became: one when native, its expansion otherwise.
    pub mir_nodes: Vec<usize>,
    pub op: String,
    pub dtype: DType,
    pub shape: Shape,
    pub path: DispatchPath,
    /// The rewrite rule, for the rewritten path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<String>,
    /// The kernels that run it, in order (several for common-IR/rewritten).
    pub kernels: Vec<String>,
    pub device: Device,
    /// The paths tried before `path` and why each was declined (a native
    /// kernel the backend's `select` refused, say): a slower path never
    /// hides why the faster one was not taken.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub declined: Vec<crate::legalize::Attempt>,
}

/// One explicit copy between memories (a `transfer` node of the program).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transfer {
    /// The graph input or output moved.
    pub value: String,
    pub from: Device,
    pub to: Device,
    pub bytes: usize,
}

/// Why the router picked this device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Routing {
    pub chain: Vec<Device>,
    pub chosen: Device,
    pub reason: String,
    /// For each device tried: `None` if the graph legalized, else why not.
    pub tried: Vec<(Device, Option<String>)>,
}

/// Per node of the source graph: how it runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DispatchReport {
    pub graph: String,
    pub device: Device,
    pub options: DispatchOptions,
    pub nodes: Vec<NodeDispatch>,
    pub transfers: Vec<Transfer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
}

impl DispatchReport {
    /// Version of the JSON schema (docs/dispatch-report.md).
    pub const SCHEMA: u32 = 1;

    /// The stable JSON form, with `"schema": 1`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(m) = v.as_object_mut() {
            m.insert("schema".into(), Self::SCHEMA.into());
        }
        v
    }
    /// Nodes per path.
    pub fn count(&self, p: DispatchPath) -> usize {
        self.nodes.iter().filter(|n| n.path == p).count()
    }
}

fn kernels_cell(k: &[String]) -> String {
    match k {
        [] => "-".into(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} +{} more", rest.len()),
    }
}

impl fmt::Display for DispatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "dispatch of `{}` on {} (policy {})",
            self.graph, self.device, self.options.policy
        )?;
        if let Some(r) = &self.routing {
            writeln!(
                f,
                "routing: chose {} from [{}]: {}",
                r.chosen,
                r.chain
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                r.reason
            )?;
        }
        let rows: Vec<[String; 6]> = self
            .nodes
            .iter()
            .map(|n| {
                let path = match &n.rewrite {
                    Some(r) => format!("rewritten ({r})"),
                    None => n.path.name().to_string(),
                };
                [
                    n.node.to_string(),
                    n.op.clone(),
                    n.dtype.name().to_string(),
                    n.shape.to_string(),
                    path,
                    kernels_cell(&n.kernels),
                ]
            })
            .collect();
        let head = ["node", "op", "dtype", "shape", "path", "kernel"];
        let mut w = head.map(str::len);
        for r in &rows {
            for (k, c) in r.iter().enumerate() {
                w[k] = w[k].max(c.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, r: &[String]| {
            writeln!(
                f,
                "  {:>w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {:<w4$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3],
                w4 = w[4]
            )
        };
        line(f, &head.map(String::from))?;
        for (r, n) in rows.iter().zip(&self.nodes) {
            line(f, r)?;
            for d in &n.declined {
                writeln!(
                    f,
                    "  {:>w0$}  ↳ not {}: {}",
                    "",
                    d.path.name(),
                    d.why,
                    w0 = w[0]
                )?;
            }
        }
        if self.transfers.is_empty() {
            writeln!(f, "  transfers: none (host memory)")?;
        } else {
            for t in &self.transfers {
                writeln!(
                    f,
                    "  transfer  {:<12} {} → {}  {} bytes",
                    t.value, t.from, t.to, t.bytes
                )?;
            }
        }
        write!(
            f,
            "  {} nodes: {} native, {} common-ir, {} rewritten; {} transfers",
            self.nodes.len(),
            self.count(DispatchPath::Native),
            self.count(DispatchPath::CommonIr),
            self.count(DispatchPath::Rewritten),
            self.transfers.len()
        )
    }
}
