//! Mutation fuzzing: thousands of seeded mutations of valid files (bytes,
//! header text, the length field) must give an `Ok` or a `FormatError`,
//! never a panic, from opening and from every accessor.

use rlx_formats::safetensors::{serialize, SafetensorsFile};
use rlx_formats::FormatError;
use rlx_ir::{DType, HostTensor};
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// xorshift64* — small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn base_files() -> Vec<Vec<u8>> {
    let a = HostTensor::from_slice(&[1.0f32, -2.0, 3.5, 0.25, 8.0, 1e-3], [2, 3]).unwrap();
    let b = HostTensor::from_slice(&[1i64, -5, 7], [3]).unwrap();
    let c = HostTensor::from_slice(&[true, false], [2]).unwrap();
    let d = HostTensor::from_f64(DType::BF16, [2, 2], vec![1.0, 2.0, -3.0, 0.5]).unwrap();
    let e = HostTensor::scalar(7u8);
    let f = HostTensor::zeros(DType::F32, [0, 3]).unwrap();
    let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    let own = serialize(
        &[
            ("encoder.layer.0.weight", &a),
            ("ids", &b),
            ("mask", &c),
            ("bf", &d),
            ("s", &e),
            ("empty", &f),
        ],
        &meta,
    )
    .unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/safetensors/");
    let mut files = vec![own];
    for name in ["native.safetensors", "numpy.safetensors", "fp8.safetensors"] {
        files.push(std::fs::read(format!("{dir}{name}")).unwrap());
    }
    files
}

const JSON_BYTES: &[u8] = b"{}[]\":,-0123456789 eE.\\uFI_";

fn header_len(b: &[u8]) -> usize {
    b.get(..8)
        .map(|l| u64::from_le_bytes(l.try_into().unwrap()) as usize)
        .unwrap_or(0)
        .min(b.len().saturating_sub(8))
}

fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
    let ops = 1 + rng.below(3);
    for _ in 0..ops {
        let len = b.len();
        let hl = header_len(b);
        match rng.below(10) {
            // Flip one bit anywhere.
            0 => {
                if len > 0 {
                    let i = rng.below(len);
                    b[i] ^= 1 << rng.below(8);
                }
            }
            // A random byte anywhere.
            1 => {
                if len > 0 {
                    let i = rng.below(len);
                    b[i] = rng.next() as u8;
                }
            }
            // A JSON-ish byte inside the header.
            2 => {
                if hl > 0 {
                    let i = 8 + rng.below(hl);
                    b[i] = JSON_BYTES[rng.below(JSON_BYTES.len())];
                }
            }
            // Change one digit of the header (offsets, shapes).
            3 => {
                let digits: Vec<usize> = (8..8 + hl).filter(|&i| b[i].is_ascii_digit()).collect();
                if !digits.is_empty() {
                    let i = digits[rng.below(digits.len())];
                    b[i] = b'0' + rng.below(10) as u8;
                }
            }
            // Truncate.
            4 => {
                let n = rng.below(len + 1);
                b.truncate(n);
            }
            // Insert random bytes.
            5 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let ins: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(at..at, ins);
            }
            // Delete a range.
            6 => {
                if len > 0 {
                    let at = rng.below(len);
                    let n = 1 + rng.below((len - at).min(16));
                    b.drain(at..at + n);
                }
            }
            // Rewrite the length field.
            7 => {
                if len >= 8 {
                    let v: u64 = match rng.below(6) {
                        0 => 0,
                        1 => u64::MAX,
                        2 => (len - 8) as u64,
                        3 => hl as u64 + 1,
                        4 => hl.saturating_sub(1) as u64,
                        _ => rng.next() % (len as u64 + 64),
                    };
                    b[..8].copy_from_slice(&v.to_le_bytes());
                }
            }
            // Duplicate a slice in place.
            8 => {
                if len > 2 {
                    let at = rng.below(len - 1);
                    let n = 1 + rng.below((len - at).min(32));
                    let copy = b[at..at + n].to_vec();
                    let to = rng.below(len);
                    b.splice(to..to, copy);
                }
            }
            // Swap two header bytes.
            _ => {
                if hl > 1 {
                    let i = 8 + rng.below(hl);
                    let j = 8 + rng.below(hl);
                    b.swap(i, j);
                }
            }
        }
    }
}

/// Every accessor on a file that opened; errors are fine, panics are not.
fn exercise(f: &SafetensorsFile) -> usize {
    let mut loaded = 0;
    let names: Vec<String> = f.names().iter().map(|s| s.to_string()).collect();
    let _ = format!("{f:?}");
    let _ = f.metadata().len();
    for n in &names {
        let _ = f.file_dtype(n).map(|d| d.len());
        let _ = f.raw_bytes(n).map(|b| b.len());
        if let Ok((d, s)) = f.info(n) {
            let _ = f.expect(n, d, s.clone());
            let _ = f.expect(n, DType::F32, [1]);
        }
        match f.tensor(n) {
            Ok(t) => {
                loaded += 1;
                // What loads writes back and reads back to the same bits.
                let bytes = serialize(&[("t", &t)], &BTreeMap::new()).unwrap();
                let again = SafetensorsFile::from_bytes(bytes)
                    .unwrap()
                    .tensor("t")
                    .unwrap();
                assert_eq!(again.shape(), t.shape());
                assert_eq!(again.dtype(), t.dtype());
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
    let _ = f.tensor("no such tensor").map_err(|e| e.to_string());
    let _ = f.tensors();
    loaded
}

fn variant(e: &FormatError) -> &'static str {
    match e {
        FormatError::Truncated { .. } => "Truncated",
        FormatError::HeaderTooLarge { .. } => "HeaderTooLarge",
        FormatError::HeaderPastEnd { .. } => "HeaderPastEnd",
        FormatError::HeaderNotUtf8 { .. } => "HeaderNotUtf8",
        FormatError::HeaderJson { .. } => "HeaderJson",
        FormatError::BadEntry { .. } => "BadEntry",
        FormatError::BadOffsets { .. } => "BadOffsets",
        FormatError::OffsetOutOfRange { .. } => "OffsetOutOfRange",
        FormatError::OverlappingOffsets { .. } => "OverlappingOffsets",
        FormatError::UncoveredData { .. } => "UncoveredData",
        FormatError::ShapeOverflow { .. } => "ShapeOverflow",
        FormatError::LengthMismatch { .. } => "LengthMismatch",
        FormatError::Invalid { .. } => "Invalid",
        _ => "other",
    }
}

#[test]
fn mutated_files_never_panic() {
    let bases = base_files();
    let mut rng = Rng(0x5afe_7e45_0125_2026);
    let mut opened = 0;
    let mut loaded = 0;
    let mut errors: HashMap<&'static str, usize> = HashMap::new();
    const N: usize = 20_000;
    for i in 0..N {
        let mut b = bases[i % bases.len()].clone();
        mutate(&mut rng, &mut b);
        let result = catch_unwind(AssertUnwindSafe(
            || match SafetensorsFile::from_bytes_labeled(b.clone(), "fuzz") {
                Ok(f) => Ok(exercise(&f)),
                Err(e) => {
                    assert!(e.to_string().starts_with("fuzz: "), "{e}");
                    Err(variant(&e))
                }
            },
        ));
        match result {
            Ok(Ok(n)) => {
                opened += 1;
                loaded += n;
            }
            Ok(Err(v)) => *errors.entry(v).or_default() += 1,
            Err(_) => panic!(
                "mutation {i} panicked; input ({} bytes): {:?}",
                b.len(),
                String::from_utf8_lossy(&b)
            ),
        }
    }
    eprintln!("{N} mutants: {opened} opened ({loaded} tensors loaded); errors {errors:?}");
    // The fuzzer reaches both sides and most of the checks.
    assert!(opened > 100, "only {opened} mutants opened");
    for v in [
        "Truncated",
        "HeaderPastEnd",
        "HeaderJson",
        "BadEntry",
        "LengthMismatch",
        "OffsetOutOfRange",
        "UncoveredData",
    ] {
        assert!(errors.contains_key(v), "no mutant produced {v}: {errors:?}");
    }
    // The crate's rejections are all explained by the detailed checks.
    assert!(!errors.contains_key("Invalid"), "{errors:?}");
}
