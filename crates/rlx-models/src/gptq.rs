//! GPTQ (Frantar et al., 2022): post-training weight quantization that
//! uses calibration activations. Columns (input features) are quantized
//! one at a time and each column's rounding error is spread over the
//! columns not yet quantized, weighted by the inverse Hessian of the
//! layer's squared output error, `H = Σ xxᵀ` over the calibration rows —
//! so the layer's outputs on data like the calibration set move as little
//! as 4 bits allow. The groups of 32 columns are GGUF blocks: each row's
//! block scale is set from the (error-updated) weights when the group
//! starts, and the result is ordinary Q4_0 / Q4_1 / Q8_0 bytes that every
//! `dequant_matmul` kernel reads.

use rlx_ir::DType;

/// Accumulated `XᵀX` of a layer's inputs (`n` features).
#[derive(Clone, Debug)]
pub struct Hessian {
    n: usize,
    h: Vec<f64>,
    rows: usize,
}

impl Hessian {
    /// An empty accumulator for `n` input features.
    pub fn new(n: usize) -> Self {
        Hessian {
            n,
            h: vec![0.0; n * n],
            rows: 0,
        }
    }

    /// Add calibration rows `x` (row-major, `n` per row).
    pub fn add(&mut self, x: &[f32]) {
        let n = self.n;
        for row in x.chunks_exact(n) {
            for i in 0..n {
                let xi = row[i] as f64;
                if xi == 0.0 {
                    continue;
                }
                let hi = &mut self.h[i * n..(i + 1) * n];
                for (hj, &xj) in hi.iter_mut().zip(row) {
                    *hj += xi * xj as f64;
                }
            }
            self.rows += 1;
        }
    }

    /// Calibration rows seen.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// In-place lower Cholesky factor of the SPD `a` (n×n); `None` if not SPD.
fn cholesky(a: &mut [f64], n: usize) -> Option<()> {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
        for k in j + 1..n {
            a[j * n + k] = 0.0;
        }
    }
    Some(())
}

/// The upper factor `U` of `H⁻¹ = UᵀU` (what GPTQ's updates read).
fn inverse_upper(h: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = h.to_vec();
    cholesky(&mut l, n)?;
    // L⁻¹ by forward substitution, a row at a time (row i is e_i minus
    // the earlier rows weighted by L's row i), then H⁻¹ = L⁻ᵀ L⁻¹ as a sum
    // of outer products of L⁻¹'s rows: every inner loop runs along a row.
    let mut li = vec![0.0; n * n];
    for i in 0..n {
        let (done, rest) = li.split_at_mut(i * n);
        let row = &mut rest[..n];
        row[i] = 1.0;
        for k in 0..i {
            let a = l[i * n + k];
            if a != 0.0 {
                for (r, &p) in row[..=k].iter_mut().zip(&done[k * n..k * n + k + 1]) {
                    *r -= a * p;
                }
            }
        }
        let d = l[i * n + i];
        for r in &mut row[..=i] {
            *r /= d;
        }
    }
    let mut hinv = vec![0.0; n * n];
    for k in 0..n {
        let rk = &li[k * n..k * n + k + 1];
        for i in 0..=k {
            let a = rk[i];
            if a != 0.0 {
                for (h, &b) in hinv[i * n..i * n + i + 1].iter_mut().zip(&rk[..=i]) {
                    *h += a * b;
                }
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            hinv[j * n + i] = hinv[i * n + j];
        }
    }
    // Upper Cholesky of H⁻¹: the transpose of its lower factor.
    cholesky(&mut hinv, n)?;
    let mut u = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            u[j * n + i] = hinv[i * n + j];
        }
    }
    Some(u)
}

/// One row's block parameters and its grid: value(q) = d·q + m for q in
/// `0..=max` (Q4_0: m = −8d; Q8_0: m = 0, q signed).
#[derive(Clone, Copy)]
struct Grid {
    dtype: DType,
    d: f32,
    m: f32,
}

impl Grid {
    fn of(dtype: DType, x: &[f64]) -> Grid {
        let f16r = |v: f32| half::f16::from_f32(v).to_f32();
        match dtype {
            DType::Q4_1 => {
                let (mx, mn) = x
                    .iter()
                    .fold((f64::MIN, f64::MAX), |(a, b), &v| (a.max(v), b.min(v)));
                let d = f16r(((mx - mn) / 15.0) as f32);
                let m = f16r(mn as f32);
                Grid { dtype, d, m }
            }
            DType::Q8_0 => {
                let amax = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                let d = f16r((amax / 127.0) as f32);
                Grid { dtype, d, m: 0.0 }
            }
            _ => {
                // Q4_0: the value of largest magnitude maps to −8.
                let s = x
                    .iter()
                    .copied()
                    .fold(0.0f64, |a, v| if v.abs() > a.abs() { v } else { a });
                let d = f16r((s / -8.0) as f32);
                Grid {
                    dtype,
                    d,
                    m: -8.0 * d,
                }
            }
        }
    }

    fn q(&self, x: f64) -> f32 {
        if self.d == 0.0 {
            // Every grid point is the same value (m, or 0).
            return 0.0;
        }
        let (lo, hi) = match self.dtype {
            DType::Q8_0 => (-127.0, 127.0),
            _ => (0.0, 15.0),
        };
        (((x as f32 - self.m) / self.d).round()).clamp(lo, hi)
    }

    fn value(&self, q: f32) -> f64 {
        self.decoded(q) as f64
    }

    /// The value the GGUF decoder gives grid point `q` (its arithmetic:
    /// Q4_0 `d·(q − 8)`, Q4_1 `d·q + m`, Q8_0 `d·q`).
    fn decoded(&self, q: f32) -> f32 {
        match self.dtype {
            DType::Q8_0 => self.d * q,
            DType::Q4_1 => self.d * q + self.m,
            _ => self.d * (q - 8.0),
        }
    }
}

/// GPTQ-quantize `w` (`rows` × `cols`, row-major: a linear layer's
/// `[out, in]` weight) to `dtype` (Q4_0, Q4_1 or Q8_0) with `h` the inputs'
/// Hessian; `damp` is the fraction of the mean diagonal added to it.
/// Returns the GGUF block bytes (rows of `cols / 32` blocks) and the
/// weights they decode to.
pub fn quantize(
    w: &[f32],
    rows: usize,
    cols: usize,
    h: &Hessian,
    dtype: DType,
    damp: f64,
) -> Result<(Vec<u8>, Vec<f32>), String> {
    if !matches!(dtype, DType::Q4_0 | DType::Q4_1 | DType::Q8_0) {
        return Err(format!("GPTQ writes q4_0, q4_1 or q8_0, not {dtype}"));
    }
    if h.n != cols || w.len() != rows * cols || !cols.is_multiple_of(32) {
        return Err(format!(
            "GPTQ: a {rows}×{cols} weight (cols a multiple of 32) with a {}×{} Hessian",
            h.n, h.n
        ));
    }
    let n = cols;
    let mut hh = h.h.clone();
    let mut w: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    // Inputs never active: their weights cannot matter; keep H invertible.
    for i in 0..n {
        if hh[i * n + i] == 0.0 {
            hh[i * n + i] = 1.0;
            for r in 0..rows {
                w[r * n + i] = 0.0;
            }
        }
    }
    let mean = (0..n).map(|i| hh[i * n + i]).sum::<f64>() / n as f64;
    for i in 0..n {
        hh[i * n + i] += damp * mean;
    }
    let u = inverse_upper(&hh, n).ok_or("GPTQ: the Hessian is not positive definite")?;
    let blocks = cols / 32;
    let mut grids = vec![
        Grid {
            dtype,
            d: 0.0,
            m: 0.0
        };
        rows * blocks
    ];
    let mut q = vec![0f32; rows * cols];
    for g in 0..blocks {
        for r in 0..rows {
            grids[r * blocks + g] = Grid::of(dtype, &w[r * n + g * 32..r * n + g * 32 + 32]);
        }
        for j in g * 32..g * 32 + 32 {
            let ujj = u[j * n + j];
            let urow = &u[j * n + j + 1..(j + 1) * n];
            for r in 0..rows {
                let grid = grids[r * blocks + g];
                let x = w[r * n + j];
                let qi = grid.q(x);
                q[r * n + j] = qi;
                let err = (x - grid.value(qi)) / ujj;
                let tail = &mut w[r * n + j + 1..(r + 1) * n];
                for (t, &uk) in tail.iter_mut().zip(urow) {
                    *t -= err * uk;
                }
            }
        }
    }
    let values = (0..rows * cols)
        .map(|i| grids[i / 32].decoded(q[i]))
        .collect();
    Ok((pack(dtype, &q, &grids, rows, blocks), values))
}

/// GGUF block bytes from the integer grid points.
fn pack(dtype: DType, q: &[f32], grids: &[Grid], rows: usize, blocks: usize) -> Vec<u8> {
    let mut out = vec![];
    let f16b = |v: f32| half::f16::from_f32(v).to_le_bytes();
    for r in 0..rows {
        for g in 0..blocks {
            let grid = grids[r * blocks + g];
            let qs = &q[(r * blocks + g) * 32..(r * blocks + g) * 32 + 32];
            out.extend(f16b(grid.d));
            match dtype {
                DType::Q8_0 => out.extend(qs.iter().map(|&v| v as i8 as u8)),
                _ => {
                    if dtype == DType::Q4_1 {
                        out.extend(f16b(grid.m));
                    }
                    out.extend((0..16).map(|j| qs[j] as u8 | ((qs[j + 16] as u8) << 4)));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(dtype: DType, bytes: &[u8], n: usize) -> Vec<f64> {
        let t = rlx_ir::HostTensor::from_le_bytes(dtype, [n], bytes).unwrap();
        let g = rlx_ir::text::parse(&format!(
            "graph @d(%q: {dtype}[{n}]) {{\n  %x = dequantize(%q) {{dtype=f32}}\n  return %x\n}}"
        ))
        .unwrap();
        let out = rlx::compile(&g, rlx::Device::Cpu)
            .unwrap()
            .run(&[t])
            .unwrap();
        out[0].to_f64_vec().unwrap()
    }

    /// tr(ΔW H ΔWᵀ): the layer's squared output error on the calibration rows.
    fn objective(w: &[f32], q: &[f64], h: &Hessian, rows: usize) -> f64 {
        let n = h.n;
        (0..rows)
            .map(|r| {
                let d: Vec<f64> = (0..n).map(|i| w[r * n + i] as f64 - q[r * n + i]).collect();
                (0..n)
                    .map(|i| d[i] * (0..n).map(|j| h.h[i * n + j] * d[j]).sum::<f64>())
                    .sum::<f64>()
            })
            .sum()
    }

    /// On correlated inputs with an outlier feature, GPTQ's blocks decode
    /// (by the reference decoder) to weights whose output error is well
    /// below round-to-nearest's (the reference encoder), for each type.
    #[test]
    fn gptq_beats_round_to_nearest_on_the_layer_objective() {
        let (rows, cols, samples) = (16, 128, 512);
        let mut s = 7u64;
        let mut rnd = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let w: Vec<f32> = (0..rows * cols).map(|_| rnd() as f32).collect();
        let mut h = Hessian::new(cols);
        for _ in 0..samples {
            let base = rnd();
            let x: Vec<f32> = (0..cols)
                .map(|i| (base * 2.0 + rnd() * 0.5) as f32 * if i == 5 { 20.0 } else { 1.0 })
                .collect();
            h.add(&x);
        }
        assert_eq!(h.rows(), samples);
        for dtype in [DType::Q4_0, DType::Q4_1, DType::Q8_0] {
            let (g, vals) = quantize(&w, rows, cols, &h, dtype, 0.01).unwrap();
            let gq = decode(dtype, &g, rows * cols);
            // The values it reports are the decoder's, bit for bit.
            assert_eq!(
                gq,
                vals.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                "{dtype}"
            );
            // Round to nearest: the reference encoder (gguf's bytes).
            let t = rlx_ir::HostTensor::from_slice(&w, [rows, cols]).unwrap();
            let src = format!(
                "graph @q(%w: f32[{rows},{cols}]) {{\n  %q = quantize(%w) {{dtype={dtype}}}\n  %d = dequantize(%q) {{dtype=f32}}\n  return %d\n}}"
            );
            let gr = rlx_ir::text::parse(&src).unwrap();
            let rq = rlx::compile(&gr, rlx::Device::Cpu)
                .unwrap()
                .run(&[t])
                .unwrap()[0]
                .to_f64_vec()
                .unwrap();
            let (eg, er) = (objective(&w, &gq, &h, rows), objective(&w, &rq, &h, rows));
            eprintln!("{dtype}: GPTQ {eg:.4e} vs round-to-nearest {er:.4e}");
            assert!(eg < 0.7 * er, "{dtype}: GPTQ {eg} vs RTN {er}");
        }
    }

    #[test]
    fn inverse_upper_factors_the_inverse() {
        let n = 5;
        let mut h = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                h[i * n + j] =
                    1.0 / (1.0 + (i as f64 - j as f64).abs()) + if i == j { 2.0 } else { 0.0 };
            }
        }
        let u = inverse_upper(&h, n).unwrap();
        // (UᵀU) H = I
        for i in 0..n {
            for j in 0..n {
                let hinv_row =
                    |a: usize, b: usize| (0..n).map(|k| u[k * n + a] * u[k * n + b]).sum::<f64>();
                let v: f64 = (0..n).map(|k| hinv_row(i, k) * h[k * n + j]).sum();
                assert!(
                    (v - if i == j { 1.0 } else { 0.0 }).abs() < 1e-10,
                    "{i},{j}: {v}"
                );
            }
        }
    }
}
