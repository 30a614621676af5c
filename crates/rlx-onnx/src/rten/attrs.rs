//! RTen operator nodes back to ONNX `NodeProto`s: the operator type (RTen's
//! enum, in schema order) and its attribute table (one per union member)
//! as the ONNX attributes `rten-convert` read them from. Attributes RTen
//! moved to inputs (Split's sizes, Squeeze axes, Clip bounds) are inputs
//! already; absent fields take the schema's defaults (zero, but for
//! ConvTranspose's auto_pad and group, STFT's onesided, SplitToSequence's
//! keepdims), as RTen reads them.
//! RTen has no bool: the inputs ONNX types bool (logical ops, Where's
//! condition) get a Cast to BOOL in front.

use super::fb::{Table, R};
use crate::proto::{attribute_proto::AttributeType as A, AttributeProto, NodeProto, TensorProto};

/// RTen's `OperatorType` enum, by value.
const OPS: &[&str] = &[
    "Add",
    "ArgMin",
    "ArgMax",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Cos",
    "CumSum",
    "Div",
    "Equal",
    "Erf",
    "Expand",
    "Flatten",
    "Gather",
    "Gemm",
    "GlobalAveragePool",
    "Greater",
    "GRU",
    "Identity",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "LSTM",
    "MatMul",
    "MaxPool",
    "Mod",
    "Mul",
    "Pad",
    "Pow",
    "Range",
    "ReduceMean",
    "ReduceL2",
    "Relu",
    "Reshape",
    "Resize",
    "Shape",
    "Sigmoid",
    "Sin",
    "Slice",
    "Split",
    "Sqrt",
    "Squeeze",
    "Softmax",
    "Sub",
    "Tanh",
    "Transpose",
    "Unsqueeze",
    "Where",
    "ReduceProd",
    "ReduceSum",
    "ReduceMin",
    "ReduceMax",
    "NonZero",
    "ScatterElements",
    "Tile",
    "Not",
    "Abs",
    "Max",
    "Mean",
    "Min",
    "Sum",
    "OneHot",
    "Round",
    "Floor",
    "Ceil",
    "Reciprocal",
    "TopK",
    "Neg",
    "Exp",
    "GreaterOrEqual",
    "Size",
    "Tan",
    "Acos",
    "Asin",
    "Atan",
    "InstanceNormalization",
    "HardSigmoid",
    "HardSwish",
    "And",
    "Or",
    "Xor",
    "Trilu",
    "ScatterND",
    "NonMaxSuppression",
    "Sign",
    "GatherElements",
    "LayerNormalization",
    "ReduceSumSquare",
    "RandomUniform",
    "Elu",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
    "Softplus",
    "GatherND",
    "Gelu",
    "Einsum",
    "If",
    "DequantizeLinear",
    "QuantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "DepthToSpace",
    "ConvInteger",
    "CastLike",
    "Dropout",
    "EyeLike",
    "IsNaN",
    "IsInf",
    "Loop",
    "SequenceEmpty",
    "SequenceAt",
    "SequenceInsert",
    "ConcatFromSequence",
    "SplitToSequence",
    "SequenceLength",
    "SequenceConstruct",
    "SequenceErase",
    "GridSample",
    "PRelu",
    "STFT",
];

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(A::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}
fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(A::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}
fn ints(name: &str, v: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(A::Ints as i32),
        ints: v,
        ..Default::default()
    }
}
fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(A::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// An ONNX enum-valued string attribute from RTen's enum value.
fn pick(name: &str, v: Option<u8>, table: &[&str]) -> R<AttributeProto> {
    let i = v.unwrap_or(0) as usize;
    table
        .get(i)
        .map(|s| string(name, s))
        .ok_or_else(|| format!("attribute `{name}`: unknown value {i}"))
}

fn u32s(t: &Table, slot: usize) -> R<Option<Vec<i64>>> {
    Ok(t.vec_u32(slot)?
        .map(|v| v.into_iter().map(i64::from).collect()))
}

/// Strides or dilations, left out when all ones (ONNX's default for any
/// rank: rten-convert writes `[1, 1]` for a 1-D op too).
fn steps(out: &mut Vec<AttributeProto>, t: &Table, slot: usize, name: &str) -> R<()> {
    if let Some(v) = u32s(t, slot)?.filter(|v| v.iter().any(|&x| x != 1)) {
        out.push(ints(name, v));
    }
    Ok(())
}

/// `auto_pad` and `pads` (RTen: AutoPad Same = 0, NotSet = 1; `absent`
/// is the table's default).
fn padding(
    out: &mut Vec<AttributeProto>,
    t: &Table,
    auto: usize,
    pads: usize,
    absent: u8,
) -> R<()> {
    if t.u8(auto)?.unwrap_or(absent) == 0 {
        out.push(string("auto_pad", "SAME_UPPER"));
    } else if let Some(p) = u32s(t, pads)?.filter(|p| p.iter().any(|&x| x != 0)) {
        // All-zero pads are left out: rten-convert writes four for 1-D too.
        out.push(ints("pads", p));
    }
    Ok(())
}

/// The ONNX element type of RTen's `DataType`.
fn dtype(d: Option<u8>) -> R<i64> {
    super::onnx_dtype(d.unwrap_or(1)).map(i64::from)
}

/// The inputs of `op` that ONNX types bool, which RTen holds as int32:
/// they get a Cast to BOOL in front.
fn bool_inputs(op: &str, n: usize) -> std::ops::Range<usize> {
    match op {
        "And" | "Or" | "Xor" | "Not" => 0..n,
        "Where" => 0..1.min(n),
        _ => 0..0,
    }
}

/// One operator node (after any Casts its bool inputs need).
pub(super) fn operator(
    op: &Table,
    name: &str,
    name_of: &dyn Fn(i64) -> R<String>,
) -> R<Vec<NodeProto>> {
    let ty = op.u8(0)?.unwrap_or(0) as usize;
    let op_type = match OPS.get(ty) {
        Some(s) => s.to_string(),
        // Reported by the importer with every other unmappable node.
        None => format!("RtenOperator{ty}"),
    };
    let ids = |slot: usize| -> R<Vec<String>> {
        op.vec_i32(slot)?
            .unwrap_or_default()
            .into_iter()
            .map(|i| name_of(i as i64))
            .collect()
    };
    let mut attrs = Vec::new();
    if let Some(t) = op.table(2)? {
        convert(&mut attrs, &op_type, op.u8(1)?.unwrap_or(0), &t)?;
    }
    let mut input = ids(3)?;
    let mut nodes = Vec::new();
    for k in bool_inputs(&op_type, input.len()) {
        if input[k].is_empty() {
            continue;
        }
        let cast = format!("{name}/bool{k}");
        nodes.push(NodeProto {
            name: Some(cast.clone()),
            op_type: Some("Cast".into()),
            input: vec![input[k].clone()],
            output: vec![cast.clone()],
            attribute: vec![int("to", 9)], // BOOL
            ..Default::default()
        });
        input[k] = cast;
    }
    nodes.push(NodeProto {
        name: Some(name.to_string()),
        op_type: Some(op_type),
        input,
        output: ids(4)?,
        attribute: attrs,
        ..Default::default()
    });
    Ok(nodes)
}

/// The attributes of attribute table `kind` (RTen's `OperatorAttrs`).
fn convert(out: &mut Vec<AttributeProto>, op: &str, kind: u8, t: &Table) -> R<()> {
    let axis = |out: &mut Vec<AttributeProto>| -> R<()> {
        out.push(int("axis", t.i32(0)?.unwrap_or(0) as i64));
        Ok(())
    };
    match kind {
        0 => {}
        // ArgMaxAttrs
        1 => {
            axis(out)?;
            out.push(int("keepdims", t.bool(1)? as i64));
        }
        // AveragePoolAttrs
        2 => {
            out.push(ints("kernel_shape", u32s(t, 0)?.unwrap_or_default()));
            padding(out, t, 1, 2, 0)?;
            steps(out, t, 3, "strides")?;
            out.push(int("count_include_pad", t.bool(4)? as i64));
            out.push(int("ceil_mode", t.bool(5)? as i64));
        }
        // BatchNormalizationAttrs (also InstanceNormalization)
        3 => out.push(float("epsilon", t.f32(0)?.unwrap_or(0.0))),
        // CastAttrs
        4 => out.push(int("to", dtype(t.u8(0)?)?)),
        // ConcatAttrs
        5 => axis(out)?,
        // ConstantOfShapeAttrs: a union of IntScalar / FloatScalar
        6 => {
            let v = t.table(1)?.ok_or("ConstantOfShape without a value")?;
            let tensor = match t.u8(0)?.unwrap_or(0) {
                1 => TensorProto {
                    dims: vec![1],
                    data_type: Some(7), // INT64 (RTen's int32, see onnx_dtype)
                    int64_data: vec![v.i32(0)?.unwrap_or(0) as i64],
                    ..Default::default()
                },
                2 => TensorProto {
                    dims: vec![1],
                    data_type: Some(1),
                    float_data: vec![v.f32(0)?.unwrap_or(0.0)],
                    ..Default::default()
                },
                k => return Err(format!("ConstantOfShape: unknown value kind {k}")),
            };
            out.push(AttributeProto {
                name: Some("value".into()),
                r#type: Some(A::Tensor as i32),
                t: Some(tensor),
                ..Default::default()
            });
        }
        // ConvAttrs
        7 => {
            padding(out, t, 0, 1, 0)?;
            out.push(int("group", t.u32(2)?.unwrap_or(1).max(1) as i64));
            steps(out, t, 3, "strides")?;
            steps(out, t, 4, "dilations")?;
        }
        // ConvTransposeAttrs
        8 => {
            steps(out, t, 0, "strides")?;
            padding(out, t, 1, 2, 1)?;
            out.push(int("group", t.u32(3)?.unwrap_or(1) as i64));
            if let Some(p) = u32s(t, 4)? {
                out.push(ints("output_padding", p));
            }
        }
        // FlattenAttrs, GatherAttrs, OneHotAttrs, DequantizeLinearAttrs
        9 | 10 | 24 | 41 => axis(out)?,
        // GemmAttrs
        11 => {
            out.push(float("alpha", t.f32(0)?.unwrap_or(0.0)));
            out.push(float("beta", t.f32(1)?.unwrap_or(0.0)));
            out.push(int("transA", t.bool(2)? as i64));
            out.push(int("transB", t.bool(3)? as i64));
        }
        // GRUAttrs, LSTMAttrs
        12 | 14 => {
            out.push(pick(
                "direction",
                t.u8(0)?,
                &["forward", "reverse", "bidirectional"],
            )?);
            out.push(int("hidden_size", t.u32(1)?.unwrap_or(0) as i64));
            if kind == 12 {
                out.push(int("linear_before_reset", t.bool(2)? as i64));
            }
        }
        // LeakyReluAttrs, EluAttrs
        13 | 32 => out.push(float("alpha", t.f32(0)?.unwrap_or(0.0))),
        // MaxPoolAttrs
        15 => {
            out.push(ints("kernel_shape", u32s(t, 0)?.unwrap_or_default()));
            padding(out, t, 1, 2, 0)?;
            steps(out, t, 3, "strides")?;
            out.push(int("ceil_mode", t.bool(4)? as i64));
        }
        // ReduceMeanAttrs (every reduction)
        16 => {
            if let Some(a) = t.vec_i32(0)? {
                out.push(ints("axes", a.into_iter().map(i64::from).collect()));
            }
            out.push(int("keepdims", t.bool(1)? as i64));
        }
        // ReshapeAttrs
        17 => out.push(int("allowzero", t.bool(0)? as i64)),
        // ResizeAttrs
        18 => {
            out.push(pick("mode", t.u8(0)?, &["nearest", "linear"])?);
            out.push(pick(
                "coordinate_transformation_mode",
                t.u8(1)?,
                &[
                    "half_pixel",
                    "asymmetric",
                    "align_corners",
                    "pytorch_half_pixel",
                ],
            )?);
            out.push(pick(
                "nearest_mode",
                t.u8(2)?,
                &["floor", "ceil", "round_prefer_floor", "round_prefer_ceil"],
            )?);
        }
        // SplitAttrs
        19 => {
            axis(out)?;
            if let Some(n) = t.i32(1)? {
                out.push(int("num_outputs", n as i64));
            }
        }
        // SoftmaxAttrs (also LogSoftmax), GatherNDAttrs (batch_dims)
        20 => axis(out)?,
        36 => out.push(int("batch_dims", t.i32(0)?.unwrap_or(0) as i64)),
        // TransposeAttrs
        21 => {
            if let Some(p) = u32s(t, 0)? {
                out.push(ints("perm", p));
            }
        }
        // ModAttrs
        22 => out.push(int("fmod", t.bool(0)? as i64)),
        // ScatterElementsAttrs, ScatterNDAttrs
        23 | 28 => {
            let slot = if kind == 23 {
                axis(out)?;
                1
            } else {
                0
            };
            out.push(pick(
                "reduction",
                t.u8(slot)?,
                &["none", "add", "mul", "min", "max"],
            )?);
        }
        // TopKAttrs
        25 => {
            axis(out)?;
            out.push(int("largest", t.bool(1)? as i64));
            out.push(int("sorted", t.bool(2)? as i64));
        }
        // HardSigmoidAttrs
        26 => {
            out.push(float("alpha", t.f32(0)?.unwrap_or(0.0)));
            out.push(float("beta", t.f32(1)?.unwrap_or(0.0)));
        }
        // TriluAttrs
        27 => out.push(int("upper", t.bool(0)? as i64)),
        // NonMaxSuppressionAttrs
        29 => out.push(int("center_point_box", t.u8(0)?.unwrap_or(0) as i64)),
        // LayerNormalizationAttrs
        30 => {
            axis(out)?;
            out.push(float("epsilon", t.f32(1)?.unwrap_or(0.0)));
        }
        // GeluAttrs
        37 => out.push(pick("approximate", t.u8(0)?, &["none", "tanh"])?),
        // EinsumAttrs
        38 => out.push(string("equation", t.str(0)?.unwrap_or(""))),
        // PadAttrs
        40 => out.push(pick(
            "mode",
            t.u8(0)?,
            &["constant", "reflect", "edge", "wrap"],
        )?),
        // QuantizeLinearAttrs
        42 => {
            axis(out)?;
            if let Some(d) = t.u8(1)? {
                out.push(int("output_dtype", dtype(Some(d))?));
            }
        }
        // DepthToSpaceAttrs
        43 => {
            out.push(pick("mode", t.u8(0)?, &["DCR", "CRD"])?);
            out.push(int("blocksize", t.u32(1)?.unwrap_or(0) as i64));
        }
        // CastLikeAttrs, IsInfAttrs: nothing to carry
        44 | 48 => {}
        // ShapeAttrs
        45 => {
            if let Some(s) = t.i32(0)? {
                out.push(int("start", s as i64));
            }
            if let Some(e) = t.i32(1)? {
                out.push(int("end", e as i64));
            }
        }
        // DropoutAttrs
        46 => {
            if let Some(s) = t.i32(0)? {
                out.push(int("seed", s as i64));
            }
        }
        // EyeLikeAttrs
        47 => {
            if let Some(d) = t.u8(0)? {
                out.push(int("dtype", dtype(Some(d))?));
            }
            out.push(int("k", t.i32(1)?.unwrap_or(0) as i64));
        }
        // ConcatFromSequenceAttrs, SplitToSequenceAttrs
        51 | 52 => {
            axis(out)?;
            // SplitToSequence's keepdims defaults to true in RTen's schema.
            let (name, default) = if kind == 51 {
                ("new_axis", false)
            } else {
                ("keepdims", true)
            };
            out.push(int(name, t.bool_or(1, default)? as i64));
        }
        // GridSampleAttrs
        53 => out.push(int("align_corners", t.bool(0)? as i64)),
        // STFTAttrs
        // STFTAttrs (onesided defaults to true in RTen's schema)
        54 => out.push(int("onesided", t.bool_or(0, true)? as i64)),
        k => {
            return Err(format!(
                "operator `{op}`: attribute table {k} is not read yet (random ops, control flow)"
            ))
        }
    }
    Ok(())
}
