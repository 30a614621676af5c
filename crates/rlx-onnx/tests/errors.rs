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
