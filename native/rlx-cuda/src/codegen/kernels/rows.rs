//! Row kernels: softmax, layer/RMS norm (one block or one warp per row),
//! and the gather of rows by index.

use super::pointwise::{gather_params, operand_load, Operand};
use super::{block_reduce, st, unravel_from};
use crate::ctype::{compute, lit, load, store};
use rlx_ir::DType;

/// Softmax (or log-softmax) over the middle axis of a contiguous
/// (outer, n, inner) tensor; one block per (outer, inner) row.
pub fn softmax(d: DType, n: usize, inner: usize, log: bool) -> String {
    let c = compute(d);
    let (fexp, flog, fmax) = if c == "double" {
        ("exp", "log", "fmax")
    } else {
        ("expf", "logf", "fmaxf")
    };
    let x = load(d, &format!("in0[base + j * {inner}LL]"));
    let neg_inf = lit(d, f64::NEG_INFINITY);
    let out = if log {
        "x - m - lse"
    } else {
        &format!("{fexp}(x - m) / v")
    };
    let _ = fmax;
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, {s}* __restrict__ out0) {{
  long long row = blockIdx.x; long long base = (row / {inner}LL) * {ni}LL + (row % {inner}LL);
  {c} v = {neg_inf};
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x}; v = (x != x || v != v) ? ({c})(x + v) : (x > v ? x : v); }}
{r1}  {c} m = v; v = 0;
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x}; v += {fexp}(x - m); }}
{r2}  {c} lse = {flog}(v); (void)lse;
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x}; out0[base + j * {inner}LL] = {st}; }}
}}
",
        s = st(d),
        ni = n * inner,
        r1 = block_reduce(c, "(a != a || b != b) ? a + b : (a > b ? a : b)"),
        r2 = block_reduce(c, "a + b"),
        st = store(d, out),
    )
}

/// Layer norm (or RMS norm when `beta` is absent) over contiguous rows of
/// `n` elements; gamma/beta contiguous of `n`. One block per row.
pub fn norm(d: DType, n: usize, eps: f64, rms: bool) -> String {
    let c = compute(d);
    let fsqrt = if c == "double" { "sqrt" } else { "sqrtf" };
    let x = load(d, "in0[base + j]");
    let beta_param = if rms {
        String::new()
    } else {
        format!(", const {}* __restrict__ in2", st(d))
    };
    let mean = if rms {
        "  m = 0;\n".to_string()
    } else {
        format!("  v = 0;\n  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ v += {x}; }}\n{}  m = v / ({c}){n};\n", block_reduce(c, "a + b"))
    };
    let shift = if rms {
        String::new()
    } else {
        format!(" + {}", load(d, "in2[j]"))
    };
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {s}* __restrict__ in1{beta_param}, {s}* __restrict__ out0) {{
  long long base = blockIdx.x * {n}LL; {c} v, m;
{mean}  v = 0;
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = {x} - m; v += x * x; }}
{r}  {c} inv = ({c})1 / {fsqrt}(v / ({c}){n} + {eps});
  for (long long j = threadIdx.x; j < {n}LL; j += blockDim.x) {{ {c} x = ({x} - m) * inv * {g}{shift}; out0[base + j] = {o}; }}
}}
",
        s = st(d),
        r = block_reduce(c, "a + b"),
        eps = lit(d, eps),
        g = load(d, "in1[j]"),
        o = store(d, "x"),
    )
}

/// Rows of `x` (outer, len, inner) picked by indices along the middle axis:
/// out (outer, n_idx, inner). Both contiguous. Bad indices set `err`.
pub fn gather(
    d: DType,
    di: DType,
    outer: usize,
    len: usize,
    inner: usize,
    n_idx: usize,
    code: i32,
) -> String {
    let total = outer * n_idx * inner;
    format!(
        "extern \"C\" __global__ void @NAME@(const {s}* __restrict__ in0, const {si}* __restrict__ in1, {s}* __restrict__ out0, int* err) {{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {total}LL; i += (long long)gridDim.x * blockDim.x) {{
    long long in_ = i % {inner}LL; long long p = (i / {inner}LL) % {n_idx}LL; long long o = i / ({inner}LL * {n_idx}LL);
    long long j = (long long)in1[p]; if (j < 0) j += {len}LL;
    if (j < 0 || j >= {len}LL) {{ report(err, {code}); continue; }}
    out0[i] = in0[(o * {len}LL + j) * {inner}LL + in_];
  }}
}}
",
        s = st(d),
        si = st(di),
    )
}

/// Layer/RMS norm with one warp per row for rows of at most 1024 elements:
/// the row stays in registers (one global read), reductions are warp
/// shuffles, no block barriers. 8 rows per 256-thread block.
pub fn norm_warp(
    d: DType,
    n: usize,
    rows: usize,
    eps: f64,
    rms: bool,
    src: Option<&NormSrc>,
) -> String {
    let per = n.div_ceil(32);
    let beta_param = if rms {
        String::new()
    } else {
        format!(", const {}* __restrict__ in2", st(d))
    };
    // The row's elements: loaded, or computed by the fused producer (its
    // operands `p0..`, rounded to `d` as storing it would).
    let (x_params, fetch, tail_params) = match src {
        None => (
            format!("const {}* __restrict__ in0", st(d)),
            format!(
                "v[k] = j < N ? (float)({}) : 0.f;",
                load(d, "in0[base + j]")
            ),
            String::new(),
        ),
        Some(f) => {
            let params: Vec<String> = f
                .ins
                .iter()
                .enumerate()
                .map(|(k, o)| format!("const {}* __restrict__ p{k}", st(o.dtype)))
                .collect();
            let loads: String = f
                .ins
                .iter()
                .enumerate()
                .map(|(k, o)| operand_load("p", k, f.dims, o))
                .collect();
            (
                params.join(", "),
                // Coordinates from the row (leading axes) and `j`
                // (normalized axes): no division for a last-axis norm.
                format!(
                    "float val_ = 0.f;\n    if (j < N) {{\n    {} {}\n{loads}{}    val_ = (float)({});\n    }}\n    v[k] = val_;",
                    unravel_from(&f.dims[..f.axis], 0, "row", "rl_"),
                    unravel_from(&f.dims[f.axis..], f.axis, "j", "rt_"),
                    f.stmts,
                    load(d, &store(d, f.result))
                ),
                gather_params(f.ins),
            )
        }
    };
    let mean = if rms {
        "  float m = 0.f;\n".to_string()
    } else {
        "  float s = 0.f;\n  for (int k = 0; k < PER; ++k) s += v[k];\n  float m = warp_sum(s) / (float)N;\n".to_string()
    };
    // gamma (and beta) are loaded with the row, before the reductions:
    // loaded after them (where they are used) they were a second memory
    // round trip on the kernel's critical path (ptxas keeps loads where
    // the source puts them after shuffles).
    let (affine_loads, shift) = if rms {
        (
            format!("gv[k] = j < N ? {} : 0.f;", load(d, "in1[j]")),
            String::new(),
        )
    } else {
        (
            format!(
                "gv[k] = j < N ? {} : 0.f; bv[k] = j < N ? {} : 0.f;",
                load(d, "in1[j]"),
                load(d, "in2[j]")
            ),
            " + bv[k]".to_string(),
        )
    };
    let bv_decl = if rms { "" } else { ", bv[PER]" };
    format!(
        "extern \"C\" __global__ void @NAME@({x_params}, const {s}* __restrict__ in1{beta_param}, {s}* __restrict__ out0{tail_params}) {{
  const int N = {n}, PER = {per};
  long long row = blockIdx.x * 8LL + (threadIdx.x >> 5); int lane = threadIdx.x & 31;
  if (row >= {rows}LL) return;
  long long base = row * {n}LL;
  float v[PER], gv[PER]{bv_decl};
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; {fetch} }}
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; {affine_loads} }}
{mean}  float q = 0.f;
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; float c = j < N ? v[k] - m : 0.f; q += c * c; }}
  float inv = 1.f / sqrtf(warp_sum(q) / (float)N + {eps});
  #pragma unroll
  for (int k = 0; k < PER; ++k) {{ int j = lane + 32 * k; if (j < N) {{ float y = (v[k] - m) * inv * gv[k]{shift}; out0[base + j] = {o}; }} }}
}}
",
        s = st(d),
        eps = lit(DType::F32, eps),
        o = store(d, "y"),
    )
}

/// The elementwise node a warp-per-row norm computes its input with
/// (fused: the input is never stored): operands over the norm input's
/// `dims`, statements over them loaded as `x0..`, and the result.
pub struct NormSrc<'a> {
    pub dims: &'a [usize],
    /// The first normalized axis of `dims`.
    pub axis: usize,
    pub ins: &'a [Operand],
    pub stmts: &'a str,
    pub result: &'a str,
}
