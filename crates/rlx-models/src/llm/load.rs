//! Loading a decoder from a GGUF file: config, tokenizer and weights, each
//! checked against what the architecture needs before any graph is built.

use super::blocks::{DecoderModel, WeightTypes};
use super::config::LlmConfig;
use super::embed::TokenTable;
use super::generate::Generator;
use super::LlmError;
use crate::Progress;
use rlx::{Device, HostTensor};
use rlx_formats::GgufFile;
use rlx_ir::DType;
use rlx_tokenizers::{LlmTokenizer, LlmVocab};
use std::path::Path;

/// A loaded decoder LLM: config, tokenizer, the block tree and its weights.
pub struct LlmModel {
    pub config: LlmConfig,
    pub decoder: DecoderModel,
    pub tokenizer: LlmTokenizer,
    /// The Jinja chat template the file carries, if any.
    pub chat_template: Option<String>,
    /// The file's `general.name`, or its path.
    pub name: String,
    weights: Vec<HostTensor>,
    /// `token_embd.weight`, in the file's type.
    embedding: TokenTable,
    /// Decodes its rows (block types).
    row_decoder: super::embed::RowDecoder,
}

/// Each matrix's graph dtype: block types stay quantized, everything else
/// is taken as f32.
struct FileTypes<'a>(&'a GgufFile);

impl WeightTypes for FileTypes<'_> {
    fn dtype_of(&self, name: &str) -> DType {
        match self.0.info(name).ok().and_then(|i| i.ggml_type.dtype()) {
            Some(d) if matches!(d.storage(), rlx_ir::dtype::Storage::Block { block, .. } if block >= 32) => {
                d
            }
            _ => DType::F32,
        }
    }
    fn has(&self, name: &str) -> bool {
        self.0.info(name).is_ok()
    }
}

/// The graph that decodes a `dtype` tensor of `dims` to f32: the IR's
/// `dequantize` (a block type) or `cast`.
pub(crate) fn dequantize_graph(dtype: DType, dims: &[usize]) -> Result<rlx::Graph, LlmError> {
    let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let op = if dtype.is_quantized() {
        "dequantize"
    } else {
        "cast"
    };
    let src = format!(
        "graph @to_f32(%w: {dtype}[{}]) {{\n  %y = {op}(%w) {{dtype=f32}}\n  return %y\n}}",
        dims.join(",")
    );
    Ok(rlx_ir::text::parse(&src)?)
}

/// `t` decoded to f32 by the IR's `dequantize` (or `cast`) on the CPU.
fn to_f32(t: HostTensor) -> Result<HostTensor, LlmError> {
    if t.dtype() == DType::F32 {
        return Ok(t);
    }
    let g = dequantize_graph(t.dtype(), t.shape().dims())?;
    let out = rlx::compile(&g, Device::Cpu)?.run(std::slice::from_ref(&t))?;
    Ok(out.into_iter().next().expect("one output"))
}

/// That `file` has tensor `name` of shape `want`: a typed error naming it
/// otherwise (missing, or the shape the config does not imply).
fn check_tensor(
    file: &GgufFile,
    config: &LlmConfig,
    name: &str,
    want: &[usize],
) -> Result<(), LlmError> {
    let bad = |what: String| LlmError::Tensor {
        file: file.label().into(),
        tensor: name.into(),
        what,
    };
    let info = file.info(name).map_err(|_| {
        bad(format!(
            "missing; the {} architecture needs it",
            config.arch.name()
        ))
    })?;
    if info.shape != want {
        return Err(bad(format!(
            "shape {:?}, the config implies {want:?}",
            info.shape
        )));
    }
    Ok(())
}

/// Rows `rows` of the (vocab, `hidden`) tensor `name`: block types sliced
/// from the file's bytes (the whole table is never copied), others read
/// whole and sliced.
fn tensor_rows(
    file: &GgufFile,
    name: &str,
    rows: std::ops::Range<usize>,
    hidden: usize,
) -> Result<HostTensor, LlmError> {
    let dtype = file.info(name)?.ggml_type.dtype();
    if let Some(d) = dtype.filter(|d| d.is_quantized()) {
        let row = rlx_ir::limits::tensor_bytes(d, &[1, hidden]).unwrap_or(0) as usize;
        let bytes = &file.raw_bytes(name)?[rows.start * row..rows.end * row];
        let data = rlx_ir::TensorData::Packed(bytes.to_vec());
        return Ok(HostTensor::new(d, [rows.len(), hidden], data)?);
    }
    let all = to_f32(file.tensor(name)?)?.to_vec::<f32>()?;
    Ok(HostTensor::from_slice(
        &all[rows.start * hidden..rows.end * hidden],
        [rows.len(), hidden],
    )?)
}

/// The tokenizer metadata of `file` (`tokenizer.ggml.*`).
pub fn vocab_of(file: &GgufFile) -> Result<LlmVocab, LlmError> {
    let strings = |key: &str| -> Result<Vec<String>, LlmError> {
        match file.get(key) {
            None => Ok(vec![]),
            Some(_) => file
                .array(key)?
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| LlmError::Config {
                            file: file.label().into(),
                            what: format!("`{key}` holds a non-string"),
                        })
                })
                .collect(),
        }
    };
    let numbers = |key: &str| -> Result<Vec<f64>, LlmError> {
        match file.get(key) {
            None => Ok(vec![]),
            Some(_) => file
                .array(key)?
                .iter()
                .map(|v| {
                    v.as_f64().ok_or_else(|| LlmError::Config {
                        file: file.label().into(),
                        what: format!("`{key}` holds a non-number"),
                    })
                })
                .collect(),
        }
    };
    let id = |key: &str| -> Result<Option<u32>, LlmError> {
        match file.get(key) {
            None => Ok(None),
            Some(_) => Ok(u32::try_from(file.uint(key)?).ok()),
        }
    };
    let flag = |key: &str| match file.get(key) {
        Some(rlx_formats::gguf::Value::Bool(b)) => Some(*b),
        _ => None,
    };
    Ok(LlmVocab {
        model: file.str("tokenizer.ggml.model")?.to_string(),
        pre: file.str("tokenizer.ggml.pre").ok().map(str::to_string),
        tokens: strings("tokenizer.ggml.tokens")?,
        scores: numbers("tokenizer.ggml.scores")?
            .into_iter()
            .map(|s| s as f32)
            .collect(),
        token_type: numbers("tokenizer.ggml.token_type")?
            .into_iter()
            .map(|s| s as i32)
            .collect(),
        merges: strings("tokenizer.ggml.merges")?,
        bos: id("tokenizer.ggml.bos_token_id")?,
        eos: id("tokenizer.ggml.eos_token_id")?,
        eot: id("tokenizer.ggml.eot_token_id")?,
        eom: id("tokenizer.ggml.eom_token_id")?,
        unk: id("tokenizer.ggml.unknown_token_id")?,
        pad: id("tokenizer.ggml.padding_token_id")?,
        add_bos: flag("tokenizer.ggml.add_bos_token"),
        add_eos: flag("tokenizer.ggml.add_eos_token"),
        add_space_prefix: flag("tokenizer.ggml.add_space_prefix"),
        name: file.str("general.name").ok().map(str::to_string),
    })
}

impl LlmModel {
    /// Open a GGUF file (memory-mapped natively) and load it.
    pub fn open(
        path: impl AsRef<Path>,
        progress: impl FnMut(Progress),
    ) -> Result<LlmModel, LlmError> {
        let file = GgufFile::open(path)?;
        Self::from_gguf(&file, progress)
    }

    /// Load from an opened GGUF file: the config, the tokenizer, then every
    /// weight the architecture names, each checked for shape. Nothing is
    /// compiled yet.
    pub fn from_gguf(
        file: &GgufFile,
        mut progress: impl FnMut(Progress),
    ) -> Result<LlmModel, LlmError> {
        let config = LlmConfig::from_gguf(file)?;
        let tokenizer = LlmTokenizer::new(vocab_of(file)?)?;
        let decoder = DecoderModel::new(config.clone(), &FileTypes(file));
        let params = decoder.parameters();
        let total = params.len();
        let mut weights = Vec::with_capacity(total);
        for (i, p) in params.iter().enumerate() {
            let (name, rows) = decoder.source(&p.name);
            let name = name.as_str();
            // An output slice is rows of the whole (vocab, hidden) matrix.
            let whole = match &rows {
                Some(_) => vec![config.vocab_size, config.hidden],
                None => p.ty.dims().to_vec(),
            };
            check_tensor(file, &config, name, &whole)?;
            let t = match rows {
                Some(r) => tensor_rows(file, name, r, config.hidden)?,
                None => file.tensor(name)?,
            };
            let t = if t.dtype() == p.ty.dtype {
                t
            } else {
                to_f32(t)?
            };
            weights.push(t);
            progress(Progress::Weights { done: i + 1, total });
        }
        let embedding = Self::token_table(file, &config, &decoder, &params)?;
        progress(Progress::Ready {
            // A tied output projection is the embedding table, counted once.
            parameters: params.iter().map(|p| p.ty.shape.numel()).sum::<usize>()
                + match &embedding {
                    TokenTable::Own(t) => t.shape().numel(),
                    TokenTable::Weight(_) => 0,
                },
            bytes: weights
                .iter()
                .chain(match &embedding {
                    TokenTable::Own(t) => Some(t),
                    TokenTable::Weight(_) => None,
                })
                .map(|t| {
                    rlx_ir::limits::tensor_bytes(t.dtype(), t.shape().dims()).unwrap_or(0) as usize
                })
                .sum(),
        });
        let name = file
            .str("general.name")
            .map(str::to_string)
            .unwrap_or_else(|_| file.label().to_string());
        Ok(LlmModel {
            config,
            decoder,
            tokenizer,
            chat_template: file.str("tokenizer.chat_template").ok().map(str::to_string),
            name,
            weights,
            embedding,
            row_decoder: Default::default(),
        })
    }

    /// The embedding table: the tied output projection's weight, or
    /// `token_embd.weight` read in its stored type after a shape check.
    fn token_table(
        file: &GgufFile,
        config: &LlmConfig,
        decoder: &DecoderModel,
        params: &[rlx_ir::hir::Param],
    ) -> Result<TokenTable, LlmError> {
        const NAME: &str = "token_embd.weight";
        if config.tied_embeddings {
            // The output projection's weights (one, or its row slices).
            let parts = params
                .iter()
                .enumerate()
                .filter_map(|(i, p)| match decoder.source(&p.name) {
                    (n, rows) if n == NAME => Some((i, rows.map_or(0, |r| r.start))),
                    _ => None,
                })
                .collect();
            return Ok(TokenTable::Weight(parts));
        }
        check_tensor(file, config, NAME, &[config.vocab_size, config.hidden])?;
        let t = file.tensor(NAME)?;
        if !(t.dtype().is_float() || t.dtype().is_quantized()) {
            return Err(LlmError::Tensor {
                file: file.label().into(),
                tensor: NAME.into(),
                what: format!("type {}, not a float or block type", t.dtype()),
            });
        }
        Ok(TokenTable::Own(t))
    }

    /// The embedding rows of `ids`, as (1, t, hidden) f32 (zero rows pad
    /// past `ids.len()`).
    pub(crate) fn embed(&self, ids: &[u32], t: usize) -> Result<HostTensor, LlmError> {
        let parts: Vec<(&HostTensor, usize)> = match &self.embedding {
            TokenTable::Own(t) => vec![(t, 0)],
            TokenTable::Weight(w) => w.iter().map(|&(i, r)| (&self.weights[i], r)).collect(),
        };
        super::embed::rows(&parts, &self.row_decoder, ids, t).map_err(|what| LlmError::Tensor {
            file: self.name.clone(),
            tensor: "token_embd.weight".into(),
            what,
        })
    }

    /// The weights, in the decoder graph's parameter order.
    pub fn weights(&self) -> &[HostTensor] {
        &self.weights
    }

    /// A generator on `device` (its compiled graphs and cache are its own).
    pub fn generator(&self, device: Device) -> Generator<'_> {
        Generator::new(self, device)
    }
}
