//! Kernel templates. Each returns CUDA C text named `@NAME@`; shapes,
//! strides and attribute values are constants in the text.
//!
//! One module per family: `pointwise` (elementwise loops), `reduction`,
//! `rows` (softmax, norms, gather), `quant` (dequant_matmul over GGUF
//! block weights), `conv` (direct convolutions and pools), `attention_spec` (what the attention
//! kernels share), `attention_simt` and `attention_mma` (tensor cores).
//! This module holds the index arithmetic they all write.

mod attention_mma;
mod attention_simt;
mod attention_spec;
mod attention_split;
mod conv;
mod pointwise;
pub mod quant;
mod reduction;
mod rows;

pub use attention_mma::{attention_mma, attention_mma_smem, MmaBlocks};
pub use attention_simt::{
    attention, attention_rows, attention_rows_smem, attention_softmax, attention_tiled,
    ATTN_ROWS_PER_WARP,
};
pub use attention_spec::{AttentionSpec, Mask};
pub use attention_split::{
    attention_split, attention_split_combine, attention_split_shape, attention_split_smem,
    SPLIT_BELOW_ROWS, SPLIT_THREADS,
};
pub use conv::{conv, pool};
pub use pointwise::{elementwise, elementwise_vec, operand_load, GatherLoad, Operand};
pub use reduction::{
    reduce, Reduce, ReduceConsumer, ReduceEpilogue, ReduceLayout, ReduceSrc, SplitOperand,
    REDUCE_COLUMNS,
};
pub use rows::{gather, norm, norm_warp, softmax, NormSrc};

use crate::ctype::storage;
use rlx_ir::DType;

/// Threads per block of the row kernels (reductions, norms).
pub const ROW_THREADS: u32 = 256;

fn st(d: DType) -> &'static str {
    storage(d).unwrap_or("float")
}

/// Code that sets `c0..c{r-1}` from the flat index `i` over `dims`.
fn unravel(dims: &[usize], i: &str) -> String {
    unravel_as(dims, 0, i, "r_", "long long")
}

/// Code that sets `c{first}..` from index `i` over `dims` (`var` holds
/// the remainder).
fn unravel_from(dims: &[usize], first: usize, i: &str, var: &str) -> String {
    unravel_as(dims, first, i, var, "long long")
}

/// [`unravel_from`] in integer type `ty`: `unsigned` when the index fits
/// in 32 bits, where a division by a constant is a multiply-high and a
/// shift (64-bit division is a long emulated sequence, and elementwise
/// kernels over large tensors are instruction-bound on it).
fn unravel_as(dims: &[usize], first: usize, i: &str, var: &str, ty: &str) -> String {
    let mut s = format!("{ty} {var} = {i};");
    for k in (0..dims.len()).rev() {
        let c = first + k;
        if k == 0 {
            s += &format!(" {ty} c{c} = {var};");
        } else {
            s += &format!(" {ty} c{c} = {var} % {d}; {var} /= {d};", d = dims[k]);
        }
    }
    s
}

/// `c0*s0 + c1*s1 + ...` (zero strides and unit dims left out).
fn offset(dims: &[usize], strides: &[i64]) -> String {
    let terms: Vec<String> = strides
        .iter()
        .enumerate()
        .filter(|&(k, &s)| s != 0 && dims[k] != 1)
        .map(|(k, &s)| {
            if s == 1 {
                format!("c{k}")
            } else {
                format!("c{k} * {s}LL")
            }
        })
        .collect();
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}

/// Contiguous row-major strides of `dims`.
pub fn contiguous(dims: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1] as i64;
    }
    s
}

/// Block-wide combine of `v` (per-thread partials) into thread 0's `v`, then
/// broadcast through `sh[0]`. `op` combines two values `a`, `b`.
fn block_reduce(ty: &str, op: &str) -> String {
    format!(
        "  {{ __shared__ {ty} sh[{t}]; sh[threadIdx.x] = v; __syncthreads();\n    for (int w = {h}; w > 0; w >>= 1) {{ if (threadIdx.x < w) {{ {ty} a = sh[threadIdx.x], b = sh[threadIdx.x + w]; sh[threadIdx.x] = {op}; }} __syncthreads(); }}\n    v = sh[0]; __syncthreads(); }}\n",
        t = ROW_THREADS,
        h = ROW_THREADS / 2
    )
}
