//! Bad models get typed errors that name what is wrong — every unmappable
//! node at once — and never a panic.

use prost::Message;
use rlx_onnx::proto::{
    tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use rlx_onnx::{import, ImportOptions, OnnxError};

fn input(name: &str, dims: &[tensor_shape_proto::dimension::Value]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1), // FLOAT
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|v| tensor_shape_proto::Dimension {
                            value: Some(v.clone()),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, name: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, out: &str) -> Vec<u8> {
    ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(21),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: inputs,
            output: vec![ValueInfoProto {
                name: Some(out.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

use tensor_shape_proto::dimension::Value::{DimParam, DimValue};

#[test]
fn every_unmappable_node_is_listed_at_once() {
    let bytes = model(
        vec![
            node("Relu", "r", &["x"], &["a"]),
            node("FancyOp", "f1", &["a"], &["b"]),
            node("Exp", "e", &["b"], &["c"]), // reads an unmapped value: not reported again
            node("OtherOp", "f2", &["a"], &["d"]),
        ],
        vec![input("x", &[DimValue(2), DimValue(3)])],
        "c",
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    let OnnxError::Unsupported(m) = &e else {
        panic!("{e}")
    };
    assert_eq!(m.len(), 2, "{e}");
    assert_eq!(
        (m[0].op_type.as_str(), m[0].node.as_str(), m[0].opset),
        ("FancyOp", "`f1`", 21)
    );
    assert!(m[0].what.contains("not supported"), "{e}");
    assert_eq!(m[1].op_type, "OtherOp");
    assert!(
        e.to_string().starts_with("2 node(s) cannot be imported"),
        "{e}"
    );
}

#[test]
fn a_symbolic_dimension_must_be_given_and_then_imports() {
    let bytes = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", &[DimParam("batch".into()), DimValue(3)])],
        "y",
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("symbolic dimension `batch`"), "{e}");
    let mut opts = ImportOptions::default();
    opts.dims.insert("batch".into(), 4);
    let m = import(&bytes, &opts).unwrap();
    assert_eq!(m.graph.input_types()[0].shape.dims(), &[4, 3]);
    assert_eq!(m.inputs, ["x"]);
}

#[test]
fn bytes_that_are_not_onnx_are_a_decode_error() {
    for bad in [
        &b"not a model"[..],
        &[0xff; 64][..],
        &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f][..],
    ] {
        match import(bad, &ImportOptions::default()) {
            Err(OnnxError::Decode(_)) | Err(OnnxError::Invalid(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    // A real model cut short at every length: an error, never a panic.
    let bytes = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", &[DimValue(2)])],
        "y",
    );
    for n in 0..bytes.len() {
        let _ = import(&bytes[..n], &ImportOptions::default());
    }
    assert!(import(&bytes, &ImportOptions::default()).is_ok());
}

#[test]
fn out_of_range_axes_and_bad_windows_are_errors_not_panics() {
    // Found by the `onnx` fuzz target: a Split of a scalar indexed an
    // empty shape.
    let split = model(
        vec![node("Split", "s", &["x"], &["y"])],
        vec![input("x", &[])],
        "y",
    );
    let e = import(&split, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("node `s` `Split`"), "{e}");
    // A 1-d input to MaxPool (no spatial axes) and a Flatten past the rank.
    let pool = model(
        vec![node("MaxPool", "p", &["x"], &["y"])],
        vec![input("x", &[DimValue(4)])],
        "y",
    );
    assert!(import(&pool, &ImportOptions::default()).is_err());
    let mut flat = node("Flatten", "f", &["x"], &["y"]);
    flat.attribute.push(rlx_onnx::proto::AttributeProto {
        name: Some("axis".into()),
        i: Some(9),
        r#type: Some(rlx_onnx::proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    });
    let flat = model(
        vec![flat],
        vec![input("x", &[DimValue(2), DimValue(3)])],
        "y",
    );
    let e = import(&flat, &ImportOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("axis 9 is out of range for rank 2"),
        "{e}"
    );
}

#[test]
fn attention_with_inputs_of_the_wrong_rank_is_an_error() {
    // Found by the `onnx` fuzz target: 2-d Q/K/V indexed a head axis they
    // do not have.
    let bytes = model(
        vec![node("Attention", "a", &["q", "k", "v"], &["y"])],
        vec![
            input("q", &[DimValue(2), DimValue(4)]),
            input("k", &[DimValue(2), DimValue(4)]),
            input("v", &[DimValue(2), DimValue(4)]),
        ],
        "y",
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("must be 3-d"), "{e}");
}

#[test]
fn cycles_and_dangling_names_are_invalid_models() {
    // A node reading its own output (a cycle) and a graph output nothing
    // defines: each names the value.
    let cyc = model(
        vec![node("Add", "loop", &["x", "y"], &["y"])],
        vec![input("x", &[DimValue(2)])],
        "y",
    );
    let e = import(&cyc, &ImportOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("`y` is used before it is defined"),
        "{e}"
    );
    let dangling = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", &[DimValue(2)])],
        "nowhere",
    );
    let e = import(&dangling, &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::Invalid(_)), "{e}");
    assert!(e.to_string().contains("`nowhere`"), "{e}");
}

#[test]
fn huge_declared_dims_are_a_limit_error_before_any_allocation() {
    let bytes = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", &[DimValue(1 << 40), DimValue(1 << 40)])],
        "y",
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
}

#[test]
fn wrong_dtypes_and_disagreeing_shapes_are_errors() {
    // MatMul of f32 by i64: a type error naming the op, not a panic.
    let mut ids = input("i", &[DimValue(3), DimValue(2)]);
    if let Some(type_proto::Value::TensorType(t)) =
        ids.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(7); // INT64
    }
    let bytes = model(
        vec![node("MatMul", "mm", &["x", "i"], &["y"])],
        vec![input("x", &[DimValue(2), DimValue(3)]), ids],
        "y",
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("`mm`") || e.to_string().contains("matmul"),
        "{e}"
    );
    // A whole shape that disagrees with a fixed dimension; an unnamed
    // dynamic one without a shape.
    let fixed = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", &[DimValue(2), DimValue(3)])],
        "y",
    );
    let mut opts = ImportOptions::default();
    opts.shapes.insert("x".into(), vec![2, 4]);
    let e = import(&fixed, &opts).unwrap_err();
    assert!(e.to_string().contains("dimension 1 is fixed at 3"), "{e}");
    let unnamed = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![input("x", &[DimValue(-1), DimValue(3)])],
        "y",
    );
    let e = import(&unnamed, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("dynamic and unnamed"), "{e}");
    opts.shapes.insert("x".into(), vec![5, 3]);
    let m = import(&unnamed, &opts).unwrap();
    assert_eq!(m.graph.input_types()[0].shape.dims(), &[5, 3]);
}

#[test]
fn a_loop_of_run_time_length_says_why() {
    // Loop whose trip count is a graph input: no static shape.
    let body = GraphProto {
        name: Some("body".into()),
        input: vec![
            input("it", &[]),
            input("c", &[]),
            input("v", &[DimValue(2)]),
        ],
        node: vec![
            node("Identity", "ci", &["c"], &["c2"]),
            node("Relu", "r", &["v"], &["v2"]),
        ],
        output: ["c2", "v2"]
            .iter()
            .map(|n| ValueInfoProto {
                name: Some(n.to_string()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let mut lp = node("Loop", "lp", &["m", "", "x"], &["y"]);
    lp.attribute.push(rlx_onnx::proto::AttributeProto {
        name: Some("body".into()),
        r#type: Some(5), // GRAPH
        g: Some(body),
        ..Default::default()
    });
    let bytes = model(
        vec![lp],
        vec![input("m", &[]), input("x", &[DimValue(2)])],
        "y",
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("`Loop`") && s.contains("must be known at import"),
        "{s}"
    );
}

#[test]
fn float8_values_reach_only_casts() {
    // A float8 input is its bits (u8); Relu would take them for integers,
    // so it is refused with the reason, while a Cast decodes them.
    let mut x = input("x", &[DimValue(4)]);
    if let Some(type_proto::Value::TensorType(t)) = x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(17); // FLOAT8E4M3FN
    }
    let relu = model(
        vec![node("Relu", "r", &["x"], &["y"])],
        vec![x.clone()],
        "y",
    );
    let e = import(&relu, &ImportOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("float8 tensor") && e.to_string().contains("Cast"),
        "{e}"
    );
    let mut cast = node("Cast", "c", &["x"], &["y"]);
    cast.attribute.push(rlx_onnx::proto::AttributeProto {
        name: Some("to".into()),
        r#type: Some(2), // INT
        i: Some(1),      // FLOAT
        ..Default::default()
    });
    let m = import(&model(vec![cast], vec![x], "y"), &ImportOptions::default()).unwrap();
    assert_eq!(m.graph.input_types()[0].dtype, rlx_ir::DType::U8);
    assert_eq!(m.graph.output_types()[0].dtype, rlx_ir::DType::F32);
}

#[test]
fn value_sized_ops_need_their_inputs_at_import_and_then_compute_there() {
    // NonZero of a run-time input has no static shape: the error names it.
    let bytes = model(
        vec![node("NonZero", "nz", &["x"], &["y"])],
        vec![input("x", &[DimValue(2), DimValue(3)])],
        "y",
    );
    let s = import(&bytes, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        s.contains("`NonZero`") && s.contains("(`x`) must be known at import"),
        "{s}"
    );
    // Bound at import, it is a constant of the exact size.
    let mut opts = ImportOptions::default();
    let x = rlx_ir::HostTensor::from_f64(
        rlx_ir::DType::F32,
        vec![2, 3],
        vec![0.0, 2.0, 0.0, -1.0, 0.0, 5.0],
    )
    .unwrap();
    opts.constants.insert("x".into(), x);
    let m = import(&bytes, &opts).unwrap();
    let y = rlx_ref::run_graph(&m.graph, &[]).unwrap();
    assert_eq!(y[0].shape().dims(), [2, 3]);
    // numpy.nonzero: rows [0, 1, 1], columns [1, 0, 2].
    assert_eq!(y[0].to_vec::<i64>().unwrap(), [0, 1, 1, 1, 0, 2]);
}

#[test]
fn a_huge_depth_to_space_blocksize_is_an_error_not_an_overflow() {
    // Found by the `rten` fuzz target: blocksize² overflowed i64.
    let mut d2s = node("DepthToSpace", "d2s", &["x"], &["y"]);
    d2s.attribute.push(rlx_onnx::proto::AttributeProto {
        name: Some("blocksize".into()),
        r#type: Some(2), // INT
        i: Some(1 << 40),
        ..Default::default()
    });
    let bytes = model(
        vec![d2s],
        vec![input(
            "x",
            &[DimValue(1), DimValue(4), DimValue(2), DimValue(2)],
        )],
        "y",
    );
    let s = import(&bytes, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(s.contains("blocksize"), "{s}");
}

#[test]
fn a_layer_norm_axis_outside_the_rank_is_an_error_not_an_allocation() {
    // Found by the `rten` fuzz target: axis −2³¹ made a list of 2³¹ axes.
    let mut ln = node("LayerNormalization", "ln", &["x", "g"], &["y"]);
    ln.attribute.push(rlx_onnx::proto::AttributeProto {
        name: Some("axis".into()),
        r#type: Some(2), // INT
        i: Some(-(1 << 31)),
        ..Default::default()
    });
    let bytes = model(
        vec![ln],
        vec![
            input("x", &[DimValue(2), DimValue(3)]),
            input("g", &[DimValue(3)]),
        ],
        "y",
    );
    let s = import(&bytes, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(s.contains("out of range for rank 2"), "{s}");
}

#[test]
fn a_sequence_longer_than_the_import_limit_is_an_error() {
    // Found by the `rten` fuzz target: a SplitToSequence into millions of
    // pieces built a graph node per piece until memory ran out.
    let bytes = model(
        vec![node("SplitToSequence", "s", &["x"], &["y"])],
        vec![input("x", &[DimValue(5000)])],
        "y",
    );
    let s = import(&bytes, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(s.contains("at most 4096"), "{s}");
}
