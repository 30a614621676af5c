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
pub(crate) struct Fx<'a> {
    pub b: &'a mut GraphBuilder,
    /// The compute dtype (f32 for 16-bit inputs).
    pub dt: DType,
}

type Fr = Result<ValueId, IrError>;

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

/// Adapts a one-input formula `fn(&mut Fx, x) -> y` to [`DecomposeFn`].
macro_rules! formula_fn {
    ($name:ident, $body:path) => {
        fn $name(b: &mut GraphBuilder, x: &[ValueId], _: &Attrs) -> Result<Vec<ValueId>, IrError> {
            Ok(vec![widened(b, x[0], $body)?])
        }
    };
}

// ---- erfinv ----

/// Giles' single-precision approximation ("Approximating the erfinv
/// function", GPU Computing Gems, 2011): with w = -ln((1-x)(1+x)), a
/// degree-8 polynomial in w - 2.5 for w < 5, else in sqrt(w) - 3; relative
/// error below 4e-7; f64 refines it by Newton's method on erf. ±1 give
/// ±inf (the polynomial does not reach there), |x| > 1 and NaN give NaN
/// (the logarithm's).
fn erfinv(f: &mut Fx, x: ValueId) -> Fr {
    const CENTRAL: [f64; 9] = [
        2.81022636e-08,
        3.43273939e-07,
        -3.5233877e-06,
        -4.39150654e-06,
        0.00021858087,
        -0.00125372503,
        -0.00417768164,
        0.246640727,
        1.50140941,
    ];
    const TAIL: [f64; 9] = [
        -0.000200214257,
        0.000100950558,
        0.00134934322,
        -0.00367342844,
        0.00573950773,
        -0.0076224613,
        0.00943887047,
        1.00167406,
        2.83297682,
    ];
    let lo = f.c_bin(1.0, "sub", x)?;
    let hi = f.bin_c("add", x, 1.0)?;
    let prod = f.op2("mul", lo, hi)?;
    let ln = f.op("log", prod)?;
    let w = f.op("neg", ln)?;
    let wc = f.bin_c("sub", w, 2.5)?;
    let central = f.horner(wc, &CENTRAL)?;
    let sw = f.op("sqrt", w)?;
    let wt = f.bin_c("sub", sw, 3.0)?;
    let tail = f.horner(wt, &TAIL)?;
    let small = f.bin_c("lt", w, 5.0)?;
    let p = f.select(small, central, tail)?;
    let mut y = f.op2("mul", p, x)?;
    if f.dt == DType::F64 {
        // Two Newton steps on erf(y) = x: about 1e-14 relative for
        // |x| <= 0.999, fewer digits toward ±1 where erf(y) - x cancels.
        for _ in 0..2 {
            y = newton_erf(f, x, y)?;
        }
    }
    let ax = f.op("abs", x)?;
    let edge = f.bin_c("eq", ax, 1.0)?;
    let inf = f.bin_c("mul", x, f64::INFINITY)?;
    f.select(edge, inf, y)
}
formula_fn!(erfinv_d, erfinv);

/// y - (erf(y) - x) / erf'(y), with erf'(y) = 2/sqrt(pi) · e^(-y²).
fn newton_erf(f: &mut Fx, x: ValueId, y: ValueId) -> Fr {
    let e = f.op("erf", y)?;
    let r = f.op2("sub", e, x)?;
    let y2 = f.op2("mul", y, y)?;
    let g = f.op("exp", y2)?;
    let step = f.op2("mul", r, g)?;
    let step = f.bin_c("mul", step, std::f64::consts::PI.sqrt() / 2.0)?;
    f.op2("sub", y, step)
}

/// erfinv'(x) = sqrt(pi)/2 · e^(y²).
fn erfinv_grad(b: &mut GraphBuilder, _x: ValueId, y: ValueId) -> Fr {
    let y2 = b.binary("mul", y, y)?;
    let e = b.unary("exp", y2)?;
    let c = b.scalar(std::f64::consts::PI.sqrt() / 2.0, b.dtype(y))?;
    b.binary("mul", e, c)
}

pub static FORMULA: &[OpDef] = &[formula(
    "erfinv",
    FLOAT,
    erfinv_d,
    Some(erfinv_grad),
    "inverse of erf on (-1, 1); ±1 give ±inf, |x| > 1 NaN",
)];
