//! Gather along an axis (`gather`, `index_select`, `embedding`): one thread
//! per output element. Negative indices count from the end (the reference
//! rule); an index out of range raises the run's error flag (a typed error
//! after the run) and writes 0 instead of reading out of bounds.

use super::{flag_store, flat_entry, grid, unravel, Builder, Kernel};
use crate::error::WgpuError;
use crate::tref::TensorRef;
use std::fmt::Write;

pub fn kernel(
    name: &str,
    x: &TensorRef,
    idx: &TensorRef,
    axis: usize,
    out: &TensorRef,
) -> Result<Kernel, WgpuError> {
    let n = out.numel();
    let groups = grid(n, super::WG);
    let mut b = Builder::default();
    let mut s = flat_entry(n, groups);
    let (u, o) = unravel("idx", &out.dims, "o");
    s.push_str(&u);
    let ri = idx.dims.len();
    let ia = Builder::addr(idx, &o[axis..axis + ri]);
    let (iv, wide) = b.load_index(idx, &ia);
    let d = x.dims[axis];
    let mut xi: Vec<String> = o[..axis].to_vec();
    xi.push("u32(ii)".into());
    xi.extend_from_slice(&o[axis + ri..]);
    // `addr` skips size-1 axes; the gathered axis must always count.
    let mut xr = x.clone();
    let mut a = format!("{}", xr.offset);
    for (k, i) in xi.iter().enumerate() {
        if k == axis || (xr.dims[k] > 1 && xr.strides[k] != 0) {
            let _ = write!(a, " + i32({i}) * {}", xr.strides[k]);
        }
    }
    xr.offset = 0;
    let lx = b.load(x, &a);
    let flag = flag_store(&mut b);
    let zero = match x.dtype {
        rlx_ir::DType::F32 | rlx_ir::DType::F16 => "0.0",
        rlx_ir::DType::Bool => "false",
        _ => "0",
    };
    let ty = super::compute_ty(x.dtype)?;
    let st = b.store(out, &format!("{} + i32(idx)", out.offset), "y");
    let _ = write!(
        s,
        "let raw: i32 = {iv};\nlet ii: i32 = select(raw, raw + {d}, raw < 0);\nvar y: {ty} = {zero};\nif ({wide} || ii < 0 || ii >= {d}) {{ {flag} }} else {{ y = {lx}; }}\n{st}\n}}\n"
    );
    Ok(b.finish(name.to_string(), s, groups))
}
