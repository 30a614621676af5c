//! Each ONNX op as rlx IR ops (decomposition where the IR has no single
//! op). A mapping returns its outputs, or what is missing — the importer
//! collects those for every node and reports them together.

use crate::import::Cx;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor::{dtype_of, to_host};
use rlx_ir::{Attrs, DType, HostTensor, ValueId};

/// One output of a mapped node.
pub(crate) enum Out {
    Value(ValueId),
    /// Known at import (shape arithmetic, `Constant`): kept out of the
    /// graph unless something uses it as a tensor.
    Const(HostTensor),
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

/// Map one node.
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
        let b = if op == "Pow" {
            let d = n.cx.b.dtype(a);
            n.cast_to(b, d)?
        } else {
            b
        };
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
        return n.one(
            r,
            &[x],
            Attrs::new().with("axes", axes).with("keepdim", keep),
        );
    }
    match op.as_str() {
        "Max" | "Min" | "Sum" | "Mean" => {
            let r = match op.as_str() {
                "Max" => "max",
                "Min" => "min",
                _ => "add",
            };
            let count = node.input.len();
            let mut acc = n.v(0)?;
            for k in 1..count {
                let x = n.v(k)?;
                acc = n.op(r, &[acc, x], Attrs::new())?;
            }
            if op == "Mean" {
                let d = n.cx.b.dtype(acc);
                let c = n.scalar(count as f64, d)?;
                acc = n.op("div", &[acc, c], Attrs::new())?;
            }
            Ok(vec![Out::Value(acc)])
        }
        "MatMul" => {
            let (a, b) = (n.v(0)?, n.v(1)?);
            n.one("matmul", &[a, b], Attrs::new())
        }
        "Gemm" => {
            let (mut a, mut b) = (n.v(0)?, n.v(1)?);
            if n.ai("transA", 0) == 1 {
                a = n.op("permute", &[a], Attrs::new().with("perm", vec![1i64, 0]))?;
            }
            if n.ai("transB", 0) == 1 {
                b = n.op("permute", &[b], Attrs::new().with("perm", vec![1i64, 0]))?;
            }
            let mut y = n.op("matmul", &[a, b], Attrs::new())?;
            let d = n.cx.b.dtype(y);
            let alpha = n.af("alpha", 1.0);
            if alpha != 1.0 {
                let s = n.scalar(alpha, d)?;
                y = n.op("mul", &[y, s], Attrs::new())?;
            }
            if n.name(2).is_some() {
                let mut c = n.v(2)?;
                let beta = n.af("beta", 1.0);
                if beta != 1.0 {
                    let s = n.scalar(beta, d)?;
                    c = n.op("mul", &[c, s], Attrs::new())?;
                }
                y = n.op("add", &[y, c], Attrs::new())?;
            }
            Ok(vec![Out::Value(y)])
        }
        "Softmax" | "LogSoftmax" => {
            let r = if op == "Softmax" {
                "softmax"
            } else {
                "log_softmax"
            };
            let x = n.v(0)?;
            let dims = n.dims(x);
            let rank = dims.len();
            if n.cx.opset >= 13 {
                let axis = n.ai("axis", -1);
                return n.one(r, &[x], Attrs::new().with("axis", axis));
            }
            // Before opset 13: over the flattened trailing axes from `axis`.
            let axis = axis_in(n.ai("axis", 1), rank, rank.saturating_sub(1))?;
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis..].iter().product();
            let flat = n.op(
                "reshape",
                &[x],
                Attrs::new().with("shape", vec![outer as i64, inner as i64]),
            )?;
            let s = n.op(r, &[flat], Attrs::new().with("axis", 1i64))?;
            let back: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            n.one("reshape", &[s], Attrs::new().with("shape", back))
        }
        "Transpose" => {
            let x = n.v(0)?;
            let rank = n.dims(x).len() as i64;
            let perm = n.aints("perm").unwrap_or_else(|| (0..rank).rev().collect());
            n.one("permute", &[x], Attrs::new().with("perm", perm))
        }
        "Reshape" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let shape = n.ints_in(1)?.ok_or("Reshape needs its shape input")?;
            let allowzero = n.ai("allowzero", 0) == 1;
            let shape: Vec<i64> = shape
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    if s == 0 && !allowzero {
                        dims.get(i).map_or(0, |&d| d as i64)
                    } else {
                        s
                    }
                })
                .collect();
            n.one("reshape", &[x], Attrs::new().with("shape", shape))
        }
        "Flatten" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let axis = axis_in(n.ai("axis", 1), dims.len(), dims.len())?;
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis..].iter().product();
            n.one(
                "reshape",
                &[x],
                Attrs::new().with("shape", vec![outer as i64, inner as i64]),
            )
        }
        "Squeeze" | "Unsqueeze" => {
            let x = n.v(0)?;
            let axes = match n.aints("axes") {
                Some(a) => Some(a),
                None => n.ints_in(1)?,
            };
            let axes = match axes {
                Some(a) => a,
                None if op == "Squeeze" => n
                    .dims(x)
                    .iter()
                    .enumerate()
                    .filter(|(_, &d)| d == 1)
                    .map(|(i, _)| i as i64)
                    .collect(),
                None => return Err("Unsqueeze needs its axes".into()),
            };
            n.one(&op.to_lowercase(), &[x], Attrs::new().with("axes", axes))
        }
        "Concat" => {
            let mut ins = Vec::new();
            for k in 0..node.input.len() {
                ins.push(n.v(k)?);
            }
            let axis = n.ai("axis", 0);
            n.one("concat", &ins, Attrs::new().with("axis", axis))
        }
        "Cast" => {
            let x = n.v(0)?;
            let to = dtype_of(n.ai("to", 0) as i32)?;
            n.one("cast", &[x], Attrs::new().with("dtype", to))
        }
        "Where" => {
            let (c, a, b) = (n.v(0)?, n.v(1)?, n.v(2)?);
            n.one("where", &[c, a, b], Attrs::new())
        }
        "Clip" => {
            let x = n.v(0)?;
            let bound = |n: &N, k: usize, attr: &str| -> Result<Option<f64>, String> {
                if n.cx.opset < 11 {
                    return Ok(n.attr(attr).map(|a| a.f() as f64));
                }
                n.float_in(k)
            };
            let (lo, hi) = (bound(&n, 1, "min")?, bound(&n, 2, "max")?);
            let mut a = Attrs::new();
            if let Some(l) = lo {
                a = a.with("min", l);
            }
            if let Some(h) = hi {
                a = a.with("max", h);
            }
            n.one("clamp", &[x], a)
        }
        "Gather" => {
            let (x, i) = (n.v(0)?, n.v(1)?);
            let axis = n.ai("axis", 0);
            n.one("gather", &[x, i], Attrs::new().with("axis", axis))
        }
        "Shape" | "Size" => {
            let x = n.v(0)?;
            let dims: Vec<i64> = n.dims(x).iter().map(|&d| d as i64).collect();
            let t = if op == "Size" {
                HostTensor::from_i64(DType::I64, Vec::<usize>::new(), vec![dims.iter().product()])
            } else {
                let r = dims.len() as i64;
                let clampi = |v: i64| rank_axis(v, r as usize).clamp(0, r) as usize;
                let (s, e) = (clampi(n.ai("start", 0)), clampi(n.ai("end", r)));
                let part = dims[s..e.max(s)].to_vec();
                HostTensor::from_i64(DType::I64, vec![part.len()], part)
            }
            .map_err(|e| e.to_string())?;
            Ok(vec![Out::Const(t)])
        }
        "Constant" => {
            let a = node.attribute.first().ok_or("Constant without a value")?;
            let t = match a.name() {
                "value" => to_host(a.t.as_ref().ok_or("Constant `value` without a tensor")?)
                    .map_err(|e| e.to_string())?,
                "value_float" => {
                    HostTensor::from_f64(DType::F32, Vec::<usize>::new(), vec![a.f() as f64])
                        .map_err(|e| e.to_string())?
                }
                "value_int" => HostTensor::from_i64(DType::I64, Vec::<usize>::new(), vec![a.i()])
                    .map_err(|e| e.to_string())?,
                "value_floats" => HostTensor::from_f64(
                    DType::F32,
                    vec![a.floats.len()],
                    a.floats.iter().map(|&x| x as f64).collect(),
                )
                .map_err(|e| e.to_string())?,
                "value_ints" => {
                    HostTensor::from_i64(DType::I64, vec![a.ints.len()], a.ints.clone())
                        .map_err(|e| e.to_string())?
                }
                other => return Err(format!("Constant `{other}` is not supported yet")),
            };
            Ok(vec![Out::Const(t)])
        }
        "Expand" => {
            let x = n.v(0)?;
            let want = n.ints_in(1)?.ok_or("Expand needs its shape")?;
            let dims = n.dims(x);
            // NumPy broadcasting of the input's shape and the given one.
            let r = dims.len().max(want.len());
            let pad = |v: Vec<i64>| -> Vec<i64> {
                std::iter::repeat_n(1, r - v.len()).chain(v).collect()
            };
            let (a, b) = (pad(dims.iter().map(|&d| d as i64).collect()), pad(want));
            let out: Vec<i64> = a
                .iter()
                .zip(&b)
                .map(|(&p, &q)| if p == 1 { q } else { p })
                .collect();
            n.one("broadcast", &[x], Attrs::new().with("shape", out))
        }
        "Tile" => {
            let x = n.v(0)?;
            let reps = n.ints_in(1)?.ok_or("Tile needs its repeats")?;
            n.one("tile", &[x], Attrs::new().with("repeats", reps))
        }
        "LeakyRelu" => {
            let x = n.v(0)?;
            let d = n.cx.b.dtype(x);
            let alpha = n.af("alpha", 0.01);
            let (a, z) = (n.scalar(alpha, d)?, n.scalar(0.0, d)?);
            let ax = n.op("mul", &[x, a], Attrs::new())?;
            let neg = n.op("lt", &[x, z], Attrs::new())?;
            n.one("where", &[neg, ax, x], Attrs::new())
        }
        "IsInf" => {
            let x = n.v(0)?;
            let (pos, neg) = (n.ai("detect_positive", 1), n.ai("detect_negative", 1));
            let inf = n.op("isinf", &[x], Attrs::new())?;
            if pos == 1 && neg == 1 {
                return Ok(vec![Out::Value(inf)]);
            }
            let d = n.cx.b.dtype(x);
            let z = n.scalar(0.0, d)?;
            let side = n.op(if pos == 1 { "gt" } else { "lt" }, &[x, z], Attrs::new())?;
            n.one("and", &[inf, side], Attrs::new())
        }
        "ArgMax" | "ArgMin" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let axis = axis_in(n.ai("axis", 0), dims.len(), dims.len().saturating_sub(1))? as i64;
            let keep = n.ai("keepdims", 1) == 1;
            let r = op.to_lowercase();
            if n.ai("select_last_index", 0) == 0 {
                return n.one(
                    &r,
                    &[x],
                    Attrs::new().with("axis", axis).with("keepdim", keep),
                );
            }
            // The last of equal extremes: the first one of the flipped axis,
            // counted back from the end.
            let f = n.op("flip", &[x], Attrs::new().with("axes", vec![axis]))?;
            let i = n.op(
                &r,
                &[f],
                Attrs::new().with("axis", axis).with("keepdim", keep),
            )?;
            let d = n.cx.b.dtype(i);
            let last = n.scalar(dims[axis as usize] as f64 - 1.0, d)?;
            n.one("sub", &[last, i], Attrs::new())
        }
        "LayerNormalization" => {
            let (x, g) = (n.v(0)?, n.v(1)?);
            let dims = n.dims(x);
            let rank = dims.len();
            let axis = rank_axis(n.ai("axis", -1), rank);
            let eps = n.af("epsilon", 1e-5);
            let d = n.cx.b.dtype(x);
            let stats = node.output.iter().skip(1).any(|o| !o.is_empty());
            if axis == rank as i64 - 1 && !stats {
                let b = match n.name(2) {
                    Some(_) => n.v(2)?,
                    None => {
                        let z = HostTensor::zeros(d, vec![*dims.last().unwrap_or(&1)])
                            .map_err(|e| e.to_string())?;
                        n.cx.b.constant(z).map_err(|e| e.to_string())?
                    }
                };
                return n.one(
                    "layer_norm",
                    &[x, g, b],
                    Attrs::new().with("axis", axis).with("eps", eps),
                );
            }
            // Over the axes from `axis` on, with the statistics as outputs:
            // mean, 1/sqrt(var + eps), (x - mean)·that·scale + bias.
            let axes: Vec<i64> = (axis..rank as i64).collect();
            let red = |n: &mut N, v: ValueId| {
                n.op(
                    "reduce_mean",
                    &[v],
                    Attrs::new()
                        .with("axes", axes.clone())
                        .with("keepdim", true),
                )
            };
            let mean = red(&mut n, x)?;
            let c = n.op("sub", &[x, mean], Attrs::new())?;
            let sq = n.op("mul", &[c, c], Attrs::new())?;
            let var = red(&mut n, sq)?;
            let e = n.scalar(eps, d)?;
            let ve = n.op("add", &[var, e], Attrs::new())?;
            let inv = n.op("rsqrt", &[ve], Attrs::new())?;
            let norm = n.op("mul", &[c, inv], Attrs::new())?;
            let mut y = n.op("mul", &[norm, g], Attrs::new())?;
            if n.name(2).is_some() {
                let b = n.v(2)?;
                y = n.op("add", &[y, b], Attrs::new())?;
            }
            Ok(vec![Out::Value(y), Out::Value(mean), Out::Value(inv)])
        }
        "Trilu" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let r = dims.len();
            if r < 2 {
                return Err("Trilu needs a rank of at least 2".into());
            }
            let k = n.ints_in(1)?.and_then(|v| v.first().copied()).unwrap_or(0);
            let upper = n.ai("upper", 1) == 1;
            let (rows, cols) = (dims[r - 2], dims[r - 1]);
            let keep: Vec<bool> = (0..rows * cols)
                .map(|e| {
                    let (i, j) = ((e / cols) as i64, (e % cols) as i64);
                    if upper {
                        j - i >= k
                    } else {
                        j - i <= k
                    }
                })
                .collect();
            let m = HostTensor::from_slice(&keep, [rows, cols]).map_err(|e| e.to_string())?;
            let m = n.cx.b.constant(m).map_err(|e| e.to_string())?;
            let d = n.cx.b.dtype(x);
            let z = n.scalar(0.0, d)?;
            n.one("where", &[m, x, z], Attrs::new())
        }
        "Slice" => {
            let x = n.v(0)?;
            let rank = n.dims(x).len() as i64;
            // Attributes before opset 10, inputs after.
            let (starts, ends, axes, steps) = if n.cx.opset < 10 {
                let st = n.aints("starts").ok_or("Slice without starts")?;
                let en = n.aints("ends").ok_or("Slice without ends")?;
                let ax = n
                    .aints("axes")
                    .unwrap_or_else(|| (0..st.len() as i64).collect());
                let sp = vec![1; st.len()];
                (st, en, ax, sp)
            } else {
                let st = n.ints_in(1)?.ok_or("Slice without starts")?;
                let en = n.ints_in(2)?.ok_or("Slice without ends")?;
                let ax = n
                    .ints_in(3)?
                    .unwrap_or_else(|| (0..st.len() as i64).collect());
                let sp = n.ints_in(4)?.unwrap_or_else(|| vec![1; st.len()]);
                (st, en, ax, sp)
            };
            let axes: Vec<i64> = axes.iter().map(|&a| rank_axis(a, rank as usize)).collect();
            n.one(
                "slice",
                &[x],
                Attrs::new()
                    .with("starts", starts)
                    .with("ends", ends)
                    .with("axes", axes)
                    .with("steps", steps),
            )
        }
        "Split" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let axis = axis_in(n.ai("axis", 0), dims.len(), dims.len().saturating_sub(1))?;
            let extent = *dims.get(axis).ok_or("Split of a scalar")? as i64;
            let axis = axis as i64;
            let sizes = match n.aints("split") {
                Some(s) => s,
                None => match n.ints_in(1)? {
                    Some(s) => s,
                    None => {
                        let parts = node.output.len().max(1) as i64;
                        if n.ai("num_outputs", parts) != parts {
                            return Err("num_outputs differs from the node's outputs".into());
                        }
                        let each = (extent + parts - 1) / parts;
                        (0..parts)
                            .map(|k| (extent - k * each).clamp(0, each))
                            .collect()
                    }
                },
            };
            let outs =
                n.cx.b
                    .op(
                        "split",
                        &[x],
                        Attrs::new().with("axis", axis).with("sizes", sizes),
                    )
                    .map_err(|e| e.to_string())?;
            Ok(outs.into_iter().map(Out::Value).collect())
        }
        "CastLike" => {
            let (x, like) = (n.v(0)?, n.v(1)?);
            let d = n.cx.b.dtype(like);
            n.one("cast", &[x], Attrs::new().with("dtype", d))
        }
        "Range" => {
            let (start, limit, delta) = (
                n.float_in(0)?.ok_or("Range without start")?,
                n.float_in(1)?.ok_or("Range without limit")?,
                n.float_in(2)?.ok_or("Range without delta")?,
            );
            let d = n.const_in(0)?.map_or(DType::F32, |t| t.dtype());
            let count = ((limit - start) / delta).ceil();
            if !count.is_finite() {
                return Err(format!(
                    "Range({start}, {limit}, {delta}) has no finite length"
                ));
            }
            let count = count.max(0.0) as usize;
            check_elems(d, count)?;
            let vals: Vec<f64> = (0..count).map(|i| start + i as f64 * delta).collect();
            let t = HostTensor::from_f64(d, vec![count], vals).map_err(|e| e.to_string())?;
            Ok(vec![Out::Const(t)])
        }
        "ConstantOfShape" => {
            let shape = n.ints_in(0)?.ok_or("ConstantOfShape needs its shape")?;
            let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
            let (d, x) = match n.attr("value").and_then(|a| a.t.as_ref()) {
                Some(t) => {
                    let h = to_host(t).map_err(|e| e.to_string())?;
                    (
                        h.dtype(),
                        h.to_f64_vec()
                            .map_err(|e| e.to_string())?
                            .first()
                            .copied()
                            .unwrap_or(0.0),
                    )
                }
                None => (DType::F32, 0.0),
            };
            let numel = check_elems_of(d, &dims)?;
            let t = HostTensor::from_f64(d, dims, vec![x; numel]).map_err(|e| e.to_string())?;
            Ok(vec![Out::Const(t)])
        }
        "Mod" => {
            let (a, b) = (n.v(0)?, n.v(1)?);
            if n.ai("fmod", 0) == 1 || n.cx.b.dtype(a).is_float() {
                // C fmod: the sign of the dividend (rlx `rem`).
                if n.ai("fmod", 0) != 1 {
                    return Err("Mod with fmod = 0 on floats is not defined".into());
                }
                return n.one("rem", &[a, b], Attrs::new());
            }
            // Integer Mod: the sign of the divisor, ((a rem b) + b) rem b.
            let r = n.op("rem", &[a, b], Attrs::new())?;
            let s = n.op("add", &[r, b], Attrs::new())?;
            n.one("rem", &[s, b], Attrs::new())
        }
        "Dropout" => {
            if node.output.get(1).is_some_and(|o| !o.is_empty()) {
                return Err("the mask output is not supported yet".into());
            }
            let training = n.cx.opset >= 12 && n.float_in(2)?.is_some_and(|t| t != 0.0)
                || n.cx.opset < 7 && n.ai("is_test", 0) == 0;
            if training {
                return Err("training mode (random dropout) is not supported yet".into());
            }
            let x = n.v(0)?;
            n.one("identity", &[x], Attrs::new())
        }
        "GatherElements" => {
            let (x, i) = (n.v(0)?, n.v(1)?);
            let axis = n.ai("axis", 0);
            n.one("gather_elements", &[x, i], Attrs::new().with("axis", axis))
        }
        "CumSum" | "CumProd" => {
            let x = n.v(0)?;
            let axis = n
                .ints_in(1)?
                .and_then(|a| a.first().copied())
                .ok_or("CumSum needs its axis")?;
            let (ex, rev) = (n.ai("exclusive", 0) == 1, n.ai("reverse", 0) == 1);
            let r = if op == "CumSum" { "cumsum" } else { "cumprod" };
            n.one(
                r,
                &[x],
                Attrs::new()
                    .with("axis", axis)
                    .with("exclusive", ex)
                    .with("reverse", rev),
            )
        }
        "ReduceL1" | "ReduceL2" | "ReduceSumSquare" => {
            let x = n.v(0)?;
            let rank = n.dims(x).len();
            let axes = match n.aints("axes") {
                Some(a) => Some(a),
                None => n.ints_in(1)?,
            };
            let axes: Vec<i64> = match axes {
                Some(a) if !a.is_empty() => a,
                _ => (0..rank as i64).collect(),
            };
            let keep = n.ai("keepdims", 1) == 1;
            let t = if op == "ReduceL1" {
                n.op("abs", &[x], Attrs::new())?
            } else {
                n.op("mul", &[x, x], Attrs::new())?
            };
            let s = n.op(
                "reduce_sum",
                &[t],
                Attrs::new().with("axes", axes).with("keepdim", keep),
            )?;
            if op == "ReduceL2" {
                n.one("sqrt", &[s], Attrs::new())
            } else {
                Ok(vec![Out::Value(s)])
            }
        }
        "Softsign" | "Elu" | "Selu" | "Celu" | "HardSigmoid" | "HardSwish" | "ThresholdedRelu"
        | "Mish" => {
            let x = n.v(0)?;
            let d = n.cx.b.dtype(x);
            let c = |n: &mut N, v: f64| n.scalar(v, d);
            let y = match op.as_str() {
                "Softsign" => {
                    let (a, one) = (n.op("abs", &[x], Attrs::new())?, c(&mut n, 1.0)?);
                    let den = n.op("add", &[a, one], Attrs::new())?;
                    n.op("div", &[x, den], Attrs::new())?
                }
                "Elu" | "Selu" | "Celu" => {
                    let alpha = n.af(
                        "alpha",
                        match op.as_str() {
                            "Selu" => 1.673_263_2,
                            _ => 1.0,
                        },
                    );
                    let gamma = if op == "Selu" {
                        n.af("gamma", 1.050_701)
                    } else {
                        1.0
                    };
                    // alpha·(exp(x/alpha) − 1) for Celu, alpha·(exp(x) − 1) otherwise, where x < 0.
                    let xin = if op == "Celu" {
                        let a = c(&mut n, alpha)?;
                        n.op("div", &[x, a], Attrs::new())?
                    } else {
                        x
                    };
                    let e = n.op("expm1", &[xin], Attrs::new())?;
                    let a = c(&mut n, alpha)?;
                    let neg = n.op("mul", &[e, a], Attrs::new())?;
                    let z = c(&mut n, 0.0)?;
                    let lt = n.op("lt", &[x, z], Attrs::new())?;
                    let y = n.op("where", &[lt, neg, x], Attrs::new())?;
                    if gamma != 1.0 {
                        let g = c(&mut n, gamma)?;
                        n.op("mul", &[y, g], Attrs::new())?
                    } else {
                        y
                    }
                }
                "HardSigmoid" | "HardSwish" => {
                    let (alpha, beta) = if op == "HardSwish" {
                        (1.0 / 6.0, 0.5)
                    } else {
                        (n.af("alpha", 0.2), n.af("beta", 0.5))
                    };
                    let (a, b) = (c(&mut n, alpha)?, c(&mut n, beta)?);
                    let ax = n.op("mul", &[x, a], Attrs::new())?;
                    let s = n.op("add", &[ax, b], Attrs::new())?;
                    let h = n.op(
                        "clamp",
                        &[s],
                        Attrs::new().with("min", 0.0).with("max", 1.0),
                    )?;
                    if op == "HardSwish" {
                        n.op("mul", &[x, h], Attrs::new())?
                    } else {
                        h
                    }
                }
                "ThresholdedRelu" => {
                    let alpha = n.af("alpha", 1.0);
                    let t = c(&mut n, alpha)?;
                    let z = c(&mut n, 0.0)?;
                    let gt = n.op("gt", &[x, t], Attrs::new())?;
                    n.op("where", &[gt, x, z], Attrs::new())?
                }
                _ => {
                    let sp = n.op("softplus", &[x], Attrs::new())?;
                    let t = n.op("tanh", &[sp], Attrs::new())?;
                    n.op("mul", &[x, t], Attrs::new())?
                }
            };
            Ok(vec![Out::Value(y)])
        }
        "PRelu" => {
            let (x, slope) = (n.v(0)?, n.v(1)?);
            let d = n.cx.b.dtype(x);
            let z = n.scalar(0.0, d)?;
            let sx = n.op("mul", &[x, slope], Attrs::new())?;
            let lt = n.op("lt", &[x, z], Attrs::new())?;
            n.one("where", &[lt, sx, x], Attrs::new())
        }
        "Gelu" => {
            let x = n.v(0)?;
            let r = match n
                .attr("approximate")
                .map(|a| String::from_utf8_lossy(a.s()).to_string())
                .as_deref()
            {
                None | Some("none") => "gelu",
                Some("tanh") => "gelu_tanh",
                Some(o) => return Err(format!("approximate = {o:?}")),
            };
            n.one(r, &[x], Attrs::new())
        }
        "Conv" | "MaxPool" | "AveragePool" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let sp = dims.len().saturating_sub(2);
            let kernel: Vec<i64> = match n.aints("kernel_shape") {
                Some(k) => k,
                None if op == "Conv" => {
                    let w = n.v(1)?;
                    n.dims(w).iter().skip(2).map(|&d| d as i64).collect()
                }
                None => return Err("no kernel_shape".into()),
            };
            let strides = n.aints("strides").unwrap_or_else(|| vec![1; sp]);
            let dil = n.aints("dilations").unwrap_or_else(|| vec![1; sp]);
            if dims.len() < 3 || kernel.len() != sp || strides.len() != sp || dil.len() != sp {
                return Err(format!(
                    "a {}-d input needs {sp} kernel sizes, strides and dilations, got {}, {}, {}",
                    dims.len(),
                    kernel.len(),
                    strides.len(),
                    dil.len()
                ));
            }
            if strides.iter().chain(&dil).chain(&kernel).any(|&v| v < 1) {
                return Err("kernel sizes, strides and dilations must be at least 1".into());
            }
            if n.ai("ceil_mode", 0) != 0 {
                return Err("ceil_mode = 1 is not supported yet".into());
            }
            let auto = n
                .attr("auto_pad")
                .map(|a| String::from_utf8_lossy(a.s()).to_string())
                .unwrap_or_else(|| "NOTSET".into());
            let pads = match auto.as_str() {
                "NOTSET" => n.aints("pads").unwrap_or_else(|| vec![0; 2 * sp]),
                "VALID" => vec![0; 2 * sp],
                "SAME_UPPER" | "SAME_LOWER" => {
                    let mut p = vec![0; 2 * sp];
                    for i in 0..sp {
                        let (inp, s, k, d) = (dims[2 + i] as i64, strides[i], kernel[i], dil[i]);
                        let out = inp.saturating_add(s - 1) / s;
                        let total = (out - 1)
                            .saturating_mul(s)
                            .saturating_add((k - 1).saturating_mul(d))
                            .saturating_add(1 - inp)
                            .max(0);
                        let small = total / 2;
                        let (b, e) = if auto == "SAME_UPPER" {
                            (small, total - small)
                        } else {
                            (total - small, small)
                        };
                        p[i] = b;
                        p[sp + i] = e;
                    }
                    p
                }
                o => return Err(format!("auto_pad = {o:?}")),
            };
            match op.as_str() {
                "Conv" => {
                    let w = n.v(1)?;
                    let mut ins = vec![x, w];
                    if n.name(2).is_some() {
                        ins.push(n.v(2)?);
                    }
                    let group = n.ai("group", 1);
                    n.one(
                        "conv",
                        &ins,
                        Attrs::new()
                            .with("strides", strides)
                            .with("pads", pads)
                            .with("dilations", dil)
                            .with("groups", group),
                    )
                }
                "MaxPool" => {
                    if node.output.get(1).is_some_and(|o| !o.is_empty()) {
                        return Err("the Indices output is not supported yet".into());
                    }
                    if n.ai("storage_order", 0) != 0 {
                        return Err("storage_order = 1 is not supported yet".into());
                    }
                    n.one(
                        "max_pool",
                        &[x],
                        Attrs::new()
                            .with("kernel", kernel)
                            .with("strides", strides)
                            .with("pads", pads)
                            .with("dilations", dil),
                    )
                }
                _ => {
                    if dil.iter().any(|&d| d != 1) {
                        return Err("AveragePool with dilations is not supported yet".into());
                    }
                    let cip = n.ai("count_include_pad", 0) == 1;
                    n.one(
                        "avg_pool",
                        &[x],
                        Attrs::new()
                            .with("kernel", kernel)
                            .with("strides", strides)
                            .with("pads", pads)
                            .with("count_include_pad", cip),
                    )
                }
            }
        }
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let x = n.v(0)?;
            n.one(
                if op == "GlobalAveragePool" {
                    "global_avg_pool"
                } else {
                    "global_max_pool"
                },
                &[x],
                Attrs::new(),
            )
        }
        "RMSNormalization" => {
            let (x, g) = (n.v(0)?, n.v(1)?);
            let dims = n.dims(x);
            let axis = rank_axis(n.ai("axis", -1), dims.len());
            let eps = n.af("epsilon", 1e-5);
            n.one(
                "rms_norm",
                &[x, g],
                Attrs::new().with("axis", axis).with("eps", eps),
            )
        }
        "Pad" => {
            let x = n.v(0)?;
            let rank = n.dims(x).len();
            let mode = n
                .attr("mode")
                .map(|a| String::from_utf8_lossy(a.s()).to_string())
                .unwrap_or_else(|| "constant".into());
            let (pads, value) = if n.cx.opset < 11 {
                (
                    n.aints("pads").ok_or("Pad without pads")?,
                    n.af("value", 0.0),
                )
            } else {
                let p = n.ints_in(1)?.ok_or("Pad without pads")?;
                let v = n.float_in(2)?.unwrap_or(0.0);
                (p, v)
            };
            let pads = match n.ints_in(3)? {
                // Pads for some axes only (opset 18).
                Some(axes) => {
                    let mut full = vec![0i64; 2 * rank];
                    if pads.len() != 2 * axes.len() {
                        return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
                    }
                    for (k, &a) in axes.iter().enumerate() {
                        let a = axis_in(a, rank, rank.saturating_sub(1))?;
                        full[a] = pads[k];
                        full[rank + a] = pads[axes.len() + k];
                    }
                    full
                }
                None => pads,
            };
            if pads.iter().any(|&p| p < 0) {
                return Err("negative pads (cropping) are not supported yet".into());
            }
            n.one(
                "pad",
                &[x],
                Attrs::new()
                    .with("pads", pads)
                    .with("mode", mode)
                    .with("value", value),
            )
        }
        "TopK" => {
            let x = n.v(0)?;
            let k = n
                .ints_in(1)?
                .and_then(|k| k.first().copied())
                .ok_or("TopK needs k")?;
            let axis = n.ai("axis", -1);
            let largest = n.ai("largest", 1) == 1;
            if n.ai("sorted", 1) != 1 {
                return Err("sorted = 0 is not supported yet".into());
            }
            let outs =
                n.cx.b
                    .op(
                        "topk",
                        &[x],
                        Attrs::new()
                            .with("k", k)
                            .with("axis", axis)
                            .with("largest", largest),
                    )
                    .map_err(|e| e.to_string())?;
            Ok(outs.into_iter().map(Out::Value).collect())
        }
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
            let (x, t) = (n.v(0)?, n.v(1)?);
            let w = match n.name(2) {
                Some(_) => Some(n.v(2)?),
                None => None,
            };
            let logp = if op == "SoftmaxCrossEntropyLoss" {
                n.op("log_softmax", &[x], Attrs::new().with("axis", 1i64))?
            } else {
                x
            };
            let loss = nll(&mut n, logp, t, w)?;
            let mut outs = vec![Out::Value(loss)];
            if op == "SoftmaxCrossEntropyLoss" && node.output.get(1).is_some_and(|o| !o.is_empty())
            {
                outs.push(Out::Value(logp));
            }
            Ok(outs)
        }
        "Attention" => attention(&mut n),
        "ConvTranspose" => {
            let (x, w) = (n.v(0)?, n.v(1)?);
            let (xd, wd) = (n.dims(x), n.dims(w));
            let sp = xd.len().saturating_sub(2);
            let kernel: Vec<i64> = wd.iter().skip(2).map(|&d| d as i64).collect();
            let strides = n.aints("strides").unwrap_or_else(|| vec![1; sp]);
            let dil = n.aints("dilations").unwrap_or_else(|| vec![1; sp]);
            let out_pad = n.aints("output_padding").unwrap_or_else(|| vec![0; sp]);
            if xd.len() < 3
                || kernel.len() != sp
                || strides.len() != sp
                || dil.len() != sp
                || out_pad.len() != sp
            {
                return Err(
                    "kernel, strides, dilations and output_padding must match the spatial rank"
                        .into(),
                );
            }
            if strides.iter().chain(&dil).any(|&v| v < 1) {
                return Err("strides and dilations must be at least 1".into());
            }
            let auto = n
                .attr("auto_pad")
                .map(|a| String::from_utf8_lossy(a.s()).to_string())
                .unwrap_or_else(|| "NOTSET".into());
            // Padding from output_shape or SAME_*: total = stride·(in − 1)
            // + output_padding + (k − 1)·dilation + 1 − out.
            let want: Option<Vec<i64>> = match (n.aints("output_shape"), auto.as_str()) {
                (Some(o), _) => Some(o.iter().rev().take(sp).rev().copied().collect()),
                (None, "SAME_UPPER" | "SAME_LOWER") => {
                    Some((0..sp).map(|i| xd[2 + i] as i64 * strides[i]).collect())
                }
                (None, "NOTSET" | "VALID") => None,
                (None, o) => return Err(format!("auto_pad = {o:?}")),
            };
            if want.as_ref().is_some_and(|o| o.len() != sp) {
                return Err(format!("output_shape must give {sp} spatial sizes"));
            }
            let pads = match want {
                Some(out) => {
                    let mut p = vec![0i64; 2 * sp];
                    for i in 0..sp {
                        let total = strides[i]
                            .saturating_mul(xd[2 + i] as i64 - 1)
                            .saturating_add(out_pad[i])
                            .saturating_add((kernel[i] - 1).saturating_mul(dil[i]))
                            .saturating_add(1)
                            .saturating_sub(out[i]);
                        if total < 0 {
                            return Err(format!("output_shape {out:?} is larger than the transposed convolution gives"));
                        }
                        let half = total / 2;
                        let (b, e) = if auto == "SAME_LOWER" {
                            (total - half, half)
                        } else {
                            (half, total - half)
                        };
                        p[i] = b;
                        p[sp + i] = e;
                    }
                    p
                }
                None if auto == "VALID" => vec![0; 2 * sp],
                None => n.aints("pads").unwrap_or_else(|| vec![0; 2 * sp]),
            };
            let mut ins = vec![x, w];
            if n.name(2).is_some() {
                ins.push(n.v(2)?);
            }
            let group = n.ai("group", 1);
            n.one(
                "conv_transpose",
                &ins,
                Attrs::new()
                    .with("strides", strides)
                    .with("pads", pads)
                    .with("dilations", dil)
                    .with("groups", group)
                    .with("output_padding", out_pad),
            )
        }
        "ScatterElements" => {
            let red = n
                .attr("reduction")
                .map(|a| String::from_utf8_lossy(a.s()).to_string())
                .unwrap_or_else(|| "none".into());
            let (x, i, u) = (n.v(0)?, n.v(1)?, n.v(2)?);
            let axis = n.ai("axis", 0);
            let r = match red.as_str() {
                "none" => "scatter",
                "add" => "scatter_add",
                o => return Err(format!("reduction = {o:?} is not supported yet")),
            };
            n.one(r, &[x, i, u], Attrs::new().with("axis", axis))
        }
        "Hardmax" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let rank = dims.len();
            if n.cx.opset < 13 {
                return Err("Hardmax before opset 13 (flattened axes) is not supported yet".into());
            }
            let axis = axis_in(n.ai("axis", -1), rank, rank.saturating_sub(1))?;
            let i = n.op(
                "argmax",
                &[x],
                Attrs::new()
                    .with("axis", axis as i64)
                    .with("keepdim", false),
            )?;
            let d = n.cx.b.dtype(x);
            n.one(
                "one_hot",
                &[i],
                Attrs::new()
                    .with("depth", dims[axis] as i64)
                    .with("axis", axis as i64)
                    .with("dtype", d),
            )
        }
        _ => Err(format!("op `{op}` is not supported yet")),
    }
}

/// ONNX Attention (opset 23) onto the IR's `attention`: 3-D inputs split
/// into heads, grouped-query K/V repeated to the query heads, past K/V
/// concatenated (and returned as present), `is_causal` as an upper-left
/// keep mask combined with `attn_mask` (bool: keep; float: added).
fn attention(n: &mut N) -> R {
    let node = n.node;
    if n.af("softcap", 0.0) != 0.0 {
        return Err("softcap is not supported yet".into());
    }
    if node.output.get(3).is_some_and(|o| !o.is_empty()) {
        return Err("the qk_matmul_output output is not supported yet".into());
    }
    let (q, k, v) = (n.v(0)?, n.v(1)?, n.v(2)?);
    let three_d = n.dims(q).len() == 3;
    // [B, S, H·D] → [B, H, S, D].
    let heads = |n: &mut N, x: ValueId, h: i64| -> Result<ValueId, String> {
        if !three_d {
            return Ok(x);
        }
        let d = n.dims(x);
        if d.len() != 3 {
            return Err("with 3-d Q, K and V must be 3-d too".into());
        }
        if h <= 0 || d[2] as i64 % h != 0 {
            return Err(format!("{} features do not split into {h} heads", d[2]));
        }
        let r = n.op(
            "reshape",
            &[x],
            Attrs::new().with("shape", vec![d[0] as i64, d[1] as i64, h, d[2] as i64 / h]),
        )?;
        n.op(
            "permute",
            &[r],
            Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
        )
    };
    let (hq, hkv) = (n.ai("q_num_heads", 0), n.ai("kv_num_heads", 0));
    let q = heads(n, q, hq)?;
    let mut k = heads(n, k, hkv)?;
    let mut v = heads(n, v, hkv)?;
    if n.name(4).is_some() || n.name(5).is_some() {
        let (pk, pv) = (n.v(4)?, n.v(5)?);
        k = n.op("concat", &[pk, k], Attrs::new().with("axis", 2i64))?;
        v = n.op("concat", &[pv, v], Attrs::new().with("axis", 2i64))?;
    }
    let (present_k, present_v) = (k, v);
    if [q, k, v].iter().any(|&x| n.dims(x).len() != 4) {
        return Err("Q, K and V must be 3-d (with head counts) or 4-d".into());
    }
    let (qd, kd) = (n.dims(q), n.dims(k));
    let (nq, nk) = (qd[1], kd[1]);
    if nk == 0 || nq % nk != 0 {
        return Err(format!(
            "{nq} query heads are not a multiple of {nk} key heads"
        ));
    }
    if nq != nk {
        // Each K/V head serves nq/nk query heads, adjacent ones.
        let g = (nq / nk) as i64;
        let rep = |n: &mut N, x: ValueId| -> Result<ValueId, String> {
            let d: Vec<i64> = n.dims(x).iter().map(|&v| v as i64).collect();
            let u = n.op("unsqueeze", &[x], Attrs::new().with("axes", vec![2i64]))?;
            let b = n.op(
                "broadcast",
                &[u],
                Attrs::new().with("shape", vec![d[0], d[1], g, d[2], d[3]]),
            )?;
            n.op(
                "reshape",
                &[b],
                Attrs::new().with("shape", vec![d[0], d[1] * g, d[2], d[3]]),
            )
        };
        k = rep(n, k)?;
        v = rep(n, v)?;
    }
    let (sq, sk) = (qd[2], kd[2]);
    let mut ins = vec![q, k, v];
    let mut a = Attrs::new();
    if let Some(sc) = n.attr("scale") {
        a = a.with("scale", sc.f() as f64);
    }
    let causal = n.ai("is_causal", 0) == 1;
    let keep = if causal {
        let m: Vec<bool> = (0..sq * sk).map(|e| e % sk <= e / sk).collect();
        let t = HostTensor::from_slice(&m, [sq, sk]).map_err(|e| e.to_string())?;
        Some(n.cx.b.constant(t).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mask = match n.name(3) {
        Some(_) => Some(n.v(3)?),
        None => None,
    };
    let kind = match (mask, keep) {
        (None, None) => "none",
        (None, Some(c)) => {
            ins.push(c);
            "custom"
        }
        (Some(m), c) if n.cx.b.dtype(m) == DType::Bool => {
            let m = match c {
                Some(c) => n.op("and", &[m, c], Attrs::new())?,
                None => m,
            };
            ins.push(m);
            "custom"
        }
        (Some(m), c) => {
            let d = n.cx.b.dtype(m);
            let m = match c {
                Some(c) => {
                    let ninf = n.scalar(f64::NEG_INFINITY, d)?;
                    n.op("where", &[c, m, ninf], Attrs::new())?
                }
                None => m,
            };
            let qdt = n.cx.b.dtype(q);
            let m = n.cast_to(m, qdt)?;
            ins.push(m);
            "bias"
        }
    };
    a = a.with("mask_kind", kind);
    let mut y = n.op("attention", &ins, a)?;
    if three_d {
        let d = n.dims(y);
        let p = n.op(
            "permute",
            &[y],
            Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
        )?;
        y = n.op(
            "reshape",
            &[p],
            Attrs::new().with(
                "shape",
                vec![d[0] as i64, d[2] as i64, (d[1] * d[3]) as i64],
            ),
        )?;
    }
    Ok(vec![
        Out::Value(y),
        Out::Value(present_k),
        Out::Value(present_v),
    ])
}

/// The negative log-likelihood of `logp` ([N, C, d...]) at the classes
/// `t` ([N, d...]), weighted per class by `w` ([C]), with the node's
/// `reduction` (none, sum, mean: weighted by the weights picked) and
/// `ignore_index` (those elements count zero and weigh zero).
fn nll(n: &mut N, logp: ValueId, t: ValueId, w: Option<ValueId>) -> Result<ValueId, String> {
    let (d, td) = (n.cx.b.dtype(logp), n.cx.b.dtype(t));
    let reduction = n
        .attr("reduction")
        .map(|a| String::from_utf8_lossy(a.s()).to_string())
        .unwrap_or_else(|| "mean".into());
    let ignore = n.attr("ignore_index").map(|a| a.i());
    // Ignored targets may lie outside 0..C: read class 0 there instead.
    let (safe, keep) = match ignore {
        Some(i) => {
            let iv = n.scalar(i as f64, td)?;
            let zero = n.scalar(0.0, td)?;
            let is = n.op("eq", &[t, iv], Attrs::new())?;
            let safe = n.op("where", &[is, zero, t], Attrs::new())?;
            let keep = n.op("not", &[is], Attrs::new())?;
            (
                safe,
                Some(n.op("cast", &[keep], Attrs::new().with("dtype", d))?),
            )
        }
        None => (t, None),
    };
    let idx = n.op("unsqueeze", &[safe], Attrs::new().with("axes", vec![1i64]))?;
    let picked = n.op(
        "gather_elements",
        &[logp, idx],
        Attrs::new().with("axis", 1i64),
    )?;
    let picked = n.op("squeeze", &[picked], Attrs::new().with("axes", vec![1i64]))?;
    // The weight of each element: w[t] (or 1), times 0 where ignored.
    let mut weight = match w {
        Some(w) => Some(n.op("gather", &[w, safe], Attrs::new().with("axis", 0i64))?),
        None => None,
    };
    if let Some(k) = keep {
        weight = Some(match weight {
            Some(w) => n.op("mul", &[w, k], Attrs::new())?,
            None => k,
        });
    }
    let neg = n.op("neg", &[picked], Attrs::new())?;
    let loss = match weight {
        Some(w) => n.op("mul", &[neg, w], Attrs::new())?,
        None => neg,
    };
    let rank = n.dims(loss).len() as i64;
    let all: Vec<i64> = (0..rank).collect();
    let sum = |n: &mut N, v: ValueId| {
        n.op(
            "reduce_sum",
            &[v],
            Attrs::new()
                .with("axes", all.clone())
                .with("keepdim", false),
        )
    };
    match reduction.as_str() {
        "none" => Ok(loss),
        "sum" => sum(n, loss),
        "mean" => {
            let total = sum(n, loss)?;
            let count = match weight {
                Some(w) => sum(n, w)?,
                None => {
                    let c: usize = n.dims(loss).iter().product();
                    n.scalar(c as f64, d)?
                }
            };
            n.op("div", &[total, count], Attrs::new())
        }
        r => Err(format!("reduction {r:?}")),
    }
}
