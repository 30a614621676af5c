// Run every reference vector (tests/vectors/ops/*.json) inside the wasm32
// build of rlx (web/, built by scripts/build-wasm) under Node.
// Usage: node scripts/wasm-conformance.mjs path/to/rlx_web.wasm
import fs from "node:fs";
import path from "node:path";

const wasmPath = process.argv[2];
const dir = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "tests", "vectors", "ops");
// The raw module (before wasm-bindgen's post-processing) imports the JS
// glue's functions; the C ABI used here never calls them, so every import
// is a stub that throws if it ever is.
const stub = new Proxy({}, {
  get: (_, name) => () => {
    throw new Error(`wasm import ${String(name)} called from the C ABI`);
  },
});
const imports = new Proxy({}, { get: () => stub });
const mod = await WebAssembly.compile(fs.readFileSync(wasmPath));
const wanted = {};
for (const i of WebAssembly.Module.imports(mod)) (wanted[i.module] ??= {})[i.name] = imports[i.module][i.name];
const instance = await WebAssembly.instantiate(mod, wanted);
const ex = instance.exports;
let runs = 0;
let failed = 0;
const messages = [];
for (const name of fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  const bytes = fs.readFileSync(path.join(dir, name));
  const ptr = ex.rlx_alloc(bytes.length);
  new Uint8Array(ex.memory.buffer, ptr, bytes.length).set(bytes);
  const f = ex.rlx_run_vectors(ptr, bytes.length);
  ex.rlx_free(ptr, bytes.length);
  runs += ex.rlx_last_runs();
  if (f > 0) {
    failed += f;
    const m = new Uint8Array(ex.memory.buffer, ex.rlx_last_message_ptr(), ex.rlx_last_message_len());
    messages.push(new TextDecoder().decode(m));
  }
}
console.log(`wasm32: ${ex.rlx_op_count()} op kinds; ${runs} vector runs, ${failed} failures`);
if (failed > 0) {
  console.log(messages.join("\n"));
  process.exit(1);
}
if (runs === 0) {
  console.log("no vectors found in " + dir);
  process.exit(1);
}
