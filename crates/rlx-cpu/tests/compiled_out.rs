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
