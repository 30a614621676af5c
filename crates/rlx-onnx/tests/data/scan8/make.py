"""Scan at opset 8 (a batch axis, sequence_lens) beyond ONNX's one test: a
batch of 3, a reversed scan input beside a forward one, full
sequence_lens — a node-test directory whose expected outputs come from
ONNX Runtime.

    pip install onnx==1.22.0 onnxruntime==1.32.0 numpy
    python3 crates/rlx-onnx/tests/data/scan8/make.py   # writes ../node/rlx_scan8_*
"""
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "node"
rng = np.random.default_rng(8)
b, t, d = 3, 4, 2
init = rng.standard_normal((b, d)).astype(np.float32)
xs = rng.standard_normal((b, t, d)).astype(np.float32)
ys = rng.standard_normal((b, t, d)).astype(np.float32)
lens = np.full((b,), t, np.int64)
f = TensorProto.FLOAT
body = helper.make_graph(
    [helper.make_node("Add", ["s", "x"], ["s1"]), helper.make_node("Mul", ["s1", "y"], ["s2"]),
     helper.make_node("Identity", ["s2"], ["o"])],
    "body",
    [helper.make_tensor_value_info(n, f, [d]) for n in ("s", "x", "y")],
    [helper.make_tensor_value_info(n, f, [d]) for n in ("s2", "o")])
node = helper.make_node("Scan", ["lens", "init", "xs", "ys"], ["final", "outs"], num_scan_inputs=2,
                        directions=[0, 1], body=body)
name = "rlx_scan8_batch_reversed"
graph = helper.make_graph(
    [node], name,
    [helper.make_tensor_value_info("lens", TensorProto.INT64, [b]),
     helper.make_tensor_value_info("init", f, [b, d]),
     helper.make_tensor_value_info("xs", f, [b, t, d]), helper.make_tensor_value_info("ys", f, [b, t, d])],
    [helper.make_tensor_value_info("final", f, None), helper.make_tensor_value_info("outs", f, None)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
model.ir_version = 3
sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
outs = sess.run(None, {"lens": lens, "init": init, "xs": xs, "ys": ys})
dd = OUT / name / "test_data_set_0"
dd.mkdir(parents=True, exist_ok=True)
onnx.save(model, OUT / name / "model.onnx")
for i, (nm, v) in enumerate([("lens", lens), ("init", init), ("xs", xs), ("ys", ys)]):
    (dd / f"input_{i}.pb").write_bytes(numpy_helper.from_array(v, nm).SerializeToString())
for i, (nm, v) in enumerate(zip(["final", "outs"], outs)):
    (dd / f"output_{i}.pb").write_bytes(numpy_helper.from_array(v, nm).SerializeToString())
print(name, [o.shape for o in outs])
