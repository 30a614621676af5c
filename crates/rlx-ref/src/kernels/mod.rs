//! Kernel registry and the helpers kernels share. One module per op family;
//! each exports a `KERNELS` table of (op name, kernel).

mod control;
mod conv;
mod elementwise;
#[cfg(feature = "fft")]
mod fft;
mod fused;
pub mod gemm;
mod index;
#[cfg(feature = "quant")]
mod kquant;
mod linalg;
mod misc;
#[cfg(feature = "quant")]
pub mod quant;
mod random;
mod recurrent;
mod reduce;
mod shape;
mod signal;

use crate::error::CpuError;
use rlx_ir::{Attrs, DType, Graph, HostTensor, Shape, TensorType};
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// Runs a sub-graph (for control-flow kernels).
pub trait SubgraphRunner {
    fn run(&self, g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, CpuError>;
}

/// Everything a kernel sees.
pub struct KernelCx<'a> {
    pub op: &'a str,
    pub inputs: &'a [&'a HostTensor],
    pub attrs: &'a Attrs,
    /// Output types as the op's type rule inferred them.
    pub outputs: &'a [TensorType],
    pub runner: &'a dyn SubgraphRunner,
}

impl KernelCx<'_> {
    /// A runtime error of this op.
    pub fn fail(&self, msg: impl Into<String>) -> CpuError {
        CpuError::Runtime {
            op: self.op.to_string(),
            msg: msg.into(),
        }
    }
    pub fn input(&self, k: usize) -> &HostTensor {
        self.inputs[k]
    }
    pub fn out_type(&self, k: usize) -> &TensorType {
        &self.outputs[k]
    }
    pub fn int(&self, name: &str) -> Result<i64, CpuError> {
        Ok(self.attrs.int(name)?)
    }
    pub fn float(&self, name: &str) -> Result<f64, CpuError> {
        Ok(self.attrs.float(name)?)
    }
    pub fn bool(&self, name: &str) -> Result<bool, CpuError> {
        Ok(self.attrs.bool(name)?)
    }
    pub fn ints(&self, name: &str) -> Result<&[i64], CpuError> {
        Ok(self.attrs.ints(name)?)
    }
    pub fn str(&self, name: &str) -> Result<&str, CpuError> {
        Ok(self.attrs.str(name)?)
    }
    /// Resolve a (possibly negative) axis attribute against `rank`.
    pub fn axis(&self, name: &str, rank: usize) -> Result<usize, CpuError> {
        Ok(rlx_ir::shape::normalize_axis(self.int(name)?, rank)?)
    }
}

/// A CPU kernel: inputs in, outputs (of the inferred types) out.
pub type Kernel = fn(&KernelCx) -> Result<Vec<HostTensor>, CpuError>;

fn registry() -> &'static RwLock<HashMap<String, Kernel>> {
    static REG: OnceLock<RwLock<HashMap<String, Kernel>>> = OnceLock::new();
    REG.get_or_init(|| {
        let tables: &[&[(&str, Kernel)]] = &[
            elementwise::KERNELS,
            reduce::KERNELS,
            linalg::KERNELS,
            conv::KERNELS,
            recurrent::KERNELS,
            shape::KERNELS,
            index::KERNELS,
            signal::KERNELS,
            random::KERNELS,
            control::KERNELS,
            fused::KERNELS,
            misc::KERNELS,
            #[cfg(feature = "fft")]
            fft::KERNELS,
            #[cfg(feature = "quant")]
            quant::KERNELS,
        ];
        let mut m = HashMap::new();
        for (name, k) in tables.iter().copied().flatten() {
            let prev = m.insert(name.to_string(), *k);
            assert!(prev.is_none(), "two CPU kernels for `{name}`");
        }
        RwLock::new(m)
    })
}

/// Ops whose kernels this build left out, with the cargo feature of
/// rlx-cpu that brings them back (the dispatch report says so rather than
/// "unsupported").
pub fn compiled_out() -> &'static [(&'static str, &'static str)] {
    &[
        #[cfg(not(feature = "fft"))]
        ("fft", "fft"),
        #[cfg(not(feature = "fft"))]
        ("ifft", "fft"),
        #[cfg(not(feature = "fft"))]
        ("rfft", "fft"),
        #[cfg(not(feature = "fft"))]
        ("irfft", "fft"),
        #[cfg(not(feature = "quant"))]
        ("quantize", "quant"),
        #[cfg(not(feature = "quant"))]
        ("dequantize", "quant"),
        #[cfg(not(feature = "quant"))]
        ("dequant_matmul", "quant"),
    ]
}

/// The kernel for `op`, if any.
pub fn kernel(op: &str) -> Option<Kernel> {
    let k = registry().read().ok()?.get(op).copied();
    k.or_else(|| {
        rlx_ir::lookup(op)
            .filter(|d| d.is_formula())
            .map(|_| by_decomposition as Kernel)
    })
}

/// An op run as its decomposition, built for these inputs' types, by this
/// interpreter: every op defined by its scalar formula
/// (`rlx_ir::op::Lowering::Formula`), and the fused ops whose meaning is
/// exactly their decomposition's, roundings included (a fold of a
/// following node into a kernel).
pub(crate) fn by_decomposition(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let decompose = rlx_ir::lookup(cx.op)
        .and_then(|d| d.decompose)
        .ok_or_else(|| cx.fail("an op without a decomposition"))?;
    let mut b = rlx_ir::GraphBuilder::new(cx.op);
    let xs: Vec<rlx_ir::ValueId> = cx
        .inputs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            b.input(
                format!("x{k}"),
                TensorType::new(t.dtype(), t.shape().clone()),
            )
        })
        .collect();
    let ys = decompose(&mut b, &xs, cx.attrs)?;
    let g = b.finish(&ys)?;
    crate::interp::run_graph_refs(&g, cx.inputs)
}

pub fn has_kernel(op: &str) -> bool {
    kernel(op).is_some()
}

/// Names of all ops with a CPU kernel.
pub fn kernel_names() -> Vec<String> {
    let mut v: Vec<String> = registry()
        .read()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Register (or replace) the CPU kernel of a custom op.
pub fn register_kernel(op: &str, k: Kernel) {
    if let Ok(mut m) = registry().write() {
        m.insert(op.to_string(), k);
    }
}

// ---------------------------------------------------------------- helpers

/// Row-major coordinates of flat index `i`.
pub(crate) fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        if dims[k] > 0 {
            c[k] = i % dims[k];
            i /= dims[k];
        }
    }
    c
}

/// For every element of `out` (row-major), the flat index of the element of
/// a tensor of shape `src` that broadcasts to it.
pub(crate) fn broadcast_map(src: &Shape, out: &Shape) -> Vec<usize> {
    let (sr, or) = (src.rank(), out.rank());
    let sstr = src.strides();
    // Stride 0 on broadcast axes.
    let strides: Vec<usize> = (0..or)
        .map(|k| {
            if k < or - sr {
                0
            } else {
                let j = k - (or - sr);
                if src.dims()[j] == 1 {
                    0
                } else {
                    sstr[j]
                }
            }
        })
        .collect();
    strided_map(out.dims(), &strides, 0)
}

/// Flat source indices of a strided walk over `dims` (row-major order).
pub(crate) fn strided_map(dims: &[usize], strides: &[usize], offset: usize) -> Vec<usize> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut coord = vec![0usize; dims.len()];
    let mut idx = offset;
    for _ in 0..n {
        out.push(idx);
        for k in (0..dims.len()).rev() {
            coord[k] += 1;
            idx += strides[k];
            if coord[k] < dims[k] {
                break;
            }
            idx -= strides[k] * dims[k];
            coord[k] = 0;
        }
    }
    out
}

/// Split `dims` around `axis` into (outer, len, inner) counts.
pub(crate) fn around(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis],
        dims[axis + 1..].iter().product(),
    )
}

/// Elements as f64 in the dtype's arithmetic domain.
pub(crate) fn floats(t: &HostTensor) -> Result<Vec<f64>, CpuError> {
    Ok(t.to_f64_vec()?)
}
/// Elements as i64, for kernels that order, divide or index: a u64 value
/// above `i64::MAX` has no i64 value and is an error, not a negative number.
pub(crate) fn ints(t: &HostTensor) -> Result<Vec<i64>, CpuError> {
    let v = t.to_i64_vec()?;
    if t.dtype() == DType::U64 {
        if let Some(i) = v.iter().position(|&x| x < 0) {
            return Err(CpuError::Runtime {
                op: "u64".into(),
                msg: format!(
                    "element {i} is {}, above i64::MAX: this reference kernel computes in \
                     i64 and handles u64 only up to there",
                    v[i] as u64
                ),
            });
        }
    }
    Ok(v)
}
/// Elements as i64 bit patterns (u64 above `i64::MAX` reads negative): for
/// the ring operations (+, −, ×, bitwise, shifts left, narrowing casts),
/// which give the same bits either way.
pub(crate) fn ring_ints(t: &HostTensor) -> Result<Vec<i64>, CpuError> {
    Ok(t.to_i64_vec()?)
}

/// Build an output of type `ty` from f64 values.
pub(crate) fn from_floats(ty: &TensorType, v: Vec<f64>) -> Result<HostTensor, CpuError> {
    Ok(HostTensor::from_f64(ty.dtype, ty.shape.clone(), v)?)
}
pub(crate) fn from_ints(ty: &TensorType, v: Vec<i64>) -> Result<HostTensor, CpuError> {
    Ok(HostTensor::from_i64(ty.dtype, ty.shape.clone(), v)?)
}

/// Index values (i32/i64), each resolved against `len`: negative indices
/// count from the end; anything else outside [0, len) is an error.
pub(crate) fn resolve_indices(
    cx: &KernelCx,
    idx: &HostTensor,
    len: usize,
) -> Result<Vec<usize>, CpuError> {
    ints(idx)?
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + len as i64 } else { i };
            if j < 0 || j >= len as i64 {
                Err(cx.fail(format!(
                    "index {i} is out of range for an axis of extent {len}"
                )))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

/// Does this dtype compute in the float domain?
pub(crate) fn is_float_domain(d: DType) -> bool {
    d.is_float() || d == DType::C64
}
