//! Attention on tensor cores (`mma.sync`, f16/bf16, sm_80+), with its two
//! ways of staging K and V.

use super::attention_spec::{mask_source, AttentionSpec, Mask};
use super::{offset, st};
use crate::ctype::{lit, load};
use rlx_ir::DType;

/// How the tensor-core attention covers a head (see [`attention_mma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaBlocks {
    /// Warps per block, 16 query rows each (any count up to 8; the
    /// planner picks 2, 4 or 8).
    pub warps: u32,
}

/// Attention on tensor cores for f16/bf16 (sm_80+): each warp owns 16 query
/// rows and keeps their scores in registers from Q·Kᵀ to P·V — no score
/// ever goes to global memory. `mma.sync.m16n8k16` (fp32 accumulation)
/// computes S = Q·Kᵀ; the fp32 softmax runs on the accumulator fragments
/// (a row's values sit in the 4 lanes of one lane group), in log2 units
/// (scale·log2 e folded into one multiply, then `exp2f`); the
/// probabilities, rounded to the storage type, are already laid out as the
/// A operand of P·V. Each block (`blocks.warps` warps, 16·warps rows of one
/// head) stages all of the head's K and V in shared memory as 16-bit
/// values, rows padded by 8 elements so the fragment loads of the 8 lane
/// groups fall in different banks. Needs dh % 16 == 0, dv % 8 == 0,
/// sk % 16 == 0 and sk ≤ 128 (a warp holds 16 × sk scores); out-of-range
/// query rows compute on zeros and are not stored.
pub fn attention_mma(a: &AttentionSpec, blocks: MmaBlocks) -> String {
    let AttentionSpec {
        dtype: d,
        batch,
        sq,
        sk,
        dh,
        dv,
        mask,
        ..
    } = *a;
    // K and V are staged row-major with `cp.async` (every 16-byte copy of
    // a thread in flight at once, thread count baked in), and a
    // row-broadcast mask with all its loads before its stores: one memory
    // round trip instead of one per loop iteration. (The first version's
    // block-strided loops and transposed V lost the A/B and are gone:
    // benches/results/minilm-cuda-split-ab.log.)
    let MmaBlocks { warps } = blocks;
    let nt = (warps * 32) as usize;
    let r = batch.len();
    let t = a.strides();
    let (qr, qc) = t.q;
    // K row-major [sk][dh + 8] (its MMA B operand: 32-bit shared-memory
    // loads of two adjacent elements); V see `v_frag` below.
    let kp = dh + 8;
    // Scores are kept in log2 units: s·scale·log2(e) + bias·log2(e), so
    // e^(x − max) is one exp2 of (s − max).
    const L2E: f64 = std::f64::consts::LOG2_E;
    let l2e = lit(DType::F32, L2E as f32 as f64);
    let (mask_param, mut mask_code) = match mask {
        Mask::Bias { .. } => {
            let (param, code) = mask_source(mask, batch, 3, "row", "mb");
            (
                param,
                format!("{{ float mb = 0.f; {code} s = fmaf(mb, {l2e}, s); }}"),
            )
        }
        _ => mask_source(mask, batch, 3, "row", "s"),
    };
    // A mask broadcast over query rows (a padding mask) is staged in shared
    // memory once per block: 0/1 drop flags of a keep-mask, or the bias
    // (times log2 e). With `batched` its loads go out before any store.
    let (mut mask_loads, mut mask_stores) = (String::new(), String::new());
    if let Mask::Keep { dtype, strides } | Mask::Bias { dtype, strides } = mask {
        if strides[r] == 0 {
            let m = load(
                *dtype,
                &format!(
                    "in3[{} + j * {}LL]",
                    offset(batch, &strides[..r]),
                    strides[r + 1]
                ),
            );
            let keep = matches!(mask, Mask::Keep { .. });
            let val = if keep {
                format!("({m} != 0) ? 0.f : 1.f")
            } else {
                format!("(float)({m}) * {l2e}")
            };
            let ms = format!("float* ms = (float*)(ks + {});", mma_v_end(a));
            let n = sk.div_ceil(nt);
            mask_loads = format!(
                "float mv[{n}];\n  #pragma unroll\n  for (int i = 0; i < {n}; ++i) {{ int j = threadIdx.x + i * {nt}; mv[i] = j < {sk} ? ({val}) : 0.f; }}"
            );
            mask_stores = format!(
                "{ms}\n  #pragma unroll\n  for (int i = 0; i < {n}; ++i) {{ int j = threadIdx.x + i * {nt}; if (j < {sk}) ms[j] = mv[i]; }}"
            );
            mask_code = if keep {
                "if (ms[j] != 0.f) s = -__int_as_float(0x7f800000);".into()
            } else {
                "s += ms[j];".into()
            };
        }
    }
    let (ty, pack) = match d {
        DType::BF16 => ("bf16", "f2b"),
        _ => ("f16", "f2h"),
    };
    let rows = 16 * warps;
    let (stage_kv, vp) = (stage_async(a, nt), dv + 8);
    // The B operand of Q·Kᵀ: K[n·8 + g][c·16 + 2·t4 (+1, +8, +9)]. With
    // heads a multiple of 32 (and K row-major, 16-byte rows), one
    // `ldmatrix.x4` per 8 keys loads it for two k steps; else two 32-bit
    // shared loads per MMA.
    let mma = format!("mma_{ty}");
    let k_frag = if dh.is_multiple_of(32) {
        format!(
            "#pragma unroll
    for (int c2 = 0; c2 < {dh} / 32; ++c2) {{
      unsigned r[4]; ldsm4(r, ks + (n * 8 + (lane & 7)) * {kp} + c2 * 32 + (lane >> 3) * 8);
      {mma}(sc[n], qf[2 * c2], r[0], r[1]); {mma}(sc[n], qf[2 * c2 + 1], r[2], r[3]);
    }}"
        )
    } else {
        format!(
            "const unsigned short* kk = ks + (n * 8 + g) * {kp} + 2 * t4;
    #pragma unroll
    for (int c = 0; c < {dh} / 16; ++c)
      {mma}(sc[n], qf[c], *(const unsigned*)(kk + c * 16), *(const unsigned*)(kk + c * 16 + 8));"
        )
    };
    // The B operand of P·V: V[c·16 + 2·t4 (+1, +8, +9)][n·8 + g]. From
    // row-major V with dv a multiple of 16: one `ldmatrix.x4.trans` per
    // two 8-wide column tiles; else one 32-bit load from transposed V, or
    // two 16-bit loads from row-major V, per MMA.
    let v_frag = if dv.is_multiple_of(16) {
        format!(
            "#pragma unroll
    for (int n = 0; n < {dv} / 8; n += 2) {{
      unsigned r[4]; ldsm4t(r, vs + (c * 16 + (lane & 15)) * {vp} + n * 8 + (lane >> 4) * 8);
      {mma}(oc[n], pf[c], r[0], r[1]); {mma}(oc[n + 1], pf[c], r[2], r[3]);
    }}"
        )
    } else {
        let load = format!(
            "const unsigned short* vv = vs + (c * 16 + 2 * t4) * {vp} + n * 8 + g;
      unsigned b0 = (unsigned)vv[0] | ((unsigned)vv[{vp}] << 16), b1 = (unsigned)vv[8 * {vp}] | ((unsigned)vv[9 * {vp}] << 16);"
        );
        format!(
            "#pragma unroll
    for (int n = 0; n < {dv} / 8; ++n) {{
      {load}
      {mma}(oc[n], pf[c], b0, b1);
    }}"
        )
    };
    // Heads of up to 32 need ~88 registers per thread (ptxas, sm_90, for
    // sk = 128): 2 blocks of 8 warps per SM, so 384 heads (MiniLM at B=32)
    // take two waves on 132 SMs. Capped at 80 (768 threads per SM: 3 such
    // blocks, one wave) ptxas spills 12 bytes. Larger heads need 100+ and
    // would spill far more: no cap. Blocks of fewer warps are chosen for
    // small grids, where occupancy does not matter but the staged loads
    // held in registers do: no cap either.
    let bounds = if dh <= 32 && dv <= 32 && warps == 8 {
        format!("__launch_bounds__({}, {}) ", warps * 32, 24 / warps)
    } else {
        String::new()
    };
    let pk = format!("pack_{ty}");
    format!(
        "extern \"C\" __global__ void {bounds}@NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1, const {s}* __restrict__ in2{mask_param}, {s}* __restrict__ out0) {{
  extern __shared__ float smem[];
  unsigned short* ks = (unsigned short*)smem; unsigned short* vs = ks + {sk} * {kp};
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  long long b = blockIdx.y;
  {unr}
  const {s}* k = in1 + {kb}; const {s}* v = in2 + {vb}; const {s}* q = in0 + {qb};
  long long r0 = (long long)blockIdx.x * {rows} + warp * 16;
  long long ra = r0 + g, rb = r0 + g + 8;
  auto ldq = [&](long long row, int t) -> unsigned {{
    if (row >= {sq}LL) return 0u;
    const {s}* p = q + row * {qr}LL;
    return (unsigned)p[t * {qc}LL].b | ((unsigned)p[(t + 1) * {qc}LL].b << 16);
  }};
  unsigned qf[{dh} / 16][4];
  #pragma unroll
  for (int c = 0; c < {dh} / 16; ++c) {{
    int t0 = c * 16 + 2 * t4;
    qf[c][0] = ldq(ra, t0); qf[c][1] = ldq(rb, t0); qf[c][2] = ldq(ra, t0 + 8); qf[c][3] = ldq(rb, t0 + 8);
  }}
  // Q (above) is loaded before K/V are staged so the loads overlap.
  {mask_loads}
  {stage_kv}
  {mask_stores}
  __syncthreads();
  if (r0 >= {sq}LL) return;
  float sc[{sk} / 8][4];
  #pragma unroll
  for (int n = 0; n < {sk} / 8; ++n) {{
    sc[n][0] = 0.f; sc[n][1] = 0.f; sc[n][2] = 0.f; sc[n][3] = 0.f;
    {k_frag}
  }}
  float mxa = -__int_as_float(0x7f800000), mxb = mxa;
  #pragma unroll
  for (int n = 0; n < {sk} / 8; ++n) {{
    #pragma unroll
    for (int e = 0; e < 4; ++e) {{
      long long row = e < 2 ? ra : rb; if (row >= {sq}LL) row = {sq}LL - 1;
      int j = n * 8 + 2 * t4 + (e & 1);
      float s = sc[n][e] * {scale};
      {mask_code}
      sc[n][e] = s;
    }}
    mxa = fmaxf(mxa, fmaxf(sc[n][0], sc[n][1])); mxb = fmaxf(mxb, fmaxf(sc[n][2], sc[n][3]));
  }}
  mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 1)); mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 2));
  mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 1)); mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 2));
  float suma = 0.f, sumb = 0.f;
  unsigned pf[{sk} / 16][4];
  #pragma unroll
  for (int n = 0; n < {sk} / 8; ++n) {{
    float e0 = exp2f(sc[n][0] - mxa), e1 = exp2f(sc[n][1] - mxa), e2 = exp2f(sc[n][2] - mxb), e3 = exp2f(sc[n][3] - mxb);
    suma += e0 + e1; sumb += e2 + e3;
    pf[n / 2][(n & 1) * 2] = {pk}(e0, e1); pf[n / 2][(n & 1) * 2 + 1] = {pk}(e2, e3);
  }}
  suma += __shfl_xor_sync(0xffffffffu, suma, 1); suma += __shfl_xor_sync(0xffffffffu, suma, 2);
  sumb += __shfl_xor_sync(0xffffffffu, sumb, 1); sumb += __shfl_xor_sync(0xffffffffu, sumb, 2);
  float oc[{dv} / 8][4];
  #pragma unroll
  for (int n = 0; n < {dv} / 8; ++n) {{ oc[n][0] = 0.f; oc[n][1] = 0.f; oc[n][2] = 0.f; oc[n][3] = 0.f; }}
  #pragma unroll
  for (int c = 0; c < {sk} / 16; ++c) {{
    #pragma unroll
    {v_frag}
  }}
  float ia = 1.f / suma, ib = 1.f / sumb;
  {s}* o = out0 + {ob};
  #pragma unroll
  for (int n = 0; n < {dv} / 8; ++n) {{
    long long col = n * 8 + 2 * t4;
    if (ra < {sq}LL) {{ o[ra * {osr}LL + col * {ost}LL] = {pack}(oc[n][0] * ia); o[ra * {osr}LL + (col + 1) * {ost}LL] = {pack}(oc[n][1] * ia); }}
    if (rb < {sq}LL) {{ o[rb * {osr}LL + col * {ost}LL] = {pack}(oc[n][2] * ib); o[rb * {osr}LL + (col + 1) * {ost}LL] = {pack}(oc[n][3] * ib); }}
  }}
}}
",
        s = st(d),
        unr = t.unravel,
        qb = t.qb,
        kb = t.kb,
        vb = t.vb,
        ob = t.ob,
        osr = t.o.0,
        ost = t.o.1,
        scale = lit(DType::F32, (a.scale * L2E) as f32 as f64),
    )
}

/// Where the row-broadcast mask starts in the tensor-core attention's
/// shared memory, in 16-bit elements: after K ([sk][dh + 8]) and V
/// (row-major [sk][dv + 8]).
fn mma_v_end(a: &AttentionSpec) -> usize {
    a.sk * (a.dh + 8) + a.sk * (a.dv + 8)
}

/// Dynamic shared memory of [`attention_mma`]: K, V, then room for a
/// row-broadcast mask (f32).
pub fn attention_mma_smem(a: &AttentionSpec) -> usize {
    mma_v_end(a) * 2 + a.sk * 4
}

/// Staging K and V (row-major, rows padded to dh + 8 and dv + 8) with
/// `cp.async`: when rows are contiguous and 16-byte aligned (checked on
/// the head's base addresses at run time), every 16-byte copy of a thread
/// is issued before the first completes — one memory round trip, no
/// registers held — else one element per load.
fn stage_async(a: &AttentionSpec, nt: usize) -> String {
    let t = a.strides();
    let ((kr, kc), (vr, vc)) = (t.k, t.v);
    let sk = a.sk;
    let ops = [("ks", "k", a.dh, kr, kc), ("vs", "v", a.dv, vr, vc)];
    let scalar: Vec<String> = ops
        .iter()
        .map(|&(dst, src, n, rs, cs)| {
            format!(
                "for (int e = threadIdx.x; e < {sk} * {n}; e += {nt}) {{ int j = e / {n}, t = e % {n}; {dst}[j * {p} + t] = {src}[j * {rs}LL + t * {cs}LL].b; }}",
                p = n + 8
            )
        })
        .collect();
    let vector = ops
        .iter()
        .all(|&(_, _, n, rs, cs)| cs == 1 && rs % 8 == 0 && n.is_multiple_of(8));
    if !vector {
        return scalar.join("\n  ");
    }
    let copies: Vec<String> = ops
        .iter()
        .map(|&(dst, src, n, rs, _)| {
            let (n8, p) = (n / 8, n + 8);
            let chunks = sk * n8;
            let it = chunks.div_ceil(nt);
            let guard = if chunks.is_multiple_of(nt) {
                String::new()
            } else {
                format!("if (e < {chunks}) ")
            };
            format!(
                "#pragma unroll\n    for (int i = 0; i < {it}; ++i) {{ int e = threadIdx.x + i * {nt}; {guard}cp_async16({dst} + (e / {n8}) * {p} + (e % {n8}) * 8, {src} + (e / {n8}) * {rs}LL + (e % {n8}) * 8); }}"
            )
        })
        .collect();
    format!(
        "if (((((unsigned long long)k) | ((unsigned long long)v)) & 15ull) == 0) {{\n    {}\n    cp_async_wait_all();\n  }} else {{\n    {}\n  }}",
        copies.join("\n    "),
        scalar.join("\n    ")
    )
}
