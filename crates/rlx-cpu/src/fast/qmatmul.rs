//! `dequant_matmul` on the fast engine: `y[m, n] = Σ_k x[m, k] · w[n, k]`
//! with `w` in a GGUF block type, decoded block by block as it is read.
//!
//! The decoders below compute each weight with the reference's float32
//! arithmetic (`rlx_ref::kernels::quant`), so a decoded weight is the
//! reference's value bit for bit (checked in the tests); the products
//! differ from the reference only by the order of the f32 sums.
//!
//! * Few rows (`m < GEMM_ROWS`, decoding one token): each weight row is
//!   decoded one block at a time and dotted with every row of `x`, weight
//!   rows split across threads — the weights are streamed once and never
//!   expanded in memory. On x86-64 with AVX2+FMA the seven main types
//!   decode in registers (`qdot_x86`); elsewhere (and for the other types)
//!   into a stack buffer, auto-vectorized per SIMD level.
//! * Many rows (a prompt): panels of up to `PANEL` weight rows are decoded to f32
//!   and multiplied with the `gemm` crate, so decoding is paid once per
//!   panel, not once per row of `x`.
//! * With `q8` (activations rounded to 8 bits per 32 values, as llama.cpp
//!   does): integer dot products — AVX2 for few rows (`qdot_x86`), an
//!   AVX-512 VNNI GEMM for many (`qgemm`).
//!
//! Types with a fast decoder here: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K,
//! Q6_K, MXFP4, MXFP8; every other block type decodes through the
//! reference decoder (slower, same values).

use super::par;
use super::simd::simd_fn;
use crate::kernels::gemm::{gemm_into, Mat};
use half::f16;
use rlx_ir::dtype::Storage;
use rlx_ir::DType;

/// From this many rows of `x` on, panels are decoded and multiplied by GEMM.
pub const GEMM_ROWS: usize = 8;
/// Weight rows per decoded panel (the GEMM is 2× faster on 512 than on
/// 128), within [`PANEL_BYTES`] of f32.
const PANEL: usize = 512;
/// The most scratch a decoded panel takes.
const PANEL_BYTES: usize = 32 << 20;
/// The largest block (k-quants).
const MAX_BLOCK: usize = 256;

/// Whether `d` has a decoder of this module (the others use the reference's).
pub fn has_fast_decoder(d: DType) -> bool {
    fast_decoder(d).is_some()
}

/// Whether this engine runs `dequant_matmul` with weights of type `d`:
/// every block type with the `quant` feature (the reference decoder for
/// the rest), else only those with a decoder here.
pub fn supported(d: DType) -> bool {
    cfg!(feature = "quant") || has_fast_decoder(d)
}

type Decode = fn(&[u8], &mut [f32]);

fn fast_decoder(d: DType) -> Option<Decode> {
    Some(match d {
        DType::Q4_0 => q4_0,
        DType::Q4_1 => q4_1,
        DType::Q5_0 => q5_0,
        DType::Q8_0 => q8_0,
        DType::Q4K => q4_k,
        DType::Q5K => q5_k,
        DType::Q6K => q6_k,
        #[cfg(feature = "quant")]
        DType::Mxfp4 => mxfp4,
        #[cfg(feature = "quant")]
        DType::Mxfp8 => mxfp8,
        _ => return None,
    })
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

#[inline(always)]
fn q4_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        out[j] = d * ((qs[j] & 0x0F) as f32 - 8.0);
        out[j + 16] = d * ((qs[j] >> 4) as f32 - 8.0);
    }
}

#[inline(always)]
fn q4_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        out[j] = d * (qs[j] & 0x0F) as f32 + m;
        out[j + 16] = d * (qs[j] >> 4) as f32 + m;
    }
}

#[inline(always)]
fn q5_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let h = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let lo = (qs[j] & 0x0F) | ((((h >> j) & 1) as u8) << 4);
        let hi = (qs[j] >> 4) | ((((h >> (j + 16)) & 1) as u8) << 4);
        out[j] = d * (lo as f32 - 16.0);
        out[j + 16] = d * (hi as f32 - 16.0);
    }
}

#[inline(always)]
fn q8_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (o, &q) in out[..32].iter_mut().zip(&b[2..34]) {
        *o = q as i8 as f32 * d;
    }
}

/// The 6-bit (scale, min) pair `j` of Q4_K/Q5_K (ggml's `get_scale_min_k4`).
#[inline(always)]
fn scale_min(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 0x3F, s[j + 4] & 0x3F)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Q4_K/Q5_K: per 64 elements (g), 32 low nibbles then 32 high nibbles of
/// `qs[32g..32g + 32]`, the 5th bit (Q5_K) bit `2g`/`2g + 1` of `qh[l]`.
#[inline(always)]
fn k4(b: &[u8], qs: &[u8], qh: Option<&[u8]>, out: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    for g in 0..4 {
        for h in 0..2 {
            let j = 2 * g + h;
            let (sc, m) = scale_min(scales, j);
            let (dl, ml) = (d * sc as f32, dmin * m as f32);
            let o = &mut out[32 * j..32 * j + 32];
            for l in 0..32 {
                let mut q = (qs[32 * g + l] >> (4 * h)) & 0x0F;
                if let Some(qh) = qh {
                    q |= ((qh[l] >> j) & 1) << 4;
                }
                o[l] = dl * q as f32 - ml;
            }
        }
    }
}

fn q4_k(b: &[u8], out: &mut [f32]) {
    k4(b, &b[16..144], None, out)
}

fn q5_k(b: &[u8], out: &mut [f32]) {
    k4(b, &b[48..176], Some(&b[16..48]), out)
}

/// Q6_K: ql[128], qh[64], scales[16] (i8), f16 d; x = (d·sc)·(q − 32).
fn q6_k(b: &[u8], out: &mut [f32]) {
    let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for g in 0..2 {
        for s in 0..4 {
            // Elements 128g + 32s + l: low 4 bits from ql[64g + 32(s % 2) + l]
            // (low nibble for s < 2), high 2 bits from qh[32g + l] >> 2s.
            for l in 0..32 {
                let e = 128 * g + 32 * s + l;
                let lo = (ql[64 * g + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0x0F;
                let hi = (qh[32 * g + l] >> (2 * s)) & 3;
                let q = (lo | (hi << 4)) as i8 - 32;
                out[e] = (d * sc[e / 16] as i8 as f32) * q as f32;
            }
        }
    }
}

/// MXFP4: E8M0 byte (half the scale, as ggml stores it), 16 nibble bytes;
/// the code tables are the reference's.
#[cfg(feature = "quant")]
fn mxfp4(b: &[u8], out: &mut [f32]) {
    use rlx_ref::kernels::quant::{e8m0_half, E2M1_X2};
    let d = e8m0_half(b[0]);
    for j in 0..16 {
        out[j] = d * E2M1_X2[(b[1 + j] & 0x0F) as usize] as f32;
        out[j + 16] = d * E2M1_X2[(b[1 + j] >> 4) as usize] as f32;
    }
}

/// MXFP8: E8M0 scale (0xFF: NaN), 32 E4M3FN codes; the product is exact
/// in f64 and rounded once to f32, as the reference's values are.
#[cfg(feature = "quant")]
fn mxfp8(b: &[u8], out: &mut [f32]) {
    let scale = if b[0] == 0xFF {
        f64::NAN
    } else {
        2f64.powi(b[0] as i32 - 127)
    };
    for (o, &c) in out[..32].iter_mut().zip(&b[1..33]) {
        *o = (scale * rlx_ref::kernels::quant::e4m3fn(c)) as f32;
    }
}

/// Decodes whole blocks of `bytes` into `out` (as many elements): the
/// reference's values (`dequantize_values`) bit for bit, fast for the
/// types with a decoder here. `dtype` must be a block type.
pub fn decode(dtype: DType, bytes: &[u8], out: &mut [f32]) {
    let Storage::Block { block, bytes: bb } = dtype.storage() else {
        panic!("decode: {dtype} is not a block type")
    };
    match fast_decoder(dtype) {
        Some(f) => {
            for (b, o) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(block)) {
                f(b, o);
            }
        }
        #[cfg(not(feature = "quant"))]
        None => {
            unreachable!("select() picks only types with a decoder here without the quant feature")
        }
        #[cfg(feature = "quant")]
        None => {
            let t = rlx_ir::HostTensor::new(
                dtype,
                [out.len()],
                rlx_ir::TensorData::Packed(bytes.to_vec()),
            )
            .expect("the bytes of whole blocks");
            let v = rlx_ref::kernels::quant::dequantize_values(&t).expect("a block dtype");
            for (o, x) in out.iter_mut().zip(v) {
                *o = x as f32;
            }
        }
    }
}

simd_fn! {
    /// `out[r·ldo + j] = x[r] · w[j0 + j]` for the rows `x` (m × k) and
    /// the `cols` weight rows of this chunk, decoding each weight block once.
    fn gemv_rows(
        dtype: DType,
        w: &[u8],
        row_bytes: usize,
        j0: usize,
        x: &[f32],
        m: usize,
        k: usize,
        cols: usize,
        out: &mut [f32],
        ldo: usize,
    ) {
        // One copy of the loop per type with its decoder inlined: through
        // a function pointer the decode was a call per block and nothing
        // vectorized across it (0.8 GB/s of Q4_1 weights; the decode row of
        // the browser build, which has no hand-written kernel).
        macro_rules! go {
            ($f:expr) => {
                rows_with::<M, _>($f, dtype, w, row_bytes, j0, x, m, k, cols, out, ldo)
            };
        }
        match dtype {
            DType::Q4_0 => go!(q4_0),
            DType::Q4_1 => go!(q4_1),
            DType::Q5_0 => go!(q5_0),
            DType::Q8_0 => go!(q8_0),
            DType::Q4K => go!(q4_k),
            DType::Q5K => go!(q5_k),
            DType::Q6K => go!(q6_k),
            _ => go!(|b: &[u8], o: &mut [f32]| decode(dtype, b, o)),
        }
    }
}

/// [`gemv_rows`]' loop with the block decoder `f`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn rows_with<M: super::simd::Mad, F: Fn(&[u8], &mut [f32])>(
    f: F,
    dtype: DType,
    w: &[u8],
    row_bytes: usize,
    j0: usize,
    x: &[f32],
    m: usize,
    k: usize,
    cols: usize,
    out: &mut [f32],
    ldo: usize,
) {
    let Storage::Block { block, bytes: bb } = dtype.storage() else {
        return;
    };
    let mut buf = [0.0f32; MAX_BLOCK];
    let mut acc = [[0.0f32; 8]; GEMM_ROWS];
    for j in 0..cols {
        let row = &w[(j0 + j) * row_bytes..(j0 + j + 1) * row_bytes];
        for a in acc.iter_mut().take(m) {
            *a = [0.0; 8];
        }
        for (bi, b) in row.chunks_exact(bb).enumerate() {
            let dec = &mut buf[..block];
            f(b, dec);
            for r in 0..m {
                let xs = &x[r * k + bi * block..r * k + (bi + 1) * block];
                let a = &mut acc[r];
                for (wc, xc) in dec.chunks_exact(8).zip(xs.chunks_exact(8)) {
                    for l in 0..8 {
                        a[l] = M::mad(wc[l], xc[l], a[l]);
                    }
                }
            }
        }
        for r in 0..m {
            let a = &acc[r];
            out[r * ldo + j] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        }
    }
}

/// The f32-activation kernels of the few-rows path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FewRows {
    /// `qdot_x512`: AVX-512F, levels via table permutes.
    Avx512,
    /// `qdot_x86`: AVX2 + FMA + F16C.
    Avx2,
    /// Decode to a buffer (auto-vectorized), then dot products.
    Portable,
}

impl FewRows {
    /// The widest kernel this CPU has for `dtype`.
    pub fn best(dtype: DType) -> FewRows {
        Self::all(dtype)[0]
    }

    /// Every kernel this CPU can run for `dtype`, widest first (tests run
    /// each, so no path rots on a machine that would never pick it).
    pub fn all(dtype: DType) -> Vec<FewRows> {
        let mut v = vec![];
        #[cfg(target_arch = "x86_64")]
        if super::qdot_x86::handles(dtype) {
            if super::qdot_x512::available() {
                v.push(FewRows::Avx512);
            }
            if super::qdot_x86::available() {
                v.push(FewRows::Avx2);
            }
        }
        let _ = dtype;
        v.push(FewRows::Portable);
        v
    }

    /// For the dispatch report.
    pub fn describe(self) -> &'static str {
        match self {
            FewRows::Avx512 => "AVX-512 in-register decode (table permutes) and f32 dot products",
            FewRows::Avx2 => "AVX2+FMA in-register decode and f32 dot products",
            FewRows::Portable => "decode to a buffer (auto-vectorized) and f32 dot products",
        }
    }
}

/// The few-rows kernel `dtype` runs on this CPU, for the dispatch report.
pub fn few_rows_kernel(dtype: DType) -> &'static str {
    FewRows::best(dtype).describe()
}

/// Calls a kernel generic over its row count `M` (1..GEMM_ROWS) and its
/// weight type `D` (an index of `qdot_x86::TYPES`) with both as constants,
/// so the per-row accumulators stay in registers and the per-type branches
/// fold away.
#[cfg(target_arch = "x86_64")]
macro_rules! with_kernel {
    ($m:expr, $dtype:expr, |$M:ident, $D:ident| $call:expr) => {{
        macro_rules! rows {
            ($d:literal) => {{
                const $D: u8 = $d;
                match $m {
                    1 => {
                        const $M: usize = 1;
                        $call
                    }
                    2 => {
                        const $M: usize = 2;
                        $call
                    }
                    3 => {
                        const $M: usize = 3;
                        $call
                    }
                    4 => {
                        const $M: usize = 4;
                        $call
                    }
                    5 => {
                        const $M: usize = 5;
                        $call
                    }
                    6 => {
                        const $M: usize = 6;
                        $call
                    }
                    _ => {
                        const $M: usize = 7;
                        $call
                    }
                }
            }};
        }
        match super::qdot_x86::type_index($dtype) {
            Some(0) => rows!(0),
            Some(1) => rows!(1),
            Some(2) => rows!(2),
            Some(3) => rows!(3),
            Some(4) => rows!(4),
            Some(5) => rows!(5),
            Some(6) => rows!(6),
            _ => unreachable!("the caller checked that the type has a kernel"),
        }
    }};
}

/// Many rows with 8-bit activations: groups of `GEMM_ROWS − 1` rows
/// through the few-rows integer kernel (what the integer GEMMs are tested
/// against; they replaced it, 1.5–3× faster).
#[cfg(test)]
fn q8_groups(dtype: DType, w: &[u8], x: &[f32], m: usize, n: usize, k: usize, out: &mut [f32]) {
    let g = GEMM_ROWS - 1;
    for r0 in (0..m).step_by(g) {
        let rows = g.min(m - r0);
        let o = &mut out[r0 * n..(r0 + rows) * n];
        run(dtype, true, w, &x[r0 * k..(r0 + rows) * k], rows, n, k, o);
    }
}

/// Whether `dtype` has the 8-bit-activation kernel on this CPU.
pub fn q8_kernel(dtype: DType) -> bool {
    Q8Few::best(dtype).is_some()
}

/// The 8-bit-activation kernels of the few-rows path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Q8Few {
    /// `qdot_vnni`: AVX-512 VNNI, two blocks per `vpdpbusd`.
    Vnni,
    /// `qdot_x86::gemv_q8`: AVX2 `vpmaddubsw` + `vpmaddwd`, a block at a time.
    Avx2,
}

impl Q8Few {
    /// Every one this CPU has for `dtype`, best first (tests run each).
    pub fn all(dtype: DType) -> Vec<Q8Few> {
        #[cfg(target_arch = "x86_64")]
        if super::qdot_x86::handles(dtype) {
            let has = [
                (Q8Few::Vnni, super::qdot_vnni::available()),
                (Q8Few::Avx2, super::qdot_x86::available()),
            ];
            return has.into_iter().filter(|h| h.1).map(|h| h.0).collect();
        }
        let _ = dtype;
        vec![]
    }

    /// The best this CPU has for `dtype`.
    pub fn best(dtype: DType) -> Option<Q8Few> {
        Self::all(dtype).first().copied()
    }

    /// For the dispatch report.
    pub fn describe(self) -> &'static str {
        match self {
            Q8Few::Vnni => "activations rounded to 8 bits, AVX-512 VNNI integer dot products",
            Q8Few::Avx2 => "activations rounded to 8 bits, AVX2 integer dot products",
        }
    }
}

/// The integer GEMM many rows of `dtype` with 8-bit activations take on
/// this CPU (AVX-512 VNNI, else AVX2), if any.
#[cfg(target_arch = "x86_64")]
pub fn q8_gemm(dtype: DType) -> Option<super::qgemm::Isa> {
    super::qgemm::Isa::best().filter(|_| super::qgemm::handles(dtype))
}

#[cfg(target_arch = "x86_64")]
pub use super::qgemm::Isa as Q8Gemm;

/// [`run`] with 8-bit activations on the integer GEMM `isa` (for tests and
/// benchmarks of each path); false when this CPU lacks it, the type has
/// no kernel or the sizes do not fit.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub fn run_q8_gemm(
    isa: Q8Gemm,
    dtype: DType,
    w: &[u8],
    x: &[f32],
    m: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
) -> bool {
    let Storage::Block { block, bytes } = dtype.storage() else {
        return false;
    };
    if !(isa.available() && super::qgemm::handles(dtype))
        || block < 32
        || !k.is_multiple_of(block)
        || w.len() < n * (k / block) * bytes
        || x.len() < m * k
        || out.len() < m * n
    {
        return false;
    }
    // SAFETY: the ISA is available and the sizes were checked above.
    #[allow(unsafe_code)]
    unsafe {
        super::qgemm::gemm(isa, dtype, w, k / block * bytes, x, m, n, k, out)
    };
    true
}

/// For the dispatch report: the integer GEMM of [`q8_gemm`].
pub fn q8_gemm_kernel(dtype: DType) -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        q8_gemm(dtype).map(|i| i.describe())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = dtype;
        None
    }
}

/// `out (m × n) = x (m × k) · wᵀ` for `w` (n × k) of block type `dtype`.
///
/// `q8`: the few-rows path rounds activations to 8 bits and uses integer
/// dot products (only where [`q8_kernel`] says so; ignored elsewhere).
#[allow(clippy::too_many_arguments)]
pub fn run(
    dtype: DType,
    q8: bool,
    w: &[u8],
    x: &[f32],
    m: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
) {
    run_on(FewRows::best(dtype), dtype, q8, w, x, m, n, k, out)
}

/// [`run`] with the f32 few-rows path on `few` (one of [`FewRows::all`]).
#[allow(clippy::too_many_arguments)]
pub fn run_on(
    few: FewRows,
    dtype: DType,
    q8: bool,
    w: &[u8],
    x: &[f32],
    m: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
) {
    let q8_few = if q8 { Q8Few::best(dtype) } else { None };
    run_with(few, q8_few, dtype, q8, w, x, m, n, k, out)
}

/// [`run`] with 8-bit activations on the few-rows kernel `isa` (one of
/// [`Q8Few::all`]; for tests and benchmarks of each path): `m` must be
/// below [`GEMM_ROWS`]. False when this CPU lacks the kernel.
#[allow(clippy::too_many_arguments)]
pub fn run_q8_few(
    isa: Q8Few,
    dtype: DType,
    w: &[u8],
    x: &[f32],
    m: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
) -> bool {
    if !Q8Few::all(dtype).contains(&isa) || m >= GEMM_ROWS {
        return false;
    }
    run_with(
        FewRows::best(dtype),
        Some(isa),
        dtype,
        true,
        w,
        x,
        m,
        n,
        k,
        out,
    );
    true
}

#[allow(clippy::too_many_arguments)]
fn run_with(
    few: FewRows,
    q8_few: Option<Q8Few>,
    dtype: DType,
    q8: bool,
    w: &[u8],
    x: &[f32],
    m: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
) {
    let Storage::Block { block, bytes: bb } = dtype.storage() else {
        return;
    };
    let row_bytes = k / block * bb;
    if m == 0 || n == 0 {
        return;
    }
    // With 8-bit activations, many rows take the integer GEMM: 512 × 2048
    // × 2048 ran 3.9× (VNNI) and 2.0× (AVX2) faster than decoded panels
    // through the f32 GEMM on one Zen 4 core.
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(isa)) = (q8 && m >= GEMM_ROWS, q8_gemm(dtype)) {
        // SAFETY: `q8_gemm` checked the CPU; k is a multiple of the block.
        #[allow(unsafe_code)]
        unsafe {
            super::qgemm::gemm(isa, dtype, w, row_bytes, x, m, n, k, out)
        };
        return;
    }
    // The few-rows integer kernel's activations: rounded to 8 bits, and
    // laid out for the VNNI kernel where that runs.
    #[cfg(target_arch = "x86_64")]
    let q8_few = q8_few.filter(|_| m < GEMM_ROWS);
    #[cfg(target_arch = "x86_64")]
    let xq = q8_few.map(|_| super::qdot_x86::quantize_rows(x, m, k));
    #[cfg(target_arch = "x86_64")]
    let (xq, xv) = match (q8_few, xq) {
        (Some(Q8Few::Vnni), Some(xq)) => (None, Some(super::qdot_vnni::prepare(dtype, xq, m, k))),
        (_, xq) => (xq, None),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (q8, q8_few);
    #[cfg(target_arch = "x86_64")]
    let xp = (q8_few.is_none() && m < GEMM_ROWS && few != FewRows::Portable).then(|| {
        if few == FewRows::Avx512 {
            super::qdot_x86::prepare_natural(dtype, x, m, k)
        } else {
            super::qdot_x86::prepare(dtype, x, m, k)
        }
    });
    #[cfg(not(target_arch = "x86_64"))]
    let _ = few;
    if m < GEMM_ROWS {
        // Each thread takes whole weight rows: `cols` rows from `j0` into
        // `o` (row r of x at `o[r·ldo..]`).
        let kernel = |j0: usize, cols: usize, o: &mut [f32], ldo: usize| {
            // The few-rows kernel `$f` on the activations `$x` it was
            // prepared for. SAFETY (each use below): the kernel's CPU
            // features were checked where `$x` was made (`Q8Few::all`,
            // `FewRows::all`), and `$x` holds the m rows of k values in
            // that kernel's layout.
            #[cfg(target_arch = "x86_64")]
            macro_rules! few_rows {
                ($x:expr, $($f:ident)::+) => {{
                    #[allow(unsafe_code)]
                    unsafe {
                        with_kernel!(m, dtype, |M, D| $($f)::+::<M, D>(
                            w, row_bytes, j0, $x, k, o, ldo, cols
                        ))
                    };
                    return;
                }};
            }
            #[cfg(target_arch = "x86_64")]
            if let Some(xv) = &xv {
                few_rows!(xv, super::qdot_vnni::gemv)
            }
            #[cfg(target_arch = "x86_64")]
            if let Some(xq) = &xq {
                few_rows!(xq, super::qdot_x86::gemv_q8)
            }
            #[cfg(target_arch = "x86_64")]
            if let (Some(xp), FewRows::Avx512) = (&xp, few) {
                few_rows!(xp, super::qdot_x512::gemv)
            }
            #[cfg(target_arch = "x86_64")]
            if let Some(xp) = &xp {
                few_rows!(xp, super::qdot_x86::gemv)
            }
            gemv_rows(dtype, w, row_bytes, j0, x, m, k, cols, o, ldo);
        };
        let chunk = par::chunk_len(n, 4, 16);
        if m == 1 {
            // One row: each chunk of `out` is its weight rows' results.
            par::for_chunks(&mut out[..n], chunk, |ci, o| {
                kernel(ci * chunk, o.len(), o, 0)
            });
            return;
        }
        // Results land in a per-chunk (m × chunk) buffer, then in their
        // columns of `out`.
        let parts = n.div_ceil(chunk);
        let mut tiles: Vec<Vec<f32>> = vec![Vec::new(); parts];
        par::for_chunks(&mut tiles, 1, |ci, t| {
            let j0 = ci * chunk;
            let cols = chunk.min(n - j0);
            let mut tile = vec![0.0f32; m * cols];
            kernel(j0, cols, &mut tile, cols);
            t[0] = tile;
        });
        for (ci, tile) in tiles.iter().enumerate() {
            let j0 = ci * chunk;
            let cols = tile.len() / m.max(1);
            for r in 0..m {
                out[r * n + j0..r * n + j0 + cols].copy_from_slice(&tile[r * cols..(r + 1) * cols]);
            }
        }
        return;
    }
    let per = (PANEL_BYTES / (4 * k)).clamp(16, PANEL).min(n);
    let mut panel = vec![0.0f32; per * k];
    for j0 in (0..n).step_by(per) {
        let rows = per.min(n - j0);
        let p = &mut panel[..rows * k];
        {
            let bytes = &w[j0 * row_bytes..(j0 + rows) * row_bytes];
            // Decode rows in parallel: each chunk of the panel is whole rows.
            let rows_per = par::chunk_len(rows, 1, 8);
            par::for_chunks(p, rows_per * k, |ci, c| {
                let r0 = ci * rows_per;
                let nr = c.len() / k;
                decode(dtype, &bytes[r0 * row_bytes..(r0 + nr) * row_bytes], c);
            });
        }
        // The panel is (rows × k); read as its transpose (k × rows).
        let b = Mat {
            data: &panel[..rows * k],
            rows: k,
            cols: rows,
            row_stride: 1,
            col_stride: k,
        };
        let a = Mat::row_major(x, m, k);
        let end = (m - 1) * n + j0 + rows;
        gemm_into(a, b, &mut out[j0..end], n, false, true);
    }
}

#[cfg(all(test, feature = "quant"))]
#[path = "qmatmul_tests.rs"]
mod tests;
