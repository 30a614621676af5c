//! Errors across the JS boundary: a JS `Error` named `RlxError` carrying a
//! `code` and the Rust error's text. The npm wrapper re-throws it as its
//! `RlxError` class, which adds the codes of its own checks
//! (`invalid_argument`, `internal`, `init`). Codes set here: `parse`,
//! `graph`, `limit`, `shape`, `dtype`, `dispatch`, `device`, `format`,
//! `input`, `invalid_argument`, `runtime`, `tokenizer`, `disposed`; a panic
//! becomes `panic` in the wrapper. The list is npm/API.md's.

use rlx_runtime::RuntimeError;
use std::cell::RefCell;
use wasm_bindgen::JsValue;

/// A JS error with `code` set.
pub fn err(code: &str, msg: impl std::fmt::Display) -> JsValue {
    let e = js_sys::Error::new(&msg.to_string());
    e.set_name("RlxError");
    let _ = js_sys::Reflect::set(&e, &"code".into(), &code.into());
    e.into()
}

/// The code for an IR error: text-format problems are `parse`, a bound of
/// rlx's limits `limit`, the rest (unknown ops, bad attributes, shape
/// rules) `graph`.
fn ir_code(e: &rlx_ir::IrError) -> &'static str {
    match e {
        rlx_ir::IrError::Parse { .. } => "parse",
        rlx_ir::IrError::Limit(_) => "limit",
        _ => "graph",
    }
}

fn runtime_code(e: &RuntimeError) -> &'static str {
    match e {
        RuntimeError::Ir(i) => ir_code(i),
        RuntimeError::Dispatch(_) => "dispatch",
        RuntimeError::Backend { .. } => "runtime",
        RuntimeError::DeviceLost { .. } => "device_lost",
        RuntimeError::Config(_) => "device",
        #[allow(unreachable_patterns)]
        _ => "runtime",
    }
}

/// Errors of the public Rust API.
pub fn rlx_err(e: rlx::Error) -> JsValue {
    let code = match &e {
        rlx::Error::Trace { .. } => "graph",
        rlx::Error::Ir(i) => ir_code(i),
        rlx::Error::Runtime(r) => runtime_code(r),
        rlx::Error::Quant(_) => "quantization",
    };
    err(code, e)
}

pub fn ir_err(e: rlx_ir::IrError) -> JsValue {
    err(ir_code(&e), e)
}

pub fn runtime_err(e: RuntimeError) -> JsValue {
    err(runtime_code(&e), e)
}

pub fn format_err(e: rlx_formats::FormatError) -> JsValue {
    err("format", e)
}

pub fn embed_err(e: rlx_models::embed::EmbedError) -> JsValue {
    use rlx_models::embed::EmbedError as E;
    match e {
        E::Format(f) => format_err(f),
        E::Tokenizer(t) => err("tokenizer", t),
        E::Model(m) => rlx_err(m),
        E::Ir(i) => ir_err(i),
        other => err("format", other),
    }
}

thread_local! {
    static PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Called by the panic hook: keep the message for [`take_panic`].
pub fn record_panic(msg: String) {
    PANIC.with(|p| *p.borrow_mut() = msg);
}

/// The last panic message, cleared.
pub fn take_panic() -> String {
    PANIC.with(|p| std::mem::take(&mut *p.borrow_mut()))
}
