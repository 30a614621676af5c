//! A malformed `RLX_DISPATCH` is a typed error at compile time, never
//! silently ignored.

#[test]
fn malformed_dispatch_env_is_an_error() {
    std::env::set_var("RLX_DISPATCH", "fastest");
    let g = rlx::ir::text::parse("graph @g(%x: f32[2]) {\n  %y = exp(%x)\n  return %y\n}").unwrap();
    let e = rlx::compile(&g, rlx::Device::Cpu).unwrap_err().to_string();
    assert!(e.contains("unknown dispatch policy `fastest`"), "{e}");
}
