//! Per-node selection ([`rlx_runtime::Backend::select`]): what the claims
//! (op × dtype) cannot say and lowering would otherwise find only while
//! building — a `fused_elementwise` region with several outputs, or with
//! an op that has no WGSL form for its dtypes. Checked during legalization
//! without a GPU, so the dispatch report and the `DispatchError` show each
//! refusal with its reason before anything is built.

use crate::wgsl::expr::apply;
use crate::WgpuOptions;
use rlx_ir::DType;
use rlx_runtime::NodeQuery;

/// `Ok` if the WGSL kernels run this node, else why not.
pub fn check(node: &NodeQuery, opts: &WgpuOptions) -> Result<(), String> {
    match node.op {
        "dequant_matmul" => return dequant_matmul(node),
        "matmul" | "matmul_bias_act" | "matmul_residual" => return matmul(node, opts),
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
    let (ad, bd) = (a.dims(), b.dims());
    let mat = |d: &[usize], left: bool| -> (usize, usize) {
        match d.len() {
            0 => (1, 1),
            1 if left => (1, d[0]),
            1 => (d[0], 1),
            r => (d[r - 2], d[r - 1]),
        }
    };
    let ((m, k), (_, n)) = (mat(ad, true), mat(bd, false));
    let batch = |d: &[usize]| d[..d.len().saturating_sub(2)].to_vec();
    let (ba, bb) = (batch(ad), batch(bd));
    let rank = ba.len().max(bb.len());
    let at = |v: &[usize], i: usize| {
        let off = rank - v.len();
        if i < off {
            1
        } else {
            v[i - off]
        }
    };
    let nb: usize = (0..rank).map(|i| at(&ba, i).max(at(&bb, i))).product();
    crate::wgsl::matmul::grid_limit(nb.max(1), m, k, n, opts)
}
