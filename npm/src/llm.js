// Decoder LLMs (`rlx.loadLlm`): a GGUF file's model, tokenizer and chat
// template; `llm.generate()` is an async iterator of tokens. api.js passes
// in its boundary helpers (argument checks, error wrapping, fetching) so
// every entry point reports errors the same way.

const GENERATE_OPTIONS = [
  "maxTokens", "temperature", "topK", "topP", "minP", "repetitionPenalty", "seed", "stop", "stopAtEos", "addSpecial",
];

export function makeLlm(h) {
  const { call, acall, guard, invalid, checkOptions, checkCallback, checkDevice, bytesOf, isPlainObject, describe, RlxError, withWasm } = h;

  function checkGenerate(where, opts) {
    if (!isPlainObject(opts)) throw invalid(where, `options must be an object, got ${describe(opts)}`);
    const o = checkOptions(where, opts, GENERATE_OPTIONS);
    const num = (k, lo, hi) => {
      const v = o[k];
      if (v === undefined) return;
      if (typeof v !== "number" || !Number.isFinite(v) || v < lo || v > hi) {
        throw invalid(where, `\`${k}\` must be a number in [${lo}, ${hi}], got ${describe(v)}`);
      }
    };
    num("maxTokens", 1, 1e6);
    num("temperature", 0, 1e6);
    num("topK", 0, 1e9);
    num("topP", Number.MIN_VALUE, 1);
    num("minP", 0, 1);
    num("repetitionPenalty", Number.MIN_VALUE, 1e6);
    num("seed", 0, Number.MAX_SAFE_INTEGER);
    if (o.stop !== undefined && !(Array.isArray(o.stop) && o.stop.every((s) => typeof s === "string"))) {
      throw invalid(where, `\`stop\` must be an array of strings, got ${describe(o.stop)}`);
    }
    for (const k of ["stopAtEos", "addSpecial"]) {
      if (o[k] !== undefined && typeof o[k] !== "boolean") throw invalid(where, `\`${k}\` must be true or false, got ${describe(o[k])}`);
    }
    return o;
  }

  /** A loaded decoder LLM (llama, qwen2, gemma3) from a GGUF file. */
  // A zero-delay task: a MessageChannel message, not `setTimeout(0)`,
  // which browsers clamp to 4 ms once timers nest five deep (each token's
  // yield runs in the previous one's timer task, so every token after the
  // fifth would wait 4 ms).
  const yieldToPage = () =>
    new Promise((resolve) => {
      if (typeof MessageChannel === "undefined") return setTimeout(resolve, 0);
      const c = new MessageChannel();
      c.port1.onmessage = () => {
        c.port1.close();
        resolve();
      };
      c.port2.postMessage(0);
    });

  class Llm {
    constructor(l) {
      this._l = l;
      this.stats = null;
    }
    _live(where) {
      if (!this._l) throw new RlxError("disposed", `${where}: this Llm was disposed (llm.dispose() was called); load another`);
      return this._l;
    }
    /** 'webgpu' or 'cpu': where the graphs run (the first of the device list this page has). */
    get device() { return call(() => this._live("Llm.device").device); }
    /** 'none' (f32), 'f16' or 'bf16': the graphs' mixed precision; 'auto' until the first generation settles it. */
    get amp() { return call(() => this._live("Llm.amp").amp); }
    /** {name, architecture, vocabSize, hidden, layers, heads, kvHeads, headDim, contextLength, context, hasChatTemplate} */
    get config() { return JSON.parse(call(() => this._live("Llm.config").configJson())); }
    /** Token ids of `text` (with the model's BOS/EOS when `addSpecial`). */
    encode(text, { addSpecial = true } = {}) {
      if (typeof text !== "string") throw invalid("Llm.encode", `text must be a string, got ${describe(text)}`);
      return Array.from(call(() => this._live("Llm.encode").encode(text, addSpecial)));
    }
    decode(ids) {
      if (!Array.isArray(ids) && !ArrayBuffer.isView(ids)) throw invalid("Llm.decode", `ids must be an array, got ${describe(ids)}`);
      return call(() => this._live("Llm.decode").decode(Uint32Array.from(ids)));
    }
    /** The prompt for `[{role, content}, ...]` by the file's chat template. */
    chatPrompt(messages, { addGenerationPrompt = true } = {}) {
      if (!Array.isArray(messages)) throw invalid("Llm.chatPrompt", `messages must be an array of {role, content}, got ${describe(messages)}`);
      return call(() => this._live("Llm.chatPrompt").chatPrompt(JSON.stringify(messages), addGenerationPrompt));
    }
    /** Context limit in tokens (prompt + generated). */
    setContext(n) {
      if (!Number.isInteger(n) || n < 1) throw invalid("Llm.setContext", `n must be a positive integer, got ${describe(n)}`);
      call(() => this._live("Llm.setContext").setContext(n));
    }
    /** Which kernel runs each node of a decode step over `past` cached positions (dispatch report JSON). */
    decodeReport(past = 64) { return withWasm(JSON.parse(call(() => this._live("Llm.decodeReport").decodeReport(past)))); }
    /**
     * Generate from `prompt` (a string, or an array of token ids): an async
     * iterator of `{id, text}`; `text` is whole UTF-8 (possibly empty).
     * After it ends, `llm.stats` holds {promptTokens, generated,
     * prefillMs, decodeMs, tokensPerSecond, finishReason, text}.
     */
    async *generate(prompt, opts = {}) {
      const where = "Llm.generate";
      const l = this._live(where);
      const o = checkGenerate(where, opts);
      const ids = Array.isArray(prompt) || ArrayBuffer.isView(prompt) ? Uint32Array.from(prompt) : undefined;
      if (ids === undefined && typeof prompt !== "string") throw invalid(where, `prompt must be a string or token ids, got ${describe(prompt)}`);
      const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());
      const t0 = now();
      // Prefill (the first graphs compile here; on WebGPU, asynchronously).
      const s = await acall(() => l.start(ids ? "" : prompt, ids, JSON.stringify(o)));
      const t1 = now();
      let generated = 0;
      try {
        for (;;) {
          const t = await acall(() => s.next());
          if (t === null) break;
          generated++;
          yield t;
          // Let the page paint and handle input between tokens.
          await yieldToPage();
        }
        const t2 = now();
        this.stats = {
          promptTokens: s.promptTokens,
          generated,
          prefillMs: t1 - t0,
          decodeMs: t2 - t1,
          tokensPerSecond: generated / Math.max((t2 - t1) / 1000, 1e-9),
          finishReason: s.finishReason,
          text: s.text,
          amp: l.amp,
        };
      } finally {
        s.free();
      }
    }
    /** Free the model now; later calls throw RlxError 'disposed'. Idempotent. */
    dispose() {
      if (this._l) {
        this._l.dispose();
        this._l.free();
      }
      this._l = null;
    }
  }

  /**
   * Load a decoder LLM from a .gguf file (ArrayBuffer, Uint8Array, Response,
   * URL or path in Node). `device`: 'webgpu' (f32 activations; the block
   * weights decoded in the shader), 'cpu' (the wasm CPU engine), or a list
   * tried in order (['webgpu', 'cpu']); `llm.device` says which was taken.
   * A device the page lacks is RlxError 'device' naming why. `amp`:
   * 'auto' (default: f16 activations on WebGPU where the adapter has
   * `shader-f16`, f32 otherwise), 'none' (f32), 'f16' or 'bf16';
   * `llm.amp` says what the first generation settled on.
   */
  async function loadLlm(src, opts = {}) {
    guard();
    const where = "loadLlm";
    if (!isPlainObject(opts)) throw invalid(where, `options must be an object, got ${describe(opts)}`);
    const { device = "cpu", onProgress, amp = "auto" } = checkOptions(where, opts, ["device", "onProgress", "amp"]);
    const devices = checkDevice(where, device);
    if (!["auto", "none", "f16", "bf16"].includes(amp)) {
      throw invalid(where, `\`amp\` must be 'auto', 'none', 'f16' or 'bf16', got ${describe(amp)}`);
    }
    checkCallback(where, "onProgress", onProgress);
    const { bytes, label } = await bytesOf(src, onProgress, "gguf");
    onProgress?.({ stage: "weights", loaded: bytes.length, total: bytes.length, message: `loading ${label}` });
    const l = call(() => new (h.raw().Llm)(bytes, label, devices, amp));
    onProgress?.({ stage: "ready", message: "model loaded; graphs compile on first use" });
    return new Llm(l);
  }

  return { Llm, loadLlm };
}
