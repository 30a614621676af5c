//! The reference-vector cases in the CPU emulation (part of `emulate.rs`,
//! split out by what it holds), and a stored value whose operand's memory
//! is reused.

use super::*;

/// `got` within `rtol`/`atol` of `want` (NaN matches NaN), integers exact;
/// 16-bit outputs with CUDA's tolerances (one rounding each).
fn close(got: &HostTensor, want: &HostTensor, rtol: f64, atol: f64) -> Result<(), String> {
    let (rtol, atol) = match want.dtype() {
        DType::F16 | DType::BF16 => rlx_cuda::tolerance(want.dtype(), rtol, atol),
        _ => (rtol, atol),
    };
    rlx_ref::conformance::close(got, want, rtol, atol)
}

/// Every reference-vector case the CUDA planner takes, as written and as
/// f16/bf16 copies of its f32 graphs, on the case's inputs, against the
/// CPU reference on the same graph — where the emulation can run its plan
/// (not the tensor-core attention). Minutes on 2 cores:
/// `cargo test -p rlx-cuda --test emulate -- --ignored`.
#[test]
#[ignore]
fn all_vector_cases() {
    vector_cases(&|_| true);
}

/// The direct conv, transposed conv and pool kernels on their reference
/// vectors (1-3 spatial axes, groups, dilations, pads), f32, f16 and bf16
/// (the ops' f64 cases too): seconds, so in CI.
#[test]
fn conv_and_pool_vector_cases() {
    let ops = ["conv", "conv_act", "conv_transpose", "max_pool", "avg_pool"];
    vector_cases(&|op| ops.contains(&op));
}

/// The one-kernel `rope` (rotate-half and interleaved, strided inputs) on
/// its reference vectors, f32 / f16 / bf16: seconds, so in CI.
#[test]
fn rope_vector_cases() {
    vector_cases(&|op| op == "rope");
}

/// `rope` reading a permuted x (strided, as a decoder's heads are after
/// the projection's reshape), both layouts, against the CPU reference.
#[test]
fn rope_of_a_permuted_input() {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let vals =
        |n: usize, k: f64| -> Vec<f64> { (0..n).map(|i| ((i as f64 + k) * 0.37).sin()).collect() };
    let ins = vec![
        HostTensor::from_f64(DType::F32, [3, 2, 8], vals(48, 1.0)).unwrap(),
        HostTensor::from_f64(DType::F32, [3, 4], vals(12, 2.0)).unwrap(),
        HostTensor::from_f64(DType::F32, [3, 4], vals(12, 3.0)).unwrap(),
    ];
    let mut cases = Vec::new();
    for il in [false, true] {
        let text = format!(
            "graph @g(%x: f32[3,2,8], %cos: f32[3,4], %sin: f32[3,4]) {{\n  %t = permute(%x) {{perm=[1, 0, 2]}}\n  %r = rope(%t, %cos, %sin) {{interleaved={il}}}\n  return %r\n}}"
        );
        let want = rlx_cpu::run_graph(&parse(&text).unwrap(), &ins).unwrap();
        let p = plan_of(&text).expect("plannable");
        let kernels = p.launches.len();
        assert_eq!(
            kernels, 1,
            "interleaved={il}: rope is one kernel, got {kernels} launches"
        );
        cases.push((il, p, want));
    }
    let plans: Vec<&plan::Plan> = cases.iter().map(|c| &c.1).collect();
    let exe = build("rope_permuted", &plans).unwrap();
    for (k, (il, p, want)) in cases.iter().enumerate() {
        let (got, err) = exec(&exe, k, p, &ins).unwrap();
        assert_eq!(err, 0);
        let d = max_rel(&got[0], &want[0]);
        assert!(d <= 1e-6, "interleaved={il}: max rel diff {d:e}");
    }
}

/// [`all_vector_cases`] for the files of the ops `keep` takes.
fn vector_cases(keep: &dyn Fn(&str) -> bool) {
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/ops");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let (mut pass, mut fail, mut skipped) = (0, 0, 0);
    for f in files {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let op = v["op"].as_str().unwrap_or("?").to_string();
        if !keep(&op) {
            continue;
        }
        // (name, plan, inputs, CPU reference) of this file's cases.
        let mut cases = Vec::new();
        for case in v["cases"].as_array().cloned().unwrap_or_default() {
            if case.get("moments").is_some() || case.get("error").is_some() {
                continue;
            }
            let src = case["graph"].as_str().unwrap_or("").to_string();
            let Some(Ok(ins)) = case["inputs"].as_array().map(|a| {
                a.iter()
                    .map(HostTensor::from_json)
                    .collect::<Result<Vec<_>, _>>()
            }) else {
                continue;
            };
            for dt in ["f32", "f16", "bf16"] {
                if dt != "f32" && !src.contains("f32") {
                    break;
                }
                let text = src.replace("f32", dt);
                let name = format!("{op}/{}<{dt}>", case["name"].as_str().unwrap_or("?"));
                let r = std::panic::catch_unwind(|| {
                    let g = parse(&text).ok()?;
                    let ins: Vec<HostTensor> = g
                        .input_types()
                        .iter()
                        .zip(&ins)
                        .map(|(ty, t)| {
                            if ty.dtype == t.dtype() {
                                Some(t.clone())
                            } else {
                                HostTensor::from_f64(
                                    ty.dtype,
                                    t.shape().clone(),
                                    t.to_f64_vec().ok()?,
                                )
                                .ok()
                            }
                        })
                        .collect::<Option<_>>()?;
                    let want = rlx_cpu::run_graph(&g, &ins).ok()?;
                    // A narrow copy's values may overflow to inf, whose
                    // conversion to an integer differs between machines.
                    if dt != "f32" && want.iter().any(|t| !t.dtype().is_float()) {
                        return None;
                    }
                    let p = plan_of(&text)?;
                    Some((p, ins, want))
                });
                match r {
                    Ok(Some((p, ins, want))) if emulable(&p) => cases.push((name, p, ins, want)),
                    Ok(Some(_)) => skipped += 1,
                    _ => {}
                }
            }
        }
        if cases.is_empty() {
            continue;
        }
        let plans: Vec<&plan::Plan> = cases.iter().map(|c| &c.1).collect();
        let stem = f.file_stem().unwrap().to_string_lossy().to_string();
        let exe = match build(&format!("vectors_{stem}"), &plans) {
            Ok(e) => e,
            Err(e) => {
                fail += cases.len();
                println!("FAIL {stem} ({} cases): {e}", cases.len());
                continue;
            }
        };
        for (k, (name, p, ins, want)) in cases.iter().enumerate() {
            let r = exec(&exe, k, p, ins).and_then(|(got, err)| {
                if err != 0 {
                    return Err(format!("error flag {err}"));
                }
                got.iter()
                    .zip(want)
                    .enumerate()
                    .try_for_each(|(o, (g, w))| {
                        close(g, w, 1e-4, 1e-5).map_err(|e| format!("output {o}: {e}"))
                    })
            });
            match r {
                Ok(()) => pass += 1,
                Err(e) => {
                    fail += 1;
                    println!("FAIL {name}: {e}");
                }
            }
        }
    }
    println!(
        "{pass} passed, {fail} failed, {skipped} not emulable (inline PTX or pointer-array GEMMs)"
    );
    assert_eq!(fail, 0);
}

/// `v = cast(exp(x))` read by two nodes, but the memory of its operand
/// `exp(x)` is reused by `zh` between them (the LIR's slots: `exp(x)` is
/// dead once `v` is computed): recomputing `v` in the second reader would
/// read `zh`. The planner must notice and store `v` instead. (Without
/// the check the second reader reads `zh`'s halves as f32: inf.)
const OPERAND_REUSED: &str = "graph @g(%x: f32[4,64], %z: f32[4,64]) {\n  %a = exp(%x)\n  %v = cast(%a) {dtype=f16}\n  %zh = cast(%z) {dtype=f16}\n  %r1 = add(%v, %zh)\n  %t = exp(%z)\n  %u = cast(%t) {dtype=f16}\n  %r2 = mul(%v, %u)\n  %o = add(%r1, %r2)\n  return %o\n}";

#[test]
fn a_value_whose_operand_is_overwritten_is_stored() {
    let p = plan_of(OPERAND_REUSED).unwrap();
    let casts = p.kernels_of("cast");
    assert_eq!(casts, 3, "{:?}", p.kernels);
    if !gxx_ok() {
        eprintln!("no g++: not emulated");
        return;
    }
    let ins = inputs_for(OPERAND_REUSED);
    let want = rlx_cpu::run_graph(&parse(OPERAND_REUSED).unwrap(), &ins).unwrap();
    let (got, err) = emulate("operand_reused", OPERAND_REUSED, &ins);
    assert_eq!(err, 0);
    let d = max_rel(&got[0], &want[0]);
    assert!(d <= 2e-3, "max rel diff {d:e}");
}
