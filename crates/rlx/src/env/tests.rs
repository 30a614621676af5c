use super::*;
use std::collections::HashMap;

fn with(vars: &[(&str, &str)]) -> Result<EnvOptions, EnvError> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    from_lookup(|n| m.get(n).cloned())
}

fn invalid(vars: &[(&str, &str)]) -> (String, String) {
    match with(vars) {
        Err(e @ EnvError::Invalid { var, .. }) => (var.to_string(), e.to_string()),
        other => panic!("expected an error for {vars:?}, got {other:?}"),
    }
}

#[test]
fn nothing_set_is_the_defaults() {
    assert_eq!(with(&[]).unwrap(), EnvOptions::default());
    // Empty counts as unset.
    assert_eq!(
        with(&[("RLX_NUM_THREADS", ""), ("RLX_CPU_AMX", " ")]).unwrap(),
        EnvOptions::default()
    );
}

#[test]
fn a_bogus_engine_names_the_variable_and_the_choices() {
    let (var, msg) = invalid(&[("RLX_CPU_ENGINE", "bogus")]);
    assert_eq!(var, "RLX_CPU_ENGINE");
    assert!(
        msg.contains("\"bogus\"") && msg.contains("fast, reference"),
        "{msg}"
    );
    let o = with(&[("RLX_CPU_ENGINE", "reference")]).unwrap();
    assert_eq!(o.cpu.engine, CpuEngine::Reference);
}

#[test]
fn bad_thread_counts_are_errors() {
    for bad in ["abc", "0", "-3", "2.5"] {
        let (var, msg) = invalid(&[("RLX_NUM_THREADS", bad)]);
        assert_eq!(var, "RLX_NUM_THREADS");
        assert!(msg.contains(bad) && msg.contains(">= 1"), "{msg}");
    }
    // A huge count parses; `apply` clamps it (tests/env_threads.rs).
    assert_eq!(
        with(&[("RLX_NUM_THREADS", "100000")]).unwrap().threads,
        Some(100_000)
    );
}

#[test]
fn switches_take_0_or_1_only() {
    let o = with(&[
        ("RLX_CPU_AMX", "0"),
        ("RLX_WGPU_SPLITK", "0"),
        ("RLX_PROFILE", "1"),
    ])
    .unwrap();
    assert!(!o.cpu.amx && !o.wgpu.split_k && o.profile);
    let (var, msg) = invalid(&[("RLX_WGPU_COOP", "yes")]);
    assert_eq!(var, "RLX_WGPU_COOP");
    assert!(msg.contains("0 (off) or 1 (on)"), "{msg}");
}

#[test]
fn wgpu_knobs_parse_and_refuse_what_the_kernels_lack() {
    let o = with(&[
        ("RLX_WGPU_MATMUL_BLOCK", "4"),
        ("RLX_WGPU_COOP_TILE", "128x64"),
        ("RLX_WGPU_ATTENTION", "row"),
        ("RLX_WGPU_F16", "f32"),
        ("RLX_WGPU_ATTN_SLICES", "2"),
        ("RLX_WGPU_COOP_BK", "16"),
    ])
    .unwrap();
    assert_eq!(o.wgpu.matmul_block, Some(4));
    assert_eq!(o.wgpu.coop_tile.unwrap().to_string(), "128x64");
    assert_eq!(o.wgpu.attention, WgpuAttention::Row);
    assert_eq!(o.wgpu.f16, WgpuF16::HeldAsF32);
    assert_eq!((o.wgpu.attn_slices, o.wgpu.coop_bk), (Some(2), Some(16)));
    let (var, msg) = invalid(&[("RLX_WGPU_MATMUL_BLOCK", "3")]);
    assert_eq!(var, "RLX_WGPU_MATMUL_BLOCK");
    assert!(msg.contains("2, 4, 8"), "{msg}");
    assert_eq!(
        invalid(&[("RLX_WGPU_COOP_TILE", "32x32")]).0,
        "RLX_WGPU_COOP_TILE"
    );
}

#[test]
fn device_and_dispatch_errors_name_the_variable() {
    let (var, msg) = invalid(&[("RLX_DISPATCH", "fastest")]);
    assert_eq!(var, "RLX_DISPATCH");
    assert!(msg.contains("unknown dispatch policy `fastest`"), "{msg}");
    assert_eq!(
        invalid(&[("RLX_DISPATCH", "nope=native_only")]).0,
        "RLX_DISPATCH"
    );
    assert_eq!(invalid(&[("RLX_DEVICE", "tpu")]).0, "RLX_DEVICE");
    let o = with(&[("RLX_DEVICE", "gpu,cpu"), ("RLX_DISPATCH", "native_only")]).unwrap();
    assert_eq!(o.device.unwrap().chain.len(), 2);
    assert_eq!(o.dispatch.unwrap().policy, rlx_runtime::Policy::NativeOnly);
}

#[test]
fn limits_take_byte_suffixes() {
    let o = with(&[
        ("RLX_MAX_ARENA_BYTES", "64G"),
        ("RLX_MAX_FILE_BYTES", "1048576"),
        ("RLX_MAX_NESTING_DEPTH", "1000"),
    ])
    .unwrap();
    assert_eq!(o.limits.max_arena_bytes, Some(64 << 30));
    assert_eq!(o.limits.max_file_bytes, Some(1 << 20));
    let l = o.limits.over(Limits::DEFAULT);
    assert_eq!(l.max_nesting_depth, 1000);
    assert_eq!(l.max_tensor_bytes, Limits::DEFAULT.max_tensor_bytes);
    for bad in ["lots", "1Q", "-1", "99999999999T"] {
        assert_eq!(
            invalid(&[("RLX_MAX_TENSOR_BYTES", bad)]).0,
            "RLX_MAX_TENSOR_BYTES"
        );
    }
}

#[test]
fn cuda_variables_are_collected_for_rlx_cuda() {
    let o = with(&[("RLX_CUDA_TUNE_LOG", "1"), ("RLX_CUDA_NOT_A_KNOB", "1")]).unwrap();
    assert_eq!(o.cuda_var("RLX_CUDA_TUNE_LOG").as_deref(), Some("1"));
    assert_eq!(o.cuda.len(), 1);
}

#[test]
fn every_variable_is_read_and_documented() {
    // Each name in the table is asked for (so none is documented but dead).
    let asked = std::cell::RefCell::new(Vec::new());
    from_lookup(|n| {
        asked.borrow_mut().push(n.to_string());
        None
    })
    .unwrap();
    let asked = asked.into_inner();
    for v in VARS {
        assert!(
            asked.iter().any(|a| a == v.name),
            "{} is never read",
            v.name
        );
    }
    for a in &asked {
        assert!(
            VARS.iter().any(|v| v.name == a),
            "{a} is read but not in VARS"
        );
    }
    let doc = include_str!("../../../../docs/environment.md");
    for v in VARS {
        assert!(
            doc.contains(&format!("`{}`", v.name)),
            "docs/environment.md lacks {}",
            v.name
        );
    }
}

#[test]
fn misspelt_names_are_reported() {
    let names = [
        "RLX_NUM_THREAD",
        "RLX_NUM_THREADS",
        "RLX_HOME",
        "PATH",
        "RLX_CPU_AMX",
        "RLX_WGPU_CO0P",
    ];
    assert_eq!(
        unknown_among(names.iter().map(|s| s.to_string())),
        vec!["RLX_NUM_THREAD".to_string(), "RLX_WGPU_CO0P".to_string()]
    );
}
