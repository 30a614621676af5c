//! Replays the committed corpus (fuzz/corpus/TARGET/*, crash reproducers
//! `regress-*` included) through every target: CI's cheap fuzz smoke test.
//!
//! fuzz/known/TARGET/* are reproducers of crashes not fixed yet (each
//! listed in docs/fuzzing.md): they run too, and only print whether they
//! still crash; once one passes, move it into the corpus as `regress-*`.

use std::path::Path;

#[global_allocator]
static ALLOC: rlx_fuzz::alloc::LimitAlloc = rlx_fuzz::alloc::LimitAlloc;

fn replay(target: &str) {
    rlx_fuzz::init();
    let t = rlx_fuzz::target(target).expect("a target");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    for f in &files {
        let data = std::fs::read(f).expect("a corpus file");
        if std::panic::catch_unwind(|| (t.run)(&data)).is_err() {
            panic!("{target}: {} crashes", f.display());
        }
    }
    println!("{target}: {} inputs", files.len());
    let known = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("known")
        .join(target);
    if let Ok(d) = std::fs::read_dir(&known) {
        for f in d.flatten().map(|e| e.path()) {
            let data = std::fs::read(&f).expect("a reproducer");
            let crashed = std::panic::catch_unwind(|| (t.run)(&data)).is_err();
            println!(
                "{target}: known crash {}: {}",
                f.display(),
                if crashed {
                    "still crashes"
                } else {
                    "passes now: move it to the corpus as regress-*"
                }
            );
        }
    }
}

#[test]
fn ir_text() {
    replay("ir_text");
}
#[test]
fn ir_json() {
    replay("ir_json");
}
#[test]
fn safetensors() {
    replay("safetensors");
}
#[test]
fn gguf() {
    replay("gguf");
}
#[test]
fn llm_tokenizer() {
    replay("llm_tokenizer");
}

#[test]
fn npy() {
    replay("npy");
}
#[test]
fn tokenizer() {
    replay("tokenizer");
}
#[test]
fn tokenizer_config() {
    replay("tokenizer_config");
}
#[test]
fn tokenizer_text() {
    replay("tokenizer_text");
}
#[test]
fn onnx() {
    replay("onnx");
}
#[test]
fn rten() {
    replay("rten");
}
#[test]
fn compile() {
    replay("compile");
}

#[test]
fn every_target_is_tested() {
    let names: Vec<_> = rlx_fuzz::TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "ir_text",
            "ir_json",
            "safetensors",
            "gguf",
            "llm_tokenizer",
            "npy",
            "tokenizer",
            "tokenizer_config",
            "tokenizer_text",
            "onnx",
            "rten",
            "compile"
        ]
    );
}
