//! Statically quantized dense layers as integer products: the layer input
//! quantized to i8 on its calibrated grid, the i8 weight read as stored
//! (in, out), and `matmul_integer_scaled` — exact int32 sums brought back
//! to f32 by `s_x · s_w` (per tensor or per output channel) in the
//! product's epilogue, with the layer's bias. A backend with an integer
//! GEMM (the fast CPU engine) runs the product in 8 bits; the others run
//! its decomposition.

use super::rewrite::SitePlan;
use crate::Error;
use rlx_ir::{Attrs, DType, GraphBuilder, HostTensor, ValueId};

/// `x` on the grid `q` as i8: `clamp(round(x / s) + z, qmin, qmax)`.
pub(super) fn quantize_input(
    b: &mut GraphBuilder,
    x: ValueId,
    q: &super::QParams,
) -> Result<ValueId, Error> {
    let s = b.scalar(q.scale as f64, DType::F32)?;
    let mut t = b.binary("div", x, s)?;
    t = b.unary("round", t)?;
    if q.zero_point != 0 {
        let z = b.scalar(q.zero_point as f64, DType::F32)?;
        t = b.binary("add", t, z)?;
    }
    let bounds = Attrs::new()
        .with("min", q.qmin as f64)
        .with("max", q.qmax as f64);
    t = b.op1("clamp", &[t], bounds)?;
    Ok(b.op1("cast", &[t], Attrs::new().with("dtype", DType::I8))?)
}

/// The dense node `op` (`matmul`, `matmul_bias_act`, `matmul_residual`;
/// inputs `ins` as mapped, attributes `attrs`) on the quantized input `xq`
/// and the i8 (in, out) weight `w`: the integer product with its bias,
/// then the node's activation, then its residual.
pub(super) fn dense(
    b: &mut GraphBuilder,
    op: &str,
    attrs: &Attrs,
    ins: &[ValueId],
    xq: ValueId,
    w: ValueId,
    p: &SitePlan,
) -> Result<ValueId, Error> {
    let q = p
        .activation
        .ok_or_else(|| Error::Quant(format!("`{}` has no activation grid", p.name)))?;
    let n = p.dims[p.out_axis];
    let ws = &p.weight.scales;
    // The product of the two scales, per output channel or one.
    let scale: Vec<f32> = ws.iter().map(|&v| q.scale * v).collect();
    let scale = if scale.len() == 1 {
        b.scalar(scale[0] as f64, DType::F32)?
    } else {
        b.constant(HostTensor::from_slice(&scale, vec![n])?)?
    };
    let za = b.scalar(q.zero_point as f64, DType::I8)?;
    let zb = b.scalar(0.0, DType::I8)?;
    let mut args = vec![xq, w, za, zb, scale];
    let (bias, residual) = match op {
        "matmul_bias_act" => (ins.get(2).copied(), None),
        "matmul_residual" => (ins.get(3).copied(), ins.get(2).copied()),
        _ => (None, None),
    };
    args.extend(bias);
    let mut y = b.op1("matmul_integer_scaled", &args, Attrs::new())?;
    match attrs.str("activation") {
        Ok("none") | Err(_) => {}
        Ok(act) => y = b.unary(act, y)?,
    }
    if let Some(r) = residual {
        y = b.binary("add", y, r)?;
    }
    Ok(y)
}
