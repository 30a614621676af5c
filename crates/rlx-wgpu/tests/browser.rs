//! The parity suite in the browser: every case of `common/cases.rs` (the
//! same lists `parity.rs` runs on Vulkan) compiled to wasm32 and run by
//! wasm-bindgen-test in headless Chromium's WebGPU (SwiftShader there), via
//! the async path (`GpuContext::create(..).await`, `build_async`,
//! `run_async`), against the CPU reference compiled into the same module;
//! plus the typed errors that can happen in a page (an out-of-range index,
//! an op with no kernel, an arena past the adapter's binding limit).
//! Mismatches are collected, not stopped at, so one run lists every
//! failing case. Run: scripts/test-wgpu-browser.
#![cfg(target_arch = "wasm32")]

mod common;
use common::*;
use rlx::{Device, HostTensor};
use rlx_wgpu::{program_of, GpuContext, PipelineCache, WgpuExecutable};
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

// wasm-bindgen-test keeps a passing test's console output to itself; the
// summary goes into the page's `#output` element, which the runner
// streams to the terminal (the harness writes its own lines there too).
#[wasm_bindgen]
extern "C" {
    type Page;
    #[wasm_bindgen(thread_local_v2, js_name = document)]
    static DOCUMENT: Page;
    #[wasm_bindgen(method, js_name = getElementById)]
    fn element(this: &Page, id: &str) -> Option<Output>;
    type Output;
    #[wasm_bindgen(method, getter = textContent)]
    fn text(this: &Output) -> String;
    #[wasm_bindgen(method, setter = textContent)]
    fn set_text(this: &Output, text: &str);
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn now_ms() -> f64;
}

/// One line on the runner's output (and so in the terminal / CI log).
fn say(line: &str) {
    if let Some(out) = DOCUMENT.with(|d| d.element("output")) {
        out.set_text(&format!("{}{line}\n", out.text()));
    }
}

/// Compile a graph for WebGPU the way `rlx::compile_with` would, without
/// blocking (the browser cannot).
async fn build(
    ctx: &Arc<GpuContext>,
    cache: &PipelineCache,
    g: &rlx::Graph,
) -> Result<WgpuExecutable, String> {
    let program = program_of(g, Device::WebGpu)?;
    WgpuExecutable::build_async(ctx.clone(), cache, &program)
        .await
        .map_err(|e| e.to_string())
}

/// One case on WebGPU against the CPU reference.
async fn check(ctx: &Arc<GpuContext>, cache: &PipelineCache, case: &Case) -> Result<(), String> {
    let want = reference(case)?;
    let exe = build(ctx, cache, &case.graph)
        .await
        .map_err(|e| format!("{}: compile for webgpu: {e}", case.name))?;
    let refs: Vec<&HostTensor> = case.inputs.iter().collect();
    let got = exe
        .run_async(&refs)
        .await
        .map_err(|e| format!("{}: webgpu: {e}", case.name))?;
    compare_all(case, &got, &want)
}

/// One typed-error case on WebGPU: the error comes at the promised stage
/// and names the problem.
async fn check_error(
    ctx: &Arc<GpuContext>,
    cache: &PipelineCache,
    case: &ErrorCase,
) -> Result<(), String> {
    let err = match (build(ctx, cache, &case.graph).await, case.stage) {
        (Err(e), Stage::Compile) => e,
        (Ok(exe), Stage::Run) => {
            let refs: Vec<&HostTensor> = case.inputs.iter().collect();
            match exe.run_async(&refs).await {
                Err(e) => e.to_string(),
                Ok(_) => return Err(format!("{}: ran without an error", case.name)),
            }
        }
        (Ok(_), Stage::Compile) => return Err(format!("{}: compiled", case.name)),
        (Err(e), Stage::Run) => return Err(format!("{}: compile failed: {e}", case.name)),
    };
    expect_message(case, &err)
}

#[wasm_bindgen_test]
async fn every_parity_case_matches_on_webgpu() {
    init();
    let t0 = now_ms();
    let ctx = Arc::new(
        GpuContext::create(Device::WebGpu)
            .await
            .expect("a WebGPU adapter (run Chromium with --enable-unsafe-webgpu)"),
    );
    say(&format!(
        "webgpu adapter: {:?} (context in {:.0} ms)",
        ctx.info,
        now_ms() - t0
    ));
    let cache = PipelineCache::default();
    let mut failed = Vec::new();
    let (mut total, mut passed) = (0, 0);
    for (group, cases) in cases::groups() {
        let t = now_ms();
        let cases = cases();
        let mut ok = 0;
        for case in &cases {
            match check(&ctx, &cache, case).await {
                Ok(()) => ok += 1,
                Err(e) => failed.push(e),
            }
        }
        say(&format!(
            "webgpu parity {group}: {ok}/{} cases match ({:.1} s)",
            cases.len(),
            (now_ms() - t) / 1e3
        ));
        total += cases.len();
        passed += ok;
    }

    // The typed errors a page can meet.
    let errors = cases::error_cases();
    let mut errors_ok = 0;
    for case in &errors {
        match check_error(&ctx, &cache, case).await {
            Ok(()) => errors_ok += 1,
            Err(e) => failed.push(e),
        }
    }
    // An arena past the adapter's storage-binding limit (1 GiB on
    // SwiftShader): refused at compile time, before anything is allocated.
    // (One tensor that big cannot be built on wasm32: the IR caps a tensor
    // at 2^27 elements there. Three live outputs of 0.4 x limit each can.)
    let limit = ctx.info.max_storage_binding;
    let n = (limit / 10) as usize; // f32 elements: 0.4 x limit bytes
    let t = rlx::Trace::new("big");
    let x = t.input("x", rlx::DType::F32, vec![n]);
    let ys: Vec<_> = ["exp", "neg", "abs"]
        .iter()
        .map(|op| x.apply1(op, &[], rlx::Attrs::new()).unwrap())
        .collect();
    let big = t.finish(&ys.iter().collect::<Vec<_>>()).unwrap();
    let error_count = errors.len() + 1;
    match build(&ctx, &cache, &big).await {
        Err(e) if e.contains("maxStorageBufferBindingSize") && e.contains(&limit.to_string()) => {
            errors_ok += 1
        }
        Err(e) => failed.push(format!("oversized arena: unexpected error: {e}")),
        Ok(_) => failed.push("oversized arena: compiled".into()),
    }
    say(&format!(
        "webgpu typed errors: {errors_ok}/{error_count} as expected"
    ));

    // The fused chain is one kernel here too.
    match program_of(&cases::fused_chain(), Device::WebGpu) {
        Ok(p) => {
            let ops = kernel_ops(&p.graph);
            if ops != ["fused_elementwise"] {
                failed.push(format!("fused chain compiled to {ops:?}"));
            }
        }
        Err(e) => failed.push(format!("fused chain: {e}")),
    }

    // Every claimed (op, dtype) reaches the backend in some case.
    match exercised(&all_cases(), Device::WebGpu) {
        Ok(seen) => {
            let missing = uncovered(&seen);
            if !missing.is_empty() {
                failed.push(format!("claimed but untested: {}", missing.join(", ")));
            }
        }
        Err(e) => failed.push(format!("coverage: {e}")),
    }

    say(&format!(
        "webgpu parity summary: {passed}/{total} cases match the CPU reference, \
         {errors_ok}/{error_count} typed errors, {} failures, {:.1} s",
        failed.len(),
        (now_ms() - t0) / 1e3
    ));
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
