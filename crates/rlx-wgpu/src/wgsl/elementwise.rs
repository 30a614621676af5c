//! Elementwise kernels: one op, a fused region (its body inlined into one
//! kernel, one thread per output element), or a copy that materializes a
//! view. Inputs are read through strides with NumPy broadcasting, or
//! (`Access::Flat`) in row-major order of their own shape, which is what a
//! reshape of a non-contiguous value needs.

use super::expr::apply;
use super::{compute_ty, flat_entry, grid, unravel, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use rlx_ir::{Attrs, DType, Graph, ValueDef};
use std::fmt::Write;

/// How an input's elements line up with the output's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Access {
    /// Broadcast to the output shape, indexed by the output's multi-index.
    Broadcast,
    /// Row-major order of the input's own shape (a reshape copy).
    Flat,
}

/// What the kernel computes from its loaded inputs.
pub enum Body<'a> {
    Op { op: &'a str, attrs: &'a Attrs },
    Region(&'a Graph),
}

fn unsupported(op: &str, why: String) -> WgpuError {
    WgpuError::Unsupported { op: op.into(), why }
}

/// Generate the kernel writing `out` (contiguous) from `ins`.
pub fn kernel(
    name: &str,
    out: &TensorRef,
    ins: &[(TensorRef, Access)],
    body: Body,
) -> Result<Kernel, WgpuError> {
    let n = out.numel();
    let groups = grid(n, super::WG);
    let mut b = Builder::default();
    let mut s = flat_entry(n, groups);
    let (un, o) = unravel("idx", &out.dims, "o");
    s.push_str(&un);
    let mut xs = Vec::new();
    let mut dts = Vec::new();
    for (k, (r, acc)) in ins.iter().enumerate() {
        let addr = match acc {
            Access::Broadcast => Builder::addr(&r.broadcast_to(&out.dims), &o),
            Access::Flat => {
                let (u, p) = unravel("idx", &r.dims, &format!("p{k}_"));
                s.push_str(&u);
                Builder::addr(r, &p)
            }
        };
        let v = b.load(r, &addr);
        let _ = writeln!(s, "let x{k}: {} = {v};", compute_ty(r.dtype)?);
        xs.push(format!("x{k}"));
        dts.push(r.dtype);
    }
    let y = match body {
        Body::Op { op, attrs } => apply(op, &xs, &dts, out.dtype, attrs).ok_or_else(|| {
            unsupported(
                op,
                format!(
                    "no WGSL form for {}",
                    dts.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
                ),
            )
        })?,
        Body::Region(g) => region(g, &xs, &mut s)?,
    };
    let _ = writeln!(s, "let y: {} = {y};", compute_ty(out.dtype)?);
    let st = b.store(out, &Builder::addr(out, &o), "y");
    let _ = writeln!(s, "{st}\n}}");
    Ok(b.finish(name.to_string(), s, groups))
}

/// Inline a region's body: one `let` per node.
fn region(g: &Graph, xs: &[String], s: &mut String) -> Result<String, WgpuError> {
    let name = |v: rlx_ir::ValueId| match g.values[v.index()].def {
        ValueDef::Input(i) => xs[i].clone(),
        ValueDef::Node { .. } => format!("v{}", v.0),
    };
    for node in &g.nodes {
        let args: Vec<String> = node.inputs.iter().map(|&v| name(v)).collect();
        let dts: Vec<DType> = node.inputs.iter().map(|&v| g.ty(v).dtype).collect();
        let out = node.outputs[0];
        let odt = g.ty(out).dtype;
        let e = apply(node.op.name(), &args, &dts, odt, &node.attrs).ok_or_else(|| {
            unsupported(
                "fused_elementwise",
                format!("region op `{}` has no WGSL form", node.op.name()),
            )
        })?;
        let _ = writeln!(s, "let v{}: {} = {e};", out.0, compute_ty(odt)?);
    }
    Ok(name(g.outputs[0]))
}
