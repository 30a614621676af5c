"""MaxPool's Indices output beyond ONNX's two 2-D tests: column-major
storage_order, dilations with ceil mode, 1-D and 3-D windows — node-test
directories whose expected outputs come from ONNX Runtime.

    pip install onnx==1.22.0 onnxruntime==1.32.0 numpy
    python3 crates/rlx-onnx/tests/data/maxpool_indices/make.py   # writes ../node/rlx_maxpool_indices_*
"""
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "node"
rng = np.random.default_rng(11)
cases = {
    "rlx_maxpool_indices_storage_order_1": ((2, 3, 5, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], storage_order=1)),
    "rlx_maxpool_indices_1d_dilated_ceil": ((1, 2, 11), dict(kernel_shape=[3], strides=[2], dilations=[2], ceil_mode=1)),
    "rlx_maxpool_indices_3d": ((1, 2, 4, 4, 5), dict(kernel_shape=[2, 2, 3], strides=[2, 1, 2], pads=[0, 1, 1, 0, 0, 1])),
}
for name, (shape, attrs) in cases.items():
    x = rng.standard_normal(shape).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    graph = helper.make_graph([node], name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, i = sess.run(None, {"x": x})
    d = OUT / name / "test_data_set_0"
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, OUT / name / "model.onnx")
    (d / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (d / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
    (d / "output_1.pb").write_bytes(numpy_helper.from_array(i, "i").SerializeToString())
    print(name, y.shape, i.ravel()[:6].tolist())
