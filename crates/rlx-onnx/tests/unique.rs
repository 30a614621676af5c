//! `Unique` (run at import) compares values exactly in their own dtype:
//! 2⁶⁰ and 2⁶⁰ + 1 are one f64 but two u64s. Expected: NumPy's
//! `np.unique(x, return_index=True, return_inverse=True,
//! return_counts=True)` on the same values.

use prost::Message;
use rlx_onnx::proto::{
    tensor_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    ValueInfoProto,
};
use rlx_onnx::{import, ImportOptions};

#[test]
fn unique_keeps_u64_values_that_f64_would_merge() {
    let x: [u64; 4] = [(1 << 60) + 1, 1 << 60, (1 << 60) + 1, 3];
    let out = |n: &str| ValueInfoProto {
        name: Some(n.into()),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(21),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            initializer: vec![TensorProto {
                name: Some("x".into()),
                dims: vec![4],
                data_type: Some(tensor_proto::DataType::Uint64 as i32),
                uint64_data: x.to_vec(),
                ..Default::default()
            }],
            node: vec![NodeProto {
                op_type: Some("Unique".into()),
                input: vec!["x".into()],
                output: ["y", "i", "inv", "c"].map(String::from).to_vec(),
                ..Default::default()
            }],
            output: ["y", "i", "inv", "c"].map(out).to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = import(&model.encode_to_vec(), &ImportOptions::default()).unwrap();
    let r = rlx_ref::run_graph(&m.graph, &[]).unwrap();
    assert_eq!(r[0].to_vec::<u64>().unwrap(), [3, 1 << 60, (1 << 60) + 1]);
    assert_eq!(r[1].to_vec::<i64>().unwrap(), [3, 1, 0]);
    assert_eq!(r[2].to_vec::<i64>().unwrap(), [2, 1, 2, 0]);
    assert_eq!(r[3].to_vec::<i64>().unwrap(), [1, 1, 2]);
}
