//! Linear, embedding and normalization blocks.

use super::*;

/// `y = act(x · Wᵀ + b)` over the last axis (PyTorch `nn.Linear`).
/// Parameters: `weight` (out, in), `bias` (out).
///
/// With a block-quantized `dtype` (`q8_0`, `q4_0`, … — post-training
/// weight-only quantization) the weight is stored in that type, the bias
/// in f32, and the product is `dequant_matmul(x, W)` (W decoded as it is
/// read) followed by the bias add and the activation; `in_features` must
/// be a whole number of the type's blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    pub in_features: usize,
    pub out_features: usize,
    pub bias: bool,
    /// Fused into the matmul epilogue.
    pub activation: Activation,
    pub dtype: DType,
}

impl Linear {
    /// An f32 layer without activation.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Self {
        Linear {
            in_features,
            out_features,
            bias,
            activation: Activation::None,
            dtype: DType::F32,
        }
    }
    /// Builder-style: fuse `activation` after the bias.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// Builder-style: parameter element type (a block type quantizes the
    /// weight; see the type's docs).
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Whether the weight is block-quantized.
    pub fn quantized(&self) -> bool {
        matches!(self.dtype.storage(), crate::dtype::Storage::Block { block, .. } if block >= 32)
    }

    /// The type of the bias and the output: f32 for a quantized weight.
    pub fn compute_dtype(&self) -> DType {
        if self.quantized() {
            DType::F32
        } else {
            self.dtype
        }
    }
}

impl Block for Linear {
    fn kind(&self) -> &'static str {
        "Linear"
    }
    fn describe(&self) -> String {
        format!(
            "Linear(in={}, out={}, bias={}, activation={})",
            self.in_features,
            self.out_features,
            self.bias,
            self.activation.name()
        )
    }
    fn params(&self) -> Vec<Param> {
        let mut p = vec![Param::new(
            "weight",
            self.dtype,
            [self.out_features, self.in_features],
        )];
        if self.bias {
            p.push(Param::new(
                "bias",
                self.compute_dtype(),
                [self.out_features],
            ));
        }
        p
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        expect_last(cx, x, self.in_features, "(..., in_features)")?;
        if self.quantized() {
            let w = cx.param("weight")?;
            let mut y = cx.binary("dequant_matmul", x, w)?;
            if self.bias {
                let b = cx.param("bias")?;
                y = cx.binary("add", y, b)?;
            }
            return Ok(vec![self.activation.apply(cx, y)?]);
        }
        // The weight is stored (out, in) as in PyTorch; the product wants (in, out).
        let w = cx.param("weight")?;
        let wt = cx.permute(w, &[1, 0])?;
        if !self.bias && self.activation == Activation::None {
            return Ok(vec![cx.binary("matmul", x, wt)?]);
        }
        let mut args = vec![x, wt];
        if self.bias {
            args.push(cx.param("bias")?);
        }
        let attrs = Attrs::new().with("activation", self.activation.name());
        Ok(vec![cx.op1("matmul_bias_act", &args, attrs)?])
    }
}

/// Rows of a (num, dim) table selected by integer ids (`nn.Embedding`).
/// Parameter: `weight` (num, dim). Input ids of any shape, i32 or i64.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub num: usize,
    pub dim: usize,
    pub dtype: DType,
}

impl Embedding {
    /// An f32 table of `num` rows of `dim`.
    pub fn new(num: usize, dim: usize) -> Self {
        Embedding {
            num,
            dim,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for Embedding {
    fn kind(&self) -> &'static str {
        "Embedding"
    }
    fn describe(&self) -> String {
        format!("Embedding(num={}, dim={})", self.num, self.dim)
    }
    fn params(&self) -> Vec<Param> {
        vec![Param::new("weight", self.dtype, [self.num, self.dim])]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [ids] = inputs_n(inputs)?;
        let ty = cx.ty(ids);
        if !matches!(ty.dtype, DType::I32 | DType::I64) {
            return Err(cx.err(format!("expects i32 or i64 ids, got {ty}")));
        }
        let w = cx.param("weight")?;
        Ok(vec![cx.op1("embedding", &[w, ids], Attrs::new())?])
    }
}

/// Layer normalization over the last axis (`nn.LayerNorm(dim)`).
/// Parameters: `weight` (dim), `bias` (dim).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    pub dim: usize,
    pub eps: f64,
    pub dtype: DType,
}

impl LayerNorm {
    /// An f32 layer norm.
    pub fn new(dim: usize, eps: f64) -> Self {
        LayerNorm {
            dim,
            eps,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for LayerNorm {
    fn kind(&self) -> &'static str {
        "LayerNorm"
    }
    fn describe(&self) -> String {
        format!("LayerNorm(dim={}, eps={:e})", self.dim, self.eps)
    }
    fn params(&self) -> Vec<Param> {
        vec![
            Param::new("weight", self.dtype, [self.dim]),
            Param::new("bias", self.dtype, [self.dim]),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        expect_last(cx, x, self.dim, "(..., dim)")?;
        let (w, b) = (cx.param("weight")?, cx.param("bias")?);
        let attrs = Attrs::new().with("axis", -1i64).with("eps", self.eps);
        Ok(vec![cx.op1("layer_norm", &[x, w, b], attrs)?])
    }
}

/// RMS normalization over the last axis (llama `RMSNorm`).
/// Parameter: `weight` (dim).
#[derive(Clone, Debug, PartialEq)]
pub struct RmsNorm {
    pub dim: usize,
    pub eps: f64,
    pub dtype: DType,
}

impl RmsNorm {
    /// An f32 RMS norm.
    pub fn new(dim: usize, eps: f64) -> Self {
        RmsNorm {
            dim,
            eps,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for RmsNorm {
    fn kind(&self) -> &'static str {
        "RmsNorm"
    }
    fn describe(&self) -> String {
        format!("RmsNorm(dim={}, eps={:e})", self.dim, self.eps)
    }
    fn params(&self) -> Vec<Param> {
        vec![Param::new("weight", self.dtype, [self.dim])]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        expect_last(cx, x, self.dim, "(..., dim)")?;
        let w = cx.param("weight")?;
        let attrs = Attrs::new().with("axis", -1i64).with("eps", self.eps);
        Ok(vec![cx.op1("rms_norm", &[x, w], attrs)?])
    }
}
