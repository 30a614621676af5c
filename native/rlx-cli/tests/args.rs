//! The command line as a careless or hostile user drives it: every case
//! here once panicked, hung, read forever or did the wrong thing quietly.

use std::io::Read;
use std::process::{Command, Output, Stdio};

fn rlx_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rlx"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run rlx")
}

fn rlx(args: &[&str]) -> Output {
    rlx_env(args, &[])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit code, stdout, stderr; and never a panic.
fn code(o: &Output) -> (i32, String, String) {
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    (o.status.code().unwrap_or(-1), text(&o.stdout), err)
}

const BLOCK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/examples/attention_block.mir"
);

#[test]
fn help_and_version_work_everywhere() {
    let (c, out, _) = code(&rlx(&["--help"]));
    assert_eq!(c, 0);
    assert!(out.contains("embed") && out.contains("Exit codes"), "{out}");
    let (c, out, _) = code(&rlx(&["--version"]));
    assert_eq!(c, 0);
    assert!(out.starts_with("rlx "), "{out}");
    for cmd in [
        "embed", "run", "ir", "dispatch", "compile", "kernels", "ops", "models",
    ] {
        let (c, out, _) = code(&rlx(&[cmd, "--help"]));
        assert_eq!(c, 0, "{cmd} --help");
        assert!(out.contains("Usage: rlx"), "{cmd}: {out}");
    }
    // `rlx embed --help` prints help: it does not embed the string "--help".
    let (_, out, err) = code(&rlx(&["embed", "--help"]));
    assert!(
        out.contains("Example") && !err.contains("embedded"),
        "{out}{err}"
    );
    let (c, out, _) = code(&rlx(&["bench", "minilm", "--help"]));
    assert!(c == 0 && out.contains("--batches"), "{out}");
}

#[test]
fn unknown_flags_and_commands_are_usage_errors() {
    let (c, _, err) = code(&rlx(&["frobnicate"]));
    assert!(c == 2 && err.contains("Usage: rlx"), "{err}");
    // An unknown flag is an error, not more sentences to embed.
    let (c, _, err) = code(&rlx(&["embed", "--bogus", "A"]));
    assert!(c == 2 && err.contains("--bogus"), "{err}");
    let (c, _, err) = code(&rlx(&["embed"]));
    assert!(c == 2 && err.contains("at least one text"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_non_utf8_argument_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let o = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .arg("embed")
        .arg(bad)
        .output()
        .unwrap();
    let (c, _, err) = code(&o);
    assert!(c == 2 && err.contains("UTF-8"), "{err}");
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["ops", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is dropped: the rest of the output hits a closed pipe.
    let o = child.wait_with_output().unwrap();
    let (c, _, err) = code(&o);
    assert!(c == 0 && err.is_empty(), "exit {c}: {err}");
}

#[test]
fn bench_arguments_are_bounded() {
    let (c, _, err) = code(&rlx(&["bench", "minilm", "--runs", "0"]));
    assert!(c == 2 && err.contains("--runs"), "{err}");
    let (c, _, err) = code(&rlx(&["bench", "minilm", "--batches", "100000000"]));
    assert!(c == 2 && err.contains("--batches"), "{err}");
    let (c, _, err) = code(&rlx(&["bench", "minilm", "--seq", "0"]));
    assert!(c == 2 && err.contains("--seq"), "{err}");
}

#[cfg(unix)]
#[test]
fn ir_of_an_endless_file_stops_at_the_limit() {
    let t = std::time::Instant::now();
    let (c, _, err) = code(&rlx_env(
        &["ir", "/dev/zero"],
        &[("RLX_MAX_FILE_BYTES", "1000000")],
    ));
    assert!(c == 5 && err.contains("max_file_bytes"), "exit {c}: {err}");
    assert!(t.elapsed().as_secs() < 30);
}

#[test]
fn bad_environment_values_name_the_variable() {
    let (c, _, err) = code(&rlx_env(
        &["run", BLOCK, "--random", "0"],
        &[("RLX_NUM_THREADS", "abc")],
    ));
    assert!(c == 2 && err.contains("RLX_NUM_THREADS"), "{err}");
    let (c, _, err) = code(&rlx_env(
        &["run", BLOCK, "--random", "0"],
        &[("RLX_DEVICE", "bogus")],
    ));
    assert!(
        c == 2 && err.contains("RLX_DEVICE") && err.contains("bogus"),
        "{err}"
    );
    // RLX_DEVICE is obeyed, not ignored: Metal is not in this build.
    let (c, _, err) = code(&rlx_env(
        &["run", BLOCK, "--random", "0"],
        &[("RLX_DEVICE", "metal")],
    ));
    assert!(c == 4 && err.contains("metal"), "exit {c}: {err}");
}

#[test]
fn too_many_threads_are_clamped_with_a_warning() {
    let (c, out, err) = code(&rlx(&[
        "run",
        BLOCK,
        "--random",
        "0",
        "--threads",
        "100000",
    ]));
    assert!(
        c == 0 && err.contains("warning") && err.contains("100000"),
        "{err}"
    );
    assert!(out.contains("y: f32[1,4,8]"), "{out}");
    let (c, _, err) = code(&rlx(&["run", BLOCK, "--random", "0", "--threads", "0"]));
    assert!(c == 2 && err.contains("threads"), "{err}");
}

/// A `.npy` file as NumPy's format spec lays it out (version 1.0).
fn npy_f32(shape: &str, vals: &[f32]) -> Vec<u8> {
    let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((h.len() as u16).to_le_bytes());
    v.extend(h.as_bytes());
    for x in vals {
        v.extend(x.to_le_bytes());
    }
    v
}

#[test]
fn run_reads_npy_inputs_and_writes_npy_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    std::fs::write(
        p("mm.mir"),
        "graph @mm(%x: f32[2,3], %w: f32[3,2]) {\n  %y = matmul(%x, %w)\n  %z = relu(%y)\n  return %y, %z\n}\n",
    )
    .unwrap();
    std::fs::write(p("x.npy"), npy_f32("(2, 3)", &[1., 2., 3., 4., 5., 6.])).unwrap();
    std::fs::write(p("w.npy"), npy_f32("(3, 2)", &[1., -1., 0., 2., -1., 0.])).unwrap();
    let s = |q: &std::path::Path| q.to_str().unwrap().to_string();
    let (xi, wi) = (
        format!("x={}", s(&p("x.npy"))),
        format!("w={}", s(&p("w.npy"))),
    );
    let out_dir = s(&p("out"));
    let (c, out, err) = code(&rlx(&[
        "run",
        &s(&p("mm.mir")),
        "-i",
        &xi,
        "-i",
        &wi,
        "--output-dir",
        &out_dir,
    ]));
    assert_eq!(c, 0, "{err}");
    assert!(err.contains("dispatch on cpu"), "{err}");
    assert!(out.contains("y: f32[2,2]"), "{out}");
    // [1 2 3; 4 5 6] · [1 -1; 0 2; -1 0] = [-2 3; -2 6]; relu = [0 3; 0 6].
    for (name, want) in [("y", [-2f32, 3., -2., 6.]), ("z", [0., 3., 0., 6.])] {
        let b = std::fs::read(p("out").join(format!("{name}.npy"))).unwrap();
        assert_eq!(b, npy_f32("(2, 2)", &want), "{name}");
    }
    // Without its inputs the run names what is missing.
    let (c, _, err) = code(&rlx(&["run", &s(&p("mm.mir")), "-i", &xi]));
    assert!(c == 2 && err.contains("w: f32[3,2]"), "{err}");
    // An input of the wrong shape is refused with both shapes.
    let (c, _, err) = code(&rlx(&[
        "run",
        &s(&p("mm.mir")),
        "-i",
        &format!("x={}", s(&p("w.npy"))),
        "-i",
        &wi,
    ]));
    assert!(
        c == 3 && err.contains("f32[3,2]") && err.contains("f32[2,3]"),
        "{err}"
    );
    let (c, _, err) = code(&rlx(&["run", &s(&p("mm.mir")), "-i", "nope=x.npy"]));
    assert!(c == 2 && err.contains("no input `nope`"), "{err}");
}

#[test]
fn models_list_shows_the_cache_of_rlx_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_str().unwrap();
    let (c, out, _) = code(&rlx_env(&["models", "list"], &[("RLX_HOME", home)]));
    assert!(
        c == 0 && out.contains(home) && out.contains("all-minilm-l6-v2"),
        "{out}"
    );
    assert!(out.contains("not fetched"), "{out}");
    let (c, _, err) = code(&rlx_env(
        &["models", "fetch", "gpt-17"],
        &[("RLX_HOME", home)],
    ));
    assert!(c == 2 && err.contains("no model `gpt-17`"), "{err}");
}

/// MiniLM's embeddings as JSON on a device.
fn embed_json(device: &str, texts: &[&str]) -> Vec<Vec<f64>> {
    let mut args = vec!["embed", "--json", "--device", device];
    args.extend(texts);
    let (c, out, err) = code(&rlx(&args));
    assert_eq!(c, 0, "{err}");
    assert!(err.contains(&format!("dispatch on {device}")), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn embed_on_vulkan_agrees_with_the_cpu_and_prints_cosines_only_on_request() {
    let texts = [
        "A man is eating food.",
        "A man eats bread.",
        "The sky is blue today.",
    ];
    let cpu = embed_json("cpu", &texts);
    let gpu = embed_json("vulkan", &texts);
    assert_eq!((cpu.len(), cpu[0].len()), (3, 384));
    for (a, b) in cpu.iter().zip(&gpu) {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let max = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(
            dot > 0.9999 && max < 2e-3,
            "cosine {dot}, max abs diff {max}"
        );
    }
    let (c, out, _) = code(&rlx(&["embed", texts[0], texts[1]]));
    assert!(c == 0 && !out.contains("cosine"), "{out}");
    let (c, out, _) = code(&rlx(&["embed", texts[0], texts[1], "--cosine"]));
    assert!(c == 0 && out.contains("cosine similarity"), "{out}");
}

#[test]
fn a_huge_graph_is_a_limit_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("huge.mir");
    std::fs::write(
        &f,
        "graph @huge(%x: f32[1000000,1000000]) {\n  %y = relu(%x)\n  return %y\n}\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    for args in [
        vec!["compile", f, "--print", "lir"],
        vec!["run", f, "--random", "0"],
    ] {
        let (c, _, err) = code(&rlx(&args));
        assert!(
            c == 5 && err.contains("max_tensor_bytes"),
            "{args:?}: exit {c}: {err}"
        );
    }
    // RLX_MAX_TENSOR_BYTES is obeyed: 4 KiB refuses a 2 × 1024 f32 input.
    let small = dir.path().join("small.mir");
    std::fs::write(
        &small,
        "graph @s(%x: f32[2,1024]) {\n  %y = relu(%x)\n  return %y\n}\n",
    )
    .unwrap();
    let (c, _, err) = code(&rlx_env(
        &["run", small.to_str().unwrap(), "--random", "0"],
        &[("RLX_MAX_TENSOR_BYTES", "4K")],
    ));
    assert!(
        c == 5 && err.contains("RLX_MAX_TENSOR_BYTES"),
        "exit {c}: {err}"
    );
}

/// `rlx run` on ONNX models: imported, compiled and run (external data
/// read from beside the model); a file that is not ONNX is exit 3; a model with an op the importer lacks is exit 4,
/// naming the node; `--dim` only for ONNX.
#[test]
fn run_imports_onnx_models() {
    let conv = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/rlx-onnx/tests/data/node/test_basic_conv_without_padding/model.onnx"
    );
    let (c, out, err) = code(&rlx(&["run", conv, "--random", "0", "--report"]));
    assert_eq!(c, 0, "{err}");
    assert!(out.contains("y: f32[1,1,3,3]"), "{out}");
    // A one-channel conv is its own depthwise case (group == channels == 1).
    assert!(
        err.contains("cpu::fast::conv<f32: direct depthwise>"),
        "{err}"
    );
    // The same model as .rten (rten-convert): run and inspected alike.
    let rten = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/rlx-onnx/tests/data/rten/test_basic_conv_without_padding.rten"
    );
    let (c, out, err) = code(&rlx(&["run", rten, "--random", "0"]));
    assert_eq!(c, 0, "{err}");
    assert!(out.contains("y: f32[1,1,3,3]"), "{out}");
    let (c, out, err) = code(&rlx(&["inspect", rten]));
    assert_eq!(c, 0, "{err}");
    assert!(
        out.contains("RTen (read as ONNX)") && out.contains("Conv 1"),
        "{out}"
    );
    // A one-node model (made with onnx.helper) of an op rlx cannot map
    // here: Unique's output length depends on the values, so it runs at
    // import only, and this input is a run-time one.
    let unsupported = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/unique_unsupported.onnx"
    );
    let (c, _, err) = code(&rlx(&["run", unsupported, "--random", "0"]));
    assert_eq!(c, 4, "{err}");
    assert!(
        err.contains("`Unique`")
            && err.contains("unique_values")
            && err.contains("(`x`) must be known at import"),
        "{err}"
    );
    let dir = std::env::temp_dir().join(format!("rlx-onnx-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.onnx");
    std::fs::write(&junk, b"\xff\xff\xff\xff not protobuf").unwrap();
    let (c, _, err) = code(&rlx(&["run", junk.to_str().unwrap(), "--random", "0"]));
    assert_eq!(c, 3, "{err}");
    assert!(err.contains("not an ONNX model"), "{err}");
    let (c, _, err) = code(&rlx(&["run", BLOCK, "--dim", "n=1", "--random", "0"]));
    assert_eq!(c, 2, "{err}");
    // External data: read from beside the model; a copy of the model
    // without its weights.bin is exit 3 naming the tensor and the file.
    let ext = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/rlx-onnx/tests/data/external"
    );
    let model = format!("{ext}/model.onnx");
    let x = format!("X={ext}/x.npy");
    let (c, out, err) = code(&rlx(&["run", &model, "--input", &x]));
    assert_eq!(c, 0, "{err}");
    assert!(out.contains("Y: f32[3,4]"), "{out}");
    let alone = dir.join("model.onnx");
    std::fs::copy(&model, &alone).unwrap();
    let (c, _, err) = code(&rlx(&["run", alone.to_str().unwrap(), "--input", &x]));
    assert_eq!(c, 3, "{err}");
    assert!(
        err.contains("tensor `W`") && err.contains("weights.bin"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run --profile` asks the compiled program's backend (the trait, not the
/// CPU's global table), so it times kernels on the device it ran on.
#[test]
fn run_profile_times_kernels_on_the_device_it_ran_on() {
    for (device, how) in [("cpu", "CPU: host clock"), ("vulkan", "wgpu: ")] {
        let (c, _, err) = code(&rlx(&[
            "run",
            BLOCK,
            "--random",
            "0",
            "--profile",
            "--device",
            device,
        ]));
        assert!(c == 0, "{device}: exit {c}: {err}");
        assert!(
            err.contains("per-kernel profile") && err.contains(how),
            "{device}: {err}"
        );
        assert!(
            err.lines().any(|l| l.starts_with("total")),
            "{device}: {err}"
        );
    }
}
