//! The one portable SIMD layer of the fast kernels.
//!
//! Kernels are written as plain loops over `f32` slices with branch-free
//! bodies, which LLVM vectorizes. `simd_fn!` compiles such a function
//! several times — on x86-64 once with AVX-512, once with AVX2+FMA and once
//! for the baseline — and picks the widest this CPU has, once, at run time.
//! Everywhere else it is compiled once, as is: the wasm32 build enables
//! `simd128` for the whole crate (`scripts/build-wasm`), so the same loops
//! become wasm SIMD in the browser. The math helpers below are
//! `#[inline(always)]` so they are compiled into each variant, and they
//! avoid libm calls so the loops around them stay vectorizable.

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use std::sync::OnceLock;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Level {
        Avx512,
        Avx2,
        Base,
    }

    pub fn level() -> Level {
        static L: OnceLock<Level> = OnceLock::new();
        *L.get_or_init(|| {
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
                Level::Avx512
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
            {
                Level::Avx2
            } else {
                Level::Base
            }
        })
    }
}

/// Define a function whose body is compiled once per SIMD level and
/// dispatched at run time (see the module docs). No generics; arguments
/// are plain identifiers.
macro_rules! simd_fn {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            // `M` (a [`Mad`]) is how the body's math multiply-adds: fused in
            // the variants compiled with FMA, plain elsewhere.
            #[inline(always)]
            #[allow(clippy::too_many_arguments, clippy::extra_unused_type_parameters)]
            fn imp<M: $crate::fast::simd::Mad>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                use $crate::fast::simd::{Fused, Plain};
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn v4($($arg: $ty),*) $(-> $ret)? { imp::<Fused>($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn v3($($arg: $ty),*) $(-> $ret)? { imp::<Fused>($($arg),*) }
                use $crate::fast::simd::x86::{level, Level};
                // SAFETY: each variant runs only after `level()` confirmed
                // at run time that this CPU has every feature it enables.
                #[allow(unsafe_code)]
                match level() {
                    Level::Avx512 => unsafe { v4($($arg),*) },
                    Level::Avx2 => unsafe { v3($($arg),*) },
                    Level::Base => imp::<Plain>($($arg),*),
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                imp::<$crate::fast::simd::Plain>($($arg),*)
            }
        }
    };
}
pub(crate) use simd_fn;

/// How the math helpers below compute `a·b + c`. Rust never contracts a
/// multiply and an add on its own, so without this every polynomial step
/// is two dependent instructions; `f32::mul_add` is one where the code is
/// compiled with FMA, but a libm call (scalar, so no vectorized loop)
/// where it is not — hence the choice is made per `simd_fn!` variant.
pub trait Mad {
    fn mad(a: f32, b: f32, c: f32) -> f32;
}

/// Fused multiply-add (one rounding): the AVX-512 and AVX2+FMA variants.
pub enum Fused {}
/// Multiply, then add: the baseline x86 variant and wasm32 (whose SIMD has
/// no fused multiply-add outside relaxed SIMD).
pub enum Plain {}

impl Mad for Fused {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Mad for Plain {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// The instruction set the fast kernels use (for reports and benchmarks).
pub fn level_name() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        match x86::level() {
            x86::Level::Avx512 => "avx512",
            x86::Level::Avx2 => "avx2+fma",
            x86::Level::Base => "sse2",
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        "simd128"
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    {
        "scalar"
    }
}

/// e^x for x ≤ 0 (a softmax's `x - max`): about half the vector
/// instructions of [`exp`], which the softmax passes of attention spent
/// most of their time in. Relative error < 3e-7 down to −87; 0 from −88
/// on (e^x is subnormal below ~−87.3: flushed, as −inf's exact 0 needs);
/// NaN stays NaN. Positive x gives wrong values: callers subtract the
/// maximum first.
#[inline(always)]
pub fn exp_nonpos<M: Mad>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // A compare and select, not `f32::max`: NaN must pass through (it
    // does: the comparison is false) and it stays one vector max.
    let xc = if x < -88.0 { -88.0 } else { x };
    // n = round(x·log₂e) lands in the low mantissa bits of `t`, biased by
    // 127: those bits shifted into the exponent field are 2ⁿ (n ∈
    // [−127, 0]; n = −127 gives +0, which flushes −88 and −inf to 0).
    const MAGIC: f32 = 12_582_912.0 + 127.0;
    let t = M::mad(xc, LOG2E, MAGIC);
    let nf = t - MAGIC;
    let r = M::mad(nf, -LN2_LO, M::mad(nf, -LN2_HI, xc));
    // e^r on |r| ≤ ln2/2: degree 6, least squares at Chebyshev nodes
    // (relative error 1.9e-9 with exact coefficients, before their
    // rounding to f32).
    let mut p = 0.001_382_942_1;
    for c in [
        0.008_374_771,
        0.041_668_36,
        0.166_664_21,
        0.499_999_9,
        1.0,
        1.0,
    ] {
        p = M::mad(p, r, c);
    }
    p * f32::from_bits(t.to_bits() << 23)
}

/// e^x in f32, relative error < 2e-7 over the range where it does not
/// overflow; +inf above ~88.7, 0 below ~-87.3, NaN stays NaN.
#[inline(always)]
pub fn exp<M: Mad>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let xc = x.clamp(-87.5, 88.75);
    // Round to nearest with the 1.5·2²³ trick: `f32::round` is a libm call
    // and `as i32` saturates, and either would stop the loop from
    // vectorizing. The integer n sits in the low mantissa bits of `t`.
    const MAGIC: f32 = 12_582_912.0;
    let t = M::mad(xc, LOG2E, MAGIC);
    let nf = t - MAGIC;
    let r = M::mad(nf, -LN2_LO, M::mad(nf, -LN2_HI, xc));
    // Taylor polynomial of e^r on |r| ≤ ln2/2, by Horner's rule.
    let mut p = 1.0 / 5040.0;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = M::mad(p, r, c);
    }
    // 2^n built in two halves so n = 128 (x near 88.7) does not overflow
    // the exponent field.
    let n = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let h = n >> 1;
    let s1 = f32::from_bits(((h + 127) as u32) << 23);
    let s2 = f32::from_bits(((n - h + 127) as u32) << 23);
    let y = p * s1 * s2;
    let y = if x > 88.75 { f32::INFINITY } else { y };
    let y = if x < -87.5 { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// `t·(a1 + t·(a2 + …))`: erfc(a) ≈ this · e^(−a²) for a ≥ 0 with
/// t = 1 / (1 + p·a), absolute error < 1.5e-7 (Abramowitz–Stegun 7.1.26).
#[inline(always)]
fn erfc_factor<M: Mad>(a: f32) -> f32 {
    let t = 1.0 / M::mad(0.327_591_1, a, 1.0);
    let mut p = 1.061_405_4;
    for c in [-1.453_152, 1.421_413_7, -0.284_496_74, 0.254_829_6] {
        p = M::mad(p, t, c);
    }
    t * p
}

/// erf(x) in f32, absolute error < 4e-7: a Taylor series below |x| = 0.5,
/// Abramowitz–Stegun 7.1.26 above (tested against libm's f64 erf).
#[inline(always)]
pub fn erf<M: Mad>(x: f32) -> f32 {
    // For |x| < 0.5 a Taylor series is exact to f32; above, the A&S form.
    let a = x.abs();
    let x2 = x * x;
    let mut s = -1.0 / 1320.0;
    for c in [1.0 / 216.0, -1.0 / 42.0, 1.0 / 10.0, -1.0 / 3.0, 1.0] {
        s = M::mad(s, x2, c);
    }
    let small = x * (std::f32::consts::FRAC_2_SQRT_PI * s);
    let big = M::mad(-erfc_factor::<M>(a), exp::<M>(-a * a), 1.0).copysign(x);
    if a < 0.5 {
        small
    } else {
        big
    }
}

/// tanh(x) in f32 through e^(2|x|); absolute error < 3e-7.
#[inline(always)]
pub fn tanh<M: Mad>(x: f32) -> f32 {
    let a = x.abs();
    let x2 = x * x;
    // Odd Taylor series near 0 (where 1 - 2/(e^2x + 1) cancels).
    let mut s = 62.0 / 2835.0;
    for c in [-17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0, 1.0] {
        s = M::mad(s, x2, c);
    }
    let small = x * s;
    let e = exp::<M>(2.0 * a.min(20.0));
    let big = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    if a < 0.125 || x.is_nan() {
        small
    } else {
        big
    }
}

#[inline(always)]
pub fn sigmoid<M: Mad>(x: f32) -> f32 {
    1.0 / (1.0 + exp::<M>(-x))
}

/// x·Φ(x), Φ the standard normal CDF, written with one erfc so that one
/// e^(−x²/2) serves both signs: Φ = 1 − q for x ≥ 0 and q for x < 0, with
/// q = erfc(|x|/√2) / 2. Absolute error < 1e-7·|x| from the erfc form, and
/// no cancellation for negative x (where 1 + erf(x/√2) would cancel).
#[inline(always)]
pub fn gelu<M: Mad>(x: f32) -> f32 {
    let a = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let q = 0.5 * erfc_factor::<M>(a) * exp::<M>(-a * a);
    let phi = if x < 0.0 { q } else { 1.0 - q };
    x * phi
}

#[inline(always)]
pub fn gelu_tanh<M: Mad>(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2/π)
    let inner = K * M::mad(0.044_715 * x * x, x, x);
    0.5 * x * (1.0 + tanh::<M>(inner))
}

#[inline(always)]
pub fn silu<M: Mad>(x: f32) -> f32 {
    x * sigmoid::<M>(x)
}

#[inline(always)]
pub fn relu(x: f32) -> f32 {
    // NaN propagates, as in the reference; -0.0 gives +0.0 as the
    // reference's max(x, 0) does (found by the `compile` fuzz target:
    // rsqrt(-0.0) is -inf where rsqrt(+0.0) is +inf).
    if x <= 0.0 {
        0.0
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    //! Accuracy against f64 std math over a dense sweep.

    use super::{Fused, Mad, Plain};

    fn sweep(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| (lo + (hi - lo) * i as f64 / n as f64) as f32)
    }

    /// `f` within 3e-7 relative of f64 e^x over [lo, hi].
    fn exp_within(name: &str, lo: f64, hi: f64, f: impl Fn(f32) -> f32) {
        for x in sweep(lo, hi, 200_000) {
            let (want, got) = ((x as f64).exp(), f(x) as f64);
            assert!(
                ((got - want) / want).abs() < 3e-7,
                "{name}({x}) = {got}, want {want}"
            );
        }
    }

    fn exp_accurate<M: Mad>() {
        exp_within("exp", -87.0, 88.0, super::exp::<M>);
        assert_eq!(super::exp::<M>(100.0), f32::INFINITY);
        assert_eq!(super::exp::<M>(-100.0), 0.0);
        assert!(super::exp::<M>(f32::NAN).is_nan());
    }

    #[test]
    fn exp_is_accurate() {
        exp_accurate::<Plain>();
        exp_accurate::<Fused>();
    }

    fn exp_nonpos_accurate<M: Mad>() {
        exp_within("exp_nonpos", -87.0, 0.0, super::exp_nonpos::<M>);
        for x in [-88.0, -100.0, f32::MIN, f32::NEG_INFINITY] {
            assert_eq!(super::exp_nonpos::<M>(x), 0.0, "exp_nonpos({x})");
        }
        assert_eq!(super::exp_nonpos::<M>(0.0), 1.0);
        assert_eq!(super::exp_nonpos::<M>(-0.0), 1.0);
        assert!(super::exp_nonpos::<M>(f32::NAN).is_nan());
    }

    #[test]
    fn exp_nonpos_is_accurate() {
        exp_nonpos_accurate::<Plain>();
        exp_nonpos_accurate::<Fused>();
    }

    fn erf_tanh_gelu_accurate<M: Mad>() {
        for x in sweep(-9.0, 9.0, 100_000) {
            let xf = x as f64;
            let e = libm::erf(xf);
            assert!((super::erf::<M>(x) as f64 - e).abs() < 4e-7, "erf({x})");
            assert!(
                (super::tanh::<M>(x) as f64 - xf.tanh()).abs() < 4e-7,
                "tanh({x})"
            );
            let g = 0.5 * xf * (1.0 + libm::erf(xf / 2f64.sqrt()));
            let got = super::gelu::<M>(x) as f64;
            assert!(
                (got - g).abs() < 4e-7 * (1.0 + xf.abs()),
                "gelu({x}) = {got}, want {g}"
            );
            let gt = 0.5
                * xf
                * (1.0
                    + ((2.0 / std::f64::consts::PI).sqrt() * (xf + 0.044715 * xf.powi(3))).tanh());
            assert!(
                (super::gelu_tanh::<M>(x) as f64 - gt).abs() < 1e-6 * (1.0 + xf.abs()),
                "gelu_tanh({x})"
            );
            let s = 1.0 / (1.0 + (-xf).exp());
            assert!(
                (super::sigmoid::<M>(x) as f64 - s).abs() < 4e-7,
                "sigmoid({x})"
            );
        }
        assert!(super::gelu::<M>(f32::NAN).is_nan());
        assert_eq!(super::gelu::<M>(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn erf_tanh_gelu_are_accurate() {
        erf_tanh_gelu_accurate::<Plain>();
        erf_tanh_gelu_accurate::<Fused>();
    }
}
