//! Feed-forward blocks: plain and gated (SwiGLU) MLPs.

use super::*;

/// fc1 → activation → fc2 (BERT / GPT-2 feed-forward). Children `fc1`
/// (dim → hidden, activation fused) and `fc2` (hidden → dim).
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    pub fc1: Linear,
    pub fc2: Linear,
}

impl Mlp {
    /// With biases, f32.
    pub fn new(dim: usize, hidden: usize, activation: Activation) -> Self {
        Mlp {
            fc1: Linear::new(dim, hidden, true).with_activation(activation),
            fc2: Linear::new(hidden, dim, true),
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.fc1.dtype = dtype;
        self.fc2.dtype = dtype;
        self
    }
}

impl Block for Mlp {
    fn kind(&self) -> &'static str {
        "Mlp"
    }
    fn describe(&self) -> String {
        format!(
            "Mlp(dim={}, hidden={}, activation={})",
            self.fc1.in_features,
            self.fc1.out_features,
            self.fc1.activation.name()
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![("fc1".into(), &self.fc1), ("fc2".into(), &self.fc2)]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        let h = cx.child1("fc1", &self.fc1, &[x])?;
        Ok(vec![cx.child1("fc2", &self.fc2, &[h])?])
    }
}

/// Gated feed-forward: down(act(gate(x)) · up(x)) (llama SwiGLU with the
/// default silu; GeGLU with gelu). Children `gate`, `up` (dim → hidden),
/// `down` (hidden → dim), without biases by default.
#[derive(Clone, Debug, PartialEq)]
pub struct GatedMlp {
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    pub activation: Activation,
}

impl GatedMlp {
    /// SwiGLU without biases, f32.
    pub fn new(dim: usize, hidden: usize) -> Self {
        GatedMlp {
            gate: Linear::new(dim, hidden, false),
            up: Linear::new(dim, hidden, false),
            down: Linear::new(hidden, dim, false),
            activation: Activation::Silu,
        }
    }
    /// Builder-style: the gate's activation.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// Builder-style: biases on all three projections.
    pub fn with_bias(mut self, bias: bool) -> Self {
        for l in [&mut self.gate, &mut self.up, &mut self.down] {
            l.bias = bias;
        }
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        for l in [&mut self.gate, &mut self.up, &mut self.down] {
            l.dtype = dtype;
        }
        self
    }
}

impl Block for GatedMlp {
    fn kind(&self) -> &'static str {
        "GatedMlp"
    }
    fn describe(&self) -> String {
        format!(
            "GatedMlp(dim={}, hidden={}, activation={})",
            self.gate.in_features,
            self.gate.out_features,
            self.activation.name()
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("gate".into(), &self.gate),
            ("up".into(), &self.up),
            ("down".into(), &self.down),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        let g = cx.child1("gate", &self.gate, &[x])?;
        let u = cx.child1("up", &self.up, &[x])?;
        // silu has a fused gate op; other activations gate elementwise.
        let h = if self.activation == Activation::Silu {
            cx.binary("swiglu", g, u)?
        } else {
            let a = self.activation.apply(cx, g)?;
            cx.binary("mul", a, u)?
        };
        Ok(vec![cx.child1("down", &self.down, &[h])?])
    }
}
