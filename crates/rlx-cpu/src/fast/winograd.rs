//! Winograd F(4×4, 3×3) for 3×3, stride-1, ungrouped, undilated convs
//! (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks").
//!
//! Each 4×4 output tile is `Aᵀ [U ⊙ V] A` with `V = Bᵀ d B` the transform of
//! the 6×6 input patch `d` and `U = G g Gᵀ` that of the 3×3 filter `g`:
//! 36 multiplies per tile, channel pair instead of 144. Summed over input
//! channels, the 36 elementwise products become 36 independent GEMMs
//! (tiles × Cin by Cin × Cout), which is where the time goes.
//!
//! Layout: channels are the vector lanes. The input is copied once into a
//! zero-padded channels-last buffer (rows × cols × Cin rounded up to 16),
//! so a patch element of 16 channels is one contiguous load and the tile
//! edges need no bounds checks; the transformed filter is laid out
//! [36][Cin₁₆][Cout₁₆] (made once at compile time for a constant weight).
//! Work is split in blocks of whole tile rows, one per task: input
//! transform, 36 GEMMs and output transform of a block stay in that
//! thread's cache. The transforms run in f32 with the usual points
//! (0, ±1, ±2, ∞); the filter transform in f64, rounded once.

use super::conv::Geom;
use super::layout::View;
use super::matmul::{epilogue_rows, Act};
use super::par::{self, Disjoint};
use super::simd::simd_fn;
use crate::kernels::gemm::{gemm_into, Mat};
use std::cell::RefCell;

/// Channels per vector group (the lanes of one transform).
const L: usize = 16;
/// Output tile edge and input patch edge.
const T: usize = 4;
const A: usize = 6;
/// Elements of a transformed tile.
const XI: usize = A * A;

/// Whether this conv runs as Winograd: a 3×3 window, stride and dilation
/// 1, one group, and enough channels and outputs that the GEMMs dominate
/// the transforms (measured on YOLOv8n's convs: `benches/results/`).
pub fn applies(g: &Geom) -> bool {
    g.kh == 3
        && g.kw == 3
        && g.stride == [1, 1]
        && g.dil == [1, 1]
        && g.groups == 1
        && g.c >= 8
        && g.m >= 8
        && g.oh * g.ow >= 64
}

fn round16(n: usize) -> usize {
    n.div_ceil(L) * L
}

/// f32s of the transformed filter of a conv with `m` outputs and `c` inputs.
pub fn weights_len(m: usize, c: usize) -> usize {
    XI * round16(c) * round16(m)
}

/// The transformed filter `U = G g Gᵀ` of `w` (M × C × 3 × 3, row-major),
/// as [36][C₁₆][M₁₆] (zero where a channel is padding).
pub fn transform_weights(w: &[f32], m: usize, c: usize) -> Vec<f32> {
    const G: [[f64; 3]; A] = [
        [1.0 / 4.0, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];
    let (cp, mp) = (round16(c), round16(m));
    let mut u = vec![0.0f32; XI * cp * mp];
    for mi in 0..m {
        for ci in 0..c {
            let g = &w[(mi * c + ci) * 9..][..9];
            // G g (6 × 3), then (G g) Gᵀ (6 × 6).
            let mut gg = [[0.0f64; 3]; A];
            for (r, row) in gg.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|k| G[r][k] * g[k * 3 + j] as f64).sum();
                }
            }
            for r in 0..A {
                for s in 0..A {
                    let v: f64 = (0..3).map(|k| gg[r][k] * G[s][k]).sum();
                    u[(r * A + s) * cp * mp + ci * mp + mi] = v as f32;
                }
            }
        }
    }
    u
}

type Lanes = [f32; L];

/// `Bᵀ d` along one axis: six patch lines in, six transformed lines out.
#[inline(always)]
fn bt(d: &[Lanes; A]) -> [Lanes; A] {
    let mut t = [[0.0; L]; A];
    for l in 0..L {
        let [d0, d1, d2, d3, d4, d5] = [d[0][l], d[1][l], d[2][l], d[3][l], d[4][l], d[5][l]];
        t[0][l] = 4.0 * d0 - 5.0 * d2 + d4;
        t[1][l] = -4.0 * (d1 + d2) + d3 + d4;
        t[2][l] = 4.0 * (d1 - d2) - d3 + d4;
        t[3][l] = 2.0 * (d3 - d1) - d2 + d4;
        t[4][l] = 2.0 * (d1 - d3) - d2 + d4;
        t[5][l] = 4.0 * d1 - 5.0 * d3 + d5;
    }
    t
}

/// `Aᵀ m` along one axis: six transformed lines in, four output lines out.
#[inline(always)]
fn at(m: &[Lanes; A]) -> [Lanes; T] {
    let mut y = [[0.0; L]; T];
    for l in 0..L {
        let [m0, m1, m2, m3, m4, m5] = [m[0][l], m[1][l], m[2][l], m[3][l], m[4][l], m[5][l]];
        let (s12, d12, s34, d34) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
        y[0][l] = m0 + s12 + s34;
        y[1][l] = d12 + 2.0 * d34;
        y[2][l] = s12 + 4.0 * s34;
        y[3][l] = d12 + 8.0 * d34 + m5;
    }
    y
}

simd_fn! {
    /// Input transform of tiles `t0..t0 + nt` (row-major over the tile
    /// grid of `tw` columns) into `v` = [nt][36][cp]: the patches read from
    /// the padded channels-last input `p` (`pw` columns of `cp` channels).
    fn input_tiles(p: &[f32], pw: usize, cp: usize, tw: usize, t0: usize, nt: usize, v: &mut [f32]) {
        for tl in 0..nt {
            let (ty, tx) = ((t0 + tl) / tw, (t0 + tl) % tw);
            for c0 in (0..cp).step_by(L) {
                let mut rows = [[[0.0; L]; A]; A];
                for (r, row) in rows.iter_mut().enumerate() {
                    let mut d = [[0.0; L]; A];
                    for (j, dj) in d.iter_mut().enumerate() {
                        let off = ((T * ty + r) * pw + T * tx + j) * cp + c0;
                        dj.copy_from_slice(&p[off..off + L]);
                    }
                    *row = bt(&d);
                }
                // Column transform of the row-transformed patch.
                #[allow(clippy::needless_range_loop)]
                for s in 0..A {
                    let col = [rows[0][s], rows[1][s], rows[2][s], rows[3][s], rows[4][s], rows[5][s]];
                    for (r, vr) in bt(&col).iter().enumerate() {
                        let off = (tl * XI + r * A + s) * cp + c0;
                        v[off..off + L].copy_from_slice(vr);
                    }
                }
            }
        }
    }
}

/// Where a block's output goes: the output planes of one batch item,
/// rows of `ow`; each block writes only the rows of its own tile rows.
#[derive(Clone, Copy)]
struct Out<'a> {
    planes: Disjoint<'a>,
    oh: usize,
    ow: usize,
}

impl Out<'_> {
    /// Rows `oy0..oy1` of output plane `m`.
    #[allow(clippy::mut_from_ref)]
    fn rows(&self, m: usize, oy0: usize, oy1: usize) -> &mut [f32] {
        let at = (m * self.oh + oy0) * self.ow;
        // SAFETY: the blocks' row ranges are disjoint (`run` splits the
        // tile rows), and a block holds one plane's rows at a time.
        #[allow(unsafe_code)]
        unsafe {
            self.planes.range(at..at + (oy1 - oy0) * self.ow)
        }
    }
}

thread_local! {
    /// Padded channels-last input, the padded bias, then (when the
    /// workers split the output channels) the block's transformed input;
    /// on the calling thread.
    static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// One block's GEMM outputs (per worker).
    static BLOCK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// One block's transformed input, where each worker has its own blocks.
    static VBUF: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `out` (N, M, OH, OW) = act(conv(x, w) + bias) with `u` the transformed
/// filter ([`transform_weights`]); x contiguous.
pub fn run(g: &Geom, x: &[f32], u: &[f32], bias: Option<&View>, act: Act, out: &mut [f32]) {
    let (th, tw) = (g.oh.div_ceil(T), g.ow.div_ceil(T));
    let (ph, pw) = (T * th + 2, T * tw + 2);
    let (cp, mp) = (round16(g.c), round16(g.m));
    assert_eq!(u.len(), weights_len(g.m, g.c), "winograd: filter size");
    assert_eq!(out.len(), g.n * g.m * g.oh * g.ow, "winograd: output size");
    // Threads only where they pay: judged by the 36 products' multiplies.
    let flops = 2 * XI * th * tw * cp * mp * g.n;
    let threads = par::threads_for(flops);
    // Tile rows per block: the block's transformed input and products
    // (36 × tiles × (Cin + Cout)) in about 1 MiB, at least one tile row.
    // With 16 output channels per thread or more, the threads split the
    // block's output channels (any map size stays balanced); else they
    // split the tile rows, one block or more each.
    let per_row = XI * tw * (cp + mp);
    let by_cache = ((1 << 18) / per_row.max(1)).max(1);
    let split_m = mp / L >= threads && threads > 1;
    let rows = if split_m {
        by_cache.min(th)
    } else {
        by_cache.min(th.div_ceil(threads)).max(1)
    };
    let blocks = th.div_ceil(rows);
    let chunks = if split_m { threads } else { 1 };
    // Output channel range of chunk i: whole groups of 16.
    let m_range = |i: usize| {
        let groups = mp / L;
        let (lo, hi) = (groups * i / chunks, groups * (i + 1) / chunks);
        (lo * L, hi * L)
    };
    PADDED.with(|padded| {
        let mut padded = padded.borrow_mut();
        let vl = XI * rows * tw * cp;
        padded.resize(ph * pw * cp + mp + if split_m { vl } else { 0 }, 0.0);
        let (padded, rest) = padded.split_at_mut(ph * pw * cp);
        // The bias of every output channel, 0 for the padding ones.
        let (bias_m, v) = rest.split_at_mut(mp);
        for (i, b) in bias_m.iter_mut().enumerate() {
            *b = match bias {
                Some(bv) if i < g.m => bv.get(i),
                _ => 0.0,
            };
        }
        let bias: &[f32] = bias_m;
        for b in 0..g.n {
            let xb = &x[b * g.c * g.h * g.w..][..g.c * g.h * g.w];
            pad_channels_last(g, xb, pw, cp, padded);
            let o = Out {
                planes: Disjoint::new(&mut out[b * g.m * g.oh * g.ow..][..g.m * g.oh * g.ow]),
                oh: g.oh,
                ow: g.ow,
            };
            let p: &[f32] = padded;
            if split_m {
                for bi in 0..blocks {
                    let (ty0, ty1) = (bi * rows, ((bi + 1) * rows).min(th));
                    let nt = (ty1 - ty0) * tw;
                    // Tiles split across the threads (each tile's
                    // transform is a contiguous [36][Cin₁₆] block).
                    let per = nt.div_ceil(threads).max(1);
                    par::for_chunks(&mut v[..XI * nt * cp], per * XI * cp, |ci, vc| {
                        let n = vc.len() / (XI * cp);
                        input_tiles(p, pw, cp, tw, ty0 * tw + ci * per, n, vc);
                    });
                    let v: &[f32] = v;
                    par::for_each(chunks, |ci| {
                        products(
                            g,
                            &v[..XI * nt * cp],
                            u,
                            bias,
                            act,
                            o,
                            ty0,
                            ty1,
                            m_range(ci),
                        );
                    });
                }
            } else {
                let each = |bi: usize| {
                    let (ty0, ty1) = (bi * rows, ((bi + 1) * rows).min(th));
                    let nt = (ty1 - ty0) * tw;
                    VBUF.with(|vb| {
                        let mut vb = vb.borrow_mut();
                        vb.resize(XI * nt * cp, 0.0);
                        input_tiles(p, pw, cp, tw, ty0 * tw, nt, &mut vb);
                        products(g, &vb, u, bias, act, o, ty0, ty1, (0, mp));
                    });
                };
                if threads > 1 {
                    par::for_each(blocks, each);
                } else {
                    (0..blocks).for_each(each);
                }
            }
        }
    });
}

/// The padded channels-last copy of one batch item: `p[y][x][c]` = the
/// input at (y − pad top, x − pad left) of channel c, 0 outside.
fn pad_channels_last(g: &Geom, x: &[f32], pw: usize, cp: usize, p: &mut [f32]) {
    let (c, w, pl) = (g.c, g.w, g.pad[1]);
    par::for_chunks(p, pw * cp, |y, row| {
        let Some(iy) = y.checked_sub(g.pad[0]).filter(|&iy| iy < g.h) else {
            row.fill(0.0);
            return;
        };
        // Columns of padding (left, right) and channels of padding are
        // zero; the rest is the input, transposed 16 channels at a time.
        let inner = (pl + w).min(pw);
        row[..pl.min(pw) * cp].fill(0.0);
        row[inner * cp..].fill(0.0);
        for c0 in (0..cp).step_by(L) {
            let cn = L.min(c.saturating_sub(c0));
            for px in pl..inner {
                let dst = &mut row[px * cp + c0..][..L];
                for (k, d) in dst.iter_mut().enumerate() {
                    *d = if k < cn {
                        x[((c0 + k) * g.h + iy) * w + px - pl]
                    } else {
                        0.0
                    };
                }
            }
        }
    });
}

/// Output channels `ms` of the block of tile rows `ty0..ty1`, from its
/// transformed input `v` ([tiles][36][Cin₁₆]): the 36 products, the
/// output transform, bias and activation.
#[allow(clippy::too_many_arguments)]
fn products(
    g: &Geom,
    v: &[f32],
    u: &[f32],
    bias: &[f32],
    act: Act,
    out: Out,
    ty0: usize,
    ty1: usize,
    ms: (usize, usize),
) {
    let tw = g.ow.div_ceil(T);
    let (cp, mp) = (round16(g.c), round16(g.m));
    let (t0, nt, mw) = (ty0 * tw, (ty1 - ty0) * tw, ms.1 - ms.0);
    BLOCK.with(|buf| {
        let mut buf = buf.borrow_mut();
        let ml = XI * nt * mw;
        if buf.len() < ml {
            buf.resize(ml, 0.0);
        }
        let mm = &mut buf[..ml];
        for xi in 0..XI {
            // Columns ms of U_ξ (Cin₁₆ × Cout₁₆).
            let b = Mat {
                data: &u[xi * cp * mp + ms.0..],
                rows: cp,
                cols: mw,
                row_stride: mp,
                col_stride: 1,
            };
            gemm_into(
                // Rows of V_ξ: one per tile, 36·Cin₁₆ apart.
                Mat {
                    data: &v[xi * cp..],
                    rows: nt,
                    cols: cp,
                    row_stride: XI * cp,
                    col_stride: 1,
                },
                b,
                &mut mm[xi * nt * mw..][..nt * mw],
                mw,
                false,
                false,
            );
        }
        let (oy0, oy1) = (T * ty0, (T * ty1).min(g.oh));
        write_tiles(mm, g, tw, t0, nt, &bias[ms.0..ms.1], out, oy0, oy1, ms.0);
        if act != Act::None {
            for m in ms.0..ms.1.min(g.m) {
                let rows = out.rows(m, oy0, oy1);
                epilogue_rows(rows, rows.len(), None, act);
            }
        }
    });
}

/// The output transform of a block's tiles into the output rows
/// `oy0..oy1` of planes `m_lo..` (as many as `mm` = [36][tiles][width]
/// holds, `bias` their biases), bias added.
#[allow(clippy::too_many_arguments)]
fn write_tiles(
    mm: &[f32],
    g: &Geom,
    tw: usize,
    t0: usize,
    nt: usize,
    bias: &[f32],
    out: Out,
    oy0: usize,
    oy1: usize,
    m_lo: usize,
) {
    let mp = bias.len();
    let mut y = [[[0.0f32; L]; T]; T];
    for tl in 0..nt {
        let (ty, tx) = ((t0 + tl) / tw, (t0 + tl) % tw);
        let (oy, ox) = (T * ty - oy0, T * tx);
        let (hr, wc) = ((oy1 - oy0 - oy).min(T), (g.ow - ox).min(T));
        for m0 in (0..mp).step_by(L) {
            tile_out(mm, mp, nt, tl, m0, &bias[m0..m0 + L], &mut y);
            for l in 0..L.min(g.m.saturating_sub(m_lo + m0)) {
                let plane = out.rows(m_lo + m0 + l, oy0, oy1);
                for (i, yi) in y.iter().enumerate().take(hr) {
                    let row = &mut plane[(oy + i) * g.ow + ox..][..wc];
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = yi[j][l];
                    }
                }
            }
        }
    }
}

simd_fn! {
    /// One tile's 4×4 outputs for 16 output channels from `mm` = [36][nt][mp].
    fn tile_out(mm: &[f32], mp: usize, nt: usize, tl: usize, m0: usize, bias: &[f32], y: &mut [[Lanes; T]; T]) {
        let mut rows = [[[0.0; L]; T]; A];
        for (r, row) in rows.iter_mut().enumerate() {
            let mut d = [[0.0; L]; A];
            for (s, ds) in d.iter_mut().enumerate() {
                let off = ((r * A + s) * nt + tl) * mp + m0;
                ds.copy_from_slice(&mm[off..off + L]);
            }
            *row = at(&d);
        }
        #[allow(clippy::needless_range_loop)]
        for j in 0..T {
            let col = [rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]];
            for (i, yi) in at(&col).iter().enumerate() {
                for l in 0..L {
                    y[i][j][l] = yi[l] + bias[l];
                }
            }
        }
    }
}
