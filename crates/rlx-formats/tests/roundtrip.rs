//! Write → read round trips for every dtype, through bytes, plain reads and
//! memory maps; the API around names, metadata and shape-checked loading.

use half::{bf16, f16};
use rlx_formats::safetensors::{serialize, write_file, SafetensorsFile};
use rlx_formats::FormatError;
use rlx_ir::{DType, HostTensor, Shape};
use std::collections::BTreeMap;

/// One tensor of every dtype safetensors can store, with edge values.
fn every_dtype() -> Vec<(String, HostTensor)> {
    let t = |name: &str, t: HostTensor| (name.to_string(), t);
    vec![
        t(
            "f64",
            HostTensor::from_slice(
                &[0.0, -0.0, 1.5, f64::MIN_POSITIVE, f64::MAX, -1e-310],
                [2, 3],
            )
            .unwrap(),
        ),
        t(
            "f32",
            HostTensor::from_slice(
                &[1.0f32, -2.5, f32::MAX, f32::MIN_POSITIVE, 1e-45, -0.0],
                [3, 2],
            )
            .unwrap(),
        ),
        t(
            "f16",
            HostTensor::from_slice(
                &[f16::from_f32(0.5), f16::MAX, f16::MIN_POSITIVE_SUBNORMAL],
                [3],
            )
            .unwrap(),
        ),
        t(
            "bf16",
            HostTensor::from_slice(&[bf16::from_f32(-3.0), bf16::MAX, bf16::EPSILON], [1, 3])
                .unwrap(),
        ),
        t(
            "i64",
            HostTensor::from_slice(&[i64::MIN, -1, 0, i64::MAX], [2, 2]).unwrap(),
        ),
        t(
            "i32",
            HostTensor::from_slice(&[i32::MIN, 7, i32::MAX], [3]).unwrap(),
        ),
        t(
            "i16",
            HostTensor::from_slice(&[i16::MIN, 0, i16::MAX, 5], [4]).unwrap(),
        ),
        t(
            "i8",
            HostTensor::from_slice(&[i8::MIN, -1, i8::MAX], [3, 1]).unwrap(),
        ),
        t("u8", HostTensor::from_slice(&[0u8, 128, 255], [3]).unwrap()),
        t(
            "bool",
            HostTensor::from_slice(&[true, false, false, true], [2, 2]).unwrap(),
        ),
        t(
            "c64",
            HostTensor::from_slice(&[[1.0f32, -1.0], [0.25, 3.5]], [2]).unwrap(),
        ),
        t("scalar", HostTensor::scalar(42i32)),
        t("empty", HostTensor::zeros(DType::F32, [0, 4]).unwrap()),
        t(
            "encoder.layer.0.attention.self.query.weight",
            HostTensor::from_slice(&[0.1f32; 12], [3, 4]).unwrap(),
        ),
    ]
}

fn refs(v: &[(String, HostTensor)]) -> Vec<(&str, &HostTensor)> {
    v.iter().map(|(n, t)| (n.as_str(), t)).collect()
}

fn meta() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("format".to_string(), "pt".to_string()),
        ("producer".to_string(), "rlx \"tests\" ✓".to_string()),
    ])
}

fn check_all(file: &SafetensorsFile, want: &[(String, HostTensor)]) {
    assert_eq!(file.len(), want.len());
    assert_eq!(file.metadata(), &meta());
    for (name, t) in want {
        let (dtype, shape) = file.info(name).unwrap();
        assert_eq!((dtype, &shape), (t.dtype(), t.shape()), "{name}");
        let got = file.tensor(name).unwrap();
        assert_eq!(&got, t, "{name}");
        let got = file.expect(name, t.dtype(), t.shape().clone()).unwrap();
        assert_eq!(&got, t, "{name}");
    }
}

#[test]
fn every_dtype_round_trips_through_bytes() {
    let want = every_dtype();
    let bytes = serialize(&refs(&want), &meta()).unwrap();
    let file = SafetensorsFile::from_bytes(bytes.clone()).unwrap();
    assert!(!file.is_mapped());
    check_all(&file, &want);
    // Shared and static buffers work the same.
    let shared: std::sync::Arc<[u8]> = bytes.clone().into();
    check_all(&SafetensorsFile::from_bytes(shared).unwrap(), &want);
    let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    check_all(&SafetensorsFile::from_bytes(leaked).unwrap(), &want);
}

#[test]
fn every_dtype_round_trips_through_files() {
    let dir = std::env::temp_dir().join(format!("rlx-formats-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    let want = every_dtype();
    write_file(&path, &refs(&want), &meta()).unwrap();

    let mapped = SafetensorsFile::open(&path).unwrap();
    assert_eq!(mapped.is_mapped(), cfg!(feature = "mmap"));
    assert_eq!(mapped.label(), path.display().to_string());
    check_all(&mapped, &want);
    let read = SafetensorsFile::read(&path).unwrap();
    check_all(&read, &want);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        serialize(&refs(&want), &meta()).unwrap()
    );

    // Replacing a file that is mapped leaves the mapping's bytes intact.
    let other = [("x".to_string(), HostTensor::scalar(1.0f64))];
    let other_meta = meta();
    write_file(&path, &refs(&other), &other_meta).unwrap();
    check_all(&mapped, &want);
    assert_eq!(SafetensorsFile::open(&path).unwrap().names(), ["x"]);
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn names_are_in_file_order_and_raw_bytes_are_little_endian() {
    let a = HostTensor::from_slice(&[1u8, 2], [2]).unwrap();
    let b = HostTensor::from_slice(&[0x0102_0304i32], [1]).unwrap();
    let c = HostTensor::from_slice(&[1.0f64], [1]).unwrap();
    let bytes = serialize(&[("a", &a), ("b", &b), ("c", &c)], &BTreeMap::new()).unwrap();
    let file = SafetensorsFile::from_bytes(bytes).unwrap();
    // The layout every safetensors writer uses: larger alignment first.
    assert_eq!(file.names(), ["c", "b", "a"]);
    assert_eq!(file.raw_bytes("b").unwrap(), [4, 3, 2, 1]);
    assert_eq!(file.file_dtype("b").unwrap(), "I32");
    assert!(file.contains("a") && !file.contains("d"));
    assert!(file.metadata().is_empty());
    let all = file.tensors().unwrap();
    assert_eq!(all[2], ("a".to_string(), a));
}

#[test]
fn an_empty_file_round_trips() {
    let bytes = serialize(&[], &BTreeMap::new()).unwrap();
    let file = SafetensorsFile::from_bytes(bytes).unwrap();
    assert!(file.is_empty());
    assert!(file.tensors().unwrap().is_empty());
}

#[test]
fn expect_reports_shape_then_dtype() {
    let w = HostTensor::zeros(DType::F32, [384, 384]).unwrap();
    let name = "encoder.layer.0.attention.self.query.weight";
    let bytes = serialize(&[(name, &w)], &BTreeMap::new()).unwrap();
    let file = SafetensorsFile::from_bytes_labeled(bytes, "model.safetensors").unwrap();

    let err = file.expect(name, DType::F32, [384, 768]).unwrap_err();
    assert!(matches!(err, FormatError::ShapeMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "model.safetensors: tensor `encoder.layer.0.attention.self.query.weight` has shape \
         [384, 384], the model expects [384, 768]; the checkpoint does not match the model \
         configuration (sizes, layer count)"
    );
    assert_eq!(err.tensor(), Some(name));
    assert_eq!(err.file(), Some("model.safetensors"));

    let err = file.expect(name, DType::F16, [384, 384]).unwrap_err();
    match &err {
        FormatError::DTypeMismatch {
            found, expected, ..
        } => assert_eq!((*found, *expected), (DType::F32, DType::F16)),
        e => panic!("{e:?}"),
    }
    // Both wrong: the shape is reported.
    let err = file.expect(name, DType::F16, Shape::new([1])).unwrap_err();
    assert!(matches!(err, FormatError::ShapeMismatch { .. }));
}

#[test]
fn unknown_names_list_close_ones() {
    let w = HostTensor::zeros(DType::F32, [2]).unwrap();
    let names = [
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.0.attention.self.query.bias",
        "encoder.layer.0.attention.self.key.weight",
        "pooler.dense.weight",
        "embeddings.word_embeddings.weight",
    ];
    let tensors: Vec<_> = names.iter().map(|&n| (n, &w)).collect();
    let file = SafetensorsFile::from_bytes(serialize(&tensors, &BTreeMap::new()).unwrap()).unwrap();
    let err = file
        .tensor("bert.encoder.layer.0.attention.self.query.weight")
        .unwrap_err();
    match &err {
        FormatError::NotFound { close, count, .. } => {
            assert_eq!(*count, 5);
            assert_eq!(close.len(), 3);
            assert_eq!(close[0], names[0]);
        }
        e => panic!("{e:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.starts_with("<memory>: no tensor `bert.encoder"),
        "{msg}"
    );
    assert!(
        msg.contains("closest names: `encoder.layer.0.attention.self.query.weight`"),
        "{msg}"
    );
    assert!(matches!(
        file.info("nope"),
        Err(FormatError::NotFound { .. })
    ));
    assert!(matches!(
        file.expect("nope", DType::F32, [2]),
        Err(FormatError::NotFound { .. })
    ));
}

#[test]
fn unwritable_tensors_are_errors() {
    let q = HostTensor::zeros(DType::Q4_0, [32]).unwrap();
    let f = HostTensor::scalar(1.0f32);
    let none = BTreeMap::new();
    for (tensors, needle) in [
        (vec![("q", &q)], "safetensors has no q4_0 dtype"),
        (vec![("a", &f), ("a", &f)], "given twice"),
        (vec![("__metadata__", &f)], "reserved"),
    ] {
        match serialize(&tensors, &none) {
            Err(e @ FormatError::CannotWrite { .. }) => {
                assert!(e.to_string().contains(needle), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }
    let u4 = HostTensor::zeros(DType::U4, [2]).unwrap();
    assert!(serialize(&[("u4", &u4)], &none).is_err());
}

#[test]
fn missing_files_are_io_errors_naming_the_path() {
    let err = SafetensorsFile::open("/nonexistent/dir/model.safetensors").unwrap_err();
    assert!(matches!(err, FormatError::Io { .. }));
    assert!(err
        .to_string()
        .starts_with("/nonexistent/dir/model.safetensors: "));
    let err = SafetensorsFile::read("/nonexistent/x.safetensors").unwrap_err();
    assert!(matches!(err, FormatError::Io { .. }));
    let t = HostTensor::scalar(1u8);
    let err = write_file(
        "/nonexistent/dir/out.safetensors",
        &[("t", &t)],
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(matches!(err, FormatError::Io { .. }));
}

#[test]
fn an_empty_file_on_disk_is_truncated_not_a_crash() {
    let path = std::env::temp_dir().join(format!("rlx-formats-empty-{}", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let err = SafetensorsFile::open(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(err, FormatError::Truncated { len: 0, .. }),
        "{err:?}"
    );
}
