//! GGUF on the command line: `rlx inspect FILE.gguf`, `rlx convert` between
//! safetensors and GGUF, `rlx quantize` to the GGUF block types.
//!
//! Conversions are bit-exact where a reference defines the result: a
//! quantized tensor converts to f32 exactly as `gguf.quants.dequantize`
//! gives it, and quantizing gives the bytes of the `gguf` package (Q4_0 …
//! Q8_0, MXFP4) or of ggml's encoders (Q2_K … Q6_K) — see
//! tests/vectors/gguf and scripts/check-gguf.

use crate::out::{CliError, CliResult, Out};
use indicatif::{ProgressBar, ProgressStyle};
use rlx::ir::{DType, HostTensor, TensorData};
use rlx_formats::gguf::{GgmlType, GgufFile, GgufWriter, Value};
use rlx_formats::safetensors::{self, SafetensorsFile};
use rlx_ref::kernels::quant::{dequantize_values, quantize_values, QUANTIZABLE};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub fn is_gguf(p: &Path) -> bool {
    p.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

fn is_safetensors(p: &Path) -> bool {
    p.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"))
}

fn input_err(e: impl std::fmt::Display) -> CliError {
    CliError::input(e.to_string())
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn dims(shape: &[usize]) -> String {
    let d: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", d.join(", "))
}

/// `rlx inspect FILE.gguf`: header, metadata (long arrays elided), the
/// tensor table and a histogram of tensor types.
pub fn inspect(path: &Path, json: bool) -> CliResult {
    let f = GgufFile::open(path).map_err(input_err)?;
    let mut o = Out::new();
    if json {
        let meta: serde_json::Map<String, serde_json::Value> = f
            .metadata()
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    serde_json::json!({"type": v.type_name(), "value": v.to_string()}),
                )
            })
            .collect();
        let tensors: Vec<serde_json::Value> = f
            .tensors()
            .iter()
            .map(|t| serde_json::json!({"name": t.name, "type": t.ggml_type.name(), "shape": t.shape, "offset": f.data_start() + t.offset, "bytes": t.size}))
            .collect();
        let doc = serde_json::json!({"format": "gguf", "version": f.version(), "alignment": f.alignment(), "metadata": meta, "tensors": tensors});
        writeln!(
            o,
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| CliError::failure(e.to_string()))?
        )?;
        return Ok(());
    }
    let total: u64 = f.tensors().iter().map(|t| t.size).sum();
    let params: u64 = f
        .tensors()
        .iter()
        .map(|t| t.shape.iter().product::<usize>() as u64)
        .sum();
    writeln!(
        o,
        "{}: GGUF v{}, {} metadata entries, {} tensors, {} parameters in {} (alignment {})",
        path.display(),
        f.version(),
        f.metadata().len(),
        f.tensors().len(),
        params,
        human(total),
        f.alignment()
    )?;
    writeln!(o, "metadata:")?;
    for (k, v) in f.metadata() {
        writeln!(o, "  {k} ({}) = {v}", v.type_name())?;
    }
    let mut hist: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for t in f.tensors() {
        let e = hist.entry(t.ggml_type.name()).or_default();
        e.0 += 1;
        e.1 += t.size;
    }
    let h: Vec<String> = hist
        .iter()
        .map(|(k, (n, b))| format!("{k} {n} ({})", human(*b)))
        .collect();
    writeln!(o, "tensor types: {}", h.join(", "))?;
    writeln!(o, "tensors (shape row-major, outermost first):")?;
    let w = f.tensors().iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in f.tensors() {
        writeln!(
            o,
            "  {:w$}  {:7}  {:>18}  {}",
            t.name,
            t.ggml_type.name(),
            dims(&t.shape),
            human(t.size)
        )?;
    }
    Ok(())
}

/// Tensors and string metadata read from either format.
struct Model {
    tensors: Vec<(String, Source)>,
    /// GGUF metadata (kept when writing GGUF); safetensors' becomes strings.
    metadata: Vec<(String, Value)>,
}

enum Source {
    Tensor(HostTensor),
    /// A GGUF tensor of a type rlx holds only as bytes.
    Raw(GgmlType, Vec<usize>, Vec<u8>),
}

fn load(path: &Path) -> CliResult<Model> {
    if is_gguf(path) {
        let f = GgufFile::open(path).map_err(input_err)?;
        let mut tensors = Vec::with_capacity(f.tensors().len());
        for t in f.tensors() {
            let s = match t.ggml_type.dtype() {
                Some(_) => Source::Tensor(f.tensor(&t.name).map_err(input_err)?),
                None => Source::Raw(
                    t.ggml_type,
                    t.shape.clone(),
                    f.raw_bytes(&t.name).map_err(input_err)?.to_vec(),
                ),
            };
            tensors.push((t.name.clone(), s));
        }
        Ok(Model {
            tensors,
            metadata: f.metadata().to_vec(),
        })
    } else if is_safetensors(path) {
        let f = SafetensorsFile::open(path)
            .map_err(input_err)?
            .allow_non_finite(true);
        let mut tensors = Vec::new();
        for name in f.names() {
            tensors.push((
                name.to_string(),
                Source::Tensor(f.tensor(name).map_err(input_err)?),
            ));
        }
        let metadata = f
            .metadata()
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        Ok(Model { tensors, metadata })
    } else {
        Err(CliError::usage(format!(
            "{}: rlx convert and quantize read .gguf and .safetensors files",
            path.display()
        )))
    }
}

/// f32 values of a float or quantized tensor, exactly as the reference
/// dequantizes (f32 arithmetic, so the f64 values are f32s).
fn to_f32(name: &str, t: &HostTensor) -> CliResult<Vec<f32>> {
    let v = match t.data() {
        TensorData::F32(v) => return Ok(v.clone()),
        TensorData::Packed(b) if rlx_cpu::fast::qmatmul::has_fast_decoder(t.dtype()) => {
            return Ok(decode_parallel(t.dtype(), b, t.numel()))
        }
        TensorData::Packed(_) => {
            dequantize_values(t).map_err(|e| CliError::input(format!("tensor `{name}`: {e}")))?
        }
        _ if t.dtype().is_float() => t
            .to_f64_vec()
            .map_err(|e| CliError::failure(e.to_string()))?,
        _ => {
            return Err(CliError::input(format!(
                "tensor `{name}` is {}, not a float tensor",
                t.dtype()
            )))
        }
    };
    Ok(v.into_iter().map(|x| x as f32).collect())
}

/// The fast engine's block decoders (the reference's values bit for bit)
/// on every core.
fn decode_parallel(d: DType, bytes: &[u8], numel: usize) -> Vec<f32> {
    let (block, bb) = match d.storage() {
        rlx::ir::dtype::Storage::Block { block, bytes } => (block, bytes),
        rlx::ir::dtype::Storage::Plain { .. } => (1, 1),
    };
    let mut out = vec![0.0f32; numel];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = (numel / block).div_ceil(threads).max(1) * block;
    std::thread::scope(|s| {
        for (i, o) in out.chunks_mut(per).enumerate() {
            let b = &bytes[i * per / block * bb..(i * per + o.len()) / block * bb];
            s.spawn(move || rlx_cpu::fast::qmatmul::decode(d, b, o));
        }
    });
    out
}

fn cast(name: &str, t: &HostTensor, to: DType) -> CliResult<HostTensor> {
    let v = to_f32(name, t)?;
    HostTensor::from_f64(
        to,
        t.shape().clone(),
        v.into_iter().map(f64::from).collect(),
    )
    .map_err(|e| CliError::failure(e.to_string()))
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// The input (.gguf or .safetensors).
    input: PathBuf,
    /// The output (.gguf or .safetensors).
    output: PathBuf,
    /// Store float tensors as this type (f32, f16, bf16); quantized GGUF
    /// tensors always dequantize (to f32, or to this type).
    #[arg(long = "type", value_name = "TYPE")]
    to: Option<String>,
}

/// `rlx convert IN OUT`.
pub fn convert(a: ConvertArgs) -> CliResult {
    let to = match a.to.as_deref() {
        None => None,
        Some(s) => Some(match s.to_ascii_lowercase().as_str() {
            "f32" => DType::F32,
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            _ => {
                return Err(CliError::usage(format!(
                "--type {s}: convert stores f32, f16 or bf16 (use `rlx quantize` for block types)"
            )))
            }
        }),
    };
    let m = load(&a.input)?;
    let mut out: Vec<(String, HostTensor)> = Vec::with_capacity(m.tensors.len());
    let mut dequantized = 0;
    let to_gguf = is_gguf(&a.output);
    for (name, s) in m.tensors {
        let t = match s {
            Source::Raw(ty, ..) => {
                return Err(CliError::input(format!(
                    "tensor `{name}` is {ty}, which rlx cannot dequantize; requantize the model with llama.cpp to a type rlx reads"
                )))
            }
            Source::Tensor(t) => t,
        };
        let t = if t.dtype().is_float() || matches!(t.data(), TensorData::Packed(_)) {
            let packed = matches!(t.data(), TensorData::Packed(_));
            dequantized += usize::from(packed);
            match (to, packed) {
                (Some(d), _) if d != t.dtype() => cast(&name, &t, d)?,
                (None, true) => cast(&name, &t, DType::F32)?,
                _ => t,
            }
        } else {
            t
        };
        out.push((name, t));
    }
    let mut o = Out::new();
    if to_gguf {
        let mut w = GgufWriter::new();
        for (k, v) in m.metadata {
            w.metadata(&k, v).map_err(input_err)?;
        }
        for (n, t) in &out {
            w.tensor(n, t).map_err(input_err)?;
        }
        w.write_file(&a.output).map_err(input_err)?;
    } else if is_safetensors(&a.output) {
        let mut meta = BTreeMap::new();
        let mut dropped = 0;
        for (k, v) in m.metadata {
            match v {
                Value::Array(..) => dropped += 1,
                Value::String(s) => drop(meta.insert(k, s)),
                v => drop(meta.insert(k, v.to_string())),
            }
        }
        if dropped > 0 {
            writeln!(o, "note: {dropped} array metadata entries (tokenizer vocabulary and the like) are not kept: safetensors metadata holds only strings")?;
        }
        let refs: Vec<(&str, &HostTensor)> = out.iter().map(|(n, t)| (n.as_str(), t)).collect();
        safetensors::write_file(&a.output, &refs, &meta).map_err(input_err)?;
    } else {
        return Err(CliError::usage(format!(
            "{}: write .gguf or .safetensors",
            a.output.display()
        )));
    }
    writeln!(
        o,
        "{}: {} tensors ({} dequantized) from {}",
        a.output.display(),
        out.len(),
        dequantized,
        a.input.display()
    )?;
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct QuantizeArgs {
    /// The input (.gguf or .safetensors).
    input: PathBuf,
    /// The output (.gguf).
    output: PathBuf,
    /// The block type: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k,
    /// q5_k, q6_k, mxfp4.
    #[arg(long = "type", value_name = "TYPE")]
    to: String,
    /// Quantize tensors whose last axis is not a whole number of --type
    /// blocks to this type instead (e.g. q8_0 for 384-wide rows under a
    /// k-quant); without it they are an error.
    #[arg(long, value_name = "TYPE")]
    fallback: Option<String>,
    /// Quantize tensors of at least this rank (1-D norms and biases stay
    /// as they are by default).
    #[arg(long, default_value_t = 2, value_name = "N")]
    min_rank: usize,
    /// Keep these tensors as they are (repeatable).
    #[arg(long, value_name = "NAME")]
    keep: Vec<String>,
}

fn block_type(s: &str) -> CliResult<DType> {
    QUANTIZABLE
        .iter()
        .copied()
        .find(|d| d.name() == s.to_ascii_lowercase())
        .ok_or_else(|| {
            let names: Vec<&str> = QUANTIZABLE.iter().map(|d| d.name()).collect();
            CliError::usage(format!(
                "--type {s}: not a block type rlx quantizes to ({})",
                names.join(", ")
            ))
        })
}

fn block_of(d: DType) -> usize {
    match d.storage() {
        rlx::ir::dtype::Storage::Block { block, .. } => block,
        rlx::ir::dtype::Storage::Plain { .. } => 1,
    }
}

/// Quantizes rows on every core: blocks are independent, so the bytes are
/// those of one sequential pass.
fn quantize_parallel(d: DType, x: &[f32]) -> Result<Vec<u8>, String> {
    let block = block_of(d);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let blocks = x.len() / block;
    if threads == 1 || blocks < 64 {
        return quantize_values(d, x);
    }
    let per = blocks.div_ceil(threads) * block;
    let parts: Vec<Result<Vec<u8>, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = x
            .chunks(per)
            .map(|c| s.spawn(move || quantize_values(d, c)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a quantize thread panicked".into()))
            })
            .collect()
    });
    let mut out = Vec::new();
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

/// `rlx quantize IN OUT --type T`.
pub fn quantize(a: QuantizeArgs) -> CliResult {
    let to = block_type(&a.to)?;
    let fallback = a.fallback.as_deref().map(block_type).transpose()?;
    if !is_gguf(&a.output) {
        return Err(CliError::usage(format!(
            "{}: quantized models are written as .gguf",
            a.output.display()
        )));
    }
    let m = load(&a.input)?;
    let mut w = GgufWriter::new();
    let mut meta = m.metadata;
    if !meta
        .iter()
        .any(|(k, _)| k == "general.quantization_version")
    {
        meta.push(("general.quantization_version".into(), Value::U32(2)));
    }
    for (k, v) in meta {
        w.metadata(&k, v).map_err(input_err)?;
    }
    let total: u64 = m
        .tensors
        .iter()
        .map(|(_, s)| match s {
            Source::Tensor(t) => t.numel() as u64,
            Source::Raw(_, shape, _) => shape.iter().product::<usize>() as u64,
        })
        .sum();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{spinner} quantizing {msg} {bar:30} {pos}/{len} values ({eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let (mut before, mut after) = (0u64, 0u64);
    for (name, s) in m.tensors {
        let t = match s {
            Source::Raw(ty, shape, bytes) => {
                *counts.entry(format!("{ty} (kept)")).or_default() += 1;
                before += bytes.len() as u64;
                after += bytes.len() as u64;
                w.raw_tensor(&name, ty, &shape, bytes).map_err(input_err)?;
                continue;
            }
            Source::Tensor(t) => t,
        };
        bar.set_message(name.clone());
        let old_bytes = rlx::ir::limits::tensor_bytes(t.dtype(), t.shape().dims()).unwrap_or(0);
        before += old_bytes;
        let is_weight = t.dtype().is_float() || matches!(t.data(), TensorData::Packed(_));
        let row = t.shape().dims().last().copied().unwrap_or(1);
        let chosen = if !is_weight || t.shape().rank() < a.min_rank || a.keep.contains(&name) {
            None
        } else if row.is_multiple_of(block_of(to)) {
            Some(to)
        } else if let Some(fb) = fallback.filter(|fb| row.is_multiple_of(block_of(*fb))) {
            Some(fb)
        } else {
            bar.finish_and_clear();
            return Err(CliError::input(format!(
                "tensor `{name}` has shape {} and its rows of {row} are not a whole number of {to} blocks of {}; \
                 pass --fallback TYPE (a type whose block divides {row}, e.g. q8_0 when 32 does) or --keep {name}",
                dims(t.shape().dims()),
                block_of(to)
            )));
        };
        match chosen {
            None => {
                *counts.entry(format!("{} (kept)", t.dtype())).or_default() += 1;
                after += old_bytes;
                w.tensor(&name, &t).map_err(input_err)?;
            }
            Some(d) => {
                let x = to_f32(&name, &t)?;
                let bytes = quantize_parallel(d, &x)
                    .map_err(|e| CliError::input(format!("tensor `{name}`: {e}")))?;
                after += bytes.len() as u64;
                *counts.entry(d.name().to_string()).or_default() += 1;
                let q = HostTensor::new(d, t.shape().clone(), TensorData::Packed(bytes))
                    .map_err(|e| CliError::failure(e.to_string()))?;
                w.tensor(&name, &q).map_err(input_err)?;
            }
        }
        bar.inc(t.numel() as u64);
    }
    bar.finish_and_clear();
    w.write_file(&a.output).map_err(input_err)?;
    let mut o = Out::new();
    let c: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    writeln!(
        o,
        "{}: {} -> {} ({:.2}x smaller); tensors: {}",
        a.output.display(),
        human(before),
        human(after),
        before as f64 / after.max(1) as f64,
        c.join(", ")
    )?;
    Ok(())
}
