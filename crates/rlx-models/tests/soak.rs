//! A short soak (the full one: `cargo run --release -p rlx-models --example
//! soak -- 100000`): 800 sentences in chunks; between chunks that compile
//! a new shape, live heap bytes never rise by more than 1 MiB, and batched
//! embeddings equal the same texts embedded alone. The only test in its binary, so the counting
//! allocator sees nothing else.

#[path = "../examples/soak.rs"]
mod soak;

#[test]
fn memory_stays_flat_and_batches_equal_single_calls() {
    let dir = soak::model_dir();
    assert!(
        dir.join("model.safetensors").exists(),
        "MiniLM weights not found in {} — run ./scripts/fetch-models",
        dir.display()
    );
    let model = rlx_models::SentenceEmbedder::load(&dir, |_| {}).unwrap();
    let r = soak::soak(&model, 800);
    eprintln!("{r:?}");
    assert!(r.compared >= 8, "{r:?}");
    // Sentences of 3 to 24 words pad to at most 3 lengths; batches of 16
    // (the last of a chunk smaller) and single texts.
    assert!(r.shapes <= 12, "{r:?}");
    assert!(
        r.growth_without_compile <= 1 << 20,
        "live heap grew by {} bytes over chunks that compiled nothing",
        r.growth_without_compile
    );
    assert!(r.min_cosine > 1.0 - 1e-6 && r.max_abs_diff < 1e-5, "{r:?}");
}
