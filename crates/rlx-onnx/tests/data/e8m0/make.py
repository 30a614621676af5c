"""Cast to FLOAT8E8M0 in each round_mode, with and without saturation:
node-test directories (model.onnx, test_data_set_0) whose expected codes
come from ONNX's own reference conversion, onnx.numpy_helper.to_float8e8m0.

    pip install onnx==1.22.0 numpy
    python3 crates/rlx-onnx/tests/data/e8m0/make.py   # writes ../node/rlx_cast_e8m0_*
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "node"

x = np.array(
    [0.0, -0.0, 1e-45, 2.0**-127, 2.0**-127 * 1.5, 2.0**-126, 1.17e-38, 0.124, 0.125,
     0.1875, 0.19, 1.0, 1.49, 1.5, 1.51, -3.0, 3.0, 5.0, 6.0, 7.0, 1000.0, 2.0**127,
     2.0**127 * 1.5, 3.4e38, -3.4e38, np.nan, np.inf, -np.inf],
    dtype=np.float32,
)

for mode in ("up", "down", "nearest"):
    for sat in (1, 0):
        name = f"rlx_cast_e8m0_{mode}_{'sat' if sat else 'nosat'}"
        node = helper.make_node("Cast", ["input"], ["output"], to=TensorProto.FLOAT8E8M0,
                                round_mode=mode, saturate=sat)
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT8E8M0, list(x.shape))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
        codes = numpy_helper.to_float8e8m0(x, saturate=bool(sat), round_mode=mode)
        d = OUT / name / "test_data_set_0"
        d.mkdir(parents=True, exist_ok=True)
        onnx.save(model, OUT / name / "model.onnx")
        (d / "input_0.pb").write_bytes(numpy_helper.from_array(x, "input").SerializeToString())
        out = helper.make_tensor("output", TensorProto.FLOAT8E8M0, list(x.shape),
                                 codes.view(np.uint8).tobytes(), raw=True)
        (d / "output_0.pb").write_bytes(out.SerializeToString())
        print(name, codes.view(np.uint8).tolist())
