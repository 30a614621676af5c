//! rlx's fuzz targets (docs/fuzzing.md).
//!
//! Each target takes arbitrary bytes and may return normally whatever they
//! hold: a typed error from rlx is a pass. A panic (including a failed
//! property below), an abort, a stack overflow, an input that runs past the
//! time limit, or one allocation/live total over the memory limit
//! ([`alloc::LimitAlloc`]) is a crash.
//!
//! The targets are plain functions so that one binary serves them all: the
//! libFuzzer binary `rlx-fuzz` (`--target=NAME`), the replay binary
//! `rlx-fuzz-replay`, and the corpus test (`tests/corpus.rs`).

pub mod alloc;
pub mod graphgen;
pub mod targets;

use std::sync::Once;

/// A fuzz target: name, entry point, one-line description.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    pub about: &'static str,
}

/// Every target, in the order scripts/fuzz runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "ir_text",
        run: targets::ir_text,
        about: "MIR text parser: parse, verify, print, re-parse to an equal graph",
    },
    Target {
        name: "ir_json",
        run: targets::ir_json,
        about: "JSON IR reader: parse, verify, JSON and text round trips",
    },
    Target {
        name: "safetensors",
        run: targets::safetensors,
        about: "safetensors from a byte buffer: list, load every tensor, write back, re-read",
    },
    Target {
        name: "gguf",
        run: targets::gguf,
        about: "GGUF from a byte buffer: metadata, every tensor (typed or raw), written back and re-read",
    },
    Target {
        name: "llm_tokenizer",
        run: targets::llm_tokenizer,
        about: "GGUF LLM tokenizers (BPE, SentencePiece) from a fuzzed vocabulary: encode any text; byte-level BPE decodes it back",
    },
    Target {
        name: "npy",
        run: targets::npy,
        about: ".npy reader: read, write back, re-read to an equal tensor",
    },
    Target {
        name: "tokenizer",
        run: targets::tokenizer,
        about: "tokenizer.json loader, then encodes a few texts",
    },
    Target {
        name: "tokenizer_config",
        run: targets::tokenizer_config,
        about: "tokenizer.json settings drawn from the bytes (padding, truncation, normalizer, added token), then texts",
    },
    Target {
        name: "tokenizer_text",
        run: targets::tokenizer_text,
        about: "the (trimmed) MiniLM tokenizer on fuzzed text: ids, offsets, truncation, padding",
    },
    Target {
        name: "onnx",
        run: targets::onnx,
        about: "ONNX models: protobuf decoding and import onto the IR (every node mapped or listed as unsupported)",
    },
    Target {
        name: "rten",
        run: targets::rten,
        about: ".rten models: header, FlatBuffers graph, conversion to ONNX, import onto the IR",
    },
    Target {
        name: "compile",
        run: targets::compile,
        about:
            "random valid graphs: compile for the CPU, run, compare with the reference interpreter",
    },
];

/// With `RLX_FUZZ_VERBOSE` set, say how far an input got (checking seeds).
pub fn note(what: impl FnOnce() -> String) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("RLX_FUZZ_VERBOSE").is_some()) {
        eprintln!("rlx-fuzz: {}", what());
    }
}

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The names of all targets, space-separated (for messages).
pub fn target_names() -> String {
    TARGETS.iter().map(|t| t.name).collect::<Vec<_>>().join(" ")
}

/// rlx's limits while fuzzing: far below the defaults (16 GiB tensors), so
/// that an input asking for more memory meets rlx's own typed refusal long
/// before the harness's allocation limit ([`alloc::DEFAULT_LIMIT_MB`]). An
/// allocation over that limit therefore means rlx allocated past its own
/// policy: a bug.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut l = rlx_ir::limits();
        l.max_tensor_bytes = l.max_tensor_bytes.min(64 << 20);
        l.max_arena_bytes = l.max_arena_bytes.min(256 << 20);
        l.max_file_bytes = l.max_file_bytes.min(64 << 20);
        l.max_threads = 1;
        rlx_ir::set_limits(l);
        // One worker: the machine is shared, and libFuzzer's -jobs
        // parallelizes across processes instead.
        let _ = rlx_cpu::set_threads(1);
    });
}

/// `--json-seeds OUT_DIR MIR_FILE...`: write the JSON form of each `.mir`
/// file that parses into OUT_DIR (how fuzz/corpus/ir_json was seeded from
/// fuzz/corpus/ir_text). Returns the exit code.
pub fn json_seeds(args: &[String]) -> i32 {
    let Some((out, ins)) = args.split_first() else {
        eprintln!("usage: --json-seeds OUT_DIR MIR_FILE...");
        return 2;
    };
    let mut n = 0;
    for p in ins {
        let Ok(src) = std::fs::read_to_string(p) else {
            continue;
        };
        let Ok(g) = rlx_ir::text::parse(&src) else {
            continue;
        };
        let p = std::path::Path::new(p);
        let stem = p
            .file_stem()
            .map_or("g".into(), |s| s.to_string_lossy().into_owned());
        let path = std::path::Path::new(out).join(format!("{stem}.json"));
        if let Err(e) = std::fs::write(&path, g.to_json().to_string()) {
            eprintln!("{}: {e}", path.display());
            return 1;
        }
        n += 1;
    }
    println!("wrote {n} JSON graphs to {out}");
    0
}

/// `--compare MIR_FILE [VALUE...]`: triage of a `compile` mismatch. Runs the
/// graph on the reference interpreter and compiled three ways (default;
/// optimizer off; reference engine) and prints each output. Every input
/// is filled with the VALUEs in turn (default: the generator's values).
pub fn compare(args: &[String]) -> i32 {
    let Some((file, values)) = args.split_first() else {
        eprintln!("usage: --compare MIR_FILE [VALUE...]");
        return 2;
    };
    init();
    let src = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{file}: {e}");
            return 1;
        }
    };
    let g = match rlx_ir::text::parse(&src) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{file}: {e}");
            return 1;
        }
    };
    let values: Vec<f64> = values.iter().filter_map(|v| v.parse().ok()).collect();
    let xs: Vec<rlx_ir::HostTensor> = if values.is_empty() {
        graphgen::inputs(&g, &[])
    } else {
        g.input_types()
            .iter()
            .map(|t| {
                let n = t.shape.numel();
                let v = (0..n).map(|i| values[i % values.len()]).collect();
                rlx_ir::HostTensor::from_f64(t.dtype, t.shape.clone(), v).expect("an input")
            })
            .collect()
    };
    let show = |what: &str, r: Result<Vec<rlx_ir::HostTensor>, String>| match r {
        Ok(outs) => {
            for (k, o) in outs.iter().enumerate() {
                println!(
                    "{what:>22} out {k}: {:?}",
                    o.to_f64_vec().unwrap_or_default()
                );
            }
        }
        Err(e) => println!("{what:>22}: error: {e}"),
    };
    println!(
        "inputs: {:?}",
        xs.iter()
            .map(|x| x.to_f64_vec().unwrap_or_default())
            .collect::<Vec<_>>()
    );
    show(
        "reference interpreter",
        rlx_cpu::run_graph(&g, &xs).map_err(|e| e.to_string()),
    );
    let run = |opts: rlx::CompileOptions| {
        rlx::compile_with(&g, rlx::Device::Cpu, &opts)
            .and_then(|c| c.run(&xs))
            .map_err(|e| e.to_string())
    };
    show("compiled (default)", run(rlx::CompileOptions::default()));
    show(
        "compiled, no optimizer",
        run(rlx::CompileOptions {
            optimize: false,
            ..Default::default()
        }),
    );
    show(
        "compiled, reference",
        run(rlx::CompileOptions {
            cpu: Some(rlx::CpuOptions {
                engine: rlx::CpuEngine::Reference,
                ..Default::default()
            }),
            ..Default::default()
        }),
    );
    0
}
