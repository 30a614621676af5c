//! Measured costs of a device on this machine, for the router's cost
//! model (`cheapest:` chains). A backend's own figures
//! ([`Backend::throughput_gflops`](crate::Backend::throughput_gflops) and
//! the like) are nominal constants, the same on every machine; a
//! calibration (`rlx::calibrate`, `rlx calibrate` in the CLI, which keeps
//! it on disk) replaces them for its device. The dispatch report says
//! which figures an estimate used.

use crate::device::Device;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// What one device costs here, measured by running small graphs on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The device measured (its name, as `Device::parse` reads it).
    pub device: String,
    /// The kernel that ran the GEMM measurement (what was measured).
    pub backend: String,
    /// f32 matrix product throughput, GFLOP/s.
    pub gemm_gflops: f64,
    /// The cost of one more kernel in a run, µs.
    pub launch_us: f64,
    /// The fixed cost of a run (a one-kernel graph: launch, the wait for
    /// its result), µs; 0 in figures saved before it was measured.
    #[serde(default)]
    pub run_us: f64,
    /// Host↔device copy bandwidth, GB/s; `None` where the device is the
    /// host (nothing is copied).
    pub transfer_gbps: Option<f64>,
}

/// Where the figures of an estimate came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostSource {
    /// A [`Calibration`] of the device on this machine.
    Measured,
    /// The backend's nominal constants.
    Nominal,
}

impl CostSource {
    pub fn name(self) -> &'static str {
        match self {
            CostSource::Measured => "measured",
            CostSource::Nominal => "nominal",
        }
    }
}

static TABLE: RwLock<Option<HashMap<Device, Calibration>>> = RwLock::new(None);
/// Bumped on every change, so cached estimates of older figures are not reused.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Use `c` for its device from now on (process-wide). An error if its
/// device name is unknown or a figure is not a positive finite number.
pub fn set_calibration(c: Calibration) -> Result<(), String> {
    let device = Device::parse(&c.device)?;
    let ok = |x: f64| x.is_finite() && x > 0.0;
    let cost = |x: f64| x.is_finite() && x >= 0.0;
    if !(ok(c.gemm_gflops) && cost(c.launch_us) && cost(c.run_us)) {
        return Err(format!(
            "calibration of {}: GEMM {} GFLOP/s, launch {} µs and run {} µs must be finite and positive",
            c.device, c.gemm_gflops, c.launch_us, c.run_us
        ));
    }
    if c.transfer_gbps.is_some_and(|t| !ok(t)) {
        return Err(format!(
            "calibration of {}: transfer bandwidth {:?} GB/s must be finite and positive",
            c.device, c.transfer_gbps
        ));
    }
    let mut t = TABLE.write().unwrap_or_else(|e| e.into_inner());
    t.get_or_insert_with(HashMap::new).insert(device, c);
    GENERATION.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The calibration in force for `device`, if any.
pub fn calibration(device: Device) -> Option<Calibration> {
    let t = TABLE.read().unwrap_or_else(|e| e.into_inner());
    t.as_ref().and_then(|m| m.get(&device).cloned())
}

/// Forget every calibration (the nominal figures apply again).
pub fn clear_calibrations() {
    *TABLE.write().unwrap_or_else(|e| e.into_inner()) = None;
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Changes so far (part of the estimate cache's key).
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}
