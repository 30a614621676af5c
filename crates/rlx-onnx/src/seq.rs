//! ONNX sequences and optionals. rlx's graphs have static shapes, so a
//! sequence is a list known at import: its elements are graph values (or
//! constants), and every sequence op — construct, insert, erase, at,
//! length, split, concat, map — is list work done while importing.
//! Positions must be known at import. An optional is its value, or
//! [`Bound::Absent`]; `OptionalHasElement` is a constant.
//!
//! Graph inputs of sequence type take their elements' shapes from
//! [`ImportOptions::sequences`] (one graph input per element, `NAME[i]`);
//! optional inputs given no value are named in [`ImportOptions::absent`].
//! A sequence output is one result per element ([`flatten`]).

use crate::import::{Bound, Cx, ImportOptions};
use crate::ops::Out;
use crate::proto::{type_proto, NodeProto, ValueInfoProto};
use crate::tensor::storage_of;
use crate::OnnxError;
use rlx_ir::{Attrs, HostTensor, Shape, TensorType};

type R = Result<Vec<Out>, String>;

/// The longest sequence made at import (each element is a graph value of
/// its own; as for unrolled loops).
const MAX_ITEMS: usize = 4096;

/// The results a graph output gives: itself, one per sequence element
/// (`NAME[i]`), or none for an empty optional.
pub(crate) fn flatten(name: &str, b: Bound) -> Vec<(String, Bound)> {
    match b {
        Bound::Seq(items) => items
            .into_iter()
            .enumerate()
            .flat_map(|(i, it)| flatten(&format!("{name}[{i}]"), it))
            .collect(),
        Bound::Absent => Vec::new(),
        b => vec![(name.to_string(), b)],
    }
}

/// Bind a graph input of sequence or optional type; `false` for a tensor
/// input (the caller imports it).
pub(crate) fn input(
    cx: &mut Cx,
    vi: &ValueInfoProto,
    opts: &ImportOptions,
    inputs: &mut Vec<String>,
) -> Result<bool, OnnxError> {
    use type_proto::Value as T;
    let name = vi.name();
    let bad = |m: String| OnnxError::Invalid(format!("input `{name}`: {m}"));
    let mut ty = vi.r#type.as_ref().and_then(|t| t.value.as_ref());
    if let Some(T::OptionalType(o)) = ty {
        if opts.absent.contains(name) {
            cx.bind(name, Bound::Absent);
            return Ok(true);
        }
        ty = o.elem_type.as_ref().and_then(|t| t.value.as_ref());
        if let Some(T::TensorType(_)) = ty {
            return Ok(false); // imported as the tensor it holds
        }
    }
    let Some(T::SequenceType(sq)) = ty else {
        return Ok(false);
    };
    let Some(T::TensorType(el)) = sq.elem_type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(bad(
            "a sequence of non-tensors (rlx takes sequences of tensors)".into(),
        ));
    };
    let (dtype, narrow) = storage_of(el.elem_type()).map_err(&bad)?;
    if narrow.is_some() {
        return Err(bad(
            "a sequence of float8 or 4-/2-bit tensors is not supported".into(),
        ));
    }
    let shapes = opts.sequences.get(name).ok_or_else(|| {
        bad("a sequence: give the shape of each element (ImportOptions::sequences)".into())
    })?;
    let mut items = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let item = format!("{name}[{i}]");
        rlx_ir::limits::limits()
            .check_tensor_shape(&format!("input `{item}`"), dtype, shape)
            .map_err(|e| OnnxError::Invalid(e.to_string()))?;
        let v =
            cx.b.input(item.clone(), TensorType::new(dtype, shape.clone()));
        items.push(Bound::Value(v));
        inputs.push(item);
    }
    cx.bind(name, Bound::Seq(items));
    Ok(true)
}

/// Map a sequence or optional op, or an `Identity` of one; `None` for
/// every other node.
pub(crate) fn map(cx: &mut Cx, node: &NodeProto) -> Option<R> {
    let op = node.op_type();
    let reads_list = |cx: &Cx| {
        node.input
            .first()
            .is_some_and(|n| cx.seqs.contains_key(n) || cx.absent.contains(n))
    };
    Some(match op {
        "SequenceConstruct" => construct(cx, node),
        "SequenceEmpty" => Ok(vec![Out::Seq(Vec::new())]),
        "SequenceInsert" => insert(cx, node),
        "SequenceErase" => erase(cx, node),
        "SequenceAt" => at(cx, node),
        "SequenceLength" => length(cx, node),
        "ConcatFromSequence" => concat(cx, node),
        "SplitToSequence" => split(cx, node),
        "SequenceMap" => seq_map(cx, node),
        "Optional" => match input_name(node, 0) {
            Some(n) => cx.bound(n).map(|b| vec![b.into_out()]),
            None => Ok(vec![Out::Absent]),
        },
        "OptionalHasElement" => {
            let has = match input_name(node, 0) {
                None => Ok(false),
                Some(n) => cx.bound(n).map(|b| !matches!(b, Bound::Absent)),
            };
            has.and_then(|h| {
                let t = HostTensor::from_slice(&[h], Shape::scalar()).map_err(|e| e.to_string())?;
                Ok(vec![Out::Const(t)])
            })
        }
        "OptionalGetElement" => match input_name(node, 0).map(|n| (n, cx.bound(n))) {
            Some((n, Ok(Bound::Absent))) => Err(format!("optional `{n}` holds no value")),
            Some((_, b)) => b.map(|b| vec![b.into_out()]),
            None => Err("input 0 is missing".into()),
        },
        "Identity" if reads_list(cx) => cx.bound(&node.input[0]).map(|b| vec![b.into_out()]),
        _ => return None,
    })
}

fn input_name(node: &NodeProto, k: usize) -> Option<&str> {
    node.input
        .get(k)
        .map(|s| s.as_str())
        .filter(|s| !s.is_empty())
}

/// Input `k`, a sequence.
fn list(cx: &Cx, node: &NodeProto, k: usize) -> Result<Vec<Bound>, String> {
    let n = input_name(node, k).ok_or_else(|| format!("input {k} is missing"))?;
    match cx.bound(n)? {
        Bound::Seq(items) => Ok(items),
        _ => Err(format!("input {k} (`{n}`) is not a sequence")),
    }
}

/// Input `k` as one integer known at import (`None`: not given).
fn position(cx: &Cx, node: &NodeProto, k: usize) -> Result<Option<i64>, String> {
    let Some(n) = input_name(node, k) else {
        return Ok(None);
    };
    let t = cx.consts.get(n).ok_or_else(|| {
        format!("input {k} (`{n}`) must be known at import (sequences are lists known at import)")
    })?;
    let v = t.to_i64_vec().map_err(|e| e.to_string())?;
    match v.as_slice() {
        [p] => Ok(Some(*p)),
        _ => Err(format!(
            "input {k} (`{n}`) holds {} values, not one",
            v.len()
        )),
    }
}

/// A position in a list of `len`, negative from the end; `end_ok` allows
/// `len` itself (an insertion at the back).
fn resolve(p: i64, len: usize, end_ok: bool) -> Result<usize, String> {
    let q = if p < 0 { p + len as i64 } else { p };
    let top = len as i64 + end_ok as i64;
    if (0..top).contains(&q) {
        Ok(q as usize)
    } else {
        Err(format!(
            "position {p} is outside a sequence of {len} elements"
        ))
    }
}

fn construct(cx: &Cx, node: &NodeProto) -> R {
    let items = node
        .input
        .iter()
        .map(|n| cx.bound(n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![Out::Seq(items)])
}

fn insert(cx: &Cx, node: &NodeProto) -> R {
    let mut items = list(cx, node, 0)?;
    let t = cx.bound(input_name(node, 1).ok_or("input 1 is missing")?)?;
    let at = match position(cx, node, 2)? {
        Some(p) => resolve(p, items.len(), true)?,
        None => items.len(),
    };
    if items.len() >= MAX_ITEMS {
        return Err(format!("a sequence of more than {MAX_ITEMS} elements"));
    }
    items.insert(at, t);
    Ok(vec![Out::Seq(items)])
}

fn erase(cx: &Cx, node: &NodeProto) -> R {
    let mut items = list(cx, node, 0)?;
    if items.is_empty() {
        return Err("SequenceErase of an empty sequence".into());
    }
    let at = match position(cx, node, 1)? {
        Some(p) => resolve(p, items.len(), false)?,
        None => items.len() - 1,
    };
    items.remove(at);
    Ok(vec![Out::Seq(items)])
}

fn at(cx: &Cx, node: &NodeProto) -> R {
    let items = list(cx, node, 0)?;
    let p = position(cx, node, 1)?.ok_or("input 1 (the position) is missing")?;
    let i = resolve(p, items.len(), false)?;
    Ok(vec![items[i].clone().into_out()])
}

fn length(cx: &Cx, node: &NodeProto) -> R {
    let n = list(cx, node, 0)?.len() as i64;
    let t = HostTensor::from_slice(&[n], Shape::scalar()).map_err(|e| e.to_string())?;
    Ok(vec![Out::Const(t)])
}

fn attr_i(node: &NodeProto, name: &str, default: i64) -> i64 {
    node.attribute
        .iter()
        .find(|a| a.name() == name)
        .map_or(default, |a| a.i())
}

fn concat(cx: &mut Cx, node: &NodeProto) -> R {
    let items = list(cx, node, 0)?;
    if items.is_empty() {
        return Err("ConcatFromSequence of an empty sequence has no shape".into());
    }
    let (axis, new_axis) = (attr_i(node, "axis", 0), attr_i(node, "new_axis", 0) != 0);
    let mut vals = Vec::new();
    for it in items {
        vals.push(cx.value_of(it)?);
    }
    let rank = cx.b.shape(vals[0]).rank() as i64 + new_axis as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&a) {
        return Err(format!("axis {axis} is outside rank {rank}"));
    }
    if new_axis {
        for v in &mut vals {
            *v =
                cx.b.op1("unsqueeze", &[*v], Attrs::new().with("axes", vec![a]))
                    .map_err(|e| e.to_string())?;
        }
    }
    let v =
        cx.b.op1("concat", &vals, Attrs::new().with("axis", a))
            .map_err(|e| e.to_string())?;
    Ok(vec![Out::Value(v)])
}

fn split(cx: &mut Cx, node: &NodeProto) -> R {
    let x = cx.value(input_name(node, 0).ok_or("input 0 is missing")?)?;
    let dims = cx.b.shape(x).dims().to_vec();
    let axis = attr_i(node, "axis", 0);
    let a = if axis < 0 {
        axis + dims.len() as i64
    } else {
        axis
    };
    if !(0..dims.len() as i64).contains(&a) {
        return Err(format!("axis {axis} is outside rank {}", dims.len()));
    }
    let len = dims[a as usize];
    let keep = attr_i(node, "keepdims", 1) != 0;
    // The number of pieces, checked before any list of them is made.
    let too_many = |k: usize| {
        format!("a split into {k} pieces (rlx makes sequences of at most {MAX_ITEMS} at import)")
    };
    let sizes: Vec<usize> = match input_name(node, 1) {
        None if len > MAX_ITEMS => return Err(too_many(len)),
        None => vec![1; len],
        Some(n) => {
            let t = cx.consts.get(n).ok_or_else(|| {
                format!("input 1 (`{n}`) must be known at import (it sets the sequence's length)")
            })?;
            let v = t.to_i64_vec().map_err(|e| e.to_string())?;
            if v.iter().any(|&s| s < 0) {
                return Err(format!("negative split sizes {v:?}"));
            }
            if t.shape().rank() == 0 {
                let s = v[0] as usize;
                if s == 0 {
                    return Err("a split size of 0".into());
                }
                if len.div_ceil(s) > MAX_ITEMS {
                    return Err(too_many(len.div_ceil(s)));
                }
                (0..len.div_ceil(s)).map(|k| s.min(len - k * s)).collect()
            } else {
                if v.iter().map(|&s| s as i128).sum::<i128>() != len as i128 {
                    return Err(format!("split sizes {v:?} do not add up to {len}"));
                }
                v.iter().map(|&s| s as usize).collect()
            }
        }
    };
    if sizes.len() > MAX_ITEMS {
        return Err(too_many(sizes.len()));
    }
    // keepdims=0 only when no split is given (every piece has length 1).
    let squeeze = !keep && input_name(node, 1).is_none();
    let mut items = Vec::new();
    let mut start = 0usize;
    for s in sizes {
        let attrs = Attrs::new()
            .with("axis", a)
            .with("start", start as i64)
            .with("len", s as i64);
        let mut v = cx.b.op1("narrow", &[x], attrs).map_err(|e| e.to_string())?;
        if squeeze {
            v =
                cx.b.op1("squeeze", &[v], Attrs::new().with("axes", vec![a]))
                    .map_err(|e| e.to_string())?;
        }
        items.push(Bound::Value(v));
        start += s;
    }
    Ok(vec![Out::Seq(items)])
}

/// `SequenceMap`: the body imported once per element (inlined), its
/// sequence inputs read element by element, its other inputs whole.
fn seq_map(cx: &mut Cx, node: &NodeProto) -> R {
    let body = node
        .attribute
        .iter()
        .find(|a| a.name() == "body")
        .and_then(|a| a.g.as_ref())
        .ok_or("SequenceMap without a body")?;
    let ins = node
        .input
        .iter()
        .map(|n| cx.bound(n))
        .collect::<Result<Vec<_>, _>>()?;
    let n = match ins.first() {
        Some(Bound::Seq(items)) => items.len(),
        _ => return Err("input 0 is not a sequence".into()),
    };
    for b in &ins {
        if let Bound::Seq(items) = b {
            if items.len() != n {
                return Err(format!(
                    "its sequences have {n} and {} elements",
                    items.len()
                ));
            }
        }
    }
    let id = cx.next_instance();
    let mut outs: Vec<Vec<Bound>> = vec![Vec::new(); body.output.len()];
    for i in 0..n {
        let binds = ins
            .iter()
            .map(|b| match b {
                Bound::Seq(items) => items[i].clone(),
                b => b.clone(),
            })
            .collect();
        let ys = cx.inline(body, &format!("seqmap{id}/{i}/"), binds)?;
        for (k, y) in ys.into_iter().enumerate() {
            outs[k].push(y);
        }
    }
    Ok(outs.into_iter().map(Out::Seq).collect())
}
