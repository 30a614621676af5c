//! GEMM kernels callable from JavaScript, to time them inside the wasm32
//! build (simd128, one thread) under Node: the `gemm` crate (what the
//! browser build ran before) and [`rlx_cpu::kernels::gemm128`] at each tile
//! height. Driven by `benches/wasm/sgemm.mjs`:
//!
//!     . scripts/wasm-env.sh
//!     PATH=/usr/bin:$PATH RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=target/wasm \
//!       RUSTFLAGS="$WASM_RUSTFLAGS" cargo build --release \
//!       --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
//!       -p rlx-cpu --example wasm_sgemm
//!     node benches/wasm/sgemm.mjs target/wasm/wasm32-unknown-unknown/release/examples/wasm_sgemm.wasm
//!
//! The relaxed-SIMD variant: the same with `CARGO_TARGET_DIR=target/wasm-relaxed`
//! and `--features relaxed-simd`, run with
//! `node --experimental-wasm-relaxed-simd benches/wasm/sgemm.mjs …`.

use rlx_cpu::kernels::gemm128;
use rlx_cpu::Mat;
use std::cell::RefCell;

struct Problem {
    m: usize,
    k: usize,
    n: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    /// `b` stored n×k and read transposed.
    bt: bool,
    /// The `gemm` crate's product, to compare against.
    want: Vec<f32>,
}

thread_local! {
    static P: RefCell<Option<Problem>> = const { RefCell::new(None) };
}

/// `b` as a k×n operand: row-major, or an n×k matrix read transposed.
fn weight(b: &[f32], k: usize, n: usize, bt: bool) -> Mat<'_, f32> {
    let m = Mat::row_major(b, if bt { n } else { k }, if bt { k } else { n });
    if bt {
        m.t()
    } else {
        m
    }
}

/// Set up `a (m×k) · b (k×n)` with deterministic values in [-1, 1), `b`
/// row-major (`bt = 0`) or the transpose of an n×k matrix (`bt = 1`, as a
/// `Linear` weight is read).
#[unsafe(no_mangle)]
pub extern "C" fn sgemm_prepare(m: u32, k: u32, n: u32, bt: u32) {
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let val = |i: usize, s: usize| ((i.wrapping_mul(s) % 1009) as f32 / 504.5) - 1.0;
    let a: Vec<f32> = (0..m * k).map(|i| val(i, 7)).collect();
    let b: Vec<f32> = (0..k * n).map(|i| val(i, 13)).collect();
    let bt = bt != 0;
    let mut want = vec![0f32; m * n];
    rlx_cpu::gemm_into(
        Mat::row_major(&a, m, k),
        weight(&b, k, n, bt),
        &mut want,
        n,
        false,
        false,
    );
    P.with(|p| {
        *p.borrow_mut() = Some(Problem {
            m,
            k,
            n,
            a,
            b,
            c: vec![0f32; m * n],
            bt,
            want,
        })
    });
}

/// One product with kernel `which`: 0 the `gemm` crate, 4/5/6
/// `gemm128` with that many rows per tile. Returns the largest
/// |difference| from the `gemm` crate's result, relative to its largest
/// |element| when `check` is nonzero, else 0 (negative for an unknown
/// kernel).
#[unsafe(no_mangle)]
pub extern "C" fn sgemm_run(which: u32, check: u32) -> f32 {
    P.with(|p| {
        let mut p = p.borrow_mut();
        let Some(p) = p.as_mut() else { return -1.0 };
        let (a, b) = (Mat::row_major(&p.a, p.m, p.k), weight(&p.b, p.k, p.n, p.bt));
        match which {
            0 => rlx_cpu::gemm_into(a, b, &mut p.c, p.n, false, false),
            4 => gemm128::gemm_tuned::<4>(a, b, &mut p.c, p.n),
            5 => gemm128::gemm_tuned::<5>(a, b, &mut p.c, p.n),
            6 => gemm128::gemm_tuned::<6>(a, b, &mut p.c, p.n),
            _ => return -1.0,
        }
        if check == 0 {
            return 0.0;
        }
        let scale = p
            .want
            .iter()
            .fold(0f32, |s, x| s.max(x.abs()))
            .max(f32::MIN_POSITIVE);
        let diff =
            p.c.iter()
                .zip(&p.want)
                .fold(0f32, |s, (x, y)| s.max((x - y).abs()));
        diff / scale
    })
}

thread_local! {
    static PACKED: RefCell<gemm128::PackedB> = RefCell::new(Default::default());
}

/// Pack the prepared problem's weight for gemm128 (what each product
/// does first, unless the weight is resident and packed once).
#[unsafe(no_mangle)]
pub extern "C" fn sgemm_pack() {
    P.with(|p| {
        if let Some(p) = p.borrow().as_ref() {
            PACKED.with(|d| d.borrow_mut().repack(weight(&p.b, p.k, p.n, p.bt)));
        }
    })
}

/// The fast engine's resident-weight path in this build: a linear layer
/// (weight kept resident, so packed once for gemm128) then a product with
/// a non-resident weight, run three times (the last with a new
/// non-resident weight) against the reference kernels. Returns the
/// largest relative difference (negative on an error).
#[unsafe(no_mangle)]
pub extern "C" fn resident_check() -> f32 {
    use rlx_ir::{lir::Program, text, DType, HostTensor, Shape};
    let src = "graph @lin(%x: f32[2,65,70], %w: f32[70,37], %b: f32[37], %v: f32[37,19]) {
  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}
  %z = matmul(%y, %v)
  return %z
}";
    let tensor = |dims: &[usize], seed: usize| {
        let d: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|i| {
                ((i.wrapping_mul(7919).wrapping_add(seed * 104729) % 2003) as f32 / 1001.5) - 1.0
            })
            .collect();
        HostTensor::new(DType::F32, Shape::from(dims.to_vec()), d.into())
    };
    let check = || -> Result<f32, Box<dyn std::error::Error>> {
        let g = text::parse(src)?;
        let p = rlx_cpu::fast::FastProgram::compile(Program::from_graph(g.clone()))?;
        p.keep_resident(&[1, 2]);
        let (x, w, b) = (
            tensor(&[2, 65, 70], 1)?,
            tensor(&[70, 37], 2)?,
            tensor(&[37], 3)?,
        );
        let mut worst = 0f32;
        for vseed in [4, 4, 5] {
            let v = tensor(&[37, 19], vseed)?;
            let ins = [&x, &w, &b, &v];
            let want = rlx_cpu::run_graph_refs(&g, &ins)?[0].to_f64_vec()?;
            let got = p.run(&ins)?[0].to_f64_vec()?;
            for (g, w) in got.iter().zip(&want) {
                worst = worst.max(((g - w).abs() / (1.0 + w.abs())) as f32);
            }
        }
        Ok(worst)
    };
    check().unwrap_or(-1.0)
}

/// 1 when this module's gemm128 uses relaxed SIMD's fused multiply-add
/// (built with `+relaxed-simd`), 0 for plain simd128.
#[unsafe(no_mangle)]
pub extern "C" fn gemm128_relaxed() -> u32 {
    (gemm128::VARIANT != "simd128") as u32
}

/// gemm128 in this build (4-row tile: `gemm`, `gemm_scaled`,
/// `gemm_packed`) against f64 sums on ragged shapes (m, n, k not multiples
/// of the tile or K block; a transposed weight; a strided `a`), each
/// element within the f32 accumulation bound k · 2⁻²³ · Σ|a·b|. The bound
/// holds for a multiply and an add per step (two roundings) and so for a
/// fused one (one rounding, which relaxed madd may be). Returns the
/// largest |error| / bound (≤ 1 passes; 0 compares nothing).
#[unsafe(no_mangle)]
pub extern "C" fn f64_check() -> f64 {
    let mut seed = 11u64;
    let mut rnd = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let mut worst = 0f64;
    for &(m, k, n, bt) in gemm128::RAGGED.iter().chain(&[(128, 384, 40, false)]) {
        let lda = k + 2;
        let a: Vec<f32> = (0..m * lda).map(|_| rnd()).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rnd()).collect();
        let am = Mat {
            data: &a,
            rows: m,
            cols: k,
            row_stride: lda,
            col_stride: 1,
        };
        let bm = weight(&b, k, n, bt);
        let packed = gemm128::PackedB::pack(bm);
        for (which, scale) in [(0, 1.0), (1, 0.375), (2, 1.0)] {
            let mut c = vec![0f32; m * n];
            match which {
                0 => gemm128::gemm(am, bm, &mut c, n),
                1 => gemm128::gemm_scaled(am, bm, &mut c, n, scale as f32),
                _ => gemm128::gemm_packed(am, &packed, &mut c, n),
            }
            for i in 0..m {
                for j in 0..n {
                    let (mut want, mut mag) = (0f64, 0f64);
                    for p in 0..k {
                        let bv = if bt { b[j * k + p] } else { b[p * n + j] };
                        let x = a[i * lda + p] as f64 * bv as f64;
                        want += x;
                        mag += x.abs();
                    }
                    // The scale is applied once, rounded once more.
                    let tol = (k as f64 + 1.0) * 2f64.powi(-23) * mag * scale;
                    let err = (c[i * n + j] as f64 - want * scale).abs();
                    if tol > 0.0 {
                        worst = worst.max(err / tol);
                    } else if err > 0.0 {
                        return f64::INFINITY;
                    }
                }
            }
        }
    }
    worst
}
