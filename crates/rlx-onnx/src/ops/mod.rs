//! Each ONNX op as rlx IR ops (decomposition where the IR has no single
//! op). A mapping returns its outputs, or what is missing — the importer
//! collects those for every node and reports them together.

use crate::import::Cx;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor::{dtype_of, to_host};
use rlx_ir::{Attrs, DType, HostTensor, ValueId};

mod attention;
mod deform_conv;
mod dynamic;
mod einsum;
mod flex;
pub(crate) mod float8;
mod grid;
mod index;
mod math;
mod nn;
mod norm;
mod pool_index;
mod quant;
mod recurrent;
mod resize;
mod roi_align;
mod shape;
mod signal;
mod tfidf;
mod training;

/// One output of a mapped node.
pub(crate) enum Out {
    Value(ValueId),
    /// Known at import (shape arithmetic, `Constant`): kept out of the
    /// graph unless something uses it as a tensor.
    Const(HostTensor),
    /// A sequence (its elements) or an empty optional (`crate::seq`).
    Seq(Vec<crate::import::Bound>),
    Absent,
}

impl Out {
    pub(crate) fn into_bound(self) -> crate::import::Bound {
        use crate::import::Bound;
        match self {
            Out::Value(v) => Bound::Value(v),
            Out::Const(t) => Bound::Const(t),
            Out::Seq(items) => Bound::Seq(items),
            Out::Absent => Bound::Absent,
        }
    }
}

type R = Result<Vec<Out>, String>;

/// ONNX op → rlx op of the same meaning, one input.
const UNARY: &[(&str, &str)] = &[
    ("Abs", "abs"),
    ("Neg", "neg"),
    ("Exp", "exp"),
    ("Log", "log"),
    ("Sqrt", "sqrt"),
    ("Reciprocal", "reciprocal"),
    ("Relu", "relu"),
    ("Sigmoid", "sigmoid"),
    ("Tanh", "tanh"),
    ("Sin", "sin"),
    ("Cos", "cos"),
    ("Tan", "tan"),
    ("Asin", "asin"),
    ("Acos", "acos"),
    ("Atan", "atan"),
    ("Sinh", "sinh"),
    ("Cosh", "cosh"),
    ("Asinh", "asinh"),
    ("Acosh", "acosh"),
    ("Atanh", "atanh"),
    ("Erf", "erf"),
    ("Floor", "floor"),
    ("Ceil", "ceil"),
    ("Round", "round"),
    ("Sign", "sign"),
    ("Not", "not"),
    ("IsNaN", "isnan"),
    ("Softplus", "softplus"),
    ("Identity", "identity"),
    ("BitwiseNot", "bitwise_not"),
];

/// ONNX op → rlx op, two inputs with NumPy broadcasting.
const BINARY: &[(&str, &str)] = &[
    ("Add", "add"),
    ("Sub", "sub"),
    ("Mul", "mul"),
    ("Div", "div"),
    ("Pow", "pow"),
    ("Equal", "eq"),
    ("Less", "lt"),
    ("Greater", "gt"),
    ("LessOrEqual", "le"),
    ("GreaterOrEqual", "ge"),
    ("And", "and"),
    ("Or", "or"),
    ("Xor", "xor"),
    ("BitwiseAnd", "bitwise_and"),
    ("BitwiseOr", "bitwise_or"),
    ("BitwiseXor", "bitwise_xor"),
];

const REDUCE: &[(&str, &str)] = &[
    ("ReduceSum", "reduce_sum"),
    ("ReduceMean", "reduce_mean"),
    ("ReduceMax", "reduce_max"),
    ("ReduceMin", "reduce_min"),
    ("ReduceProd", "reduce_prod"),
    ("ReduceLogSumExp", "reduce_logsumexp"),
    ("ReduceLogSum", "reduce_sum"),
];

/// The ONNX op types this importer maps (for coverage tables).
pub fn supported() -> Vec<&'static str> {
    let mut v: Vec<&str> = UNARY
        .iter()
        .chain(BINARY)
        .chain(REDUCE)
        .map(|p| p.0)
        .collect();
    v.extend([
        "Max",
        "Min",
        "Sum",
        "Mean",
        "MatMul",
        "Gemm",
        "Softmax",
        "LogSoftmax",
        "Transpose",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Concat",
        "Cast",
        "Where",
        "Clip",
        "Gather",
        "Shape",
        "Size",
        "Constant",
        "Expand",
        "Tile",
        "LeakyRelu",
        "IsInf",
        "ArgMax",
        "ArgMin",
        "LayerNormalization",
        "Slice",
        "Split",
        "CastLike",
        "BitCast",
        "Range",
        "ConstantOfShape",
        "Mod",
        "Dropout",
        "GatherElements",
        "CumSum",
        "ReduceL1",
        "ReduceL2",
        "ReduceSumSquare",
        "Softsign",
        "Elu",
        "Selu",
        "Celu",
        "HardSigmoid",
        "HardSwish",
        "ThresholdedRelu",
        "PRelu",
        "Gelu",
        "Mish",
        "Conv",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "RMSNormalization",
        "Pad",
        "TopK",
        "CumProd",
        "Trilu",
        "GatherND",
        "ScatterND",
        "OneHot",
        "Compress",
        "EyeLike",
        "CenterCropPad",
        "BatchNormalization",
        "LpNormalization",
        "LpPool",
        "BitShift",
        "Resize",
        "Upsample",
        "RotaryEmbedding",
        "LinearAttention",
        "FlexAttention",
        "TfIdfVectorizer",
        "NonZero",
        "Det",
        "MaxUnpool",
        "RoiAlign",
        "DeformConv",
        "STFT",
        "MelWeightMatrix",
        "Unique",
        "NonMaxSuppression",
        "DFT",
        "Einsum",
        "CausalConvWithState",
        "DepthToSpace",
        "SpaceToDepth",
        "InstanceNormalization",
        "GroupNormalization",
        "LRN",
        "TensorScatter",
        "ReverseSequence",
        "Adagrad",
        "Adam",
        "Momentum",
        "Swish",
        "Col2Im",
        "If",
        "Loop",
        "Scan",
        "GridSample",
        "AffineGrid",
        "RNN",
        "GRU",
        "LSTM",
        "MeanVarianceNormalization",
        "Shrink",
        "Scatter",
        "HannWindow",
        "HammingWindow",
        "BlackmanWindow",
        "Attention",
        "ConvTranspose",
        "ScatterElements",
        "Hardmax",
        "NegativeLogLikelihoodLoss",
        "SoftmaxCrossEntropyLoss",
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "QLinearMatMul",
        "QLinearConv",
    ]);
    v.sort();
    v
}

struct N<'a> {
    cx: &'a mut Cx,
    node: &'a NodeProto,
}

impl N<'_> {
    fn name(&self, k: usize) -> Option<&str> {
        self.node
            .input
            .get(k)
            .map(|s| s.as_str())
            .filter(|s| !s.is_empty())
    }
    fn v(&mut self, k: usize) -> Result<ValueId, String> {
        let name = self
            .name(k)
            .ok_or_else(|| format!("input {k} is missing"))?
            .to_string();
        self.cx.value(&name)
    }
    /// Input `k`, which must be known at import (absent: `None`).
    fn const_in(&self, k: usize) -> Result<Option<&HostTensor>, String> {
        let Some(name) = self.name(k) else {
            return Ok(None);
        };
        match self.cx.consts.get(name) {
            Some(t) => Ok(Some(t)),
            None => Err(format!(
                "input {k} (`{name}`) must be known at import (rlx needs static shapes): \
                 make it an initializer or bind it with ImportOptions::constants"
            )),
        }
    }
    /// The integer values of input `k`, which must be known at import.
    fn ints_in(&self, k: usize) -> Result<Option<Vec<i64>>, String> {
        self.const_in(k)?
            .map(|t| t.to_i64_vec().map_err(|e| e.to_string()))
            .transpose()
    }
    /// The first value of input `k` as a float, known at import.
    fn float_in(&self, k: usize) -> Result<Option<f64>, String> {
        match self.const_in(k)? {
            Some(t) => Ok(t.to_f64_vec().map_err(|e| e.to_string())?.first().copied()),
            None => Ok(None),
        }
    }
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == name)
    }
    /// A string attribute (ONNX stores bytes), if the node has it.
    fn astr(&self, name: &str) -> Option<String> {
        self.attr(name)
            .map(|a| String::from_utf8_lossy(a.s()).into_owned())
    }
    fn ai(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i())
    }
    fn af(&self, name: &str, default: f32) -> f64 {
        self.attr(name).map_or(default, |a| a.f()) as f64
    }
    fn aints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name)
            .filter(|a| a.r#type() == AttributeType::Ints)
            .map(|a| a.ints.clone())
    }
    fn dims(&self, v: ValueId) -> Vec<usize> {
        self.cx.b.shape(v).dims().to_vec()
    }
    fn op(&mut self, op: &str, ins: &[ValueId], attrs: Attrs) -> Result<ValueId, String> {
        self.cx.b.op1(op, ins, attrs).map_err(|e| e.to_string())
    }
    fn one(&mut self, op: &str, ins: &[ValueId], attrs: Attrs) -> R {
        Ok(vec![Out::Value(self.op(op, ins, attrs)?)])
    }
    fn scalar(&mut self, x: f64, d: DType) -> Result<ValueId, String> {
        self.cx.b.scalar(x, d).map_err(|e| e.to_string())
    }
    fn cast_to(&mut self, v: ValueId, d: DType) -> Result<ValueId, String> {
        if self.cx.b.dtype(v) == d {
            Ok(v)
        } else {
            self.op("cast", &[v], Attrs::new().with("dtype", d))
        }
    }
}

/// A tensor of `count` elements of `d` within the limits (before it is
/// allocated at import).
fn check_elems(d: DType, count: usize) -> Result<(), String> {
    check_elems_of(d, &[count]).map(|_| ())
}

/// The element count of `dims`, within the limits.
fn check_elems_of(d: DType, dims: &[usize]) -> Result<usize, String> {
    rlx_ir::limits::limits()
        .check_tensor_shape("a tensor computed at import", d, dims)
        .map_err(|e| e.to_string())?;
    Ok(dims.iter().product())
}

/// Axis `a` (negative counts from the end) of a tensor of `rank`, checked
/// against `0..=max` where `max` is `rank - 1` (or `rank` for ops such as
/// Flatten whose axis may be one past the last).
fn axis_in(a: i64, rank: usize, max: usize) -> Result<usize, String> {
    let r = rank_axis(a, rank);
    if r < 0 || r > max as i64 {
        Err(format!("axis {a} is out of range for rank {rank}"))
    } else {
        Ok(r as usize)
    }
}

fn rank_axis(a: i64, rank: usize) -> i64 {
    if a < 0 {
        a + rank as i64
    } else {
        a
    }
}

/// Map one node: the unary, binary and reduce tables here, every other op
/// in `math`, `shape` or `nn`.
pub(crate) fn map(cx: &mut Cx, node: &NodeProto) -> R {
    let op = node.op_type().to_string();
    let mut n = N { cx, node };
    if let Some(&(_, r)) = UNARY.iter().find(|p| p.0 == op) {
        let x = n.v(0)?;
        return n.one(r, &[x], Attrs::new());
    }
    if let Some(&(_, r)) = BINARY.iter().find(|p| p.0 == op) {
        let (a, b) = (n.v(0)?, n.v(1)?);
        // Pow's exponent may have its own dtype; the IR's pow takes one.
        if op == "Pow" {
            let d = n.cx.b.dtype(a);
            if !d.is_float() {
                // An integer base: computed in f64 (exact for the integer
                // powers that fit) and brought back to its type.
                let (af, bf) = (n.cast_to(a, DType::F64)?, n.cast_to(b, DType::F64)?);
                let p = n.op("pow", &[af, bf], Attrs::new())?;
                let p = n.op("trunc", &[p], Attrs::new())?;
                return Ok(vec![Out::Value(n.cast_to(p, d)?)]);
            }
            let b = n.cast_to(b, d)?;
            return n.one(r, &[a, b], Attrs::new());
        }
        return n.one(r, &[a, b], Attrs::new());
    }
    if let Some(&(_, r)) = REDUCE.iter().find(|p| p.0 == op) {
        let x = n.v(0)?;
        let rank = n.dims(x).len();
        // Axes: an attribute before opsets 13 (ReduceSum) / 18 (the rest),
        // then an optional input.
        let axes = match n.aints("axes") {
            Some(a) => Some(a),
            None => n.ints_in(1)?,
        };
        let axes: Vec<i64> = match axes {
            Some(a) if !a.is_empty() => a,
            _ if n.ai("noop_with_empty_axes", 0) == 1 => {
                return n.one("identity", &[x], Attrs::new())
            }
            _ => (0..rank as i64).collect(),
        };
        let keep = n.ai("keepdims", 1) == 1;
        let dims = n.dims(x);
        let empty = axes
            .iter()
            .any(|&a| axis_in(a, rank, rank.saturating_sub(1)).is_ok_and(|a| dims[a] == 0));
        if empty && matches!(r, "reduce_max" | "reduce_min") {
            // ONNX: the reduction's identity over an empty set (−inf for
            // max, +inf for min); rlx's reduce_max refuses, as NumPy does.
            let out: Vec<usize> = (0..rank)
                .filter_map(|i| {
                    let reduced = axes.iter().any(|&a| rank_axis(a, rank) == i as i64);
                    match (reduced, keep) {
                        (false, _) => Some(dims[i]),
                        (true, true) => Some(1),
                        (true, false) => None,
                    }
                })
                .collect();
            let d = n.cx.b.dtype(x);
            let v = match (d.int_range(), r == "reduce_max") {
                (Some((lo, _)), true) => lo as f64,
                (Some((_, hi)), false) => hi as f64,
                (None, true) => f64::NEG_INFINITY,
                (None, false) => f64::INFINITY,
            };
            let numel = check_elems_of(d, &out)?;
            let t = HostTensor::from_f64(d, out, vec![v; numel]).map_err(|e| e.to_string())?;
            return Ok(vec![Out::Const(t)]);
        }
        // min / max of bools: the same over 0 / 1.
        let boolean = n.cx.b.dtype(x) == DType::Bool;
        let xr = if boolean { n.cast_to(x, DType::U8)? } else { x };
        let y = n.op(
            r,
            &[xr],
            Attrs::new().with("axes", axes).with("keepdim", keep),
        )?;
        let y = if boolean {
            n.cast_to(y, DType::Bool)?
        } else {
            y
        };
        if op == "ReduceLogSum" {
            return n.one("log", &[y], Attrs::new());
        }
        return Ok(vec![Out::Value(y)]);
    }
    match op.as_str() {
        "Max" | "Min" | "Sum" | "Mean" => math::max_op(n, &op),
        "MatMul" => math::mat_mul(n, &op),
        "Gemm" => math::gemm(n, &op),
        "Softmax" | "LogSoftmax" => math::softmax(n, &op),
        "Transpose" => shape::transpose(n, &op),
        "Reshape" => shape::reshape_op(n, &op),
        "Flatten" => shape::flatten_op(n, &op),
        "Squeeze" | "Unsqueeze" => shape::squeeze(n, &op),
        "Concat" => shape::concat_op(n, &op),
        "Cast" => shape::cast_op(n, &op),
        "Where" => shape::where_op(n, &op),
        "Clip" => math::clip_op(n, &op),
        "Gather" => shape::gather_op(n, &op),
        "Shape" | "Size" => shape::shape_op(n, &op),
        "Constant" => shape::constant(n, &op),
        "Expand" => shape::expand_op(n, &op),
        "Tile" => shape::tile_op(n, &op),
        "LeakyRelu" => math::leaky_relu(n, &op),
        "IsInf" => math::is_inf(n, &op),
        "ArgMax" | "ArgMin" => math::arg_max(n, &op),
        "LayerNormalization" => norm::layer_normalization(n, &op),
        "Trilu" => shape::trilu(n, &op),
        "Slice" => shape::slice_op(n, &op),
        "Split" => shape::split_op(n, &op),
        "CastLike" => shape::cast_like(n, &op),
        "BitCast" => shape::bitcast_op(n, &op),
        "Range" => shape::range_op(n, &op),
        "ConstantOfShape" => shape::constant_of_shape(n, &op),
        "Mod" => math::mod_op(n, &op),
        "Dropout" => math::dropout(n, &op),
        "GatherElements" => shape::gather_elements(n, &op),
        "CumSum" | "CumProd" => math::cum_sum(n, &op),
        "ReduceL1" | "ReduceL2" | "ReduceSumSquare" => math::reduce_l1(n, &op),
        "Softsign" | "Elu" | "Selu" | "Celu" | "HardSigmoid" | "HardSwish" | "ThresholdedRelu"
        | "Mish" => math::softsign(n, &op),
        "PRelu" => math::p_relu(n, &op),
        "Gelu" => math::gelu(n, &op),
        "Conv" | "MaxPool" | "AveragePool" => nn::conv(n, &op),
        "GlobalAveragePool" | "GlobalMaxPool" => nn::global_average_pool(n, &op),
        "RMSNormalization" => norm::r_m_s_normalization(n, &op),
        "Pad" => shape::pad_op(n, &op),
        "TopK" => math::top_k(n, &op),
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
            nn::negative_log_likelihood_loss(n, &op)
        }
        "Attention" => attention::attention(&mut n),
        "FlexAttention" => flex::flex_attention(&mut n),
        "TfIdfVectorizer" => tfidf::tfidf(n, &op),
        "NonZero" => dynamic::non_zero(n, &op),
        "Det" => math::det(n, &op),
        "MaxUnpool" => nn::max_unpool(n, &op),
        "RoiAlign" => roi_align::roi_align(n, &op),
        "DeformConv" => deform_conv::deform_conv(n, &op),
        "STFT" => signal::stft(n, &op),
        "MelWeightMatrix" => signal::mel_weight_matrix(n, &op),
        "Unique" => dynamic::unique(n, &op),
        "NonMaxSuppression" => dynamic::non_max_suppression(n, &op),
        "RotaryEmbedding" => attention::rotary_embedding(n, &op),
        "LinearAttention" => attention::linear_attention(n, &op),
        "DFT" => signal::dft(n, &op),
        "Einsum" => einsum::einsum(n, &op),
        "CausalConvWithState" => nn::causal_conv_with_state(n, &op),
        "DepthToSpace" | "SpaceToDepth" => nn::depth_to_space(n, &op),
        "InstanceNormalization" | "GroupNormalization" => norm::group_normalization(n, &op),
        "LRN" => norm::lrn(n, &op),
        "TensorScatter" => index::tensor_scatter(n, &op),
        "ReverseSequence" => index::reverse_sequence(n, &op),
        "Adagrad" => training::adagrad(n, &op),
        "Adam" => training::adam(n, &op),
        "Momentum" => training::momentum(n, &op),
        "Swish" => {
            // x · sigmoid(alpha · x)
            let x = n.v(0)?;
            let d = n.cx.b.dtype(x);
            let a = n.scalar(n.af("alpha", 1.0), d)?;
            let ax = n.op("mul", &[x, a], Attrs::new())?;
            let s = n.op("sigmoid", &[ax], Attrs::new())?;
            n.one("mul", &[x, s], Attrs::new())
        }
        "Col2Im" => nn::col2im(n, &op),
        "If" => {
            let id = n.cx.next_instance();
            crate::control::if_op(n.cx, n.node, id)
        }
        "Loop" => {
            let id = n.cx.next_instance();
            crate::control::loop_op(n.cx, n.node, id)
        }
        "Scan" => {
            let id = n.cx.next_instance();
            crate::control::scan_op(n.cx, n.node, id)
        }
        "GridSample" => grid::grid_sample(n, &op),
        "AffineGrid" => grid::affine_grid(n, &op),
        "RNN" | "GRU" | "LSTM" => recurrent::recurrent(n, &op),
        "MeanVarianceNormalization" => norm::mean_variance_normalization(n, &op),
        "Shrink" => nn::shrink(n, &op),
        "Scatter" => shape::scatter_elements(n, &op),
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => signal::window(n, &op),
        "ConvTranspose" => nn::conv_transpose(n, &op),
        "ScatterElements" => shape::scatter_elements(n, &op),
        "Hardmax" => math::hardmax(n, &op),
        "GatherND" => index::gather_nd(n, &op),
        "ScatterND" => index::scatter_nd(n, &op),
        "OneHot" => index::one_hot(n, &op),
        "Compress" => index::compress(n, &op),
        "EyeLike" => index::eye_like(n, &op),
        "CenterCropPad" => index::center_crop_pad(n, &op),
        "BatchNormalization" => norm::batch_normalization(n, &op),
        "LpNormalization" => norm::lp_normalization(n, &op),
        "LpPool" => nn::conv(n, &op),
        "BitShift" => math::bit_shift(n, &op),
        "Resize" | "Upsample" => resize::resize(n, &op),
        "QuantizeLinear" => quant::quantize_linear(n, &op),
        "DequantizeLinear" => quant::dequantize_linear(n, &op),
        "DynamicQuantizeLinear" => quant::dynamic_quantize_linear(n, &op),
        "MatMulInteger" | "ConvInteger" => quant::mat_mul_integer(n, &op),
        "QLinearMatMul" | "QLinearConv" => quant::q_linear(n, &op),
        _ => Err(format!("op `{op}` is not supported yet")),
    }
}
