//! Attention of a few query rows over many keys (a decoder's step: one
//! new token over the cache), split over the keys. The other kernels give
//! each head's rows to one block, so a decode step of 9 heads ran on 9 of
//! the GPU's 132 SMs, one warp each walking every key (an H200: 52 µs a
//! call for SmolLM2 at 257 keys, 200 µs for Gemma-3's heads of 256 over
//! 513 keys; 60–80% of the step). Here each block takes one chunk of one
//! row's keys — scores by a warp per key, its own max, exp-sum and
//! partial P·V — and a second kernel weighs the chunks' partials by
//! exp(chunk max − row max) into the row's result (the log-sum-exp
//! merge, exact up to f32 rounding order).

use super::attention_spec::{mask_source, AttentionSpec};
use super::st;
use crate::ctype::{load, store};

/// Threads of a block of either kernel.
pub const SPLIT_THREADS: u32 = 128;

/// SMs of an H100/H200: fewer (head, row) pairs than this leave the GPU
/// idle one block each, so the keys are split.
pub const SPLIT_BELOW_ROWS: usize = 132;

/// Keys per chunk and chunks per row for `rows` query rows (all heads)
/// over `sk` keys: enough blocks for about two per SM, chunks of at least
/// 32 keys.
pub fn attention_split_shape(rows: usize, sk: usize) -> (usize, usize) {
    let want = (2 * SPLIT_BELOW_ROWS).div_ceil(rows.max(1));
    let splits = want.clamp(1, sk.div_ceil(32).max(1));
    let chunk = sk.div_ceil(splits);
    (chunk, sk.div_ceil(chunk))
}

/// Shared memory of [`attention_split`]: the scaled query row, the
/// chunk's probabilities and one float per warp.
pub fn attention_split_smem(a: &AttentionSpec, chunk: usize) -> usize {
    (a.dh + chunk + 32) * 4
}

/// Partials of chunk `blockIdx.x` of row `blockIdx.y` of head
/// `blockIdx.z`: (max, exp-sum, Σ p·v over dv) at `part`, rows of
/// dv + 2 floats laid out (head, row, chunk).
pub fn attention_split(a: &AttentionSpec, chunk: usize, splits: usize) -> String {
    let AttentionSpec {
        dtype: d,
        sq,
        sk,
        dh,
        dv,
        ..
    } = *a;
    let t = a.strides();
    let ((qr, qc), (kr, kc), (vr, vc)) = (t.q, t.k, t.v);
    let (mask_param, mask_code) = mask_source(a.mask, a.batch, 3, "row", "s");
    let warps = SPLIT_THREADS / 32;
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, float* __restrict__ out0) {{
  extern __shared__ float smem[];
  float* qv = smem; float* p = qv + {dh}; float* red = p + {chunk};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long b = blockIdx.z; long long row = blockIdx.y; int c = blockIdx.x;
  {unr}
  const {s}* q = in0 + {qb} + row * {qr}LL; const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb};
  for (int t = threadIdx.x; t < {dh}; t += blockDim.x) qv[t] = {lq} * {scale};
  __syncthreads();
  int j0 = c * {chunk}; int n = min({chunk}, {sk} - j0);
  float mx = -__int_as_float(0x7f800000);
  for (int jj = warp; jj < n; jj += {warps}) {{
    long long j = j0 + jj; const {s}* kj = k + j * {kr}LL; float s = 0.f;
    for (int t = lane; t < {dh}; t += 32) s += qv[t] * {lk};
    s = warp_sum(s);
    {mask_code}
    if (lane == 0) p[jj] = s;
    mx = fmaxf(mx, s);
  }}
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
  for (int w = 1; w < {warps}; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  // A chunk whose keys are all masked adds nothing (its max stays -inf).
  bool none = mx == -__int_as_float(0x7f800000);
  float sum = 0.f;
  for (int jj = threadIdx.x; jj < n; jj += blockDim.x) {{ float e = none ? 0.f : expf(p[jj] - mx); p[jj] = e; sum += e; }}
  sum = warp_sum(sum);
  if (lane == 0) red[warp] = sum;
  __syncthreads();
  float l = 0.f;
  for (int w = 0; w < {warps}; ++w) l += red[w];
  float* o = out0 + ((b * {sq}LL + row) * {splits} + c) * {dv2}LL;
  for (int t = threadIdx.x; t < {dv}; t += blockDim.x) {{
    float acc = 0.f;
    for (int jj = 0; jj < n; ++jj) acc += p[jj] * {lv};
    o[2 + t] = acc;
  }}
  if (threadIdx.x == 0) {{ o[0] = mx; o[1] = l; }}
}}
",
        s = st(d),
        unr = t.unravel,
        qb = t.qb,
        kb = t.kb,
        vb = t.vb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        lk = load(d, &format!("kj[t * {kc}LL]")),
        lv = load(d, &format!("v[(j0 + jj) * {vr}LL + t * {vc}LL]")),
        scale = t.scale,
        dv2 = dv + 2,
    )
}

/// Row `blockIdx.x` of head `blockIdx.y`: its chunks' partials (from
/// [`attention_split`]) merged into the output.
pub fn attention_split_combine(a: &AttentionSpec, splits: usize) -> String {
    let AttentionSpec {
        dtype: d, sq, dv, ..
    } = *a;
    let t = a.strides();
    let (osr, ost) = t.o;
    format!(
        "extern \"C\" __global__ void @NAME@(const float* __restrict__ in0, {s}* __restrict__ out0) {{
  long long b = blockIdx.y; long long row = blockIdx.x;
  {unr}
  const float* part = in0 + (b * {sq}LL + row) * {splits}LL * {dv2}LL;
  const float ninf = -__int_as_float(0x7f800000);
  float m = ninf;
  for (int c = 0; c < {splits}; ++c) m = fmaxf(m, part[c * {dv2}]);
  float l = 0.f;
  for (int c = 0; c < {splits}; ++c) {{ float mc = part[c * {dv2}]; if (mc != ninf) l += part[c * {dv2} + 1] * expf(mc - m); }}
  float inv = 1.f / l;
  {s}* o = out0 + {ob} + row * {osr}LL;
  for (int t = threadIdx.x; t < {dv}; t += blockDim.x) {{
    float acc = 0.f;
    for (int c = 0; c < {splits}; ++c) {{ float mc = part[c * {dv2}]; if (mc != ninf) acc += part[c * {dv2} + 2 + t] * expf(mc - m); }}
    o[t * {ost}LL] = {so};
  }}
}}
",
        s = st(d),
        unr = t.unravel,
        ob = t.ob,
        dv2 = dv + 2,
        so = store(d, "acc * inv"),
    )
}
