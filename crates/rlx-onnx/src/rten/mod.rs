//! The `.rten` model format (RTen's; `rten-convert` on PyPI makes it from
//! ONNX), read into an ONNX `ModelProto` and imported through the same op
//! mapping as ONNX ([`crate::import_model`]).
//!
//! A file is a 32-byte header (`RTEN`, version 2, the offset and length of
//! the FlatBuffers model, the offset of the tensor data), the model (a
//! graph of nodes: values, constants, operators — each operator's inputs
//! and outputs are node indices, its attributes a per-op table) and the
//! tensor data (large constants, 64-byte aligned). RTen keeps int64 values
//! as int32 and has four element types (f32, i32, i8, u8) — its int32 reads
//! back as ONNX's INT64 (shapes and indices are int64 there); each operator
//! type and attribute table maps back to the ONNX op it was made from
//! (`attrs.rs`). Version-1 files (no header) and sub-graphs (If / Loop
//! bodies) are refused with that reason.

mod attrs;
mod fb;

use crate::import::{import_model, ImportOptions, Imported};
use crate::proto::{
    tensor_shape_proto, type_proto, GraphProto, ModelProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use crate::OnnxError;
use fb::Table;

/// The ONNX opset the converted graph is read as (RTen's ops follow
/// ONNX's current definitions: Split's `num_outputs`, axes as inputs).
const OPSET: i64 = 21;

/// Whether `bytes` look like a `.rten` file (its magic).
pub fn is_rten(bytes: &[u8]) -> bool {
    bytes.starts_with(b"RTEN")
}

/// Import a `.rten` model: converted to ONNX, then [`import_model`].
pub fn import_rten(bytes: &[u8], opts: &ImportOptions) -> Result<Imported, OnnxError> {
    let limits = rlx_ir::limits::limits();
    limits
        .check_file_bytes("the .rten model", bytes.len() as u64)
        .map_err(|e| OnnxError::Ir(e.into()))?;
    import_model(&to_onnx(bytes)?, opts)
}

/// A `.rten` model as the ONNX model it was converted from.
pub fn to_onnx(bytes: &[u8]) -> Result<ModelProto, OnnxError> {
    let bad = |m: String| OnnxError::Decode(format!(".rten: {m}"));
    if !is_rten(bytes) {
        return Err(bad(
            "no RTEN header (a version-1 file, or not an .rten model); re-convert it with \
             rten-convert ≥ 0.11"
                .into(),
        ));
    }
    let u32le = |p: usize| fb::u32_at(bytes, p).map_err(&bad);
    let u64le = |p: usize| -> Result<usize, OnnxError> {
        let lo = u32le(p)? as u64;
        let hi = u32le(p + 4)? as u64;
        usize::try_from(lo | hi << 32).map_err(|_| bad("an offset does not fit memory".into()))
    };
    let version = u32le(4)?;
    if version != 2 {
        return Err(bad(format!(
            "format version {version} (rlx reads version 2)"
        )));
    }
    let (model_at, model_len, data_at) = (u64le(8)?, u64le(16)?, u64le(24)?);
    let model = model_at
        .checked_add(model_len)
        .and_then(|end| bytes.get(model_at..end))
        .ok_or_else(|| {
            bad(format!(
                "model data {model_at}+{model_len} is past the end of the file"
            ))
        })?;
    let data = bytes.get(data_at..).ok_or_else(|| {
        bad(format!(
            "tensor data at {data_at} is past the end of the file"
        ))
    })?;
    let root = Table::root(model).map_err(&bad)?;
    let graph = root
        .table(1)
        .map_err(&bad)?
        .ok_or_else(|| bad("the model has no graph".into()))?;
    let graph = convert_graph(graph, data).map_err(&bad)?;
    Ok(ModelProto {
        ir_version: Some(10),
        producer_name: Some("rten (read by rlx)".into()),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(OPSET),
        }],
        graph: Some(graph),
        ..Default::default()
    })
}

/// The ONNX element type of an RTen `DataType` / `ConstantDataType`
/// (Int32, Float, Int8, UInt8). RTen narrowed ONNX's int64 (shapes,
/// indices, axes) to int32, so its integers read back as INT64: shape
/// arithmetic then meets the int64 of `Shape`, `ArgMax`, … as in the
/// ONNX model (the values are exact either way).
fn onnx_dtype(d: u8) -> Result<i32, String> {
    Ok(match d {
        0 => 7, // INT64
        1 => 1, // FLOAT
        2 => 3, // INT8
        3 => 2, // UINT8
        _ => return Err(format!("unknown element type {d}")),
    })
}

fn convert_graph(g: Table, data: &[u8]) -> fb::R<GraphProto> {
    let nodes = g.vec_tables(0)?;
    // Every node's name: its own, or one made from its index.
    let names: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            Ok(match n.str(0)? {
                Some(s) if !s.is_empty() => s.to_string(),
                _ => format!("rten_node_{i}"),
            })
        })
        .collect::<fb::R<_>>()?;
    let name_of = |i: i64| -> fb::R<String> {
        if i < 0 {
            return Ok(String::new()); // an omitted optional input
        }
        names.get(i as usize).cloned().ok_or_else(|| {
            format!(
                "node index {i} is outside the graph's {} nodes",
                names.len()
            )
        })
    };
    if g.has(3)? {
        return Err("graphs with captures (If / Loop bodies) are not supported".into());
    }
    let mut out = GraphProto {
        name: Some("rten".into()),
        ..Default::default()
    };
    let mut values = std::collections::HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let kind = n.u8(1)?.unwrap_or(0);
        let Some(body) = n.table(2)? else { continue };
        match kind {
            1 => out
                .node
                .extend(attrs::operator(&body, &names[i], &name_of)?),
            2 => out.initializer.push(constant(&body, &names[i], data)?),
            3 => {
                values.insert(i, value_info(&body, &names[i])?);
            }
            k => return Err(format!("node {i} has an unknown kind {k}")),
        }
    }
    let io = |slot: usize| -> fb::R<Vec<ValueInfoProto>> {
        g.vec_u32(slot)?
            .unwrap_or_default()
            .into_iter()
            .map(|i| {
                let name = name_of(i as i64)?;
                Ok(values
                    .get(&(i as usize))
                    .cloned()
                    .unwrap_or(ValueInfoProto {
                        name: Some(name),
                        ..Default::default()
                    }))
            })
            .collect()
    };
    out.input = io(1)?;
    out.output = io(2)?;
    Ok(out)
}

/// A value node: its shape (fixed or named dimensions) and element type.
fn value_info(v: &Table, name: &str) -> fb::R<ValueInfoProto> {
    use tensor_shape_proto::dimension::Value as D;
    let shape = match v.has(0)? {
        false => None,
        true => Some(TensorShapeProto {
            dim: v
                .vec_tables(0)?
                .iter()
                .map(|d| {
                    let value = match d.str(1)? {
                        Some(s) => D::DimParam(s.to_string()),
                        None => D::DimValue(d.u32(0)?.unwrap_or(0) as i64),
                    };
                    Ok(tensor_shape_proto::Dimension {
                        value: Some(value),
                        ..Default::default()
                    })
                })
                .collect::<fb::R<_>>()?,
        }),
    };
    let elem = v.u8(1)?.map(onnx_dtype).transpose()?.unwrap_or(1);
    Ok(ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A constant node as an initializer: inline data (a union of typed
/// vectors) or bytes in the tensor data segment.
fn constant(c: &Table, name: &str, data: &[u8]) -> fb::R<TensorProto> {
    let shape: Vec<i64> = c
        .vec_u32(0)?
        .unwrap_or_default()
        .into_iter()
        .map(i64::from)
        .collect();
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d as usize))
        .ok_or("a constant's element count overflows")?;
    let dtype = c.u16(3)?.unwrap_or(1) as u8;
    let elem = onnx_dtype(dtype)?;
    let size = if matches!(dtype, 2 | 3) { 1 } else { 4 };
    let raw: Vec<u8> = if let Some(off) = c.u64(4)? {
        let off = usize::try_from(off).map_err(|_| "a data offset does not fit memory")?;
        let len = numel
            .checked_mul(size)
            .ok_or("a constant's size overflows")?;
        off.checked_add(len)
            .and_then(|end| data.get(off..end))
            .ok_or_else(|| {
                format!("constant `{name}`: {len} bytes at {off} are past the tensor data")
            })?
            .to_vec()
    } else {
        let inline = c
            .table(2)?
            .ok_or_else(|| format!("constant `{name}` has no data"))?;
        match c.u8(1)?.unwrap_or(0) {
            1 => le(inline.vec_f32(0)?, f32::to_le_bytes),
            2 => le(inline.vec_i32(0)?, i32::to_le_bytes),
            3 => le(inline.vec_i8(0)?, |x: i8| [x as u8]),
            4 => inline.vec_u8(0)?.unwrap_or_default(),
            k => return Err(format!("constant `{name}`: unknown inline data kind {k}")),
        }
    };
    if numel.checked_mul(size) != Some(raw.len()) {
        return Err(format!(
            "constant `{name}`: {} bytes for {numel} elements of {size} bytes",
            raw.len()
        ));
    }
    // int32 elements widen to the INT64 they stand for.
    let raw = if dtype == 0 {
        raw.chunks_exact(4)
            .flat_map(|c| (i32::from_le_bytes(c.try_into().unwrap()) as i64).to_le_bytes())
            .collect()
    } else {
        raw
    };
    Ok(TensorProto {
        name: Some(name.to_string()),
        dims: shape,
        data_type: Some(elem),
        raw_data: Some(raw),
        ..Default::default()
    })
}

fn le<T: Copy, const N: usize>(v: Option<Vec<T>>, f: fn(T) -> [u8; N]) -> Vec<u8> {
    v.unwrap_or_default().into_iter().flat_map(f).collect()
}
