// `npm run preview`: serves the built app (dist/) on 127.0.0.1 only.
// Usage: node scripts/serve.mjs [--port 4173] [--dir dist]
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, '..', opt('--dir', 'dist'));
const port = Number(opt('--port', process.env.PORT || 4173));
const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.svg': 'image/svg+xml', '.txt': 'text/plain', '.safetensors': 'application/octet-stream' };
if (!fs.existsSync(path.join(root, 'index.html'))) { console.error(`serve: ${root}/index.html is missing: run \`npm run build\` first`); process.exit(1); }

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  let p = path.normalize(decodeURIComponent(url.pathname)).replace(/^([/\\])+/, '');
  let file = path.join(root, p);
  if (!file.startsWith(root)) { res.writeHead(403).end(); return; }
  fs.stat(file, (err, st) => {
    if (!err && st.isDirectory()) { file = path.join(file, 'index.html'); st = fs.existsSync(file) ? fs.statSync(file) : null; }
    if (err || !st) { res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${url.pathname}`); return; }
    res.writeHead(200, { 'content-type': types[path.extname(file)] || 'application/octet-stream', 'content-length': st.size, 'cache-control': 'no-cache',
      // cross-origin isolated: finer performance.now() for the timings (and SharedArrayBuffer)
      'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' });
    if (req.method === 'HEAD') { res.end(); return; }
    fs.createReadStream(file).pipe(res);
  });
});
server.listen(port, '127.0.0.1', () => console.log(`rlx playground: http://127.0.0.1:${server.address().port}/`));
