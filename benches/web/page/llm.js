// One engine at a time, on the same GGUF file: prefill of a long prompt
// (pp, tokens/s of the prompt) and greedy decode of `gen` tokens from a
// short prompt (tg, tokens/s), EOS ignored, like llama-bench's pp/tg.
//
// rlx: the npm package's rlx.loadLlm on the wasm CPU engine (one thread),
// times from llm.stats (prefill: the call that prefills; decode: from the
// first token to the last). wllama: @wllama/wllama's createCompletion with
// all layers on the CPU (n_gpu_layers 0) and n_threads as asked, times from
// llama.cpp's own `timings` (prompt_per_second, predicted_per_second).
const log = (s) => {
  document.getElementById("log").textContent += s + "\n";
  console.log(s);
};

// A fixed English text, repeated to the prompt length (same file, same
// tokenizer: both engines see the same ids; each reports its count).
const PARA =
  "The river ran past the old mill and under the stone bridge, where children fished on summer evenings " +
  "and the baker's cart crossed every morning before dawn. In the valley the farms grew wheat, barley and " +
  "apples, and the market in town sold them on Saturdays to people who came from the hills. ";

function longPrompt(words) {
  let s = "";
  while (s.split(" ").length < words) s += PARA;
  return s.split(" ").slice(0, words).join(" ");
}

async function rlxEngine(cfg) {
  const rlx = await import(cfg.rlxEntry);
  await rlx.init();
  const t0 = performance.now();
  const llm = await rlx.loadLlm(cfg.model, { device: "cpu" });
  const load = performance.now() - t0;
  const run = async (prompt, maxTokens) => {
    for await (const _ of llm.generate(prompt, { maxTokens, stopAtEos: false, addSpecial: false })) {
      // tokens are timed by llm.stats
    }
    return llm.stats;
  };
  return {
    load,
    // The threaded core in this cross-origin isolated page (rlx.threads() says).
    threads: rlx.threads(),
    multithread: rlx.threads().threads > 1,
    async pp(prompt) {
      const s = await run(prompt, 1);
      return { tokens: s.promptTokens, perSecond: s.promptTokens / (s.prefillMs / 1000) };
    },
    async tg(prompt, gen) {
      const s = await run(prompt, gen);
      // The first token comes from the prefill; the rest are decode steps.
      return { tokens: s.generated, perSecond: s.generated / (s.decodeMs / 1000), text: s.text };
    },
    dispose: () => llm.dispose(),
  };
}

async function wllamaEngine(cfg, threads) {
  const { Wllama } = await import("/node_modules/@wllama/wllama/esm/index.js");
  const w = new Wllama({ default: "/node_modules/@wllama/wllama/esm/wasm/wllama.wasm" }, { suppressNativeLog: true });
  const t0 = performance.now();
  await w.loadModelFromUrl(cfg.model, { n_threads: threads, n_gpu_layers: 0, n_ctx: 2048, useCache: false });
  const load = performance.now() - t0;
  const run = (prompt, max) =>
    w.createCompletion({ prompt, max_tokens: max, temperature: 0, ignore_eos: true, cache_prompt: false });
  return {
    load,
    multithread: w.isMultithread(),
    async pp(prompt) {
      const r = await run(prompt, 1);
      return { tokens: r.timings.prompt_n, perSecond: r.timings.prompt_per_second };
    },
    async tg(prompt, gen) {
      const r = await run(prompt, gen);
      return { tokens: r.timings.predicted_n, perSecond: r.timings.predicted_per_second, text: r.choices?.[0]?.text };
    },
    dispose: () => w.exit(),
  };
}

async function run(engine, cfg) {
  const reps = cfg.runs ?? 3;
  const e =
    engine === "rlx-wasm"
      ? await rlxEngine(cfg)
      : await wllamaEngine(cfg, engine === "wllama-2t" ? 2 : 1);
  const long = longPrompt(cfg.promptWords ?? 380);
  const short = "Once upon a time";
  const pp = [], tg = [];
  let sample = "";
  // One untimed run of each (compiles rlx's graphs; warms wllama's caches).
  await e.pp(long);
  await e.tg(short, 8);
  for (let i = 0; i < reps; i++) {
    const a = await e.pp(long);
    const b = await e.tg(short, cfg.gen ?? 128);
    pp.push(a);
    tg.push(b);
    sample = b.text ?? "";
    log(`${engine}: pp ${a.tokens} tokens ${a.perSecond.toFixed(1)} tok/s, tg ${b.tokens} tokens ${b.perSecond.toFixed(1)} tok/s`);
  }
  await e.dispose();
  return { engine, load: e.load, multithread: e.multithread ?? false, threads: e.threads ?? null, pp, tg, sample: sample.slice(0, 200) };
}

window.llmBench = { run };
log("ready");
