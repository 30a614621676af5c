//! `rlx inspect/convert/quantize` on GGUF, against the reference vectors of
//! tests/vectors/gguf (gguf 0.19.0 and libgguf 0.2.2; see its generate.py).

use rlx_formats::gguf::GgufFile;
use rlx_formats::safetensors::{write_file, SafetensorsFile};
use rlx_ir::HostTensor;
use std::path::PathBuf;
use std::process::Command;

fn rlx(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(args)
        .output()
        .expect("run rlx");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/gguf")
}

fn json() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(vectors().join("all-types.json")).unwrap())
        .unwrap()
}

#[test]
fn inspect_lists_metadata_and_tensors() {
    let f = vectors().join("all-types.gguf");
    let (ok, out, err) = rlx(&["inspect", f.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.contains("GGUF v3, 21 metadata entries, 13 tensors"),
        "{out}"
    );
    assert!(
        out.contains("t.arr.str (array of string) = [\"a\", \"\", \"ü✓\", \"<|im_start|>\"]"),
        "{out}"
    );
    assert!(out.contains("w.q4_0"), "{out}");
    assert!(out.contains("[2, 3, 64]"), "{out}");
    let (ok, out, _) = rlx(&["inspect", f.to_str().unwrap(), "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tensors"].as_array().unwrap().len(), 13);
    assert_eq!(v["tensors"][2]["type"], "BF16");
}

#[test]
fn convert_dequantizes_bit_for_bit_as_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let f = vectors().join("all-types.gguf");
    let (ok, msg, err) = rlx(&["convert", f.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(msg.contains("13 tensors (4 dequantized)"), "{msg}");
    let st = SafetensorsFile::open(&out).unwrap();
    for t in json()["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let Some(want) = t["dequantized"].as_array() else {
            continue;
        };
        let got = st.tensor(name).unwrap();
        // BF16 stays BF16 (convert keeps float types); quantized become f32.
        let got: Vec<f32> = got
            .to_f64_vec()
            .unwrap()
            .into_iter()
            .map(|v| v as f32)
            .collect();
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                g.to_bits(),
                (w.as_f64().unwrap() as f32).to_bits(),
                "{name}[{i}]"
            );
        }
    }
}

#[test]
fn quantize_gives_libggufs_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let raw = std::fs::read(vectors().join("rows.f32")).unwrap();
    let x: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let src = dir.path().join("rows.safetensors");
    let t = HostTensor::from_slice(&x, [x.len() / 512, 512]).unwrap();
    write_file(&src, &[("rows", &t)], &Default::default()).unwrap();
    for ty in ["q4_k", "q6_k", "q4_0", "mxfp4"] {
        let out = dir.path().join(format!("{ty}.gguf"));
        let (ok, msg, err) = rlx(&[
            "quantize",
            src.to_str().unwrap(),
            out.to_str().unwrap(),
            "--type",
            ty,
        ]);
        assert!(ok, "{err}");
        assert!(msg.contains(&format!("1 {ty}")), "{msg}");
        let g = GgufFile::open(&out).unwrap();
        let want = std::fs::read(vectors().join(format!("quant-{ty}.bin"))).unwrap();
        assert!(g.raw_bytes("rows").unwrap() == want.as_slice(), "{ty}");
        assert_eq!(g.uint("general.quantization_version").unwrap(), 2);
    }
}

#[test]
fn quantize_names_a_tensor_whose_rows_are_not_whole_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("w.safetensors");
    let t = HostTensor::from_slice(&vec![0.5f32; 2 * 384], [2, 384]).unwrap();
    write_file(&src, &[("dense.weight", &t)], &Default::default()).unwrap();
    let out = dir.path().join("w.gguf");
    let (ok, _, err) = rlx(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "q4_k",
    ]);
    assert!(!ok);
    assert!(err.contains("tensor `dense.weight` has shape [2, 384] and its rows of 384 are not a whole number of q4_k blocks of 256"), "{err}");
    let (ok, msg, err) = rlx(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "q4_k",
        "--fallback",
        "q8_0",
    ]);
    assert!(ok, "{err}");
    assert!(msg.contains("1 q8_0"), "{msg}");
    let (ok, _, err) = rlx(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "iq2_xs",
    ]);
    assert!(
        !ok && err.contains("not a block type rlx quantizes to"),
        "{err}"
    );
}

#[test]
fn broken_gguf_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.gguf");
    let mut b = std::fs::read(vectors().join("all-types.gguf")).unwrap();
    b.truncate(1500);
    std::fs::write(&bad, b).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["inspect", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.gguf: at byte") && err.contains("the file is truncated"),
        "{err}"
    );
}
