//! Measured device choice: `rlx::calibrate` measures a device by running
//! small graphs on it, and a `cheapest:` chain decides with those figures
//! (said in the routing reason) instead of the backends' nominal ones.

use rlx::custom::{register_backend, Backend, Claims, Executable};
use rlx::ir::lir::Program;
use rlx::ir::text;
use rlx::{Calibration, CompileOptions, Device, DeviceRouter, HostTensor};
use rlx_runtime::RuntimeError;
use std::sync::{Arc, Mutex};

/// The calibration table is process-wide: one test at a time touches it.
static TABLE: Mutex<()> = Mutex::new(());

const CALFAKE: Device = Device::Named("calfake");

struct Fake;
struct FakeExe(Program);

impl Executable for FakeExe {
    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        rlx_cpu::run_graph_refs(&self.0.graph, inputs).map_err(|e| RuntimeError::Backend {
            device: CALFAKE,
            msg: e.to_string(),
        })
    }
}

impl Backend for Fake {
    fn device(&self) -> Device {
        CALFAKE
    }
    fn claims(&self) -> Claims {
        Claims::all_of(["matmul", "add", "neg", "transfer"])
    }
    /// Nominally far faster than the CPU's nominal 1 GFLOP/s.
    fn throughput_gflops(&self) -> f64 {
        1000.0
    }
    fn compile(&self, p: Program) -> Result<Box<dyn Executable>, RuntimeError> {
        Ok(Box::new(FakeExe(p)))
    }
}

fn matmul_graph() -> rlx::Graph {
    text::parse("graph @g(%a: f32[256,256]) {\n  %b = matmul(%a, %a)\n  return %b\n}").unwrap()
}

fn routed(chain: &str) -> (Device, String) {
    let c = rlx::compile_with(
        &matmul_graph(),
        DeviceRouter::parse(chain).unwrap(),
        &CompileOptions::default(),
    )
    .unwrap();
    let reason = c.dispatch_report().routing.as_ref().unwrap().reason.clone();
    (c.device(), reason)
}

#[test]
fn the_cpu_calibrates_to_plausible_figures_that_the_estimate_uses() {
    let _t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    rlx::clear_calibrations();
    let c = rlx::calibrate(Device::Cpu).unwrap();
    // Any CPU this runs on: between 0.1 GFLOP/s (an emulator) and
    // 100 TFLOP/s; a kernel's extra cost under 10 ms; nothing to copy.
    assert!(
        (0.1..1e5).contains(&c.gemm_gflops),
        "GEMM {} GFLOP/s",
        c.gemm_gflops
    );
    assert!(
        (0.0..1e4).contains(&c.launch_us),
        "launch {} µs",
        c.launch_us
    );
    assert_eq!((c.device.as_str(), c.transfer_gbps), ("cpu", None));
    let (_, nominal) = routed("cheapest:cpu");
    assert!(
        nominal.contains("cpu") && nominal.contains("(nominal)"),
        "{nominal}"
    );
    rlx::set_calibration(c.clone()).unwrap();
    let (_, measured) = routed("cheapest:cpu");
    assert!(measured.contains("(measured)"), "{measured}");
    // The product's 2·256³ FLOP at the measured rate, plus a few launches.
    let ms: f64 = measured
        .split("cpu ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no estimate for cpu in {measured:?}"));
    let want = 2.0 * 256f64.powi(3) / (c.gemm_gflops * 1e9) * 1e3;
    assert!(
        ms >= want * 0.999 && ms <= want + 0.01 + 20.0 * c.launch_us * 1e-3 + c.run_us * 1e-3,
        "estimate {ms} ms, product alone {want} ms"
    );
    rlx::clear_calibrations();
}

#[test]
fn measured_figures_decide_the_cheapest_device() {
    let _t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        rlx::init();
        register_backend(Arc::new(Fake));
    });
    rlx::clear_calibrations();
    let cal = |device: &str, gflops: f64, launch_us: f64, gbps: Option<f64>| Calibration {
        device: device.into(),
        backend: "test".into(),
        gemm_gflops: gflops,
        launch_us,
        run_us: 0.0,
        transfer_gbps: gbps,
    };
    // Nominal figures: the fake's 1000 GFLOP/s beats the CPU's 1.
    let (d, why) = routed("cheapest:cpu,calfake");
    assert_eq!(d, CALFAKE, "{why}");
    assert!(
        why.contains("calfake") && why.contains("(nominal)"),
        "{why}"
    );
    // Measured: the CPU at 100 GFLOP/s, the fake at 10 — the CPU wins.
    rlx::set_calibration(cal("cpu", 100.0, 1.0, None)).unwrap();
    rlx::set_calibration(cal("calfake", 10.0, 10.0, Some(10.0))).unwrap();
    let (d, why) = routed("cheapest:cpu,calfake");
    assert_eq!(d, Device::Cpu, "{why}");
    assert!(why.contains("cpu") && why.contains("(measured)"), "{why}");
    // A faster fake, measured again: it wins back.
    rlx::set_calibration(cal("calfake", 1e5, 5.0, Some(1000.0))).unwrap();
    let (d, why) = routed("cheapest:cpu,calfake");
    assert_eq!(d, CALFAKE, "{why}");
    // Figures that cannot be costs are refused, naming the device.
    for bad in [
        cal("cpu", 0.0, 1.0, None),
        cal("cpu", f64::NAN, 1.0, None),
        cal("cpu", 1.0, -1.0, None),
        cal("calfake", 1.0, 1.0, Some(0.0)),
        Calibration {
            run_us: f64::INFINITY,
            ..cal("cpu", 1.0, 1.0, None)
        },
    ] {
        let e = rlx::set_calibration(bad).unwrap_err();
        assert!(e.contains("calibration of"), "{e}");
    }
    let e = rlx::set_calibration(cal("nosuch", 1.0, 1.0, None)).unwrap_err();
    assert!(e.contains("unknown device `nosuch`"), "{e}");
    rlx::clear_calibrations();
}
