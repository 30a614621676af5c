//! The external reference: files written by Hugging Face's Python
//! `safetensors` (values from numpy, torch and ml_dtypes) in
//! tests/vectors/safetensors/, with every element's bit pattern in
//! expected.json (see generate.py there). rlx must read exactly those bits,
//! and re-serialize the rlx-native file byte for byte.

use rlx_formats::safetensors::{serialize, SafetensorsFile};
use rlx_ir::{DType, HostTensor, TensorData};
use serde_json::Value;
use std::collections::BTreeMap;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/safetensors/");

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ints(v: &Value) -> Vec<i128> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| {
            x.as_i64()
                .map(i128::from)
                .or_else(|| x.as_u64().map(i128::from))
                .unwrap()
        })
        .collect()
}

/// The elements of a loaded tensor as the bit patterns / integers that
/// expected.json uses for the stored dtype.
fn as_bits(t: &HostTensor) -> Vec<i128> {
    match t.data() {
        TensorData::F64(v) => v.iter().map(|x| i128::from(x.to_bits())).collect(),
        TensorData::F32(v) => v.iter().map(|x| i128::from(x.to_bits())).collect(),
        TensorData::F16(v) => v.iter().map(|x| i128::from(x.to_bits())).collect(),
        TensorData::BF16(v) => v.iter().map(|x| i128::from(x.to_bits())).collect(),
        TensorData::I64(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::I32(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::I16(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::I8(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::U8(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::U16(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::U32(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::U64(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::Bool(v) => v.iter().map(|&x| i128::from(x)).collect(),
        TensorData::C64(v) => v
            .iter()
            .flat_map(|c| [i128::from(c[0].to_bits()), i128::from(c[1].to_bits())])
            .collect(),
        TensorData::Packed(_) => panic!("packed"),
    }
}

fn loaded_as(stored: &str) -> DType {
    match stored {
        "F64" => DType::F64,
        "F32" | "F8_E8M0" => DType::F32,
        "F16" | "F8_E4M3" | "F8_E5M2" | "F8_E4M3FNUZ" | "F8_E5M2FNUZ" => DType::F16,
        "BF16" => DType::BF16,
        "I64" => DType::I64,
        "I32" => DType::I32,
        "U16" => DType::U16,
        "U32" => DType::U32,
        "U64" => DType::U64,
        "I16" => DType::I16,
        "I8" => DType::I8,
        "U8" => DType::U8,
        "BOOL" => DType::Bool,
        "C64" => DType::C64,
        d => panic!("{d}"),
    }
}

fn check_file(name: &str, want: &Value) {
    let path = format!("{DIR}{name}");
    // The reference data holds NaN and ±inf on purpose (bit-exactness).
    let files = [
        SafetensorsFile::open(&path).unwrap().allow_non_finite(true),
        SafetensorsFile::from_bytes(std::fs::read(&path).unwrap())
            .unwrap()
            .allow_non_finite(true),
    ];
    for file in &files {
        let meta: BTreeMap<String, String> =
            serde_json::from_value(want["metadata"].clone()).unwrap();
        assert_eq!(file.metadata(), &meta, "{name}");
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(file.len(), tensors.len(), "{name}");
        for (tname, w) in tensors {
            let stored = w["dtype"].as_str().unwrap();
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(file.file_dtype(tname).unwrap(), stored);
            let t = file.expect(tname, loaded_as(stored), shape).unwrap();
            if let Some(bits) = w.get("bits") {
                // Bit-exact elements (flattened [re, im] pairs for C64).
                let want: Vec<i128> = if stored == "C64" {
                    bits.as_array().unwrap().iter().flat_map(ints).collect()
                } else {
                    ints(bits)
                };
                assert_eq!(as_bits(&t), want, "{name}: {tname}");
            } else {
                // 8-bit floats: compare the decoded values as f32 bits.
                let want = ints(&w["f32_bits"]);
                let got = t.to_f64_vec().unwrap();
                assert_eq!(got.len(), want.len());
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let w = f32::from_bits(w as u32);
                    let g = g as f32;
                    assert!(
                        (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                        "{name}: {tname}[{i}] = {g:?}, python says {w:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn rlx_reads_the_bits_python_wrote() {
    let e = expected();
    let files: Vec<&String> = e
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| !k.starts_with('_'))
        .collect();
    assert_eq!(files.len(), 3);
    for f in files {
        check_file(f, &e[f.as_str()]);
    }
}

#[test]
fn rlx_rewrites_the_python_file_byte_for_byte() {
    let path = format!("{DIR}native.safetensors");
    let python = std::fs::read(&path).unwrap();
    let file = SafetensorsFile::from_bytes(python.clone())
        .unwrap()
        .allow_non_finite(true);
    let tensors = file.tensors().unwrap();
    let refs: Vec<(&str, &HostTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let ours = serialize(&refs, file.metadata()).unwrap();
    assert_eq!(ours, python);
}
