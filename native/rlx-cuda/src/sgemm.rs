//! Our own strict-fp32 GEMM: CUDA-core FMA kernels (no TF32) in a few
//! tile shapes, timed by the cuBLASLt tuner (`exec.rs`) next to cuBLASLt's
//! own candidates and run only where one is measured faster.
//!
//! Why: MiniLM's fp32 GEMMs at small batch are skinny (M = B·128 tokens
//! against 384–1536 features, K = 384 or 1536). cuBLASLt's fp32 kernels
//! reach 20–28 TFLOP/s there (H200, B = 4: 30–40% of the fp32 peak) —
//! tiles sized for big products leave SMs idle or unbalanced; smaller
//! tiles and K splits spread the work over all 132 SMs. Every candidate
//! computes in fp32 with fp32 FMA, like cuBLAS's strict path; only the
//! order of the k sums differs. Measured (benches/results/cuda-sgemm-tune.txt):
//! 0.91–1.40× cuBLASLt's best per MiniLM GEMM, so the tuner picks one of
//! them for a single shape (B=16 m1536 n2048 k384); a cp.async 3-stage
//! variant was slower still and is not kept.
//!
//! Layout (the plan's column-major view, see `plan/gemm.rs`): D (m×n) =
//! Aᵀ·B [+ bias(m)] [+ C], with A stored k-contiguous per row of op(A)
//! (`trans_a`) and B k-contiguous per column (`!trans_b`) — a linear
//! layer's weight and its row-major activations. Other layouts, odd sizes
//! or unaligned pointers are simply not candidates.

use crate::error::CudaError;
use crate::plan::Gemm;
use rlx_ir::DType;

/// The environment variable that sets the [`Mode`]: unset or `auto`, `0`,
/// or a tile's kernel name (e.g. `rlx_sgemm_tn_64x64_8x8`, `/k4` for 4 K splits).
pub const SGEMM_ENV: &str = "RLX_CUDA_SGEMM";

/// Whether our kernels compete with cuBLASLt: timed with its candidates
/// (the default), off (A/B runs), or this [`TILES`] entry with this many
/// K splits on every eligible GEMM where the split fits (tests).
pub type Mode = crate::env::KernelMode<(usize, u32)>;

/// The [`Mode`] a value of [`SGEMM_ENV`] names.
pub fn parse_mode(v: Option<&str>) -> Result<Mode, CudaError> {
    let find = |v: &str| {
        let (name, splits) = match v.split_once("/k") {
            Some((n, s)) => (n, s.parse::<u32>().ok().filter(|s| SPLITS.contains(s))?),
            None => (v, 1),
        };
        Some((TILES.iter().position(|t| t.name() == name)?, splits))
    };
    let expected = format!(
        "a kernel ({}) with an optional K split /k2, /k4 or /k8",
        TILES.map(|t| t.name()).join(", ")
    );
    crate::env::kernel_mode(SGEMM_ENV, v, Mode::Auto, find, &expected)
}

/// One kernel variant: a block computes `bm × bn` outputs; a thread
/// `4·rm × 4·rn` of them (float4 groups spaced `bm/rm`, `bn/rn` apart so
/// a warp's shared-memory reads hit distinct banks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub bm: u32,
    pub bn: u32,
    pub rm: u32,
    pub rn: u32,
}

/// k per shared-memory stage (two stages, double-buffered).
const BK: u32 = 16;

/// The variants the tuner times.
pub const TILES: [Tile; 10] = [
    Tile {
        bm: 32,
        bn: 32,
        rm: 1,
        rn: 1,
    },
    Tile {
        bm: 64,
        bn: 32,
        rm: 1,
        rn: 1,
    },
    Tile {
        bm: 32,
        bn: 64,
        rm: 1,
        rn: 1,
    },
    Tile {
        bm: 64,
        bn: 64,
        rm: 1,
        rn: 1,
    },
    Tile {
        bm: 64,
        bn: 32,
        rm: 2,
        rn: 1,
    },
    Tile {
        bm: 32,
        bn: 64,
        rm: 1,
        rn: 2,
    },
    Tile {
        bm: 64,
        bn: 64,
        rm: 2,
        rn: 2,
    },
    Tile {
        bm: 128,
        bn: 64,
        rm: 2,
        rn: 2,
    },
    Tile {
        bm: 64,
        bn: 128,
        rm: 2,
        rn: 2,
    },
    Tile {
        bm: 128,
        bn: 128,
        rm: 2,
        rn: 2,
    },
];

/// K splits the tuner tries per tile (1: none).
pub const SPLITS: [u32; 4] = [1, 2, 4, 8];

/// Bytes of partial sums `splits` needs for `g` (in the GPU's cuBLASLt
/// workspace, which our kernels share: one stream runs both, never at once).
pub fn split_bytes(g: &Gemm, splits: u32) -> usize {
    if splits <= 1 {
        return 0;
    }
    g.batch as usize * splits as usize * g.m as usize * g.n as usize * 4
}

/// Tile counters for split K (one per output tile, zeroed once, reset by
/// the kernels): enough for every eligible GEMM up to this many tiles.
pub const COUNTERS: usize = 1 << 16;

/// Whether the tuner times `t` with `splits` for `g` (in [`Mode::Auto`]):
/// only where one of ours was ever measured faster than cuBLASLt on the
/// H200 — the 8×8-per-thread tiles, K in at most 2 splits, GEMMs of at
/// least 2^30 multiply-adds (MiniLM's B ≥ 16 FFN; cuda-sgemm-tune.txt).
/// Elsewhere they were 1.03–1.4× cuBLASLt's time, and timing all 40
/// candidates per GEMM shape added 0.2–0.8 s to each MiniLM fp32 compile.
pub fn worth_timing(g: &Gemm, t: &Tile, splits: u32) -> bool {
    let macs = g.m as i64 * g.n as i64 * g.k as i64 * g.batch as i64;
    t.rm == 2 && t.rn == 2 && splits <= 2 && macs >= 1 << 30
}

/// Whether `splits` is worth a candidate for `g` on `t` at this workspace
/// size: each split gets at least one k stage and the counters suffice.
pub fn split_fits(g: &Gemm, t: &Tile, splits: u32, workspace: usize) -> bool {
    let (gx, gy, gz) = t.grid(g);
    splits == 1
        || (g.k as u32 >= splits * BK
            && split_bytes(g, splits) <= workspace
            && (gx * gy * gz) as usize <= COUNTERS)
}

impl Tile {
    pub fn threads(&self) -> u32 {
        (self.bm / (4 * self.rm)) * (self.bn / (4 * self.rn))
    }

    pub fn name(&self) -> String {
        format!(
            "rlx_sgemm_tn_{}x{}_{}x{}",
            self.bm,
            self.bn,
            4 * self.rm,
            4 * self.rn
        )
    }

    /// The kernel with `splits` K splits, as the report and [`SGEMM_ENV`]
    /// name it (`rlx_sgemm_tn_64x64_8x8/k4`).
    pub fn candidate_name(&self, splits: u32) -> String {
        if splits > 1 {
            format!("{}/k{splits}", self.name())
        } else {
            self.name()
        }
    }

    /// The output tiles of `g` (the launch grid with one K split).
    pub fn grid(&self, g: &Gemm) -> (u32, u32, u32) {
        (
            (g.m as u32).div_ceil(self.bm),
            (g.n as u32).div_ceil(self.bn),
            g.batch as u32,
        )
    }

    fn source(&self) -> String {
        let Tile { bm, bn, rm, rn } = *self;
        let (tx, nt) = (bm / (4 * rm), self.threads());
        let (la, lb) = (bm * BK / 4 / nt, bn * BK / 4 / nt);
        let name = self.name();
        // `body` once per float4 of this thread's outputs: column n, rows
        // m..m+4 of acc[rj * 4 + j][ri * 4..], inside the matrix.
        let each_output = |body: &str| {
            format!(
                "  #pragma unroll
  for (int rj = 0; rj < {rn}; ++rj)
    #pragma unroll
    for (int j = 0; j < 4; ++j) {{
      const int n = n0 + ty * 4 + rj * {bn_rn} + j;
      if (n >= N) continue;
      #pragma unroll
      for (int ri = 0; ri < {rm}; ++ri) {{
        const int m = m0 + tx * 4 + ri * {bm_rm};
        if (m >= M) continue;
{body}      }}
    }}
",
                bn_rn = bn / rn,
                bm_rm = bm / rm,
            )
        };
        let store_partials = each_output(
            "        const float* c = &acc[rj * 4 + j][ri * 4];
        __stcg((float4*)(part + (long long)n * M + m), make_float4(c[0], c[1], c[2], c[3]));
",
        );
        let sum_partials = each_output(
            "        float4 v = __ldcg((const float4*)(first + (long long)n * M + m));
        for (int q = 1; q < splits; ++q) {
          float4 w = __ldcg((const float4*)(first + ((long long)q * N + n) * M + m));
          v.x += w.x; v.y += w.y; v.z += w.z; v.w += w.w;
        }
        float* c = &acc[rj * 4 + j][ri * 4];
        c[0] = v.x; c[1] = v.y; c[2] = v.z; c[3] = v.w;
",
        );
        let epilogue = each_output(
            "        const float* c = &acc[rj * 4 + j][ri * 4];
        float4 v = make_float4(c[0], c[1], c[2], c[3]);
        if (bias) { v.x += bias[m]; v.y += bias[m + 1]; v.z += bias[m + 2]; v.w += bias[m + 3]; }
        const long long o = (long long)n * ldd + m;
        if (C) { float4 r = *(const float4*)(C + o); v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w; }
        *(float4*)(D + o) = v;
",
        );
        format!(
            r#"
extern "C" __global__ void __launch_bounds__({nt}) {name}(
    const float* __restrict__ A, const float* __restrict__ B, float* D,
    const float* C, const float* __restrict__ bias,
    int M, int N, int K, int lda, int ldb, int ldd,
    long long sA, long long sB, long long sD, long long sBias,
    int splits, float* __restrict__ ws, unsigned int* __restrict__ counters)
{{
  __shared__ __align__(16) float As[2][{BK}][{bm} + 4];
  __shared__ __align__(16) float Bs[2][{BK}][{bn} + 4];
  // blockIdx.z = batch * splits + this block's share of K.
  const long long z = blockIdx.z / splits;
  const int sp = blockIdx.z % splits;
  A += z * sA; B += z * sB; D += z * sD;
  if (C) C += z * sD;
  if (bias) bias += z * sBias;
  const int m0 = blockIdx.x * {bm}, n0 = blockIdx.y * {bn};
  const int tid = threadIdx.x, tx = tid % {tx}, ty = tid / {tx};
  float acc[{rn} * 4][{rm} * 4];
  #pragma unroll
  for (int j = 0; j < {rn} * 4; ++j)
    #pragma unroll
    for (int i = 0; i < {rm} * 4; ++i) acc[j][i] = 0.f;
  // This split's k range, whole stages except at K's end.
  const int chunk = ((K + splits - 1) / splits + {BK} - 1) / {BK} * {BK};
  const int kbeg = sp * chunk, kend = min(K, kbeg + chunk);
  const int tiles = kend > kbeg ? (kend - kbeg + {BK} - 1) / {BK} : 0;
  float4 ra[{la}], rb[{lb}];
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  // Global -> registers: float4s along k (rows of A / columns of B are
  // k-contiguous), zero past the edges.
  auto load = [&](int k0) {{
    #pragma unroll
    for (int l = 0; l < {la}; ++l) {{
      int f = tid + l * {nt}, row = f / {BK4}, k = k0 + (f % {BK4}) * 4, m = m0 + row;
      ra[l] = (m < M && k < kend) ? *(const float4*)(A + (long long)m * lda + k) : zero;
    }}
    #pragma unroll
    for (int l = 0; l < {lb}; ++l) {{
      int f = tid + l * {nt}, col = f / {BK4}, k = k0 + (f % {BK4}) * 4, n = n0 + col;
      rb[l] = (n < N && k < kend) ? *(const float4*)(B + (long long)n * ldb + k) : zero;
    }}
  }};
  // Registers -> shared memory, k-major, so the inner loop reads float4s
  // along m and n.
  auto store = [&](int s) {{
    #pragma unroll
    for (int l = 0; l < {la}; ++l) {{
      int f = tid + l * {nt}, row = f / {BK4}, kq = (f % {BK4}) * 4;
      As[s][kq][row] = ra[l].x; As[s][kq + 1][row] = ra[l].y;
      As[s][kq + 2][row] = ra[l].z; As[s][kq + 3][row] = ra[l].w;
    }}
    #pragma unroll
    for (int l = 0; l < {lb}; ++l) {{
      int f = tid + l * {nt}, col = f / {BK4}, kq = (f % {BK4}) * 4;
      Bs[s][kq][col] = rb[l].x; Bs[s][kq + 1][col] = rb[l].y;
      Bs[s][kq + 2][col] = rb[l].z; Bs[s][kq + 3][col] = rb[l].w;
    }}
  }};
  load(kbeg);
  store(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {{
    const int s = t & 1;
    // The next stage's loads are in flight while this one computes; its
    // buffer was last read before the previous barrier.
    if (t + 1 < tiles) load(kbeg + (t + 1) * {BK});
    #pragma unroll
    for (int kk = 0; kk < {BK}; ++kk) {{
      float a[{rm} * 4], b[{rn} * 4];
      #pragma unroll
      for (int r = 0; r < {rm}; ++r) {{
        float4 v = *(const float4*)&As[s][kk][tx * 4 + r * {bm_rm}];
        a[r * 4] = v.x; a[r * 4 + 1] = v.y; a[r * 4 + 2] = v.z; a[r * 4 + 3] = v.w;
      }}
      #pragma unroll
      for (int r = 0; r < {rn}; ++r) {{
        float4 v = *(const float4*)&Bs[s][kk][ty * 4 + r * {bn_rn}];
        b[r * 4] = v.x; b[r * 4 + 1] = v.y; b[r * 4 + 2] = v.z; b[r * 4 + 3] = v.w;
      }}
      #pragma unroll
      for (int j = 0; j < {rn} * 4; ++j)
        #pragma unroll
        for (int i = 0; i < {rm} * 4; ++i) acc[j][i] = fmaf(a[i], b[j], acc[j][i]);
    }}
    if (t + 1 < tiles) store(s ^ 1);
    __syncthreads();
  }}
  // Split K: each split stores its partial sums; the block that finishes
  // a tile last (a counter per tile) adds the partials in split order —
  // the same order whichever block that is, so results are deterministic
  // — and resets the counter for the next launch.
  if (splits > 1) {{
    float* part = ws + (blockIdx.z * (long long)N) * M;
{store_partials}    __threadfence();
    __syncthreads();
    __shared__ int last;
    const unsigned int tile = (z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    if (tid == 0) last = atomicAdd(&counters[tile], 1u) == (unsigned int)(splits - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float* first = ws + (z * splits * (long long)N) * M;
{sum_partials}    if (tid == 0) counters[tile] = 0u;
  }}
  // Epilogue: + bias (per m) + C (the residual, D's layout), float4 stores.
{epilogue}}}
"#,
            BK4 = BK / 4,
            bm_rm = bm / rm,
            bn_rn = bn / rn,
        )
    }
}

/// The CUDA C of every variant, one module.
pub fn source() -> String {
    TILES.iter().map(Tile::source).collect()
}

/// Whether our kernels can run `g` at these device addresses (A, B, C or
/// the residual, D): strict fp32, the layout above, and every float4 load
/// and store aligned.
pub fn eligible(g: &Gemm, ptrs: [u64; 4], tf32: bool) -> bool {
    let four = |v: i64| v % 4 == 0;
    g.dtype == DType::F32
        && g.c_dtype == DType::F32
        && !tf32
        && g.trans_a
        && !g.trans_b
        && g.m > 0
        && g.n > 0
        && g.k > 0
        && g.batch > 0
        && [g.m, g.k, g.lda, g.ldb, g.ldc]
            .iter()
            .all(|&v| four(v as i64))
        && [g.stride_a, g.stride_b, g.stride_c]
            .iter()
            .all(|&v| four(v))
        && (g.batch == 1 || g.bias.is_none() || four(g.bias_stride))
        && ptrs.iter().all(|p| p % 16 == 0)
}

/// The kernel arguments after the five pointers (A, B, D, C, bias), in
/// the order the kernels declare them.
pub fn scalar_args(g: &Gemm) -> ([i32; 6], [i64; 4]) {
    let bias_stride = if g.batch > 1 { g.bias_stride } else { 0 };
    (
        [g.m, g.n, g.k, g.lda, g.ldb, g.ldc],
        [g.stride_a, g.stride_b, g.stride_c, bias_stride],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_or_are_typed_errors() {
        assert_eq!(parse_mode(None).unwrap(), Mode::Auto);
        assert_eq!(parse_mode(Some("auto")).unwrap(), Mode::Auto);
        assert_eq!(parse_mode(Some("0")).unwrap(), Mode::Off);
        assert_eq!(
            parse_mode(Some("rlx_sgemm_tn_64x64_4x4")).unwrap(),
            Mode::Force((3, 1))
        );
        assert_eq!(
            parse_mode(Some("rlx_sgemm_tn_32x32_4x4/k4")).unwrap(),
            Mode::Force((0, 4))
        );
        assert!(parse_mode(Some("rlx_sgemm_tn_32x32_4x4/k3")).is_err());
        match parse_mode(Some("fast")) {
            Err(CudaError::Input(m)) => {
                assert!(
                    m.contains("RLX_CUDA_SGEMM") && m.contains("rlx_sgemm_tn_32x32_4x4"),
                    "{m}"
                )
            }
            other => panic!("expected a typed error, got {other:?}"),
        }
    }

    /// A linear layer's GEMM as the plan makes it (m features, n tokens).
    fn linear(m: i32, n: i32, k: i32, batch: i32) -> Gemm {
        use crate::plan::{Ptr, Root};
        let p = Ptr {
            root: Root::Arena(0),
            byte: 0,
        };
        Gemm {
            trans_a: true,
            trans_b: false,
            m,
            n,
            k,
            a: p,
            lda: k,
            stride_a: (m * k) as i64,
            b: p,
            ldb: k,
            stride_b: 0,
            c: p,
            ldc: m,
            stride_c: (m * n) as i64,
            batch,
            dtype: DType::F32,
            c_dtype: DType::F32,
            bias: None,
            residual: None,
            bias_stride: 0,
            tail: None,
        }
    }

    #[test]
    fn auto_mode_times_ours_only_where_they_won() {
        let timed = |g: &Gemm| {
            TILES
                .iter()
                .flat_map(|t| SPLITS.map(|s| (t, s)))
                .filter(|(t, s)| worth_timing(g, t, *s))
                .count()
        };
        // MiniLM B=16's FFN up-projection (where one won): the four 8×8
        // tiles, K in 1 or 2 splits.
        assert_eq!(timed(&linear(1536, 2048, 384, 1)), 8);
        // B=4's, and B=16's batched Q/K/V: none.
        assert_eq!(timed(&linear(1536, 512, 384, 1)), 0);
        assert_eq!(timed(&linear(384, 2048, 384, 3)), 0);
    }

    /// A tuned pick indexes the list of our kernels that was timed, so a
    /// GEMM timed with another list (another RLX_CUDA_SGEMM / HGEMM mode)
    /// must not reuse it.
    #[test]
    fn the_tuning_key_names_our_candidates() {
        use crate::tune::TuneKey;
        let k = TuneKey::new(&linear(1536, 2048, 384, 1), [256; 4], None, false);
        let ours = k.clone().with_own(vec![TILES[7].candidate_name(1)]);
        assert_ne!(k, ours);
        assert_eq!(ours, k.clone().with_own(vec![TILES[7].candidate_name(1)]));
        assert_ne!(ours, k.with_own(vec![TILES[7].candidate_name(2)]));
    }

    #[test]
    fn every_tile_loads_whole_float4s_per_thread() {
        for t in TILES {
            let nt = t.threads();
            assert!((32..=1024).contains(&nt) && nt % 32 == 0, "{t:?}");
            assert_eq!((t.bm * BK / 4) % nt, 0, "{t:?}");
            assert_eq!((t.bn * BK / 4) % nt, 0, "{t:?}");
            assert!(t.bm * BK / 4 >= nt && t.bn * BK / 4 >= nt, "{t:?}");
            // Shared memory of both stages within the 48 KiB static limit.
            assert!(2 * BK * (t.bm + t.bn + 8) * 4 <= 48 * 1024, "{t:?}");
        }
    }
}
