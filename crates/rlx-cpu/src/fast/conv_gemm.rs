//! A conv as im2col + GEMM, in blocks of output positions: each task
//! builds the patch matrix of its positions (K × block, in L2), multiplies
//! the weight (M × K) by it into an output tile, and writes the tile's rows
//! with the bias and activation. The patches and the tile stay in cache
//! (the whole patch matrix of an early layer is megabytes), and the
//! epilogue runs on values still in cache. A 1×1 conv with stride 1 and no
//! padding reads the input itself as its patches, in one GEMM.

use super::conv::Geom;
use super::layout::View;
use super::matmul::{epilogue_rows, Act};
use super::par::{self, Disjoint};
use crate::kernels::gemm::{gemm_cols, gemm_into, Mat};
use std::cell::RefCell;

thread_local! {
    /// One block's patches, then its output tile (per worker; grown,
    /// never shrunk).
    static BLOCK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Output positions per block: the patches in about 256 KiB, at least 64
/// (the weight is packed again by each block's GEMM), and at least one
/// block per thread the conv is given; a multiple of 16.
fn block_len(k: usize, m: usize, p: usize, threads: usize) -> usize {
    let by_cache = (1usize << 16) / k.max(m).max(1);
    let per_thread = p.div_ceil(threads.max(1));
    by_cache.max(64).min(per_thread).max(1).div_ceil(16) * 16
}

/// Bias (output channel `b`'s) and activation over one output row.
pub(super) fn channel_epilogue(row: &mut [f32], bias: Option<f32>, act: Act) {
    if let Some(b) = bias {
        row.iter_mut().for_each(|v| *v += b);
    }
    epilogue_rows(row, row.len(), None, act);
}

/// `o` (M/g × P) = act(w_g · patches(x_g) + bias) for one batch item and
/// group: `xg` its input channels, `wg` its weight rows (M/g × K), `m0` its
/// first output channel (for the bias).
#[allow(clippy::too_many_arguments)]
pub fn run_group(
    g: &Geom,
    xg: &[f32],
    wg: &[f32],
    m0: usize,
    bias: Option<&View>,
    act: Act,
    o: &mut [f32],
) {
    let (cg, mg) = (g.c / g.groups, g.m / g.groups);
    let (k, p) = (cg * g.kh * g.kw, g.oh * g.ow);
    if g.pointwise() {
        return pointwise(xg, wg, mg, k, p, m0, bias, act, o);
    }
    let threads = par::threads_for(2 * k * mg * p);
    let pb = block_len(k, mg, p, threads);
    let out = Disjoint::new(o);
    let blocks = p.div_ceil(pb);
    let each = |bi: usize| {
        let (p0, p1) = (bi * pb, ((bi + 1) * pb).min(p));
        let n = p1 - p0;
        BLOCK.with(|buf| {
            let mut buf = buf.borrow_mut();
            let col_len = k * n;
            if buf.len() < col_len + mg * n {
                buf.resize(col_len + mg * n, 0.0);
            }
            let (col, tile) = buf.split_at_mut(col_len);
            im2col(g, xg, p0, p1, col);
            let patches = Mat::row_major(col, k, n);
            let tile = &mut tile[..mg * n];
            gemm_into(Mat::row_major(wg, mg, k), patches, tile, n, false, false);
            for (m, row) in tile.chunks_mut(n).enumerate() {
                channel_epilogue(row, bias.map(|b| b.get(m0 + m)), act);
                // SAFETY: positions p0..p1 of row m belong to this block
                // alone (the blocks split the positions).
                #[allow(unsafe_code)]
                let dst = unsafe { out.range(m * p + p0..m * p + p1) };
                dst.copy_from_slice(row);
            }
        });
    };
    if threads > 1 {
        par::for_each(blocks, each);
    } else {
        (0..blocks).for_each(each);
    }
}

/// A 1×1 conv of stride 1 and no padding: the input is the patch matrix,
/// so one GEMM (output positions split across threads, each packing its
/// share) writes the output, and the bias and activation follow per row.
#[allow(clippy::too_many_arguments)]
fn pointwise(
    xg: &[f32],
    wg: &[f32],
    mg: usize,
    k: usize,
    p: usize,
    m0: usize,
    bias: Option<&View>,
    act: Act,
    o: &mut [f32],
) {
    gemm_cols(
        Mat::row_major(wg, mg, k),
        Mat::row_major(xg, k, p),
        o,
        p,
        par::threads_for(2 * mg * k * p),
        false,
    );
    if bias.is_none() && act == Act::None {
        return;
    }
    par::for_chunks(o, p.max(1), |m, row| {
        channel_epilogue(row, bias.map(|b| b.get(m0 + m)), act)
    });
}

/// The patch matrix of output positions `p0..p1` (row-major over the
/// output): row (c, ki, kj) holds, for each position, the input element
/// that tap reads (0 in the padding).
fn im2col(g: &Geom, x: &[f32], p0: usize, p1: usize, col: &mut [f32]) {
    let (cg, n) = (g.c / g.groups, p1 - p0);
    let sw = g.stride[1] as isize;
    for (row, dst) in col[..cg * g.kh * g.kw * n].chunks_mut(n).enumerate() {
        let (c, k) = (row / (g.kh * g.kw), row % (g.kh * g.kw));
        let (ki, kj) = (k / g.kw, k % g.kw);
        let plane = &x[c * g.h * g.w..(c + 1) * g.h * g.w];
        let dx = (kj * g.dil[1]) as isize - g.pad[1] as isize;
        // The output columns whose input column is inside the row.
        let lo = if dx >= 0 { 0 } else { ((-dx) + sw - 1) / sw } as usize;
        let hi = (((g.w as isize - dx) + sw - 1) / sw).clamp(0, g.ow as isize) as usize;
        let mut p = p0;
        while p < p1 {
            let (oy, ox0) = (p / g.ow, p % g.ow);
            let ox1 = (ox0 + p1 - p).min(g.ow);
            let d = &mut dst[p - p0..p - p0 + ox1 - ox0];
            p += ox1 - ox0;
            let iy = (oy * g.stride[0] + ki * g.dil[0]) as isize - g.pad[0] as isize;
            // Inside the input: columns a..b of this output row.
            let (a, b) = (lo.clamp(ox0, ox1), hi.clamp(ox0, ox1));
            if iy < 0 || iy >= g.h as isize || a >= b {
                d.fill(0.0);
                continue;
            }
            let src = &plane[iy as usize * g.w..(iy as usize + 1) * g.w];
            d[..a - ox0].fill(0.0);
            d[b - ox0..].fill(0.0);
            let inside = &mut d[a - ox0..b - ox0];
            let s0 = (a as isize * sw + dx) as usize;
            if sw == 1 {
                inside.copy_from_slice(&src[s0..s0 + inside.len()]);
            } else if sw == 2 {
                // Pairs, so the loop vectorizes (every other element).
                let n = inside.len();
                let full = if src.len() - s0 >= 2 * n { n } else { n - 1 };
                let pairs = src[s0..s0 + 2 * full].chunks_exact(2);
                for (v, pair) in inside[..full].iter_mut().zip(pairs) {
                    *v = pair[0];
                }
                if full < n {
                    inside[n - 1] = src[s0 + 2 * (n - 1)];
                }
            } else {
                let taken = src[s0..].iter().step_by(sw as usize);
                for (v, &x) in inside.iter_mut().zip(taken) {
                    *v = x;
                }
            }
        }
    }
}
