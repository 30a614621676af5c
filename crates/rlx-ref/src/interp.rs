//! Runs a MIR graph node by node with the reference kernels. Each value is
//! dropped after its last use, so peak memory stays near the live set.

use crate::error::CpuError;
use crate::kernels::{kernel, KernelCx, SubgraphRunner};
use rlx_ir::{Graph, HostTensor};
use std::borrow::Cow;

pub struct Interp;

impl SubgraphRunner for Interp {
    fn run(&self, g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CpuError> {
        run_graph(g, inputs)
    }
}

/// Check that `inputs` match the graph's inputs in count, dtype and shape.
pub fn check_inputs(g: &Graph, inputs: &[&HostTensor]) -> Result<(), CpuError> {
    if inputs.len() != g.inputs.len() {
        return Err(CpuError::Input {
            index: inputs.len().min(g.inputs.len()),
            name: g.name.clone(),
            expected: format!("{} inputs", g.inputs.len()),
            got: format!("{} inputs", inputs.len()),
        });
    }
    for (k, (&v, t)) in g.inputs.iter().zip(inputs).enumerate() {
        let want = g.ty(v);
        if t.dtype() != want.dtype || t.shape() != &want.shape {
            return Err(CpuError::Input {
                index: k,
                name: g.values[v.index()].name.clone().unwrap_or_default(),
                expected: want.to_string(),
                got: format!("{}{}", t.dtype(), t.shape()),
            });
        }
    }
    Ok(())
}

/// Run `g` on host tensors with the reference kernels.
pub fn run_graph(g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CpuError> {
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    run_graph_refs(g, &refs)
}

/// [`run_graph`] on borrowed inputs: nothing is copied (weights passed as
/// graph inputs stay where they are).
///
/// Sub-graphs (`if`, `while`, `scan` bodies) run through here recursively,
/// each a level of [`rlx_ir::nesting`]: nested past the limit is an
/// [`rlx_ir::IrError::Limit`], not a stack overflow.
pub fn run_graph_refs(g: &Graph, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, CpuError> {
    let _level = rlx_ir::nesting::enter(&format!("running graph `{}`", g.name))
        .map_err(rlx_ir::IrError::from)?;
    check_inputs(g, inputs)?;
    let mut last_use = vec![usize::MAX; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for v in &n.inputs {
            last_use[v.index()] = i;
        }
    }
    for v in &g.outputs {
        last_use[v.index()] = usize::MAX;
    }
    // Inputs are borrowed; values computed here are owned.
    let mut env: Vec<Option<Cow<HostTensor>>> = vec![None; g.values.len()];
    for (&v, &t) in g.inputs.iter().zip(inputs) {
        env[v.index()] = Some(Cow::Borrowed(t));
    }
    for (i, node) in g.nodes.iter().enumerate() {
        let k = kernel(node.op.name()).ok_or_else(|| CpuError::NoKernel(node.op.name().into()))?;
        let args: Vec<&HostTensor> = node
            .inputs
            .iter()
            .map(|v| {
                env[v.index()].as_deref().ok_or_else(|| CpuError::Runtime {
                    op: node.op.name().into(),
                    msg: format!("input %{} was freed too early", v.0),
                })
            })
            .collect::<Result<_, _>>()?;
        let out_types: Vec<_> = node.outputs.iter().map(|&v| g.ty(v).clone()).collect();
        let cx = KernelCx {
            op: node.op.name(),
            inputs: &args,
            attrs: &node.attrs,
            outputs: &out_types,
            runner: &Interp,
        };
        let outs = crate::profile::time(node.op.name(), || k(&cx)).map_err(|e| e.at_node(i))?;
        if outs.len() != out_types.len()
            || outs
                .iter()
                .zip(&out_types)
                .any(|(o, t)| o.dtype() != t.dtype || o.shape() != &t.shape)
        {
            return Err(CpuError::Runtime {
                op: node.op.name().into(),
                msg: format!(
                    "kernel returned {:?}, the op infers {:?} (a kernel bug)",
                    outs.iter()
                        .map(|o| format!("{}{}", o.dtype(), o.shape()))
                        .collect::<Vec<_>>(),
                    out_types.iter().map(|t| t.to_string()).collect::<Vec<_>>()
                ),
            });
        }
        drop(args);
        for (&v, t) in node.outputs.iter().zip(outs) {
            env[v.index()] = Some(Cow::Owned(t));
        }
        for v in &node.inputs {
            if last_use[v.index()] == i {
                env[v.index()] = None;
            }
        }
    }
    g.outputs
        .iter()
        .map(|v| {
            env[v.index()]
                .as_deref()
                .cloned()
                .ok_or_else(|| CpuError::Runtime {
                    op: "return".into(),
                    msg: format!("output %{} was never computed", v.0),
                })
        })
        .collect()
}
