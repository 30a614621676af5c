//! ONNX external data: tensors whose bytes live in files beside the model
//! (`data_location: EXTERNAL`, with `location`, `offset` and `length`
//! entries) — how models over 2 GB, and many exported ones, are saved.
//!
//! The importer does not open files itself (this crate runs in the
//! browser too): an [`ExternalData`] resolver gives a file's bytes by its
//! location. Natively the CLI reads files beside the model; in a page the
//! caller hands over the fetched files ([`ExternalData::from_files`]).
//! Each file is asked for once; every tensor's range is bounds-checked.

use crate::proto::tensor_proto::DataLocation;
use crate::proto::{AttributeProto, GraphProto, ModelProto, TensorProto};
use crate::OnnxError;
use std::collections::HashMap;
use std::sync::Arc;

/// A file's bytes by its `location` (a relative path, checked before the
/// call: no absolute paths, no `..`), or why it cannot be had.
pub type Resolve = dyn Fn(&str) -> Result<Vec<u8>, String> + Send + Sync;

/// Where external tensor data comes from ([`crate::ImportOptions::external`]).
#[derive(Clone)]
pub struct ExternalData(Arc<Resolve>);

impl ExternalData {
    /// A resolver called once per file location.
    pub fn new(f: impl Fn(&str) -> Result<Vec<u8>, String> + Send + Sync + 'static) -> Self {
        ExternalData(Arc::new(f))
    }

    /// Files given up front, by location (a page that fetched them).
    pub fn from_files(files: HashMap<String, Vec<u8>>) -> Self {
        let files = Arc::new(files);
        ExternalData::new(move |loc| {
            files.get(loc).cloned().ok_or_else(|| {
                let mut have: Vec<&str> = files.keys().map(|s| s.as_str()).collect();
                have.sort_unstable();
                format!("no file `{loc}` was given (given: {have:?})")
            })
        })
    }
}

impl std::fmt::Debug for ExternalData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExternalData(..)")
    }
}

fn is_external(t: &TensorProto) -> bool {
    t.data_location() == DataLocation::External
}

/// Every tensor of a graph and its subgraphs: initializers, and tensors
/// in node attributes (`Constant`'s value).
fn for_tensors<'a>(g: &'a GraphProto, f: &mut impl FnMut(&'a TensorProto)) {
    g.initializer.iter().for_each(&mut *f);
    for n in &g.node {
        for a in &n.attribute {
            for_attr(a, f);
        }
    }
}

fn for_attr<'a>(a: &'a AttributeProto, f: &mut impl FnMut(&'a TensorProto)) {
    a.t.iter().chain(&a.tensors).for_each(&mut *f);
    for g in a.g.iter().chain(&a.graphs) {
        for_tensors(g, f);
    }
}

fn for_tensors_mut(
    g: &mut GraphProto,
    f: &mut impl FnMut(&mut TensorProto) -> Result<(), OnnxError>,
) -> Result<(), OnnxError> {
    for t in &mut g.initializer {
        f(t)?;
    }
    for n in &mut g.node {
        for a in &mut n.attribute {
            for t in a.t.iter_mut().chain(&mut a.tensors) {
                f(t)?;
            }
            for sub in a.g.iter_mut().chain(&mut a.graphs) {
                for_tensors_mut(sub, f)?;
            }
        }
    }
    Ok(())
}

/// The distinct file locations a model's external tensors name, in first
/// use order (what a page must fetch before importing).
pub fn locations(model: &ModelProto) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(g) = &model.graph {
        for_tensors(g, &mut |t| {
            if is_external(t) {
                if let Some(loc) = entry(t, "location") {
                    if !out.iter().any(|l| l == loc) {
                        out.push(loc.to_string());
                    }
                }
            }
        });
    }
    out
}

/// [`locations`] of a model's bytes.
pub fn files(bytes: &[u8]) -> Result<Vec<String>, OnnxError> {
    use prost::Message;
    let m = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    Ok(locations(&m))
}

/// Whether any tensor of the model keeps its data in a file.
pub(crate) fn used(model: &ModelProto) -> bool {
    let mut any = false;
    if let Some(g) = &model.graph {
        for_tensors(g, &mut |t| any |= is_external(t));
    }
    any
}

fn entry<'a>(t: &'a TensorProto, key: &str) -> Option<&'a str> {
    t.external_data
        .iter()
        .find(|e| e.key() == key)
        .map(|e| e.value())
}

/// A location that stays inside the model's directory.
fn check_location(loc: &str) -> Result<(), String> {
    let parts: Vec<&str> = loc.split(['/', '\\']).collect();
    if loc.is_empty() || loc.starts_with(['/', '\\']) || loc.contains(':') || parts.contains(&"..")
    {
        return Err(format!(
            "location `{loc}` is not a relative path inside the model's directory"
        ));
    }
    Ok(())
}

/// Reads every external tensor's bytes into `raw_data` (the model then
/// imports like one saved in a single file).
pub(crate) fn resolve(model: &mut ModelProto, ext: Option<&ExternalData>) -> Result<(), OnnxError> {
    let limits = rlx_ir::limits::limits();
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    let Some(g) = model.graph.as_mut() else {
        return Ok(());
    };
    for_tensors_mut(g, &mut |t| {
        if !is_external(t) {
            return Ok(());
        }
        let name = t.name().to_string();
        let bad = |m: String| OnnxError::Invalid(format!("tensor `{name}`: external data: {m}"));
        let loc = entry(t, "location")
            .ok_or_else(|| bad("no `location` entry".into()))?
            .to_string();
        check_location(&loc).map_err(bad)?;
        let number = |key: &str| -> Result<Option<u64>, OnnxError> {
            entry(t, key)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| bad(format!("`{key}` is `{v}`, not a byte count")))
                })
                .transpose()
        };
        let (offset, length) = (number("offset")?.unwrap_or(0), number("length")?);
        if !files.contains_key(&loc) {
            let Some(ext) = ext else {
                return Err(bad(format!(
                    "its bytes are in the file `{loc}`, and no resolver was given \
                     (ImportOptions::external; `rlx run` reads files beside the model, \
                     the npm package takes `externalData`)"
                )));
            };
            let bytes = (ext.0)(&loc).map_err(|e| bad(format!("file `{loc}`: {e}")))?;
            limits
                .check_file_bytes(&format!("external data file `{loc}`"), bytes.len() as u64)
                .map_err(|e| OnnxError::Ir(e.into()))?;
            files.insert(loc.clone(), bytes);
        }
        let file = &files[&loc];
        let size = file.len() as u64;
        let end = match length {
            Some(l) => offset.checked_add(l),
            None => Some(size),
        };
        let range = match end {
            Some(end) if offset <= end && end <= size => offset as usize..end as usize,
            _ => {
                return Err(bad(format!(
                    "bytes {offset}..{} are outside the file `{loc}` of {size} bytes",
                    end.map_or("overflow".to_string(), |e| e.to_string())
                )))
            }
        };
        t.raw_data = Some(file[range].to_vec());
        t.external_data.clear();
        t.set_data_location(DataLocation::Default);
        Ok(())
    })
}
