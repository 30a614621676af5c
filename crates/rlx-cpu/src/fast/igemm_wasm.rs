//! The wasm simd128 tiles of [`super::igemm`]: b packed as 16-bit pairs
//! (`[N/4][Kp/2][4][2]`), a row's pair of bytes splatted, and
//! `i32x4.dot_i16x8_s` — four columns' exact pair sums per instruction
//! (u8 × i8 products fit i16 operands; their pair sums fit i32).

#![allow(unsafe_code)]

use super::igemm::{Dst, Fix};
use std::arch::wasm32::*;

/// Rows and columns per register tile (two panels of four).
const MR: usize = 4;
const P: usize = 4;

/// The whole product into `out` (`rows × n`).
pub fn product(wide: &[i16], a: &[u8], kp: usize, rows: usize, n: usize, fix: &Fix, out: &mut Dst) {
    let stride = P * kp;
    for c in (0..n).step_by(2 * P) {
        let mut r0 = 0;
        while r0 < rows {
            let m = MR.min(rows - r0);
            // Accumulators of up to MR rows × 2 panels; unused rows read
            // row r0 again (their sums are dropped).
            let mut acc = [[i32x4_splat(0); 2]; MR];
            let row = |r: usize| &a[(r0 + r.min(m - 1)) * kp..][..kp];
            let rs = [row(0), row(1), row(2), row(3)];
            let b0 = &wide[(c / P) * stride..];
            let b1 = if c + P < n {
                &wide[(c / P + 1) * stride..]
            } else {
                b0
            };
            for k2 in 0..kp / 2 {
                // SAFETY: k2 · 8 + 8 ≤ kp · 4 = the panel's length (Kp/2
                // pairs of 4 columns × 2 values), in bounds of `wide`.
                let (w0, w1) = unsafe {
                    (
                        v128_load(b0.as_ptr().add(k2 * 8) as *const v128),
                        v128_load(b1.as_ptr().add(k2 * 8) as *const v128),
                    )
                };
                for (acc, r) in acc.iter_mut().zip(&rs) {
                    let pair = r[2 * k2] as i32 | ((r[2 * k2 + 1] as i32) << 16);
                    let av = i32x4_splat(pair);
                    acc[0] = i32x4_add(acc[0], i32x4_dot_i16x8(av, w0));
                    acc[1] = i32x4_add(acc[1], i32x4_dot_i16x8(av, w1));
                }
            }
            for (r, acc) in acc.iter().enumerate().take(m) {
                for (p, v) in acc.iter().enumerate() {
                    let lanes = [
                        i32x4_extract_lane::<0>(*v),
                        i32x4_extract_lane::<1>(*v),
                        i32x4_extract_lane::<2>(*v),
                        i32x4_extract_lane::<3>(*v),
                    ];
                    for (l, &dot) in lanes.iter().enumerate() {
                        let j = c + p * P + l;
                        if j >= n {
                            break;
                        }
                        let y = fix.apply(r0 + r, j, dot);
                        match out {
                            Dst::I32(o) => o[(r0 + r) * n + j] = y,
                            Dst::F32 { out, .. } => out[(r0 + r) * n + j] = fix.rescale(j, y),
                        }
                    }
                }
            }
            r0 += m;
        }
    }
}
