//! `rlx calibrate`: measure each device's costs on this machine
//! (`rlx::calibrate`) and keep them in `$RLX_HOME/calibration.json`, which
//! every command loads, so `cheapest:` device chains decide by measured
//! costs (the dispatch report's routing line says which).

use crate::device::{self, Env};
use crate::out::{CliError, CliResult};
use clap::Args;
use rlx::Calibration;
use std::path::{Path, PathBuf};

pub const AFTER_HELP: &str = "Examples:
  rlx calibrate                      # every device this build has
  rlx calibrate --device cpu --device vulkan
  rlx dispatch model.mir --device cheapest:vulkan,cpu   # then decides by the figures
  rlx calibrate --clear

What is measured, per device: a 512x512x512 f32 matrix product (GFLOP/s),
the extra time of 32 more kernels in one run (microseconds per kernel), a
one-kernel run (microseconds per run), and 16 MiB copied in and out (GB/s;
not on the CPU). Saved to
$RLX_HOME/calibration.json; a device measured again replaces its entry.";

#[derive(Args)]
pub struct CalibrateArgs {
    /// A device to measure (repeat for several; default: every device of
    /// this build, CUDA only when named).
    #[arg(long, short = 'd', value_name = "DEVICE")]
    device: Vec<String>,
    /// Print the figures as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Delete the saved figures (the nominal ones apply again).
    #[arg(long, conflicts_with_all = ["device", "json"])]
    clear: bool,
}

/// The file that holds the figures.
pub fn path(env: &Env) -> PathBuf {
    env.home.join("calibration.json")
}

/// The saved figures ([] without a file); a file that is not ours is an
/// error naming it and what to do.
pub fn load(file: &Path) -> CliResult<Vec<Calibration>> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(CliError::input(format!("{}: {e}", file.display()))),
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .and_then(|mut v| serde_json::from_value::<Vec<Calibration>>(v["calibrations"].take()))
        .map_err(|e| {
            CliError::input(format!(
                "{}: not a calibration file ({e}); remove it or run `rlx calibrate --clear`",
                file.display()
            ))
        })
}

/// Put the saved figures in force (every command, through `Env::apply`).
/// A figure for a device this build lacks is skipped.
pub fn apply(env: &Env) -> CliResult {
    let file = path(env);
    for c in load(&file)? {
        if rlx::Device::parse(&c.device).is_err() {
            continue;
        }
        rlx::set_calibration(c).map_err(|e| CliError::input(format!("{}: {e}", file.display())))?;
    }
    Ok(())
}

pub fn calibrate(a: CalibrateArgs, env: &Env) -> CliResult {
    let file = path(env);
    if a.clear {
        match std::fs::remove_file(&file) {
            Ok(()) => eprintln!("removed {}", file.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("{} does not exist", file.display())
            }
            Err(e) => return Err(CliError::failure(format!("{}: {e}", file.display()))),
        }
        rlx::clear_calibrations();
        return Ok(());
    }
    let devices: Vec<rlx::Device> = if a.device.is_empty() {
        rlx::custom::backends_sorted()
            .iter()
            .map(|b| b.device())
            .collect()
    } else {
        a.device
            .iter()
            .map(|d| device::parse_one(d, env))
            .collect::<CliResult<_>>()?
    };
    let mut saved = load(&file)?;
    let mut measured = Vec::new();
    for d in devices {
        eprintln!("calibrating {d} ...");
        let c =
            rlx::calibrate(d).map_err(|e| CliError::failure(format!("calibrating {d}: {e}")))?;
        saved.retain(|s| s.device != c.device);
        saved.push(c.clone());
        measured.push(c);
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::failure(format!("{}: {e}", dir.display())))?;
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({ "calibrations": saved }))
        .map_err(|e| CliError::failure(e.to_string()))?;
    std::fs::write(&file, text + "\n")
        .map_err(|e| CliError::failure(format!("{}: {e}", file.display())))?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&measured)
                .map_err(|e| CliError::failure(e.to_string()))?
        );
    } else {
        println!("| device | f32 GEMM GFLOP/s | µs per kernel | µs per run | copy GB/s | measured with |");
        println!("|---|---:|---:|---:|---:|---|");
        for c in &measured {
            let copy = c
                .transfer_gbps
                .map_or("-".to_string(), |g| format!("{g:.2}"));
            println!(
                "| {} | {:.1} | {:.2} | {:.1} | {copy} | {} |",
                c.device, c.gemm_gflops, c.launch_us, c.run_us, c.backend
            );
        }
    }
    eprintln!("saved to {}", file.display());
    Ok(())
}
