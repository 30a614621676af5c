//! Encoders for the GGUF k-quants (Q2_K … Q6_K, 256-element super-blocks).
//!
//! The `gguf` Python package only decodes these; the reference encoder is
//! ggml's (`quantize_row_q*_K_ref` in `ggml-quants.c`, without an
//! importance matrix), as shipped natively by `libgguf==0.2.2`, whose bytes
//! these match bit for bit (`tests/vectors/gguf`). Bit-exactness needs the
//! same float32 operations in the same order: products and sums are
//! written left to right as C evaluates them, integers are widened to f32
//! where C widens them, rounding is ggml's `nearest_int` (round half to
//! even through the 1.5·2²³ trick), and scales are stored as f16 rounded
//! to nearest even. Rust never contracts `a·b + c` into an FMA.
//!
//! Each encoder takes one super-block of 256 f32 values and appends its
//! bytes, laid out as ggml's `block_q*_K` structs.

use half::f16;

/// Values below this magnitude count as an all-zero group.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: adds 1.5·2²³ so the f32 addition rounds to an
/// integer (half to even) and reads it from the mantissa bits. Valid for
/// |v| ≤ 2²² − 1, the range ggml asserts.
fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

fn f16_round(v: f32) -> f16 {
    f16::from_f32(v)
}

/// The 6-bit scale and min of sub-block `j` from the 12 packed bytes.
fn scale_min_k4(s: &[u8; 12], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Levels `L` in `0..=nmax` and (scale, −min) for `x ≈ scale·L + min`,
/// searched over `nstep + 1` candidate scales around `nmax/(max − min)`
/// minimizing the weighted squared (or absolute, `use_mad`) error
/// (ggml's `make_qkx2_quants`).
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.fill(0);
        return (0.0, -min);
    }
    let err = |d: f32| if use_mad { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    let mut aux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut mad = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                mad += weights[i] * err(diff);
            }
            if mad < best_error {
                l_out.copy_from_slice(&aux[..n]);
                best_error = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// The value of largest magnitude (the first on ties), or `None` when
/// every |x| is below [`GROUP_MAX_EPS`] (an all-zero group).
fn signed_max(x: &[f32]) -> Option<f32> {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (amax >= GROUP_MAX_EPS).then_some(max)
}

/// Signed levels for `x ≈ scale·(L − nmax)`, L in `0..2·nmax`, refined
/// over 18 nearby scales with weights x² (ggml's `make_qx_quants` with
/// `rmse_type` 1, the only one the k-quant encoders use).
fn make_qx_quants(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let Some(max) = signed_max(x) else {
        l_out.fill(0);
        return 0.0;
    };
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let l = level(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for (o, &v) in l_out.iter_mut().zip(x) {
        *o = (level(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (o, &v) in l_out.iter_mut().zip(x) {
                *o = (level(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Signed levels in `−nmax..nmax` (stored offset by `nmax`) for
/// `x ≈ scale·L`, refined one element at a time with weights x² (ggml's
/// `make_q3_quants` with `do_rmse`).
fn make_q3_quants(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let Some(max) = signed_max(x) else {
        l_out.fill(0);
        return 0.0;
    };
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (o, &v) in l_out.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *o = l as i8;
        let (w, l) = (v * v, l as f32);
        sumlx += w * v * l;
        suml2 += w * l * l;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (o, &v) in l_out.iter_mut().zip(x) {
            let w = v * v;
            let li = *o as f32;
            let mut slx = sumlx - w * v * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *o as i32 {
                    let nl = new_l as f32;
                    slx += w * v * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *o = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for o in l_out.iter_mut() {
        *o += nmax as i8;
    }
    sumlx / suml2
}

/// Packs 2-bit levels: byte `j/4 + l` of each 128-element half holds
/// elements l, l+32, l+64, l+96 from its low bits up.
fn push_two_bit(out: &mut Vec<u8>, levels: &[u8]) {
    for half in levels.chunks_exact(128) {
        out.extend(
            (0..32)
                .map(|l| half[l] | (half[l + 32] << 2) | (half[l + 64] << 4) | (half[l + 96] << 6)),
        );
    }
}

/// Q2_K: scales[16] (4-bit scale | 4-bit min << 4), qs[64], f16 d, f16 dmin.
pub(crate) fn enc_q2_k(x: &[f32], out: &mut Vec<u8>) {
    let mut levels = [0u8; 256];
    let (mut scales, mut mins) = ([0.0f32; 16], [0.0f32; 16]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        let weights: Vec<f32> = xs.iter().map(|v| v.abs()).collect();
        let (s, m) = make_qkx2_quants(
            3,
            xs,
            &weights,
            &mut levels[16 * j..16 * j + 16],
            -0.5,
            0.1,
            15,
            true,
        );
        (scales[j], mins[j]) = (s, m);
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let mut packed = [0u8; 16];
    let mut d = f16_round(0.0);
    if max_scale > 0.0 {
        let iscale = 15.0 / max_scale;
        for j in 0..16 {
            packed[j] = nearest_int(iscale * scales[j]) as u8;
        }
        d = f16_round(max_scale / 15.0);
    }
    let mut dmin = f16_round(0.0);
    if max_min > 0.0 {
        let iscale = 15.0 / max_min;
        for j in 0..16 {
            packed[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
        }
        dmin = f16_round(max_min / 15.0);
    }
    for j in 0..16 {
        let dj = d.to_f32() * (packed[j] & 0xF) as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * (packed[j] >> 4) as f32;
        for ii in 0..16 {
            let l = nearest_int((x[16 * j + ii] + dm) / dj).clamp(0, 3);
            levels[16 * j + ii] = l as u8;
        }
    }
    out.extend(packed);
    push_two_bit(out, &levels);
    out.extend(d.to_le_bytes());
    out.extend(dmin.to_le_bytes());
}

/// Q3_K: hmask[32], qs[64], scales[12] (6-bit, offset 32), f16 d.
pub(crate) fn enc_q3_k(x: &[f32], out: &mut Vec<u8>) {
    let mut levels = [0i8; 256];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
    for j in 0..16 {
        scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut levels[16 * j..16 * j + 16]);
        if scales[j].abs() > amax {
            amax = scales[j].abs();
            max_scale = scales[j];
        }
    }
    let mut sb = [0u8; 12];
    let mut d = f16_round(0.0);
    if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &s) in scales.iter().enumerate() {
            // C stores nearest_int into an int8_t before clamping.
            let l = ((nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8;
            if j < 8 {
                sb[j] = l & 0xF;
            } else {
                sb[j - 8] |= (l & 0xF) << 4;
            }
            sb[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
        }
        d = f16_round(1.0 / iscale);
    }
    for j in 0..16 {
        let low = if j < 8 { sb[j] & 0xF } else { sb[j - 8] >> 4 };
        let sc = (low | (((sb[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32;
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let l = nearest_int(x[16 * j + ii] / dj).clamp(-4, 3);
            levels[16 * j + ii] = (l + 4) as i8;
        }
    }
    // The high bit of element j goes to bit j/32 of hmask[j % 32].
    let mut hmask = [0u8; 32];
    let mut low = [0u8; 256];
    for (j, &l) in levels.iter().enumerate() {
        let mut l = l as u8;
        if l > 3 {
            hmask[j % 32] |= 1 << (j / 32);
            l -= 4;
        }
        low[j] = l;
    }
    out.extend(hmask);
    push_two_bit(out, &low);
    out.extend(sb);
    out.extend(d.to_le_bytes());
}

/// The shared part of Q4_K and Q5_K: per 32-element sub-block a
/// (scale, min) pair from `make_qkx2_quants` with weights av|x| + |x|,
/// packed to 6 bits against the block's f16 d and dmin; returns the
/// levels (0..=nmax), the 12 scale bytes, d and dmin.
fn k4_levels(x: &[f32], nmax: i32, rmin: f32, nstep: i32) -> ([u8; 256], [u8; 12], f16, f16) {
    let mut levels = [0u8; 256];
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: Vec<f32> = xs.iter().map(|v| av_x + v.abs()).collect();
        let (s, m) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut levels[32 * j..32 * j + 32],
            rmin,
            0.1,
            nstep,
            false,
        );
        (scales[j], mins[j]) = (s, m);
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut sb = [0u8; 12];
    for j in 0..8 {
        // C assigns nearest_int to a uint8_t (wrapping) before MIN(63, ·).
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            sb[j] = ls;
            sb[j + 4] = lm;
        } else {
            sb[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            sb[j - 4] |= (ls >> 4) << 6;
            sb[j] |= (lm >> 4) << 6;
        }
    }
    let d = f16_round(max_scale / 63.0);
    let dmin = f16_round(max_min / 63.0);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(&sb, j);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for ii in 0..32 {
            let l = nearest_int((x[32 * j + ii] + dm) / dj).clamp(0, nmax);
            levels[32 * j + ii] = l as u8;
        }
    }
    (levels, sb, d, dmin)
}

/// Q4_K: f16 d, f16 dmin, scales[12], qs[128] (per 64 elements, the
/// first 32 in the low nibbles and the next 32 in the high nibbles).
pub(crate) fn enc_q4_k(x: &[f32], out: &mut Vec<u8>) {
    let (levels, sb, d, dmin) = k4_levels(x, 15, -1.0, 20);
    out.extend(d.to_le_bytes());
    out.extend(dmin.to_le_bytes());
    out.extend(sb);
    for g in levels.chunks_exact(64) {
        out.extend((0..32).map(|l| g[l] | (g[l + 32] << 4)));
    }
}

/// Q5_K: f16 d, f16 dmin, scales[12], qh[32], qs[128]; the 5th bit of
/// element 64·g + l goes to bit 2g of qh[l], of 64·g + 32 + l to bit 2g+1.
pub(crate) fn enc_q5_k(x: &[f32], out: &mut Vec<u8>) {
    let (levels, sb, d, dmin) = k4_levels(x, 31, -0.5, 15);
    let mut qh = [0u8; 32];
    let mut qs = Vec::with_capacity(128);
    for (g, lv) in levels.chunks_exact(64).enumerate() {
        for j in 0..32 {
            let (mut l1, mut l2) = (lv[j], lv[j + 32]);
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= 1 << (2 * g);
            }
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= 2 << (2 * g);
            }
            qs.push(l1 | (l2 << 4));
        }
    }
    out.extend(d.to_le_bytes());
    out.extend(dmin.to_le_bytes());
    out.extend(sb);
    out.extend(qh);
    out.extend(qs);
}

/// Q6_K: ql[128], qh[64], scales[16] (i8), f16 d.
pub(crate) fn enc_q6_k(x: &[f32], out: &mut Vec<u8>) {
    let mut levels = [0i8; 256];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs) = (0.0f32, 0.0f32);
    for j in 0..16 {
        let s = make_qx_quants(
            32,
            &x[16 * j..16 * j + 16],
            &mut levels[16 * j..16 * j + 16],
        );
        scales[j] = s;
        if s.abs() > max_abs {
            max_abs = s.abs();
            max_scale = s;
        }
    }
    if max_abs < GROUP_MAX_EPS {
        out.extend([0u8; 210]);
        return;
    }
    let iscale = -128.0 / max_scale;
    let d = f16_round(1.0 / iscale);
    let mut sb = [0i8; 16];
    for j in 0..16 {
        sb[j] = nearest_int(iscale * scales[j]).min(127) as i8;
    }
    for j in 0..16 {
        let dj = d.to_f32() * sb[j] as f32;
        if dj == 0.0 {
            // ggml keeps the levels make_qx_quants chose for this group.
            continue;
        }
        for ii in 0..16 {
            let l = nearest_int(x[16 * j + ii] / dj).clamp(-32, 31);
            levels[16 * j + ii] = (l + 32) as i8;
        }
    }
    let mut ql = Vec::with_capacity(128);
    let mut qh = Vec::with_capacity(64);
    for half in levels.chunks_exact(128) {
        let q = |i: usize| half[i] as u8;
        let mut lo = [0u8; 64];
        for l in 0..32 {
            lo[l] = (q(l) & 0xF) | ((q(l + 64) & 0xF) << 4);
            lo[l + 32] = (q(l + 32) & 0xF) | ((q(l + 96) & 0xF) << 4);
        }
        ql.extend(lo);
        qh.extend((0..32).map(|l| {
            (q(l) >> 4)
                | ((q(l + 32) >> 4) << 2)
                | ((q(l + 64) >> 4) << 4)
                | ((q(l + 96) >> 4) << 6)
        }));
    }
    out.extend(ql);
    out.extend(qh);
    out.extend(sb.map(|s| s as u8));
    out.extend(d.to_le_bytes());
}
