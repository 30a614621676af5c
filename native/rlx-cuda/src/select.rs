//! Per-node selection ([`rlx_runtime::Backend::select`]): what the claims
//! (op × dtype) cannot say and the planner would otherwise find only while
//! building — a region op without a CUDA expression, a mask kind or an
//! activation the kernels lack. Checked during legalization without a GPU,
//! so the dispatch report and the `DispatchError` show each refusal with
//! its reason before anything is built (a `dequant_matmul` whose weight
//! type has no CUDA decoder, say).

use crate::codegen::expr;
use rlx_runtime::NodeQuery;

/// `Ok` if the CUDA kernels run this node, else why not.
pub fn check(node: &NodeQuery) -> Result<(), String> {
    match node.op {
        "fused_elementwise" => {
            let body = node.attrs.graph("body").map_err(|e| e.to_string())?;
            crate::plan::region_form(body)
        }
        "attention" | "attention_merged" => {
            let kind = node.attrs.str("mask_kind").unwrap_or("none");
            let has_mask = node.inputs.len() > 3;
            match (kind, has_mask) {
                ("custom" | "bias", true) | ("none", false) => Ok(()),
                (builtin, false) => {
                    let window = node.attrs.int("window").unwrap_or(0);
                    rlx_ir::ops::fused::attention_mask(builtin, 1, 1, window)
                        .map(|_| ())
                        .ok_or_else(|| format!("no CUDA kernel for the mask kind `{builtin}`"))
                }
                (kind, true) => Err(format!(
                    "no CUDA kernel for the mask kind `{kind}` with a mask input"
                )),
            }
        }
        "matmul_bias_act" | "matmul_residual" => {
            let act = node.attrs.str("activation").unwrap_or("none");
            if act == "none" || expr::unary(act, node.dtype, "y").is_some() {
                Ok(())
            } else {
                Err(format!(
                    "no CUDA epilogue for the activation `{act}` on {}",
                    node.dtype
                ))
            }
        }
        "dequant_matmul" => dequant_matmul(node),
        _ => Ok(()),
    }
}

/// `dequant_matmul` decodes the GGUF block types of `kernels::quant` in
/// the kernel; other weight types (Q2_K, Q3_K, MXFP4, ...) are not.
fn dequant_matmul(node: &NodeQuery) -> Result<(), String> {
    use crate::codegen::kernels::quant;
    let Some(w) = node.inputs.get(1) else {
        return Err("dequant_matmul without a weight".into());
    };
    if !quant::decodes(w.dtype) {
        return Err(format!(
            "no CUDA kernel decodes {} weights ({} are decoded)",
            w.dtype,
            quant::names()
        ));
    }
    if w.rank() != 2 {
        return Err(format!("the weight {w} is not (N, K)"));
    }
    Ok(())
}
