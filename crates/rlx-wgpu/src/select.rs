//! Per-node selection ([`rlx_runtime::Backend::select`]): what the claims
//! (op × dtype) cannot say and lowering would otherwise find only while
//! building — a `fused_elementwise` region with several outputs, or with
//! an op that has no WGSL form for its dtypes. Checked during legalization
//! without a GPU, so the dispatch report and the `DispatchError` show each
//! refusal with its reason before anything is built.

use crate::wgsl::expr::apply;
use crate::WgpuOptions;
use rlx_ir::shape::broadcast_shapes;
use rlx_ir::{DType, Shape, TensorType};
use rlx_runtime::NodeQuery;

/// `Ok` if the WGSL kernels run this node, else why not.
pub fn check(node: &NodeQuery, opts: &WgpuOptions) -> Result<(), String> {
    match node.op {
        "dequant_matmul" => return dequant_matmul(node),
        "matmul" | "matmul_bias_act" | "matmul_residual" => return matmul(node, opts),
        "conv_act" => return conv_act(node),
        "cast" => return cast(node),
        "attention_cached" => return attention_cached(node, opts),
        _ => {}
    }
    if node.op != "fused_elementwise" {
        return Ok(());
    }
    let body = node.attrs.graph("body").map_err(|e| e.to_string())?;
    if body.outputs.len() != 1 {
        return Err(format!(
            "no WGSL kernel for regions with several outputs ({})",
            body.outputs.len()
        ));
    }
    for n in &body.nodes {
        let args: Vec<String> = (0..n.inputs.len()).map(|k| format!("a{k}")).collect();
        let dts: Vec<DType> = n.inputs.iter().map(|&v| body.ty(v).dtype).collect();
        let out = body.ty(n.outputs[0]).dtype;
        if apply(n.op.name(), &args, &dts, out, &n.attrs).is_none() {
            let names: Vec<&str> = dts.iter().map(|d| d.name()).collect();
            return Err(format!(
                "region op `{}` has no WGSL form for {}",
                n.op.name(),
                names.join(", ")
            ));
        }
    }
    Ok(())
}

/// The cache-reading attention has the tiled kernel only.
fn attention_cached(node: &NodeQuery, opts: &WgpuOptions) -> Result<(), String> {
    let (q, v) = (node.inputs[0].dims(), node.inputs[2].dims());
    let (d, dv) = (q[q.len() - 1], v[v.len() - 1]);
    if crate::wgsl::attention::tiled_runs(d, dv, opts) {
        Ok(())
    } else {
        Err(format!(
            "the tiled attention kernel (the only one reading a cache and new keys apart) needs head dims \
             that are multiples of 4 with d + dv <= 128 (got {d}, {dv}) and is not forced off"
        ))
    }
}

/// Casts are claimed by their input dtype; not every target has a WGSL
/// form (i64 is held as two words: it is read, never made).
fn cast(node: &NodeQuery) -> Result<(), String> {
    let to = node.attrs.dtype("dtype").map_err(|e| e.to_string())?;
    let from = node.inputs.first().map_or(node.dtype, |t| t.dtype);
    match apply("cast", &["a0".to_string()], &[from], to, node.attrs) {
        Some(_) => Ok(()),
        None => Err(format!("no WGSL cast from {from} to {to}")),
    }
}

/// `dequant_matmul` decodes the GGUF block types of `wgsl::quant` in the
/// shader; other weight types (and weights that are not (N, K)) are not.
fn dequant_matmul(node: &NodeQuery) -> Result<(), String> {
    let Some(w) = node.inputs.get(1) else {
        return Err("dequant_matmul without a weight".into());
    };
    if !crate::wgsl::quant::decodes(w.dtype) {
        let names: Vec<&str> = crate::wgsl::quant::DTYPES
            .iter()
            .map(|d| d.name())
            .collect();
        return Err(format!(
            "no WGSL kernel decodes {} weights ({} are decoded)",
            w.dtype,
            names.join(", ")
        ));
    }
    if w.rank() != 2 {
        return Err(format!("the weight {w} is not (N, K)"));
    }
    Ok(())
}

/// A matmul whose workgroup grid would exceed WebGPU's per-axis limit
/// (a batch of over 65,535 small products, say).
fn matmul(node: &NodeQuery, opts: &WgpuOptions) -> Result<(), String> {
    let (Some(a), Some(b)) = (node.inputs.first(), node.inputs.get(1)) else {
        return Ok(());
    };
    // A vector operand is one row (a) or one column (b).
    let (ra, rb) = (a.rank(), b.rank());
    let m = if ra >= 2 { a.dims()[ra - 2] } else { 1 };
    let k = a.dims().last().copied().unwrap_or(1);
    let n = if rb >= 2 { b.dims()[rb - 1] } else { 1 };
    let batch = |t: &TensorType| Shape(t.dims()[..t.rank().saturating_sub(2)].to_vec());
    let nb = broadcast_shapes(&batch(a), &batch(b)).map_or(1, |s| s.numel());
    crate::wgsl::matmul::grid_limit(nb.max(1), m, k, n, opts)
}

/// `conv_act`'s activation must have a WGSL form (all of rlx-opt's do).
fn conv_act(node: &NodeQuery) -> Result<(), String> {
    let act = node.attrs.str("activation").unwrap_or("none");
    if act == "none"
        || apply(
            act,
            &["y".into()],
            &[DType::F32],
            DType::F32,
            &rlx_ir::Attrs::new(),
        )
        .is_some()
    {
        Ok(())
    } else {
        Err(format!("activation `{act}` has no WGSL form"))
    }
}
