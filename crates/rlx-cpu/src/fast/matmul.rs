//! matmul and matmul_bias_act in f32: natively the `gemm` crate on strided
//! operands (a transposed weight is read through swapped strides, never
//! copied), rows split across threads; on wasm32 rlx's own simd128 kernel
//! ([`crate::kernels::gemm128`]: 1.2–1.5× the `gemm` crate's simd128 kernel
//! in Node at MiniLM's shapes, `benches/results/wasm-vs-native.md`), the
//! weight packed once per product for all row blocks (once per program
//! when resident). The bias + activation epilogue is applied to each block
//! of rows right after its product, while it is in cache.
//!
//! On a CPU with AMX (x86-64 Linux), a resident weight is instead split and
//! packed once for [`crate::kernels::amx`] (f32-accurate products from bf16
//! tiles, 1.2–1.7× the `gemm` crate at MiniLM's shapes, one thread), used
//! for products of at least [`amx::MIN_ROWS`] rows; the report names it.

use super::convert::{self, Fmt};
use super::elementwise::{Un, TILE};
use super::layout::View;
use super::par::{chunk_len, for_chunks_with, threads, Disjoint, Scratch};
use super::simd::{self, simd_fn, Mad};
use crate::kernels::amx;
use crate::kernels::gemm::{gemm_into, Mat};
use crate::kernels::gemm128::{self, PackedB};

/// Row counts up to this run as one multithreaded GEMM call.
const SMALL_M: usize = 1024;
/// Row counts up to this split the weight's columns across threads
/// ([`crate::kernels::gemm::gemm_cols`]): at MiniLM's 128-row products
/// with cold weights, 2 threads, 1.04–1.21× the crate's own threading
/// (`benches/results/gemm-shapes.md`); at 512 rows the two were within
/// noise in the first run.
const SPLIT_COLS_M: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    None,
    Un(Un),
}

pub fn activation(name: &str) -> Option<Act> {
    Some(match name {
        "none" => Act::None,
        "relu" => Act::Un(Un::Relu),
        "gelu" => Act::Un(Un::Gelu),
        "gelu_tanh" => Act::Un(Un::GeluTanh),
        "silu" => Act::Un(Un::Silu),
        "sigmoid" => Act::Un(Un::Sigmoid),
        "tanh" => Act::Un(Un::Tanh),
        _ => return None,
    })
}

simd_fn! {
    /// Bias (one `n`-vector) and activation over rows of `n`, in place.
    pub(super) fn epilogue_rows(rows: &mut [f32], n: usize, bias: Option<&[f32]>, act: Act) {
        for row in rows.chunks_mut(n.max(1)) {
            if let Some(b) = bias {
                for (x, &bb) in row.iter_mut().zip(b) {
                    *x += bb;
                }
            }
            act_row::<M>(act, row);
        }
    }
}

#[inline(always)]
fn act_row<M: Mad>(a: Act, row: &mut [f32]) {
    let Act::Un(u) = a else { return };
    macro_rules! map {
        ($f:path) => {
            for x in row.iter_mut() {
                *x = $f(*x);
            }
        };
    }
    match u {
        Un::Relu => map!(simd::relu),
        Un::Gelu => map!(simd::gelu::<M>),
        Un::GeluTanh => map!(simd::gelu_tanh::<M>),
        Un::Silu => map!(simd::silu::<M>),
        Un::Sigmoid => map!(simd::sigmoid::<M>),
        Un::Tanh => map!(simd::tanh::<M>),
        _ => unreachable!("activation() admits only these"),
    }
}

/// A resident weight as the engine packed it once, for [`run`].
#[derive(Clone, Copy)]
pub enum Packed<'a> {
    /// Not packed: each product packs it (gemm128 on wasm32, the `gemm`
    /// crate natively).
    No,
    Gemm128(&'a PackedB),
    /// Split for the AMX tiles, with the per-thread scratch the left
    /// operand's parts are split into.
    Amx(&'a amx::PackedB, &'a Scratch<u16>),
}

/// A weight as a single-threaded product of a block of rows reads it:
/// packed for gemm128 — once per run for a resident weight (the engine
/// packs it), else once per product on wasm32 — split for the AMX tiles,
/// or, natively, as it is (the `gemm` crate packs it itself).
#[derive(Clone, Copy)]
enum Weight<'a> {
    Packed(&'a PackedB),
    Amx(&'a amx::PackedB, &'a Scratch<u16>),
    // Only natively (wasm32 packs every weight).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    AsIs(Mat<'a, f32>),
}

/// Whether a product of `rows` rows with `p` runs on the AMX tiles.
fn on_tiles(p: &amx::PackedB, rows: usize) -> bool {
    rows >= amx::MIN_ROWS && p.finite()
}

/// `b` as products of `rows` rows read it: an AMX weight only from
/// [`amx::MIN_ROWS`] rows on and when all its values are finite (else the
/// `gemm` crate).
fn with_weight<T>(b: Mat<f32>, packed: Packed, rows: usize, f: impl FnOnce(Weight) -> T) -> T {
    match packed {
        Packed::Gemm128(p) => return f(Weight::Packed(p)),
        Packed::Amx(p, pool) if on_tiles(p, rows) => return f(Weight::Amx(p, pool)),
        _ => {}
    }
    #[cfg(target_arch = "wasm32")]
    {
        gemm128::with_packed(b, |p| f(Weight::Packed(p)))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        f(Weight::AsIs(b))
    }
}

thread_local! {
    /// A thread's columns of a product split by columns ([`product_cols`]),
    /// kept between calls so a steady-state run does not allocate.
    static COLS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `out (a.rows × n) = a · p` (`+=` with `acc`), the panels of `p` split
/// across the threads: each computes its columns for every row into its
/// own buffer, then stores them.
#[allow(unsafe_code)]
fn product_cols(a: Mat<f32>, p: &PackedB, out: &mut [f32], n: usize, acc: bool) {
    let (rows, nr) = (a.rows, gemm128::NR);
    let panels = n.div_ceil(nr);
    let per = panels.div_ceil((2 * threads()).min(panels).max(1));
    let d = Disjoint::new(out);
    super::par::for_each(panels.div_ceil(per), |t| {
        let (p0, p1) = (t * per, ((t + 1) * per).min(panels));
        let j0 = p0 * nr;
        let w = (p1 * nr).min(n) - j0;
        COLS.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.resize(rows * w, 0.0);
            // SAFETY: task t alone holds columns j0..j0+w of every row.
            let cols = |r: usize| unsafe { d.range(r * n + j0..r * n + j0 + w) };
            if acc {
                for r in 0..rows {
                    buf[r * w..][..w].copy_from_slice(cols(r));
                }
            }
            gemm128::gemm_panels_into(a, p.panels(p0..p1), &mut buf, w, acc);
            for r in 0..rows {
                cols(r).copy_from_slice(&buf[r * w..][..w]);
            }
        });
    });
}

/// `c (row stride ldc) = a · b` on this thread; `c += a · b` with `acc`.
fn product(a: Mat<f32>, b: Weight, c: &mut [f32], ldc: usize, acc: bool) {
    match b {
        Weight::Packed(p) => gemm128::gemm_packed_into(a, p, c, ldc, acc),
        Weight::Amx(p, pool) => pool.with(|s| amx::gemm(a, p, c, ldc, acc, s)),
        Weight::AsIs(b) => gemm_into(a, b, c, ldc, acc, false),
    }
}

/// out (batch..., m, n) = a (…, m, k) · b (…, k, n) [+ bias] then `act`.
/// Both operands have rank ≥ 2 (checked when the kernel was chosen);
/// `packed`, when not `No`, is `b` (2-D) packed once. With `half`,
/// each finished block of `out` is also rounded into it (a 16-bit output),
/// while the block is in cache. With `residual`, `out` already holds a
/// residual the product is added to (`matmul_residual`, rlx-opt's fold of
/// a following `add`; `act` is then `None`: out = residual + a·b + bias).
#[allow(clippy::too_many_arguments)]
pub fn run(
    out: &mut [f32],
    out_dims: &[usize],
    a: &View,
    b: &View,
    packed: Packed,
    bias: Option<&View>,
    act: Act,
    half: Option<(&mut [u16], Fmt)>,
    residual: bool,
) {
    debug_assert!(!residual || (act == Act::None && half.is_none()));
    let r = out_dims.len();
    let (m, n) = (out_dims[r - 2], out_dims[r - 1]);
    let ra = a.loc.dims.len();
    let k = a.loc.dims[ra - 1];
    let batch = &out_dims[..r - 2];
    let nb: usize = batch.iter().product();
    if m == 0 || n == 0 || nb == 0 {
        return;
    }
    // A batch-free weight and row-contiguous batches of `a`: one tall
    // product (batch·m rows), which parallelizes and packs `b` once.
    let rb = b.loc.dims.len();
    let a_rows_merge = {
        let (ad, st) = (&a.loc.dims, &a.loc.strides);
        let mut want = st[ra - 2] * a.loc.dims[ra - 2];
        let mut ok = rb == 2 && ad.len() == r;
        for ax in (0..ra - 2).rev() {
            ok &= ad[ax] == 1 || st[ax] == want;
            want *= ad[ax];
        }
        ok
    };
    let bias_row = bias.and_then(|v| {
        // The common case: a bias of n elements along the last axis.
        let c = v.contiguous()?;
        (c.len() == n && v.loc.dims.last() == Some(&n)).then_some(c)
    });
    // Any other bias shape: read through broadcast strides (built here,
    // once per call).
    let general = match (bias_row, bias) {
        (None, Some(v)) => Some((super::elementwise::broadcast(v.loc, out_dims), v)),
        _ => None,
    };
    let epilogue = |rows: &mut [f32], first_row: usize| {
        if let Some((bl, v)) = &general {
            let bview = View { loc: bl, ..**v };
            for (i, x) in rows.iter_mut().enumerate() {
                *x += bview.get(first_row * n + i);
            }
        }
        epilogue_rows(rows, n, bias_row, act);
    };
    let fmt = half.as_ref().map_or(Fmt::F32, |h| h.1);
    let half = half.map(|h| h.0);
    let finish = |rows: &mut [f32], first_row: usize, h: Option<&mut [u16]>| {
        epilogue(rows, first_row);
        if let Some(h) = h {
            convert::narrow(rows, fmt, h);
        }
    };
    if a_rows_merge {
        let rows = nb * m;
        let bm = b.mat(b.loc.offset, k, n);
        // Few rows: splitting them would have every thread pack all of `b`;
        // one call lets gemm share the packing across its threads — or,
        // for the fewest rows, split `b`'s columns (each thread packs and
        // reads its share once) — and the epilogue follows over row chunks.
        let amx_rows = matches!(packed, Packed::Amx(p, _) if on_tiles(p, rows));
        // All the rows, as one matrix.
        let am = Mat {
            data: &a.data[a.loc.offset - a.shift..],
            rows,
            cols: k,
            row_stride: a.loc.strides[ra - 2],
            col_stride: a.loc.strides[ra - 1],
        };
        if !matches!(packed, Packed::Gemm128(_)) && !amx_rows && rows <= SMALL_M && threads() > 1 {
            if rows <= SPLIT_COLS_M {
                let parts = threads();
                crate::kernels::gemm::gemm_cols(am, bm, out, n, parts, residual);
            } else {
                gemm_into(am, bm, out, n, residual, true);
            }
            let chunk = chunk_len(rows * n, n, 16 * n.max(TILE));
            for_chunks_with(out, half, chunk, |ci, oc, h| finish(oc, ci * chunk / n, h));
            return;
        }
        let chunk = if amx_rows {
            // Blocks of whole tile rows, at most one split block each, as
            // many as the threads where the rows allow.
            rows.div_ceil(threads())
                .div_ceil(32)
                .clamp(1, amx::ROWS / 32)
                * 32
                * n
        } else {
            chunk_len(rows * n, n, 32 * n.max(TILE))
        };
        with_weight(bm, packed, rows, |w| {
            // Too few rows for a second row block on gemm128 (wasm32's
            // products; a threaded page): split the weight's panels
            // across the threads instead, then the epilogue by rows.
            if let Weight::Packed(p) = w {
                if chunk >= rows * n && threads() > 1 && n >= 4 * gemm128::NR {
                    product_cols(am, p, out, n, residual);
                    let chunk = chunk_len(rows * n, n, 16 * n.max(TILE));
                    for_chunks_with(out, half, chunk, |ci, oc, h| finish(oc, ci * chunk / n, h));
                    return;
                }
            }
            for_chunks_with(out, half, chunk, |ci, oc, h| {
                let r0 = ci * chunk / n;
                let mr = oc.len() / n;
                let am = Mat {
                    data: &a.data[a.loc.offset + r0 * a.loc.strides[ra - 2] - a.shift..],
                    rows: mr,
                    cols: k,
                    row_stride: a.loc.strides[ra - 2],
                    col_stride: a.loc.strides[ra - 1],
                };
                product(am, w, oc, n, residual);
                finish(oc, r0, h);
            })
        });
        return;
    }
    // Batched: one product per batch entry, batches across threads.
    for_chunks_with(out, half, m * n, |bi, oc, h| {
        let am = a.mat(a.loc.batch_offset(batch, bi), m, k);
        let bm = b.mat(b.loc.batch_offset(batch, bi), k, n);
        with_weight(bm, packed, m, |w| product(am, w, oc, n, residual));
        finish(oc, bi * m, h);
    });
}

/// `out` (rows × n, contiguous) = a (rows × k bf16 bits, row stride
/// `lda`) · `b` (packed) [+ bias] then `act`: bf16 dot products
/// ([`super::bf16dot`]), then the same epilogue and 16-bit rounding as
/// [`run`], over row blocks while they are in cache.
#[allow(clippy::too_many_arguments)]
pub fn run_bf16(
    out: &mut [f32],
    n: usize,
    a: &[u16],
    lda: usize,
    b: &super::bf16dot::PackedB,
    bias: Option<&View>,
    act: Act,
    half: Option<(&mut [u16], Fmt)>,
) {
    let rows = out.len() / n.max(1);
    if rows == 0 || n == 0 {
        return;
    }
    super::bf16dot::gemm(a, lda, rows, b, out, n);
    let bias_row = bias.and_then(|v| v.contiguous());
    let fmt = half.as_ref().map_or(Fmt::F32, |h| h.1);
    let chunk = chunk_len(rows * n, n, 32 * n.max(TILE));
    for_chunks_with(out, half.map(|h| h.0), chunk, |_, oc, h| {
        epilogue_rows(oc, n, bias_row, act);
        if let Some(h) = h {
            convert::narrow(oc, fmt, h);
        }
    });
}
