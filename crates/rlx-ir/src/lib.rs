//! # rlx-ir
//!
//! The intermediate representations of rlx:
//! * [`DType`], [`Shape`], [`TensorType`] and [`HostTensor`];
//! * the op set ([`OpDef`], one definition per op, in [`ops`]), with a
//!   registry that downstream crates extend through [`register_op`];
//! * MIR ([`Graph`], [`GraphBuilder`]) with its verifier, text form
//!   ([`text`]) and JSON form;
//! * HIR model blocks ([`hir`]) that lower to MIR;
//! * LIR ([`lir`]): the scheduled program a backend executes.
#![forbid(unsafe_code)]

pub mod attr;
pub mod decompose;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod hir;
pub mod limits;
pub mod lir;
pub mod literal;
pub mod nesting;
pub mod op;
pub mod ops;
pub mod shape;
pub mod tensor;
pub mod text;

pub use attr::{Attr, AttrKind, Attrs};
pub use dtype::DType;
pub use error::IrError;
pub use graph::{Graph, GraphBuilder, Node, Value, ValueDef, ValueId};
pub use limits::{limits, set_limits, LimitError, Limits};
pub use op::{
    all_ops, lookup, register_op, Arity, Category, Grad, InPlace, InferCx, Lowering, Op, OpDef,
};
pub use shape::{Shape, TensorType};
pub use tensor::{Element, HostTensor, TensorData};
