//! The value files of ONNX's `onnx-data.proto` that hold more than one
//! tensor: a `SequenceProto` (the backend tests' sequence inputs and
//! outputs) and an `OptionalProto`. Written by hand with prost's derive
//! (the generated `proto` module holds `onnx.proto` only); maps are not
//! read.

use crate::proto::TensorProto;

/// A list of values of one kind (`elem_type`, see [`sequence_proto`]).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SequenceProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub elem_type: Option<i32>,
    #[prost(message, repeated, tag = "3")]
    pub tensor_values: Vec<TensorProto>,
    #[prost(message, repeated, tag = "5")]
    pub sequence_values: Vec<SequenceProto>,
    #[prost(message, repeated, tag = "7")]
    pub optional_values: Vec<OptionalProto>,
}

/// `SequenceProto.elem_type` / `OptionalProto.elem_type` values.
pub mod sequence_proto {
    pub const UNDEFINED: i32 = 0;
    pub const TENSOR: i32 = 1;
    pub const SPARSE_TENSOR: i32 = 2;
    pub const SEQUENCE: i32 = 3;
    pub const MAP: i32 = 4;
    pub const OPTIONAL: i32 = 5;
}

/// A value that may be missing (`elem_type` UNDEFINED, nothing set).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct OptionalProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub elem_type: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub tensor_value: Option<TensorProto>,
    #[prost(message, optional, tag = "5")]
    pub sequence_value: Option<SequenceProto>,
    #[prost(message, optional, boxed, tag = "7")]
    pub optional_value: Option<Box<OptionalProto>>,
}
