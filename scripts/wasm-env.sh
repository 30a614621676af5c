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
# The relaxed-SIMD variant (`./scripts/build-wasm --relaxed`, its own
# target dir target/wasm-relaxed): the same flags plus rlx-cpu's cargo
# feature `relaxed-simd`, which enables relaxed SIMD for gemm128's kernel
# alone (f32x4.relaxed_madd: one FMA in V8 on x64 with FMA3). Enabling
# +relaxed-simd for the whole build instead lets LLVM turn selects into
# relaxed min/max, whose NaN results differ by machine (the conformance
# vectors caught clamp(NaN) = -1 in Node). Chrome >= 114 runs it as is;
# Node 20 needs --experimental-wasm-relaxed-simd; an engine without relaxed
# SIMD rejects the module, so the baseline build stays the one CI tests.
WASM_RELAXED_FEATURES="--features rlx-cpu/relaxed-simd"
# The threaded core (scripts/build-npm's npm/dist/mt, its own target dir
# target/wasm-mt: std is rebuilt with atomics): the same flags plus shared
# memory (recipe: ../shared/TOOLCHAIN.md). Without the link args the module
# silently comes out single-threaded: build-npm checks it imports a shared
# memory. 4 GiB is wasm32's whole address space; a shared memory must
# declare its maximum.
WASM_MT_RUSTFLAGS="$WASM_RUSTFLAGS -C target-feature=+atomics,+bulk-memory,+mutable-globals -C link-arg=--shared-memory -C link-arg=--max-memory=4294967296 -C link-arg=--import-memory -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base"
