//! Block quantization: `dequantize` for every quantized dtype and
//! `quantize` from f32 to the GGUF 32-element formats and MXFP4.
//!
//! The GGUF layouts and formulas are ggml's (llama.cpp `ggml-quants.c`),
//! as transcribed by the `gguf` Python package (`gguf/quants.py`), which is
//! the reference these kernels match bit for bit. Decoding follows that
//! code's float32 arithmetic (f16 scale widened to f32, products and sums
//! in f32) so the values are exactly the reference's before they are
//! narrowed to the output dtype.
//!
//! A tensor's elements are blocks laid end to end in row-major order; the
//! type rules require the last axis to be a whole number of blocks, so no
//! block straddles two rows.

use super::*;
use half::f16;
use rlx_ir::dtype::Storage;
use rlx_ir::TensorData;

pub(crate) const KERNELS: &[(&str, Kernel)] = &[("quantize", quantize), ("dequantize", dequantize)];

/// Decodes one block (`bytes` of the dtype's block size) into `out`.
type Decoder = fn(&[u8], &mut Vec<f64>);
/// Encodes one block (32 or 256 f32 values), appending its bytes to `out`.
type Encoder = fn(&[f32], &mut Vec<u8>);

fn dequantize(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let v = dequantize_values(cx.input(0)).map_err(|e| cx.fail(e))?;
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

/// The element values (row-major) of a quantized tensor.
pub fn dequantize_values(t: &HostTensor) -> Result<Vec<f64>, String> {
    let TensorData::Packed(bytes) = t.data() else {
        return Err(format!(
            "dequantize needs packed data, the tensor holds {} elements",
            t.dtype()
        ));
    };
    let Storage::Block {
        block,
        bytes: block_bytes,
    } = t.dtype().storage()
    else {
        return Err(format!("{} is not a block-quantized dtype", t.dtype()));
    };
    let decode = decoder(t.dtype()).ok_or_else(|| format!("no decoder for {}", t.dtype()))?;
    if bytes.len() % block_bytes != 0 || bytes.len() / block_bytes * block != t.numel() {
        return Err(format!(
            "{} bytes do not hold {} elements of {}",
            bytes.len(),
            t.numel(),
            t.dtype()
        ));
    }
    let mut out = Vec::with_capacity(t.numel());
    for b in bytes.chunks_exact(block_bytes) {
        decode(b, &mut out);
    }
    Ok(out)
}

fn decoder(d: DType) -> Option<Decoder> {
    Some(match d {
        DType::I4 => dec_i4,
        DType::U4 => dec_u4,
        DType::Q4_0 => dec_q4_0,
        DType::Q4_1 => dec_q4_1,
        DType::Q5_0 => dec_q5_0,
        DType::Q5_1 => dec_q5_1,
        DType::Q8_0 => dec_q8_0,
        DType::Q2K => dec_q2_k,
        DType::Q3K => dec_q3_k,
        DType::Q4K => dec_q4_k,
        DType::Q5K => dec_q5_k,
        DType::Q6K => dec_q6_k,
        DType::Mxfp4 => dec_mxfp4,
        DType::Mxfp8 => dec_mxfp8,
        _ => return None,
    })
}

/// A little-endian f16 at `b[at..at + 2]`, widened to f32.
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

fn push_f32(out: &mut Vec<f64>, v: impl IntoIterator<Item = f32>) {
    out.extend(v.into_iter().map(f64::from));
}

// ------------------------------------------------------ 4-bit integers

/// Two elements per byte, low nibble first; i4 is two's complement.
fn dec_i4(b: &[u8], out: &mut Vec<f64>) {
    for n in [b[0] << 4, b[0] & 0xF0] {
        out.push(((n as i8) >> 4) as f64);
    }
}
fn dec_u4(b: &[u8], out: &mut Vec<f64>) {
    out.extend([(b[0] & 0x0F) as f64, (b[0] >> 4) as f64]);
}

// --------------------------------------------- GGUF 32-element blocks
//
// Nibble order in every 4/5-bit format: byte j holds element j in its low
// nibble and element j + 16 in its high nibble. The 5th bit of element j
// is bit j of a little-endian u32 `qh`.

/// The 4-bit part of element j (0..32) from the 16 nibble bytes `qs`.
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

/// Q4_0: f16 d, 16 bytes of nibbles; x = d·(q − 8).
fn dec_q4_0(b: &[u8], out: &mut Vec<f64>) {
    let d = f16_at(b, 0);
    push_f32(out, (0..32).map(|j| d * (nibble(&b[2..], j) as f32 - 8.0)));
}

/// Q4_1: f16 d, f16 m, nibbles; x = d·q + m.
fn dec_q4_1(b: &[u8], out: &mut Vec<f64>) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    push_f32(out, (0..32).map(|j| d * nibble(&b[4..], j) as f32 + m));
}

/// The 5-bit values of a Q5 block from its `qh` (4 bytes) and `qs`.
fn five_bit<'a>(qh: &[u8], qs: &'a [u8]) -> impl Iterator<Item = u8> + 'a {
    let h = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    (0..32).map(move |j| nibble(qs, j) | ((((h >> j) & 1) as u8) << 4))
}

/// Q5_0: f16 d, u32 qh, nibbles; x = d·(q − 16).
fn dec_q5_0(b: &[u8], out: &mut Vec<f64>) {
    let d = f16_at(b, 0);
    push_f32(
        out,
        five_bit(&b[2..6], &b[6..]).map(|q| d * (q as f32 - 16.0)),
    );
}

/// Q5_1: f16 d, f16 m, u32 qh, nibbles; x = d·q + m.
fn dec_q5_1(b: &[u8], out: &mut Vec<f64>) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    push_f32(out, five_bit(&b[4..8], &b[8..]).map(|q| d * q as f32 + m));
}

/// Q8_0: f16 d, 32 × i8; x = d·q.
fn dec_q8_0(b: &[u8], out: &mut Vec<f64>) {
    let d = f16_at(b, 0);
    push_f32(out, b[2..34].iter().map(|&q| q as i8 as f32 * d));
}

// ------------------------------------------- k-quants (256 per block)
//
// Common pattern: the 2-bit planes (Q2_K, Q3_K low bits, Q6_K high bits)
// come in groups of 32 bytes covering 128 elements: element g·128 + s·32 + l
// is bits 2s..2s+2 of byte g·32 + l. The 4-bit planes (Q4_K, Q5_K) come in
// groups of 32 bytes covering 64 elements (low nibbles, then high).

/// Bits 2s..2s+2 of the 2-bit plane for element `e` (0..256).
fn two_bit(plane: &[u8], e: usize) -> u8 {
    let (g, s, l) = (e / 128, (e / 32) % 4, e % 32);
    (plane[g * 32 + l] >> (2 * s)) & 3
}

/// Q2_K: scales[16] (low nibble scale, high nibble min, per 16 elements),
/// qs[64] (2-bit), f16 d, f16 dmin; x = d·sc·q − dmin·m.
fn dec_q2_k(b: &[u8], out: &mut Vec<f64>) {
    let (scales, qs) = (&b[..16], &b[16..80]);
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    push_f32(
        out,
        (0..256).map(|e| {
            let sc = scales[e / 16];
            let (dl, ml) = (d * (sc & 0x0F) as f32, dmin * (sc >> 4) as f32);
            dl * two_bit(qs, e) as f32 - ml
        }),
    );
}

/// Q3_K: hmask[32], qs[64] (2-bit), scales[12] (sixteen 6-bit values:
/// low 4 bits from bytes 0..8, low then high nibbles; high 2 bits from
/// bytes 8..12), f16 d. x = d·(sc − 32)·(q − 4·!hbit), where hbit of
/// element e is bit e/32 of hmask[e % 32].
fn dec_q3_k(b: &[u8], out: &mut Vec<f64>) {
    let (hmask, qs, sb) = (&b[..32], &b[32..96], &b[96..108]);
    let d = f16_at(b, 108);
    let scale = |j: usize| -> f32 {
        let lo = (sb[j % 8] >> (4 * (j / 8))) & 0x0F;
        let hi = (sb[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        ((lo | (hi << 4)) as i8 - 32) as f32
    };
    push_f32(
        out,
        (0..256).map(|e| {
            let high = (hmask[e % 32] >> (e / 32)) & 1;
            let q = two_bit(qs, e) as i8 - if high == 0 { 4 } else { 0 };
            d * scale(e / 16) * q as f32
        }),
    );
}

/// The 6-bit (scale, min) pair `j` (0..8) of the 12 scale bytes of Q4_K and
/// Q5_K (ggml's `get_scale_min_k4`).
fn scale_min_k4(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 0x3F, s[j + 4] & 0x3F)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The 4-bit value of element `e` (0..256) in a Q4_K/Q5_K nibble plane.
fn k_nibble(qs: &[u8], e: usize) -> u8 {
    let (g, h, l) = (e / 64, (e / 32) % 2, e % 32);
    (qs[g * 32 + l] >> (4 * h)) & 0x0F
}

/// Q4_K / Q5_K shared tail: per 32 elements, x = d·sc·q − dmin·m.
fn k4_values(b: &[u8], q: impl Fn(usize) -> u8) -> impl Iterator<Item = f32> {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales: [u8; 12] = b[4..16].try_into().unwrap_or([0; 12]);
    (0..256).map(move |e| {
        let (sc, m) = scale_min_k4(&scales, e / 32);
        (d * sc as f32) * q(e) as f32 - dmin * m as f32
    })
}

/// Q4_K: f16 d, f16 dmin, scales[12], qs[128].
fn dec_q4_k(b: &[u8], out: &mut Vec<f64>) {
    push_f32(out, k4_values(b, |e| k_nibble(&b[16..144], e)));
}

/// Q5_K: f16 d, f16 dmin, scales[12], qh[32], qs[128]; the 5th bit of
/// element e is bit e/32 of qh[e % 32].
fn dec_q5_k(b: &[u8], out: &mut Vec<f64>) {
    let (qh, qs) = (&b[16..48], &b[48..176]);
    push_f32(
        out,
        k4_values(b, |e| {
            k_nibble(qs, e) | (((qh[e % 32] >> (e / 32)) & 1) << 4)
        }),
    );
}

/// Q6_K: ql[128] (low 4 bits: groups of 64 bytes covering 128 elements,
/// low nibbles then high), qh[64] (2-bit plane), scales[16] (i8, per 16
/// elements), f16 d; x = d·sc·(q − 32).
fn dec_q6_k(b: &[u8], out: &mut Vec<f64>) {
    let (ql, qh, scales) = (&b[..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    push_f32(
        out,
        (0..256).map(|e| {
            let (g, h, l) = (e / 128, (e / 64) % 2, e % 64);
            let lo = (ql[g * 64 + l] >> (4 * h)) & 0x0F;
            let q = (lo | (two_bit(qh, e) << 4)) as i8 - 32;
            (d * scales[e / 16] as i8 as f32) * q as f32
        }),
    );
}

// ------------------------------------------------------ OCP microscaling

/// E2M1 values, doubled (so they are integers), indexed by the 4-bit code:
/// gguf's `kvalues` (ggml's `kvalues_mxfp4`).
pub const E2M1_X2: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the E8M0 scale, 2^(e − 128), as an f32 (ggml's
/// `ggml_e8m0_to_fp32_half`; e = 0 and 1 give subnormals). Paired with the
/// doubled E2M1 values this is the scale 2^(e − 127). Like ggml, e = 0xFF
/// is not treated as NaN.
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e as u32) - 1) << 23
    };
    f32::from_bits(bits)
}

/// MXFP4 (ggml layout): E8M0 byte, then 16 bytes of E2M1 codes, byte j
/// holding element j (low nibble) and element j + 16 (high nibble).
fn dec_mxfp4(b: &[u8], out: &mut Vec<f64>) {
    let d = e8m0_half(b[0]);
    push_f32(
        out,
        (0..32).map(|j| d * E2M1_X2[nibble(&b[1..], j) as usize] as f32),
    );
}

/// An OCP float8 E4M3FN code: bias 7, no infinities, S.1111.111 is NaN,
/// exponent field 0 is subnormal (m·2⁻⁹).
pub fn e4m3fn(c: u8) -> f64 {
    let sign = if c & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = ((c >> 3) & 0x0F, c & 0x07);
    let mag = match (e, m) {
        (0x0F, 0x07) => f64::NAN,
        (0, _) => m as f64 * 2f64.powi(-9),
        _ => (1.0 + m as f64 / 8.0) * 2f64.powi(e as i32 - 7),
    };
    sign * mag
}

/// MXFP8: E8M0 byte (scale 2^(e − 127), 0xFF = NaN, per the OCP spec),
/// then 32 E4M3FN codes. Computed in f64, where the product is exact.
fn dec_mxfp8(b: &[u8], out: &mut Vec<f64>) {
    let scale = if b[0] == 0xFF {
        f64::NAN
    } else {
        2f64.powi(b[0] as i32 - 127)
    };
    out.extend(b[1..33].iter().map(|&c| scale * e4m3fn(c)));
}

// ---------------------------------------------------------------- quantize

fn quantize(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let out = cx.out_type(0);
    // The input is f32 (the op admits only f32), so this is exact.
    let x: Vec<f32> = floats(cx.input(0))?.into_iter().map(|v| v as f32).collect();
    let bytes = quantize_values(out.dtype, &x).map_err(|e| cx.fail(e))?;
    Ok(vec![HostTensor::new(
        out.dtype,
        out.shape.clone(),
        TensorData::Packed(bytes),
    )?])
}

/// The dtypes [`quantize_values`] encodes.
pub const QUANTIZABLE: [DType; 11] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2K,
    DType::Q3K,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
    DType::Mxfp4,
];

/// Encodes `x` (row-major, a whole number of blocks) as `dtype`, block by
/// block, with the reference encoders: the `gguf` package's for the
/// 32-element formats and MXFP4, ggml's for the k-quants (see
/// `kernels/kquant.rs`).
pub fn quantize_values(dtype: DType, x: &[f32]) -> Result<Vec<u8>, String> {
    let encode: Encoder = match dtype {
        DType::Q4_0 => enc_q4_0,
        DType::Q4_1 => enc_q4_1,
        DType::Q5_0 => enc_q5_0,
        DType::Q5_1 => enc_q5_1,
        DType::Q8_0 => enc_q8_0,
        DType::Q2K => super::kquant::enc_q2_k,
        DType::Q3K => super::kquant::enc_q3_k,
        DType::Q4K => super::kquant::enc_q4_k,
        DType::Q5K => super::kquant::enc_q5_k,
        DType::Q6K => super::kquant::enc_q6_k,
        DType::Mxfp4 => enc_mxfp4,
        d => return Err(format!("quantize to {d} is not supported")),
    };
    let Storage::Block { block, bytes } = dtype.storage() else {
        unreachable!("every encoder above is for a block dtype")
    };
    if !x.len().is_multiple_of(block) {
        return Err(format!(
            "{} values are not a whole number of {dtype} blocks of {block}",
            x.len()
        ));
    }
    let mut out = Vec::with_capacity(x.len() / block * bytes);
    for b in x.chunks_exact(block) {
        encode(b, &mut out);
    }
    Ok(out)
}

// The encoders transcribe gguf/quants.py's numpy code in f32 arithmetic,
// operation for operation (Rust does not contract a·b + c into an FMA), so
// the bytes match. Scales are stored as f16 rounded to nearest even, as
// numpy's astype(float16) does.

/// The element of largest magnitude, first one on ties (numpy's argmax of
/// |x|; a NaN, which numpy's argmax returns first, is returned too).
fn signed_absmax(x: &[f32]) -> f32 {
    let mut best = x[0];
    for &v in x {
        if best.is_nan() {
            break;
        }
        if v.is_nan() || v.abs() > best.abs() {
            best = v;
        }
    }
    best
}

/// numpy's max / min (NaN propagates).
fn max_min(x: &[f32]) -> (f32, f32) {
    let nan_or = |a: f32, b: f32, pick: fn(f32, f32) -> f32| {
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else {
            pick(a, b)
        }
    };
    x.iter().fold((x[0], x[0]), |(hi, lo), &v| {
        (nan_or(hi, v, f32::max), nan_or(lo, v, f32::min))
    })
}

/// 1/d, or 0 for d = 0 (`np.where(d == 0, 0, 1 / d)`).
fn inv(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// `np.trunc(v).astype(np.uint8).clip(0, hi)` for v in the encoders' range.
fn trunc_clip(v: f32, hi: u8) -> u8 {
    (v.trunc() as u8).min(hi)
}

fn push_f16(out: &mut Vec<u8>, v: f32) {
    out.extend(f16::from_f32(v).to_le_bytes());
}

/// Byte j = q[j] (low nibble) | q[j + 16] << 4 (only the 4 low bits of
/// each value survive, as in numpy's uint8 arithmetic).
fn push_nibbles(out: &mut Vec<u8>, q: &[u8]) {
    out.extend((0..16).map(|j| (q[j] & 0x0F) | (q[j + 16] << 4)));
}

/// Bit j of the little-endian u32 is bit 4 of q[j] (`np.packbits(q >> 4,
/// bitorder="little")`).
fn push_high_bits(out: &mut Vec<u8>, q: &[u8]) {
    let h = (0..32).fold(0u32, |h, j| h | ((((q[j] >> 4) != 0) as u32) << j));
    out.extend(h.to_le_bytes());
}

/// Q4_0: d = max / −8 (max = the signed value of largest magnitude),
/// q = trunc(x/d + 8.5) clipped to 0..=15.
fn enc_q4_0(x: &[f32], out: &mut Vec<u8>) {
    let d = signed_absmax(x) / -8.0;
    let id = inv(d);
    let q: Vec<u8> = x.iter().map(|&v| trunc_clip(v * id + 8.5, 15)).collect();
    push_f16(out, d);
    push_nibbles(out, &q);
}

/// Q4_1: d = (max − min)/15, q = trunc((x − min)/d + 0.5) clipped to 0..=15.
fn enc_q4_1(x: &[f32], out: &mut Vec<u8>) {
    let (max, min) = max_min(x);
    let d = (max - min) / 15.0;
    let id = inv(d);
    let q: Vec<u8> = x
        .iter()
        .map(|&v| trunc_clip((v - min) * id + 0.5, 15))
        .collect();
    push_f16(out, d);
    push_f16(out, min);
    push_nibbles(out, &q);
}

/// Q5_0: d = max / −16, q = trunc(x/d + 16.5) clipped to 0..=31.
fn enc_q5_0(x: &[f32], out: &mut Vec<u8>) {
    let d = signed_absmax(x) / -16.0;
    let id = inv(d);
    let q: Vec<u8> = x.iter().map(|&v| trunc_clip(v * id + 16.5, 31)).collect();
    push_f16(out, d);
    push_high_bits(out, &q);
    push_nibbles(out, &q);
}

/// Q5_1: d = (max − min)/31, q = trunc((x − min)/d + 0.5) clipped to 0..=31.
fn enc_q5_1(x: &[f32], out: &mut Vec<u8>) {
    let (max, min) = max_min(x);
    let d = (max - min) / 31.0;
    let id = inv(d);
    let q: Vec<u8> = x
        .iter()
        .map(|&v| trunc_clip((v - min) * id + 0.5, 31))
        .collect();
    push_f16(out, d);
    push_f16(out, min);
    push_high_bits(out, &q);
    push_nibbles(out, &q);
}

/// Q8_0: d = max|x| / 127, q = round-half-away-from-zero(x/d) (gguf's
/// `np_roundf`, which is f32::round).
fn enc_q8_0(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |m, &v| {
        if v.is_nan() || m.is_nan() {
            f32::NAN
        } else {
            m.max(v.abs())
        }
    });
    let d = amax / 127.0;
    let id = inv(d);
    push_f16(out, d);
    out.extend(x.iter().map(|&v| (v * id).round() as i8 as u8));
}

/// MXFP4: e = floor(log2(max|x|)) − 2 + 127 (0 for an all-zero block), and
/// each element takes the code whose value d·kvalue (d = 2^(e−128), the
/// doubled E2M1 values) is nearest, the first code in table order on ties
/// (so ties go toward zero, and 0 is +0).
fn enc_mxfp4(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |m, &v| {
        if v.is_nan() || m.is_nan() {
            f32::NAN
        } else {
            m.max(v.abs())
        }
    });
    // numpy computes log2 in float32; rounding the f64 log2 to f32 gives
    // the correctly rounded float32 result, which decides the floor for
    // values just below a power of two exactly as a float32 log2 would.
    let e = if amax > 0.0 {
        ((amax as f64).log2() as f32).floor() - 2.0 + 127.0
    } else {
        0.0
    };
    // astype(np.uint8) of an out-of-range float wraps on x86 (via int32).
    let e = e as i32 as u8;
    let d = e8m0_half(e);
    let q: Vec<u8> = x
        .iter()
        .map(|&v| {
            let errs = E2M1_X2.iter().map(|&k| (d * k as f32 - v).abs());
            // np.argmin: the first minimum, or the first NaN if any.
            let mut best = (0usize, f32::INFINITY);
            for (i, err) in errs.enumerate() {
                if err.is_nan() {
                    return i as u8;
                }
                if err < best.1 {
                    best = (i, err);
                }
            }
            best.0 as u8
        })
        .collect();
    out.push(e);
    push_nibbles(out, &q);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(d: DType, n: usize, bytes: Vec<u8>) -> HostTensor {
        HostTensor::new(d, [n], TensorData::Packed(bytes)).unwrap()
    }

    #[test]
    fn q8_0_block_by_hand() {
        // d = 0.5 (f16 0x3800); q = 1, −2, 127, then zeros.
        let mut b = vec![0x00, 0x38, 1, (-2i8) as u8, 127];
        b.resize(34, 0);
        let v = dequantize_values(&packed(DType::Q8_0, 32, b)).unwrap();
        assert_eq!(&v[..4], &[0.5, -1.0, 63.5, 0.0]);
    }

    #[test]
    fn q4_0_nibble_order() {
        // d = 1 (0x3C00); byte 0 = 0x9F → element 0 = 15 − 8, element 16 = 9 − 8.
        let mut b = vec![0x00, 0x3C, 0x9F];
        b.resize(18, 0x88);
        let v = dequantize_values(&packed(DType::Q4_0, 32, b)).unwrap();
        assert_eq!((v[0], v[16], v[1]), (7.0, 1.0, 0.0));
    }

    #[test]
    fn packed_4_bit_integers() {
        let v = dequantize_values(&packed(DType::I4, 4, vec![0xF7, 0x08])).unwrap();
        assert_eq!(v, vec![7.0, -1.0, -8.0, 0.0]);
        let v = dequantize_values(&packed(DType::U4, 2, vec![0xF7])).unwrap();
        assert_eq!(v, vec![7.0, 15.0]);
    }

    #[test]
    fn mx_formats_by_hand() {
        // e = 127 (scale 1): code 1 = 0.5, code 2 = 1.0, code 0xF = −6.
        let mut b = vec![127, 0x21, 0x0F];
        b.resize(17, 0);
        let v = dequantize_values(&packed(DType::Mxfp4, 32, b)).unwrap();
        assert_eq!((v[0], v[16], v[1], v[17]), (0.5, 1.0, -6.0, 0.0));
        // e = 128 (scale 2): 0x38 = 1.0, 0x7E = 448, 0x01 = 2⁻⁹, 0xFF = NaN.
        let mut b = vec![128, 0x38, 0x7E, 0x01, 0xFF];
        b.resize(33, 0);
        let v = dequantize_values(&packed(DType::Mxfp8, 32, b)).unwrap();
        assert_eq!(&v[..3], &[2.0, 896.0, 2f64.powi(-8)]);
        assert!(v[3].is_nan());
    }

    #[test]
    fn q4_k_scales_and_mins() {
        // d = 1, dmin = 0.5; sub-block 0: sc 2, min 4; sub-block 4 takes its
        // high bits from bytes 0 and 4: sc = 1 | (1 << 4), min = 3.
        let mut b = vec![0x00, 0x3C, 0x00, 0x38];
        let mut scales = [0u8; 12];
        scales[0] = 2 | (1 << 6); // sc0 = 2, high bits of sc4 = 1
        scales[4] = 4; // min0 = 4
        scales[8] = 1 | (3 << 4); // sc4 low = 1, min4 low = 3
        b.extend(scales);
        let mut qs = [0u8; 128];
        qs[0] = 0x53; // element 0 = 3, element 32 = 5
        qs[64] = 0x02; // element 128 = 2 (sub-block 4)
        b.extend(qs);
        let v = dequantize_values(&packed(DType::Q4K, 256, b)).unwrap();
        assert_eq!(v[0], 2.0 * 3.0 - 0.5 * 4.0);
        assert_eq!(v[32], 0.0); // sub-block 1: sc 0, min 0
        assert_eq!(v[128], 17.0 * 2.0 - 0.5 * 3.0);
    }

    #[test]
    fn quantize_round_trips() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) * 0.37).collect();
        let t = HostTensor::from_slice(&x, [2, 32]).unwrap();
        for (d, tol) in [
            (DType::Q8_0, 0.07),
            (DType::Q4_0, 1.01),
            (DType::Q5_1, 0.4),
            (DType::Mxfp4, 4.0),
        ] {
            let src = format!("graph @g(%x: f32[2,32]) {{\n  %1 = quantize(%x) {{dtype={d}}}\n  %2 = dequantize(%1)\n  return %2\n}}");
            let g = rlx_ir::text::parse(&src).unwrap();
            let y = crate::run_graph(&g, std::slice::from_ref(&t)).unwrap()[0]
                .to_vec::<f32>()
                .unwrap();
            for (a, b) in x.iter().zip(&y) {
                assert!((a - b).abs() <= tol, "{d}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn quantize_to_mxfp8_is_reported() {
        let t = HostTensor::from_slice(&[0.0f32; 256], [256]).unwrap();
        let g = rlx_ir::text::parse(
            "graph @g(%x: f32[256]) {\n  %1 = quantize(%x) {dtype=mxfp8}\n  return %1\n}",
        )
        .unwrap();
        let e = crate::run_graph(&g, &[t]).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}
