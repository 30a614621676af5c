import { defineConfig } from "vite";

export default defineConfig({
  // rlx ships ESM + a .wasm file it finds with `new URL(.., import.meta.url)`;
  // pre-bundling would move the JS away from the .wasm.
  optimizeDeps: { exclude: ["rlx"] },
  worker: { format: "es" },
  build: { target: "es2022" },
});
