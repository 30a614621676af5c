//! The fast engine's GEMM kernels beside the `gemm` crate's (which
//! `rlx_ref::kernels::gemm` wraps, re-exported here): `gemm128`, the
//! wasm32 simd128 kernel, and `amx`, f32-accurate products on Intel AMX
//! tiles. The reference kernels themselves live in `rlx-ref`.

pub mod amx;
pub mod gemm128;

pub use rlx_ref::kernels::{gemm, kernel, KernelCx, SubgraphRunner};
