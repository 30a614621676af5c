//! `gpu copies`: pinned staging and async copies, checked bit for bit.

use super::*;

/// Exact bitwise equality (floats compared by value; NaN equals NaN).
fn identical(got: &[HostTensor], want: &[HostTensor]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, want {}", got.len(), want.len()));
    }
    got.iter()
        .zip(want)
        .enumerate()
        .try_for_each(|(k, (g, w))| close(g, w, 0.0, 0.0).map_err(|e| format!("output {k}: {e}")))
}

/// Pinned staging and async copies: a graph whose outputs are exact
/// functions of its inputs (one IEEE rounding each, so the GPU must equal
/// the CPU bit for bit), with odd sizes and four dtypes packed into one
/// staging buffer, run with fresh inputs many times — with and without
/// CUDA graph replay, with one input resident, and with two launches
/// queued back to back before one read (the staging buffer is refilled
/// while the first run's copies may still be in flight).
pub(super) fn copies() -> usize {
    let src = "graph @g(%x: f32[37,129], %y: f32[37,129], %i: i64[5], %h: f16[3,7]) {\n  %a = add(%x, %y)\n  %m = mul(%x, %y)\n  %b = add(%i, %i)\n  %c = add(%h, %h)\n  return %a, %m, %b, %c\n}";
    let g = text::parse(src).expect("copies graph");
    let compiled = compile_cuda(&g, true).expect("copies graph compiles natively");
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    let mut rng = Rng(0xc0b1e5);
    let fresh = |rng: &mut Rng, y: &HostTensor| -> Vec<HostTensor> {
        let f = |rng: &mut Rng, d: DType, dims: &[usize]| {
            let n: usize = dims.iter().product();
            HostTensor::from_f64(
                d,
                rlx_ir::Shape::from(dims),
                (0..n).map(|_| rng.normal() * 3.0).collect(),
            )
            .unwrap()
        };
        let ids: Vec<i64> = (0..5)
            .map(|_| (rng.next() >> 20) as i64 - (1 << 42))
            .collect();
        vec![
            f(rng, DType::F32, &[37, 129]),
            y.clone(),
            HostTensor::from_slice(&ids, [5]).unwrap(),
            f(rng, DType::F16, &[3, 7]),
        ]
    };
    let y = HostTensor::from_f64(
        DType::F32,
        rlx_ir::Shape::from([37usize, 129]),
        (0..37 * 129).map(|k| (k as f64).sin() * 2.0).collect(),
    )
    .unwrap();
    let (mut pass, mut fail) = (0, 0);
    let mut check = |name: String, r: Result<(), String>| match r {
        Ok(()) => {
            pass += 1;
            println!("ok   copies/{name}");
        }
        Err(e) => {
            fail += 1;
            println!("FAIL copies/{name}: {e}");
        }
    };
    for cuda_graph in [true, false] {
        let exe = base
            .options(CudaOptions {
                cuda_graph,
                ..env_opts()
            })
            .compile_program(compiled.program())
            .unwrap();
        exe.keep_resident(&[1]);
        let tag = if cuda_graph { "graph" } else { "eager" };
        let mut bad = Ok(());
        for it in 0..25 {
            let ins = fresh(&mut rng, &y);
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let got = exe
                .run_cuda(&ins.iter().collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            if let Err(e) = got.and_then(|o| identical(&o, &want)) {
                bad = Err(format!("run {it}: {e}"));
                break;
            }
        }
        check(format!("{tag}/25 runs identical to the CPU"), bad);
        // Two launches back to back, one read: the outputs are the second's.
        let (a, b) = (fresh(&mut rng, &y), fresh(&mut rng, &y));
        let r = exe
            .launch_async(&a.iter().collect::<Vec<_>>())
            .and_then(|_| exe.launch_async(&b.iter().collect::<Vec<_>>()))
            .and_then(|_| exe.read_outputs())
            .map_err(|e| e.to_string())
            .and_then(|o| identical(&o, &rlx_cpu::run_graph(&g, &b).unwrap()));
        check(format!("{tag}/back-to-back launches"), r);
        // A wrong input is still a typed error, not a copy of garbage.
        let mut wrong = fresh(&mut rng, &y);
        wrong[0] = HostTensor::zeros(DType::F32, rlx_ir::Shape::from([36usize, 129])).unwrap();
        let r = match exe.run_cuda(&wrong.iter().collect::<Vec<_>>()) {
            Err(rlx_cuda::CudaError::Input(_)) => Ok(()),
            other => Err(format!("expected an Input error, got {other:?}")),
        };
        check(format!("{tag}/wrong shape is a typed error"), r);
    }
    println!("{pass} passed, {fail} failed");
    fail
}
