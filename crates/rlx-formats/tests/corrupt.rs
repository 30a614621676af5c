//! Hand-crafted broken files: each gives its own error variant, naming the
//! file and (where there is one) the tensor.

use rlx_formats::safetensors::SafetensorsFile;
use rlx_formats::FormatError;

/// A file from a header string and data bytes.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    b
}

fn open(bytes: Vec<u8>) -> FormatError {
    let err = SafetensorsFile::from_bytes_labeled(bytes, "bad.safetensors").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("bad.safetensors: "), "{msg}");
    assert_eq!(err.file(), Some("bad.safetensors"));
    err
}

#[test]
fn a_valid_hand_made_file_opens() {
    let f = SafetensorsFile::from_bytes(file(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}"#,
        &[0, 0, 128, 63, 0, 0, 0, 64],
    ))
    .unwrap();
    assert_eq!(f.tensor("a").unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!(f.metadata()["k"], "v");
}

#[test]
fn truncated_header_length() {
    for len in 0..8 {
        let err = open(vec![1; len]);
        assert!(
            matches!(err, FormatError::Truncated { len: l, .. } if l == len),
            "{err:?}"
        );
    }
}

#[test]
fn header_length_past_the_end_of_the_file() {
    let mut b = file(
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
        &[7],
    );
    b[..8].copy_from_slice(&1000u64.to_le_bytes());
    let err = open(b);
    assert!(
        matches!(err, FormatError::HeaderPastEnd { declared: 1000, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("truncated"));
}

#[test]
fn absurd_header_length() {
    for n in [100_000_001u64, u64::MAX, 1 << 40] {
        let mut b = file("{}", &[]);
        b[..8].copy_from_slice(&n.to_le_bytes());
        let err = open(b);
        assert!(matches!(err, FormatError::HeaderTooLarge { declared, .. } if declared == n));
    }
}

#[test]
fn header_that_is_not_utf8() {
    let mut b = file(
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
        &[7],
    );
    b[10] = 0xff;
    let err = open(b);
    assert!(
        matches!(err, FormatError::HeaderNotUtf8 { offset: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn bad_json() {
    let err = open(file(r#"{"a": {"dtype": "U8","#, &[]));
    assert!(matches!(err, FormatError::HeaderJson { .. }), "{err:?}");
    let err = open(file("[1, 2]", &[]));
    assert!(
        matches!(&err, FormatError::HeaderJson { message, .. } if message.contains("object")),
        "{err:?}"
    );
    let err = open(file("", &[]));
    assert!(matches!(err, FormatError::HeaderJson { .. }), "{err:?}");
    // Deep nesting is a JSON error, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = open(file(&deep, &[]));
    assert!(matches!(err, FormatError::HeaderJson { .. }), "{err:?}");
}

#[test]
fn malformed_entries_name_the_tensor() {
    let cases = [
        (
            r#"{"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}"#,
            "unknown dtype",
        ),
        (
            r#"{"w":{"dtype":"U8","data_offsets":[0,1]}}"#,
            "missing `shape`",
        ),
        (
            r#"{"w":{"shape":[1],"data_offsets":[0,1]}}"#,
            "missing `dtype`",
        ),
        (
            r#"{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}"#,
            "non-negative",
        ),
        (
            r#"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}}"#,
            "two non-negative",
        ),
        (r#"{"w":3}"#, "expected an object"),
        (r#"{"__metadata__":{"k":1}}"#, "strings to strings"),
    ];
    for (header, needle) in cases {
        let err = open(file(header, &[1]));
        match &err {
            FormatError::BadEntry { problem, .. } => assert!(problem.contains(needle), "{err}"),
            e => panic!("{header}: {e:?}"),
        }
        assert!(err.tensor().is_some());
    }
}

#[test]
fn offsets_that_end_before_they_start() {
    let err = open(file(
        r#"{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}"#,
        &[0; 4],
    ));
    assert!(
        matches!(&err, FormatError::BadOffsets { tensor, start: 4, end: 2, .. } if tensor == "w"),
        "{err:?}"
    );
}

#[test]
fn offsets_out_of_range() {
    let err = open(file(
        r#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
        &[0; 8],
    ));
    assert!(
        matches!(
            &err,
            FormatError::OffsetOutOfRange { tensor, start: 0, end: 16, data_len: 8, .. }
                if tensor == "w"
        ),
        "{err:?}"
    );
}

#[test]
fn a_truncated_data_section_is_out_of_range() {
    let t = rlx_ir::HostTensor::zeros(rlx_ir::DType::F32, [4, 4]).unwrap();
    let mut b = rlx_formats::safetensors::serialize(&[("t", &t)], &Default::default()).unwrap();
    b.truncate(b.len() - 5);
    let err = open(b);
    assert!(
        matches!(
            &err,
            FormatError::OffsetOutOfRange {
                end: 64,
                data_len: 59,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn overlapping_offsets() {
    let err = open(file(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
        &[0; 12],
    ));
    match &err {
        FormatError::OverlappingOffsets {
            tensor,
            other,
            start,
            other_end,
            ..
        } => {
            assert_eq!((tensor.as_str(), other.as_str()), ("b", "a"));
            assert_eq!((*start, *other_end), (4, 8));
        }
        e => panic!("{e:?}"),
    }
    // The same range twice.
    let err = open(file(
        r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},
            "b":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}}"#,
        &[0; 4],
    ));
    assert!(
        matches!(err, FormatError::OverlappingOffsets { .. }),
        "{err:?}"
    );
}

#[test]
fn holes_and_trailing_bytes() {
    let err = open(file(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}"#,
        &[0; 20],
    ));
    assert!(
        matches!(
            err,
            FormatError::UncoveredData {
                start: 8,
                end: 12,
                ..
            }
        ),
        "{err:?}"
    );
    let err = open(file(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
        &[0; 12],
    ));
    assert!(
        matches!(
            err,
            FormatError::UncoveredData {
                start: 8,
                end: 12,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn data_length_that_disagrees_with_shape_and_dtype() {
    let err = open(file(
        r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}"#,
        &[0; 12],
    ));
    match &err {
        FormatError::LengthMismatch {
            tensor,
            dtype,
            shape,
            expected,
            actual,
            ..
        } => {
            assert_eq!((tensor.as_str(), dtype.as_str()), ("w", "F32"));
            assert_eq!(
                (shape.as_slice(), *expected, *actual),
                (&[2, 2][..], 16, 12)
            );
        }
        e => panic!("{e:?}"),
    }
    assert!(err
        .to_string()
        .contains("is F32 with shape [2, 2], which needs 16 bytes"));
}

#[test]
fn shapes_whose_size_overflows() {
    let err = open(file(
        r#"{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}"#,
        &[],
    ));
    assert!(matches!(err, FormatError::ShapeOverflow { .. }), "{err:?}");
}

#[test]
fn sub_byte_dtypes_that_end_mid_byte() {
    let err = open(file(
        r#"{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
        &[0; 2],
    ));
    assert!(
        matches!(&err, FormatError::BadEntry { problem, .. } if problem.contains("whole number of bytes")),
        "{err:?}"
    );
}

#[test]
fn dtypes_rlx_cannot_hold() {
    let f = SafetensorsFile::from_bytes(file(
        r#"{"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}"#,
        &[0x21],
    ))
    .unwrap();
    assert_eq!(f.file_dtype("w").unwrap(), "F4");
    for err in [f.tensor("w").unwrap_err(), f.info("w").unwrap_err()] {
        assert!(
            matches!(&err, FormatError::UnsupportedDtype { dtype, .. } if dtype == "F4"),
            "{err:?}"
        );
    }
    assert_eq!(f.raw_bytes("w").unwrap(), [0x21]);
}

#[test]
fn u64_values_above_i64_max_load_exactly() {
    let mut data = 5u64.to_le_bytes().to_vec();
    data.extend_from_slice(&(1u64 << 63).to_le_bytes());
    let f = SafetensorsFile::from_bytes(file(
        r#"{"big":{"dtype":"U64","shape":[2],"data_offsets":[0,16]}}"#,
        &data,
    ))
    .unwrap();
    assert_eq!(f.info("big").unwrap().0, rlx_ir::DType::U64);
    let t = f.tensor("big").unwrap();
    assert_eq!(t.to_vec::<u64>().unwrap(), [5, 1 << 63]);
}

#[test]
fn bool_bytes_other_than_one_are_true() {
    let f = SafetensorsFile::from_bytes(file(
        r#"{"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}}"#,
        &[0, 1, 7],
    ))
    .unwrap();
    assert_eq!(
        f.tensor("m").unwrap().to_vec::<bool>().unwrap(),
        [false, true, true]
    );
}
