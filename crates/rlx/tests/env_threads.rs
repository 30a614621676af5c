//! `RLX_NUM_THREADS=100000` is lowered to the cores with a warning, at
//! once, instead of spawning 100000 threads (a test binary of its own: the
//! thread pool is process-wide).

use std::time::{Duration, Instant};

#[test]
fn a_huge_thread_count_is_clamped_not_spawned() {
    let env =
        rlx::env::from_lookup(|n| (n == "RLX_NUM_THREADS").then(|| "100000".to_string())).unwrap();
    let t0 = Instant::now();
    rlx::env::apply(&env).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let cores = rlx_cpu::available_parallelism();
    assert!(
        rlx_cpu::fast::threads() <= cores,
        "{} > {cores}",
        rlx_cpu::fast::threads()
    );
    // A model still compiles and runs on the pool.
    let g = rlx::ir::text::parse("graph @g(%x: f32[2]) {\n  %y = exp(%x)\n  return %y\n}").unwrap();
    let m = rlx::compile(&g, rlx::Device::Cpu).unwrap();
    let x = rlx::HostTensor::from_slice(&[0.0f32, 1.0], [2]).unwrap();
    assert_eq!(m.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap()[0], 1.0);
}

#[test]
fn zero_threads_is_an_error_naming_the_variable() {
    let e = rlx::env::from_lookup(|n| (n == "RLX_NUM_THREADS").then(|| "0".to_string()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("RLX_NUM_THREADS") && e.contains(">= 1"), "{e}");
}
