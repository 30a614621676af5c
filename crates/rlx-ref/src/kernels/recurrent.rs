//! One step of the PyTorch recurrent cells (RNNCell, LSTMCell, GRUCell).
//!
//! Shapes (checked by the type rules): x (B, I), h and c (B, H),
//! w_ih (G·H, I), w_hh (G·H, H), b_ih and b_hh (G·H), where G is the
//! number of gates. The gate blocks of the weights are stacked in PyTorch's
//! order: RNN (one block), LSTM (i, f, g, o), GRU (r, z, n).

use super::*;

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("rnn_cell", rnn_cell),
    ("lstm_cell", lstm_cell),
    ("gru_cell", gru_cell),
];

/// A row-major matrix of f64, widened from an input.
struct Mat {
    v: Vec<f64>,
    cols: usize,
}

impl Mat {
    fn of(t: &HostTensor) -> Result<Mat, CpuError> {
        let cols = *t.shape().dims().last().unwrap_or(&1);
        Ok(Mat {
            v: floats(t)?,
            cols,
        })
    }
    fn row(&self, r: usize) -> &[f64] {
        &self.v[r * self.cols..(r + 1) * self.cols]
    }
}

/// `x · wᵀ + bias` for one batch row: one value per row of `w`.
fn affine(x: &[f64], w: &Mat, bias: &[f64]) -> Vec<f64> {
    bias.iter()
        .enumerate()
        .map(|(r, &b)| b + x.iter().zip(w.row(r)).map(|(a, c)| a * c).sum::<f64>())
        .collect()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// The projections of one cell step: for batch row b, `gi(b)` = x·W_ihᵀ +
/// b_ih and `gh(b)` = h·W_hhᵀ + b_hh, each G·H values.
struct Step {
    batch: usize,
    x: Mat,
    h: Mat,
    w_ih: Mat,
    w_hh: Mat,
    b_ih: Vec<f64>,
    b_hh: Vec<f64>,
}

impl Step {
    /// `first` is the index of w_ih among the inputs (after x and the
    /// state inputs).
    fn read(cx: &KernelCx, first: usize) -> Result<Step, CpuError> {
        Ok(Step {
            batch: cx.input(0).shape().dims()[0],
            x: Mat::of(cx.input(0))?,
            h: Mat::of(cx.input(1))?,
            w_ih: Mat::of(cx.input(first))?,
            w_hh: Mat::of(cx.input(first + 1))?,
            b_ih: floats(cx.input(first + 2))?,
            b_hh: floats(cx.input(first + 3))?,
        })
    }
    fn hidden(&self) -> usize {
        self.h.cols
    }
    fn gi(&self, b: usize) -> Vec<f64> {
        affine(self.x.row(b), &self.w_ih, &self.b_ih)
    }
    fn gh(&self, b: usize) -> Vec<f64> {
        affine(self.h.row(b), &self.w_hh, &self.b_hh)
    }
}

/// h' = act(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh), act = tanh or relu.
fn rnn_cell(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let s = Step::read(cx, 2)?;
    let relu = match cx.str("nonlinearity")? {
        "tanh" => false,
        "relu" => true,
        other => return Err(cx.fail(format!("unknown nonlinearity {other:?}"))),
    };
    let mut out = Vec::with_capacity(s.batch * s.hidden());
    for b in 0..s.batch {
        for (i, h) in s.gi(b).into_iter().zip(s.gh(b)) {
            let v = i + h;
            out.push(if relu { v.max(0.0) } else { v.tanh() });
        }
    }
    Ok(vec![from_floats(cx.out_type(0), out)?])
}

/// PyTorch LSTMCell: gates = x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh split into
/// i, f, g, o; c' = σ(f)·c + σ(i)·tanh(g); h' = σ(o)·tanh(c').
fn lstm_cell(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let s = Step::read(cx, 3)?;
    let c = Mat::of(cx.input(2))?;
    let hd = s.hidden();
    let (mut h_out, mut c_out) = (Vec::new(), Vec::new());
    for b in 0..s.batch {
        let z: Vec<f64> = s
            .gi(b)
            .into_iter()
            .zip(s.gh(b))
            .map(|(a, b)| a + b)
            .collect();
        for j in 0..hd {
            let (i, f, g, o) = (
                sigmoid(z[j]),
                sigmoid(z[hd + j]),
                z[2 * hd + j].tanh(),
                sigmoid(z[3 * hd + j]),
            );
            let c_new = f * c.row(b)[j] + i * g;
            c_out.push(c_new);
            h_out.push(o * c_new.tanh());
        }
    }
    Ok(vec![
        from_floats(cx.out_type(0), h_out)?,
        from_floats(cx.out_type(1), c_out)?,
    ])
}

/// PyTorch GRUCell: r = σ(gi_r + gh_r), z = σ(gi_z + gh_z),
/// n = tanh(gi_n + r·gh_n) (the reset gate scales the hidden projection
/// *including* its bias b_hn), h' = (1 − z)·n + z·h.
fn gru_cell(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let s = Step::read(cx, 2)?;
    let hd = s.hidden();
    let mut out = Vec::with_capacity(s.batch * hd);
    for b in 0..s.batch {
        let (gi, gh) = (s.gi(b), s.gh(b));
        for j in 0..hd {
            let r = sigmoid(gi[j] + gh[j]);
            let z = sigmoid(gi[hd + j] + gh[hd + j]);
            let n = (gi[2 * hd + j] + r * gh[2 * hd + j]).tanh();
            out.push((1.0 - z) * n + z * s.h.row(b)[j]);
        }
    }
    Ok(vec![from_floats(cx.out_type(0), out)?])
}

#[cfg(test)]
mod tests {
    use rlx_ir::HostTensor;

    fn run(src: &str, inputs: &[HostTensor]) -> Vec<Vec<f64>> {
        let g = rlx_ir::text::parse(src).unwrap();
        crate::run_graph(&g, inputs)
            .unwrap()
            .iter()
            .map(|t| t.to_f64_vec().unwrap())
            .collect()
    }

    fn t(v: &[f64], shape: &[usize]) -> HostTensor {
        HostTensor::from_slice(v, shape.to_vec()).unwrap()
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn rnn_relu_by_hand() {
        // B=1, I=2, H=1: pre = 1·2 + 2·(−3) + 0.5 + 4·1 + 0.25 = 0.75.
        let src = "graph @g(%x: f64[1,2], %h: f64[1,1], %wi: f64[1,2], %wh: f64[1,1], %bi: f64[1], %bh: f64[1]) {\n  %6 = rnn_cell(%x, %h, %wi, %wh, %bi, %bh) {nonlinearity=\"relu\"}\n  return %6\n}";
        let ins = [
            t(&[1.0, 2.0], &[1, 2]),
            t(&[4.0], &[1, 1]),
            t(&[2.0, -3.0], &[1, 2]),
            t(&[1.0], &[1, 1]),
            t(&[0.5], &[1]),
            t(&[0.25], &[1]),
        ];
        close(&run(src, &ins)[0], &[0.75]);
    }

    #[test]
    fn lstm_and_gru_with_zero_weights() {
        // With zero weights every gate is its bias sum. LSTM biases
        // (i, f, g, o) = (0, 0, 0.5, 0) over b_ih, b_hh 0:
        // c' = 0.5·c + 0.5·tanh(0.5), h' = 0.5·tanh(c').
        let src = "graph @g(%x: f64[1,1], %h: f64[1,1], %c: f64[1,1], %wi: f64[4,1], %wh: f64[4,1], %bi: f64[4], %bh: f64[4]) {\n  %7, %8 = lstm_cell(%x, %h, %c, %wi, %wh, %bi, %bh)\n  return %7, %8\n}";
        let ins = [
            t(&[1.0], &[1, 1]),
            t(&[0.3], &[1, 1]),
            t(&[2.0], &[1, 1]),
            t(&[0.0; 4], &[4, 1]),
            t(&[0.0; 4], &[4, 1]),
            t(&[0.0, 0.0, 0.5, 0.0], &[4]),
            t(&[0.0; 4], &[4]),
        ];
        let out = run(src, &ins);
        let c = 0.5 * 2.0 + 0.5 * 0.5f64.tanh();
        close(&out[1], &[c]);
        close(&out[0], &[0.5 * c.tanh()]);

        // GRU: r = σ(0) = 0.5, z = σ(0) = 0.5, n = tanh(b_in + r·b_hn)
        // = tanh(0.2 + 0.5·0.4); h' = 0.5·n + 0.5·h.
        let src = "graph @g(%x: f64[1,1], %h: f64[1,1], %wi: f64[3,1], %wh: f64[3,1], %bi: f64[3], %bh: f64[3]) {\n  %6 = gru_cell(%x, %h, %wi, %wh, %bi, %bh)\n  return %6\n}";
        let ins = [
            t(&[1.0], &[1, 1]),
            t(&[0.6], &[1, 1]),
            t(&[0.0; 3], &[3, 1]),
            t(&[0.0; 3], &[3, 1]),
            t(&[0.0, 0.0, 0.2], &[3]),
            t(&[0.0, 0.0, 0.4], &[3]),
        ];
        let n = 0.4f64.tanh();
        close(&run(src, &ins)[0], &[0.5 * n + 0.5 * 0.6]);
    }
}
