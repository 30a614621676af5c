//! Rotary position embeddings: each row of `x` (…, S, D) is turned by the
//! angles of its position, `cos`/`sin` (S, D/2). Halves pair lane i with
//! i + D/2; interleaved pairs 2i with 2i + 1. Computed in f32, as the
//! models' own implementations do (the reference rounds one f64 result).

use super::par::{chunk_len, for_chunks};

pub fn rope(
    out: &mut [f32],
    x: &[f32],
    cos: &[f32],
    sin: &[f32],
    seq: usize,
    d: usize,
    interleaved: bool,
) {
    if d == 0 || seq == 0 || out.is_empty() {
        return;
    }
    let h = d / 2;
    let chunk = chunk_len(out.len(), d, 16 * 1024);
    for_chunks(out, chunk, |ci, oc| {
        for (ri, o) in oc.chunks_mut(d).enumerate() {
            let row = ci * chunk / d + ri;
            let xr = &x[row * d..(row + 1) * d];
            let pos = row % seq;
            let (c, s) = (&cos[pos * h..(pos + 1) * h], &sin[pos * h..(pos + 1) * h]);
            if interleaved {
                for i in 0..h {
                    let (a, b) = (xr[2 * i], xr[2 * i + 1]);
                    o[2 * i] = a * c[i] - b * s[i];
                    o[2 * i + 1] = b * c[i] + a * s[i];
                }
            } else {
                let (x1, x2) = xr.split_at(h);
                let (o1, o2) = o.split_at_mut(h);
                for i in 0..h {
                    o1[i] = x1[i] * c[i] - x2[i] * s[i];
                    o2[i] = x2[i] * c[i] + x1[i] * s[i];
                }
            }
        }
    });
}
