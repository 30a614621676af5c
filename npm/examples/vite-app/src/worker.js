// rlx inside a Web Worker: same API; progress and results go back by message.
import * as rlx from "rlx";

self.onmessage = async ({ data: { model, device, sentences } }) => {
  try {
    await rlx.init();
    const t0 = performance.now();
    const vecs = await rlx.pipelines.embed(sentences, {
      model,
      device,
      onProgress: (progress) => self.postMessage({ progress }),
    });
    self.postMessage({ vecs: vecs.map((v) => Array.from(v)), ms: performance.now() - t0, variant: rlx.wasmVariant(), threads: rlx.threads() });
  } catch (e) {
    self.postMessage({ error: { name: e.name, code: e.code, message: e.message } });
  }
};
