//! `rlx calibrate`: measured figures saved under RLX_HOME, used by every
//! later command's `cheapest:` routing, a bad file named, `--clear`.

use std::path::Path;
use std::process::Command;

fn rlx(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(args)
        .env("RLX_HOME", home)
        .output()
        .expect("run rlx");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn calibrate_saves_figures_that_routing_then_uses() {
    let home = std::env::temp_dir().join(format!("rlx-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let graph = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/examples/attention_block.mir"
    );
    // Before: nominal figures.
    let (ok, out, err) = rlx(&home, &["dispatch", graph, "--device", "cheapest:cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("cpu") && out.contains("(nominal)"), "{out}");

    let (ok, out, err) = rlx(&home, &["calibrate", "--device", "cpu", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let c = &v[0];
    assert_eq!(c["device"], "cpu");
    let gflops = c["gemm_gflops"].as_f64().unwrap();
    assert!((0.1..1e5).contains(&gflops), "{gflops} GFLOP/s");
    assert!(c["transfer_gbps"].is_null());
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("calibration.json")).unwrap())
            .unwrap();
    assert_eq!(saved["calibrations"][0]["gemm_gflops"], c["gemm_gflops"]);

    // After: every command loads them.
    let (ok, out, err) = rlx(&home, &["dispatch", graph, "--device", "cheapest:cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("cpu") && out.contains("(measured)"), "{out}");

    // A file that is not ours: every command says which and what to do.
    std::fs::write(home.join("calibration.json"), "{not json").unwrap();
    let (ok, _, err) = rlx(&home, &["ops"]);
    assert!(!ok);
    assert!(
        err.contains("calibration.json") && err.contains("rlx calibrate --clear"),
        "{err}"
    );
    let (ok, _, err) = rlx(&home, &["calibrate", "--clear"]);
    assert!(ok, "{err}");
    assert!(!home.join("calibration.json").exists());
    let (ok, _, err) = rlx(&home, &["calibrate", "--device", "nosuch"]);
    assert!(!ok && err.contains("nosuch"), "{err}");
    let _ = std::fs::remove_dir_all(&home);
}
