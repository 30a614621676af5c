//! # rlx-onnx
//!
//! Bring your own model: ONNX files imported onto the rlx IR, then
//! compiled for any backend like a graph written by hand. The protobuf
//! types are generated from `onnx.proto` (ONNX 1.22.0) by `gen/` and
//! committed, so building needs no `protoc`. Shapes are static: symbolic
//! dimensions are bound at import ([`ImportOptions::dims`]), and inputs an
//! op must know at import (a `Reshape` shape, `Unsqueeze` axes) are either
//! initializers or bound with [`ImportOptions::constants`].
//!
//! Every node the importer cannot map — an op it lacks, an attribute
//! value, an input that must be known — is listed in one
//! [`OnnxError::Unsupported`], never a panic.
//!
//! Tensors saved as external data (files beside the model) are read
//! through [`ImportOptions::external`]: a resolver natively, the fetched
//! files in a page.
//!
//! ```no_run
//! let bytes = std::fs::read("model.onnx").unwrap();
//! let m = rlx_onnx::import(&bytes, &Default::default()).unwrap();
//! println!("{}", rlx_ir::text::print(&m.graph));
//! ```

mod control;
pub mod data;
mod describe;
mod error;
mod external;
mod import;
pub mod ops;
#[rustfmt::skip]
pub mod proto;
pub mod rten;
mod seq;
pub mod tensor;

pub use describe::{describe, Description};
pub use error::{Missing, OnnxError};
pub use external::{
    files as external_files, locations as external_locations, ExternalData, Resolve,
};
pub use import::{import, import_model, ImportOptions, Imported};
pub use rten::{import_rten, is_rten};
