//! ONNX external data: a model whose initializers and Constant value live
//! in `weights.bin` (tests/data/external, made by make.py there) imports
//! through a resolver and gives ONNX Runtime's output; without a
//! resolver, with a missing file, a location outside the model's
//! directory or a range past the file's end it is a typed error naming
//! the tensor and the file.

use prost::Message;
use rlx::{Device, HostTensor};
use rlx_onnx::proto::ModelProto;
use rlx_onnx::{import, ExternalData, ImportOptions, OnnxError};
use std::collections::HashMap;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/external")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap()
}

fn npy(name: &str) -> HostTensor {
    rlx_formats::npy::read(name, &read(&format!("{name}.npy"))).unwrap()
}

fn from_dir() -> ImportOptions {
    ImportOptions {
        external: Some(ExternalData::new(|loc| {
            std::fs::read(dir().join(loc)).map_err(|e| e.to_string())
        })),
        ..Default::default()
    }
}

fn invalid(e: OnnxError) -> String {
    match e {
        OnnxError::Invalid(m) => m,
        e => panic!("expected OnnxError::Invalid, got {e:?}"),
    }
}

#[test]
fn external_tensors_import_and_match_onnx_runtime() {
    let bytes = read("model.onnx");
    let model = ModelProto::decode(&bytes[..]).unwrap();
    assert_eq!(rlx_onnx::external_locations(&model), ["weights.bin"]);
    let m = import(&bytes, &from_dir()).unwrap();
    let exe = rlx::compile(&m.graph, Device::Cpu).unwrap();
    let got = exe
        .run(&[npy("x")])
        .unwrap()
        .remove(0)
        .to_f64_vec()
        .unwrap();
    let want = npy("y").to_f64_vec().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6, "{g} vs {w}");
    }
    // The same bytes handed over as files (how a page does it).
    let files = HashMap::from([("weights.bin".to_string(), read("weights.bin"))]);
    let opts = ImportOptions {
        external: Some(ExternalData::from_files(files)),
        ..Default::default()
    };
    let again = import(&bytes, &opts).unwrap();
    assert_eq!(
        rlx_ir::text::print(&again.graph),
        rlx_ir::text::print(&m.graph)
    );
}

#[test]
fn no_resolver_or_a_missing_file_names_the_tensor_and_the_file() {
    let bytes = read("model.onnx");
    let e = invalid(import(&bytes, &ImportOptions::default()).unwrap_err());
    assert!(
        e.contains("tensor `W`") && e.contains("weights.bin") && e.contains("resolver"),
        "{e}"
    );
    let opts = ImportOptions {
        external: Some(ExternalData::from_files(HashMap::from([(
            "other.bin".to_string(),
            vec![0u8; 4],
        )]))),
        ..Default::default()
    };
    let e = invalid(import(&bytes, &opts).unwrap_err());
    assert!(
        e.contains("no file `weights.bin`") && e.contains("other.bin"),
        "{e}"
    );
}

/// The model with the external entries of tensor `W` changed.
fn with_entry(key: &str, value: &str) -> Vec<u8> {
    let mut m = ModelProto::decode(&read("model.onnx")[..]).unwrap();
    let g = m.graph.as_mut().unwrap();
    let w = g.initializer.iter_mut().find(|t| t.name() == "W").unwrap();
    let e = w.external_data.iter_mut().find(|e| e.key() == key).unwrap();
    e.value = Some(value.into());
    m.encode_to_vec()
}

#[test]
fn locations_outside_the_directory_and_bad_ranges_are_refused() {
    for loc in [
        "../weights.bin",
        "/etc/passwd",
        "a/../../b",
        "C:\\x.bin",
        "",
    ] {
        let e = invalid(import(&with_entry("location", loc), &from_dir()).unwrap_err());
        assert!(
            e.contains("tensor `W`") && e.contains("not a relative path"),
            "{loc}: {e}"
        );
    }
    // W is 128 bytes at offset 0 of a 208-byte file.
    for (key, v, says) in [
        ("offset", "200", "outside the file"),
        ("length", "4096", "outside the file"),
        ("offset", "18446744073709551615", "outside the file"),
        ("offset", "-1", "not a byte count"),
        ("length", "12", "raw_data holds 12 bytes"),
    ] {
        let e = invalid(import(&with_entry(key, v), &from_dir()).unwrap_err());
        assert!(
            e.contains("tensor `W`") && e.contains(says),
            "{key}={v}: {e}"
        );
    }
}
