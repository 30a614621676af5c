//! The generated kernels run on the CPU: a plan's CUDA C, compiled by the
//! host C++ compiler against a small emulation of the CUDA built-ins it
//! uses (thread and block indices, `__syncthreads`, warp shuffles,
//! atomics, the f16/bf16 helpers), each block's threads as OS threads;
//! GEMM launches as plain loops. Results are compared with the CPU
//! reference (`rlx_cpu::run_graph`).
//!
//! This checks what the planner generates — index arithmetic, fused
//! loads, vectorized loads and stores, error reporting — on machines with
//! no GPU (the build machine, CI). Inline PTX sits in the preamble's
//! helpers (`mma_*`, `pack_*`, `cp_async*`), which the emulation defines
//! from the PTX ISA's fragment layouts, so the tensor-core attention runs
//! too. Not covered: the PTX itself, timing, the CUDA memory model; the
//! GPU parity run (`tests/gpu/run.sh`) does. Skipped, saying
//! so, where no `g++` with C++20 exists.

mod common;
#[path = "emulate_cases/quant.rs"]
mod quant;
use common::ClaimsOnly;
use rlx_cuda::plan::{self, AttnSplit, Launch, Ptr, Root};
use rlx_ir::text::parse;
use rlx_ir::{DType, HostTensor};
use rlx_runtime::{legalize, DispatchOptions};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// CUDA built-ins for kernels run by host threads (one block at a time).
const PRELUDE: &str = r#"
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
using std::min;
using std::max;
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct alignas(16) float4 { float x, y, z, w; };
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
static std::barrier<>* block_bar;
static std::vector<std::barrier<>*> warp_bar;
static float warp_slot[32][32];
static std::mutex atomic_mu;
inline void __syncthreads() { block_bar->arrive_and_wait(); }
inline void __syncwarp() { warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int m) {
  unsigned t = threadIdx.x, w = t / 32, l = t % 32;
  warp_slot[w][l] = v; warp_bar[w]->arrive_and_wait();
  float r = warp_slot[w][l ^ m]; warp_bar[w]->arrive_and_wait();
  return r;
}
inline int atomicCAS(int* p, int cmp, int v) { std::lock_guard<std::mutex> g(atomic_mu); int o = *p; if (o == cmp) *p = v; return o; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
struct h16 { unsigned short b; };
struct b16 { unsigned short b; };
struct alignas(16) v16b { unsigned int x, y, z, w; };
inline float h2f(h16 x) { _Float16 h; memcpy(&h, &x.b, 2); return (float)h; }
inline h16 f2h(float f) { _Float16 h = (_Float16)f; h16 x; memcpy(&x.b, &h, 2); return x; }
inline float b2f(b16 x) { return __uint_as_float(((unsigned int)x.b) << 16); }
inline b16 f2b(float f) {
  unsigned int u = __float_as_uint(f); b16 x;
  if ((u & 0x7fffffffu) > 0x7f800000u) { x.b = 0x7fc0; return x; }
  u += 0x7fffu + ((u >> 16) & 1u); x.b = (unsigned short)(u >> 16); return x;
}
inline float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
inline float warp_max(float v) { for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }
inline void report(int* err, int code) { atomicCAS(err, 0, code); }
inline double tod(h16 x) { return h2f(x); }
inline double tod(b16 x) { return b2f(x); }
inline double tod(float x) { return x; }
inline double tod(double x) { return x; }
inline void fromd(double v, h16* p) { *p = f2h((float)v); }
inline void fromd(double v, b16* p) { *p = f2b((float)v); }
inline void fromd(double v, float* p) { *p = (float)v; }
inline void fromd(double v, double* p) { *p = v; }

// Tensor cores: mma.sync.m16n8k16 (row.col, fp32 accumulation) as the
// PTX ISA lays out its fragments — lane l = 4g + t4 holds A rows g, g+8
// at columns 2t4(+1), +8; B rows 2t4(+1), +8 at column g; C rows g, g+8
// at columns 2t4(+1). The warp's fragments meet in memory between two
// warp barriers. cp.async is a plain copy.
static unsigned mma_a[32][32][4], mma_b[32][32][2];
inline float h16bits(unsigned short b) { _Float16 h; memcpy(&h, &b, 2); return (float)h; }
inline float b16bits(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }
template <class F>
inline void mma_emul(float* c, const unsigned* a, unsigned b0, unsigned b1, F cvt) {
  unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
  for (int i = 0; i < 4; ++i) mma_a[w][l][i] = a[i];
  mma_b[w][l][0] = b0; mma_b[w][l][1] = b1;
  warp_bar[w]->arrive_and_wait();
  auto half = [&](unsigned r, int k) { return cvt((unsigned short)(r >> ((k & 1) * 16))); };
  int g = l / 4, t4 = l % 4;
  for (int e = 0; e < 4; ++e) {
    int row = g + (e >= 2 ? 8 : 0), col = 2 * t4 + (e & 1);
    float acc = 0.f;
    for (int k = 0; k < 16; ++k)
      acc += half(mma_a[w][(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k)
           * half(mma_b[w][col * 4 + (k % 8) / 2][k / 8], k);
    c[e] += acc;
  }
  warp_bar[w]->arrive_and_wait();
}
inline void mma_f16(float* c, const unsigned* a, unsigned b0, unsigned b1) { mma_emul(c, a, b0, b1, h16bits); }
inline void mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) { mma_emul(c, a, b0, b1, b16bits); }
inline unsigned pack_f16(float lo, float hi) { return (unsigned)f2h(lo).b | ((unsigned)f2h(hi).b << 16); }
inline unsigned pack_bf16(float lo, float hi) { return (unsigned)f2b(lo).b | ((unsigned)f2b(hi).b << 16); }
inline void cp_async16(void* d, const void* s) { memcpy(d, s, 16); }
inline void cp_async_wait_all() {}
// cp.async with a source size (the rest zero-filled) and its groups
// (hgemm.rs); ldmatrix.x4 — lanes 8i..8i+7 give the row addresses of
// matrix i, lane l receives row l/4, elements 2(l%4) and 2(l%4)+1 of each.
inline void cp_async16z(void* d, const void* s, unsigned n) { memset(d, 0, 16); if (n) memcpy(d, s, n); }
inline void cp_async_commit() {}
#define RLX_HGEMM_SMEM static unsigned short hsm[1 << 17] __attribute__((aligned(16)))
template <int N> inline void cp_async_wait() {}
static const unsigned short* ldsm_rows[32][32];
inline void ldsm4(unsigned* r, const void* p) {
  unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
  ldsm_rows[w][l] = (const unsigned short*)p;
  warp_bar[w]->arrive_and_wait();
  for (int i = 0; i < 4; ++i) {
    const unsigned short* row = ldsm_rows[w][8 * i + l / 4];
    r[i] = (unsigned)row[2 * (l % 4)] | ((unsigned)row[2 * (l % 4) + 1] << 16);
  }
  warp_bar[w]->arrive_and_wait();
}
// ldmatrix.x4.trans: lane l receives column l/4 of rows 2(l%4), 2(l%4)+1.
inline void ldsm4t(unsigned* r, const void* p) {
  unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
  ldsm_rows[w][l] = (const unsigned short*)p;
  warp_bar[w]->arrive_and_wait();
  for (int i = 0; i < 4; ++i) {
    const unsigned short* r0 = ldsm_rows[w][8 * i + 2 * (l % 4)];
    const unsigned short* r1 = ldsm_rows[w][8 * i + 2 * (l % 4) + 1];
    r[i] = (unsigned)r0[l / 4] | ((unsigned)r1[l / 4] << 16);
  }
  warp_bar[w]->arrive_and_wait();
}
// Programmatic dependent launch: launches run one after another here, so
// the previous grid is always complete when a kernel starts.
inline void grid_dep_wait() {}
inline void grid_dep_launch() {}

// Every block of the grid, one after another; a block's threads at once.
// A thread that returns drops out of its block's and warp's barriers.
static void launch(dim3 g, unsigned threads, std::function<void()> k) {
  gridDim = g; blockDim = dim3{threads, 1, 1};
  for (unsigned z = 0; z < g.z; ++z) for (unsigned y = 0; y < g.y; ++y) for (unsigned x = 0; x < g.x; ++x) {
    std::barrier<> bb(threads); block_bar = &bb;
    unsigned nw = (threads + 31) / 32;
    std::vector<std::barrier<>*> wb;
    for (unsigned w = 0; w < nw; ++w) wb.push_back(new std::barrier<>(std::min(32u, threads - 32 * w)));
    warp_bar = wb;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) ts.emplace_back([&, t] {
      blockIdx = dim3{x, y, z}; threadIdx = dim3{t, 0, 0};
      k();
      warp_bar[t / 32]->arrive_and_drop(); block_bar->arrive_and_drop();
    });
    for (auto& th : ts) th.join();
    for (auto* b : wb) delete b;
  }
}

// C (m x n, column-major, ldc) = op(A) op(B) [+ bias per row] [+ R], batched.
template <class T, class TC>
static void gemm(bool ta, bool tb, int m, int n, int k, const T* A, int lda, long long sa,
                 const T* B, int ldb, long long sb, TC* C, int ldc, long long sc, int batch,
                 const T* bias, long long sbias, const TC* R) {
  for (int t = 0; t < batch; ++t) for (int j = 0; j < n; ++j) for (int i = 0; i < m; ++i) {
    double acc = 0;
    for (int l = 0; l < k; ++l) {
      double a = tod(A[t * sa + (ta ? l + (long long)i * lda : i + (long long)l * lda)]);
      double b = tod(B[t * sb + (tb ? j + (long long)l * ldb : l + (long long)j * ldb)]);
      acc += a * b;
    }
    long long at = t * sc + i + (long long)j * ldc;
    // cuBLASLt: D = A·B + beta·C(=R) + bias, in fp32 for 16-bit types.
    float d = (float)acc;
    if (R) d += (float)tod(R[at]);
    if (bias) d += (float)tod(bias[t * sbias + i]);
    fromd(d, &C[at]);
  }
}
"#;

fn storage(d: DType) -> &'static str {
    match d {
        DType::F16 => "h16",
        DType::BF16 => "b16",
        DType::F64 => "double",
        _ => "float",
    }
}

/// The C++ expression of a device address.
fn addr(p: &Ptr) -> String {
    let base = match p.root {
        Root::Arena(off) => format!("(arena + {off})"),
        Root::Input(i) => format!("inp[{i}]"),
        Root::Const(i) => format!("cst[{i}]"),
        Root::Scratch(i) => format!("scr[{i}]"),
    };
    format!("({base} + {})", p.byte)
}

/// Parameter types of kernel `name` in `src` (`const float*`, `int*`, ...).
fn param_types(src: &str, name: &str) -> Vec<String> {
    let at = src
        .find(&format!("{name}("))
        .unwrap_or_else(|| panic!("kernel {name} not in the source"));
    let rest = &src[at + name.len() + 1..];
    let params = &rest[..rest.find(") {").expect("kernel signature")];
    params
        .split(", ")
        .map(|p| {
            let p = p.replace("__restrict__ ", "");
            p[..p.rfind(' ').expect("typed parameter")].to_string()
        })
        .collect()
}

/// The plan as a C++ namespace `ns`: its kernels and `run(in, out)`,
/// which runs the launches on the inputs (then constants) read from file
/// `in` and writes the outputs' bytes then the error flag to `out`.
fn unit(p: &plan::Plan, ns: &str) -> String {
    // Kernels keep C++ linkage inside the namespace (names repeat across plans).
    let kernels = p
        .source
        .replace(rlx_cuda::ctype::PREAMBLE, "")
        .replace("extern \"C\" __global__", "__global__")
        .replace("extern __shared__", "extern");
    // Dynamic shared memory (`extern __shared__ float smem[]` in a kernel
    // names this namespace's array).
    let mut s = format!("namespace {ns} {{\nalignas(256) float smem[1 << 16];\n{kernels}\nstatic int run(const char* in_path, const char* out_path) {{\n  FILE* fi = fopen(in_path, \"rb\");\n");
    let _ = writeln!(
        s,
        "  unsigned char* arena = (unsigned char*)aligned_alloc(256, {});",
        (p.arena_bytes.max(1)).div_ceil(256) * 256
    );
    // Unwritten memory reads as NaN-ish garbage, not zeros.
    let _ = writeln!(s, "  memset(arena, 0xff, {});", p.arena_bytes.max(1));
    let read = |s: &mut String, what: &str, k: usize, bytes: usize| {
        let _ = writeln!(
            s,
            "  {what}[{k}] = (unsigned char*)aligned_alloc(256, {n}); if (fread({what}[{k}], 1, {bytes}, fi) != {bytes}) return 3;",
            n = bytes.max(1).div_ceil(256) * 256
        );
    };
    let _ = writeln!(s, "  unsigned char* inp[{}];", p.inputs.len().max(1));
    // Grouped inputs (weights of sibling GEMMs run as one batched GEMM)
    // back to back, `group_stride` apart, as the executable allocates them.
    for group in &p.input_groups {
        let stride = plan::group_stride(&p.inputs[group[0]]);
        let _ = writeln!(
            s,
            "  {{ unsigned char* g = (unsigned char*)aligned_alloc(256, {}); {} }}",
            stride * group.len(),
            group
                .iter()
                .enumerate()
                .map(|(t, k)| format!("inp[{k}] = g + {};", t * stride))
                .collect::<String>()
        );
    }
    for (k, ty) in p.inputs.iter().enumerate() {
        let bytes = ty.dtype.storage_bytes(ty.shape.numel()).unwrap();
        if p.input_groups.iter().any(|g| g.contains(&k)) {
            let _ = writeln!(
                s,
                "  if (fread(inp[{k}], 1, {bytes}, fi) != {bytes}) return 3;"
            );
        } else {
            read(&mut s, "inp", k, bytes);
        }
    }
    let _ = writeln!(s, "  unsigned char* cst[{}];", p.consts.len().max(1));
    for (k, t) in p.consts.iter().enumerate() {
        read(&mut s, "cst", k, rlx_cuda::host::bytes_of(t).unwrap().len());
    }
    let _ = writeln!(s, "  unsigned char* scr[{}];", p.scratch.len().max(1));
    for (k, &n) in p.scratch.iter().enumerate() {
        let _ = writeln!(
            s,
            "  scr[{k}] = (unsigned char*)aligned_alloc(256, {});",
            n.max(1).div_ceil(256) * 256
        );
    }
    s += "  int* err = (int*)calloc(1, 4);\n";
    for l in &p.launches {
        match l {
            Launch::Kernel {
                func,
                grid,
                block,
                args,
                err,
                ..
            } => {
                let types = param_types(&p.source, func);
                let mut vals: Vec<String> = args.iter().map(addr).collect();
                if *err {
                    vals.push("err".into());
                }
                assert_eq!(types.len(), vals.len(), "{func}: parameters vs arguments");
                let call: Vec<String> = types
                    .iter()
                    .zip(&vals)
                    .map(|(t, v)| format!("({t}){v}"))
                    .collect();
                let _ = writeln!(
                    s,
                    "  launch(dim3{{{}, {}, {}}}, {block}, [&] {{ {func}({}); }});",
                    grid.0,
                    grid.1,
                    grid.2,
                    call.join(", ")
                );
            }
            Launch::Gemm { gemm: g, .. } => {
                let (t, tc) = (storage(g.dtype), storage(g.c_dtype));
                let bias = g
                    .bias
                    .as_ref()
                    .map_or("nullptr".into(), |b| format!("(const {t}*){}", addr(b)));
                let res = g
                    .residual
                    .as_ref()
                    .map_or("nullptr".into(), |r| format!("(const {tc}*){}", addr(r)));
                let _ = writeln!(
                    s,
                    "  gemm<{t}, {tc}>({}, {}, {}, {}, {}, (const {t}*){}, {}, {}, (const {t}*){}, {}, {}, ({tc}*){}, {}, {}, {}, {bias}, {}, {res});",
                    g.trans_a,
                    g.trans_b,
                    g.m,
                    g.n,
                    g.k,
                    addr(&g.a),
                    g.lda,
                    g.stride_a,
                    addr(&g.b),
                    g.ldb,
                    g.stride_b,
                    addr(&g.c),
                    g.ldc,
                    g.stride_c,
                    g.batch,
                    g.bias_stride
                );
            }
            Launch::GemmBatched { .. } => panic!("pointer-array GEMMs are not emulated"),
        }
    }
    s += "  FILE* fo = fopen(out_path, \"wb\");\n";
    for o in &p.outputs {
        let bytes = o.dtype.storage_bytes(o.dims.iter().product()).unwrap();
        let ptr = Ptr {
            root: o.root,
            byte: o.offset * o.dtype.storage_bytes(1).unwrap() as i64,
        };
        let _ = writeln!(s, "  fwrite({}, 1, {bytes}, fo);", addr(&ptr));
    }
    s += "  fwrite(err, 1, 4, fo); fclose(fo); fclose(fi);\n  return 0;\n}\n}\n";
    s
}

/// Whether the emulation can run plan `p`: no inline PTX in its kernels
/// (outside the preamble's helpers) and no pointer-array GEMM.
fn emulable(p: &plan::Plan) -> bool {
    !p.source
        .replace(rlx_cuda::ctype::PREAMBLE, "")
        .contains("asm")
        && !p
            .launches
            .iter()
            .any(|l| matches!(l, Launch::GemmBatched { .. }))
}

/// One executable running any of `plans` (argv: inputs, outputs, index).
fn build(name: &str, plans: &[&plan::Plan]) -> Result<PathBuf, String> {
    let mut src = String::from(PRELUDE);
    let mut cases = String::new();
    for (k, p) in plans.iter().enumerate() {
        src += &unit(p, &format!("g{k}"));
        let _ = writeln!(cases, "    case {k}: return g{k}::run(argv[1], argv[2]);");
    }
    src += &format!("int main(int argc, char** argv) {{\n  switch (atoi(argv[3])) {{\n{cases}  }}\n  return 2;\n}}\n");
    gxx(name, &src)
}

/// `src` compiled by g++ into an executable in a directory of its own
/// (named `name`).
fn gxx(name: &str, src: &str) -> Result<PathBuf, String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let (cpp, exe) = (dir.join("k.cpp"), dir.join("k"));
    std::fs::write(&cpp, src).unwrap();
    let out = Command::new("g++")
        .args(["-std=c++20", "-O1", "-w", "-pthread", "-o"])
        .arg(&exe)
        .arg(&cpp)
        .output()
        .unwrap();
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{name}: g++ failed:\n{}",
            log.lines().take(30).collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(exe)
}

/// Run plan `which` of `exe` on `inputs`: its outputs and the error flag.
fn exec(
    exe: &PathBuf,
    which: usize,
    p: &plan::Plan,
    inputs: &[HostTensor],
) -> Result<(Vec<HostTensor>, i32), String> {
    let dir = exe.parent().unwrap();
    let (fin, fout) = (
        dir.join(format!("in{which}.bin")),
        dir.join(format!("out{which}.bin")),
    );
    let mut bytes = Vec::new();
    for t in inputs.iter().chain(&p.consts) {
        bytes.extend_from_slice(rlx_cuda::host::bytes_of(t).map_err(|e| e.to_string())?);
    }
    std::fs::write(&fin, bytes).unwrap();
    let run = Command::new(exe)
        .arg(&fin)
        .arg(&fout)
        .arg(which.to_string())
        .output()
        .unwrap();
    if !run.status.success() {
        return Err(format!("emulated run failed: {run:?}"));
    }
    let got = std::fs::read(&fout).unwrap();
    let mut at = 0;
    let mut outs = Vec::new();
    for o in &p.outputs {
        let n = o.dtype.storage_bytes(o.dims.iter().product()).unwrap();
        outs.push(
            rlx_cuda::host::from_bytes(o.dtype, o.dims.clone().into(), &got[at..at + n])
                .map_err(|e| e.to_string())?,
        );
        at += n;
    }
    let err = i32::from_ne_bytes(got[at..at + 4].try_into().unwrap());
    Ok((outs, err))
}

fn plan_of(text: &str) -> Option<plan::Plan> {
    let g = parse(text).ok()?;
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).ok()?;
    let ir = rlx_opt::plan(l.graph).ok()?;
    plan::plan(&ir).ok()
}

/// A small BERT (2 layers, 4 heads of 32, seq 32, batch 2) as `dtype`,
/// optimized like `rlx::compile` does and planned with or without the
/// tensor-core attention (f16/bf16 only); its inputs: ids,
/// a padding mask with rows of different lengths, token types 0 and 1,
/// then weights spread over ±0.1.
fn small_bert(dtype: &str, tensor_cores: bool) -> (plan::Plan, rlx_ir::Graph, Vec<HostTensor>) {
    let cfg = rlx_models::bert::BertConfig::from_json(
        r#"{"vocab_size": 50, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 512, "max_position_embeddings": 64, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#,
    )
    .unwrap();
    let (b, sq) = (2, 32);
    let g = rlx_models::bert::Bert::new(cfg, true).graph(b, sq).unwrap();
    let g = parse(&rlx_ir::text::print(&g).replace("f32", dtype)).unwrap();
    let eval =
        |g: &rlx_ir::Graph, i: &[HostTensor]| rlx_cpu::run_graph(g, i).map_err(|e| e.to_string());
    let (opt, _) = rlx_opt::compile_pipeline(&g, eval).unwrap();
    let l = legalize(&opt, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let ir = rlx_opt::plan(l.graph).unwrap();
    let p = plan::plan_with(&ir, tensor_cores, AttnSplit::Auto).unwrap();
    let mut ins = Vec::new();
    let ids: Vec<i64> = (0..b * sq).map(|k| ((k * 7 + 3) % 50) as i64).collect();
    let mask: Vec<i64> = (0..b * sq)
        .map(|k| i64::from(k % sq < sq - 9 * (k / sq)))
        .collect();
    let types: Vec<i64> = (0..b * sq).map(|k| i64::from(k % sq >= sq / 2)).collect();
    for v in [ids, mask, types] {
        ins.push(HostTensor::from_slice(&v, [b, sq]).unwrap());
    }
    for (k, ty) in g.input_types().iter().enumerate().skip(3) {
        let v = (0..ty.shape.numel())
            .map(|j| (((j * 29 + k * 13) % 101) as f64 / 500.0) - 0.1)
            .collect();
        ins.push(HostTensor::from_f64(ty.dtype, ty.shape.clone(), v).unwrap());
    }
    (p, g, ins)
}

/// Whether `g++` compiles what the emulation needs (C++20 `<barrier>`,
/// `_Float16`); probed once.
fn gxx_ok() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gxx_probe");
        let _ = std::fs::create_dir_all(&dir);
        let src = dir.join("p.cpp");
        let probe = "#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); _Float16 h = (_Float16)1.5f; return (float)h == 1.5f ? 0 : 1; }\n";
        std::fs::write(&src, probe).is_ok()
            && Command::new("g++")
                .args(["-std=c++20", "-pthread", "-o"])
                .arg(dir.join("p"))
                .arg(&src)
                .output()
                .is_ok_and(|o| o.status.success())
            && Command::new(dir.join("p"))
                .status()
                .is_ok_and(|s| s.success())
    })
}

/// Plan `text`, run it through the emulation on `inputs`: the outputs
/// and the error flag.
fn emulate(name: &str, text: &str, inputs: &[HostTensor]) -> (Vec<HostTensor>, i32) {
    let p = plan_of(text).expect("plannable");
    let exe = build(name, &[&p]).unwrap();
    exec(&exe, 0, &p, inputs).unwrap()
}

/// Deterministic inputs: floats spread over [-2, 2], integer inputs
/// (indices) cycling through 0, 1, 2.
fn inputs_for(text: &str) -> Vec<HostTensor> {
    let g = parse(text).unwrap();
    g.input_types()
        .iter()
        .enumerate()
        .map(|(k, ty)| {
            let n = ty.shape.numel();
            let v: Vec<f64> = if matches!(ty.dtype, DType::I32 | DType::I64) {
                (0..n).map(|j| ((j * 5 + 1) % 3) as f64).collect()
            } else {
                (0..n)
                    .map(|j| (((j * 37 + k * 11) % 97) as f64 / 24.0) - 2.0)
                    .collect()
            };
            HostTensor::from_f64(ty.dtype, ty.shape.clone(), v).unwrap()
        })
        .collect()
}

/// Max |got - want| / (1 + |want|) over the elements.
fn max_rel(got: &HostTensor, want: &HostTensor) -> f64 {
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    assert_eq!(g.len(), w.len());
    g.iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
        .fold(0.0, f64::max)
}

/// Emulate `text` in f32, f16 and bf16 and compare with the CPU reference
/// on the same graph: f32 to 1e-5, f16 to 2e-3, bf16 to 1.6e-2 (a few
/// units in the last place of the stored results).
fn check(name: &str, text: &str) {
    check_in(
        name,
        text,
        &[("f32", 1e-5), ("f16", 2e-3), ("bf16", 1.6e-2)],
    );
}

/// [`check`] in these (dtype, tolerance) pairs only.
fn check_in(name: &str, text: &str, dtypes: &[(&str, f64)]) {
    if !gxx_ok() {
        eprintln!("no g++: {name} not emulated");
        return;
    }
    for &(dt, tol) in dtypes {
        let t = text.replace("f32", dt);
        let ins = inputs_for(&t);
        let want = rlx_cpu::run_graph(&parse(&t).unwrap(), &ins).unwrap();
        let (got, err) = emulate(&format!("{name}_{dt}"), &t, &ins);
        assert_eq!(err, 0, "{name}<{dt}>: error flag");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let d = max_rel(g, w);
            assert!(
                d <= tol,
                "{name}<{dt}> output {k}: max rel diff {d:e} > {tol:e}"
            );
        }
    }
}

const EMBEDDINGS_LN: &str = "graph @g(%ids: i64[2,16], %tt: i64[2,16], %w: f32[10,64], %p: f32[16,64], %ty: f32[3,64], %g: f32[64], %be: f32[64]) {\n  %pi = arange() {dtype=i64, len=16, start=0.0, step=1.0}\n  %a = embedding(%w, %ids)\n  %b = embedding(%p, %pi)\n  %c = embedding(%ty, %tt)\n  %s = fused_elementwise(%a, %c, %b) {body=graph @region(%in0: f32[2,16,64], %in1: f32[2,16,64], %in2: f32[16,64]) {\n    %3 = add(%in0, %in1) : f32[2,16,64]\n    %4 = add(%in2, %3) : f32[2,16,64]\n    return %4\n  }}\n  %n = layer_norm(%s, %g, %be) {axis=2, eps=1e-5}\n  return %n\n}";

#[test]
fn embeddings_summed_inside_the_layer_norm() {
    check("embeddings_ln", EMBEDDINGS_LN);
}

#[test]
fn attention_reads_the_ids_of_a_nonzero_mask() {
    check(
        "nonzero_mask",
        "graph @g(%q: f32[2,4,16,8], %k: f32[2,4,16,8], %v: f32[2,4,16,8], %ids: i64[2,16]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,16]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}",
    );
}

#[test]
fn tiled_attention_over_keys_past_one_warp() {
    // 100 and 40 keys: 4 and 2 keys per lane, the last ones partial (the
    // lanes past the end read the last key and drop it); a bias and a
    // causal mask; query rows past one block.
    check(
        "attention_keys_100_bias",
        "graph @g(%q: f32[3,37,32], %k: f32[3,100,32], %v: f32[3,100,48], %m: f32[3,37,100]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}",
    );
    check(
        "attention_keys_40_causal",
        "graph @g(%q: f32[2,2,40,16], %k: f32[2,2,40,16], %v: f32[2,2,40,8]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}",
    );
}

#[test]
fn four_rows_per_warp_f32_attention_over_many_heads() {
    // 48+ heads in f32 take `attention_rows` (f16/bf16 there run cuBLAS
    // batched GEMMs, which the emulation lacks): a keep mask and a bias
    // the same for every row (read once per key), over 48 and 20 keys
    // (lanes past the last key); a bias per row; float4 staging of K and
    // V (head dims 32, 12) and the scalar copy (V rows of 6).
    const F32: &[(&str, f64)] = &[("f32", 1e-5)];
    for (name, text) in [
        ("rows_keep_per_key", "graph @g(%q: f32[4,12,40,32], %k: f32[4,12,48,32], %v: f32[4,12,48,32], %m: bool[4,1,1,48]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  return %o\n}"),
        ("rows_bias_per_key", "graph @g(%q: f32[48,9,12], %k: f32[48,20,12], %v: f32[48,20,8], %m: f32[48,1,20]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
        ("rows_bias_per_row", "graph @g(%q: f32[48,9,12], %k: f32[48,20,12], %v: f32[48,20,8], %m: f32[48,9,20]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
        ("rows_scalar_staging_causal", "graph @g(%q: f32[48,10,8], %k: f32[48,12,8], %v: f32[48,12,6]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ] {
        let p = plan_of(text).expect("plannable");
        // attention_rows' marks: 4 rows of probabilities per warp, and
        // the float4 staging where the head dims allow it.
        assert!(p.source.contains("float sc[4]"), "{name}: not attention_rows");
        assert_eq!(
            p.source.contains("x[u] = *(const float4*)"),
            name != "rows_scalar_staging_causal",
            "{name}: staging"
        );
        check_in(name, text, F32);
    }
}

/// Tensor-core attention shapes (f16/bf16): a bias per row with partial
/// 16-row tiles and dh 64; a causal mask over 100 rows (7 row tiles);
/// a padding keep-mask and a bias broadcast over rows (staged in shared
/// memory); a mask read from ids; fewer rows than one warp's 16; heads
/// merged again by a permute + reshape, with q/k/v computed into the
/// arena (the planner may give the output q's, k's or v's buffer).
const TC_CASES: &[(&str, &str)] = &[
    ("tc_bias_rows", "graph @g(%q: f32[2,2,40,64], %k: f32[2,2,128,64], %v: f32[2,2,128,32], %m: f32[2,1,40,128]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("tc_causal_100", "graph @g(%q: f32[3,100,32], %k: f32[3,112,32], %v: f32[3,112,16]) {\n  %o = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  return %o\n}"),
    ("tc_keep_merged", "graph @g(%q: f32[2,3,48,32], %k: f32[2,3,48,32], %v: f32[2,3,48,32], %m: bool[2,1,1,48]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"custom\"}\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,48,96]}\n  return %r\n}"),
    ("tc_bias_broadcast", "graph @g(%q: f32[2,2,24,32], %k: f32[2,2,32,32], %v: f32[2,2,32,16], %m: f32[2,1,1,32]) {\n  %o = attention(%q, %k, %v, %m) {mask_kind=\"bias\"}\n  return %o\n}"),
    ("tc_ids_mask", "graph @g(%q: f32[2,2,64,32], %k: f32[2,2,64,32], %v: f32[2,2,64,32], %ids: i64[2,64]) {\n  %z = constant() {value=tensor<i64[]> [0]}\n  %m = ne(%ids, %z)\n  %r = reshape(%m) {shape=[2,1,1,64]}\n  %o = attention(%q, %k, %v, %r) {mask_kind=\"custom\"}\n  return %o\n}"),
    ("tc_few_rows", "graph @g(%q: f32[3,5,16], %k: f32[3,16,16], %v: f32[3,16,8]) {\n  %o = attention(%q, %k, %v)\n  return %o\n}"),
    ("tc_in_place", "graph @g(%x: f32[2,64,64], %y: f32[2,64,64], %z: f32[2,64,64]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,64,2,32]}\n  %rb = reshape(%b) {shape=[2,64,2,32]}\n  %rc = reshape(%c) {shape=[2,64,2,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,64,64]}\n  return %r\n}"),
    // q's buffer still read after the attention: the output may take k's.
    ("tc_in_place_k", "graph @g(%x: f32[2,64,64], %y: f32[2,64,64], %z: f32[2,64,64]) {\n  %a = neg(%x)\n  %b = neg(%y)\n  %c = neg(%z)\n  %ra = reshape(%a) {shape=[2,64,2,32]}\n  %rb = reshape(%b) {shape=[2,64,2,32]}\n  %rc = reshape(%c) {shape=[2,64,2,32]}\n  %q = permute(%ra) {perm=[0,2,1,3]}\n  %k = permute(%rb) {perm=[0,2,1,3]}\n  %v = permute(%rc) {perm=[0,2,1,3]}\n  %o = attention(%q, %k, %v)\n  %p = permute(%o) {perm=[0,2,1,3]}\n  %r = reshape(%p) {shape=[2,64,64]}\n  %s = add(%r, %a)\n  return %s\n}"),
];

/// The tensor-core attention under every block split (the first version
/// `Off`, the automatic pick, 1/2/4/8 warps per block) against the CPU
/// reference: f16 to 3e-3 and bf16 to 2.5e-2 max rel diff (P is rounded
/// to the storage type before P·V, as on the GPU). A wrong fragment index
/// or a block reading K/V another block already overwrote is off by O(1).
#[test]
fn tensor_core_attention_every_split() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let splits = [
        AttnSplit::Off,
        AttnSplit::Auto,
        AttnSplit::Warps(1),
        AttnSplit::Warps(2),
        AttnSplit::Warps(4),
        AttnSplit::Warps(8),
    ];
    // One executable per dtype holding every (case, split) plan: one g++
    // run each instead of one per case.
    for (dt, tol) in [("f16", 3e-3), ("bf16", 2.5e-2)] {
        let mut runs = Vec::new();
        for (name, text) in TC_CASES {
            let t = text.replace("f32", dt);
            let g = parse(&t).unwrap();
            let ins = inputs_for(&t);
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).unwrap();
            let ir = rlx_opt::plan(l.graph).unwrap();
            for &s in &splits {
                let p = plan::plan_with(&ir, true, s).unwrap();
                assert!(
                    p.source
                        .replace(rlx_cuda::ctype::PREAMBLE, "")
                        .contains(&format!("mma_{dt}(")),
                    "{name}<{dt}> {s:?}: not the tensor-core kernel"
                );
                assert!(emulable(&p), "{name}<{dt}> {s:?}");
                runs.push((format!("{name}<{dt}> {s:?}"), p, ins.clone(), want.clone()));
            }
        }
        let plans: Vec<&plan::Plan> = runs.iter().map(|r| &r.1).collect();
        let exe = build(&format!("tensor_core_attention_{dt}"), &plans).unwrap();
        for (k, (label, p, ins, want)) in runs.iter().enumerate() {
            let (got, err) = exec(&exe, k, p, ins).unwrap();
            assert_eq!(err, 0, "{label}: error flag");
            for (o, w) in got.iter().zip(want) {
                let d = max_rel(o, w);
                eprintln!("{label}: max rel diff {d:e}");
                assert!(d <= tol, "{label}: max rel diff {d:e} > {tol:e}");
            }
        }
    }
}

#[test]
fn gather_read_by_its_elementwise_reader() {
    check(
        "gather_outer",
        "graph @g(%t: f32[4,5,6], %i: i64[7], %b: f32[6]) {\n  %x = gather(%t, %i) {axis=1}\n  %y = add(%x, %b)\n  return %y\n}",
    );
}

#[test]
fn vectorized_elementwise_kernels() {
    // Bias + GELU after a GEMM (8 f16 / 4 f32 per thread), a row broadcast
    // along the last axis, an elementwise chain in place.
    check(
        "bias_gelu",
        "graph @g(%x: f32[4,64], %w: f32[64,48], %b: f32[48]) {\n  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}\n  return %y\n}",
    );
    check(
        "row_broadcast",
        "graph @g(%x: f32[8,16], %y: f32[8,1]) {\n  %z = mul(%x, %y)\n  %e = exp(%z)\n  return %e\n}",
    );
}

/// sentence-transformers' pooling head as rlx-models builds it: the
/// mask's cast is read by the masked sum and the count, the mean by the
/// squared norm and the final division.
const POOLING: &str = "graph @g(%x: f32[2,8,16], %m: i64[2,8]) {\n  %mf = cast(%m) {dtype=f32}\n  %m3 = unsqueeze(%mf) {axes=[-1]}\n  %hm = mul(%x, %m3)\n  %s = reduce_sum(%hm) {axes=[1]}\n  %c = reduce_sum(%m3) {axes=[1]}\n  %cc = clamp(%c) {min=1e-9}\n  %mean = div(%s, %cc)\n  %sq = mul(%mean, %mean)\n  %ss = reduce_sum(%sq) {axes=[-1], keepdim=true}\n  %nc = fused_elementwise(%ss) {body=graph @region(%in0: f32[2,1]) {\n    %1 = sqrt(%in0) : f32[2,1]\n    %2 = clamp(%1) {min=1e-12} : f32[2,1]\n    return %2\n  }}\n  %o = div(%mean, %nc)\n  return %o\n}";

/// A value read by two standalone elementwise kernels, one through a
/// transposing view.
const TWO_READERS: &str = "graph @g(%x: f32[4,8], %y: f32[4,8], %z: f32[8,4]) {\n  %a = exp(%x)\n  %b = add(%a, %y)\n  %t = permute(%a) {perm=[1, 0]}\n  %c = mul(%t, %z)\n  return %b, %c\n}";

#[test]
fn values_recomputed_by_their_readers() {
    // The pooling head: the cast and the mean are not kernels of their
    // own (launches: masked sum, count + clamp, squared norm + sqrt +
    // clamp + division), and the results match the CPU in every dtype.
    let kernels_of = |text: &str| {
        let p = plan_of(text).unwrap();
        let ops: Vec<String> = p
            .kernels
            .iter()
            .map(|(n, _)| p.node_ops[*n].clone())
            .collect();
        (p.launches.len(), ops)
    };
    let (n, ops) = kernels_of(POOLING);
    assert_eq!(n, 3, "pooling launches: {ops:?}");
    assert_eq!(ops, ["reduce_sum", "reduce_sum", "reduce_sum"]);
    check("pooling_recomputed", POOLING);
    let (n, ops) = kernels_of(TWO_READERS);
    assert_eq!(n, 2, "launches: {ops:?}");
    assert!(!ops.contains(&"exp".to_string()));
    check("two_readers_recomputed", TWO_READERS);
}

#[test]
fn small_bert_end_to_end() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    // f32 strict; f16 against the CPU's f16 run of the same graph, with
    // the plain and the tensor-core attention.
    for (dt, tc, tol) in [
        ("f32", false, 1e-5),
        ("f16", false, 2e-3),
        ("f16", true, 2e-3),
    ] {
        let (p, g, ins) = small_bert(dt, tc);
        let kernels = p.source.replace(rlx_cuda::ctype::PREAMBLE, "");
        assert_eq!(kernels.contains("mma_f16("), tc);
        // Per layer: QKV GEMM, attention (one kernel: tensor-core or
        // tiled f32), output GEMM + residual, norm, up GEMM, bias + GELU,
        // down GEMM + residual, norm; embeddings + norm one kernel; the
        // pooling head three reductions (the mask's cast and the mean
        // recomputed by their readers).
        let tail: Vec<&str> = p.kernels[p.kernels.len() - 3..]
            .iter()
            .map(|(n, _)| p.node_ops[*n].as_str())
            .collect();
        assert_eq!(tail, ["reduce_sum"; 3], "{dt} pooling head");
        assert_eq!(p.launches.len(), 1 + 2 * 8 + 3, "{dt} tc {tc} launches");
        let exe = build(&format!("small_bert_{dt}_{tc}"), &[&p]).unwrap();
        let (got, err) = exec(&exe, 0, &p, &ins).unwrap();
        assert_eq!(err, 0);
        let want = rlx_cpu::run_graph(&g, &ins).unwrap();
        for (k, (o, w)) in got.iter().zip(&want).enumerate() {
            let d = max_rel(o, w);
            eprintln!("small BERT {dt} (tensor cores: {tc}) output {k}: max rel diff {d:e}");
            assert!(
                d <= tol,
                "small BERT {dt} (tensor cores: {tc}) output {k}: max rel diff {d:e} > {tol:e}"
            );
        }
    }
}

#[test]
fn an_index_out_of_range_in_a_fused_gather_sets_the_error_flag() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let mut ins = inputs_for(EMBEDDINGS_LN);
    let mut ids = vec![1f64; 32];
    ids[17] = 10.0;
    ins[0] = HostTensor::from_f64(DType::I64, ins[0].shape().clone(), ids).unwrap();
    let (_, err) = emulate("embeddings_oob", EMBEDDINGS_LN, &ins);
    // Node index + 1 of the word-embedding lookup.
    let g = parse(EMBEDDINGS_LN).unwrap();
    let l = legalize(&g, &ClaimsOnly, &DispatchOptions::default()).unwrap();
    let ir = rlx_opt::plan(l.graph).unwrap();
    let p = plan::plan(&ir).unwrap();
    assert!(err > 0, "no error reported");
    assert_eq!(p.node_ops[(err - 1) as usize], "embedding");
}

/// `got` within `rtol`/`atol` of `want` (NaN matches NaN), integers exact;
/// 16-bit outputs with CUDA's tolerances (one rounding each).
fn close(got: &HostTensor, want: &HostTensor, rtol: f64, atol: f64) -> Result<(), String> {
    let (rtol, atol) = match want.dtype() {
        DType::F16 | DType::BF16 => rlx_cuda::tolerance(want.dtype(), rtol, atol),
        _ => (rtol, atol),
    };
    rlx_ref::conformance::close(got, want, rtol, atol)
}

/// Every reference-vector case the CUDA planner takes, as written and as
/// f16/bf16 copies of its f32 graphs, on the case's inputs, against the
/// CPU reference on the same graph — where the emulation can run its plan
/// (not the tensor-core attention). Minutes on 2 cores:
/// `cargo test -p rlx-cuda --test emulate -- --ignored`.
#[test]
#[ignore]
fn all_vector_cases() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/ops");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let (mut pass, mut fail, mut skipped) = (0, 0, 0);
    for f in files {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let op = v["op"].as_str().unwrap_or("?").to_string();
        // (name, plan, inputs, CPU reference) of this file's cases.
        let mut cases = Vec::new();
        for case in v["cases"].as_array().cloned().unwrap_or_default() {
            if case.get("moments").is_some() || case.get("error").is_some() {
                continue;
            }
            let src = case["graph"].as_str().unwrap_or("").to_string();
            let Some(Ok(ins)) = case["inputs"].as_array().map(|a| {
                a.iter()
                    .map(HostTensor::from_json)
                    .collect::<Result<Vec<_>, _>>()
            }) else {
                continue;
            };
            for dt in ["f32", "f16", "bf16"] {
                if dt != "f32" && !src.contains("f32") {
                    break;
                }
                let text = src.replace("f32", dt);
                let name = format!("{op}/{}<{dt}>", case["name"].as_str().unwrap_or("?"));
                let r = std::panic::catch_unwind(|| {
                    let g = parse(&text).ok()?;
                    let ins: Vec<HostTensor> = g
                        .input_types()
                        .iter()
                        .zip(&ins)
                        .map(|(ty, t)| {
                            if ty.dtype == t.dtype() {
                                Some(t.clone())
                            } else {
                                HostTensor::from_f64(
                                    ty.dtype,
                                    t.shape().clone(),
                                    t.to_f64_vec().ok()?,
                                )
                                .ok()
                            }
                        })
                        .collect::<Option<_>>()?;
                    let want = rlx_cpu::run_graph(&g, &ins).ok()?;
                    // A narrow copy's values may overflow to inf, whose
                    // conversion to an integer differs between machines.
                    if dt != "f32" && want.iter().any(|t| !t.dtype().is_float()) {
                        return None;
                    }
                    let p = plan_of(&text)?;
                    Some((p, ins, want))
                });
                match r {
                    Ok(Some((p, ins, want))) if emulable(&p) => cases.push((name, p, ins, want)),
                    Ok(Some(_)) => skipped += 1,
                    _ => {}
                }
            }
        }
        if cases.is_empty() {
            continue;
        }
        let plans: Vec<&plan::Plan> = cases.iter().map(|c| &c.1).collect();
        let stem = f.file_stem().unwrap().to_string_lossy().to_string();
        let exe = match build(&format!("vectors_{stem}"), &plans) {
            Ok(e) => e,
            Err(e) => {
                fail += cases.len();
                println!("FAIL {stem} ({} cases): {e}", cases.len());
                continue;
            }
        };
        for (k, (name, p, ins, want)) in cases.iter().enumerate() {
            let r = exec(&exe, k, p, ins).and_then(|(got, err)| {
                if err != 0 {
                    return Err(format!("error flag {err}"));
                }
                got.iter()
                    .zip(want)
                    .enumerate()
                    .try_for_each(|(o, (g, w))| {
                        close(g, w, 1e-4, 1e-5).map_err(|e| format!("output {o}: {e}"))
                    })
            });
            match r {
                Ok(()) => pass += 1,
                Err(e) => {
                    fail += 1;
                    println!("FAIL {name}: {e}");
                }
            }
        }
    }
    println!(
        "{pass} passed, {fail} failed, {skipped} not emulable (inline PTX or pointer-array GEMMs)"
    );
    assert_eq!(fail, 0);
}

/// `v = cast(exp(x))` read by two nodes, but the memory of its operand
/// `exp(x)` is reused by `zh` between them (the LIR's slots: `exp(x)` is
/// dead once `v` is computed): recomputing `v` in the second reader would
/// read `zh`. The planner must notice and store `v` instead. (Without
/// the check the second reader reads `zh`'s halves as f32: inf.)
const OPERAND_REUSED: &str = "graph @g(%x: f32[4,64], %z: f32[4,64]) {\n  %a = exp(%x)\n  %v = cast(%a) {dtype=f16}\n  %zh = cast(%z) {dtype=f16}\n  %r1 = add(%v, %zh)\n  %t = exp(%z)\n  %u = cast(%t) {dtype=f16}\n  %r2 = mul(%v, %u)\n  %o = add(%r1, %r2)\n  return %o\n}";

#[test]
fn a_value_whose_operand_is_overwritten_is_stored() {
    let p = plan_of(OPERAND_REUSED).unwrap();
    let casts = p.kernels_of("cast");
    assert_eq!(casts, 3, "{:?}", p.kernels);
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let ins = inputs_for(OPERAND_REUSED);
    let want = rlx_cpu::run_graph(&parse(OPERAND_REUSED).unwrap(), &ins).unwrap();
    let (got, err) = emulate("operand_reused", OPERAND_REUSED, &ins);
    assert_eq!(err, 0);
    let d = max_rel(&got[0], &want[0]);
    assert!(d <= 2e-3, "max rel diff {d:e}");
}

/// Every tile of our tensor-core GEMM (`hgemm.rs`), f16 and bf16, with a
/// bias, a residual and the erf GELU in the epilogue, on a batched GEMM
/// whose sizes are no multiple of any tile (M = 136 features, N = 45
/// tokens, K = 40, padded leading dimensions), against an f64 reference
/// computed from the same 16-bit inputs. Each output may differ by the
/// 16-bit rounding of the result plus fp32 summation error; elements
/// outside the matrix must stay untouched.
#[test]
fn hgemm_every_tile_with_a_fused_epilogue() {
    if !gxx_ok() {
        eprintln!("skipped: no g++ with C++20");
        return;
    }
    for d in [DType::F16, DType::BF16] {
        let act = rlx_cuda::codegen::expr::unary("gelu", d, "y").unwrap();
        let (bits, val, unit) = match d {
            DType::F16 => ("f2h(v).b", "h2f(h16{b})", 1.0 / 2048.0),
            _ => ("f2b(v).b", "b2f(b16{b})", 1.0 / 256.0),
        };
        let mut src = String::from(PRELUDE);
        src += &rlx_cuda::hgemm::kernels(d, Some(&act));
        let mut runs = String::new();
        for t in rlx_cuda::hgemm::TILES {
            let _ = writeln!(
                runs,
                "  check(\"{n}\", dim3{{(M + {bf} - 1) / {bf}, (N + {bt} - 1) / {bt}, Z}}, {th}, [&] {{ {n}(A.data(), B.data(), D.data(), C.data(), bias.data(), M, N, K, lda, ldb, ldd, sA, sB, sD, M, 1, nullptr, nullptr); }});",
                n = t.name(),
                bf = t.bf,
                bt = t.bt,
                th = t.threads()
            );
        }
        src += &format!(
            r#"
static unsigned short bits(float v) {{ return {bits}; }}
static double val(unsigned short b) {{ return {val}; }}
int main() {{
  const int M = 136, N = 45, K = 40, Z = 2, lda = K + 8, ldb = K, ldd = M + 2;
  const long long sA = (long long)M * lda, sB = (long long)N * ldb, sD = (long long)N * ldd;
  std::vector<unsigned short> A(Z * sA), B(Z * sB), C(Z * sD), bias(Z * M), D(Z * sD);
  auto fill = [](std::vector<unsigned short>& v, int seed) {{
    for (size_t i = 0; i < v.size(); ++i) v[i] = bits((float)((int)((i * 37 + seed * 11) % 97) - 48) / 48.0f);
  }};
  fill(A, 1); fill(B, 2); fill(C, 3); fill(bias, 4);
  int bad = 0;
  auto check = [&](const char* name, dim3 grid, unsigned threads, std::function<void()> k) {{
    std::fill(D.begin(), D.end(), (unsigned short)0x7e00);
    launch(grid, threads, k);
    double worst = 0;
    for (int z = 0; z < Z; ++z) for (int t = 0; t < N; ++t) for (int f = 0; f < ldd; ++f) {{
      unsigned short got = D[z * sD + (long long)t * ldd + f];
      if (f >= M) {{ if (got != 0x7e00) {{ ++bad; printf("%s: wrote outside the matrix at %d,%d\n", name, t, f); }} continue; }}
      double y = 0, mag = 0;
      for (int k = 0; k < K; ++k) {{
        double p = val(A[z * sA + (long long)f * lda + k]) * val(B[z * sB + (long long)t * ldb + k]);
        y += p; mag += fabs(p);
      }}
      double c = val(C[z * sD + (long long)t * ldd + f]), b = val(bias[z * M + f]);
      y += b + c; mag += fabs(b) + fabs(c);
      double want = 0.5 * y * (1 + erf(y / sqrt(2.0)));
      double err = fabs(val(got) - want), tol = {unit} * fabs(want) + 1e-5 * mag + 1e-6;
      worst = std::max(worst, err / tol);
      if (!(err <= tol)) {{ if (++bad < 10) printf("%s: (%d,%d,%d) got %g want %g\n", name, z, t, f, val(got), want); }}
    }}
    printf("%s: worst error / tolerance %.3f\n", name, worst);
  }};
{runs}  printf("bad %d\n", bad);
  return bad ? 1 : 0;
}}
"#
        );
        let exe = gxx(&format!("hgemm_{d}"), &src).unwrap();
        let run = Command::new(&exe).output().unwrap();
        let log = String::from_utf8_lossy(&run.stdout);
        eprintln!("{d}:\n{log}");
        assert!(run.status.success(), "{d}: {log}");
        assert_eq!(
            log.matches("worst error").count(),
            rlx_cuda::hgemm::TILES.len(),
            "{log}"
        );
    }
}
