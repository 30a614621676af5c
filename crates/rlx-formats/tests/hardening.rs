//! Files that parsed before but must not load: duplicate names, tensors
//! over the size limit (refused from the header alone), non-finite weights.

use rlx_formats::safetensors::{serialize, SafetensorsFile};
use rlx_formats::FormatError;
use rlx_ir::{DType, HostTensor};

fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    b
}

fn open(bytes: Vec<u8>) -> Result<SafetensorsFile, FormatError> {
    SafetensorsFile::from_bytes_labeled(bytes, "w.safetensors")
}

#[test]
fn two_tensors_of_one_name_are_refused_by_name() {
    // Same byte range twice: the safetensors crate's map keeps the last
    // entry and the file used to load as if it had one tensor.
    let h = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}"#;
    let err = open(file(h, &[0; 8])).unwrap_err();
    assert!(
        matches!(&err, FormatError::DuplicateName { file, tensor } if file == "w.safetensors" && tensor == "w"),
        "{err:?}"
    );
    assert_eq!(err.tensor(), Some("w"));
    let msg = err.to_string();
    assert!(
        msg.starts_with("w.safetensors: tensor `w` appears more than once"),
        "{msg}"
    );
}

#[test]
fn a_tensor_over_max_tensor_bytes_is_refused_from_the_header() {
    // 4e12 bytes declared, none present: the limit speaks before anything
    // looks at (or allocates for) the data.
    let h = r#"{"emb":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4000000000000]}}"#;
    let err = open(file(h, &[])).unwrap_err();
    let FormatError::TooLarge {
        file,
        tensor,
        source,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (file.as_str(), tensor.as_deref()),
        ("w.safetensors", Some("emb"))
    );
    assert_eq!(
        (source.limit, source.value),
        ("max_tensor_bytes", 4_000_000_000_000)
    );
    let msg = err.to_string();
    assert!(
        msg.contains("tensor `emb`") && msg.contains("RLX_MAX_TENSOR_BYTES"),
        "{msg}"
    );
}

fn with_nan() -> Vec<u8> {
    let ok = HostTensor::from_slice(&[1.0f32, 2.0], [2]).unwrap();
    let mut v = vec![0.5f32; 10_000];
    v[7_777] = f32::NAN;
    v[9_000] = f32::INFINITY;
    let bad = HostTensor::from_slice(&v, [100, 100]).unwrap();
    serialize(&[("ok", &ok), ("layer.weight", &bad)], &Default::default()).unwrap()
}

#[test]
fn non_finite_weights_are_an_error_naming_the_tensor_and_first_index() {
    let f = open(with_nan()).unwrap();
    assert_eq!(f.tensor("ok").unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
    for err in [
        f.tensor("layer.weight").unwrap_err(),
        f.expect("layer.weight", DType::F32, [100, 100])
            .unwrap_err(),
        f.tensors().unwrap_err(),
    ] {
        assert!(
            matches!(&err, FormatError::NonFinite { tensor, index: 7_777, value, .. }
                if tensor == "layer.weight" && value.is_nan()),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("element 7777 is NaN") && msg.contains("allow_non_finite"),
            "{msg}"
        );
    }
}

#[test]
fn allow_non_finite_opts_out() {
    let f = open(with_nan()).unwrap().allow_non_finite(true);
    let v = f.tensor("layer.weight").unwrap().to_vec::<f32>().unwrap();
    assert!(v[7_777].is_nan() && v[9_000] == f32::INFINITY);
}

#[test]
fn sixteen_bit_and_complex_weights_are_scanned_too() {
    let h = HostTensor::from_slice(&[half::f16::ONE, half::f16::NEG_INFINITY], [2]).unwrap();
    let c = HostTensor::from_slice(&[[0.0f32, f32::NAN]], [1]).unwrap();
    let f = open(serialize(&[("h", &h), ("c", &c)], &Default::default()).unwrap()).unwrap();
    let err = f.tensor("h").unwrap_err();
    assert!(
        matches!(err, FormatError::NonFinite { index: 1, value, .. } if value == f64::NEG_INFINITY),
        "{err:?}"
    );
    let err = f.tensor("c").unwrap_err();
    assert!(
        matches!(err, FormatError::NonFinite { index: 0, .. }),
        "{err:?}"
    );
}

/// `/dev/zero` reports length 0 and never ends: `read` stops at the
/// reported length (it used to read until memory ran out).
#[cfg(unix)]
#[test]
fn reading_an_endless_file_stops_at_its_reported_length() {
    let err = SafetensorsFile::read("/dev/zero").unwrap_err();
    assert!(
        matches!(&err, FormatError::Truncated { file, len: 0 } if file == "/dev/zero"),
        "{err:?}"
    );
}
