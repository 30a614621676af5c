//! # rlx-runtime
//!
//! The contract between the compiler and the backends: a small
//! [`Backend`] trait (claims, compile LIR → [`Executable`], run), the
//! [`Device`] names, and [`legalize`], which decides per node whether it
//! runs natively, through its decomposition (common-IR), or not at all — in
//! which case compilation fails with a [`DispatchError`] that lists every
//! unsupported node at once. No silent fallback.
#![forbid(unsafe_code)]

mod backend;
mod legalize;

pub use backend::{Backend, Claims, Device, Executable, RuntimeError};
pub use legalize::{
    legalize, DispatchError, DispatchPath, DispatchReport, NodeDispatch, Unsupported,
};
