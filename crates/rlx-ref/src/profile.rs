//! Per-op time profile of the CPU backend, on after [`set_enabled`]`(true)`
//! (the edge does it for `RLX_PROFILE=1`; native only: wasm32-unknown-unknown
//! has no clock). `report()` gives the table, hottest op first; `reset()`
//! clears it. Process-wide, like the table it fills.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

fn table() -> &'static Mutex<HashMap<String, (usize, f64)>> {
    static T: OnceLock<Mutex<HashMap<String, (usize, f64)>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

static ON: AtomicBool = AtomicBool::new(false);

/// Is profiling on?
pub fn enabled() -> bool {
    cfg!(not(target_arch = "wasm32")) && ON.load(Ordering::Relaxed)
}

/// Turns profiling on or off for the whole process (a no-op on wasm32);
/// returns the previous state.
pub fn set_enabled(on: bool) -> bool {
    ON.swap(on, Ordering::Relaxed)
}

/// Time `f` under the name `op` when profiling is on.
pub fn time<T>(op: &str, f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "wasm32")]
    let _ = op; // no clock there: never profiled
    #[cfg(not(target_arch = "wasm32"))]
    if enabled() {
        let t = std::time::Instant::now();
        let r = f();
        let dt = t.elapsed().as_secs_f64();
        if let Ok(mut m) = table().lock() {
            let e = m.entry(op.to_string()).or_insert((0, 0.0));
            e.0 += 1;
            e.1 += dt;
        }
        return r;
    }
    f()
}

/// The profile so far: op, calls, total ms, share — hottest first.
pub fn report() -> String {
    let m = table().lock().map(|m| m.clone()).unwrap_or_default();
    let total: f64 = m.values().map(|v| v.1).sum();
    let mut rows: Vec<_> = m.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    let mut s = format!(
        "{:<20} {:>8} {:>12} {:>7}\n",
        "op", "calls", "total ms", "share"
    );
    for (op, (n, t)) in rows {
        s += &format!(
            "{op:<20} {n:>8} {:>12.2} {:>6.1}%\n",
            t * 1e3,
            100.0 * t / total.max(1e-12)
        );
    }
    s
}

/// Run `f` with profiling on, from an empty table, and return what it
/// measured: (op, calls, seconds), hottest first. Profiled runs are
/// serialized; the table is process-wide, so ops other threads run
/// meanwhile are counted too. The previous table is lost and the previous
/// on/off state restored.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Vec<(String, usize, f64)>) {
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    reset();
    let was = set_enabled(true);
    let r = f();
    set_enabled(was);
    let m = table().lock().map(|m| m.clone()).unwrap_or_default();
    let mut rows: Vec<(String, usize, f64)> = m.into_iter().map(|(k, (n, t))| (k, n, t)).collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    (r, rows)
}

/// Forget everything measured so far.
pub fn reset() {
    if let Ok(mut m) = table().lock() {
        m.clear();
    }
}
