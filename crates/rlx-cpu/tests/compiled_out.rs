//! Feature-gated kernels: with the feature on the op runs; with it off
//! (`cargo test -p rlx-cpu --no-default-features`, run by CI) compiling a
//! graph that uses it fails with "compiled out of this build", not
//! "unsupported".

use rlx_cpu::CpuBackend;
use rlx_ir::text;
use rlx_runtime::{legalize, Backend, DispatchOptions};

#[test]
fn fft_is_either_available_or_reported_as_compiled_out() {
    let g = text::parse("graph @g(%x: c64[4]) {\n  %y = fft(%x)\n  return %y\n}").unwrap();
    let r = legalize(&g, &CpuBackend::default(), &DispatchOptions::default());
    if cfg!(feature = "fft") {
        assert!(r.is_ok());
        assert!(CpuBackend::default().claims().ops.contains_key("fft"));
    } else {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("compiled out of this build (enable cargo feature `fft`)"),
            "{e}"
        );
        assert!(e.contains("rebuild with cargo feature `fft`"), "{e}");
    }
}

#[test]
fn quant_is_either_available_or_reported_as_compiled_out() {
    let g = text::parse(
        "graph @g(%x: f32[2,32], %w: q8_0[3,32]) {\n  %y = dequant_matmul(%x, %w)\n  return %y\n}",
    )
    .unwrap();
    let r = legalize(&g, &CpuBackend::default(), &DispatchOptions::default());
    if cfg!(feature = "quant") {
        assert!(r.is_ok());
    } else {
        // dequant_matmul is fused: its decomposition needs `dequantize`,
        // which is compiled out too — the message says both.
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("compiled out of this build (enable cargo feature `quant`)"),
            "{e}"
        );
    }
}

/// A weight whose rows are not whole blocks (48 values of q4_0: 1.5
/// blocks) is a type error naming the rows, not a silently misread matrix.
#[test]
fn dequant_matmul_rows_must_be_whole_blocks() {
    let e = text::parse(
        "graph @g(%x: f32[1,48], %w: q4_0[2,48]) {\n  %y = dequant_matmul(%x, %w)\n  return %y\n}",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rows of 48 values, not a whole number of q4_0 blocks"),
        "{e}"
    );
}
