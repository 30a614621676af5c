"""Det of 3x3 and 1x1 matrices (ONNX's own Det tests are 2x2): node-test
directories whose expected outputs are numpy.linalg.det.

    pip install onnx==1.22.0 numpy
    python3 crates/rlx-onnx/tests/data/det/make.py   # writes ../node/rlx_det_*
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "node"
rng = np.random.default_rng(7)
for name, shape in {"rlx_det_3x3_batch": (2, 4, 3, 3), "rlx_det_1x1": (5, 1, 1)}.items():
    x = rng.standard_normal(shape).astype(np.float32)
    y = np.linalg.det(x.astype(np.float64)).astype(np.float32)
    node = helper.make_node("Det", ["X"], ["Y"])
    graph = helper.make_graph([node], name,
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(shape[:-2]))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    d = OUT / name / "test_data_set_0"
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, OUT / name / "model.onnx")
    (d / "input_0.pb").write_bytes(numpy_helper.from_array(x, "X").SerializeToString())
    (d / "output_0.pb").write_bytes(numpy_helper.from_array(y, "Y").SerializeToString())
    print(name, y.ravel().tolist()[:4])
