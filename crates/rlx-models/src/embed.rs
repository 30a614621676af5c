//! Sentence embeddings with a BERT-family sentence-transformers model
//! (all-MiniLM-L6-v2): tokenizer + encoder + masked mean pooling + L2
//! normalization, loaded from the files the model ships (`config.json`,
//! `tokenizer.json`, `model.safetensors`, `sentence_bert_config.json`).

use crate::bert::{Bert, BertConfig};
use rlx::{CompileOptions, Device, HostTensor, Session};
use rlx_formats::SafetensorsFile;
use rlx_tokenizers::{Padding, Tokenizer, Truncation};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Why loading or running the embedder failed.
#[derive(Debug, Error)]
pub enum EmbedError {
    #[error("{path}: {msg}")]
    File { path: PathBuf, msg: String },
    #[error(transparent)]
    Format(#[from] rlx_formats::FormatError),
    #[error(transparent)]
    Tokenizer(#[from] rlx_tokenizers::TokenizerError),
    #[error(transparent)]
    Model(#[from] rlx::Error),
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
}

/// A loading step, for progress reporting.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Reading a file.
    Reading(String),
    /// Loaded `done` of `total` parameter tensors.
    Weights { done: usize, total: usize },
    /// Everything is loaded.
    Ready { parameters: usize, bytes: usize },
}

/// A loaded sentence-embedding model.
pub struct SentenceEmbedder {
    pub config: BertConfig,
    bert: Bert,
    tokenizer: Tokenizer,
    weights: Vec<HostTensor>,
    max_seq_length: usize,
    device: Device,
    session: Session,
    /// Sentences per forward pass.
    pub batch_size: usize,
}

fn read(dir: &Path, name: &str) -> Result<String, EmbedError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|e| EmbedError::File {
        path,
        msg: format!("{e} (run ./scripts/fetch-models?)"),
    })
}

impl SentenceEmbedder {
    /// Load from a model directory, reporting progress.
    pub fn load(
        dir: impl AsRef<Path>,
        mut progress: impl FnMut(Progress),
    ) -> Result<Self, EmbedError> {
        let dir = dir.as_ref();
        progress(Progress::Reading("config.json".into()));
        let config = BertConfig::from_json(&read(dir, "config.json")?)?;
        // sentence-transformers truncates to max_seq_length (256 for MiniLM).
        let max_seq_length = match read(dir, "sentence_bert_config.json") {
            Ok(s) => serde_json::from_str::<serde_json::Value>(&s)
                .ok()
                .and_then(|v| v["max_seq_length"].as_u64())
                .map_or(config.max_position_embeddings, |n| n as usize),
            Err(_) => config.max_position_embeddings,
        }
        .min(config.max_position_embeddings);
        progress(Progress::Reading("tokenizer.json".into()));
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))?;
        progress(Progress::Reading("model.safetensors".into()));
        let file = SafetensorsFile::open(dir.join("model.safetensors"))?;
        let bert = Bert::new(config.clone(), true);
        let params = bert.parameters();
        let total = params.len();
        let mut weights = Vec::with_capacity(total);
        let mut bytes = 0;
        for (i, p) in params.iter().enumerate() {
            let t = file.expect(&p.name, p.ty.dtype, p.ty.shape.clone())?;
            bytes += t.numel() * 4;
            weights.push(t);
            progress(Progress::Weights { done: i + 1, total });
        }
        progress(Progress::Ready {
            parameters: weights.iter().map(|t| t.numel()).sum(),
            bytes,
        });
        Ok(SentenceEmbedder {
            config,
            bert,
            tokenizer,
            weights,
            max_seq_length,
            device: Device::Cpu,
            session: Session::new(CompileOptions::default()),
            batch_size: 16,
        })
    }

    /// The tokenizer's ids for `text` (truncated as the model will see it).
    pub fn token_ids(&self, text: &str) -> Result<Vec<i64>, EmbedError> {
        let b = self.tokenizer.encode_batch(
            &[text],
            Padding::longest(),
            Truncation::max_length(self.max_seq_length),
        )?;
        Ok(b.ids_row(0).to_vec())
    }

    /// Embed texts: one L2-normalized vector per text. Texts are sorted by
    /// length and batched, and sequence lengths are rounded up to a multiple
    /// of 16 so few distinct shapes get compiled (padding is masked out).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let lens: Vec<usize> = texts
            .iter()
            .map(|t| self.token_ids(t).map(|v| v.len()))
            .collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| lens[i]);
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size.max(1)) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            let vecs = self.embed_batch(&batch)?;
            for (&i, v) in chunk.iter().zip(vecs) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One forward pass over `texts` padded to a common length.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut pad = Padding::longest();
        pad.multiple_of = Some(16);
        let enc =
            self.tokenizer
                .encode_batch(texts, pad, Truncation::max_length(self.max_seq_length))?;
        let (b, s) = enc.shape;
        let s = s.min(self.config.max_position_embeddings);
        let compiled = self.compiled(b, s)?;
        // The weights never change for this embedder: let the backend
        // prepare them once.
        let first = 3;
        compiled.keep_resident(&(first..first + self.weights.len()).collect::<Vec<_>>());
        let ids = HostTensor::from_slice(&enc.ids, [b, s])?;
        let mask = HostTensor::from_slice(&enc.attention_mask, [b, s])?;
        let types = HostTensor::from_slice(&enc.type_ids, [b, s])?;
        let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
        inputs.extend(self.weights.iter());
        let outs = compiled.run_refs(&inputs)?;
        let pooled = outs[1].to_vec::<f32>()?;
        let h = self.config.hidden_size;
        Ok(pooled.chunks(h).map(|c| c.to_vec()).collect())
    }

    /// The compiled encoder for (batch, seq), from the session's cache.
    fn compiled(&self, batch: usize, seq: usize) -> Result<Arc<rlx::Compiled>, EmbedError> {
        let g = self.bert.graph(batch, seq)?;
        Ok(self.session.compile(&g, self.device)?)
    }

    /// The encoder.
    pub fn bert(&self) -> &Bert {
        &self.bert
    }

    /// The parameters, in the encoder graph's input order (after the three
    /// data inputs).
    pub fn weights(&self) -> &[HostTensor] {
        &self.weights
    }

    /// Compile-cache statistics (hits, misses).
    pub fn cache_stats(&self) -> rlx::CacheStats {
        self.session.stats()
    }

    /// Cosine similarity of two embeddings.
    pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
        let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        dot / (na * nb).max(1e-30)
    }
}
