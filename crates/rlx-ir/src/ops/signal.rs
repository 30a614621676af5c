//! Scans along an axis (cumulative ops), sorting, FFTs on complex tensors,
//! and seeded random generation.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::op::{Arity::*, Category as C, Grad::*};

fn along_axis(cx: &InferCx) -> R {
    axis_of(cx, "axis", cx.inputs[0].rank())?;
    same(cx)
}

fn argsort(cx: &InferCx) -> R {
    axis_of(cx, "axis", cx.inputs[0].rank())?;
    one(TensorType::new(DType::I64, cx.inputs[0].shape.clone()))
}

fn topk(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let ax = axis_of(cx, "axis", x.rank())?;
    let k = int(cx, "k")?;
    if k < 0 || k as usize > x.dims()[ax] {
        return Err(format!(
            "k = {k} must be in [0, {}] (the extent of axis {ax})",
            x.dims()[ax]
        ));
    }
    let mut d = x.dims().to_vec();
    d[ax] = k as usize;
    Ok(vec![
        TensorType::new(x.dtype, d.clone()),
        TensorType::new(DType::I64, d),
    ])
}

fn rfft(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let ax = axis_of(cx, "axis", x.rank())?;
    let mut d = x.dims().to_vec();
    d[ax] = d[ax] / 2 + 1;
    one(TensorType::new(DType::C64, d))
}

fn irfft(cx: &InferCx) -> R {
    let x = &cx.inputs[0];
    let ax = axis_of(cx, "axis", x.rank())?;
    let n = int(cx, "n")?;
    let m = x.dims()[ax];
    let n = if n < 0 {
        2 * m.saturating_sub(1)
    } else {
        n as usize
    };
    if n / 2 + 1 > m || n == 0 {
        return Err(format!(
            "n = {n} needs at least {} frequency bins, axis {ax} has {m}",
            n / 2 + 1
        ));
    }
    let mut d = x.dims().to_vec();
    d[ax] = n;
    one(TensorType::new(DType::F32, d))
}

fn complex(cx: &InferCx) -> R {
    expect_dtype(cx, 0, &[DType::F32])?;
    expect_same_dtype(cx, 1)?;
    if cx.inputs[0].shape != cx.inputs[1].shape {
        return Err(format!(
            "re {} and im {} must have one shape",
            cx.inputs[0].shape, cx.inputs[1].shape
        ));
    }
    one(TensorType::new(DType::C64, cx.inputs[0].shape.clone()))
}

fn complex_part(cx: &InferCx) -> R {
    one(TensorType::new(DType::F32, cx.inputs[0].shape.clone()))
}

fn random(cx: &InferCx) -> R {
    let dt = cx.attrs.dtype("dtype").map_err(|e| e.to_string())?;
    if !dt.is_float() {
        return Err(format!("dtype must be a float type, got {dt}"));
    }
    let s = ints(cx, "shape")?;
    if s.iter().any(|&d| d < 0) {
        return Err(format!("shape {s:?} has a negative extent"));
    }
    one(TensorType::new(
        dt,
        s.iter().map(|&d| d as usize).collect::<Vec<_>>(),
    ))
}

const CUM: &[AttrSpec] = &[
    attr("axis", K::Int, D::Required),
    attr("exclusive", K::Bool, D::Bool(false)),
    attr("reverse", K::Bool, D::Bool(false)),
];
const SORT: &[AttrSpec] = &[
    attr("axis", K::Int, D::Int(-1)),
    attr("descending", K::Bool, D::Bool(false)),
];
const AXIS_LAST: &[AttrSpec] = &[attr("axis", K::Int, D::Int(-1))];
const UNIFORM: &[AttrSpec] = &[
    attr("shape", K::Ints, D::Required),
    attr("dtype", K::DType, D::DType(DType::F32)),
    attr("low", K::Float, D::Float(0.0)),
    attr("high", K::Float, D::Float(1.0)),
    attr("seed", K::Int, D::Required),
];
const NORMAL: &[AttrSpec] = &[
    attr("shape", K::Ints, D::Required),
    attr("dtype", K::DType, D::DType(DType::F32)),
    attr("mean", K::Float, D::Float(0.0)),
    attr("std", K::Float, D::Float(1.0)),
    attr("seed", K::Int, D::Required),
];

pub static SIGNAL: &[OpDef] = &[
    def(
        "cumsum",
        C::Cumulative,
        Exact(1),
        NUMERIC,
        CUM,
        along_axis,
        None,
        Differentiable,
        "running sum along axis (exclusive: shifted by one; reverse: from the end)",
    ),
    def(
        "cumprod",
        C::Cumulative,
        Exact(1),
        NUMERIC,
        CUM,
        along_axis,
        None,
        Differentiable,
        "running product along axis",
    ),
    def(
        "sort",
        C::Sort,
        Exact(1),
        NUMERIC,
        SORT,
        along_axis,
        None,
        Differentiable,
        "stable sort along axis; NaN sorts last ascending, first descending",
    ),
    def(
        "argsort",
        C::Sort,
        Exact(1),
        NUMERIC,
        SORT,
        argsort,
        None,
        NotDifferentiable,
        "indices (i64) that stably sort along axis",
    ),
    def(
        "topk",
        C::Sort,
        Exact(1),
        NUMERIC,
        &[
            attr("k", K::Int, D::Required),
            attr("axis", K::Int, D::Int(-1)),
            attr("largest", K::Bool, D::Bool(true)),
        ],
        topk,
        None,
        Differentiable,
        "k largest (or smallest) values, sorted, and their i64 indices; ties keep the lower index",
    ),
    def(
        "fft",
        C::Fft,
        Exact(1),
        COMPLEX,
        AXIS_LAST,
        along_axis,
        None,
        Differentiable,
        "discrete Fourier transform along axis",
    ),
    def(
        "ifft",
        C::Fft,
        Exact(1),
        COMPLEX,
        AXIS_LAST,
        along_axis,
        None,
        Differentiable,
        "inverse DFT, scaled by 1/n",
    ),
    def(
        "rfft",
        C::Fft,
        Exact(1),
        &[DType::F32],
        AXIS_LAST,
        rfft,
        None,
        Differentiable,
        "DFT of a real signal: n/2+1 bins",
    ),
    def(
        "irfft",
        C::Fft,
        Exact(1),
        COMPLEX,
        &[
            attr("axis", K::Int, D::Int(-1)),
            attr("n", K::Int, D::Int(-1)),
        ],
        irfft,
        None,
        Differentiable,
        "inverse of rfft to n real samples (default 2·(bins−1))",
    ),
    def(
        "complex",
        C::Fft,
        Exact(2),
        &[DType::F32],
        &[],
        complex,
        None,
        Differentiable,
        "c64 from real and imaginary parts",
    ),
    def(
        "real",
        C::Fft,
        Exact(1),
        COMPLEX,
        &[],
        complex_part,
        None,
        Differentiable,
        "real part",
    ),
    def(
        "imag",
        C::Fft,
        Exact(1),
        COMPLEX,
        &[],
        complex_part,
        None,
        Differentiable,
        "imaginary part",
    ),
    def(
        "random_uniform",
        C::Random,
        Exact(0),
        &[],
        UNIFORM,
        random,
        None,
        NotDifferentiable,
        "uniform in [low, high) from a counter-based generator keyed by seed",
    ),
    def(
        "random_normal",
        C::Random,
        Exact(0),
        &[],
        NORMAL,
        random,
        None,
        NotDifferentiable,
        "normal(mean, std) by Box-Muller from the same generator",
    ),
    def(
        "bernoulli",
        C::Random,
        Exact(1),
        FLOAT,
        &[attr("seed", K::Int, D::Required)],
        same,
        None,
        NotDifferentiable,
        "1 with probability p (elementwise), else 0",
    ),
];
