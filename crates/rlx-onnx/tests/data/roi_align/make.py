"""RoiAlign beyond ONNX's tests (one image, one channel, boxes inside it):
two images, three channels, boxes reaching past the edges, a spatial scale
and a 3×3 grid, avg and max — node-test directories whose expected outputs
come from ONNX Runtime.

    pip install onnx==1.22.0 onnxruntime==1.32.0 numpy
    python3 crates/rlx-onnx/tests/data/roi_align/make.py   # writes ../node/rlx_roi_align_*
"""
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "node"
rng = np.random.default_rng(5)
x = rng.standard_normal((2, 3, 12, 9)).astype(np.float32)
rois = np.array([[0, 0, 17, 23], [-4, -2, 8, 6], [10, 12, 30, 40], [3.5, 1.25, 9.75, 14.5]], np.float32)
batch = np.array([0, 1, 1, 0], np.int64)
for mode in ("avg", "max"):
    name = f"rlx_roi_align_{mode}_edges_scaled"
    node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], mode=mode,
                            output_height=3, output_width=4, sampling_ratio=3, spatial_scale=0.5,
                            coordinate_transformation_mode="half_pixel")
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape)),
         helper.make_tensor_value_info("rois", TensorProto.FLOAT, list(rois.shape)),
         helper.make_tensor_value_info("batch_indices", TensorProto.INT64, list(batch.shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"X": x, "rois": rois, "batch_indices": batch})
    d = OUT / name / "test_data_set_0"
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, OUT / name / "model.onnx")
    for k, (t, nm) in enumerate([(x, "X"), (rois, "rois"), (batch, "batch_indices")]):
        (d / f"input_{k}.pb").write_bytes(numpy_helper.from_array(t, nm).SerializeToString())
    (d / "output_0.pb").write_bytes(numpy_helper.from_array(y, "Y").SerializeToString())
    print(name, y.shape, y.ravel()[:4].tolist())
