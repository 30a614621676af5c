//! `dequant_matmul(x, w)`: x (M, K) times the transpose of a GGUF
//! block-quantized weight w (N, K), whose bytes stay on the GPU as they
//! were uploaded. Blocks are decoded in the kernel with the reference's
//! f32 formulas (`rlx-ref` `kernels/quant.rs`); accumulation is f32.
//!
//! The unit of decoding is 8 weights of one block, two runs of 4
//! neighbouring elements (`P0(u)..+4`, `P1(u)..+4` in the block), chosen so
//! that a unit reads 4 whole bytes of the block's quants (both nibbles of
//! each byte are used: no byte is read twice) and x as two float4s. A unit
//! yields its 8 quants as floats `q` and, per run, a scale `s` and offset
//! `m` (w = s·q + m; m = 0 for the types without a minimum). Nibbles become
//! floats through the exponent trick (`2^23 + v` as bits, minus `2^23`):
//! an OR and an add instead of an int-to-float conversion, which runs at a
//! quarter of the FMA rate and would bound the decode kernel.
//!
//! Two kernels:
//! * **gemv** (M ≤ [`GEMV_ROWS`]: decoding one token, or a few): one warp
//!   per [`GEMV_COLS`] output columns, the lanes striding over the rows'
//!   units (a warp reads consecutive bytes of each row), up to 8 rows of x
//!   per weight decoded, f32 partial sums met by warp shuffles. Factored form per run:
//!   s·Σqx (+ m·Σx), so the scale multiplies once per 4 elements.
//! * **tiled** (prompts): 64×64 output tiles over K chunks of
//!   [`chunk`] elements; the block decodes its 64 weight rows of the chunk
//!   into shared memory (k-major, as f32 w = s·q + m) beside the x tile,
//!   then each of 256 threads accumulates a 4×4 register block. Each
//!   chunk's partial sums join the total on their own (blocked summation:
//!   closer to the reference than one long chain of FMAs).
//!
//! Every helper is a lambda inside the kernel, so any number of these
//! kernels share one NVRTC module (and one namespace of the CPU emulation)
//! without name clashes.

use crate::ctype::{load, storage, store};
use rlx_ir::dtype::Storage;
use rlx_ir::DType;
use std::fmt::Write;

/// Up to this many rows of x (M) the gemv kernel runs; more take the tiled one.
pub const GEMV_ROWS: usize = 8;

/// Warps per block of the gemv kernel.
pub const GEMV_WARPS: usize = 4;

/// Output columns per warp of the gemv kernel: each x element loaded
/// (from L1) serves this many weight rows. With one, the x loads (32 bytes
/// per 8 weights, ~4.5 bytes of them at 4 bits) would cap a 4-bit decode
/// near L1's 128 bytes per clock rather than DRAM bandwidth.
pub const GEMV_COLS: usize = 2;

/// Threads per block of the tiled kernel (16 × 16, 4 × 4 outputs each).
pub const TILED_THREADS: u32 = 256;

/// Output rows and columns per block of the tiled kernel.
pub const TILE: usize = 64;

/// The weight dtypes the kernels decode.
pub const DTYPES: [DType; 8] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

/// The activation (x and output) dtypes the kernels take.
pub const X_DTYPES: [DType; 3] = [DType::F16, DType::BF16, DType::F32];

/// Whether `d` is a weight dtype the kernels decode.
pub fn decodes(d: DType) -> bool {
    DTYPES.contains(&d)
}

/// The decoded dtypes' names, for refusals ("q4_0, q4_1, ...").
pub fn names() -> String {
    DTYPES
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// (elements, bytes) per block of `d`.
pub fn block(d: DType) -> (usize, usize) {
    match d.storage() {
        Storage::Block { block, bytes } => (block, bytes),
        Storage::Plain { size } => (1, size),
    }
}

/// Units (of 8 weights) per block.
fn units_per_block(d: DType) -> usize {
    block(d).0 / 8
}

/// Elements of K the tiled kernel decodes per step: the span a run of
/// consecutive units covers exactly (a 32-element block; a 64-element
/// group of Q4_K/Q5_K's nibble planes; 128 for Q6_K's).
pub fn chunk(d: DType) -> usize {
    match d {
        DType::Q4K | DType::Q5K => 64,
        DType::Q6K => 128,
        _ => 32,
    }
}

/// Dynamic shared memory of the tiled kernel for `d`: the x and w tiles
/// of one chunk as f32 (16, 32 or 64 KiB).
pub fn tiled_smem(d: DType) -> usize {
    2 * TILE * chunk(d) * 4
}

/// The element offsets in its block of unit `u`'s two runs of 4 (C
/// expressions of `u`).
fn runs(d: DType) -> (&'static str, &'static str) {
    match d {
        DType::Q8_0 => ("8 * u", "8 * u + 4"),
        // Byte l of a group of 32 holds element 64g + l (low nibble) and
        // 64g + 32 + l (high).
        DType::Q4K | DType::Q5K => (
            "64 * (u >> 3) + 4 * (u & 7)",
            "64 * (u >> 3) + 4 * (u & 7) + 32",
        ),
        // ql byte l of a group of 64 holds element 128g + l and 128g + 64 + l.
        DType::Q6K => (
            "128 * (u >> 4) + 4 * (u & 15)",
            "128 * (u >> 4) + 4 * (u & 15) + 64",
        ),
        // Byte j of the 16 nibble bytes holds element j and j + 16.
        _ => ("4 * u", "4 * u + 16"),
    }
}

/// Whether `d`'s weights have an additive offset (a minimum) per run.
fn has_min(d: DType) -> bool {
    matches!(d, DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K)
}

/// The helper lambdas and `q_unit(b, u, q, s, m)` for weight dtype `d`:
/// unit `u` of the block at byte pointer `b`. Multi-byte loads are at
/// their natural alignment where the block size keeps it (`ld32`), else
/// two 16-bit loads (`ld32h`: blocks of 18, 22, 34 and 210 bytes).
fn decoder(d: DType) -> Option<String> {
    let helpers = r#"  auto ld16 = [](const unsigned char* p) -> unsigned { return *(const unsigned short*)p; };
  auto ld32 = [](const unsigned char* p) -> unsigned { return *(const unsigned*)p; };
  auto ld32h = [&](const unsigned char* p) -> unsigned { return ld16(p) | (ld16(p + 2) << 16); };
  auto f16at = [&](const unsigned char* p) -> float { h16 h; h.b = (unsigned short)ld16(p); return h2f(h); };
  // v (< 2^23) minus off as a float: the bits of 2^23 + v, minus 2^23 + off.
  auto qf = [](unsigned v, float off) -> float { return __int_as_float(0x4B000000u | v) - (8388608.0f + off); };
"#;
    // ggml's get_scale_min_k4 over the 12 scale bytes at b + 4.
    let smk4 = r#"  auto smk4 = [](const unsigned char* s, int j, float* sc, float* mn) {
    if (j < 4) { *sc = (float)(s[j] & 63); *mn = (float)(s[j + 4] & 63); }
    else { *sc = (float)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4)); *mn = (float)((s[j + 4] >> 4) | ((s[j] >> 6) << 4)); }
  };
"#;
    // Per dtype: q[0..4] from the low nibbles (or bytes) of `v`, q[4..8]
    // from the high ones, with their 5th/6th bits where the type has them.
    let body = match d {
        DType::Q4_0 => "unsigned v = ld32h(b + 2 + 4 * u); float d = f16at(b);
    for (int i = 0; i < 4; ++i) { q[i] = qf((v >> (8 * i)) & 15u, 8.0f); q[4 + i] = qf((v >> (8 * i + 4)) & 15u, 8.0f); }
    s[0] = d; s[1] = d;",
        DType::Q4_1 => "unsigned v = ld32(b + 4 + 4 * u); float d = f16at(b), mn = f16at(b + 2);
    for (int i = 0; i < 4; ++i) { q[i] = qf((v >> (8 * i)) & 15u, 0.0f); q[4 + i] = qf((v >> (8 * i + 4)) & 15u, 0.0f); }
    s[0] = d; s[1] = d; m[0] = mn; m[1] = mn;",
        // The 5th bit of element j is bit j of the u32 qh.
        DType::Q5_0 => "unsigned h = ld32h(b + 2), v = ld32h(b + 6 + 4 * u); float d = f16at(b);
    for (int i = 0; i < 4; ++i) {
      q[i] = qf(((v >> (8 * i)) & 15u) | (((h >> (4 * u + i)) & 1u) << 4), 16.0f);
      q[4 + i] = qf(((v >> (8 * i + 4)) & 15u) | (((h >> (4 * u + 16 + i)) & 1u) << 4), 16.0f);
    }
    s[0] = d; s[1] = d;",
        DType::Q5_1 => "unsigned h = ld32(b + 4), v = ld32(b + 8 + 4 * u); float d = f16at(b), mn = f16at(b + 2);
    for (int i = 0; i < 4; ++i) {
      q[i] = qf(((v >> (8 * i)) & 15u) | (((h >> (4 * u + i)) & 1u) << 4), 0.0f);
      q[4 + i] = qf(((v >> (8 * i + 4)) & 15u) | (((h >> (4 * u + 16 + i)) & 1u) << 4), 0.0f);
    }
    s[0] = d; s[1] = d; m[0] = mn; m[1] = mn;",
        // i8 quants: flipping the sign bits gives q + 128 as unsigned bytes.
        DType::Q8_0 => "unsigned v0 = ld32h(b + 2 + 8 * u) ^ 0x80808080u, v1 = ld32h(b + 6 + 8 * u) ^ 0x80808080u; float d = f16at(b);
    for (int i = 0; i < 4; ++i) { q[i] = qf((v0 >> (8 * i)) & 255u, 128.0f); q[4 + i] = qf((v1 >> (8 * i)) & 255u, 128.0f); }
    s[0] = d; s[1] = d;",
        // One (scale, min) per 32 elements: sub-blocks 2g and 2g + 1.
        DType::Q4K => "int g = u >> 3, t = u & 7; unsigned v = ld32(b + 16 + 32 * g + 4 * t);
    float d = f16at(b), dm = f16at(b + 2), sc0, mn0, sc1, mn1;
    smk4(b + 4, 2 * g, &sc0, &mn0); smk4(b + 4, 2 * g + 1, &sc1, &mn1);
    for (int i = 0; i < 4; ++i) { q[i] = qf((v >> (8 * i)) & 15u, 0.0f); q[4 + i] = qf((v >> (8 * i + 4)) & 15u, 0.0f); }
    s[0] = d * sc0; m[0] = -(dm * mn0); s[1] = d * sc1; m[1] = -(dm * mn1);",
        // The 5th bit of element e is bit e/32 of qh[e % 32].
        DType::Q5K => "int g = u >> 3, t = u & 7; unsigned h = ld32(b + 16 + 4 * t), v = ld32(b + 48 + 32 * g + 4 * t);
    float d = f16at(b), dm = f16at(b + 2), sc0, mn0, sc1, mn1;
    smk4(b + 4, 2 * g, &sc0, &mn0); smk4(b + 4, 2 * g + 1, &sc1, &mn1);
    for (int i = 0; i < 4; ++i) {
      q[i] = qf(((v >> (8 * i)) & 15u) | (((h >> (8 * i + 2 * g)) & 1u) << 4), 0.0f);
      q[4 + i] = qf(((v >> (8 * i + 4)) & 15u) | (((h >> (8 * i + 2 * g + 1)) & 1u) << 4), 0.0f);
    }
    s[0] = d * sc0; m[0] = -(dm * mn0); s[1] = d * sc1; m[1] = -(dm * mn1);",
        // ql: low/high nibbles; qh: the 2-bit plane (bits 2((e/32)%4) of
        // byte 32g + e % 32); an i8 scale per 16 elements; d last.
        DType::Q6K => "int g = u >> 4, t = u & 15, sh = 2 * (t >> 3);
    unsigned v = ld32h(b + 64 * g + 4 * t), h = ld32h(b + 128 + 32 * g + 4 * (t & 7)); float d = f16at(b + 208);
    for (int i = 0; i < 4; ++i) {
      q[i] = qf(((v >> (8 * i)) & 15u) | (((h >> (8 * i + sh)) & 3u) << 4), 32.0f);
      q[4 + i] = qf(((v >> (8 * i + 4)) & 15u) | (((h >> (8 * i + sh + 4)) & 3u) << 4), 32.0f);
    }
    s[0] = d * (float)(signed char)b[192 + 8 * g + (t >> 2)]; s[1] = d * (float)(signed char)b[196 + 8 * g + (t >> 2)];",
        _ => return None,
    };
    let mut s = helpers.to_string();
    if matches!(d, DType::Q4K | DType::Q5K) {
        s.push_str(smk4);
    }
    let _ = write!(
        s,
        "  auto q_unit = [&](const unsigned char* b, int u, float* q, float* s, float* m) {{\n    {body}\n    (void)m;\n  }};\n"
    );
    Some(s)
}

/// A C statement loading x elements `at`..`at + 4` (f32: one float4 —
/// the caller guarantees 16-byte alignment) into `float4 name`.
fn load4(xd: DType, name: &str, at: &str) -> String {
    if xd == DType::F32 {
        format!("float4 {name} = *(const float4*)(x + {at});")
    } else {
        let e = |k: usize| load(xd, &format!("x[{at} + {k}]"));
        format!(
            "float4 {name}; {name}.x = {}; {name}.y = {}; {name}.z = {}; {name}.w = {};",
            e(0),
            e(1),
            e(2),
            e(3)
        )
    }
}

/// The shared kernel head: name, parameters (x, the weight bytes, out).
fn signature(xd: DType) -> Option<String> {
    let s = storage(xd)?;
    Some(format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ x, const unsigned char* __restrict__ w, {s}* __restrict__ out) {{\n"
    ))
}

/// The gemv kernel for M ≤ [`GEMV_ROWS`] rows of x (M, K) contiguous and
/// w (N, K) of dtype `wd`; grid `(N / (GEMV_WARPS · GEMV_COLS), 1, 1)`,
/// blocks of `32 · GEMV_WARPS` threads. `None` for a dtype it does not
/// decode.
pub fn gemv(wd: DType, xd: DType, m: usize, n: usize, k: usize) -> Option<String> {
    let (bl, bb) = block(wd);
    let upb = units_per_block(wd);
    let units = k / 8;
    let row_bytes = k / bl * bb;
    let (p0, p1) = runs(wd);
    let mut s = signature(xd)?;
    s.push_str(&decoder(wd)?);
    let rows = m.max(1);
    let nc = GEMV_COLS;
    let _ = write!(
        s,
        "  const int lane = threadIdx.x & 31;
  const long long n0 = ((long long)blockIdx.x * {GEMV_WARPS} + (threadIdx.x >> 5)) * {nc};
  if (n0 >= {n}LL) return;
  float acc[{nc}][{rows}];
  for (int c = 0; c < {nc}; ++c) for (int r = 0; r < {rows}; ++r) acc[c][r] = 0.0f;
#pragma unroll 2
  for (int i = lane; i < {units}; i += 32) {{
    const int blk = i / {upb}, u = i % {upb};
    float q[{nc}][8], s[{nc}][2], m[{nc}][2];
#pragma unroll
    for (int c = 0; c < {nc}; ++c) {{
      // Columns past N (the warp's last, for N odd) decode nothing.
      if (n0 + c < {n}LL) q_unit(w + (n0 + c) * {row_bytes}LL + blk * {bb}, u, q[c], s[c], m[c]);
      else {{ for (int j = 0; j < 8; ++j) q[c][j] = 0.0f; s[c][0] = s[c][1] = m[c][0] = m[c][1] = 0.0f; }}
    }}
    const long long e0 = (long long)blk * {bl} + ({p0}), e1 = (long long)blk * {bl} + ({p1});
#pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      {la} {lb}
#pragma unroll
      for (int c = 0; c < {nc}; ++c) {{
        float d0 = q[c][0] * a.x + q[c][1] * a.y + q[c][2] * a.z + q[c][3] * a.w;
        float d1 = q[c][4] * b.x + q[c][5] * b.y + q[c][6] * b.z + q[c][7] * b.w;
        acc[c][r] += s[c][0] * d0 + s[c][1] * d1{mins};
      }}
    }}
  }}
#pragma unroll
  for (int c = 0; c < {nc}; ++c) {{
#pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      float v = warp_sum(acc[c][r]);
      if (lane == 0 && n0 + c < {n}LL) out[r * {n}LL + n0 + c] = {st};
    }}
  }}
}}
",
        la = load4(xd, "a", &format!("r * {k}LL + e0")),
        lb = load4(xd, "b", &format!("r * {k}LL + e1")),
        mins = if has_min(wd) {
            " + m[c][0] * (a.x + a.y + a.z + a.w) + m[c][1] * (b.x + b.y + b.z + b.w)"
        } else {
            ""
        },
        st = store(xd, "v"),
    );
    Some(s)
}

/// Weights of at most this many bytes once decoded to f32 take the
/// decode-then-GEMM path for more than [`GEMV_ROWS`] rows of f32 x; larger
/// ones the tiled kernel (no scratch the size of the decoded matrix).
pub const DECODE_GEMM_MAX_BYTES: usize = 1 << 30;

/// The decode kernel: w (N, K) of dtype `wd` into f32 `out` (N, K)
/// contiguous, one thread per unit of 8 weights; grid `(N·K/8 / 256, 1, 1)`,
/// 256 threads. For prompts of f32 x the planner decodes the weight once
/// and hands the product to cuBLAS: the tiled kernel decodes every block
/// once per 64 columns of output and runs on the FMA units, cuBLAS reaches
/// several times its rate. `None` for a dtype it does not decode.
pub fn decode(wd: DType, n: usize, k: usize) -> Option<String> {
    let (bl, bb) = block(wd);
    let upb = units_per_block(wd);
    let row_bytes = k / bl * bb;
    let (p0, p1) = runs(wd);
    let mut s = "extern \"C\" __global__ void @NAME@(const unsigned char* __restrict__ w, float* __restrict__ out) {\n"
        .to_string();
    s.push_str(&decoder(wd)?);
    let _ = write!(
        s,
        "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= {total}LL) return;
  const long long row = i / {upr}, r = i % {upr}, blk = r / {upb};
  const int u = (int)(r % {upb});
  float q[8], s[2], m[2] = {{0.0f, 0.0f}};
  q_unit(w + row * {row_bytes}LL + blk * {bb}, u, q, s, m);
  float* o = out + row * {k}LL + blk * {bl};
  const int e0 = {p0}, e1 = {p1};
  for (int j = 0; j < 4; ++j) {{ o[e0 + j] = s[0] * q[j] + m[0]; o[e1 + j] = s[1] * q[4 + j] + m[1]; }}
}}
",
        total = n * k / 8,
        upr = k / 8,
    );
    Some(s)
}

/// The tiled kernel for x (M, K) contiguous and w (N, K) of dtype `wd`;
/// grid `(N / 64, M / 64, 1)`, [`TILED_THREADS`] threads, [`tiled_smem`]
/// bytes of dynamic shared memory. `None` for a dtype it does not decode.
pub fn tiled(wd: DType, xd: DType, m: usize, n: usize, k: usize) -> Option<String> {
    let (bl, bb) = block(wd);
    let upb = units_per_block(wd);
    let kc = chunk(wd);
    let row_bytes = k / bl * bb;
    let (p0, p1) = runs(wd);
    let mut s = signature(xd)?;
    s.push_str(&decoder(wd)?);
    let zero = if xd == DType::F32 {
        "float4 v = {0.0f, 0.0f, 0.0f, 0.0f}; if (gm < M) v = *(const float4*)(x + gm * K + k0 + 4 * k4);".to_string()
    } else {
        format!(
            "float4 v = {{0.0f, 0.0f, 0.0f, 0.0f}}; if (gm < M) {{ {} }}",
            load4(xd, "t", "gm * K + k0 + 4 * k4") + " v = t;"
        )
    };
    let _ = write!(
        s,
        "  const long long M = {m}, N = {n}, K = {k};
  extern __shared__ float smem[];
  float* xs = smem;              // [{kc}][{TILE}]: x tile, k-major
  float* ws = smem + {kc} * {TILE};  // [{kc}][{TILE}]: decoded w tile, k-major
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const long long m0 = (long long)blockIdx.y * {TILE}, n0 = (long long)blockIdx.x * {TILE};
  float c[4][4], p[4][4];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) {{ c[i][j] = 0.0f; p[i][j] = 0.0f; }}
  for (long long k0 = 0; k0 < K; k0 += {kc}) {{
    // x tile: consecutive threads take consecutive rows (conflict-free stores).
    for (int e = tid; e < {xq}; e += {TILED_THREADS}) {{
      const int mm = e % {TILE}, k4 = e / {TILE}; const long long gm = m0 + mm;
      {zero}
      xs[(4 * k4) * {TILE} + mm] = v.x; xs[(4 * k4 + 1) * {TILE} + mm] = v.y;
      xs[(4 * k4 + 2) * {TILE} + mm] = v.z; xs[(4 * k4 + 3) * {TILE} + mm] = v.w;
    }}
    // w tile: unit t of the chunk of row n0 + nn, decoded (zeros past N).
    for (int e = tid; e < {wu}; e += {TILED_THREADS}) {{
      const int nn = e % {TILE}, t = e / {TILE}; const long long gn = n0 + nn;
      const long long i = k0 / 8 + t; const long long blk = i / {upb}; const int u = (int)(i % {upb});
      float q[8] = {{0, 0, 0, 0, 0, 0, 0, 0}}, s[2] = {{0, 0}}, m[2] = {{0, 0}};
      if (gn < N) q_unit(w + gn * {row_bytes}LL + blk * {bb}, u, q, s, m);
      const int b0 = (int)(blk * {bl} - k0);
      const int e0 = b0 + ({p0}), e1 = b0 + ({p1});
      for (int j = 0; j < 4; ++j) {{
        ws[(e0 + j) * {TILE} + nn] = s[0] * q[j] + m[0];
        ws[(e1 + j) * {TILE} + nn] = s[1] * q[4 + j] + m[1];
      }}
    }}
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < {kc}; ++kk) {{
      const float4 a = *(const float4*)(xs + kk * {TILE} + ty * 4);
      const float4 b = *(const float4*)(ws + kk * {TILE} + tx * 4);
      const float av[4] = {{a.x, a.y, a.z, a.w}}, bv[4] = {{b.x, b.y, b.z, b.w}};
      for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) p[i][j] += av[i] * bv[j];
    }}
    for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) {{ c[i][j] += p[i][j]; p[i][j] = 0.0f; }}
    __syncthreads();
  }}
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) {{
    const long long gm = m0 + ty * 4 + i, gn = n0 + tx * 4 + j;
    if (gm < M && gn < N) out[gm * N + gn] = {st};
  }}
}}
",
        xq = TILE * kc / 4,
        wu = TILE * kc / 8,
        st = store(xd, "c[i][j]"),
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unit's two runs tile its block exactly once, and the units of
    /// one chunk cover that chunk (what the tiled kernel relies on).
    #[test]
    fn units_tile_blocks_and_chunks() {
        let eval = |e: &str, u: usize| -> usize {
            // The run expressions use only u, *, +, >>, & and literals.
            let (g8, t8, g16, t16) = (u >> 3, u & 7, u >> 4, u & 15);
            match e {
                "8 * u" => 8 * u,
                "8 * u + 4" => 8 * u + 4,
                "4 * u" => 4 * u,
                "4 * u + 16" => 4 * u + 16,
                "64 * (u >> 3) + 4 * (u & 7)" => 64 * g8 + 4 * t8,
                "64 * (u >> 3) + 4 * (u & 7) + 32" => 64 * g8 + 4 * t8 + 32,
                "128 * (u >> 4) + 4 * (u & 15)" => 128 * g16 + 4 * t16,
                "128 * (u >> 4) + 4 * (u & 15) + 64" => 128 * g16 + 4 * t16 + 64,
                other => panic!("unknown run {other}"),
            }
        };
        for d in DTYPES {
            let (bl, _) = block(d);
            let (p0, p1) = runs(d);
            let per_chunk = chunk(d) / 8;
            let mut seen = vec![0u8; bl];
            for u in 0..units_per_block(d) {
                let c = u / per_chunk;
                for p in [eval(p0, u), eval(p1, u)] {
                    for (e, n) in seen.iter_mut().enumerate().skip(p).take(4) {
                        *n += 1;
                        assert_eq!(e / chunk(d), c, "{d}: unit {u} leaves its chunk");
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{d}: {seen:?}");
        }
    }
}
