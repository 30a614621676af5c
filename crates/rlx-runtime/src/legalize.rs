//! The legalizer: exactly one dispatch path per MIR node — native,
//! common-IR (the op's decomposition, recursively legal), or rewritten (a
//! structural rewrite, recursively legal) — or compilation fails with a
//! [`DispatchError`] that lists every unsupported node at once, each with
//! the reason every path failed and what the user can do.

use crate::backend::{backends, Backend, Claims, NodeQuery};
use crate::device::Device;
use crate::policy::{DispatchOptions, Policy};
use crate::report::{DispatchPath, DispatchReport, NodeDispatch, Transfer};
use crate::rewrite::rewrites_for;
use rlx_ir::op::DecomposeFn;
use rlx_ir::{Attr, Attrs, DType, Graph, GraphBuilder, Op, Shape, TensorType, ValueId};
use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// What [`Cx::emit`] made of a node: the path, the rewrite rule, the
/// outputs, and the paths declined before it.
type Emitted = (
    DispatchPath,
    Option<&'static str>,
    Vec<ValueId>,
    Vec<Attempt>,
);

/// One path that was tried for a node, and why it failed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attempt {
    pub path: DispatchPath,
    pub why: String,
}

/// A node no path can run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unsupported {
    /// Node index; inside a sub-graph, `"4/body/2"`-style paths.
    pub node: String,
    pub op: String,
    pub dtype: DType,
    pub shape: Shape,
    pub attempts: Vec<Attempt>,
}

/// Compilation refused: every unsupported node, and what to do.
#[derive(Clone, Debug, PartialEq, Error, Serialize)]
pub struct DispatchError {
    pub graph: String,
    pub device: Device,
    pub policy: Policy,
    pub nodes: Vec<Unsupported>,
    pub hints: Vec<String>,
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cannot compile `{}` for {} (policy {}): {} node{} cannot run",
            self.graph,
            self.device,
            self.policy,
            self.nodes.len(),
            if self.nodes.len() == 1 { "" } else { "s" }
        )?;
        for u in &self.nodes {
            writeln!(f, "  node {} `{}` ({}{}):", u.node, u.op, u.dtype, u.shape)?;
            for a in &u.attempts {
                writeln!(f, "    {:<10} {}", format!("{}:", a.path.name()), a.why)?;
            }
        }
        write!(f, "what you can do:")?;
        for h in &self.hints {
            write!(f, "\n  - {h}")?;
        }
        Ok(())
    }
}

/// The result of legalizing: the graph to schedule, and the report.
#[derive(Clone, Debug)]
pub struct Legalized {
    pub graph: Graph,
    pub report: DispatchReport,
}

struct Cx<'a> {
    backend: &'a dyn Backend,
    claims: Claims,
    opts: DispatchOptions,
}

/// Why emitting an op failed: per path, the reason.
type Why = Vec<Attempt>;

const MAX_DEPTH: usize = 16;

fn first_dtype(inputs: &[TensorType], op: Op, attrs: &Attrs) -> DType {
    inputs
        .first()
        .map(|t| t.dtype)
        .or_else(|| {
            rlx_ir::graph::infer(op, inputs, attrs)
                .ok()
                .and_then(|o| o.first().map(|t| t.dtype))
        })
        .unwrap_or(DType::F32)
}

impl Cx<'_> {
    /// Emit `op` into `b` by the first path the policy allows that works.
    /// Returns the path, the rewrite rule, the outputs, and the paths tried
    /// before it with why each was declined (the report shows them).
    fn emit(
        &self,
        b: &mut GraphBuilder,
        op: Op,
        inputs: &[ValueId],
        attrs: &Attrs,
        depth: usize,
        kernels: &mut Vec<String>,
    ) -> Result<Emitted, Why> {
        let types: Vec<TensorType> = inputs.iter().map(|&v| b.ty(v).clone()).collect();
        let dtype = first_dtype(&types, op, attrs);
        let policy = self.opts.for_op(op.name());
        let order: &[DispatchPath] = match policy {
            Policy::PreferNative => &[
                DispatchPath::Native,
                DispatchPath::CommonIr,
                DispatchPath::Rewritten,
            ],
            Policy::CommonIrOnly => &[
                DispatchPath::CommonIr,
                DispatchPath::Native,
                DispatchPath::Rewritten,
            ],
            Policy::NativeOnly => &[DispatchPath::Native],
        };
        let mut why = Vec::new();
        if depth > MAX_DEPTH {
            why.push(Attempt {
                path: DispatchPath::CommonIr,
                why: "decompositions nest too deeply".into(),
            });
            return Err(why);
        }
        for &path in order {
            let attempt = match path {
                DispatchPath::Native => match self.claims.native(op.name(), dtype) {
                    Ok(()) => {
                        let attrs = self
                            .lower_subgraphs(attrs)
                            .map_err(|e| vec![Attempt { path, why: e }])?;
                        let tys: Vec<&TensorType> = types.iter().collect();
                        let query = NodeQuery {
                            op: op.name(),
                            inputs: &tys,
                            attrs: &attrs,
                            dtype,
                        };
                        match self.backend.select(&query) {
                            Ok(name) => {
                                let outs = b.push(op, inputs, attrs).map_err(|e| {
                                    vec![Attempt {
                                        path,
                                        why: e.to_string(),
                                    }]
                                })?;
                                kernels.push(name);
                                return Ok((path, None, outs, why));
                            }
                            Err(why) => Err(why),
                        }
                    }
                    Err(e) => Err(e),
                },
                DispatchPath::CommonIr => match op.decompose {
                    Some(d) => self
                        .expand(b, d, inputs, attrs, depth, kernels)
                        .map(|o| (path, None, o)),
                    None => Err(format!(
                        "no decomposition (`{}` is a primitive op)",
                        op.name()
                    )),
                },
                DispatchPath::Rewritten => {
                    let mut errs = Vec::new();
                    let mut done = None;
                    for r in rewrites_for(op.name()) {
                        match (r.applies)(&types, attrs) {
                            Err(e) => errs.push(format!("{} does not apply: {e}", r.name)),
                            Ok(()) => {
                                match self.expand(b, r.apply, inputs, attrs, depth, kernels) {
                                    Ok(o) => {
                                        done = Some((path, Some(r.name), o));
                                        break;
                                    }
                                    Err(e) => errs.push(format!("{}: {e}", r.name)),
                                }
                            }
                        }
                    }
                    match done {
                        Some((p, r, o)) => return Ok((p, r, o, why)),
                        None if errs.is_empty() => {
                            Err(format!("no rewrite rule for `{}`", op.name()))
                        }
                        None => Err(errs.join("; ")),
                    }
                }
            };
            match attempt {
                Ok((p, r, o)) => return Ok((p, r, o, why)),
                Err(e) => why.push(Attempt { path, why: e }),
            }
        }
        if policy == Policy::NativeOnly {
            let alt = if op.decompose.is_some() {
                "not tried (policy native_only); the op has a decomposition".to_string()
            } else {
                "not tried (policy native_only)".to_string()
            };
            why.push(Attempt {
                path: DispatchPath::CommonIr,
                why: alt,
            });
        }
        Err(why)
    }

    /// Run a decomposition or rewrite in a scratch graph, then emit each of
    /// its nodes legally into `b`. On failure `b` is left unchanged.
    fn expand(
        &self,
        b: &mut GraphBuilder,
        f: DecomposeFn,
        inputs: &[ValueId],
        attrs: &Attrs,
        depth: usize,
        kernels: &mut Vec<String>,
    ) -> Result<Vec<ValueId>, String> {
        let mut scratch = GraphBuilder::new("expansion");
        let sin: Vec<ValueId> = inputs
            .iter()
            .enumerate()
            .map(|(k, &v)| scratch.input(format!("i{k}"), b.ty(v).clone()))
            .collect();
        let souts = f(&mut scratch, &sin, attrs).map_err(|e| e.to_string())?;
        let sg = scratch.finish(&souts).map_err(|e| e.to_string())?;
        let saved = b.clone();
        let mut local = Vec::new();
        let mut map: Vec<Option<ValueId>> = vec![None; sg.values.len()];
        for (&s, &v) in sg.inputs.iter().zip(inputs) {
            map[s.index()] = Some(v);
        }
        for n in &sg.nodes {
            let ins: Vec<ValueId> = n
                .inputs
                .iter()
                .map(|v| map[v.index()].expect("topological order"))
                .collect();
            match self.emit(b, n.op, &ins, &n.attrs, depth + 1, &mut local) {
                Ok((_, _, outs, _)) => {
                    for (o, v) in n.outputs.iter().zip(outs) {
                        map[o.index()] = Some(v);
                    }
                }
                Err(why) => {
                    *b = saved;
                    let t: Vec<TensorType> = ins.iter().map(|&v| b.ty(v).clone()).collect();
                    let dt = first_dtype(&t, n.op, &n.attrs);
                    let reasons: Vec<String> = why
                        .iter()
                        .map(|a| format!("{}: {}", a.path.name(), a.why))
                        .collect();
                    return Err(format!(
                        "needs `{}` ({dt}), which cannot run: {}",
                        n.op.name(),
                        reasons.join("; ")
                    ));
                }
            }
        }
        kernels.extend(local);
        Ok(sg
            .outputs
            .iter()
            .map(|v| map[v.index()].expect("outputs defined"))
            .collect())
    }

    /// Legalize graph-valued attributes (control-flow bodies) for the same
    /// backend, so their nodes obey the contract too.
    fn lower_subgraphs(&self, attrs: &Attrs) -> Result<Attrs, String> {
        let mut out = attrs.clone();
        for (name, a) in out.0.iter_mut() {
            if let Attr::Graph(g) = a {
                let l = self
                    .legalize_graph(g, false)
                    .map_err(|e| format!("in sub-graph `{name}`: {e}"))?;
                **g = l.graph;
            }
        }
        Ok(out)
    }

    fn legalize_graph(&self, g: &Graph, top: bool) -> Result<Legalized, DispatchError> {
        let device = self.backend.device();
        let mut b = GraphBuilder::new(g.name.clone());
        let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
        let mut transfers = Vec::new();
        let mut bad = Vec::new();
        let move_across = top && !device.is_host();
        for &v in &g.inputs {
            let val = &g.values[v.index()];
            let name = val.name.clone().unwrap_or_else(|| v.0.to_string());
            let mut nv = b.input(name.clone(), val.ty.clone());
            if move_across {
                nv = self.transfer(
                    &mut b,
                    nv,
                    device,
                    &name,
                    Device::Cpu,
                    &mut transfers,
                    &mut bad,
                );
            }
            map[v.index()] = Some(nv);
        }
        let mut rows = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            let ins: Vec<ValueId> = node
                .inputs
                .iter()
                .map(|v| map[v.index()].expect("verified graph"))
                .collect();
            let types: Vec<TensorType> = ins.iter().map(|&v| b.ty(v).clone()).collect();
            let dtype = first_dtype(&types, node.op, &node.attrs);
            let shape = node
                .outputs
                .first()
                .map(|&o| g.ty(o).shape.clone())
                .unwrap_or_default();
            b.set_origin(node.origin.clone());
            let mut kernels = Vec::new();
            let first = b.graph().nodes.len();
            let outs = match self.emit(&mut b, node.op, &ins, &node.attrs, 0, &mut kernels) {
                Ok((path, rewrite, outs, declined)) => {
                    rows.push(NodeDispatch {
                        node: i,
                        mir_nodes: (first..b.graph().nodes.len()).collect(),
                        op: node.op.name().into(),
                        dtype,
                        shape,
                        path,
                        rewrite: rewrite.map(String::from),
                        kernels,
                        device,
                        declined,
                    });
                    outs
                }
                Err(attempts) => {
                    bad.push(Unsupported {
                        node: i.to_string(),
                        op: node.op.name().into(),
                        dtype,
                        shape,
                        attempts,
                    });
                    // Keep types flowing so later nodes are checked too.
                    match b.push(node.op, &ins, node.attrs.clone()) {
                        Ok(o) => o,
                        Err(_) => break,
                    }
                }
            };
            for (o, v) in node.outputs.iter().zip(outs) {
                if let Some(n) = &g.values[o.index()].name {
                    b.name_value(v, n.clone());
                }
                map[o.index()] = Some(v);
            }
        }
        b.set_origin(None);
        let mut outs = Vec::new();
        for (k, &o) in g.outputs.iter().enumerate() {
            let Some(mut v) = map[o.index()] else { break };
            if move_across {
                let name = g.values[o.index()]
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("output {k}"));
                v = self.transfer(
                    &mut b,
                    v,
                    Device::Cpu,
                    &name,
                    device,
                    &mut transfers,
                    &mut bad,
                );
            }
            outs.push(v);
        }
        if !bad.is_empty() {
            return Err(self.error(g, bad));
        }
        let graph = b
            .finish(&outs)
            .map_err(|e| self.error(g, vec![internal(e.to_string())]))?;
        let report = DispatchReport {
            graph: g.name.clone(),
            device,
            options: self.opts.clone(),
            nodes: rows,
            transfers,
            routing: None,
        };
        Ok(Legalized { graph, report })
    }

    /// Insert an explicit `transfer` node (which the backend must claim).
    #[allow(clippy::too_many_arguments)]
    fn transfer(
        &self,
        b: &mut GraphBuilder,
        v: ValueId,
        to: Device,
        name: &str,
        from: Device,
        transfers: &mut Vec<Transfer>,
        bad: &mut Vec<Unsupported>,
    ) -> ValueId {
        let ty = b.ty(v).clone();
        if let Err(why) = self.claims.native("transfer", ty.dtype) {
            bad.push(Unsupported {
                node: format!("transfer of `{name}`"),
                op: "transfer".into(),
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                attempts: vec![Attempt {
                    path: DispatchPath::Native,
                    why,
                }],
            });
            return v;
        }
        match b.op1("transfer", &[v], Attrs::new().with("to", to.name())) {
            Ok(t) => {
                let bytes = ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0);
                transfers.push(Transfer {
                    value: name.to_string(),
                    from,
                    to,
                    bytes,
                });
                t
            }
            Err(e) => {
                bad.push(internal(e.to_string()));
                v
            }
        }
    }

    fn error(&self, g: &Graph, nodes: Vec<Unsupported>) -> DispatchError {
        let mut hints = Vec::new();
        let device = self.backend.device();
        for u in &nodes {
            for other in backends() {
                if other.device() != device && other.claims().native(&u.op, u.dtype).is_ok() {
                    let h = format!(
                        "compile for `{}`: it runs `{}` ({}) natively",
                        other.device(),
                        u.op,
                        u.dtype
                    );
                    if !hints.contains(&h) {
                        hints.push(h);
                    }
                }
            }
            if let Some(f) = self.claims.compiled_out.get(&u.op) {
                let h = format!(
                    "rebuild with cargo feature `{f}`: `{}` was compiled out of this build",
                    u.op
                );
                if !hints.contains(&h) {
                    hints.push(h);
                }
            }
            if self.opts.for_op(&u.op) == Policy::NativeOnly
                && rlx_ir::lookup(&u.op).is_some_and(|d| d.is_fused())
            {
                let h = format!(
                    "use policy prefer_native for `{}` so its decomposition may run",
                    u.op
                );
                if !hints.contains(&h) {
                    hints.push(h);
                }
            }
        }
        hints.push("register a kernel for the op on this backend (rlx::custom), or express it with ops the backend has".into());
        DispatchError {
            graph: g.name.clone(),
            device,
            policy: self.opts.policy,
            nodes,
            hints,
        }
    }
}

fn internal(msg: String) -> Unsupported {
    Unsupported {
        node: "-".into(),
        op: "<graph>".into(),
        dtype: DType::F32,
        shape: Shape::default(),
        attempts: vec![Attempt {
            path: DispatchPath::Native,
            why: msg,
        }],
    }
}

/// Legalize `g` for `backend` under `opts` (already merged with any
/// process-wide override by the caller: [`DispatchOptions::effective`]).
pub fn legalize(
    g: &Graph,
    backend: &dyn Backend,
    opts: &DispatchOptions,
) -> Result<Legalized, DispatchError> {
    let cx = Cx {
        backend,
        claims: backend.claims(),
        opts: opts.clone(),
    };
    cx.legalize_graph(g, true)
}
