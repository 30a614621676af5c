//! conv (1-D and 2-D, any groups) in f32. Per batch item and group, the
//! output (M/g, positions) is the product of the weight (M/g, C/g·k) with
//! the input's patch matrix (C/g·k, positions) — im2col into a per-thread
//! buffer, then the `gemm` crate, split over threads. A 1×1 conv with
//! stride 1 and no padding reads the input itself as the patch matrix.
//! Depthwise convs (one input and one output channel per group) run a
//! direct loop over the taps instead: a product of 1 row would waste the
//! GEMM. The bias is added per output channel as the rows are written.

use super::layout::View;
use super::matmul::Act;
use super::par::for_chunks;
use super::simd::{simd_fn, Mad};
use crate::kernels::gemm::{gemm_into, Mat};
use rlx_ir::{Attrs, TensorType};
use std::cell::RefCell;

/// An optional list attribute, `fill` for each of `len` axes when absent
/// or empty; `None` when a value is negative.
fn list_attr(attrs: &Attrs, name: &str, fill: usize, len: usize) -> Option<Vec<usize>> {
    let v = match attrs.ints(name) {
        Ok(v) if !v.is_empty() => v
            .iter()
            .map(|&x| usize::try_from(x).ok())
            .collect::<Option<Vec<_>>>()?,
        _ => vec![fill; len],
    };
    (v.len() == len).then_some(v)
}

/// Strides, dilations and pads (begins, then ends) of `sp` spatial axes.
fn window(attrs: &Attrs, sp: usize) -> Option<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    Some((
        list_attr(attrs, "strides", 1, sp)?,
        list_attr(attrs, "dilations", 1, sp)?,
        list_attr(attrs, "pads", 0, 2 * sp)?,
    ))
}

/// The sizes of one 2-D conv (a 1-D conv is one of height 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Geom {
    pub(super) n: usize,
    pub(super) c: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) m: usize,
    pub(super) kh: usize,
    pub(super) kw: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    pub(super) stride: [usize; 2],
    pub(super) dil: [usize; 2],
    pub(super) pad: [usize; 2],
    pub(super) groups: usize,
}

/// The geometry of a conv of these inputs and attributes, when this kernel
/// runs it: 3-D or 4-D input, weight of the same rank.
pub fn geom(inputs: &[&TensorType], attrs: &Attrs) -> Option<Geom> {
    geom_groups(inputs, attrs, None)
}

/// [`geom`] with the group count given (a pool: one per channel).
fn geom_groups(inputs: &[&TensorType], attrs: &Attrs, groups: Option<usize>) -> Option<Geom> {
    let (x, wt) = (inputs.first()?.dims(), inputs.get(1)?.dims());
    let r = x.len();
    if !(r == 3 || r == 4) || wt.len() != r {
        return None;
    }
    let sp = r - 2;
    let (s, d, p) = window(attrs, sp)?;
    let groups = match groups {
        Some(g) => g,
        None => usize::try_from(attrs.int("groups").unwrap_or(1)).ok()?,
    };
    // (height, width): a 1-D conv is one row.
    let two = |v: &[usize], fill: usize| if sp == 1 { [fill, v[0]] } else { [v[0], v[1]] };
    let (xs, ws) = (&x[2..], &wt[2..]);
    // The output extent per axis (the IR's type rule, which the output's
    // type already holds): (in + pads − dilated kernel) / stride + 1.
    let os: Vec<usize> = (0..sp)
        .map(|i| {
            let span = xs[i] + p[i] + p[sp + i];
            let ek = (ws[i].checked_sub(1)?) * d[i] + 1;
            (s[i] >= 1 && span >= ek).then(|| (span - ek) / s[i] + 1)
        })
        .collect::<Option<_>>()?;
    let os = &os[..];
    let g = Geom {
        n: x[0],
        c: x[1],
        h: two(xs, 1)[0],
        w: two(xs, 1)[1],
        m: wt[0],
        kh: two(ws, 1)[0],
        kw: two(ws, 1)[1],
        oh: two(os, 1)[0],
        ow: two(os, 1)[1],
        stride: two(&s, 1),
        dil: two(&d, 1),
        pad: two(&p[..sp], 0),
        groups,
    };
    (groups >= 1
        && g.c.is_multiple_of(groups)
        && g.m.is_multiple_of(groups)
        && wt[1] * groups == g.c)
        .then_some(g)
}

impl Geom {
    pub(super) fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.pad == [0, 0]
    }
    pub(super) fn depthwise(&self) -> bool {
        self.groups == self.c && self.m == self.c
    }
}

thread_local! {
    /// The patch matrix of a transposed conv, a max pool's row maxima or
    /// a depthwise conv's padded plane; kept between runs (grown, never
    /// shrunk).
    static COL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Depthwise: each channel convolved with its own taps. The input plane
/// is first copied into a zero-padded plane (per thread), so that every
/// tap of every output row is one unconditional multiply-add over a
/// contiguous (stride 1) or strided row.
fn depthwise(g: &Geom, x: &[f32], w: &[f32], out: &mut [f32]) {
    let (p, k) = (g.oh * g.ow, g.kh * g.kw);
    // The padded plane covers every position a tap reads.
    let ph = (g.oh - 1) * g.stride[0] + (g.kh - 1) * g.dil[0] + 1;
    let pw = (g.ow - 1) * g.stride[1] + (g.kw - 1) * g.dil[1] + 1;
    for_chunks(out, p.max(1), |ch, o| {
        if p == 0 {
            return;
        }
        let c = ch % g.c;
        let plane = &x[(ch / g.c * g.c + c) * g.h * g.w..][..g.h * g.w];
        COL.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            buf.resize(ph * pw, 0.0);
            for iy in 0..g.h {
                let py = iy + g.pad[0];
                if py >= ph {
                    break;
                }
                let n = g.w.min(pw.saturating_sub(g.pad[1]));
                buf[py * pw + g.pad[1]..][..n].copy_from_slice(&plane[iy * g.w..][..n]);
            }
            depthwise_plane(g, &buf, pw, &w[c * k..(c + 1) * k], o);
        });
    });
}

/// `B` outputs of a depthwise row from column `x0` (stride 1 along x):
/// every tap summed in registers, stored once.
#[inline(always)]
fn dw_block<M: Mad, const B: usize>(
    g: &Geom,
    rows: &[&[f32]],
    taps: &[f32],
    x0: usize,
    out: &mut [f32],
) {
    let mut acc = [0f32; B];
    for (ki, s) in rows.iter().enumerate() {
        for (kj, &t) in taps[ki * g.kw..(ki + 1) * g.kw].iter().enumerate() {
            let xs: &[f32; B] = s[x0 + kj * g.dil[1]..][..B].try_into().unwrap();
            for i in 0..B {
                acc[i] = M::mad(t, xs[i], acc[i]);
            }
        }
    }
    out[x0..x0 + B].copy_from_slice(&acc);
}

/// Window rows a depthwise kernel reads at once (taller windows go
/// through the generic loop).
const DW_MAX_KH: usize = 7;

simd_fn! {
    /// One channel's output plane `o` from its zero-padded input plane
    /// (`pw` columns) and taps. With stride 1 along x, blocks of 64 then
    /// 16 outputs sum every tap in registers and are stored once.
    fn depthwise_plane(g: &Geom, padded: &[f32], pw: usize, taps: &[f32], o: &mut [f32]) {
        let (sy, dy, sx, dx) = (g.stride[0], g.dil[0], g.stride[1], g.dil[1]);
        for (oy, row) in o.chunks_exact_mut(g.ow).enumerate() {
            let src = |ki: usize| &padded[(oy * sy + ki * dy) * pw..][..pw];
            let mut x0 = 0;
            if sx == 1 && g.kh <= DW_MAX_KH {
                let mut rows: [&[f32]; DW_MAX_KH] = [&[]; DW_MAX_KH];
                for (ki, r) in rows.iter_mut().enumerate().take(g.kh) {
                    *r = src(ki);
                }
                let rows = &rows[..g.kh];
                while x0 + 64 <= g.ow {
                    dw_block::<M, 64>(g, rows, taps, x0, row);
                    x0 += 64;
                }
                while x0 + 16 <= g.ow {
                    dw_block::<M, 16>(g, rows, taps, x0, row);
                    x0 += 16;
                }
            }
            // The rest (a tail under 16, or strided along x): tap by tap.
            let rest = &mut row[x0..];
            rest.fill(0.0);
            for ki in 0..g.kh {
                let s = src(ki);
                for (kj, &t) in taps[ki * g.kw..(ki + 1) * g.kw].iter().enumerate() {
                    let first = x0 * sx + kj * dx;
                    if sx == 1 {
                        for (v, &xv) in rest.iter_mut().zip(&s[first..]) {
                            *v = M::mad(t, xv, *v);
                        }
                    } else {
                        for (v, xv) in rest.iter_mut().zip(s[first..].iter().step_by(sx)) {
                            *v = M::mad(t, *xv, *v);
                        }
                    }
                }
            }
        }
    }
}

/// `out` (N, M, OH, OW) = act(conv(x, w) + bias); x and w contiguous.
/// With `winograd` (the transformed filter, [`super::winograd::applies`]
/// said yes) it runs as Winograd F(4×4, 3×3).
pub fn run(
    g: &Geom,
    x: &[f32],
    w: &[f32],
    winograd: Option<&[f32]>,
    bias: Option<&View>,
    act: Act,
    out: &mut [f32],
) {
    if let Some(u) = winograd {
        return super::winograd::run(g, x, u, bias, act, out);
    }
    if !g.depthwise() {
        let (cg, mg) = (g.c / g.groups, g.m / g.groups);
        let (k, p) = (cg * g.kh * g.kw, g.oh * g.ow);
        for b in 0..g.n {
            for gi in 0..g.groups {
                let xg = &x[(b * g.c + gi * cg) * g.h * g.w..][..cg * g.h * g.w];
                let wg = &w[gi * mg * k..(gi + 1) * mg * k];
                let o = &mut out[(b * g.m + gi * mg) * p..][..mg * p];
                super::conv_gemm::run_group(g, xg, wg, gi * mg, bias, act, o);
            }
        }
        return;
    }
    depthwise(g, x, w, out);
    if bias.is_none() && act == Act::None {
        return;
    }
    // Bias and activation per output channel (one row of `p`), on threads.
    let p = (g.oh * g.ow).max(1);
    let rows = (out.len() / p)
        .div_ceil(super::par::threads().max(1) * 4)
        .max(1);
    for_chunks(out, rows * p, |ci, chunk| {
        for (r, row) in chunk.chunks_mut(p).enumerate() {
            let b = bias.map(|b| b.get((ci * rows + r) % g.m));
            super::conv_gemm::channel_epilogue(row, b, act);
        }
    });
}

/// The sizes of one 2-D transposed conv with one group (a 1-D one is of
/// height 1).
#[derive(Clone, Debug, PartialEq)]
pub struct TGeom {
    n: usize,
    cin: usize,
    h: usize,
    w: usize,
    cout: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    stride: [usize; 2],
    dil: [usize; 2],
    pad: [usize; 2],
}

/// The geometry of a conv_transpose this kernel runs: 3-D or 4-D, one group.
pub fn tgeom(inputs: &[&TensorType], attrs: &Attrs) -> Option<TGeom> {
    let (x, wt) = (inputs.first()?.dims(), inputs.get(1)?.dims());
    let r = x.len();
    if !(r == 3 || r == 4)
        || wt.len() != r
        || attrs.int("groups").unwrap_or(1) != 1
        || wt[0] != x[1]
    {
        return None;
    }
    let sp = r - 2;
    let (s, d, p) = window(attrs, sp)?;
    let op = list_attr(attrs, "output_padding", 0, sp)?;
    let os: Vec<usize> = (0..sp)
        .map(|i| {
            let full =
                (x[2 + i].checked_sub(1)?) * s[i] + d[i] * (wt[2 + i].checked_sub(1)?) + op[i] + 1;
            full.checked_sub(p[i] + p[sp + i])
        })
        .collect::<Option<_>>()?;
    let two = |v: &[usize], fill: usize| if sp == 1 { [fill, v[0]] } else { [v[0], v[1]] };
    Some(TGeom {
        n: x[0],
        cin: x[1],
        h: two(&x[2..], 1)[0],
        w: two(&x[2..], 1)[1],
        cout: wt[1],
        kh: two(&wt[2..], 1)[0],
        kw: two(&wt[2..], 1)[1],
        oh: two(&os, 1)[0],
        ow: two(&os, 1)[1],
        stride: two(&s, 1),
        dil: two(&d, 1),
        pad: two(&p[..sp], 0),
    })
}

impl TGeom {
    /// f32s of the column matrix (Cout·k, input positions).
    pub fn col_len(&self) -> usize {
        self.cout * self.kh * self.kw * self.h * self.w
    }
}

/// `out` = conv_transpose(x, w) + bias: the columns wᵀ·x (Cout·k × input
/// positions) by GEMM, then each column added at the output position its
/// tap lands on (col2im), one output channel per task.
pub fn run_transpose(g: &TGeom, x: &[f32], w: &[f32], bias: Option<&View>, out: &mut [f32]) {
    let (p, k) = (g.h * g.w, g.kh * g.kw);
    let (rows, op) = (g.cout * k, g.oh * g.ow);
    COL.with(|col| {
        let mut col = col.borrow_mut();
        if col.len() < g.col_len() {
            col.resize(g.col_len(), 0.0);
        }
        for b in 0..g.n {
            let xb = &x[b * g.cin * p..(b + 1) * g.cin * p];
            // w is (Cin, Cout·k): its transpose read through swapped strides.
            let wt = Mat {
                data: w,
                rows,
                cols: g.cin,
                row_stride: 1,
                col_stride: rows,
            };
            gemm_into(
                wt,
                Mat::row_major(xb, g.cin, p),
                &mut col[..rows * p],
                p,
                false,
                true,
            );
            let cols = &col[..rows * p];
            let ob = &mut out[b * g.cout * op..(b + 1) * g.cout * op];
            for_chunks(ob, op.max(1), |oc, plane| {
                let b0 = bias.map_or(0.0, |v| v.get(oc));
                plane.fill(b0);
                for ki in 0..g.kh {
                    for kj in 0..g.kw {
                        let src = &cols[((oc * g.kh + ki) * g.kw + kj) * p..][..p];
                        for iy in 0..g.h {
                            let oy =
                                (iy * g.stride[0] + ki * g.dil[0]) as isize - g.pad[0] as isize;
                            if oy < 0 || oy >= g.oh as isize {
                                continue;
                            }
                            let row = &mut plane[oy as usize * g.ow..(oy as usize + 1) * g.ow];
                            for ix in 0..g.w {
                                let ox =
                                    (ix * g.stride[1] + kj * g.dil[1]) as isize - g.pad[1] as isize;
                                if ox >= 0 && ox < g.ow as isize {
                                    row[ox as usize] += src[iy * g.w + ix];
                                }
                            }
                        }
                    }
                }
            });
        }
    });
}

/// A 2-D max pool (a 1-D one is of height 1): the conv geometry with one
/// group per channel and no weight.
pub fn pool_geom(input: &TensorType, attrs: &Attrs) -> Option<Geom> {
    let kernel = attrs.ints("kernel").ok()?;
    let mut wdims = vec![input.dims().get(1).copied()?, 1];
    wdims.extend(
        kernel
            .iter()
            .map(|&k| usize::try_from(k).ok())
            .collect::<Option<Vec<_>>>()?,
    );
    let c = wdims[0];
    let w = TensorType::new(input.dtype, wdims);
    let g = geom_groups(&[input, &w], attrs, Some(c))?;
    g.depthwise().then_some(g)
}

/// `out` = max over each window of `x` (padding never wins; a window all
/// in padding — which the type rule does not produce — gives −∞). NaN
/// propagates, as in the reference.
pub fn max_pool(g: &Geom, x: &[f32], out: &mut [f32]) {
    if g.stride == [1, 1] && g.dil == [1, 1] {
        return max_pool_unit(g, x, out);
    }
    let p = g.oh * g.ow;
    for_chunks(out, p.max(1), |plane, o| {
        let src = &x[plane * g.h * g.w..(plane + 1) * g.h * g.w];
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let mut m = f32::NEG_INFINITY;
                for ki in 0..g.kh {
                    let iy = (oy * g.stride[0] + ki * g.dil[0]) as isize - g.pad[0] as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    let row = &src[iy as usize * g.w..(iy as usize + 1) * g.w];
                    for kj in 0..g.kw {
                        let ix = (ox * g.stride[1] + kj * g.dil[1]) as isize - g.pad[1] as isize;
                        if ix >= 0 && ix < g.w as isize {
                            let v = row[ix as usize];
                            if v > m || v.is_nan() {
                                m = v;
                            }
                        }
                    }
                }
                o[oy * g.ow + ox] = m;
            }
        }
    });
}

/// The larger of `m` and `v`, NaN from either side winning.
#[inline(always)]
fn max_nan(m: f32, v: f32) -> f32 {
    if v > m || v.is_nan() {
        v
    } else {
        m
    }
}

simd_fn! {
    /// `dst[i] = max(dst[i], src[i])` (NaN wins).
    pub(super) fn max_into(dst: &mut [f32], src: &[f32]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = max_nan(*d, s);
        }
    }
}

/// [`max_pool`] of stride and dilation 1, separably: the max over each
/// window's columns for every input row (shifted rows, vectorized), then
/// over its rows. Windows only partly inside see only their inside part,
/// as in the direct loop; a NaN anywhere in a window gives NaN.
fn max_pool_unit(g: &Geom, x: &[f32], out: &mut [f32]) {
    let (ow, pl) = (g.ow, g.pad[1]);
    for_chunks(out, (g.oh * ow).max(1), |plane, o| {
        let src = &x[plane * g.h * g.w..(plane + 1) * g.h * g.w];
        COL.with(|hm| {
            let mut hm = hm.borrow_mut();
            hm.clear();
            hm.resize(g.h * ow, f32::NEG_INFINITY);
            // Row maxima of every input row: hm[iy][ox].
            for (iy, row) in hm.chunks_mut(ow.max(1)).enumerate() {
                let s = &src[iy * g.w..(iy + 1) * g.w];
                for kj in 0..g.kw {
                    // Output columns ox reading input column ox + kj − pl.
                    let lo = pl.saturating_sub(kj).min(ow);
                    let hi = (g.w + pl).saturating_sub(kj).min(ow);
                    if lo < hi {
                        max_into(&mut row[lo..hi], &s[lo + kj - pl..hi + kj - pl]);
                    }
                }
            }
            o.fill(f32::NEG_INFINITY);
            for (oy, orow) in o.chunks_mut(ow.max(1)).enumerate() {
                for ki in 0..g.kh {
                    let iy = (oy + ki) as isize - g.pad[0] as isize;
                    if iy >= 0 && (iy as usize) < g.h {
                        let iy = iy as usize;
                        max_into(orow, &hm[iy * ow..(iy + 1) * ow]);
                    }
                }
            }
        });
    });
}
