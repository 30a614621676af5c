// Static file server for the bench page, on 127.0.0.1 only.
//
// Every response carries COOP/COEP (+ CORP), so the page is cross-origin
// isolated: SharedArrayBuffer exists and onnxruntime-web / transformers.js
// can run their wasm with 2 threads.
//
// URL map (nothing outside these folders is served):
//   /                 -> page/ (index.html, bench.js)
//   /node_modules/... -> benches/web/node_modules (onnxruntime-web, transformers.js, rlx)
//   /models/...       -> benches/web/.models (export_onnx.py's output)
//
// Standalone: node benches/web/server.mjs [--port 8080]  (then open the page
// in Chromium with --enable-unsafe-webgpu); run.mjs starts it on a free port.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOTS = [
  ["/node_modules/", path.join(HERE, "node_modules")],
  ["/models/", path.join(HERE, ".models")],
  ["/", path.join(HERE, "page")],
];
const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".wasm": "application/wasm",
  ".map": "application/json; charset=utf-8",
};

/** The file a URL path names, or null when it is outside the served roots. */
function resolve(urlPath) {
  let p;
  try {
    p = decodeURIComponent(urlPath.split("?")[0]);
  } catch {
    return null;
  }
  if (p === "/") p = "/index.html";
  for (const [prefix, dir] of ROOTS) {
    if (!p.startsWith(prefix)) continue;
    const file = path.resolve(dir, "." + p.slice(prefix.length - 1));
    // `..` segments must not climb out of the root.
    return file === dir || file.startsWith(dir + path.sep) ? file : null;
  }
  return null;
}

export function startServer(port = 0) {
  const server = http.createServer((req, res) => {
    const headers = {
      "Cross-Origin-Opener-Policy": "same-origin",
      "Cross-Origin-Embedder-Policy": "require-corp",
      "Cross-Origin-Resource-Policy": "same-origin",
      "Cache-Control": "no-store",
    };
    const file = resolve(req.url);
    let stat = null;
    try {
      stat = file && fs.statSync(file);
    } catch {
      stat = null;
    }
    if (!stat || !stat.isFile() || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { ...headers, "Content-Type": "text/plain" });
      res.end(`not found: ${req.url}\n`);
      return;
    }
    headers["Content-Type"] = TYPES[path.extname(file)] ?? "application/octet-stream";
    headers["Content-Length"] = stat.size;
    res.writeHead(200, headers);
    if (req.method === "HEAD") res.end();
    else fs.createReadStream(file).pipe(res);
  });
  return new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(port, "127.0.0.1", () => ok(server));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf("--port");
  const server = await startServer(i > 0 ? Number(process.argv[i + 1]) : 8080);
  console.log(`serving benches/web on http://127.0.0.1:${server.address().port}/`);
}
