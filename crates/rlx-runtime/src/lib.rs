//! # rlx-runtime
//!
//! The contract between the compiler and the backends: a small
//! [`Backend`] trait (claims, compile LIR → [`Executable`], upload,
//! download), [`Device`] names, the backend registry, and [`legalize`],
//! which gives every node exactly one dispatch path — native, common-IR or
//! rewritten — or refuses to compile with a [`DispatchError`] listing every
//! unsupported node at once. The [`DeviceRouter`] picks a device from a
//! fallback chain at compile time, and says why. No silent fallback.
#![forbid(unsafe_code)]

mod backend;
mod calibration;
mod device;
mod legalize;
pub mod options;
pub mod policy;
mod profile;
mod report;
pub mod rewrite;
mod router;

pub use backend::{
    backend_for, backends, register_backend, Backend, Claims, Executable, LocalFuture,
    MaybeSendSync, NodeQuery, Runs, RuntimeError,
};
pub use calibration::{calibration, clear_calibrations, set_calibration, Calibration, CostSource};
pub use device::Device;
pub use legalize::{legalize, Attempt, DispatchError, Legalized, Unsupported};
pub use options::{CpuEngine, CpuOptions, WgpuOptions};
pub use policy::{DispatchOptions, Policy};
pub use profile::{KernelTime, Profile};
pub use report::{DispatchPath, DispatchReport, NodeDispatch, Routing, Transfer};
pub use router::{estimate, estimate_cost, DeviceRouter, RouteError, RouteStrategy};
