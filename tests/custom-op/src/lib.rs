//! An example downstream crate: it adds `softsign(x) = x / (1 + |x|)` to rlx
//! with its own type rule, CPU kernel and decomposition into primitives —
//! without editing any rlx crate.

use rlx::custom::{
    register, Arity, Category, CpuError, Grad, InPlace, InferCx, KernelCx, Lowering, OpDef,
};
use rlx::ir::{Attrs, GraphBuilder, IrError, TensorType, ValueId};
use rlx::HostTensor;
use std::sync::OnceLock;

fn infer(cx: &InferCx) -> Result<Vec<TensorType>, String> {
    Ok(vec![cx.inputs[0].clone()])
}

fn decompose(b: &mut GraphBuilder, x: &[ValueId], _: &Attrs) -> Result<Vec<ValueId>, IrError> {
    let a = b.unary("abs", x[0])?;
    let dt = b.dtype(x[0]);
    let one = b.scalar(1.0, dt)?;
    let d = b.binary("add", a, one)?;
    Ok(vec![b.binary("div", x[0], d)?])
}

fn kernel(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let v: Vec<f64> = x
        .to_f64_vec()?
        .into_iter()
        .map(|v| v / (1.0 + v.abs()))
        .collect();
    Ok(vec![HostTensor::from_f64(x.dtype(), x.shape().clone(), v)?])
}

/// The op's definition under `name`.
pub fn def(name: &'static str) -> OpDef {
    OpDef {
        name,
        category: Category::Custom,
        arity: Arity::Exact(1),
        dtypes: &[rlx::DType::F32, rlx::DType::F64],
        attrs: &[],
        infer,
        decompose: Some(decompose),
        grad: Grad::Differentiable,
        doc: "x / (1 + |x|)",
        lowering: Lowering::Kernel,
        derivative: None,
        view: None,
        in_place: InPlace::No,
    }
}

/// Register `softsign` (with a CPU kernel) once per process.
pub fn register_softsign() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        register(def("softsign"), Some(kernel)).expect("softsign registers once");
    });
}

/// Register `softsign_decomposed` (no kernel: common-IR only).
pub fn register_softsign_without_kernel() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        register(def("softsign_decomposed"), None).expect("registers once");
    });
}
