import { defineConfig } from 'vite';
import fs from 'node:fs';

// The app imports `rlx` like any user (installed from npm/rlx-<v>.tgz by
// scripts/test-playground or `npm install ../npm/rlx-<v>.tgz`). Before the
// package exists, RLX_FIXTURES=1 swaps in the dev-only fixture stand-in.
const hasPackage = fs.existsSync(new URL('./node_modules/rlx/package.json', import.meta.url));
const fixtures = process.env.RLX_FIXTURES === '1';
if (!hasPackage && !fixtures) {
  throw new Error('the rlx package is not installed: `npm install --no-save ../npm/rlx-<version>.tgz` (or RLX_FIXTURES=1 for the dev-only fixtures)');
}

export default defineConfig({
  base: './',
  resolve: fixtures ? { alias: { 'rlx/full': new URL('./dev/mock-rlx.js', import.meta.url).pathname } } : {},
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
  build: { target: 'es2022', chunkSizeWarningLimit: 4096 },
  optimizeDeps: { exclude: ['rlx', 'rlx/full'] },
});
