#!/usr/bin/env bash
# The rlx-wgpu benchmark on the GPU machine (H200, NVIDIA Vulkan driver),
# rlx-wgpu and PyTorch one after the other in one run. Needs, carried from
# the build machine: .gl/ (Vulkan loader debs, see shared TOOLCHAIN.md) and
# .bench/wgpu_bench (cargo build --release -p rlx-wgpu --example wgpu_bench).
# Writes $OUT/wgpu.jsonl, $OUT/torch.json, $OUT/log.
set -uo pipefail
OUT=${OUT:-/tmp/out}
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export WGPU_BACKEND=vulkan PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader 2>&1 | tee -a "$OUT/log"
# The f16 tensor-core path's correctness first: its tests must run, not
# skip (binaries: cargo test --release -p rlx-wgpu --test coop --test parity
# --no-run, copied to .bench/coop_test and .bench/parity_test).
if [ -x .bench/coop_test ]; then
  timeout 120 ./.bench/coop_test --nocapture 2>&1 | grep -v XDG_RUNTIME | tee "$OUT/coop-test.log"
  timeout 240 ./.bench/parity_test f16_twins matmul 2>&1 | grep -v XDG_RUNTIME | tee -a "$OUT/coop-test.log"
  grep -q "coop_matches_cpu: skipped" "$OUT/coop-test.log" && echo "FAIL: the cooperative-matrix test skipped" | tee -a "$OUT/coop-test.log"
fi
timeout 150 ./.bench/wgpu_bench --batches 1,2,4,8,16,32 --seq 128 --runs 30 --matmul 1024,2048,4096 2>&1 | grep -v XDG_RUNTIME | tee "$OUT/wgpu.jsonl"
timeout 120 ./.bench/wgpu_bench --dtype f16 --check --batches 1,2,4,8,16,32 --seq 128 --runs 30 --matmul 1024,2048,4096 2>&1 | grep -v XDG_RUNTIME | tee -a "$OUT/wgpu.jsonl"
[ -n "${PROFILE_F32:-}" ] && RLX_WGPU_PROFILE=1 timeout 60 ./.bench/wgpu_bench --batches 1,32 --seq 128 --runs 5 --matmul "" 2>&1 | grep profile | tee "$OUT/wgpu-profile.jsonl"
RLX_WGPU_PROFILE=1 timeout 45 ./.bench/wgpu_bench --dtype f16 --batches 1,32 --seq 128 --runs 5 --matmul "" 2>&1 | grep profile | tee -a "$OUT/wgpu-profile.jsonl"
# A/B: a second binary (another commit), when one is carried as
# .bench/wgpu_bench_base, run with BASE_ENV (e.g. RLX_WGPU_COOP=0 on a copy
# of the same binary) and BASE_ARGS (e.g. --dtype f16).
[ -x .bench/wgpu_bench_base ] && env ${BASE_ENV:-} timeout 90 ./.bench/wgpu_bench_base ${BASE_ARGS:-} --batches 1,8,32 --seq 128 --runs 30 --matmul 1024,2048,4096 2>&1 \
  | grep '"bench"' | sed 's/"bench": "/"bench": "base_/' | tee -a "$OUT/wgpu.jsonl"
timeout 200 python3 benches/wgpu/torch_minilm.py --batches 1,2,4,8,16,32 --seq 128 --runs 30 --json "$OUT/torch.json" 2>&1 | grep -v Warning | tee -a "$OUT/log"
