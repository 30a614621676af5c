import { defineConfig } from 'vite';
import fs from 'node:fs';

// The app imports `rlx` like any user (installed from npm/rlx-<v>.tgz by
// scripts/test-playground or `npm install ../npm/rlx-<v>.tgz`).
const hasPackage = fs.existsSync(new URL('./node_modules/rlx/package.json', import.meta.url));
if (!hasPackage) {
  throw new Error('the rlx package is not installed: `npm install --no-save ../npm/rlx-<version>.tgz` (./scripts/build-npm makes it)');
}

export default defineConfig({
  base: './',
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
  build: { target: 'es2022', chunkSizeWarningLimit: 4096 },
  optimizeDeps: { exclude: ['rlx', 'rlx/full'] },
});
