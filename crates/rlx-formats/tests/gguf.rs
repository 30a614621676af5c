//! GGUF reading and writing against the `gguf` Python package
//! (tests/vectors/gguf/all-types.{gguf,json}, made by its generate.py with
//! `gguf.GGUFWriter` and read back with `gguf.GGUFReader`), and broken
//! files, each refused with a typed error.

use rlx_formats::gguf::{GgmlType, GgufFile, GgufWriter, Value, ValueType};
use rlx_formats::FormatError;
use rlx_ir::{DType, HostTensor, TensorData};
use serde_json::Value as Json;

fn dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/gguf")
}

fn reference() -> (Vec<u8>, Json) {
    let bytes = std::fs::read(dir().join("all-types.gguf")).unwrap();
    let json =
        serde_json::from_str(&std::fs::read_to_string(dir().join("all-types.json")).unwrap())
            .unwrap();
    (bytes, json)
}

/// `GGUFReader.contents()` of a value: nested arrays come back flattened.
fn to_json(v: &Value) -> Json {
    match v {
        Value::U8(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        Value::F32(x) => f64::from(*x).into(),
        Value::F64(x) => (*x).into(),
        Value::Bool(x) => (*x).into(),
        Value::String(s) => s.as_str().into(),
        Value::Array(ValueType::Array, items) => Json::Array(
            items
                .iter()
                .flat_map(|i| match to_json(i) {
                    Json::Array(a) => a,
                    j => vec![j],
                })
                .collect(),
        ),
        Value::Array(_, items) => Json::Array(items.iter().map(to_json).collect()),
    }
}

fn type_names(v: &Value) -> Vec<String> {
    let mut out = vec![v.value_type().name().to_string()];
    if let Value::Array(t, items) = v {
        match items.first() {
            Some(first) if *t == ValueType::Array => out.extend(type_names(first)),
            _ => out.push(t.name().to_string()),
        }
    }
    out
}

fn gguf_type_name(t: &str) -> &'static str {
    match t {
        "UINT8" => "u8",
        "INT8" => "i8",
        "UINT16" => "u16",
        "INT16" => "i16",
        "UINT32" => "u32",
        "INT32" => "i32",
        "FLOAT32" => "f32",
        "BOOL" => "bool",
        "STRING" => "string",
        "ARRAY" => "array",
        "UINT64" => "u64",
        "INT64" => "i64",
        "FLOAT64" => "f64",
        other => panic!("unknown type {other}"),
    }
}

#[test]
fn reads_what_gguf_wrote() {
    let (bytes, want) = reference();
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), want["alignment"].as_u64().unwrap());
    assert_eq!(f.data_start(), want["data_offset"].as_u64().unwrap());
    let fields: Vec<&Json> = want["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| !j["key"].as_str().unwrap().starts_with("GGUF."))
        .collect();
    assert_eq!(f.metadata().len(), fields.len());
    for ((k, v), j) in f.metadata().iter().zip(fields) {
        assert_eq!(k, j["key"].as_str().unwrap());
        let types: Vec<&str> = j["type"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| gguf_type_name(t.as_str().unwrap()))
            .collect();
        assert_eq!(type_names(v), types, "{k}");
        assert_eq!(to_json(v), j["value"], "{k}");
    }
    // The nested array, which GGUFReader flattens, item by item.
    let nested = f.array("t.arr.nested").unwrap();
    assert_eq!(
        nested[0],
        Value::Array(ValueType::I32, vec![Value::I32(1), Value::I32(2)])
    );
    assert_eq!(nested[1], Value::Array(ValueType::I32, vec![Value::I32(3)]));

    let tensors = want["tensors"].as_array().unwrap();
    assert_eq!(f.tensors().len(), tensors.len());
    for (t, j) in f.tensors().iter().zip(tensors) {
        assert_eq!(t.name, j["name"].as_str().unwrap());
        assert_eq!(t.ggml_type.name(), j["type"].as_str().unwrap());
        let ne: Vec<usize> = j["ne"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(
            t.shape.iter().rev().copied().collect::<Vec<_>>(),
            ne,
            "{}",
            t.name
        );
        assert_eq!(f.data_start() + t.offset, j["offset"].as_u64().unwrap());
        assert_eq!(t.size, j["bytes"].as_u64().unwrap());
        let hex: String = f
            .raw_bytes(&t.name)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, j["hex"].as_str().unwrap(), "{}", t.name);
        let loaded = f.tensor(&t.name).unwrap();
        assert_eq!(loaded.shape().dims(), &t.shape[..]);
        assert_eq!(Some(loaded.dtype()), t.ggml_type.dtype());
    }
    let w = f.tensor("w.f32").unwrap().to_vec::<f32>().unwrap();
    assert_eq!(w.len(), 15);
    assert_eq!(f.tensor("w.q4_k").unwrap().dtype(), DType::Q4K);
    assert_eq!(f.uint("llama.context_length").unwrap(), 2048);
    assert_eq!(f.str("general.architecture").unwrap(), "llama");
    assert!((f.float("t.f32").unwrap() - 0.1).abs() < 1e-7);
}

#[test]
fn writes_what_gguf_writes_byte_for_byte() {
    let (bytes, _) = reference();
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        w.metadata(k, v.clone()).unwrap();
    }
    for t in f.tensors() {
        // Through HostTensor where rlx has the dtype, so both paths count.
        match f.tensor(&t.name) {
            Ok(h) => w.tensor(&t.name, &h).unwrap(),
            Err(_) => w
                .raw_tensor(
                    &t.name,
                    t.ggml_type,
                    &t.shape,
                    f.raw_bytes(&t.name).unwrap().to_vec(),
                )
                .unwrap(),
        };
    }
    let out = w.to_bytes();
    assert_eq!(out.len(), bytes.len());
    let first = out.iter().zip(&bytes).position(|(a, b)| a != b);
    assert_eq!(first, None, "first differing byte");
}

#[test]
fn types_rlx_holds_as_bytes_only_are_named() {
    let mut w = GgufWriter::new();
    w.raw_tensor("iq", GgmlType::IQ4_NL, &[2, 32], vec![7; 36])
        .unwrap();
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.raw_bytes("iq").unwrap(), &[7; 36][..]);
    let e = f.tensor("iq").unwrap_err();
    assert!(matches!(e, FormatError::GgufType { .. }), "{e}");
    assert!(e.to_string().contains("`iq` is IQ4_NL"), "{e}");
    let e = f.tensor("iqq").unwrap_err();
    assert!(e.to_string().contains("closest names: `iq`"), "{e}");
}

#[test]
fn custom_alignment_round_trips() {
    let mut w = GgufWriter::new();
    w.alignment(64).unwrap();
    let t = HostTensor::new(DType::I8, [3], TensorData::I8(vec![1, -2, 3])).unwrap();
    w.tensor("a", &t).unwrap().tensor("b", &t).unwrap();
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_start() % 64, 0);
    assert_eq!(f.info("b").unwrap().offset, 64);
    assert_eq!(f.tensor("b").unwrap(), t);
}

#[test]
fn the_writer_refuses_what_readers_would() {
    let mut w = GgufWriter::new();
    let q = HostTensor::new(DType::Q4_0, [32], TensorData::Packed(vec![0; 18])).unwrap();
    w.tensor("q", &q).unwrap();
    assert!(w.tensor("q", &q).is_err(), "duplicate name");
    assert!(
        w.raw_tensor("r", GgmlType::Q4_0, &[33], vec![0; 18])
            .is_err(),
        "partial block"
    );
    assert!(
        w.raw_tensor("r", GgmlType::F32, &[3], vec![0; 8]).is_err(),
        "wrong byte count"
    );
    assert!(
        w.metadata("k", Value::Array(ValueType::U8, vec![]))
            .is_err(),
        "empty array"
    );
    assert!(
        w.metadata("k", Value::Array(ValueType::U8, vec![Value::I8(1)]))
            .is_err(),
        "mixed array"
    );
    assert!(w.alignment(48).is_err());
    let b = HostTensor::new(DType::Bool, [1], TensorData::Bool(vec![true])).unwrap();
    assert!(w.tensor("b", &b).is_err(), "GGUF has no bool");
}

// ------------------------------------------------------------ broken files

/// Little-endian byte builder for hand-made headers.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn header(version: u32, tensors: u64, kv: u64) -> B {
        let mut b = B(b"GGUF".to_vec());
        b.u32(version).u64(tensors).u64(kv);
        b
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend(s.as_bytes());
        self
    }
    /// A tensor info: name, ne (innermost first), type id, offset.
    fn info(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(ne.len() as u32);
        for &d in ne {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn pad(&mut self, extra: usize) -> Vec<u8> {
        let mut v = self.0.clone();
        v.resize(v.len().div_ceil(32) * 32 + extra, 0);
        v
    }
}

fn refuse(bytes: Vec<u8>, needle: &str) {
    let e = GgufFile::from_bytes_labeled(bytes, "bad.gguf").unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with("bad.gguf: "), "{m}");
    assert!(m.contains(needle), "wanted {needle:?} in: {m}");
}

#[test]
fn every_truncation_of_a_real_file_is_an_error() {
    let (bytes, _) = reference();
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    // Anything shorter than the end of the last tensor's data is refused;
    // only the trailing padding may go.
    let last = f
        .tensors()
        .iter()
        .map(|t| f.data_start() + t.offset + t.size)
        .max()
        .unwrap();
    for len in 0..bytes.len() {
        let r = GgufFile::from_bytes(bytes[..len].to_vec());
        assert_eq!(r.is_ok(), len as u64 >= last, "length {len}");
    }
}

#[test]
fn wrong_magic_version_and_endianness() {
    refuse(b"PK\x03\x04rest of a zip".to_vec(), "not a GGUF file");
    refuse(B::header(1, 0, 0).0, "version 1");
    refuse(B::header(3u32.swap_bytes(), 0, 0).0, "big-endian");
    refuse(B::header(77, 0, 0).0, "version 77 is unknown");
    assert!(GgufFile::from_bytes(B::header(2, 0, 0).0).is_ok());
}

#[test]
fn huge_counts_and_lengths_are_refused_before_allocating() {
    refuse(B::header(3, u64::MAX, 0).0, "more than the 0 bytes");
    refuse(B::header(3, 0, 1 << 60).0, "more than the 0 bytes");
    let mut b = B::header(3, 0, 1);
    b.u64(u64::MAX).u64(0);
    refuse(b.0, "needs 18446744073709551615 bytes");
    let mut b = B::header(3, 0, 1);
    b.str("k").u32(9).u32(0).u64(u64::MAX / 2);
    refuse(b.0, "declares 9223372036854775807 items of u8");
    // Arrays nested 9 deep.
    let mut b = B::header(3, 0, 1);
    b.str("k").u32(9);
    for _ in 0..9 {
        b.u32(9).u64(1);
    }
    b.0.extend([0; 64]);
    refuse(b.0, "nests arrays deeper than 8");
}

#[test]
fn bad_values_and_keys() {
    let mut b = B::header(3, 0, 1);
    b.str("k").u32(13).u32(0);
    refuse(b.0, "value type 13, which GGUF does not define");
    let mut b = B::header(3, 0, 1);
    b.str("k").u32(7);
    b.0.push(2);
    refuse(b.0, "a bool stored as 2");
    let mut b = B::header(3, 0, 2);
    b.str("k").u32(4).u32(1).str("k").u32(4).u32(1);
    refuse(b.0, "metadata key `k` appears twice");
    let mut b = B::header(3, 0, 1);
    b.u64(2);
    b.0.extend([0xff, 0xfe]);
    b.u32(4).u32(0);
    refuse(b.0, "not valid UTF-8");
    let mut b = B::header(3, 0, 1);
    b.str("general.alignment").u32(4).u32(48);
    refuse(b.0, "must be a u32 power of two");
}

#[test]
fn bad_tensor_infos() {
    let one = |ne: &[u64], ty: u32, offset: u64, extra: usize| {
        let mut b = B::header(3, 1, 0);
        b.info("w", ne, ty, offset);
        b.pad(extra)
    };
    refuse(
        one(&[4], 99, 0, 16),
        "ggml type 99, which gguf 0.19.0 does not know",
    );
    refuse(one(&[4], 0, 8, 64), "not a multiple of the alignment 32");
    refuse(one(&[4], 0, 0, 8), "ends past the end of the file");
    refuse(one(&[33], 2, 0, 64), "not a multiple of the block size 32");
    refuse(one(&[1 << 40, 1 << 40], 0, 0, 0), "overflows");
    refuse(one(&[1; 9], 0, 0, 0), "9 dimensions");
    let mut b = B::header(3, 2, 0);
    b.info("w", &[1], 0, 0).info("w", &[1], 0, 32);
    refuse(b.pad(64), "tensor `w` appears twice");
    // A well-formed file of the same shape opens.
    assert!(GgufFile::from_bytes(one(&[4], 0, 0, 16)).is_ok());
}

#[test]
fn missing_or_mistyped_metadata_names_the_key() {
    let mut w = GgufWriter::new();
    w.metadata("n", Value::String("x".into())).unwrap();
    let f = GgufFile::from_bytes_labeled(w.to_bytes(), "m.gguf").unwrap();
    let e = f.uint("llama.block_count").unwrap_err().to_string();
    assert!(
        e.contains("`llama.block_count` is missing (expected an unsigned integer)"),
        "{e}"
    );
    let e = f.uint("n").unwrap_err().to_string();
    assert!(
        e.contains("`n` is \"x\" (string), expected an unsigned integer"),
        "{e}"
    );
}

#[test]
fn alignment_from_copied_metadata_is_used_for_the_data() {
    let mut w = GgufWriter::new();
    w.metadata("general.alignment", Value::U32(64)).unwrap();
    let t = HostTensor::new(DType::I32, [3], TensorData::I32(vec![0, 1, 2])).unwrap();
    w.tensor("a", &t).unwrap();
    let bytes = w.to_bytes();
    assert_eq!(bytes.len(), 192);
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(f.tensor("a").unwrap(), t);
    assert!(GgufWriter::new()
        .metadata("general.alignment", Value::U64(64))
        .is_err());
}
