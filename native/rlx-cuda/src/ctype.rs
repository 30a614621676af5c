//! How each dtype is stored and computed in generated CUDA C.
//!
//! Floats narrower than f32 are stored as 16-bit patterns and widened to
//! f32 for arithmetic (fp32 accumulation); f64 computes in double; integers
//! in `long long`; bool as one byte. The conversions are written out in the
//! preamble so the generated source needs no CUDA headers (NVRTC then works
//! without a toolkit include path).

use rlx_ir::DType;

/// The storage type of `d` in generated code, or `None` if kernels cannot hold it.
pub fn storage(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "bool",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::F16 => "h16",
        DType::BF16 => "b16",
        DType::F32 => "float",
        DType::F64 => "double",
        _ => return None,
    })
}

/// The arithmetic type for values of dtype `d`.
pub fn compute(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::F16 | DType::BF16 | DType::F32 => "float",
        DType::F64 => "double",
        _ => "long long",
    }
}

/// Whether `d` computes in single precision (math functions take an `f` suffix).
pub fn is_single(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32)
}

/// A stored element `e` widened to the compute type.
pub fn load(d: DType, e: &str) -> String {
    match d {
        DType::F16 => format!("h2f({e})"),
        DType::BF16 => format!("b2f({e})"),
        _ => format!("(({})({e}))", compute(d)),
    }
}

/// A compute-type expression `e` narrowed to the storage type.
pub fn store(d: DType, e: &str) -> String {
    match d {
        DType::F16 => format!("f2h((float)({e}))"),
        DType::BF16 => format!("f2b((float)({e}))"),
        _ => format!("(({})({e}))", storage(d).unwrap_or("float")),
    }
}

/// A floating literal of the compute type of `d`.
pub fn lit(d: DType, v: f64) -> String {
    let body = if v.is_nan() {
        return if is_single(d) {
            "__int_as_float(0x7fc00000)".into()
        } else {
            "__longlong_as_double(0x7ff8000000000000LL)".into()
        };
    } else if v.is_infinite() {
        let inf = if is_single(d) {
            "__int_as_float(0x7f800000)"
        } else {
            "__longlong_as_double(0x7ff0000000000000LL)"
        };
        return if v < 0.0 {
            format!("(-{inf})")
        } else {
            inf.into()
        };
    } else {
        format!("{v:e}")
    };
    match d {
        DType::F16 | DType::BF16 | DType::F32 => format!("{body}f"),
        DType::F64 => body,
        DType::Bool => format!("({} != 0)", v),
        _ => format!("((long long){})", v as i64),
    }
}

/// Helpers every generated module starts with. The tensor-core helpers
/// (`mma_*`: one warp-wide `mma.sync.m16n8k16` with fp32 accumulation;
/// `pack_*`: two f32 rounded into one 32-bit pair, `lo` in the low half;
/// `cp_async16`: a 16-byte global → shared copy that does not wait,
/// `cp_async_wait_all` waits for this thread's; `ldsm4` / `ldsm4t`:
/// `ldmatrix` of four 8×8 16-bit matrices, as stored / transposed —
/// lanes 8i..8i+7 give the row addresses of matrix i)
/// are `static`, so a module that does not call them (any pre-sm_80 GPU)
/// carries no sm_80 instruction; the CPU emulation in `tests/emulate.rs`
/// defines the same names.
pub const PREAMBLE: &str = r#"
struct h16 { unsigned short b; };
struct b16 { unsigned short b; };
struct alignas(16) v16b { unsigned int x, y, z, w; };
__device__ __forceinline__ float h2f(h16 x) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.b)); return f; }
__device__ __forceinline__ h16 f2h(float f) { h16 x; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x.b) : "f"(f)); return x; }
__device__ __forceinline__ float b2f(b16 x) { return __uint_as_float(((unsigned int)x.b) << 16); }
__device__ __forceinline__ b16 f2b(float f) {
  unsigned int u = __float_as_uint(f); b16 x;
  if ((u & 0x7fffffffu) > 0x7f800000u) { x.b = 0x7fc0; return x; }
  u += 0x7fffu + ((u >> 16) & 1u); x.b = (unsigned short)(u >> 16); return x;
}
__device__ __forceinline__ float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
__device__ __forceinline__ float warp_max(float v) { for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }
__device__ __forceinline__ void report(int* err, int code) { atomicCAS(err, 0, code); }
static __device__ __forceinline__ void mma_f16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  unsigned d; asm volatile("{ .reg .u64 p; cvta.to.shared.u64 p, %1; cvt.u32.u64 %0, p; }" : "=r"(d) : "l"(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
}
static __device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
static __device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned d; asm("{ .reg .u64 p; cvta.to.shared.u64 p, %1; cvt.u32.u64 %0, p; }" : "=r"(d) : "l"(p)); return d;
}
static __device__ __forceinline__ void ldsm4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
static __device__ __forceinline__ void ldsm4t(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
static __device__ __forceinline__ unsigned pack_f16(float lo, float hi) { unsigned d; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo)); return d; }
static __device__ __forceinline__ unsigned pack_bf16(float lo, float hi) { unsigned d; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo)); return d; }
"#;
