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
    ("Abs", "abs"), ("Neg", "neg"), ("Exp", "exp"), ("Log", "log"), ("Sqrt", "sqrt"),
    ("Reciprocal", "reciprocal"), ("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"),
    ("Sin", "sin"), ("Cos", "cos"), ("Tan", "tan"), ("Asin", "asin"), ("Acos", "acos"),
    ("Atan", "atan"), ("Sinh", "sinh"), ("Cosh", "cosh"), ("Asinh", "asinh"),
    ("Acosh", "acosh"), ("Atanh", "atanh"), ("Erf", "erf"), ("Floor", "floor"),
    ("Ceil", "ceil"), ("Round", "round"), ("Sign", "sign"), ("Not", "not"),
    ("IsNaN", "isnan"), ("Softplus", "softplus"), ("Identity", "identity"),
    ("BitwiseNot", "bitwise_not"),
];

/// ONNX op → rlx op, two inputs with NumPy broadcasting.
const BINARY: &[(&str, &str)] = &[
    ("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div"), ("Pow", "pow"),
    ("Equal", "eq"), ("Less", "lt"), ("Greater", "gt"), ("LessOrEqual", "le"),
    ("GreaterOrEqual", "ge"), ("And", "and"), ("Or", "or"), ("Xor", "xor"),
    ("BitwiseAnd", "bitwise_and"), ("BitwiseOr", "bitwise_or"), ("BitwiseXor", "bitwise_xor"),
];

const REDUCE: &[(&str, &str)] = &[
    ("ReduceSum", "reduce_sum"), ("ReduceMean", "reduce_mean"), ("ReduceMax", "reduce_max"),
    ("ReduceMin", "reduce_min"), ("ReduceProd", "reduce_prod"),
    ("ReduceLogSumExp", "reduce_logsumexp"),
];

/// The ONNX op types this importer maps (for coverage tables).
pub fn supported() -> Vec<&'static str> {
    let mut v: Vec<&str> = UNARY.iter().chain(BINARY).chain(REDUCE).map(|p| p.0).collect();
    v.extend([
        "Max", "Min", "Sum", "Mean", "MatMul", "Gemm", "Softmax", "LogSoftmax", "Transpose",
        "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Cast", "Where", "Clip",
        "Gather", "Shape", "Size", "Constant", "Expand", "Tile", "LeakyRelu", "IsInf",
        "ArgMax", "ArgMin", "LayerNormalization",
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
        self.node.input.get(k).map(|s| s.as_str()).filter(|s| !s.is_empty())
    }
    fn v(&mut self, k: usize) -> Result<ValueId, String> {
        let name = self
            .name(k)
            .ok_or_else(|| format!("input {k} is missing"))?
            .to_string();
        self.cx.value(&name)
    }
    fn konst(&self, k: usize) -> Option<&HostTensor> {
        self.name(k).and_then(|n| self.cx.consts.get(n))
    }
    /// The integer values of input `k`, which must be known at import.
    fn ints_in(&self, k: usize) -> Result<Option<Vec<i64>>, String> {
        let Some(name) = self.name(k) else {
            return Ok(None);
        };
        match self.cx.consts.get(name) {
            Some(t) => t.to_i64_vec().map(Some).map_err(|e| e.to_string()),
            None => Err(format!(
                "input {k} (`{name}`) must be known at import (rlx needs static shapes): \
                 make it an initializer or bind it with ImportOptions::constants"
            )),
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
            _ if n.ai("noop_with_empty_axes", 0) == 1 => return n.one("identity", &[x], Attrs::new()),
            _ => (0..rank as i64).collect(),
        };
        let keep = n.ai("keepdims", 1) == 1;
        return n.one(r, &[x], Attrs::new().with("axes", axes).with("keepdim", keep));
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
            let r = if op == "Softmax" { "softmax" } else { "log_softmax" };
            let x = n.v(0)?;
            let dims = n.dims(x);
            let rank = dims.len();
            if n.cx.opset >= 13 {
                let axis = n.ai("axis", -1);
                return n.one(r, &[x], Attrs::new().with("axis", axis));
            }
            // Before opset 13: over the flattened trailing axes from `axis`.
            let axis = rank_axis(n.ai("axis", 1), rank) as usize;
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis..].iter().product();
            let flat = n.op("reshape", &[x], Attrs::new().with("shape", vec![outer as i64, inner as i64]))?;
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
                .map(|(i, &s)| if s == 0 && !allowzero { dims.get(i).map_or(0, |&d| d as i64) } else { s })
                .collect();
            n.one("reshape", &[x], Attrs::new().with("shape", shape))
        }
        "Flatten" => {
            let x = n.v(0)?;
            let dims = n.dims(x);
            let axis = rank_axis(n.ai("axis", 1), dims.len()) as usize;
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis..].iter().product();
            n.one("reshape", &[x], Attrs::new().with("shape", vec![outer as i64, inner as i64]))
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
                match n.name(k) {
                    None => Ok(None),
                    Some(_) => match n.konst(k) {
                        Some(t) => Ok(t.to_f64_vec().map_err(|e| e.to_string())?.first().copied()),
                        None => Err(format!("Clip's {attr} must be known at import")),
                    },
                }
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
                "value_float" => HostTensor::from_f64(DType::F32, Vec::<usize>::new(), vec![a.f() as f64]).map_err(|e| e.to_string())?,
                "value_int" => HostTensor::from_i64(DType::I64, Vec::<usize>::new(), vec![a.i()]).map_err(|e| e.to_string())?,
                "value_floats" => HostTensor::from_f64(DType::F32, vec![a.floats.len()], a.floats.iter().map(|&x| x as f64).collect()).map_err(|e| e.to_string())?,
                "value_ints" => HostTensor::from_i64(DType::I64, vec![a.ints.len()], a.ints.clone()).map_err(|e| e.to_string())?,
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
            let pad = |v: Vec<i64>| -> Vec<i64> { std::iter::repeat(1).take(r - v.len()).chain(v).collect() };
            let (a, b) = (pad(dims.iter().map(|&d| d as i64).collect()), pad(want));
            let out: Vec<i64> = a.iter().zip(&b).map(|(&p, &q)| if p == 1 { q } else { p }).collect();
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
            if n.ai("select_last_index", 0) != 0 {
                return Err("select_last_index = 1 is not supported yet".into());
            }
            let x = n.v(0)?;
            let axis = n.ai("axis", 0);
            let keep = n.ai("keepdims", 1) == 1;
            n.one(&op.to_lowercase(), &[x], Attrs::new().with("axis", axis).with("keepdim", keep))
        }
        "LayerNormalization" => {
            if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err("the Mean and InvStdDev outputs are not supported yet".into());
            }
            let (x, g) = (n.v(0)?, n.v(1)?);
            let dims = n.dims(x);
            let axis = rank_axis(n.ai("axis", -1), dims.len());
            if axis != dims.len() as i64 - 1 {
                return Err(format!("axis {axis} (only the last axis is supported yet)"));
            }
            let b = match n.name(2) {
                Some(_) => n.v(2)?,
                None => {
                    let d = n.cx.b.dtype(x);
                    let z = HostTensor::zeros(d, vec![*dims.last().unwrap_or(&1)]).map_err(|e| e.to_string())?;
                    n.cx.b.constant(z).map_err(|e| e.to_string())?
                }
            };
            let eps = n.af("epsilon", 1e-5);
            n.one("layer_norm", &[x, g, b], Attrs::new().with("axis", axis).with("eps", eps))
        }
        _ => Err(format!("op `{op}` is not supported yet")),
    }
}
