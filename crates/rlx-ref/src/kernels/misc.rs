//! constant and arange.

use super::*;

fn constant(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    Ok(vec![cx.attrs.tensor("value")?.clone()])
}

fn arange(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let ty = cx.out_type(0);
    let (start, step) = (cx.float("start")?, cx.float("step")?);
    let n = ty.shape.numel();
    Ok(vec![from_floats(
        ty,
        (0..n).map(|i| start + i as f64 * step).collect(),
    )?])
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[("constant", constant), ("arange", arange)];
