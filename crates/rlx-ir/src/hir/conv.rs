//! Convolution and batch normalization blocks.

use super::*;

/// 2-D convolution of (N, C, H, W) inputs (`nn.Conv2d`).
/// Parameters: `weight` (out_ch, in_ch/groups, kh, kw), `bias` (out_ch).
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    pub in_ch: usize,
    pub out_ch: usize,
    /// (kh, kw).
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// Zero padding on both sides of (h, w).
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    pub bias: bool,
    pub dtype: DType,
}

impl Conv2d {
    /// A square `kernel`, stride 1, no padding, one group, with bias, f32.
    pub fn new(in_ch: usize, out_ch: usize, kernel: usize) -> Self {
        Conv2d {
            in_ch,
            out_ch,
            kernel: [kernel; 2],
            stride: [1; 2],
            padding: [0; 2],
            dilation: [1; 2],
            groups: 1,
            bias: true,
            dtype: DType::F32,
        }
    }
    /// Builder-style: the same stride on both axes.
    pub fn with_stride(mut self, stride: usize) -> Self {
        self.stride = [stride; 2];
        self
    }
    /// Builder-style: the same padding on both axes.
    pub fn with_padding(mut self, padding: usize) -> Self {
        self.padding = [padding; 2];
        self
    }
    /// Builder-style: the same dilation on both axes.
    pub fn with_dilation(mut self, dilation: usize) -> Self {
        self.dilation = [dilation; 2];
        self
    }
    /// Builder-style: grouped convolution.
    pub fn with_groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }
    /// Builder-style: whether there is a bias.
    pub fn with_bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    fn check_groups(&self) -> Result<(), String> {
        let g = self.groups;
        if g == 0 || !self.in_ch.is_multiple_of(g) || !self.out_ch.is_multiple_of(g) {
            return Err(format!(
                "groups = {g} must divide in_ch = {} and out_ch = {}",
                self.in_ch, self.out_ch
            ));
        }
        Ok(())
    }
}

impl Block for Conv2d {
    fn kind(&self) -> &'static str {
        "Conv2d"
    }
    fn describe(&self) -> String {
        format!(
            "Conv2d(in={}, out={}, kernel={:?}, stride={:?}, padding={:?}, dilation={:?}, groups={}, bias={})",
            self.in_ch, self.out_ch, self.kernel, self.stride, self.padding, self.dilation, self.groups, self.bias
        )
    }
    fn params(&self) -> Vec<Param> {
        // A bad `groups` is reported by `lower`; here it must not divide by zero.
        let per_group = self.in_ch.checked_div(self.groups).unwrap_or(0);
        let [kh, kw] = self.kernel;
        let mut p = vec![Param::new(
            "weight",
            self.dtype,
            [self.out_ch, per_group, kh, kw],
        )];
        if self.bias {
            p.push(Param::new("bias", self.dtype, [self.out_ch]));
        }
        p
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        self.check_groups().map_err(|m| cx.err(m))?;
        let dims = cx.dims(x);
        if dims.len() != 4 || dims[1] != self.in_ch {
            return Err(cx.err(format!(
                "expects x as (N, {}, H, W), got {}",
                self.in_ch,
                cx.ty(x)
            )));
        }
        let mut args = vec![x, cx.param("weight")?];
        if self.bias {
            args.push(cx.param("bias")?);
        }
        let i = |v: [usize; 2]| v.iter().map(|&d| d as i64).collect::<Vec<i64>>();
        let [ph, pw] = self.padding;
        let attrs = Attrs::new()
            .with("strides", i(self.stride))
            .with(
                "pads",
                i([ph, pw])
                    .into_iter()
                    .chain(i([ph, pw]))
                    .collect::<Vec<_>>(),
            )
            .with("dilations", i(self.dilation))
            .with("groups", self.groups);
        Ok(vec![cx.op1("conv", &args, attrs)?])
    }
}

/// Inference batch normalization of (N, C, ...) inputs with running
/// statistics (`nn.BatchNorm2d` in eval mode). Parameters: `weight`,
/// `bias`, `running_mean`, `running_var`, all (C).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    pub channels: usize,
    pub eps: f64,
    pub dtype: DType,
}

impl BatchNorm {
    /// An f32 batch norm.
    pub fn new(channels: usize, eps: f64) -> Self {
        BatchNorm {
            channels,
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

const BATCH_NORM_PARAMS: [&str; 4] = ["weight", "bias", "running_mean", "running_var"];

impl Block for BatchNorm {
    fn kind(&self) -> &'static str {
        "BatchNorm"
    }
    fn describe(&self) -> String {
        format!("BatchNorm(channels={}, eps={:e})", self.channels, self.eps)
    }
    fn params(&self) -> Vec<Param> {
        BATCH_NORM_PARAMS
            .iter()
            .map(|n| Param::new(*n, self.dtype, [self.channels]))
            .collect()
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        let dims = cx.dims(x);
        if dims.len() < 2 || dims[1] != self.channels {
            return Err(cx.err(format!(
                "expects x as (N, {}, ...), got {}",
                self.channels,
                cx.ty(x)
            )));
        }
        let mut args = vec![x];
        for name in BATCH_NORM_PARAMS {
            args.push(cx.param(name)?);
        }
        Ok(vec![cx.op1(
            "batch_norm",
            &args,
            Attrs::new().with("eps", self.eps),
        )?])
    }
}
