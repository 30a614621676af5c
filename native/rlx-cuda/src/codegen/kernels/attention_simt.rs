//! Attention on CUDA cores (any dtype): one warp per query row, K/V staged
//! in shared memory per block of rows, register-tiled rows; and the
//! softmax of precomputed scores.

use super::attention_spec::{mask_source, AttentionSpec, AttentionStrides, Mask};
use super::{st, unravel};
use crate::ctype::{lit, load, store};
use rlx_ir::DType;

/// Fused attention: softmax(q·kᵀ·scale + mask)·v, one warp per query row.
pub fn attention(a: &AttentionSpec, warps: u32) -> String {
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
    let nb = a.heads();
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long b = blockIdx.y; long long row = (long long)blockIdx.x * {warps} + warp;
  if (b >= {nb}LL || row >= {sq}LL) return;
  {unr}
  const {s}* q = in0 + {qb} + row * {qr}LL; const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb};
  float* qv = smem + warp * ({dh} + {sk});
  float* p = qv + {dh};
  for (int t = lane; t < {dh}; t += 32) qv[t] = {lq} * {scale};
  __syncwarp();
  float mx = -__int_as_float(0x7f800000);
  for (int j = lane; j < {sk}; j += 32) {{
    const {s}* kj = k + j * {kr}LL; float s = 0.f;
    for (int t = 0; t < {dh}; ++t) s += qv[t] * {lk};
    {mask_code}
    p[j] = s; mx = fmaxf(mx, s);
  }}
  mx = warp_max(mx);
  float sum = 0.f;
  for (int j = lane; j < {sk}; j += 32) {{ float e = expf(p[j] - mx); p[j] = e; sum += e; }}
  sum = warp_sum(sum);
  float inv = 1.f / sum;
  __syncwarp();
  {s}* o = out0 + {ob} + row * {osr}LL;
  for (int t = lane; t < {dv}; t += 32) {{
    float acc = 0.f;
    for (int j = 0; j < {sk}; ++j) acc += p[j] * {lv};
    o[t * {ost}LL] = {so};
  }}
}}
",
        s = st(d),
        unr = t.unravel,
        qb = t.qb,
        kb = t.kb,
        vb = t.vb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        lk = load(d, &format!("kj[t * {kc}LL]")),
        lv = load(d, &format!("v[j * {vr}LL + t * {vc}LL]")),
        so = store(d, "acc * inv"),
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
        scale = t.scale,
    )
}

/// The start of the attention kernels that stage a head in shared memory:
/// the head `b` (blocks past the last head return), `k` / `v` pointing at
/// its K and V, both staged into `ks` (rows `kp` floats apart) and `vs`,
/// and a block barrier. Eight loads per thread are issued before their
/// stores: one at a time, each load's global-memory latency was paid in
/// series (the staging of 32 elements per thread dominated the kernels at
/// MiniLM's 128 keys).
///
/// `pre` runs between the head's pointers and the staging: a kernel's own
/// global loads issued there overlap the staging's latency instead of
/// following the barrier.
fn staged_head(a: &AttentionSpec, t: &AttentionStrides, kp: usize, pre: &str) -> String {
    let (d, sk, dh, dv) = (a.dtype, a.sk, a.dh, a.dv);
    let ((kr, kc), (vr, vc)) = (t.k, t.v);
    let one = |n: usize, cols: usize, dst: &str, ld: usize, src: &str| {
        format!(
            "  for (int e0 = threadIdx.x; e0 < {n}; e0 += 8 * blockDim.x) {{
    float x[8];
    #pragma unroll
    for (int u = 0; u < 8; ++u) {{ int e = e0 + u * blockDim.x, j = e / {cols}, t = e % {cols}; x[u] = e < {n} ? (float)({src}) : 0.f; }}
    #pragma unroll
    for (int u = 0; u < 8; ++u) {{ int e = e0 + u * blockDim.x; if (e < {n}) {dst}[(e / {cols}) * {ld} + e % {cols}] = x[u]; }}
  }}
"
        )
    };
    // f32 rows of whole float4s: a float4 per load and store, a quarter
    // of the scalar copy's loads, stores and index arithmetic (the f32
    // attention was issue-bound: ncu, benches/cuda/minilm-cuda-analysis.md),
    // four loads in flight per thread.
    let four = |rows: usize, cols: usize, dst: &str, ld: usize, src: &str, rs: i64| {
        let n = rows * cols / 4;
        let c4 = cols / 4;
        format!(
            "  for (int e0 = threadIdx.x; e0 < {n}; e0 += 4 * blockDim.x) {{
    float4 x[4];
    #pragma unroll
    for (int u = 0; u < 4; ++u) {{ int e = e0 + u * blockDim.x; if (e < {n}) x[u] = *(const float4*)({src} + (e / {c4}) * {rs}LL + (e % {c4}) * 4); }}
    #pragma unroll
    for (int u = 0; u < 4; ++u) {{ int e = e0 + u * blockDim.x; if (e < {n}) *(float4*)({dst} + (e / {c4}) * {ld} + (e % {c4}) * 4) = x[u]; }}
  }}
"
        )
    };
    // The kernel's dtype too: `vec_kv` speaks of K and V's buffers, the
    // staging reads them as the kernel's type; padded K rows must stay
    // float4-aligned.
    let vec = a.vec_kv && d == DType::F32 && kp.is_multiple_of(4);
    let (stk, stv) = if vec {
        (
            four(sk, dh, "ks", kp, "k", kr),
            four(sk, dv, "vs", dv, "v", vr),
        )
    } else {
        (
            one(
                sk * dh,
                dh,
                "ks",
                kp,
                &load(d, &format!("k[j * {kr}LL + t * {kc}LL]")),
            ),
            one(
                sk * dv,
                dv,
                "vs",
                dv,
                &load(d, &format!("v[j * {vr}LL + t * {vc}LL]")),
            ),
        )
    };
    format!(
        "  long long b = blockIdx.y;
  if (b >= {nb}LL) return;
  {unr}
  const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb};
{pre}{stk}{stv}  __syncthreads();
",
        nb = a.heads(),
        unr = t.unravel,
        s = st(d),
        kb = t.kb,
        vb = t.vb,
    )
}

/// Attention with the head's K and V staged in shared memory once per block
/// of `rows` query rows (`warps` warps, each owning rows/warps of them): K and
/// V are read from global memory once per block instead of once per row.
/// K rows are padded by one float so lanes reading different keys hit
/// different banks.
pub fn attention_tiled(a: &AttentionSpec, warps: u32, rows: u32) -> String {
    let AttentionSpec {
        dtype: d,
        sq,
        sk,
        dh,
        dv,
        ..
    } = *a;
    let t = a.strides();
    let (qr, qc) = t.q;
    let kp = dh + 1;
    let (mask_param, mask_code) = mask_source(a.mask, a.batch, 3, "row", "s");
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  float* ks = smem; float* vs = ks + {sk} * {kp}; float* wq = vs + {sk} * {dv};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
{head}  float* qv = wq + warp * ({dh} + {sk});
  float* p = qv + {dh};
  for (int rr = warp; rr < {rows}; rr += {warps}) {{
    long long row = (long long)blockIdx.x * {rows} + rr;
    if (row >= {sq}LL) break;
    const {s}* q = in0 + {qb} + row * {qr}LL;
    for (int t = lane; t < {dh}; t += 32) qv[t] = {lq} * {scale};
    __syncwarp();
    // Each lane's keys j = lane + 32c side by side: {nj} independent
    // dot products per q element loaded (the key order within each sum
    // is unchanged). Past the last key a lane reads key sk - 1 and
    // drops the result.
    float sc[{nj}]; const float* kc[{nj}];
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{ sc[c] = 0.f; kc[c] = ks + min(lane + 32 * c, {sk} - 1) * {kp}; }}
    #pragma unroll 8
    for (int t = 0; t < {dh}; ++t) {{
      float qt = qv[t];
      #pragma unroll
      for (int c = 0; c < {nj}; ++c) sc[c] += qt * kc[c][t];
    }}
    float mx = -__int_as_float(0x7f800000);
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{
      int j = lane + 32 * c;
      if (j < {sk}) {{ float s = sc[c]; {mask_code} p[j] = s; mx = fmaxf(mx, s); }}
    }}
    mx = warp_max(mx);
    float sum = 0.f;
    for (int j = lane; j < {sk}; j += 32) {{ float e = expf(p[j] - mx); p[j] = e; sum += e; }}
    sum = warp_sum(sum);
    float inv = 1.f / sum;
    __syncwarp();
    {s}* o = out0 + {ob} + row * {osr}LL;
    // Four partial sums over the keys (j mod 4) break the dependency
    // chain of one long sum.
    for (int t = lane; t < {dv}; t += 32) {{
      float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
      int j = 0;
      #pragma unroll 2
      for (; j + 4 <= {sk}; j += 4) {{
        const float* vj = vs + j * {dv} + t;
        a0 += p[j] * vj[0]; a1 += p[j + 1] * vj[{dv}]; a2 += p[j + 2] * vj[2 * {dv}]; a3 += p[j + 3] * vj[3 * {dv}];
      }}
      for (; j < {sk}; ++j) a0 += p[j] * vs[j * {dv} + t];
      float acc = (a0 + a1) + (a2 + a3);
      o[t * {ost}LL] = {so};
    }}
    __syncwarp();
  }}
}}
",
        s = st(d),
        qb = t.qb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        head = staged_head(a, &t, kp, ""),
        so = store(d, "acc * inv"),
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
        scale = t.scale,
        nj = sk.div_ceil(32).max(1),
    )
}

/// Query rows per warp in [`attention_rows`].
pub const ATTN_ROWS_PER_WARP: u32 = 4;

/// Shared memory of [`attention_rows`] in bytes: K (rows padded by four
/// floats), V, and per warp its rows' scaled queries and probabilities.
pub fn attention_rows_smem(a: &AttentionSpec, warps: u32) -> usize {
    let r = ATTN_ROWS_PER_WARP as usize;
    (a.sk * (a.dh + 4) + a.sk * a.dv + warps as usize * r * (a.dh + a.sk)) * 4
}

/// Attention without tensor cores, register-tiled: the head's K and V
/// staged in shared memory once per block; each warp owns 4 query rows and
/// each lane keys `lane + 32c`, so one K element read from shared memory
/// feeds 4 rows' scores (the tiled kernel's one row per warp read it per
/// row). Softmax per row by warp shuffles; then each lane one output dim
/// of the 4 rows, each V element read once for them. Arithmetic per output
/// is the tiled kernel's: scores summed over the head dim in order, four
/// partial sums over the keys (j mod 4) in the product with V.
pub fn attention_rows(a: &AttentionSpec, warps: u32) -> String {
    let AttentionSpec {
        dtype: d,
        sq,
        sk,
        dh,
        dv,
        ..
    } = *a;
    let t = a.strides();
    let (qr, qc) = t.q;
    let kp = dh + 4;
    let rows = ATTN_ROWS_PER_WARP;
    let (mask_param, mask_code) = mask_source(a.mask, a.batch, 3, "row", "s");
    let nj = sk.div_ceil(32).max(1);
    // A mask the same for every query row (MiniLM's padding mask): read
    // once per key before the scores, not per row and score (one load and
    // its index arithmetic per score in an issue-bound kernel). Keep
    // masks become 0 / -inf, applied by selection.
    let per_key = match a.mask {
        Mask::Keep { strides, .. } | Mask::Bias { strides, .. } => strides[a.batch.len()] == 0,
        Mask::None => false,
    };
    let (mask_pre, mask_code) = if per_key {
        let once = mask_source(a.mask, a.batch, 3, "0", "s").1;
        let apply = if matches!(a.mask, Mask::Keep { .. }) {
            "if (mk[c] != 0.f) s = mk[c];"
        } else {
            "s += mk[c];"
        };
        (
            format!(
                "  float mk[{nj}];\n  #pragma unroll\n  for (int c = 0; c < {nj}; ++c) {{ int j = min(lane + 32 * c, {sk} - 1); float s = 0.f; {once} mk[c] = s; }}\n"
            ),
            apply.to_string(),
        )
    } else {
        (
            String::new(),
            format!("if (row < {sq}LL) {{ {mask_code} }}"),
        )
    };
    // The warp's scaled query rows and the mask, loaded into registers
    // before the head is staged (their global latency overlaps the
    // staging's instead of following the barrier).
    let qn = (rows as usize * dh).div_ceil(32);
    let pre = format!(
        "{mask_pre}  float qx[{qn}];
  #pragma unroll
  for (int u = 0; u < {qn}; ++u) {{
    int e = lane + 32 * u; float x = 0.f;
    if (e < {rows} * {dh}) {{ int r = e / {dh}, t = e % {dh}; long long row = row0 + r; const {s}* q = in0 + {qb} + row * {qr}LL; if (row < {sq}LL) x = {lq} * {scale}; }}
    qx[u] = x;
  }}
",
        s = st(d),
        qb = t.qb,
        lq = load(d, &format!("q[t * {qc}LL]")),
        scale = t.scale,
    );
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  float* ks = smem; float* vs = ks + {sk} * {kp};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* qw = vs + {sk} * {dv} + warp * {rows} * ({dh} + {sk});
  float* pw = qw + {rows} * {dh};
  const long long row0 = ((long long)blockIdx.x * {warps} + warp) * {rows};
{head}  if (row0 >= {sq}LL) return;
  #pragma unroll
  for (int u = 0; u < {qn}; ++u) {{ int e = lane + 32 * u; if (e < {rows} * {dh}) qw[e] = qx[u]; }}
  __syncwarp();
  // Scores: lane's keys j = lane + 32c (past the last key a lane reads key
  // sk - 1 and drops the result), 4 rows at once.
  float sc[{rows}][{nj}]; const float* kc[{nj}];
  #pragma unroll
  for (int c = 0; c < {nj}; ++c) {{
    kc[c] = ks + min(lane + 32 * c, {sk} - 1) * {kp};
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) sc[r][c] = 0.f;
  }}
  // float4 reads over the head dim: K rows are dh + 4 floats apart, so
  // the 8 lanes of a phase read 8 distinct bank groups.
  for (int t = 0; t < {dh}; t += 4) {{
    float4 kt[{nj}];
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) kt[c] = *(const float4*)(kc[c] + t);
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      float4 qt = *(const float4*)(qw + r * {dh} + t);
      #pragma unroll
      for (int c = 0; c < {nj}; ++c) {{
        float x = sc[r][c];
        x += qt.x * kt[c].x; x += qt.y * kt[c].y; x += qt.z * kt[c].z; x += qt.w * kt[c].w;
        sc[r][c] = x;
      }}
    }}
  }}
  float inv[{rows}];
  #pragma unroll
  for (int r = 0; r < {rows}; ++r) {{
    long long row = row0 + r;
    float* p = pw + r * {sk};
    float mx = -__int_as_float(0x7f800000);
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{
      int j = lane + 32 * c;
      if (j < {sk}) {{ float s = sc[r][c]; {mask_code} sc[r][c] = s; mx = fmaxf(mx, s); }}
    }}
    mx = warp_max(mx);
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < {nj}; ++c) {{
      int j = lane + 32 * c;
      if (j < {sk}) {{ float e = expf(sc[r][c] - mx); p[j] = e; sum += e; }}
    }}
    sum = warp_sum(sum);
    inv[r] = 1.f / sum;
  }}
  __syncwarp();
  for (int t = lane; t < {dv}; t += 32) {{
    float a[{rows}][4];
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) {{ a[r][0] = 0.f; a[r][1] = 0.f; a[r][2] = 0.f; a[r][3] = 0.f; }}
    int j = 0;
    for (; j + 4 <= {sk}; j += 4) {{
      const float* vj = vs + j * {dv} + t;
      float v0 = vj[0], v1 = vj[{dv}], v2 = vj[2 * {dv}], v3 = vj[3 * {dv}];
      #pragma unroll
      for (int r = 0; r < {rows}; ++r) {{
        const float4 p = *(const float4*)(pw + r * {sk} + j);
        a[r][0] += p.x * v0; a[r][1] += p.y * v1; a[r][2] += p.z * v2; a[r][3] += p.w * v3;
      }}
    }}
    for (; j < {sk}; ++j) {{
      #pragma unroll
      for (int r = 0; r < {rows}; ++r) a[r][0] += pw[r * {sk} + j] * vs[j * {dv} + t];
    }}
    #pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      long long row = row0 + r;
      if (row >= {sq}LL) break;
      float acc = (a[r][0] + a[r][1]) + (a[r][2] + a[r][3]);
      float inv_r = inv[r];
      {s}* o = out0 + {ob} + row * {osr}LL;
      o[t * {ost}LL] = {so};
    }}
  }}
}}
",
        s = st(d),
        head = staged_head(a, &t, kp, &pre),
        so = store(d, "acc * inv_r"),
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
    )
}

/// Softmax of f32 attention scores (nb, sq, sk) contiguous, times `scale`,
/// with the mask, written as dtype `d` probabilities. One warp per row.
pub fn attention_softmax(
    d: DType,
    batch: &[usize],
    sq: usize,
    sk: usize,
    mask: &Mask,
    scale: f64,
) -> String {
    let nb: usize = batch.iter().product();
    let rows = nb * sq;
    let (mask_param, mask_code) = mask_source(mask, batch, 1, "i", "x");
    format!(
        "extern \"C\" __global__ void @NAME@(const float* __restrict__ in0{mask_param}, {s}* __restrict__ out0) {{
  long long row = blockIdx.x * 8LL + (threadIdx.x >> 5); int lane = threadIdx.x & 31;
  if (row >= {rows}LL) return;
  long long b = row / {sq}LL, i = row % {sq}LL;
  {unr}
  const float* x0 = in0 + row * {sk}LL; {s}* o = out0 + row * {sk}LL;
  float mx = -__int_as_float(0x7f800000);
  for (int j = lane; j < {sk}; j += 32) {{ float x = x0[j] * {scale}; {mask_code} mx = fmaxf(mx, x); }}
  mx = warp_max(mx);
  float sum = 0.f;
  for (int j = lane; j < {sk}; j += 32) {{ float x = x0[j] * {scale}; {mask_code} sum += expf(x - mx); }}
  float inv = 1.f / warp_sum(sum);
  for (int j = lane; j < {sk}; j += 32) {{ float x = x0[j] * {scale}; {mask_code} o[j] = {so}; }}
}}
",
        s = st(d),
        unr = unravel(batch, "b"),
        so = store(d, "expf(x - mx) * inv"),
        scale = lit(DType::F32, scale as f32 as f64),
    )
}
