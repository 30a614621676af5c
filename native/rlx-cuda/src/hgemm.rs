//! Our own 16-bit GEMM on tensor cores: f16/bf16 operands, fp32
//! accumulation (`mma.sync.m16n8k16`, `ldmatrix` fragment loads, a
//! `cp.async` pipeline of 2–4 stages, K sliced over warps for small tiles). Like `sgemm.rs`'s kernels they are
//! timed by the cuBLASLt tuner (`exec.rs`) next to cuBLASLt's candidates
//! and run only where measured faster.
//!
//! What they add over cuBLASLt: an epilogue with any activation. BERT's
//! FFN is `gelu(x·W + b)` with the erf GELU, and cuBLASLt's GELU epilogue
//! is the tanh approximation, so the plan runs that as a GEMM and then a
//! bias + GELU kernel (the GEMM's output written, read back and written
//! again). A GEMM with such a tail (`plan::Tail`) is timed as cuBLASLt +
//! the tail kernel against ours with bias and activation applied to the
//! fp32 accumulators; when ours wins the tail kernel is not launched.
//!
//! **Off by default** (`RLX_CUDA_HGEMM=auto` turns them on): measured on
//! the H200 (`benches/results/cuda-hgemm-tune.txt`) they run MiniLM's
//! fp16 GEMMs in 1.4–3.7× cuBLASLt's time (the best tile per GEMM) — e.g. B=8's FFN up-projection
//! with its GELU fused in 11.6 µs against cuBLASLt + the GELU kernel's
//! 7.5 µs — so the tuner never picked one, and timing them added ~0.6 s
//! to each MiniLM fp16 compile. More pipeline stages (2 → 4) and K
//! sliced over warps changed their times by under 10%. Not the MMA: on
//! the same GPU `mma.sync` alone reaches 584–642 TFLOP/s (`gpu
//! mma-peak`) against our ~145 on the B=32 shapes. The likely bound is
//! L2 → shared-memory traffic: every block copies its own operand tiles,
//! 64 FLOP per byte at 128×128, where the MMA's rate needs ~10 TB/s;
//! cuBLASLt's Hopper kernels (wgmma, TMA loads multicast across a
//! cluster) cut that traffic, and ours would need the same. They stay for what they do right (one
//! rounding after bias, residual and activation; tested against f64 on
//! the GPU, in the CPU emulation, and through NVRTC) and as the place to
//! make the fused epilogue pay.
//!
//! Layout (the plan's column-major view, as in `sgemm.rs`): D (m×n) =
//! Aᵀ·B [+ bias(m)] [+ C], then the activation; A (the weight) stored
//! k-contiguous per feature (`trans_a`), B (the activations) k-contiguous
//! per token (`!trans_b`). The MMA's rows are tokens (n) and its columns
//! features (m), so each lane's accumulator pair is two neighbouring
//! features of one token: one 32-bit store into D.

use crate::error::CudaError;
use crate::plan::Gemm;
use rlx_ir::DType;

/// The environment variable that sets the [`Mode`]: unset or `0` (off, the
/// default: see the module doc for why); `auto` or `1`; or a tile's kernel
/// name (e.g. `rlx_hgemm_64x64_w2x2x1_k64_s4`).
pub const HGEMM_ENV: &str = "RLX_CUDA_HGEMM";

/// Whether our 16-bit kernels compete with cuBLASLt: off (the default),
/// timed with its candidates, or this [`TILES`] entry on every eligible
/// GEMM (tests).
pub type Mode = crate::env::KernelMode<usize>;

/// The [`Mode`] a value of [`HGEMM_ENV`] names.
pub fn parse_mode(v: Option<&str>) -> Result<Mode, CudaError> {
    let find = |v: &str| TILES.iter().position(|t| t.name() == v);
    let expected = format!("a kernel ({})", TILES.map(|t| t.name()).join(", "));
    crate::env::kernel_mode(HGEMM_ENV, v, Mode::Off, find, &expected)
}

/// One kernel variant: a block computes `bt` tokens × `bf` features with
/// `wt × wf × wk` warps — each a `bt/wt × bf/wf` tile of 16×8 MMAs over
/// its `1/wk` share of every k-slice (sliced K: more warps on the short
/// GEMMs of small batches without a second launch; their sums are added
/// in a fixed order through shared memory) — and keeps `stages` k-slices
/// of `bk` of both operands in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub bt: u32,
    pub bf: u32,
    pub wt: u32,
    pub wf: u32,
    pub wk: u32,
    pub bk: u32,
    pub stages: u32,
}

const fn tile(bt: u32, bf: u32, [wt, wf, wk]: [u32; 3], bk: u32, stages: u32) -> Tile {
    Tile {
        bt,
        bf,
        wt,
        wf,
        wk,
        bk,
        stages,
    }
}

/// The variants the tuner times: small tiles with sliced K for the skinny
/// products of small batches (more blocks and warps than a plain tiling
/// gives), big tiles for the rest. All within 48 KiB of static shared
/// memory (dynamic, up to [`MAX_SMEM`]).
pub const TILES: [Tile; 9] = [
    tile(32, 32, [1, 1, 2], 64, 4),
    tile(32, 64, [1, 2, 2], 64, 4),
    tile(64, 64, [2, 2, 1], 64, 4),
    tile(64, 64, [2, 2, 2], 64, 4),
    tile(64, 128, [2, 2, 1], 32, 4),
    tile(64, 128, [2, 2, 2], 64, 3),
    tile(128, 64, [2, 2, 1], 32, 4),
    tile(128, 128, [2, 2, 1], 32, 4),
    tile(128, 128, [2, 4, 1], 32, 4),
];

/// Dynamic shared memory a block may use on sm_90 (227 KiB), the most a
/// tile may ask for.
pub const MAX_SMEM: u32 = 227 * 1024;

impl Tile {
    pub fn threads(&self) -> u32 {
        self.wt * self.wf * self.wk * 32
    }

    pub fn name(&self) -> String {
        format!(
            "rlx_hgemm_{}x{}_w{}x{}x{}_k{}_s{}",
            self.bt, self.bf, self.wt, self.wf, self.wk, self.bk, self.stages
        )
    }

    /// The launch grid: feature tiles, token tiles, batches.
    pub fn grid(&self, g: &Gemm) -> (u32, u32, u32) {
        (
            (g.m as u32).div_ceil(self.bf),
            (g.n as u32).div_ceil(self.bt),
            g.batch as u32,
        )
    }

    /// Shared-memory row pitch in elements: 16 bytes of padding put the 8
    /// row addresses of one `ldmatrix` in 8 distinct 4-bank groups.
    fn pitch(&self) -> u32 {
        self.bk + 8
    }

    /// Dynamic shared memory of the pipeline, in bytes (the sliced-K sums
    /// reuse it).
    pub fn smem(&self) -> u32 {
        self.stages * (self.bt + self.bf) * self.pitch() * 2
    }

    /// Bytes the sliced-K reduction needs: one fp32 tile per extra slice.
    #[cfg(test)]
    fn reduce_bytes(&self) -> u32 {
        (self.wk - 1) * self.bt * self.bf * 4
    }

    fn source(&self, d: DType, act: Option<&str>) -> String {
        let (bt, bf, wt, wf, wk, bk) = (self.bt, self.bf, self.wt, self.wf, self.wk, self.bk);
        let (stages, nt) = (self.stages, self.threads());
        let pitch = self.pitch();
        let (wtt, wff) = (bt / wt, bf / wf);
        let (mt, nf) = (wtt / 16, wff / 8);
        // k per warp per slice, in MMA steps of 16.
        let steps = bk / wk / 16;
        let name = self.name();
        let (mma, pack, ld) = match d {
            DType::BF16 => ("mma_bf16", "pack_bf16", "b2f(b16{"),
            _ => ("mma_f16", "pack_f16", "h2f(h16{"),
        };
        // One operand tile (rows × bk) of this stage: 16-byte copies, zero
        // past the matrix's rows or K (`k % 8 == 0`, so a copy is whole).
        let copies = |dst: &str, src: &str, rows: u32, row0: &str, limit: &str, ld: &str| {
            let chunks = rows * bk / 8;
            let guard = if chunks.is_multiple_of(nt) {
                String::new()
            } else {
                format!("if (c >= {chunks}) break; ")
            };
            format!(
                "    #pragma unroll
    for (int i = 0; i < {it}; ++i) {{
      const int c = tid + i * {nt}; {guard}const int r = c / {bk8}, kc = (c % {bk8}) * 8;
      const bool ok = {row0} + r < {limit} && k0 + kc < K;
      cp_async16z(&{dst}[s][r][kc], ok ? {src} + (long long)({row0} + r) * {ld} + k0 + kc : {src}, ok ? 16u : 0u);
    }}
",
                it = chunks.div_ceil(nt),
                bk8 = bk / 8,
            )
        };
        let load_x = copies("Xs", "B", bt, "t0", "N", "ldb");
        let load_w = copies("Ws", "A", bf, "f0", "M", "lda");
        // Sliced K: warps of slices 1.. store their sums (the accumulator
        // layout, one fp32 tile per slice); slice 0's warps add them in
        // slice order and run the epilogue.
        let reduce = if wk > 1 {
            let frag = |body: &str| {
                format!(
                    "    #pragma unroll
    for (int i = 0; i < {mt}; ++i)
      #pragma unroll
      for (int j = 0; j < {nf}; ++j)
        #pragma unroll
        for (int h = 0; h < 2; ++h) {{
          const int at = (tw + i * 16 + g + h * 8) * {bf} + fw + j * 8 + 2 * t4;
          {body}
        }}
"
                )
            };
            format!(
                "  cp_async_wait<0>();
  __syncthreads();
  float* red = (float*)&Xs[0][0][0];
  if (kw > 0) {{
{}  }}
  __syncthreads();
  if (kw > 0) return;
  for (int q = 1; q < {wk}; ++q) {{
{}  }}
",
                frag(&format!(
                    "*(float2*)&red[(kw - 1) * {} + at] = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);",
                    bt * bf
                )),
                frag(&format!(
                    "const float2 v = *(const float2*)&red[(q - 1) * {} + at]; acc[i][j][2 * h] += v.x; acc[i][j][2 * h + 1] += v.y;",
                    bt * bf
                )),
            )
        } else {
            String::new()
        };
        let act = act.unwrap_or("y");
        format!(
            r#"
extern "C" __global__ void __launch_bounds__({nt}) {name}(
    const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, unsigned short* D,
    const unsigned short* C, const unsigned short* __restrict__ bias,
    int M, int N, int K, int lda, int ldb, int ldd,
    long long sA, long long sB, long long sD, long long sBias,
    int splits, float* __restrict__ ws, unsigned int* __restrict__ counters)
{{
  // Tokens (the MMA's A operand) and features (its B operand), k-major rows.
  RLX_HGEMM_SMEM;
  unsigned short (*Xs)[{bt}][{pitch}] = (unsigned short (*)[{bt}][{pitch}])hsm;
  unsigned short (*Ws)[{bf}][{pitch}] = (unsigned short (*)[{bf}][{pitch}])(hsm + {xs_size});
  auto act = [](float y) -> float {{ return {act}; }};
  const long long z = blockIdx.z;
  A += z * sA; B += z * sB; D += z * sD;
  if (C) C += z * sD;
  if (bias) bias += z * sBias;
  const int f0 = blockIdx.x * {bf}, t0 = blockIdx.y * {bt};
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  // This warp's k slice, and its token and feature offsets in the tile.
  const int kw = warp / {wtf}, wr = warp % {wtf};
  const int tw = (wr / {wf}) * {wtt}, fw = (wr % {wf}) * {wff};
  float acc[{mt}][{nf}][4];
  #pragma unroll
  for (int i = 0; i < {mt}; ++i)
    #pragma unroll
    for (int j = 0; j < {nf}; ++j) {{ acc[i][j][0] = 0.f; acc[i][j][1] = 0.f; acc[i][j][2] = 0.f; acc[i][j][3] = 0.f; }}
  const int kt_n = (K + {bk} - 1) / {bk};
  auto load = [&](int s, int kt) {{
    const int k0 = kt * {bk};
{load_x}{load_w}  }};
  // Stages 0..S-2 in flight before the loop; one commit group per stage
  // (empty past K) so `wait_group S-2` always means "stage kt landed".
  #pragma unroll
  for (int s = 0; s < {stages} - 1; ++s) {{
    if (s < kt_n) load(s, s);
    cp_async_commit();
  }}
  for (int kt = 0; kt < kt_n; ++kt) {{
    cp_async_wait<{stages} - 2>();
    // Stage kt is visible to every thread, and every warp is done with
    // the buffer the next load overwrites (read in iteration kt - 1).
    __syncthreads();
    if (kt + {stages} - 1 < kt_n) load((kt + {stages} - 1) % {stages}, kt + {stages} - 1);
    cp_async_commit();
    const int s = kt % {stages};
    #pragma unroll
    for (int u = 0; u < {steps}; ++u) {{
      const int kk = (kw * {steps} + u) * 16;
      unsigned af[{mt}][4], bfr[{nf}][2];
      #pragma unroll
      for (int i = 0; i < {mt}; ++i)
        ldsm4(af[i], &Xs[s][tw + i * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
      #pragma unroll
      for (int j = 0; j < {nf}; j += 2) {{
        unsigned r[4];
        ldsm4(r, &Ws[s][fw + j * 8 + (lane & 7) + ((lane >> 4) << 3)][kk + ((lane >> 3) & 1) * 8]);
        bfr[j][0] = r[0]; bfr[j][1] = r[1]; bfr[j + 1][0] = r[2]; bfr[j + 1][1] = r[3];
      }}
      #pragma unroll
      for (int i = 0; i < {mt}; ++i)
        #pragma unroll
        for (int j = 0; j < {nf}; ++j) {mma}(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
    }}
  }}
{reduce}  // Epilogue on the fp32 accumulators: + bias (per feature) + C (the
  // residual, D's layout), the activation, one rounding, 32-bit stores.
  #pragma unroll
  for (int j = 0; j < {nf}; ++j) {{
    const int f = f0 + fw + j * 8 + 2 * t4;
    if (f >= M) continue;
    float b0 = 0.f, b1 = 0.f;
    if (bias) {{ b0 = {ld}bias[f]}}); b1 = {ld}bias[f + 1]}}); }}
    #pragma unroll
    for (int i = 0; i < {mt}; ++i)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {{
        const int t = t0 + tw + i * 16 + g + h * 8;
        if (t >= N) continue;
        float y0 = acc[i][j][2 * h] + b0, y1 = acc[i][j][2 * h + 1] + b1;
        const long long o = (long long)t * ldd + f;
        if (C) {{
          const unsigned r = *(const unsigned*)(C + o);
          y0 += {ld}(unsigned short)(r & 0xffffu)}}); y1 += {ld}(unsigned short)(r >> 16)}});
        }}
        *(unsigned*)(D + o) = {pack}(act(y0), act(y1));
      }}
  }}
}}
"#,
            wtf = wt * wf,
            xs_size = stages * bt * pitch,
        )
    }
}

/// The kernels of every variant for operands of `d`, with `act` (a CUDA
/// expression of the float `y`, e.g. from `codegen::expr::unary`) applied
/// last in the epilogue, or none. Calls the preamble's `mma_*`, `pack_*`
/// and `ldsm4`, and the helpers of [`HELPERS`].
pub fn kernels(d: DType, act: Option<&str>) -> String {
    TILES.iter().map(|t| t.source(d, act)).collect()
}

/// PTX helpers the kernels use beyond the module preamble's (`mma_*`,
/// `pack_*`, `ldsm4`): `cp.async` with a source size (0: the 16 bytes are
/// zero-filled) committed and waited for in groups; the declaration of
/// the dynamic shared memory.
pub const HELPERS: &str = r#"
#define RLX_HGEMM_SMEM extern __shared__ __align__(16) unsigned short hsm[]
static __device__ __forceinline__ void cp_async16z(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_u32(dst)), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
"#;

/// The whole module for the GPU.
pub fn source(d: DType, act: Option<&str>) -> String {
    format!("{}{HELPERS}{}", crate::ctype::PREAMBLE, kernels(d, act))
}

/// Whether our kernels can run `g` at these device addresses (A, B, C or
/// the residual, D): 16-bit operands and output, the layout above, rows
/// of A and B in whole 16-byte copies, 32-bit stores.
pub fn eligible(g: &Gemm, ptrs: [u64; 4]) -> bool {
    let eight = |v: i64| v % 8 == 0;
    matches!(g.dtype, DType::F16 | DType::BF16)
        && g.c_dtype == g.dtype
        && g.trans_a
        && !g.trans_b
        && g.m > 0
        && g.n > 0
        && g.k > 0
        && g.batch > 0
        && g.m % 2 == 0
        && g.ldc % 2 == 0
        && g.stride_c % 2 == 0
        && [
            g.k as i64,
            g.lda as i64,
            g.ldb as i64,
            g.stride_a,
            g.stride_b,
        ]
        .into_iter()
        .all(eight)
        && ptrs[0].is_multiple_of(16)
        && ptrs[1].is_multiple_of(16)
        && ptrs[2].is_multiple_of(4)
        && ptrs[3].is_multiple_of(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_or_are_typed_errors() {
        assert_eq!(parse_mode(None).unwrap(), Mode::Off);
        assert_eq!(parse_mode(Some("auto")).unwrap(), Mode::Auto);
        assert_eq!(parse_mode(Some("0")).unwrap(), Mode::Off);
        assert_eq!(
            parse_mode(Some("rlx_hgemm_64x64_w2x2x1_k64_s4")).unwrap(),
            Mode::Force(2)
        );
        match parse_mode(Some("rlx_hgemm_1x1")) {
            Err(CudaError::Input(m)) => {
                assert!(
                    m.contains(HGEMM_ENV) && m.contains("rlx_hgemm_32x32_w1x1x2_k64_s4"),
                    "{m}"
                )
            }
            other => panic!("expected a typed error, got {other:?}"),
        }
    }

    #[test]
    fn every_tile_fits_its_warps_and_shared_memory() {
        for t in TILES {
            let (wtt, wff) = (t.bt / t.wt, t.bf / t.wf);
            // Whole 16-row MMA tiles per warp, feature tiles in ldmatrix
            // pairs, whole 16-wide k steps per slice.
            assert!(wtt % 16 == 0 && wff % 16 == 0, "{t:?}");
            assert!(t.bk % (16 * t.wk) == 0, "{t:?}");
            assert!(t.threads() <= 1024 && t.stages >= 2, "{t:?}");
            // Shared memory within the limit; the sliced-K sums fit in it.
            assert!(t.smem() <= MAX_SMEM, "{t:?}: {}", t.smem());
            assert!(t.reduce_bytes() <= t.smem(), "{t:?}");
            // Accumulators per thread: at most 128 floats.
            assert!((wtt / 16) * (wff / 8) * 4 <= 128, "{t:?}");
        }
        let names: std::collections::HashSet<_> = TILES.iter().map(Tile::name).collect();
        assert_eq!(names.len(), TILES.len());
    }
}
