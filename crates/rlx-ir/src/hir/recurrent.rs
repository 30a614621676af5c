//! The LSTM block, lowered to `scan` over `lstm_cell`.

use super::*;

/// A one-layer unidirectional LSTM over (T, B, I) inputs (`nn.LSTM`,
/// `batch_first=False`). Parameters: `weight_ih` (4H, I), `weight_hh`
/// (4H, H), `bias_ih` (4H), `bias_hh` (4H), gates in PyTorch order i, f, g, o.
///
/// Inputs: `x`, optionally followed by `h0`, `c0` (B, H) (zeros otherwise).
/// Outputs: the hidden sequence (T, B, H), then the final `h` and `c`.
///
/// Lowered to one `scan` whose body applies `lstm_cell`. Sub-graphs cannot
/// capture outer values, so the four weights ride along as loop-invariant
/// carries that the body returns unchanged.
#[derive(Clone, Debug, PartialEq)]
pub struct Lstm {
    pub input_size: usize,
    pub hidden_size: usize,
    pub dtype: DType,
}

const LSTM_PARAMS: [&str; 4] = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"];

impl Lstm {
    /// An f32 LSTM.
    pub fn new(input_size: usize, hidden_size: usize) -> Self {
        Lstm {
            input_size,
            hidden_size,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// The scan body: (h, c, weights..., x_t) → (h', c', weights..., h').
    fn step_graph(
        &self,
        cx: &Lower,
        state: &TensorType,
        weights: &[TensorType; 4],
        x_t: TensorType,
    ) -> Result<Graph, IrError> {
        let mut b = GraphBuilder::new("lstm_step");
        b.set_origin(Some(cx.origin()));
        let h = b.input("h", state.clone());
        let c = b.input("c", state.clone());
        let w: Vec<ValueId> = LSTM_PARAMS
            .iter()
            .zip(weights)
            .map(|(n, ty)| b.input(*n, ty.clone()))
            .collect();
        let x = b.input("x", x_t);
        let hc = b.op(
            "lstm_cell",
            &[x, h, c, w[0], w[1], w[2], w[3]],
            Attrs::new(),
        )?;
        let mut outs = vec![hc[0], hc[1]];
        outs.extend(&w);
        outs.push(hc[0]);
        b.finish(&outs)
    }

    /// The initial state: given, or zeros of (B, H).
    fn initial_state(
        &self,
        cx: &mut Lower,
        given: &[ValueId],
        batch: usize,
        dtype: DType,
    ) -> Result<(ValueId, ValueId), IrError> {
        if let [h, c] = given {
            return Ok((*h, *c));
        }
        let zero = cx.builder().scalar(0.0, dtype)?;
        let shape = vec![batch as i64, self.hidden_size as i64];
        let z = cx.op1("broadcast", &[zero], Attrs::new().with("shape", shape))?;
        Ok((z, z))
    }
}

impl Block for Lstm {
    fn kind(&self) -> &'static str {
        "Lstm"
    }
    fn describe(&self) -> String {
        format!(
            "Lstm(input_size={}, hidden_size={})",
            self.input_size, self.hidden_size
        )
    }
    fn params(&self) -> Vec<Param> {
        let (h4, i, h) = (
            self.hidden_size.saturating_mul(4),
            self.input_size,
            self.hidden_size,
        );
        vec![
            Param::new("weight_ih", self.dtype, [h4, i]),
            Param::new("weight_hh", self.dtype, [h4, h]),
            Param::new("bias_ih", self.dtype, [h4]),
            Param::new("bias_hh", self.dtype, [h4]),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, state) = match inputs {
            [x, rest @ ..] if rest.is_empty() || rest.len() == 2 => (*x, rest),
            _ => {
                return Err(cx.err(format!(
                    "expects x or (x, h0, c0), got {} inputs",
                    inputs.len()
                )))
            }
        };
        let xt = cx.ty(x);
        if xt.rank() != 3 || xt.dims()[2] != self.input_size {
            return Err(cx.err(format!(
                "expects x as (T, B, {}), got {xt}",
                self.input_size
            )));
        }
        let batch = xt.dims()[1];
        let (h0, c0) = self.initial_state(cx, state, batch, xt.dtype)?;
        let mut weights = Vec::with_capacity(4);
        for name in LSTM_PARAMS {
            weights.push(cx.param(name)?);
        }
        let wty = [0, 1, 2, 3].map(|k| cx.ty(weights[k]));
        let body = self.step_graph(
            cx,
            &cx.ty(h0),
            &wty,
            TensorType::new(xt.dtype, [batch, self.input_size]),
        )?;
        let mut args = vec![h0, c0];
        args.extend(&weights);
        args.push(x);
        let carries = 2 + weights.len();
        let outs = cx.op(
            "scan",
            &args,
            Attrs::new().with("body", body).with("num_carry", carries),
        )?;
        // scan returns the final carries first, then the stacked per-step outputs.
        Ok(vec![outs[carries], outs[0], outs[1]])
    }
}

// ------------------------------------------------------------ composite blocks
