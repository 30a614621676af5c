//! Elementwise ops defined by a scalar formula ([`Lowering::Formula`]).
//!
//! An entry here is the whole op: its type rule, its formula written with
//! elementwise primitives (the decomposition), and its derivative. No
//! backend has a table entry for these: the optimizer inlines the formula
//! before region fusion, so the CPU engine, WGSL and CUDA each compile it
//! into the region's one kernel; a graph compiled without the optimizer
//! reaches backends through the legalizer's common-IR path; the reference
//! interpreter evaluates the same formula (`rlx-ref`), and autodiff uses
//! the derivative. Adding one touches this file and the reference vectors
//! (docs/adding-an-op.md).
//!
//! 16-bit inputs are computed in f32 and rounded once at the end, as the
//! fused kernels do, so the graph and its regions agree.

use super::*;
use crate::error::IrError;
use crate::graph::{GraphBuilder, ValueId};
use crate::op::{Arity::Exact, Category as C, DerivFn, Grad, Lowering};

#[allow(dead_code)] // until the first formula op
/// A unary op defined by `value` (and differentiated by `derivative`).
const fn formula(
    name: &'static str,
    dtypes: &'static [DType],
    value: DecomposeFn,
    derivative: Option<DerivFn>,
    doc: &'static str,
) -> OpDef {
    let mut d = def(
        name,
        C::Unary,
        Exact(1),
        dtypes,
        &[],
        same,
        Some(value),
        if derivative.is_some() {
            Grad::Differentiable
        } else {
            Grad::NotDifferentiable
        },
        doc,
    );
    d.lowering = Lowering::Formula;
    d.derivative = derivative;
    d
}

/// The builder calls a formula is written with.
#[allow(dead_code)]
pub(crate) struct Fx<'a> {
    pub b: &'a mut GraphBuilder,
    /// The compute dtype (f32 for 16-bit inputs).
    pub dt: DType,
}

type Fr = Result<ValueId, IrError>;

#[allow(dead_code)]
impl Fx<'_> {
    pub fn c(&mut self, v: f64) -> Fr {
        self.b.scalar(v, self.dt)
    }
    pub fn op(&mut self, op: &str, x: ValueId) -> Fr {
        self.b.unary(op, x)
    }
    pub fn op2(&mut self, op: &str, x: ValueId, y: ValueId) -> Fr {
        self.b.binary(op, x, y)
    }
    /// `x op c` with a scalar constant.
    pub fn bin_c(&mut self, op: &str, x: ValueId, c: f64) -> Fr {
        let c = self.c(c)?;
        self.b.binary(op, x, c)
    }
    /// `c op x` with a scalar constant.
    pub fn c_bin(&mut self, c: f64, op: &str, x: ValueId) -> Fr {
        let c = self.c(c)?;
        self.b.binary(op, c, x)
    }
    pub fn select(&mut self, cond: ValueId, a: ValueId, b: ValueId) -> Fr {
        self.b.op1("where", &[cond, a, b], Attrs::new())
    }
    /// The polynomial `cs[0] w^n + … + cs[n]` by Horner's rule.
    pub fn horner(&mut self, w: ValueId, cs: &[f64]) -> Fr {
        let mut p = self.c(cs[0])?;
        for &c in &cs[1..] {
            let pw = self.op2("mul", p, w)?;
            p = self.bin_c("add", pw, c)?;
        }
        Ok(p)
    }
}

#[allow(dead_code)]
/// Run `f` on `x` in the formula's compute type: 16-bit floats are widened
/// to f32 first and the result rounded back once.
pub(crate) fn widened(
    b: &mut GraphBuilder,
    x: ValueId,
    f: impl FnOnce(&mut Fx, ValueId) -> Fr,
) -> Fr {
    let dt = b.dtype(x);
    let wide = matches!(dt, DType::F16 | DType::BF16);
    let cdt = if wide { DType::F32 } else { dt };
    let cast = |b: &mut GraphBuilder, v, to: DType| {
        b.op1(
            "cast",
            &[v],
            Attrs::new().with("dtype", crate::attr::Attr::DType(to)),
        )
    };
    let xc = if wide { cast(b, x, cdt)? } else { x };
    let y = f(&mut Fx { b, dt: cdt }, xc)?;
    if wide {
        cast(b, y, dt)
    } else {
        Ok(y)
    }
}

#[allow(unused_macros)]
/// Adapts a one-input formula `fn(&mut Fx, x) -> y` to [`DecomposeFn`].
macro_rules! formula_fn {
    ($name:ident, $body:path) => {
        fn $name(b: &mut GraphBuilder, x: &[ValueId], _: &Attrs) -> Result<Vec<ValueId>, IrError> {
            Ok(vec![widened(b, x[0], $body)?])
        }
    };
}

pub static FORMULA: &[OpDef] = &[];
