// Runs the MiniLM browser benchmark: starts server.mjs on 127.0.0.1, launches
// Debian's Chromium (headless, WebGPU on) through playwright-core, opens the
// bench page once and runs every engine in it, one after another. Writes the
// raw results to benches/results/minilm-web.json, then report.mjs writes the
// table (.md) and the plot (.svg).
//
//   node benches/web/run.mjs [--engines ort-wasm,tjs-wasm,...] [--batches 1,2,4,8,16,32]
//        [--gpu-batches 1,2] [--runs 10] [--warmup 2] [--gpu-runs 3] [--gpu-warmup 1]
//        [--max-load 1.5] [--max-wait 900] [--out benches/results/minilm-web.json]
//
// Every request the page makes to anything but the local server is blocked and
// counted (there must be none: no model hub, no CDN).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { startServer } from "./server.mjs";
import { CHROMIUM, openPage } from "./browser.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");

const ALL = ["ort-wasm", "tjs-wasm", "rlx-cpu", "ort-webgpu", "tjs-webgpu", "rlx-webgpu"];
// Diagnostics, only when named in --engines; rlx-cpu-simd128 (rlx's simd128 core forced, for the A/B against the
// relaxed-SIMD core Chromium loads) and rlx-cpu-1t (the single-threaded core; rlx-cpu loads the threaded one in
// this cross-origin isolated page) must run without rlx-cpu: a page holds one initialized rlx module.
const OPTIONAL = ["ort-wasm-asyncify", "ort-wasm-1t", "rlx-cpu-simd128", "rlx-cpu-1t"];
const GPU = new Set(["ort-webgpu", "tjs-webgpu", "rlx-webgpu"]);

function args() {
  const a = {
    engines: ALL,
    batches: [1, 2, 4, 8, 16, 32],
    gpuBatches: [1, 2],
    runs: 10,
    warmup: 2,
    gpuRuns: 3,
    gpuWarmup: 1,
    maxLoad: 1.5,
    maxWait: 900,
    maxRunMs: 60000,
    out: path.join(ROOT, "benches/results/minilm-web.json"),
  };
  const list = (s) => s.split(",").filter(Boolean);
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    const take = () => (i++, v);
    if (k === "--engines") a.engines = list(take());
    else if (k === "--batches") a.batches = list(take()).map(Number);
    else if (k === "--gpu-batches") a.gpuBatches = list(take()).map(Number);
    else if (k === "--runs") a.runs = Number(take());
    else if (k === "--warmup") a.warmup = Number(take());
    else if (k === "--gpu-runs") a.gpuRuns = Number(take());
    else if (k === "--gpu-warmup") a.gpuWarmup = Number(take());
    else if (k === "--max-load") a.maxLoad = Number(take());
    else if (k === "--max-wait") a.maxWait = Number(take());
    else if (k === "--max-run-ms") a.maxRunMs = Number(take());
    else if (k === "--out") a.out = path.resolve(take());
    else if (k === "--help") {
      console.log(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\nimport")[0]);
      process.exit(0);
    } else throw new Error(`unknown argument ${k} (--help lists them)`);
  }
  for (const e of a.engines) if (!ALL.includes(e) && !OPTIONAL.includes(e)) throw new Error(`unknown engine ${e}; engines: ${[...ALL, ...OPTIONAL].join(", ")}`);
  return a;
}

const log = (...m) => console.error("[run.mjs]", ...m);
const load = () => os.loadavg().map((x) => +x.toFixed(2));

/** Wait until the 1-minute load average is below `max` (others compile on this 2-core machine). */
async function waitQuiet(max, maxWaitS) {
  const t0 = Date.now();
  while (os.loadavg()[0] >= max) {
    if ((Date.now() - t0) / 1000 > maxWaitS) {
      log(`load still ${load()} after ${maxWaitS} s: measuring anyway (recorded)`);
      return false;
    }
    log(`load ${load()} >= ${max}: waiting`);
    await new Promise((r) => setTimeout(r, 20000));
  }
  return true;
}

/** The browser entry of the rlx package if it is installed here, as a URL path. */
function rlxEntry() {
  const dir = path.join(HERE, "node_modules/rlx");
  const pj = path.join(dir, "package.json");
  if (!fs.existsSync(pj)) return null;
  const p = JSON.parse(fs.readFileSync(pj, "utf8"));
  let e = p.exports;
  if (e && typeof e === "object" && e["."]) e = e["."];
  while (e && typeof e === "object") e = e.browser ?? e.import ?? e.default;
  e ??= p.browser ?? p.module ?? p.main ?? "index.js";
  return { url: "/node_modules/rlx/" + e.replace(/^\.\//, ""), version: p.version };
}

async function main() {
  const a = args();
  for (const need of [".models/all-MiniLM-L6-v2/onnx/model.onnx", ".models/reference/reference.json"])
    if (!fs.existsSync(path.join(HERE, need))) throw new Error(`missing ${need}: run python3 benches/web/export_onnx.py`);
  const rlx = rlxEntry();
  if (!rlx) log("rlx npm package not installed in benches/web/node_modules: rlx engines will be recorded as pending");

  const quiet = await waitQuiet(a.maxLoad, a.maxWait);
  const loadStart = load();
  const server = await startServer(0);
  const origin = `http://127.0.0.1:${server.address().port}`;
  const { context, page, blocked, close } = await openPage(origin, ["--enable-unsafe-webgpu"]);
  await page.exposeFunction("benchLog", (m) => log(m));
  page.on("pageerror", (e) => log("page error:", e.message));
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") log(`console.${m.type()}:`, m.text());
  });
  await page.goto(origin + "/");
  await page.waitForFunction(() => window.benchReady === true);
  const env = await page.evaluate(() => window.bench.env());
  log("page:", JSON.stringify(env));
  if (!env.cross_origin_isolated) throw new Error("page is not cross-origin isolated: no threads for ORT-web");

  // Two groups, wasm engines then WebGPU engines. Within a group every engine
  // is set up first, then batch by batch each engine in turn (interleaved),
  // so that load from other work on this shared machine lands on all alike.
  const results = {};
  for (const gpu of [false, true]) {
    const group = a.engines.filter((e) => GPU.has(e) === gpu);
    const opts = {
      batches: gpu ? a.gpuBatches : a.batches,
      runs: gpu ? a.gpuRuns : a.runs,
      warmup: gpu ? a.gpuWarmup : a.warmup,
      threads: 2,
      maxRunMs: a.maxRunMs,
      rlxEntry: rlx?.url ?? null,
    };
    const up = [];
    const extra = {};
    for (const engine of group) {
      if (engine.startsWith("rlx") && !rlx) {
        results[engine] = { engine, pending: "rlx npm package not installed (waiting for /work/signals/npm-ready)", rows: [] };
        continue;
      }
      try {
        await page.evaluate(([e, o]) => window.bench.setup(e, o), [engine, opts]);
        up.push(engine);
        extra[engine] = { loads: {}, wall_s: 0 };
      } catch (err) {
        log(`${engine} setup failed: ${err.message}`);
        results[engine] = { engine, error: err.message.split("\n")[0], rows: [] };
      }
    }
    log(`${gpu ? "webgpu" : "wasm"} group: ${up.join(", ")}; batches ${opts.batches.join(",")}, ` +
      `${opts.warmup} warm-up + ${opts.runs} runs each, interleaved`);
    for (const b of opts.batches) {
      for (const engine of [...up]) {
        const t0 = Date.now();
        try {
          await page.evaluate(([e, bb]) => window.bench.measure(e, bb), [engine, b]);
          extra[engine].loads[b] = load();
          extra[engine].wall_s += (Date.now() - t0) / 1000;
        } catch (err) {
          log(`${engine} B=${b} failed: ${err.message}`);
          up.splice(up.indexOf(engine), 1);
          const r = await page.evaluate((e) => window.bench.teardown(e), engine).catch(() => ({ engine, rows: [] }));
          results[engine] = { ...r, error: `B=${b}: ${err.message.split("\n")[0]}` };
        }
      }
    }
    for (const engine of up) {
      const r = await page.evaluate((e) => window.bench.teardown(e), engine);
      for (const row of r.rows) row.load_after = extra[engine].loads[row.batch];
      r.opts = { batches: opts.batches, runs: opts.runs, warmup: opts.warmup, threads: opts.threads };
      r.wall_s = extra[engine].wall_s;
      results[engine] = r;
    }
  }
  const browserVersion = context.browser()?.version() ?? null;
  await close();
  server.close();

  const pkg = (p) => JSON.parse(fs.readFileSync(path.join(HERE, "node_modules", p, "package.json"), "utf8")).version;
  let cpu = null;
  try {
    cpu = execFileSync("sh", ["-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]).toString().trim();
  } catch {
    cpu = null;
  }
  let commit = null;
  try {
    commit = execFileSync("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"]).toString().trim();
  } catch {
    commit = null;
  }
  const out = {
    date: new Date().toISOString(),
    git_head: commit,
    command: "node benches/web/run.mjs " + process.argv.slice(2).join(" "),
    machine: { cpu, cores: os.cpus().length, os: `${os.type()} ${os.release()}`, node: process.version },
    browser: { chromium: browserVersion ?? execFileSync(CHROMIUM, ["--version"]).toString().trim(), ...env },
    packages: {
      "onnxruntime-web": pkg("onnxruntime-web"),
      "@huggingface/transformers": pkg("@huggingface/transformers"),
      "playwright-core": pkg("playwright-core"),
      rlx: rlx?.version ?? null,
    },
    load: { start: loadStart, end: load(), quiet_at_start: quiet, threshold: a.maxLoad },
    blocked_requests: blocked,
    reference: JSON.parse(fs.readFileSync(path.join(HERE, ".models/reference/reference.json"), "utf8")),
    results: a.engines.map((e) => results[e]).filter(Boolean),
  };
  delete out.reference.tokenizer_check;
  fs.mkdirSync(path.dirname(a.out), { recursive: true });
  fs.writeFileSync(a.out, JSON.stringify(out, null, 1) + "\n");
  log(`wrote ${path.relative(ROOT, a.out)}; blocked requests: ${blocked.length}`);
}

await main();
