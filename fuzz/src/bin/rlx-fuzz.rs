//! The coverage-guided fuzzer: libFuzzer (from the libfuzzer-sys crate)
//! around every target of rlx-fuzz, the target picked by `--target=NAME`
//! (libFuzzer ignores arguments that start with `--`) or by
//! `RLX_FUZZ_TARGET`. Everything else is libFuzzer's command line:
//!
//!     rlx-fuzz --target=ir_text -max_total_time=60 -timeout=10 \
//!         -artifact_prefix=fuzz/artifacts/ir_text/ fuzz/corpus/ir_text
//!
//! `rlx-fuzz --list` prints the targets; `rlx-fuzz --target=NAME FILE...`
//! runs those inputs once (reproducing a crash); `rlx-fuzz --json-seeds
//! OUT_DIR MIR_FILE...` converts IR text seeds to JSON. scripts/fuzz
//! drives it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[global_allocator]
static ALLOC: rlx_fuzz::alloc::LimitAlloc = rlx_fuzz::alloc::LimitAlloc;

static RUN: OnceLock<fn(&[u8])> = OnceLock::new();

fn pick() {
    let mut name = std::env::var("RLX_FUZZ_TARGET").ok();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--json-seeds") {
        std::process::exit(rlx_fuzz::json_seeds(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("--compare") {
        std::process::exit(rlx_fuzz::compare(&args[1..]));
    }
    for a in args {
        if a == "--list" {
            for t in rlx_fuzz::TARGETS {
                println!("{:16} {}", t.name, t.about);
            }
            std::process::exit(0);
        }
        if let Some(n) = a.strip_prefix("--target=") {
            name = Some(n.to_string());
        }
    }
    let Some(name) = name else {
        eprintln!(
            "rlx-fuzz: name a target with --target=NAME (one of: {}); --list describes them",
            rlx_fuzz::target_names()
        );
        std::process::exit(2);
    };
    let Some(t) = rlx_fuzz::target(&name) else {
        eprintln!(
            "rlx-fuzz: no target `{name}` (targets: {})",
            rlx_fuzz::target_names()
        );
        std::process::exit(2);
    };
    let _ = RUN.set(t.run);
    rlx_fuzz::init();
}

fuzz_target!(init: pick(), |data: &[u8]| {
    (RUN.get().expect("a target was picked"))(data);
});
