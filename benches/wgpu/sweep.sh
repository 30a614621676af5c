#!/usr/bin/env bash
# A/B sweep of rlx-wgpu's tuning knobs on the GPU machine (H200, NVIDIA
# Vulkan), one process per configuration, same binary (.bench/wgpu_bench)
# and inputs. Needs .gl/ and .bench/ carried like benches/wgpu/run.sh.
# Each line of CONFIGS is "name|ENV=VAL ...|wgpu_bench args"; a name that
# starts with "base" runs .bench/wgpu_bench_base (another build) if carried.
# Writes $OUT/sweep.jsonl (each bench line tagged with its config).
set -uo pipefail
OUT=${OUT:-/tmp/out}
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WGPU_BACKEND=vulkan
CONFIGS=${CONFIGS:-"base-f16||--dtype f16 --batches 1,8,32
base-f32||--batches 1,32"}
while IFS='|' read -r name envs args; do
  [ -z "$name" ] && continue
  echo "== $name: $envs $args"
  bin=./.bench/wgpu_bench
  [[ $name == base* && -x .bench/wgpu_bench_base ]] && bin=./.bench/wgpu_bench_base
  env $envs timeout 90 $bin $args --seq 128 --runs ${RUNS:-20} --matmul "${MATMUL:-}" 2>&1 | grep '"bench"' \
    | sed "s/^{/{\"config\": \"$name\", /" | tee -a "$OUT/sweep.jsonl"
done <<< "$CONFIGS"
