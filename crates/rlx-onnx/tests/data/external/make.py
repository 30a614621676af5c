#!/usr/bin/env python3
"""Makes the external-data test model: Y = Relu(X @ W + B) * C, with W, B
(initializers) and C (a Constant node's value) saved as ONNX external data
in weights.bin; and X and ONNX Runtime's Y as .npy.

    pip install onnx==1.22.0 onnxruntime numpy
    python3 crates/rlx-onnx/tests/data/external/make.py
"""
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

HERE = Path(__file__).resolve().parent
rng = np.random.default_rng(7)
w = rng.standard_normal((8, 4)).astype(np.float32)
b = rng.standard_normal(4).astype(np.float32)
c = rng.standard_normal(4).astype(np.float32)
x = rng.standard_normal((3, 8)).astype(np.float32)

graph = helper.make_graph(
    [
        helper.make_node("Constant", [], ["C"], value=numpy_helper.from_array(c, "C")),
        helper.make_node("MatMul", ["X", "W"], ["XW"], name="matmul"),
        helper.make_node("Add", ["XW", "B"], ["Z"], name="add"),
        helper.make_node("Relu", ["Z"], ["R"], name="relu"),
        helper.make_node("Mul", ["R", "C"], ["Y"], name="mul"),
    ],
    "external_data",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 8])],
    [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4])],
    initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
# Every tensor (the Constant's value too) into weights.bin, at 64-byte
# aligned offsets, as onnx's external-data helper lays files out.
blob = bytearray()
tensors = list(model.graph.initializer) + [model.graph.node[0].attribute[0].t]
for t in tensors:
    blob += bytes(-len(blob) % 64)
    raw = t.raw_data
    set_external_data(t, "weights.bin", offset=len(blob), length=len(raw))
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    blob += raw
(HERE / "weights.bin").write_bytes(bytes(blob))
onnx.save_model(model, str(HERE / "model.onnx"))
y = ort.InferenceSession(str(HERE / "model.onnx"), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
np.save(HERE / "x.npy", x)
np.save(HERE / "y.npy", y)
print("external tensors:", [t.name for t in tensors if t.data_location == TensorProto.EXTERNAL])
