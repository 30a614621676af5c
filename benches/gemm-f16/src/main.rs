//! Does the `gemm` crate's f16 GEMM beat what the fast CPU engine does for a
//! 16-bit matmul (widen the activation operand, f32 GEMM against the
//! resident weight's prepared f32 copy, round the output)? One GEMM of a
//! MiniLM FFN shape at B=8, 2 threads, p50 of 10.
//!
//!     cd benches/gemm-f16 && RUSTFLAGS="-C target-cpu=native" cargo run --release

use gemm::{gemm, Parallelism};
use half::f16;
use std::time::Instant;
fn main() {
    let (m, k, n) = (1024usize, 384usize, 1536usize);
    let a32: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 100.0).collect();
    let b32: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 100.0).collect();
    let a16: Vec<f16> = a32.iter().map(|&x| f16::from_f32(x)).collect();
    let b16: Vec<f16> = b32.iter().map(|&x| f16::from_f32(x)).collect();
    let mut c32 = vec![0f32; m * n];
    let mut c16 = vec![f16::ZERO; m * n];
    let par = Parallelism::Rayon(2);
    for it in 0..2 {
        let mut t32 = vec![];
        let mut t16 = vec![];
        let mut tconv = vec![];
        for _ in 0..10 {
            let s = Instant::now();
            unsafe { gemm(m, n, k, c32.as_mut_ptr(), 1, n as isize, false, a32.as_ptr(), 1, k as isize, b32.as_ptr(), 1, n as isize, 0.0f32, 1.0f32, false, false, false, par) };
            t32.push(s.elapsed().as_secs_f64() * 1e3);
            let s = Instant::now();
            unsafe { gemm(m, n, k, c16.as_mut_ptr(), 1, n as isize, false, a16.as_ptr(), 1, k as isize, b16.as_ptr(), 1, n as isize, f16::ZERO, f16::ONE, false, false, false, par) };
            t16.push(s.elapsed().as_secs_f64() * 1e3);
            // widen A (activations) to f32, f32 GEMM (B prepared f32), narrow C
            let s = Instant::now();
            let mut aw = vec![0f32; m * k];
            for (d, &x) in aw.iter_mut().zip(&a16) { *d = w(x.to_bits()); }
            unsafe { gemm(m, n, k, c32.as_mut_ptr(), 1, n as isize, false, aw.as_ptr(), 1, k as isize, b32.as_ptr(), 1, n as isize, 0.0f32, 1.0f32, false, false, false, par) };
            for (d, &x) in c16.iter_mut().zip(&c32) { *d = f16::from_bits(nw(x)); }
            tconv.push(s.elapsed().as_secs_f64() * 1e3);
        }
        for t in [&mut t32, &mut t16, &mut tconv] { t.sort_by(f64::total_cmp); }
        if it == 1 {
            println!("m={m} k={k} n={n}, 2 threads, p50 ms: f32 gemm {:.2}, gemm-crate f16 {:.2}, widen+f32 gemm+narrow (vectorized bit conv, 1 thread) {:.2}", t32[5], t16[5], tconv[5]);
        }
    }
}

#[inline(always)]
fn w(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let scaled = f32::from_bits(em << 13) * f32::from_bits(0x7780_0000);
    let special = f32::from_bits((em << 13) | 0x7f80_0000);
    let v = if em >= 0x7c00 { special } else { scaled };
    f32::from_bits(v.to_bits() | sign)
}
#[inline(always)]
fn nw(x: f32) -> u16 {
    let f = x.to_bits();
    let sign = (f >> 16) & 0x8000;
    let a = f & 0x7fff_ffff;
    let big = if a > 0x7f80_0000 { 0x7e00 | ((a >> 13) & 0x3ff) } else { 0x7c00 };
    const HALF: u32 = 126 << 23;
    let sub = (f32::from_bits(a) + f32::from_bits(HALF)).to_bits().wrapping_sub(HALF);
    let odd = (a >> 13) & 1;
    let norm = a.wrapping_add(0xc800_0fff).wrapping_add(odd) >> 13;
    let o = if a >= 0x4780_0000 { big } else if a < 0x3880_0000 { sub } else { norm };
    (o | sign) as u16
}
