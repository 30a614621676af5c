"""TfIdfVectorizer in the IDF and TFIDF modes, with weights and a shuffled
ngram_indexes (ONNX's own node tests are all TF): node-test directories
whose expected outputs come from ONNX Runtime. The spec gives `weights`
per pool n-gram; ONNX's reference evaluator indexes them by output column
instead (the two differ when ngram_indexes is not the identity) and fails
on IDF without weights, so it only cross-checks the identity case.

    pip install onnx==1.22.0 onnxruntime==1.32.0 numpy
    python3 crates/rlx-onnx/tests/data/tfidf/make.py   # writes ../node/rlx_tfidf_*
"""
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

OUT = Path(__file__).resolve().parent.parent / "node"
x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], dtype=np.int64)
common = dict(max_gram_length=2, min_gram_length=1, max_skip_count=2,
              ngram_counts=[0, 4], ngram_indexes=[6, 0, 5, 1, 3, 2, 4],
              pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])
cases = {
    "rlx_tfidf_idf_weights": dict(mode="IDF", weights=[0.5, 1.5, 2.0, 3.0, 0.25, 1.0, 4.0]),
    "rlx_tfidf_idf_no_weights": dict(mode="IDF"),
    "rlx_tfidf_tfidf_weights": dict(mode="TFIDF", weights=[0.5, 1.5, 2.0, 3.0, 0.25, 1.0, 4.0]),
    "rlx_tfidf_tfidf_identity": dict(mode="TFIDF", weights=[0.5, 1.5, 2.0, 3.0, 0.25, 1.0, 4.0],
                                     ngram_indexes=list(range(7))),
}
for name, attrs in cases.items():
    node = helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **{**common, **attrs})
    graph = helper.make_graph([node], name,
                              [helper.make_tensor_value_info("X", TensorProto.INT64, list(x.shape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"X": x})
    if "ngram_indexes" in attrs:
        (r,) = ReferenceEvaluator(model).run(None, {"X": x})
        np.testing.assert_array_equal(y, r)
    d = OUT / name / "test_data_set_0"
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, OUT / name / "model.onnx")
    (d / "input_0.pb").write_bytes(numpy_helper.from_array(x, "X").SerializeToString())
    (d / "output_0.pb").write_bytes(numpy_helper.from_array(y, "Y").SerializeToString())
    print(name, y.tolist())
