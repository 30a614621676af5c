//! The block encoders against the reference bytes of `libgguf` (ggml's
//! encoders) and `gguf` (the same bytes for the 32-element types and
//! MXFP4): tests/vectors/gguf, made by its generate.py.

use rlx_ir::DType;
use rlx_ref::kernels::quant::{quantize_values, QUANTIZABLE};
use std::path::PathBuf;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/gguf")
}

#[test]
fn encoders_match_ggml_bit_for_bit() {
    let dir = vectors();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("quant.json")).unwrap()).unwrap();
    let cols = manifest["cols"].as_u64().unwrap() as usize;
    let raw = std::fs::read(dir.join("rows.f32")).unwrap();
    let x: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let rows = x.len() / cols;
    let mut checked = 0;
    for d in QUANTIZABLE {
        let want = std::fs::read(dir.join(format!("quant-{}.bin", d.name()))).unwrap();
        let got = quantize_values(d, &x).unwrap();
        assert_eq!(got.len(), want.len(), "{d}");
        let row_bytes = want.len() / rows;
        for r in 0..rows {
            let (g, w) = (
                &got[r * row_bytes..(r + 1) * row_bytes],
                &want[r * row_bytes..(r + 1) * row_bytes],
            );
            let first = g.iter().zip(w).position(|(a, b)| a != b);
            assert!(first.is_none(), "{d}: row {r} differs from byte {first:?}");
        }
        checked += 1;
    }
    assert_eq!(checked, 11);
}

#[test]
fn a_partial_block_is_an_error() {
    let e = quantize_values(DType::Q4K, &[0.0; 300]).unwrap_err();
    assert!(
        e.contains("not a whole number of q4_k blocks of 256"),
        "{e}"
    );
}

/// Any f32 bits (NaN, ±inf, subnormals, huge values) quantize without a
/// panic, to the right number of bytes, for every type.
#[test]
fn arbitrary_floats_never_panic() {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for round in 0..40 {
        let x: Vec<f32> = (0..512)
            .map(|i| match (round + i) % 7 {
                0 => f32::NAN,
                1 => f32::INFINITY * if i % 2 == 0 { 1.0 } else { -1.0 },
                2 => f32::from_bits(next() as u32 & 0x007f_ffff), // subnormal
                3 => 3.0e38,
                _ => f32::from_bits(next() as u32),
            })
            .collect();
        for d in QUANTIZABLE {
            let Ok(b) = quantize_values(d, &x) else {
                panic!("{d}: refused")
            };
            assert_eq!(Some(b.len()), d.storage_bytes(x.len()), "{d}");
        }
    }
}
