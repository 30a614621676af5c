//! Node attributes: a small closed set of value kinds, checked against the
//! op's schema when a node is built or parsed.

use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::Graph;
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One attribute value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attr {
    Bool(bool),
    Int(i64),
    Float(#[serde(with = "json_float")] f64),
    Str(String),
    Ints(Vec<i64>),
    Floats(#[serde(with = "json_float::vec")] Vec<f64>),
    DType(DType),
    Tensor(HostTensor),
    Graph(Box<Graph>),
}

/// Float attributes in the JSON form: numbers, and `"nan"`, `"inf"`,
/// `"-inf"` for what a JSON number cannot hold (as tensor literals write
/// them). serde_json alone writes a non-finite float as `null`, which did
/// not read back: `pad {value=nan}` saved as JSON could not be loaded.
mod json_float {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum F {
        Num(f64),
        Str(String),
    }

    fn to(x: f64) -> F {
        if x.is_finite() {
            F::Num(x)
        } else if x.is_nan() {
            F::Str("nan".into())
        } else if x > 0.0 {
            F::Str("inf".into())
        } else {
            F::Str("-inf".into())
        }
    }

    fn from<E: serde::de::Error>(f: F) -> Result<f64, E> {
        match f {
            F::Num(x) => Ok(x),
            F::Str(s) => match s.as_str() {
                "nan" | "NaN" => Ok(f64::NAN),
                "inf" | "+inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                _ => Err(E::custom(format!(
                    "bad float `{s}` (a number, \"nan\", \"inf\" or \"-inf\")"
                ))),
            },
        }
    }

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        to(*x).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        from(F::deserialize(d)?)
    }

    pub mod vec {
        use super::*;

        pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(v.iter().map(|&x| to(x)))
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
            Vec::<F>::deserialize(d)?.into_iter().map(from).collect()
        }
    }
}

/// The kind of an attribute, as an op's schema declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrKind {
    Bool,
    Int,
    Float,
    Str,
    Ints,
    Floats,
    DType,
    Tensor,
    Graph,
}

impl Attr {
    pub fn kind(&self) -> AttrKind {
        match self {
            Attr::Bool(_) => AttrKind::Bool,
            Attr::Int(_) => AttrKind::Int,
            Attr::Float(_) => AttrKind::Float,
            Attr::Str(_) => AttrKind::Str,
            Attr::Ints(_) => AttrKind::Ints,
            Attr::Floats(_) => AttrKind::Floats,
            Attr::DType(_) => AttrKind::DType,
            Attr::Tensor(_) => AttrKind::Tensor,
            Attr::Graph(_) => AttrKind::Graph,
        }
    }

    /// Convert to `kind` where that is lossless (an int literal for a float
    /// attribute, an empty list for either list kind).
    pub fn coerce(self, kind: AttrKind) -> Result<Attr, Attr> {
        match (self, kind) {
            (a, k) if a.kind() == k => Ok(a),
            (Attr::Int(i), AttrKind::Float) => Ok(Attr::Float(i as f64)),
            (Attr::Ints(v), AttrKind::Floats) => {
                Ok(Attr::Floats(v.iter().map(|&i| i as f64).collect()))
            }
            (Attr::Floats(v), AttrKind::Ints) if v.is_empty() => Ok(Attr::Ints(vec![])),
            (Attr::Int(i), AttrKind::Ints) => Ok(Attr::Ints(vec![i])),
            (a, _) => Err(a),
        }
    }
}

/// The default of an attribute in an op schema.
#[derive(Clone, Copy, Debug)]
pub enum AttrDefault {
    /// Must be given.
    Required,
    /// May be absent; the op reads it as `None`.
    Optional,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'static str),
    Ints(&'static [i64]),
    DType(DType),
}

impl AttrDefault {
    fn value(self) -> Option<Attr> {
        Some(match self {
            AttrDefault::Required | AttrDefault::Optional => return None,
            AttrDefault::Bool(b) => Attr::Bool(b),
            AttrDefault::Int(i) => Attr::Int(i),
            AttrDefault::Float(f) => Attr::Float(f),
            AttrDefault::Str(s) => Attr::Str(s.into()),
            AttrDefault::Ints(v) => Attr::Ints(v.to_vec()),
            AttrDefault::DType(d) => Attr::DType(d),
        })
    }
}

/// One attribute of an op schema.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    pub default: AttrDefault,
}

/// Shorthand for schema tables.
pub const fn attr(name: &'static str, kind: AttrKind, default: AttrDefault) -> AttrSpec {
    AttrSpec {
        name,
        kind,
        default,
    }
}

/// The attributes of one node, sorted by name (so printing is stable).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Attrs(pub BTreeMap<String, Attr>);

impl Attrs {
    pub fn new() -> Self {
        Self::default()
    }
    /// Builder-style insert.
    pub fn with(mut self, name: &str, value: impl Into<Attr>) -> Self {
        self.0.insert(name.to_string(), value.into());
        self
    }
    pub fn set(&mut self, name: &str, value: impl Into<Attr>) {
        self.0.insert(name.to_string(), value.into());
    }
    pub fn get(&self, name: &str) -> Option<&Attr> {
        self.0.get(name)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn missing(name: &str, want: &str) -> IrError {
        IrError::Attr {
            op: String::new(),
            attr: name.into(),
            msg: format!("expected {want}"),
        }
    }
    pub fn int(&self, name: &str) -> Result<i64, IrError> {
        match self.get(name) {
            Some(Attr::Int(v)) => Ok(*v),
            _ => Err(Self::missing(name, "an int")),
        }
    }
    pub fn float(&self, name: &str) -> Result<f64, IrError> {
        match self.get(name) {
            Some(Attr::Float(v)) => Ok(*v),
            Some(Attr::Int(v)) => Ok(*v as f64),
            _ => Err(Self::missing(name, "a float")),
        }
    }
    pub fn opt_float(&self, name: &str) -> Option<f64> {
        self.float(name).ok()
    }
    pub fn bool(&self, name: &str) -> Result<bool, IrError> {
        match self.get(name) {
            Some(Attr::Bool(v)) => Ok(*v),
            _ => Err(Self::missing(name, "a bool")),
        }
    }
    pub fn str(&self, name: &str) -> Result<&str, IrError> {
        match self.get(name) {
            Some(Attr::Str(v)) => Ok(v),
            _ => Err(Self::missing(name, "a string")),
        }
    }
    pub fn ints(&self, name: &str) -> Result<&[i64], IrError> {
        match self.get(name) {
            Some(Attr::Ints(v)) => Ok(v),
            _ => Err(Self::missing(name, "a list of ints")),
        }
    }
    pub fn floats(&self, name: &str) -> Result<&[f64], IrError> {
        match self.get(name) {
            Some(Attr::Floats(v)) => Ok(v),
            _ => Err(Self::missing(name, "a list of floats")),
        }
    }
    pub fn dtype(&self, name: &str) -> Result<DType, IrError> {
        match self.get(name) {
            Some(Attr::DType(v)) => Ok(*v),
            _ => Err(Self::missing(name, "a dtype")),
        }
    }
    pub fn tensor(&self, name: &str) -> Result<&HostTensor, IrError> {
        match self.get(name) {
            Some(Attr::Tensor(v)) => Ok(v),
            _ => Err(Self::missing(name, "a tensor")),
        }
    }
    pub fn graph(&self, name: &str) -> Result<&Graph, IrError> {
        match self.get(name) {
            Some(Attr::Graph(v)) => Ok(v),
            _ => Err(Self::missing(name, "a graph")),
        }
    }

    /// Check against `schema`: reject unknown names and wrong kinds, coerce
    /// lossless literals, and fill defaults.
    pub fn normalize(mut self, op: &str, schema: &[AttrSpec]) -> Result<Attrs, IrError> {
        let err = |attr: &str, msg: String| IrError::Attr {
            op: op.into(),
            attr: attr.into(),
            msg,
        };
        for name in self.0.keys() {
            if !schema.iter().any(|s| s.name == name) {
                let known: Vec<_> = schema.iter().map(|s| s.name).collect();
                return Err(err(
                    name,
                    format!("unknown attribute; `{op}` takes {known:?}"),
                ));
            }
        }
        for spec in schema {
            match self.0.remove(spec.name) {
                Some(v) => {
                    let v = v.coerce(spec.kind).map_err(|v| {
                        err(
                            spec.name,
                            format!("expected {:?}, found {:?}", spec.kind, v.kind()),
                        )
                    })?;
                    self.0.insert(spec.name.into(), v);
                }
                None => match spec.default {
                    AttrDefault::Required => {
                        return Err(err(spec.name, "required attribute is missing".into()))
                    }
                    d => {
                        if let Some(v) = d.value() {
                            self.0.insert(spec.name.into(), v);
                        }
                    }
                },
            }
        }
        Ok(self)
    }
}

impl Attrs {
    /// Check that these attributes are exactly what [`Attrs::normalize`]
    /// would return for `schema` (every name known, every kind the
    /// declared one, every default filled) without copying them: a
    /// graph-valued attribute may hold a whole nested region, and a copy
    /// per check made verification quadratic in the nesting depth.
    pub fn check_normalized(&self, op: &str, schema: &[AttrSpec]) -> Result<(), IrError> {
        let err = |attr: &str, msg: String| IrError::Attr {
            op: op.into(),
            attr: attr.into(),
            msg,
        };
        for (name, v) in &self.0 {
            let Some(spec) = schema.iter().find(|s| s.name == name) else {
                let known: Vec<_> = schema.iter().map(|s| s.name).collect();
                return Err(err(
                    name,
                    format!("unknown attribute; `{op}` takes {known:?}"),
                ));
            };
            if v.kind() != spec.kind {
                return Err(err(
                    name,
                    format!(
                        "expected {:?}, found {:?} (attributes are not normalized)",
                        spec.kind,
                        v.kind()
                    ),
                ));
            }
        }
        for spec in schema {
            if self.0.contains_key(spec.name) {
                continue;
            }
            match spec.default {
                AttrDefault::Required => {
                    return Err(err(spec.name, "required attribute is missing".into()))
                }
                AttrDefault::Optional => {}
                _ => {
                    return Err(err(
                        spec.name,
                        "the default is missing (attributes are not normalized)".into(),
                    ))
                }
            }
        }
        Ok(())
    }
}

macro_rules! attr_from {
    ($($t:ty => $var:ident),*) => {$(
        impl From<$t> for Attr { fn from(v: $t) -> Self { Attr::$var(v.into()) } }
    )*};
}
attr_from!(bool => Bool, i64 => Int, f64 => Float, String => Str, &str => Str,
    Vec<i64> => Ints, Vec<f64> => Floats, DType => DType, HostTensor => Tensor);

impl From<i32> for Attr {
    fn from(v: i32) -> Self {
        Attr::Int(v as i64)
    }
}
impl From<usize> for Attr {
    fn from(v: usize) -> Self {
        Attr::Int(v as i64)
    }
}
impl From<&[i64]> for Attr {
    fn from(v: &[i64]) -> Self {
        Attr::Ints(v.to_vec())
    }
}
impl From<Graph> for Attr {
    fn from(g: Graph) -> Self {
        Attr::Graph(Box::new(g))
    }
}
