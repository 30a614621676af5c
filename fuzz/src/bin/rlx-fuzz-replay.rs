//! Runs inputs through a target without libFuzzer (no instrumentation, any
//! toolchain): reproduce a crash, or check a corpus.
//!
//!     rlx-fuzz-replay [--timeout SECONDS] TARGET PATH...
//!     rlx-fuzz-replay --json-seeds OUT_DIR MIR_FILE...
//!
//! Each PATH is a file or a directory of files. A panic, or an input that
//! runs past the timeout (default 10 s), fails the run (exit 1) and names
//! the file; an allocation over the limit (RLX_FUZZ_MALLOC_MB) aborts the
//! process after naming it.
//!
//! `--json-seeds` writes the JSON form of each parsing `.mir` file into
//! OUT_DIR (how fuzz/corpus/ir_json was seeded from fuzz/corpus/ir_text).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: rlx_fuzz::alloc::LimitAlloc = rlx_fuzz::alloc::LimitAlloc;

static STARTED_MS: AtomicU64 = AtomicU64::new(0);
static CURRENT: Mutex<Option<PathBuf>> = Mutex::new(None);

fn files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        entries.sort();
        for e in entries {
            files(&e, out);
        }
    } else {
        out.push(p.to_path_buf());
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: rlx-fuzz-replay [--timeout SECONDS] TARGET PATH...\n       rlx-fuzz-replay --json-seeds OUT_DIR MIR_FILE...\ntargets: {}",
        rlx_fuzz::target_names()
    );
    std::process::exit(2);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--json-seeds") {
        std::process::exit(rlx_fuzz::json_seeds(&args[1..]));
    }
    let mut timeout = 10.0f64;
    if args.first().map(String::as_str) == Some("--timeout") {
        if args.len() < 2 {
            usage();
        }
        timeout = args[1].parse().unwrap_or_else(|_| usage());
        args.drain(..2);
    }
    if args.is_empty() {
        usage();
    }
    let Some(t) = rlx_fuzz::target(&args[0]) else {
        eprintln!("rlx-fuzz-replay: no target `{}`", args[0]);
        usage();
    };
    let mut inputs = Vec::new();
    for p in &args[1..] {
        files(Path::new(p), &mut inputs);
    }
    rlx_fuzz::init();
    let epoch = Instant::now();
    let limit_ms = (timeout * 1000.0) as u64;
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let s = STARTED_MS.load(Ordering::Relaxed);
        if s != 0 && epoch.elapsed().as_millis() as u64 > s + limit_ms {
            let cur = CURRENT.lock().ok().and_then(|c| c.clone());
            eprintln!(
                "rlx-fuzz-replay: TIMEOUT: {} ran past {timeout} s",
                cur.map_or("?".into(), |p| p.display().to_string())
            );
            std::process::exit(1);
        }
    });
    // The default hook prints each panic; the loop below names the file.
    let mut failed = 0usize;
    let mut slowest = (Duration::ZERO, PathBuf::new());
    for p in &inputs {
        let Ok(data) = std::fs::read(p) else {
            eprintln!("rlx-fuzz-replay: cannot read {}", p.display());
            failed += 1;
            continue;
        };
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.clone());
        let t0 = Instant::now();
        STARTED_MS.store(epoch.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
        let r = std::panic::catch_unwind(|| (t.run)(&data));
        STARTED_MS.store(0, Ordering::Relaxed);
        let dt = t0.elapsed();
        if dt > slowest.0 {
            slowest = (dt, p.clone());
        }
        if r.is_err() {
            eprintln!("rlx-fuzz-replay: CRASH: {} ({})", p.display(), t.name);
            failed += 1;
        }
    }
    println!(
        "{}: {} inputs, {} failed, slowest {:.3} s ({})",
        t.name,
        inputs.len(),
        failed,
        slowest.0.as_secs_f64(),
        slowest.1.display()
    );
    std::process::exit(if failed > 0 { 1 } else { 0 });
}
