"""Reference vectors for rlx's static/weight quantization (crates/rlx/src/quant).

ONNX Runtime's quantization tools are the reference: `compute_scale_zp`
(scale and zero point of a range), `quantize_data` (weights, symmetric int8
per tensor / channel / group), its QuantizeLinear kernel (the integers), and
a QDQ model run by ONNX Runtime (a two-layer MLP quantized statically with
min-max ranges, what `Plan::apply` must reproduce). Percentiles are NumPy's
(`method="linear"`); the MSE search is the definition in NumPy (every range
scaled by k/200, error of quantize-dequantize summed in f64).

    python3 -m venv /tmp/q && /tmp/q/bin/pip install numpy==2.4.6 onnx==1.22.0 onnxruntime==1.32.0
    /tmp/q/bin/python tests/vectors/quant/make.py    # writes vectors.json here
"""
import json, os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization.quant_utils import compute_scale_zp, quantize_data

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261207)


def qparams(lo, hi, symmetric, bits=8):
    top = (1 << (bits - 1)) - 1
    qmin, qmax = (-top, top) if symmetric else (-top - 1, top)
    zp, scale = compute_scale_zp(np.float32(lo), np.float32(hi), np.int8(qmin), np.int8(qmax), symmetric)
    return float(scale), int(zp), qmin, qmax


def ort_quantize(x, scale, zp):
    """ONNX Runtime's QuantizeLinear kernel on x (per tensor, int8)."""
    g = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT8, list(x.shape))],
        [numpy_helper.from_array(np.array(scale, np.float32), "s"),
         numpy_helper.from_array(np.array(zp, np.int8), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def fq(x, scale, zp, qmin, qmax):
    q = np.clip(np.rint(x / np.float32(scale)) + zp, qmin, qmax)
    return ((q - zp) * np.float32(scale)).astype(np.float32)


def mse_best(x, symmetric):
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    errs = []
    for k in range(1, 201):
        f = np.float32(k) / np.float32(200)
        p = qparams(np.float32(lo) * f, np.float32(hi) * f, symmetric)
        errs.append(float(np.sum((fq(x, *p).astype(np.float64) - x.astype(np.float64)) ** 2)))
    return min(errs)


def activation_case(name, x):
    x = x.astype(np.float32)
    out = {"name": name, "x": x.tolist(), "min": float(x.min()), "max": float(x.max())}
    for sym in (False, True):
        key = "sym" if sym else "asym"
        s, z, qmin, qmax = qparams(x.min(), x.max(), sym)
        out[f"minmax_{key}"] = {"scale": s, "zero_point": z, "q": ort_quantize(x, s, z).astype(int).tolist()}
        for p in (99.0, 99.9):
            if sym:
                t = float(np.percentile(np.abs(x), p))
                lo, hi = -t, t
            else:
                lo, hi = float(np.percentile(x, 100 - p)), float(np.percentile(x, p))
            out[f"percentile{p}_{key}"] = [lo, hi]
        out[f"mse_{key}_error"] = mse_best(x, sym)
    return out


def weight_case(name, w, out_axis):
    """quantize_data per tensor, per output channel and per group of 16 inputs."""
    wo = w if out_axis == 0 else w.T  # (out, in)
    res = {"name": name, "w": w.astype(np.float32).reshape(-1).tolist(), "out_axis": out_axis}
    for bits, qt in ((8, TensorProto.INT8), (4, TensorProto.INT4)):
        for gran, size in (("tensor", wo.size), ("channel", wo.shape[1]), ("group16", 16)):
            flat = wo.reshape(-1, size)
            scales, vals = [], []
            for chunk in flat:
                _, s, q = quantize_data(chunk.astype(np.float32), qt, symmetric=True)
                scales.append(float(s)); vals.append(np.asarray(q).astype(int))
            q = np.concatenate(vals).reshape(wo.shape)
            q = q if out_axis == 0 else q.T
            res[f"int{bits}_{gran}"] = {"scales": scales, "q": q.reshape(-1).tolist()}
    return res


def qdq_mlp():
    """x (5, 24) → Linear(24→32, weight (32, 24)) → ReLU → Linear(32→8, weight (32, 8) stored (in, out)).
    Static int8, asymmetric min-max activations, per-channel int8 weights, run by ONNX Runtime as QDQ."""
    x = rng.normal(size=(5, 24)).astype(np.float32)
    w1 = (rng.normal(size=(32, 24)) * 0.3).astype(np.float32)
    b1 = rng.normal(size=32).astype(np.float32) * 0.1
    w2 = (rng.normal(size=(32, 8)) * 0.3).astype(np.float32)
    h = np.maximum(x @ w1.T + b1, 0)
    nodes, inits = [], []

    def qdq_act(name, v):
        s, z, _, _ = qparams(v.min(), v.max(), False)
        inits.extend([numpy_helper.from_array(np.array(s, np.float32), name + "_s"),
                      numpy_helper.from_array(np.array(z, np.int8), name + "_z")])
        nodes.append(helper.make_node("QuantizeLinear", [name, name + "_s", name + "_z"], [name + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name + "_dq"]))
        return name + "_dq"

    def qdq_weight(name, w, axis):  # per output channel along `axis`
        wo = w if axis == 0 else w.T
        sc, qs = [], []
        for row in wo:
            _, s, q = quantize_data(row, TensorProto.INT8, symmetric=True)
            sc.append(s); qs.append(np.asarray(q))
        q = np.stack(qs).astype(np.int8)
        q = q if axis == 0 else q.T
        inits.extend([numpy_helper.from_array(q, name + "_q"),
                      numpy_helper.from_array(np.array(sc, np.float32), name + "_s"),
                      numpy_helper.from_array(np.zeros(len(sc), np.int8), name + "_z")])
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name + "_dq"], axis=axis))
        return name + "_dq"

    xd = qdq_act("x", x)
    w1d = qdq_weight("w1", w1, 0)
    inits.append(numpy_helper.from_array(b1, "b1"))
    nodes.append(helper.make_node("Transpose", [w1d], ["w1t"], perm=[1, 0]))
    nodes.append(helper.make_node("MatMul", [xd, "w1t"], ["m1"]))
    nodes.append(helper.make_node("Add", ["m1", "b1"], ["a1"]))
    nodes.append(helper.make_node("Relu", ["a1"], ["h"]))
    hd = qdq_act("h", h)
    w2d = qdq_weight("w2", w2, 1)
    nodes.append(helper.make_node("MatMul", [hd, w2d], ["y"]))
    g = helper.make_graph(nodes, "qdq_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"x": x})[0]
    return {"x": x.reshape(-1).tolist(), "w1": w1.reshape(-1).tolist(), "b1": b1.tolist(),
            "w2": w2.reshape(-1).tolist(), "y": y.reshape(-1).tolist(),
            "y_f32": (h @ w2).reshape(-1).tolist()}


acts = [
    activation_case("normal", rng.normal(size=2000)),
    activation_case("outliers", np.concatenate([rng.laplace(size=1990), [25.0, -18.0, 40.0, 31.0, -22.0, 50.0, 19.0, 28.0, -35.0, 44.0]])),
    activation_case("relu", np.maximum(rng.normal(size=1500) * 2 + 0.3, 0)),
    activation_case("gelu_like", rng.normal(size=1200) * 1.5 - 0.17),
    activation_case("zeros", np.zeros(64)),
]
weights = [
    weight_case("out_in", (rng.normal(size=(6, 32)) * np.linspace(0.1, 2, 6)[:, None]), 0),
    weight_case("in_out", (rng.standard_t(3, size=(48, 5))), 1),
]
out = {"activations": acts, "weights": weights, "qdq_mlp": qdq_mlp(),
       "versions": {"onnxruntime": ort.__version__, "onnx": onnx.__version__, "numpy": np.__version__}}
with open(os.path.join(HERE, "vectors.json"), "w") as f:
    json.dump(out, f)
print("wrote", os.path.join(HERE, "vectors.json"))
