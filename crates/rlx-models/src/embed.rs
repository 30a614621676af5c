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
    /// Quantization with calibration could not be done (names the tensor).
    #[error("quantization: {0}")]
    Quantize(String),
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
    /// Integer dense layers ([`SentenceEmbedder::quantize`]), applied to
    /// every encoder graph.
    quant: Option<Arc<rlx::quant::Plan>>,
    /// Sentences per forward pass.
    pub batch_size: usize,
}

/// Bytes of `ts` as stored (block types by their blocks).
fn weight_bytes(ts: &[HostTensor]) -> usize {
    ts.iter()
        .map(|t| rlx_ir::limits::tensor_bytes(t.dtype(), t.shape().dims()).unwrap_or(0) as usize)
        .sum()
}

/// Read a small model file (config, tokenizer) whole, bounded by
/// `max_file_bytes` so a wrong path (a device, a huge file) cannot exhaust
/// memory.
fn read(dir: &Path, name: &str) -> Result<String, EmbedError> {
    let path = dir.join(name);
    rlx_ir::limits::read_bounded_to_string(&path).map_err(|e| match e {
        rlx_ir::limits::ReadError::Limit(l) => EmbedError::Ir(rlx_ir::IrError::Limit(l)),
        rlx_ir::limits::ReadError::Io { source, .. } => EmbedError::File {
            path,
            msg: format!("{source} (run ./scripts/fetch-models?)"),
        },
        e => EmbedError::File {
            path,
            msg: e.to_string(),
        },
    })
}

/// `w` (f32, rows a whole number of blocks) in block type `dtype`, by the
/// IR's `quantize` op on the CPU.
fn quantize(w: &HostTensor, dtype: rlx_ir::DType) -> Result<HostTensor, EmbedError> {
    let d: Vec<String> = w.shape().dims().iter().map(|d| d.to_string()).collect();
    let src = format!(
        "graph @quantize(%w: f32[{}]) {{\n  %q = quantize(%w) {{dtype={dtype}}}\n  return %q\n}}",
        d.join(",")
    );
    let g = rlx_ir::text::parse(&src)?;
    let out = rlx::compile(&g, Device::Cpu)?.run(std::slice::from_ref(w))?;
    Ok(out.into_iter().next().expect("one output"))
}

impl SentenceEmbedder {
    /// Load from a model directory, reporting progress.
    pub fn load(
        dir: impl AsRef<Path>,
        mut progress: impl FnMut(Progress),
    ) -> Result<Self, EmbedError> {
        let dir = dir.as_ref();
        progress(Progress::Reading("config.json".into()));
        let config = read(dir, "config.json")?;
        let sbert = read(dir, "sentence_bert_config.json").ok();
        progress(Progress::Reading("tokenizer.json".into()));
        let tokenizer = read(dir, "tokenizer.json")?;
        progress(Progress::Reading("model.safetensors".into()));
        let file = SafetensorsFile::open(dir.join("model.safetensors"))?;
        Self::from_parts(&config, sbert.as_deref(), &tokenizer, &file, progress)
    }

    /// Load from the model's files already in memory (the browser fetches
    /// them): `config.json`, `sentence_bert_config.json` if the model has
    /// one, `tokenizer.json`, and the opened `model.safetensors`.
    pub fn from_parts(
        config_json: &str,
        sentence_bert_config_json: Option<&str>,
        tokenizer_json: &str,
        file: &SafetensorsFile,
        mut progress: impl FnMut(Progress),
    ) -> Result<Self, EmbedError> {
        let config = BertConfig::from_json(config_json)?;
        // sentence-transformers truncates to max_seq_length (256 for MiniLM).
        let max_seq_length = sentence_bert_config_json
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .map_or(config.max_position_embeddings, |n| n as usize)
            .min(config.max_position_embeddings);
        let tokenizer = Tokenizer::from_json_str(tokenizer_json)?;
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
            quant: None,
            batch_size: 16,
        })
    }

    /// Post-training weight-only quantization ([`Bert::with_weight_dtype`]):
    /// every dense layer's f32 weight is quantized to `dtype` (the
    /// reference encoders, bytes as the `gguf` package makes them) and the
    /// encoder is rebuilt with `dequant_matmul`. Compiled programs are
    /// dropped. Returns the weight bytes before and after.
    pub fn quantize_weights(&mut self, dtype: rlx_ir::DType) -> Result<(usize, usize), EmbedError> {
        let bert = Bert::new(self.config.clone(), true).with_weight_dtype(dtype)?;
        let params = bert.parameters();
        let before = weight_bytes(&self.weights);
        let mut weights = Vec::with_capacity(params.len());
        for (p, w) in params.iter().zip(&self.weights) {
            weights.push(if p.ty.dtype == w.dtype() {
                w.clone()
            } else {
                quantize(w, p.ty.dtype)?
            });
        }
        let after = weight_bytes(&weights);
        self.bert = bert;
        self.weights = weights;
        self.session = Session::new(CompileOptions::default());
        Ok((before, after))
    }

    /// Mixed precision from now on ([`rlx::Amp`]): with `Amp::bf16()` or
    /// `Amp::f16()` the encoder's matmuls and attention run in 16 bits and
    /// its norms, softmax and pooling in f32 (the optimizer's autocast
    /// pass). The weights stay f32 (cast as they are read). Compiled
    /// programs are dropped.
    pub fn set_amp(&mut self, amp: rlx::Amp) {
        self.session = Session::new(CompileOptions {
            amp,
            ..CompileOptions::default()
        });
    }

    /// Post-training quantization of the dense layers to integer grids
    /// ([`rlx::quant`], ONNX Runtime's conventions): with
    /// `scheme.activations`, static int8 — each layer's input range is
    /// calibrated on `calibration` texts (padding left out) — else
    /// weight-only int8/int4 per tensor, channel or group (no texts
    /// needed). Weights become i8 values; compiled programs are dropped.
    /// Returns the plan (ranges and scales per layer) and the weight bytes
    /// before and after.
    pub fn quantize(
        &mut self,
        scheme: &rlx::quant::Scheme,
        calibration: &[&str],
    ) -> Result<(Arc<rlx::quant::Plan>, usize, usize), EmbedError> {
        if self.quant.is_some() || self.weights.iter().any(|w| w.dtype() != rlx_ir::DType::F32) {
            return Err(EmbedError::Quantize(
                "the weights are already quantized; load the model again".into(),
            ));
        }
        let candidates: Vec<usize> = (0..self.weights.len())
            .filter(|&k| self.weights[k].shape().rank() == 2)
            .map(|k| k + 3)
            .collect();
        let probe = self.bert.graph(1, 8)?;
        let dummy: Vec<HostTensor> = (0..3)
            .map(|k| {
                let t = probe.ty(probe.inputs[k]);
                HostTensor::zeros(t.dtype, t.shape.clone())
            })
            .collect::<Result<_, _>>()?;
        let mut ins: Vec<&HostTensor> = dummy.iter().collect();
        ins.extend(self.weights.iter());
        let dynamic = scheme.activations.map(|a| a.range) == Some(rlx::quant::Range::Dynamic);
        let plan = match scheme.activations {
            None => rlx::quant::Plan::weight_only(&probe, &candidates, scheme, &ins)?,
            Some(_) if dynamic => rlx::quant::Plan::weight_only(&probe, &candidates, scheme, &ins)?,
            Some(_) => {
                if calibration.is_empty() {
                    return Err(EmbedError::Quantize(
                        "static int8 needs calibration texts".into(),
                    ));
                }
                let mut cal = rlx::quant::Calibrator::new(candidates.iter().copied());
                for chunk in calibration.chunks(16) {
                    let [ids, mask, types] = self.encode(chunk)?;
                    let (b, s) = (ids.shape().dims()[0], ids.shape().dims()[1]);
                    let rows: Vec<bool> = mask.to_vec::<i64>()?.iter().map(|&m| m != 0).collect();
                    let mut ins = vec![&ids, &mask, &types];
                    ins.extend(self.weights.iter());
                    cal.observe(&self.bert.graph(b, s)?, &ins, Some(&rows))?;
                }
                cal.plan(&probe, scheme, &ins)?
            }
        };
        let before = weight_bytes(&self.weights);
        for &k in plan.sites.keys() {
            if let Some(w) = plan.weight(k) {
                self.weights[k - 3] = w?;
            }
        }
        let scales: usize = plan.sites.values().map(|s| 4 * s.weight.scales.len()).sum();
        let after = weight_bytes(&self.weights) + scales;
        let plan = Arc::new(plan);
        self.quant = Some(plan.clone());
        self.session = Session::new(CompileOptions::default());
        Ok((plan, before, after))
    }

    /// Post-training weight-only quantization with calibration (GPTQ,
    /// [`crate::gptq`]): the dense layers' inputs are recorded on
    /// `calibration` texts (one sentence per run, no padding), and each
    /// weight is quantized to `dtype` (q4_0, q4_1 or q8_0) column by
    /// column, spreading the rounding error over the columns left, so the
    /// layer's outputs on such inputs move as little as the bits allow.
    /// Each stage of weights reading one input is calibrated on the
    /// outputs of the stages before it, already quantized (sequential
    /// GPTQ); the Hessian is damped by its mean diagonal (measured best on
    /// MiniLM with 48 sentences: damping 0.01 / 0.1 / 1.0 gave worst
    /// cosines 0.860 / 0.902 / 0.918 for q4_0, see docs/gguf.md).
    /// Returns the weight bytes before and after.
    pub fn quantize_weights_gptq(
        &mut self,
        dtype: rlx_ir::DType,
        calibration: &[&str],
    ) -> Result<(usize, usize), EmbedError> {
        self.quantize_weights_gptq_damped(dtype, calibration, 1.0)
    }

    /// [`SentenceEmbedder::quantize_weights_gptq`] with the damping (the
    /// fraction of the Hessian's mean diagonal added to it; the GPTQ
    /// paper's default is 0.01).
    pub fn quantize_weights_gptq_damped(
        &mut self,
        dtype: rlx_ir::DType,
        calibration: &[&str],
        damp: f64,
    ) -> Result<(usize, usize), EmbedError> {
        use rlx_ir::DType::{Q4_0, Q4_1, Q8_0};
        if !matches!(dtype, Q4_0 | Q4_1 | Q8_0) {
            return Err(EmbedError::Quantize(format!(
                "GPTQ writes q4_0, q4_1 or q8_0, not {dtype}"
            )));
        }
        if calibration.is_empty() {
            return Err(EmbedError::Quantize("GPTQ needs calibration texts".into()));
        }
        let bert = Bert::new(self.config.clone(), true).with_weight_dtype(dtype)?;
        let params = bert.parameters();
        // Graph inputs of the f32 encoder: ids, mask, types, then weights.
        let dense: Vec<usize> = params
            .iter()
            .enumerate()
            .filter(|(k, p)| p.ty.dtype != self.weights[*k].dtype())
            .map(|(k, _)| k)
            .collect();
        // The calibration batch, padded; padded rows are left out of H.
        let enc = self.tokenizer.encode_batch(
            calibration,
            Padding::longest(),
            Truncation::max_length(self.max_seq_length),
        )?;
        let (b, s) = (calibration.len(), enc.ids_row(0).len());
        let flat = |f: &dyn Fn(usize) -> Vec<i64>| (0..b).flat_map(f).collect::<Vec<i64>>();
        let ids = HostTensor::from_slice(&flat(&|i| enc.ids_row(i).to_vec()), [b, s])?;
        let mask_v = flat(&|i| enc.attention_mask_row(i).to_vec());
        let mask = HostTensor::from_slice(&mask_v, [b, s])?;
        let types = HostTensor::from_slice(&vec![0i64; b * s], [b, s])?;
        let g = self.bert.graph(b, s)?;
        // Each dense weight is read as `matmul…(x, permute(w), …)`; the
        // weights reading one x are quantized together, in graph order,
        // each stage calibrated on the outputs of the stages before it
        // already quantized (sequential GPTQ).
        let mut stages: Vec<(rlx_ir::ValueId, Vec<usize>)> = vec![];
        for &k in &dense {
            let wv = g.inputs[3 + k];
            let pv = g
                .nodes
                .iter()
                .find(|n| n.op.name() == "permute" && n.inputs[0] == wv)
                .map(|n| n.outputs[0]);
            let x = g
                .nodes
                .iter()
                .find_map(|n| (n.inputs.len() >= 2 && Some(n.inputs[1]) == pv).then(|| n.inputs[0]))
                .ok_or_else(|| {
                    EmbedError::Quantize(format!("no matmul reads `{}`", params[k].name))
                })?;
            match stages.iter_mut().find(|(v, _)| *v == x) {
                Some((_, ks)) => ks.push(k),
                None => stages.push((x, vec![k])),
            }
        }
        stages.sort_by_key(|(v, _)| v.0);
        let before: usize = self.weights.iter().map(|t| t.numel() * 4).sum();
        let mut weights = self.weights.clone();
        let mut current = self.weights.clone();
        for (x, ks) in &stages {
            let mut gx = g.clone();
            gx.outputs = vec![*x];
            let mut ins = vec![&ids, &mask, &types];
            ins.extend(current.iter());
            let out = rlx::compile(&gx, Device::Cpu)?.run_refs(&ins)?;
            let xv = out[0].to_vec::<f32>()?;
            let n = xv.len() / (b * s);
            let mut h = crate::gptq::Hessian::new(n);
            for (row, &m) in xv.chunks_exact(n).zip(&mask_v) {
                if m != 0 {
                    h.add(row);
                }
            }
            for &k in ks {
                let w = &self.weights[k];
                let (rows, cols) = (w.shape().dims()[0], w.shape().dims()[1]);
                let (bytes, values) =
                    crate::gptq::quantize(&w.to_vec::<f32>()?, rows, cols, &h, dtype, damp)
                        .map_err(|e| EmbedError::Quantize(format!("{}: {e}", params[k].name)))?;
                weights[k] = HostTensor::from_le_bytes(dtype, w.shape().clone(), &bytes)?;
                current[k] = HostTensor::from_slice(&values, w.shape().clone())?;
            }
        }
        let after = weight_bytes(&weights);
        self.bert = bert;
        self.weights = weights;
        self.session = Session::new(CompileOptions::default());
        Ok((before, after))
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

    /// Run the encoder on `device` from now on (the CPU by default). The
    /// compile cache is per device, so switching back costs nothing.
    pub fn set_device(&mut self, device: Device) {
        self.device = device;
    }

    /// The device the encoder runs on.
    pub fn device(&self) -> Device {
        self.device
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

    /// Tokenize `texts` into the encoder's three data inputs (`input_ids`,
    /// `attention_mask`, `token_type_ids`, each `[batch, seq]` i64), padded
    /// to a common length rounded up to a multiple of 16.
    pub fn encode(&self, texts: &[&str]) -> Result<[HostTensor; 3], EmbedError> {
        let mut pad = Padding::longest();
        pad.multiple_of = Some(16);
        let enc =
            self.tokenizer
                .encode_batch(texts, pad, Truncation::max_length(self.max_seq_length))?;
        let (b, s) = enc.shape;
        let s = s.min(self.config.max_position_embeddings);
        Ok([
            HostTensor::from_slice(&enc.ids, [b, s])?,
            HostTensor::from_slice(&enc.attention_mask, [b, s])?,
            HostTensor::from_slice(&enc.type_ids, [b, s])?,
        ])
    }

    /// The pooled, normalized embeddings from the encoder's outputs.
    pub fn pooled(&self, outputs: &[HostTensor]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let pooled = outputs[1].to_vec::<f32>()?;
        let h = self.config.hidden_size;
        Ok(pooled.chunks(h).map(|c| c.to_vec()).collect())
    }

    /// One forward pass over `texts` padded to a common length.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.weights.is_empty() {
            return Err(EmbedError::Ir(rlx_ir::IrError::msg(
                "this embedder's weights were taken (take_weights); run the encoder with them",
            )));
        }
        let [ids, mask, types] = self.encode(texts)?;
        let (b, s) = (ids.shape().dims()[0], ids.shape().dims()[1]);
        let compiled = self.compiled(b, s)?;
        // The weights never change for this embedder: let the backend
        // prepare them once.
        let first = 3;
        compiled.keep_resident(&(first..first + self.weights.len()).collect::<Vec<_>>());
        let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
        inputs.extend(self.weights.iter());
        let outs = compiled.run_refs(&inputs)?;
        self.pooled(&outs)
    }

    /// The compiled encoder for (batch, seq) on this embedder's device,
    /// from the session's cache (compiled on first use): its dispatch
    /// report says how each node runs.
    pub fn compiled(&self, batch: usize, seq: usize) -> Result<Arc<rlx::Compiled>, EmbedError> {
        Ok(self
            .session
            .compile(&self.graph(batch, seq)?, self.device)?)
    }

    /// The encoder graph for (batch, seq) as this embedder runs it (with
    /// integer dense layers after [`SentenceEmbedder::quantize`]).
    pub fn graph(&self, batch: usize, seq: usize) -> Result<rlx::Graph, EmbedError> {
        let g = self.bert.graph(batch, seq)?;
        Ok(match &self.quant {
            Some(p) => p.apply(&g)?,
            None => g,
        })
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

    /// Move the parameters out, for callers that run the encoder
    /// themselves (the browser build, whose GPU runs are async) and keep
    /// them in their own shared form; [`embed`](Self::embed) then fails
    /// with a typed error instead of running without weights.
    pub fn take_weights(&mut self) -> Vec<HostTensor> {
        std::mem::take(&mut self.weights)
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
