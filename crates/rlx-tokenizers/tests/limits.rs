//! tokenizer.json and vocab.txt are read whole, so their size is bounded by
//! `rlx_ir::limits().max_file_bytes` — checked from the file's length and
//! again while reading, so an endless file (a device) cannot exhaust
//! memory. One test per binary: it changes the process-wide limits.

use rlx_ir::limits::{limits, set_limits, Limits};
use rlx_tokenizers::{Tokenizer, TokenizerError};

#[test]
fn tokenizer_files_over_max_file_bytes_are_refused_before_reading() {
    set_limits(Limits {
        max_file_bytes: 1024,
        ..limits()
    });
    let dir = std::env::temp_dir().join(format!("rlx-tok-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vocab = dir.join("vocab.txt");
    std::fs::write(&vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\nword\n".repeat(100)).unwrap();
    let json = dir.join("tokenizer.json");
    std::fs::write(&json, format!("{{\"pad\": \"{}\"}}", "x".repeat(2000))).unwrap();

    for (path, err) in [
        (&vocab, Tokenizer::from_vocab_txt(&vocab).unwrap_err()),
        (&json, Tokenizer::from_file(&json).unwrap_err()),
    ] {
        let TokenizerError::Limit(l) = &err else {
            panic!("{}: expected a limit error, got {err:?}", path.display())
        };
        assert_eq!((l.limit, l.max), ("max_file_bytes", 1024));
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("RLX_MAX_FILE_BYTES"),
            "{msg}"
        );
    }
    // A device reports length 0 and never ends: the read stops at the bound.
    #[cfg(unix)]
    {
        let err = Tokenizer::from_file("/dev/zero").unwrap_err();
        assert!(
            matches!(&err, TokenizerError::Limit(l) if l.value == 1025),
            "{err:?}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}
