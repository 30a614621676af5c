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

#[path = "emulate_cases/attention.rs"]
mod attention;
mod common;
#[path = "emulate_cases/elementwise.rs"]
mod elementwise;
#[path = "emulate_cases/gemm.rs"]
mod gemm;
#[path = "emulate_cases/quant.rs"]
mod quant;
#[path = "emulate_cases/vectors.rs"]
mod vectors;
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

// Every block of the grid, one after another; a block's threads at once.
// A thread that returns drops out of its block's and warp's barriers.
static void launch(dim3 g, unsigned threads, std::function<void()> k) {
  gridDim = g; blockDim = dim3{threads, 1, 1};
  for (unsigned z = 0; z < g.z; ++z) for (unsigned y = 0; y < g.y; ++y) for (unsigned xi = 0; xi < g.x; ++xi) {
#ifdef REVERSE_BLOCKS
    unsigned x = g.x - 1 - xi;  // last block first: reads of memory a later block overwrites show
#else
    unsigned x = xi;
#endif
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
        // RLX_EMULATE_REVERSE_BLOCKS=1: blocks in reverse order, so a
        // kernel reading memory that another of its blocks overwrites (a
        // race on the GPU, hidden by the forward order) reads the new value.
        .args(
            std::env::var("RLX_EMULATE_REVERSE_BLOCKS")
                .is_ok_and(|v| v == "1")
                .then_some("-DREVERSE_BLOCKS"),
        )
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
