//! A malformed `RLX_DISPATCH` is a typed error naming the variable, never
//! silently ignored.

#[test]
fn malformed_dispatch_env_is_an_error() {
    let e = rlx::env::from_lookup(|n| (n == "RLX_DISPATCH").then(|| "fastest".to_string()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("RLX_DISPATCH") && e.contains("unknown dispatch policy `fastest`"),
        "{e}"
    );
}
