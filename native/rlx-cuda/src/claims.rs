//! What the CUDA backend runs natively, per op and dtype. One table; the
//! planner (`plan/`) has a lowering for each entry, and the GPU parity
//! test (`examples/gpu/parity.rs`) runs each against the CPU reference.

use crate::codegen::expr;
use rlx_ir::DType;
use rlx_runtime::Claims;
use std::collections::BTreeMap;

const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];
const INTS: &[DType] = &[DType::I8, DType::U8, DType::I16, DType::I32, DType::I64];

/// Structural and data-movement ops (any stored dtype).
const ANY_DTYPE: &[&str] = &[
    "reshape",
    "squeeze",
    "unsqueeze",
    "identity",
    "stop_gradient",
    "transfer",
    "permute",
    "broadcast",
    "narrow",
    "slice",
    "concat",
    "pad",
    "flip",
    "roll",
    "tile",
    "split",
    "constant",
    "arange",
    "gather",
    "embedding",
    "index_select",
    "where",
    "cast",
];
/// Float-only ops with their own kernels.
const FLOAT_KERNELS: &[&str] = &[
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "rope",
    "matmul",
    "matmul_bias_act",
    "matmul_residual",
    "reduce_logsumexp",
    "reduce_variance",
    "clamp",
    "fused_elementwise",
    "conv",
    "conv_act",
    "conv_transpose",
    "max_pool",
    "avg_pool",
];
/// Reductions on floats and integers.
const NUMERIC_REDUCE: &[&str] = &["reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin"];
/// Reductions on floats only.
const FLOAT_REDUCE: &[&str] = &["reduce_mean", "reduce_prod"];

fn stored() -> Vec<DType> {
    let mut d = vec![DType::Bool];
    d.extend(INTS);
    d.extend(FLOATS);
    d
}

/// The claims table.
pub fn claims() -> Claims {
    let mut ops: BTreeMap<String, Vec<DType>> = BTreeMap::new();
    let mut add = |op: &str, ds: &[DType]| {
        let e = ops.entry(op.to_string()).or_default();
        for d in ds {
            if !e.contains(d) {
                e.push(*d);
            }
        }
    };
    for op in expr::FLOAT_UNARY.iter().chain(expr::FLOAT_BINARY) {
        add(op, FLOATS);
    }
    for op in expr::INT_UNARY.iter().chain(expr::INT_BINARY) {
        add(op, INTS);
    }
    for op in expr::BOOL_OPS {
        add(op, &[DType::Bool]);
    }
    let all = stored();
    for op in ANY_DTYPE {
        add(op, &all);
    }
    for op in FLOAT_KERNELS {
        add(op, FLOATS);
    }
    // Attention computes in f32 (scores, softmax, accumulation): not f64.
    add("attention", &[DType::F16, DType::BF16, DType::F32]);
    add("attention_merged", &[DType::F16, DType::BF16, DType::F32]);
    for op in FLOAT_REDUCE {
        add(op, FLOATS);
    }
    for op in NUMERIC_REDUCE {
        add(op, FLOATS);
        add(op, INTS);
    }
    // GGUF block weights: moved to the device as their raw bytes, read by
    // dequant_matmul (keyed by x's dtype; `select` checks the weight's).
    add("transfer", &crate::codegen::kernels::quant::DTYPES);
    add("dequant_matmul", &crate::codegen::kernels::quant::X_DTYPES);
    add("reduce_any", &[DType::Bool]);
    add("reduce_all", &[DType::Bool]);
    for v in ops.values_mut() {
        v.sort();
    }
    Claims {
        ops,
        compiled_out: BTreeMap::new(),
    }
}
