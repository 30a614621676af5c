//! The one portable SIMD layer of the fast kernels.
//!
//! Kernels are written as plain loops over `f32` slices with branch-free
//! bodies, which LLVM vectorizes. [`simd_fn!`] compiles such a function
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
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn imp($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn v4($($arg: $ty),*) $(-> $ret)? { imp($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn v3($($arg: $ty),*) $(-> $ret)? { imp($($arg),*) }
                use $crate::fast::simd::x86::{level, Level};
                // SAFETY: each variant runs only after `level()` confirmed
                // at run time that this CPU has every feature it enables.
                #[allow(unsafe_code)]
                match level() {
                    Level::Avx512 => unsafe { v4($($arg),*) },
                    Level::Avx2 => unsafe { v3($($arg),*) },
                    Level::Base => imp($($arg),*),
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                imp($($arg),*)
            }
        }
    };
}
pub(crate) use simd_fn;

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

/// e^x in f32, relative error < 2e-7 over the range where it does not
/// overflow; +inf above ~88.7, 0 below ~-87.3, NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let xc = x.clamp(-87.5, 88.75);
    // Round to nearest with the 1.5·2²³ trick: `f32::round` is a libm call
    // and `as i32` saturates, and either would stop the loop from
    // vectorizing. The integer n sits in the low mantissa bits of `t`.
    const MAGIC: f32 = 12_582_912.0;
    let t = xc * LOG2E + MAGIC;
    let nf = t - MAGIC;
    let r = xc - nf * LN2_HI - nf * LN2_LO;
    // Taylor polynomial of e^r on |r| ≤ ln2/2.
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
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

/// erf(x) in f32, absolute error < 4e-7: a Taylor series below |x| = 0.5,
/// Abramowitz–Stegun 7.1.26 above (tested against libm's f64 erf).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    // For |x| < 0.5 a Taylor series is exact to f32; above, the A&S form.
    let a = x.abs();
    let x2 = x * x;
    let small = x
        * (std::f32::consts::FRAC_2_SQRT_PI
            * (1.0
                + x2 * (-1.0 / 3.0
                    + x2 * (1.0 / 10.0
                        + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0)))))));
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let big = (1.0 - poly * exp(-a * a)).copysign(x);
    if a < 0.5 {
        small
    } else {
        big
    }
}

/// tanh(x) in f32 through e^(2|x|); absolute error < 3e-7.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let x2 = x * x;
    // Odd Taylor series near 0 (where 1 - 2/(e^2x + 1) cancels).
    let small = x
        * (1.0
            + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
    let e = exp(2.0 * a.min(20.0));
    let big = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    if a < 0.125 || x.is_nan() {
        small
    } else {
        big
    }
}

#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2/π)
    0.5 * x * (1.0 + tanh(K * (x + 0.044_715 * x * x * x)))
}

#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

#[inline(always)]
pub fn relu(x: f32) -> f32 {
    // NaN propagates, as in the reference.
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    //! Accuracy against f64 std math over a dense sweep.

    fn sweep(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| (lo + (hi - lo) * i as f64 / n as f64) as f32)
    }

    #[test]
    fn exp_is_accurate() {
        for x in sweep(-87.0, 88.0, 200_000) {
            let want = (x as f64).exp();
            let got = super::exp(x) as f64;
            assert!(
                ((got - want) / want).abs() < 3e-7,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(super::exp(100.0), f32::INFINITY);
        assert_eq!(super::exp(-100.0), 0.0);
        assert!(super::exp(f32::NAN).is_nan());
    }

    #[test]
    fn erf_tanh_gelu_are_accurate() {
        for x in sweep(-9.0, 9.0, 100_000) {
            let xf = x as f64;
            let e = libm::erf(xf);
            assert!((super::erf(x) as f64 - e).abs() < 4e-7, "erf({x})");
            assert!(
                (super::tanh(x) as f64 - xf.tanh()).abs() < 4e-7,
                "tanh({x})"
            );
            let g = 0.5 * xf * (1.0 + libm::erf(xf / 2f64.sqrt()));
            assert!(
                (super::gelu(x) as f64 - g).abs() < 4e-6 * (1.0 + xf.abs()),
                "gelu({x})"
            );
            let s = 1.0 / (1.0 + (-xf).exp());
            assert!((super::sigmoid(x) as f64 - s).abs() < 4e-7, "sigmoid({x})");
        }
    }
}
