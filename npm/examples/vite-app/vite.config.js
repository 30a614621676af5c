import { defineConfig } from "vite";

// Cross-origin isolation: with these two headers on the page (and its
// workers), rlx's init() loads its threaded core (one CPU thread per core);
// without them, the single-threaded one. Your production server must send
// them too (npm/README.md).
const isolation = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
};

export default defineConfig({
  // rlx ships ESM + a .wasm file it finds with `new URL(.., import.meta.url)`;
  // pre-bundling would move the JS away from the .wasm.
  optimizeDeps: { exclude: ["rlx"] },
  worker: { format: "es" },
  build: { target: "es2022" },
  server: { headers: isolation },
  preview: { headers: isolation },
});
