# Sourced by every wasm32 build (scripts/build-wasm, build-npm,
# test-wgpu-browser): they share target/wasm, so one set of flags keeps
# them from rebuilding each other's artifacts.
# * simd128: the CPU kernels are written to auto-vectorize (and gemm128 /
#   the gemm crate have simd128 micro-kernels); every browser with
#   WebAssembly SIMD (all current ones) runs it.
# * -disable-lsr: LLVM's loop strength reduction turns `ptr.add(k)` loads
#   into running i32 adds, so no wasm load keeps its `offset=` immediate
#   and V8 emits an address computation per load; without it the MiniLM
#   block runs 3-6% faster in Node 20 (gemm128 40 -> 43 GFLOP/s,
#   benches/results/wasm-vs-native.md).
WASM_RUSTFLAGS="-C target-feature=+simd128 -C llvm-args=-disable-lsr"
