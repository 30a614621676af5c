//! CI check: library code reads no `RLX_*` environment variable; only the
//! edge, `rlx::env` (crates/rlx/src/env.rs), does. Scans the `src/` trees
//! of crates/, native/ (the CLI aside: a binary, which calls the edge) and
//! web/; tests, examples and benches are not library code.
//!
//! A read is any `env::var`/`var_os`/`vars` call or `env!`/`option_env!`
//! macro; one whose name is a string literal not starting with `RLX_` is
//! allowed (e.g. `HOME`), because the rule is about rlx's own settings. A
//! name given through a constant is flagged: it could hide an `RLX_` name.

use std::path::{Path, PathBuf};

/// Files allowed to read the environment: the edge itself.
const EDGE: &[&str] = &["crates/rlx/src/env.rs", "crates/rlx/src/env/"];
/// Binaries: edges of their own.
const SKIP: &[&str] = &["native/rlx-cli/"];

const READS: &[&str] = &[
    "env::var(",
    "env::var_os(",
    "env::vars(",
    "env::vars_os(",
    "var_os(",
    "env!(",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The library `src/` directories under `root`.
fn library_sources(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for group in ["crates", "native"] {
        if let Ok(rd) = std::fs::read_dir(root.join(group)) {
            dirs.extend(rd.flatten().map(|e| e.path().join("src")));
        }
    }
    dirs.push(root.join("web/src"));
    let mut files = Vec::new();
    for d in dirs {
        rust_files(&d, &mut files);
    }
    files
}

/// The offending reads on one line, if any.
fn offends(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    READS.iter().any(|r| {
        code.match_indices(r).any(|(i, _)| {
            let arg = code[i + r.len()..].trim_start();
            // A literal name that is not ours is fine.
            !arg.starts_with('"') || arg.starts_with("\"RLX_")
        })
    })
}

#[test]
fn library_code_reads_no_rlx_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut offenders = Vec::new();
    let files = library_sources(&root);
    assert!(files.len() > 50, "found only {} source files", files.len());
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .unwrap_or(&f)
            .to_string_lossy()
            .replace('\\', "/");
        if EDGE.iter().chain(SKIP).any(|e| rel.starts_with(e)) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if offends(line) {
                offenders.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "library code reads the environment outside rlx::env (crates/rlx/src/env.rs); \
         add a typed option and parse the variable there instead:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_should() {
    assert!(offends(r#"let v = std::env::var("RLX_NUM_THREADS");"#));
    assert!(offends("std::env::var(HGEMM_ENV).ok()"));
    assert!(offends(r#"if std::env::var_os("RLX_X").is_some() {"#));
    assert!(!offends(r#"let home = std::env::var_os("HOME");"#));
    assert!(!offends("// std::env::var(\"RLX_X\") in a comment"));
    assert!(!offends(r#"let d = env!("CARGO_MANIFEST_DIR");"#));
}
