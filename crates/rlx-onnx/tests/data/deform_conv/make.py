"""DeformConv beyond ONNX's tests: two conv groups and two offset groups,
stride and dilation 2, offsets large enough to leave the input, a mask and
a bias — a node-test directory whose expected output comes from ONNX
Runtime.

    pip install onnx==1.22.0 onnxruntime==1.32.0 numpy
    python3 crates/rlx-onnx/tests/data/deform_conv/make.py   # writes ../node/rlx_deform_conv_*
"""
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "node"
rng = np.random.default_rng(3)
n, c, h, w, oc, k = 2, 4, 9, 8, 6, 3
x = rng.standard_normal((n, c, h, w)).astype(np.float32)
wt = rng.standard_normal((oc, c // 2, k, k)).astype(np.float32)
oh, ow = (h + 2 - 5) // 2 + 1, (w + 2 - 5) // 2 + 1
off = (rng.standard_normal((n, 2 * 2 * k * k, oh, ow)) * 3).astype(np.float32)
mask = rng.random((n, 2 * k * k, oh, ow)).astype(np.float32)
b = rng.standard_normal(oc).astype(np.float32)
name = "rlx_deform_conv_groups_dilated_masked"
node = helper.make_node("DeformConv", ["X", "W", "offset", "B", "mask"], ["Y"], group=2, offset_group=2,
                        strides=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[k, k])
ins = [("X", x), ("W", wt), ("offset", off), ("B", b), ("mask", mask)]
graph = helper.make_graph([node], name,
                          [helper.make_tensor_value_info(nm, TensorProto.FLOAT, list(t.shape)) for nm, t in ins],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
(y,) = sess.run(None, dict(ins))
d = OUT / name / "test_data_set_0"
d.mkdir(parents=True, exist_ok=True)
onnx.save(model, OUT / name / "model.onnx")
for i, (nm, t) in enumerate(ins):
    (d / f"input_{i}.pb").write_bytes(numpy_helper.from_array(t, nm).SerializeToString())
(d / "output_0.pb").write_bytes(numpy_helper.from_array(y, "Y").SerializeToString())
print(name, y.shape, y.ravel()[:4].tolist())
