// Dev helper: open the built app in headless chromium (WebGPU), print an
// expression's value, save a screenshot. Needs `npm run preview` running.
//   node dev/probe.mjs URL [JS-expression] [screenshot.png]
import { chromium } from 'playwright-core';
import fs from 'node:fs';
const dir = fs.mkdtempSync('/tmp/rlx-pg-probe-');
const b = await chromium.launchPersistentContext(dir, { executablePath: '/usr/lib/chromium/chromium', headless: true, viewport: { width: Number(process.env.W || 1440), height: Number(process.env.H || 900) },
  args: ['--enable-unsafe-webgpu', '--no-sandbox', '--no-first-run', '--disable-quic', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const p = await b.newPage();
p.on('pageerror', (e) => console.log('pageerror:', e));
await p.goto(process.argv[2]);
await p.waitForFunction(() => window.__rlxPlayground?.ready === true, null, { timeout: 120000 });
if (process.argv[3]) console.log(JSON.stringify(await p.evaluate(process.argv[3]), null, 1));
if (process.argv[4]) await p.screenshot({ path: process.argv[4] });
await b.close();
fs.rmSync(dir, { recursive: true, force: true });
