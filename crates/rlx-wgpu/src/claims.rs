//! The op set this backend runs natively: the elementwise table, the
//! reductions, and the structural kernels of `lower`.

use rlx_ir::DType;
use rlx_runtime::Claims;

/// Every (op, dtypes) with a WGSL kernel.
pub fn table() -> Vec<(&'static str, Vec<DType>)> {
    let mut v = crate::wgsl::expr::claims();
    v.extend(crate::wgsl::reduce::claims());
    v.extend(crate::lower::structural_claims());
    v.push((
        "fused_elementwise",
        vec![DType::F32, DType::F16, DType::I32, DType::Bool, DType::I64],
    ));
    v
}

pub fn claims() -> Claims {
    Claims {
        ops: table()
            .into_iter()
            .map(|(o, d)| (o.to_string(), d))
            .collect(),
        compiled_out: Default::default(),
    }
}
