#!/usr/bin/env bash
# The vision models on CUDA against ONNX Runtime (gpu onnx-ref), then the
# CUDA parity suite: run on the GPU machine after `tests/gpu/run.sh --prepare`
# (carry .cuda-run/gpu, .cuda-run/vectors and the model files themselves:
# 320n.onnx and the det/cls models fit the device's 64 MiB working-tree limit
# with the binaries; the rec model needs a call of its own — a PP-OCR model
# not carried is skipped). Last run: H100, 2026-12-07, every model within
# its tolerance.
for d in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(python3 -c 'import nvidia,os;p=nvidia.__path__[0];print(" ".join(os.path.join(p,x,"lib") for x in os.listdir(p)))' 2>/dev/null); do [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
nvidia-smi --query-gpu=name --format=csv,noheader; T0=$(date +%s); V=tests/vectors/onnx-models; M=.cache/models; P=$M/rapidocr-onnxruntime-1.4.4/rapidocr_onnxruntime/models
for img in astronaut camera; do timeout 120 .cuda-run/gpu onnx-ref --model $M/nudenet-3.4.2/nudenet/320n.onnx --input images=$V/yolov8n/in_$img.npy --expect $V/yolov8n/out_$img.npy --scale 0.00392156862745098 --tol 2e-3; done
for m in rec det cls; do f=$(ls $P/*${m}_infer.onnx 2>/dev/null) || continue; timeout 120 .cuda-run/gpu onnx-ref --model $f --input x=$V/ppocr/in_$m.npy --expect $V/ppocr/out_$m.npy --tol 1e-3; done
echo "$(( $(date +%s) - T0 )) s"
timeout 200 .cuda-run/gpu parity tests/vectors/ops > $OUT/parity.log 2>&1; echo "parity rc=$?"; grep -E "^FAIL" $OUT/parity.log | head; tail -2 $OUT/parity.log
[ -x .cuda-run/vectors ] && { timeout 100 .cuda-run/vectors > $OUT/vectors.log 2>&1; echo "vectors rc=$?"; grep -E "test result" $OUT/vectors.log | tail -2; }; echo "$(( $(date +%s) - T0 )) s"
