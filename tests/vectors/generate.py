#!/usr/bin/env python3
"""Reference test vectors for every op of the rlx IR.

Expected results come from libraries outside rlx:

* NumPy / SciPy, computed in float64 (complex128) from the inputs exactly as
  stored (already rounded to their dtype), then rounded once to the output
  dtype; integer results are computed in int64 and wrapped (two's complement);
* ONNX's reference evaluator (`onnx.reference.ReferenceEvaluator`, run in
  float64) for convolutions, pooling, Slice, GatherND/GatherElements and
  ScatterElements, cross-checked against ONNX Runtime in float32; ONNX Runtime
  alone where the reference evaluator is wrong (OneHot out-of-range indices,
  ScatterND max/min); ONNX Runtime also cross-checks the recurrent cells and
  ONNX's evaluator the normalizations, softmax and gelu;
* ml_dtypes for bf16 and float8 (E4M3FN) values;
* the `gguf` package for GGUF / MXFP4 block (de)quantization (bit-exact).

Output: tests/vectors/ops/<op>.json, one file per op, in the format described
in tests/vectors/README.md. The graphs are MIR text (docs/TEXT_IR.md).

Deterministic: every op family draws from its own generator seeded by a hash
of the family name. Exits 1 if an op defined in crates/rlx-ir/src/ops/*.rs has
no vector file.

    pip install -r tests/vectors/requirements.txt
    python3 tests/vectors/generate.py
"""

from __future__ import annotations

import json
import math
import re
import sys
import warnings
import zlib
from collections import defaultdict
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import scipy.special
from gguf import quants as gguf_quants
from gguf.constants import GGMLQuantizationType
from onnx import helper
from onnx.reference import ReferenceEvaluator

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "ops"
OPS_SRC = HERE.parent.parent / "crates" / "rlx-ir" / "src" / "ops"
OP_SOURCES = ["elementwise.rs", "reduce.rs", "linalg.rs", "shape.rs", "index.rs",
              "signal.rs", "control.rs", "misc.rs", "fused.rs", "integer.rs", "region.rs", "formula.rs"]

# Reference computations deliberately produce NaN/inf (log(0), 0/0, ...).
np.seterr(all="ignore")
warnings.filterwarnings("ignore", category=RuntimeWarning)

NAN, INF = float("nan"), float("inf")

# =============================================================================
# dtypes, rounding, tensors
# =============================================================================

NP_DTYPE = {
    "bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32,
    "i64": np.int64, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
    "f64": np.float64, "c64": np.complex64, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
}
FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "u8", "i16", "i32", "i64")
# The wider unsigned types (ONNX's UINT16/32/64): their own family below,
# computed in NumPy's unsigned arithmetic.
UINTS = ("u16", "u32", "u64")
# Packed and block-quantized dtypes: (elements per block, bytes per block).
BLOCKS = {
    "i4": (2, 1), "u4": (2, 1), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22),
    "q5_1": (32, 24), "q8_0": (32, 34), "q2_k": (256, 84), "q3_k": (256, 110),
    "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210), "mxfp4": (32, 17),
    "mxfp8": (32, 33),
}
GGUF_TYPE = {
    "q4_0": GGMLQuantizationType.Q4_0, "q4_1": GGMLQuantizationType.Q4_1,
    "q5_0": GGMLQuantizationType.Q5_0, "q5_1": GGMLQuantizationType.Q5_1,
    "q8_0": GGMLQuantizationType.Q8_0, "q2_k": GGMLQuantizationType.Q2_K,
    "q3_k": GGMLQuantizationType.Q3_K, "q4_k": GGMLQuantizationType.Q4_K,
    "q5_k": GGMLQuantizationType.Q5_K, "q6_k": GGMLQuantizationType.Q6_K,
    "mxfp4": GGMLQuantizationType.MXFP4,
}

# Default (rtol, atol) by output dtype; integer and bool outputs are exact.
TOL = {"f64": (1e-12, 1e-12), "f32": (1e-5, 1e-6), "c64": (1e-5, 1e-6),
       "f16": (2e-3, 1e-3), "bf16": (1.6e-2, 1e-2)}
# Ops that accumulate many terms (contractions, convolutions, norms,
# attention) get a looser f32 tolerance.
TOL_ACC = {**TOL, "f32": (1e-4, 1e-5), "c64": (1e-5, 1e-5)}


def f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float64 to bfloat16 once (nearest, ties to even).

    ml_dtypes converts f64 -> f32 -> bf16, which double-rounds. Rounding to
    f32 with round-to-odd first makes the f32 -> bf16 step the only rounding
    that matters (f32 keeps 16 more mantissa bits than bf16)."""
    x = np.asarray(x, np.float64)
    y = x.astype(np.float32)
    finite = np.isfinite(x)
    # Truncate toward zero...
    y = np.where(finite & (np.abs(y.astype(np.float64)) > np.abs(x)), np.nextafter(y, np.float32(0)), y)
    y = np.asarray(y, np.float32)
    # ...and make the last bit sticky when the truncation was inexact.
    inexact = finite & (y.astype(np.float64) != x)
    bits = y.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32).astype(ml_dtypes.bfloat16)


def cast_values(x, dtype: str) -> np.ndarray:
    """Convert values to `dtype`: floats round once to nearest-even from
    float64, integers wrap (two's complement), bool is x != 0."""
    if dtype in UINTS:
        # Python ints (not a float64 array: 2^64 - 1 must stay exact), wrapped.
        bits = np.iinfo(NP_DTYPE[dtype]).bits
        obj = np.asarray(x, dtype=object)
        flat = [int(v) % (1 << bits) for v in obj.ravel()]
        return np.array(flat, dtype=NP_DTYPE[dtype]).reshape(obj.shape)
    x = np.asarray(x)
    if dtype == "bool":
        return x.astype(np.bool_)
    if dtype in INTS:
        if x.dtype.kind == "f":
            assert np.all(np.isfinite(x)) and np.all(x == np.trunc(x)), "integer data must be integral"
        return x.astype(np.int64).astype(NP_DTYPE[dtype])
    if dtype == "c64":
        return x.astype(np.complex128).astype(np.complex64)
    if dtype == "bf16":
        return f64_to_bf16(x.astype(np.float64))
    # numpy rounds float64 -> float16 / float32 directly (one rounding).
    return x.astype(np.float64).astype(NP_DTYPE[dtype])


class T:
    """A tensor of a test vector: a dtype name and either a NumPy array of
    that dtype (plain dtypes) or the raw bytes of a packed/quantized dtype."""

    def __init__(self, dtype: str, array=None, *, raw: bytes | None = None, shape=None):
        self.dtype = dtype
        if raw is not None:
            self.a, self.raw, self.shape = None, bytes(raw), tuple(int(d) for d in shape)
            block, nbytes = BLOCKS[dtype]
            n = math.prod(self.shape)
            assert n % block == 0 and len(self.raw) == n // block * nbytes, (dtype, self.shape, len(self.raw))
        else:
            assert dtype in NP_DTYPE, dtype
            self.a = np.asarray(array)
            assert self.a.dtype == np.dtype(NP_DTYPE[dtype]), (dtype, self.a.dtype)
            self.raw, self.shape = None, self.a.shape

    @property
    def ty(self) -> str:
        """The MIR type, e.g. f32[2,3]."""
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"

    def f64(self) -> np.ndarray:
        """The elements widened exactly to float64 (complex128 for c64)."""
        if self.dtype == "c64":
            return self.a.astype(np.complex128)
        return self.a.astype(np.float64)

    def i64(self) -> np.ndarray:
        return self.a.astype(np.int64)


def tensor(dtype: str, values, shape=None) -> T:
    arr = cast_values(values, dtype)
    if shape is not None:
        arr = arr.reshape(shape)
    return T(dtype, arr)


def rng_for(key: str) -> np.random.Generator:
    """A generator per op family, so editing one family leaves the others' data alone."""
    return np.random.default_rng(zlib.crc32(key.encode()))


def randn(rng, dtype, shape, scale=1.0) -> T:
    return tensor(dtype, rng.standard_normal(shape) * scale)


def uniform(rng, dtype, shape, lo, hi) -> T:
    return tensor(dtype, rng.uniform(lo, hi, shape))


def randint(rng, dtype, shape, lo, hi) -> T:
    """Integers in [lo, hi)."""
    return tensor(dtype, rng.integers(lo, hi, shape))


def rbool(rng, shape, p=0.5) -> T:
    return tensor("bool", rng.random(shape) < p)


# =============================================================================
# JSON and MIR text
# =============================================================================

def json_float(v: float):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v  # the exact double of the stored value; json writes its repr


def tensor_json(t: T) -> dict:
    d = {"dtype": t.dtype, "shape": list(t.shape)}
    if t.raw is not None:
        d["data"] = t.raw.hex()
    elif t.dtype == "bool":
        d["data"] = [bool(v) for v in t.a.ravel()]
    elif t.dtype in INTS or t.dtype in UINTS:
        d["data"] = [int(v) for v in t.a.ravel()]
    elif t.dtype == "c64":
        d["data"] = [[json_float(v.real), json_float(v.imag)] for v in t.a.ravel()]
    else:
        d["data"] = [json_float(v) for v in t.a.ravel()]
    return d


class DT(str):
    """A dtype attribute value, written bare (f32)."""


def fmt_float(v: float) -> str:
    s = repr(float(v))  # '1.0', '1e-05', 'nan', 'inf', '-inf'
    return s.replace("e+", "e")


def tensor_literal(t: T) -> str:
    if t.raw is not None:
        raise ValueError("quantized literals are not used by these vectors")
    if t.dtype == "bool":
        items = ["true" if v else "false" for v in t.a.ravel()]
    elif t.dtype in INTS or t.dtype in UINTS:
        items = [str(int(v)) for v in t.a.ravel()]
    elif t.dtype == "c64":
        items = [f"[{fmt_float(v.real)}, {fmt_float(v.imag)}]" for v in t.a.ravel()]
    else:
        items = [fmt_float(v) for v in t.a.ravel()]
    return f"tensor<{t.ty}> [{', '.join(items)}]"


def fmt_attr(v, indent: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, DT):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return fmt_float(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_attr(x, indent) for x in v) + "]"
    if isinstance(v, T):
        return tensor_literal(v)
    if isinstance(v, Graph):
        return v.text(indent)
    raise TypeError(f"attribute value {v!r}")


class Graph:
    """Builds the MIR text of a graph (docs/TEXT_IR.md)."""

    def __init__(self, name: str = "g"):
        self.name = name
        self.params: list[str] = []
        self.nodes: list[tuple] = []
        self.results: list[str] = []

    def param(self, name: str, ty: str) -> str:
        self.params.append(f"%{name}: {ty}")
        return name

    def node(self, op: str, args, attrs=None, outs="r"):
        """Append `%outs = op(%args) {attrs}`; `outs` is a name or a list of names."""
        names = [outs] if isinstance(outs, str) else list(outs)
        self.nodes.append((names, op, list(args), dict(attrs or {})))
        return outs

    def ret(self, *values: str) -> "Graph":
        self.results = list(values)
        return self

    def text(self, indent: str = "") -> str:
        inner = indent + "  "
        lines = [f"graph @{self.name}({', '.join(self.params)}) {{"]
        for names, op, args, attrs in self.nodes:
            line = f"{inner}{', '.join('%' + n for n in names)} = {op}({', '.join('%' + a for a in args)})"
            if attrs:
                line += " {" + ", ".join(f"{k}={fmt_attr(v, inner)}" for k, v in attrs.items()) + "}"
            lines.append(line)
        lines.append(f"{inner}return {', '.join('%' + r for r in self.results)}".rstrip())
        lines.append(indent + "}")
        return "\n".join(lines)


def default_names(n: int) -> list[str]:
    return ["x"] if n == 1 else [chr(ord("a") + k) for k in range(n)]


def single_op_graph(op: str, inputs: list[T], attrs: dict | None, nout: int, names=None) -> str:
    g = Graph("g")
    names = names or default_names(len(inputs))
    args = [g.param(n, t.ty) for n, t in zip(names, inputs)]
    outs = "r" if nout == 1 else [f"r{k}" for k in range(nout)]
    g.node(op, args, attrs, outs)
    return g.ret(*([outs] if nout == 1 else outs)).text()


# =============================================================================
# case registry
# =============================================================================

CASES: dict[str, list[dict]] = defaultdict(list)


def default_tol(outputs: list[T], acc: bool) -> tuple[float, float]:
    table = TOL_ACC if acc else TOL
    tols = [table[t.dtype] for t in outputs if t.dtype in table]
    if not tols:
        return (0.0, 0.0)
    return (max(r for r, _ in tols), max(a for _, a in tols))


def add_case(op: str, name: str, inputs: list[T], outputs: list[T] | T | None = None,
             attrs: dict | None = None, *, graph: str | Graph | None = None, tol=None, acc=False,
             error: str | None = None, moments: dict | None = None, nout: int = 1, names=None):
    """Record one case of `op`. Without `graph`, the graph is the single node
    `op(inputs) {attrs}`. Exactly one of outputs / error / moments is given."""
    if isinstance(outputs, T):
        outputs = [outputs]
    assert (outputs is not None) + (error is not None) + (moments is not None) == 1
    assert all(c["name"] != name for c in CASES[op]), f"duplicate case {op}/{name}"
    if graph is None:
        graph = single_op_graph(op, inputs, attrs, len(outputs) if outputs else nout, names)
    elif isinstance(graph, Graph):
        graph = graph.text()
    case = {"name": name, "graph": graph, "inputs": [tensor_json(t) for t in inputs]}
    if outputs is not None:
        case["outputs"] = [tensor_json(t) for t in outputs]
        rtol, atol = tol if tol is not None else default_tol(outputs, acc)
        case["rtol"], case["atol"] = rtol, atol
    elif error is not None:
        case["error"] = error
    else:
        case["moments"] = moments
    CASES[op].append(case)


def onnx_model(op_type: str, inputs: list, attrs: dict | None, nout: int, opset: int):
    names = [f"in{k}" if a is not None else "" for k, a in enumerate(inputs)]
    outs = [f"out{k}" for k in range(nout)]
    node = helper.make_node(op_type, names, outs, **(attrs or {}))
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in zip(names, inputs) if a is not None]
    graph = helper.make_graph([node], "g", vis, [onnx.ValueInfoProto(name=o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10  # what ONNX Runtime accepts
    feeds = {n: a for n, a in zip(names, inputs) if a is not None}
    return model, feeds


def onnx_ref(op_type, inputs, attrs=None, nout=1, opset=21) -> list[np.ndarray]:
    """ONNX's reference evaluator (NumPy); float64 inputs give float64 results."""
    model, feeds = onnx_model(op_type, inputs, attrs, nout, opset)
    return ReferenceEvaluator(model).run(None, feeds)


def onnx_ort(op_type, inputs, attrs=None, nout=1, opset=21) -> list[np.ndarray]:
    model, feeds = onnx_model(op_type, inputs, attrs, nout, opset)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def onnx_move(op_type: str, x: T, extra: list, attrs: dict | None = None, opset=21, check_ref=True) -> T:
    """Run an ONNX op that only moves elements (Slice, GatherND, ...) on the
    flat positions of x, then gather x's elements, so any dtype works. ONNX
    Runtime computes it (positions are exact in float32); ONNX's reference
    evaluator must agree where it supports the case."""
    pos = np.arange(x.a.size, dtype=np.float32).reshape(x.shape)
    idx = onnx_ort(op_type, [pos] + extra, attrs, opset=opset)[0]
    if check_ref:
        ref = onnx_ref(op_type, [pos.astype(np.float64)] + extra, attrs, opset=opset)[0]
        assert np.array_equal(ref, idx), f"{op_type}: ONNX Runtime and the reference evaluator disagree"
    idx = idx.astype(np.int64)
    return same_as(x, x.a.reshape(-1)[idx.reshape(-1)].reshape(idx.shape))


def check_close(what: str, got, want, rtol=1e-4, atol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    assert ok.all(), f"{what}: cross-check failed, max diff {np.nanmax(np.abs(got - want))}"


def onnx_both(op_type, inputs, attrs=None, nout=1, opset=21) -> list[np.ndarray]:
    """Float64 result of ONNX's reference evaluator, cross-checked against ONNX
    Runtime run on the same inputs in float32. Integer inputs pass through."""
    f64 = [None if a is None else (a.astype(np.float64) if a.dtype.kind == "f" else a) for a in inputs]
    f32 = [None if a is None else (a.astype(np.float32) if a.dtype.kind == "f" else a) for a in inputs]
    ref = onnx_ref(op_type, f64, attrs, nout, opset)
    rt = onnx_ort(op_type, f32, attrs, nout, opset)
    for k, (r, o) in enumerate(zip(ref, rt)):
        check_close(f"{op_type} output {k}", o, r)
    return ref


# =============================================================================
# elementwise: unary
# =============================================================================

# Inputs that stress every float unary op: NaN, infinities, zero, +-1, ...
SPECIAL = [NAN, INF, -INF, 0.0, 1.0, -1.0, 0.5, 2.0]


def softplus_ref(x):
    return np.logaddexp(0.0, x)  # ln(1 + e^x), stable for large |x|


def mixed_small(rng, shape, lo, hi):
    """Uniform values where about a third are tiny (tests expm1/log1p accuracy)."""
    v = rng.uniform(lo, hi, shape)
    return np.where(rng.random(shape) < 0.35, v * 1e-5, v)


# op -> (float64 reference, sampler of typical inputs inside the domain)
UNARY_FLOAT = {
    "exp": (np.exp, lambda r, s: r.uniform(-4, 4, s)),
    "exp2": (np.exp2, lambda r, s: r.uniform(-6, 6, s)),
    "expm1": (np.expm1, lambda r, s: mixed_small(r, s, -2, 2)),
    "log": (np.log, lambda r, s: r.uniform(0.01, 10, s)),
    "log2": (np.log2, lambda r, s: r.uniform(0.01, 10, s)),
    "log1p": (np.log1p, lambda r, s: mixed_small(r, s, -0.9, 3)),
    "sqrt": (np.sqrt, lambda r, s: r.uniform(0, 10, s)),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), lambda r, s: r.uniform(0.01, 10, s)),
    "reciprocal": (lambda x: 1.0 / x, lambda r, s: r.choice([-1, 1], s) * r.uniform(0.1, 5, s)),
    "sin": (np.sin, lambda r, s: r.uniform(-6, 6, s)),
    "cos": (np.cos, lambda r, s: r.uniform(-6, 6, s)),
    "tan": (np.tan, lambda r, s: r.uniform(-1.4, 1.4, s)),
    "asin": (np.arcsin, lambda r, s: r.uniform(-1, 1, s)),
    "acos": (np.arccos, lambda r, s: r.uniform(-1, 1, s)),
    "atan": (np.arctan, lambda r, s: r.uniform(-5, 5, s)),
    "sinh": (np.sinh, lambda r, s: r.uniform(-3, 3, s)),
    "cosh": (np.cosh, lambda r, s: r.uniform(-3, 3, s)),
    "tanh": (np.tanh, lambda r, s: r.uniform(-4, 4, s)),
    "asinh": (np.arcsinh, lambda r, s: r.uniform(-5, 5, s)),
    "acosh": (np.arccosh, lambda r, s: r.uniform(1, 6, s)),
    "atanh": (np.arctanh, lambda r, s: r.uniform(-0.95, 0.95, s)),
    "erf": (scipy.special.erf, lambda r, s: r.uniform(-3, 3, s)),
    "sigmoid": (scipy.special.expit, lambda r, s: r.uniform(-8, 8, s)),
    "softplus": (softplus_ref, lambda r, s: r.uniform(-20, 20, s)),
    "floor": (np.floor, lambda r, s: r.uniform(-5, 5, s)),
    "ceil": (np.ceil, lambda r, s: r.uniform(-5, 5, s)),
    "round": (np.rint, lambda r, s: r.uniform(-5, 5, s)),  # half to even
    "trunc": (np.trunc, lambda r, s: r.uniform(-5, 5, s)),
}

# Predicates: float in, bool out.
UNARY_PRED = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}

# Ops also defined on integers; integer results are computed in int64 and wrapped.
UNARY_NUMERIC = {
    "abs": np.abs,  # wraps at the signed minimum: abs(-128i8) = -128
    "neg": np.negative,
    "sign": np.sign,  # sign(NaN) = NaN
    "square": lambda x: x * x,
    "relu": lambda x: np.maximum(x, 0),  # max(x, 0): NaN propagates like `max`
}

# Integer inputs hitting the extremes of each dtype.
INT_EDGE = {
    "i8": [-128, -100, -12, -1, 0, 1, 11, 127],
    "u8": [0, 1, 16, 127, 128, 200, 255],
    "i16": [-32768, -300, -1, 0, 2, 181, 32767],
    "i32": [-2147483648, -70000, -5, 0, 3, 46341, 2147483647],
    "i64": [-(2**63), -3037000500, -7, 0, 9, 3037000500, 2**63 - 1],
}


# Ops whose point is accuracy near 0: no absolute tolerance in f32/f64, so a
# naive exp(x) - 1 or log(1 + x) fails on the tiny inputs of `mixed_small`.
NEAR_ZERO_ACCURATE = ("expm1", "log1p")


def unary_float_cases(op, ref, sample, rng):
    for dt, shape in (("f32", (3, 4)), ("f64", (2, 3)), ("f16", (2, 4)), ("bf16", (2, 4))):
        x = tensor(dt, sample(rng, shape))
        tol = (TOL[dt][0], 0.0) if op in NEAR_ZERO_ACCURATE and dt in ("f32", "f64") else None
        add_case(op, dt, [x], tensor(out_dt(op, dt), ref(x.f64())), tol=tol)
    x = tensor("f32", SPECIAL)
    add_case(op, "special_values_f32", [x], tensor(out_dt(op, "f32"), ref(x.f64())))
    x = tensor("f32", np.zeros((2, 0)))
    add_case(op, "empty_f32", [x], tensor(out_dt(op, "f32"), ref(x.f64())))


def out_dt(op, dt):
    return "bool" if op in UNARY_PRED else dt


def gen_unary():
    rng = rng_for("unary")
    for op, (ref, sample) in UNARY_FLOAT.items():
        unary_float_cases(op, ref, sample, rng)
    # Rounding ops on exact halves (round is half-to-even).
    halves = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.49999997, 0.50000006, 4.0, -7.0]
    for op in ("floor", "ceil", "round", "trunc"):
        x = tensor("f32", halves)
        add_case(op, "halves_f32", [x], tensor("f32", UNARY_FLOAT[op][0](x.f64())))
        x = tensor("f64", [2.5, -2.5, 1e15 + 0.5, -(2.0**51) - 0.5, 0.5, 123.5])
        add_case(op, "halves_f64", [x], tensor("f64", UNARY_FLOAT[op][0](x.f64())))

    # Large |x|: exp(x) overflows, so only stable formulations pass.
    for op in ("softplus", "sigmoid"):
        ref = UNARY_FLOAT[op][0]
        x = tensor("f32", [100.0, 1000.0, -1000.0, 88.75, -88.75, 30.0, -30.0])
        add_case(op, "large_magnitude_f32", [x], tensor("f32", ref(x.f64())))
        x = tensor("f16", [12.0, 20.0, -12.0, 100.0, -100.0])
        add_case(op, "large_magnitude_f16", [x], tensor("f16", ref(x.f64())))
        x = tensor("f64", [800.0, -800.0, 40.0, -40.0])
        add_case(op, "large_magnitude_f64", [x], tensor("f64", ref(x.f64())))

    for op, ref in UNARY_PRED.items():
        def sample(r, s):
            v = r.standard_normal(s)
            flat = v.reshape(-1)
            flat[: len(SPECIAL[:3])] = SPECIAL[:3]
            return r.permutation(flat).reshape(s)
        unary_float_cases(op, ref, sample, rng)

    for op, ref in UNARY_NUMERIC.items():
        for dt, shape in (("f32", (3, 4)), ("f64", (2, 3)), ("f16", (2, 4)), ("bf16", (2, 4))):
            x = randn(rng, dt, shape, 3.0)
            add_case(op, dt, [x], tensor(dt, ref(x.f64())))
        x = tensor("f32", [INF, -INF, 0.0, 1.5, -2.25, 1e20])
        add_case(op, "inf_f32", [x], tensor("f32", ref(x.f64())))
        x = tensor("f32", [NAN, -1.0, NAN])
        add_case(op, "nan_propagates_f32", [x], tensor("f32", ref(x.f64())))
        x = tensor("f32", np.zeros((0,)))
        add_case(op, "empty_f32", [x], tensor("f32", ref(x.f64())))
        for dt, vals in INT_EDGE.items():
            if op == "neg" and dt == "u8":
                continue  # neg is defined on signed types only
            x = tensor(dt, vals)
            add_case(op, f"{dt}_edges", [x], tensor(dt, ref(x.i64())))

    # erfinv (defined by a scalar formula, f16/bf16/f32): the middle, the
    # tails up to 1 - 1e-6, the edges (+-1 -> +-inf, |x| > 1 -> NaN).
    def erfinv_sample(r, s):
        v = r.uniform(-0.999, 0.999, s)
        tail = np.sign(r.uniform(-1, 1, s)) * (1 - 10.0 ** -r.uniform(1, 6, s))
        return np.where(r.random(s) < 0.3, tail, v)
    erng = rng_for("erfinv")  # its own stream: the other ops' vectors stay as they were
    for dt, shape in (("f32", (4, 6)), ("f16", (2, 4)), ("bf16", (2, 4)), ("f64", (3, 4))):
        x = tensor(dt, erfinv_sample(erng, shape))
        # f64: Newton-refined; erf(y) - x loses digits toward +-1.
        tol = (1e-11, 1e-12) if dt == "f64" else None
        add_case("erfinv", dt, [x], tensor(dt, scipy.special.erfinv(x.f64())), tol=tol)
    x = tensor("f32", SPECIAL + [1e-30, -3e-8, 0.99999994, -0.9999999])
    add_case("erfinv", "special_values_f32", [x], tensor("f32", scipy.special.erfinv(x.f64())))
    x = tensor("f32", np.zeros((2, 0)))
    add_case("erfinv", "empty_f32", [x], tensor("f32", np.zeros((2, 0))))

    x = tensor("bool", [True, False, True])
    add_case("not", "bool", [x], tensor("bool", ~x.a))
    x = rbool(rng, (2, 3))
    add_case("not", "bool_2d", [x], tensor("bool", ~x.a))
    add_case("not", "empty", [tensor("bool", np.zeros((0, 2)))], tensor("bool", np.zeros((0, 2))))
    for dt in ("i8", "u8", "i16", "i32", "i64"):
        x = tensor(dt, INT_EDGE[dt])
        add_case("bitwise_not", dt, [x], tensor(dt, np.invert(x.a)))
    x = tensor("bool", [True, False])
    add_case("bitwise_not", "bool", [x], tensor("bool", np.invert(x.a)))


# =============================================================================
# elementwise: binary, where, clamp, cast
# =============================================================================

def int_div(a, b):
    """Integer division truncating toward zero (int64 in, int64 out)."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


# op -> (float64 reference, int64 reference or None when float-only)
BINARY_ARITH = {
    "add": (np.add, np.add),
    "sub": (np.subtract, np.subtract),
    "mul": (np.multiply, np.multiply),
    "div": (np.divide, int_div),
    "rem": (np.fmod, np.fmod),  # sign of the dividend
    "pow": (np.power, None),
    "max": (np.maximum, np.maximum),  # NaN propagates
    "min": (np.minimum, np.minimum),
    "atan2": (np.arctan2, None),
}

# Pairs exercising NaN / inf / zero in every arithmetic op.
SPECIAL_A = [NAN, 1.0, INF, INF, -INF, 0.0, 3.0, -3.0, 1.0, 2.0]
SPECIAL_B = [1.0, NAN, INF, -INF, 2.0, 0.0, 0.0, 0.0, INF, -INF]

# Integer operands per dtype: (a, b) chosen to overflow for add/sub/mul.
INT_PAIRS = {
    "i8": ([100, -100, 127, -128, 16, -128, 7, -7], [100, -100, 1, -1, 16, 3, -5, 2]),
    "u8": ([250, 0, 128, 255, 16, 3, 200, 7], [10, 1, 128, 1, 16, 200, 2, 3]),
    "i16": ([32000, -32768, 300, -300, 255, 7], [1000, -1, 300, 200, -255, -2]),
    "i32": ([2147483647, -2147483648, 65536, 46341, -7, 100], [1, -1, 65536, 46341, 2, -3]),
    "i64": ([2**63 - 1, -(2**63), 2**62, 3037000500, -9, 12], [1, -1, 2, 3037000500, 4, -5]),
}


def float_binary_inputs(rng, op, dt, sa, sb):
    if op == "pow":
        return uniform(rng, dt, sa, 0.1, 3.0), uniform(rng, dt, sb, -2.0, 2.0)
    a = randn(rng, dt, sa, 2.0)
    b = randn(rng, dt, sb, 2.0)
    if op in ("div", "rem"):
        b = tensor(dt, np.where(np.abs(b.f64()) < 0.25, 0.75, b.f64()))
    return a, b


def gen_binary():
    rng = rng_for("binary")
    for op, (fref, iref) in BINARY_ARITH.items():
        for dt, sa, sb in (("f32", (2, 3), (3,)), ("f64", (2, 1), (1, 3)), ("f16", (2, 3), (2, 3)),
                           ("bf16", (4,), ())):
            a, b = float_binary_inputs(rng, op, dt, sa, sb)
            add_case(op, f"broadcast_{dt}" if sa != sb else dt, [a, b], tensor(dt, fref(a.f64(), b.f64())))
        a, b = tensor("f32", SPECIAL_A), tensor("f32", SPECIAL_B)
        add_case(op, "special_values_f32", [a, b], tensor("f32", fref(a.f64(), b.f64())))
        a, b = float_binary_inputs(rng, op, "f32", (0, 3), (1, 3))
        add_case(op, "empty_f32", [a, b], tensor("f32", fref(a.f64(), b.f64())))
        if iref is None:
            continue
        for dt, (va, vb) in INT_PAIRS.items():
            a, b = tensor(dt, va), tensor(dt, vb)
            if op in ("div", "rem"):
                # avoid MIN / -1 here (see the dedicated case below)
                keep = ~((a.i64() == np.iinfo(NP_DTYPE[dt]).min) & (b.i64() == -1))
                a, b = tensor(dt, a.a[keep]), tensor(dt, b.a[keep])
            add_case(op, f"{dt}_wrap" if op in ("add", "sub", "mul") else dt, [a, b],
                     tensor(dt, iref(a.i64(), b.i64())))
        a, b = randint(rng, "i32", (2, 3), -50, 50), randint(rng, "i32", (3,), 1, 9)
        add_case(op, "broadcast_i32", [a, b], tensor("i32", iref(a.i64(), b.i64())))
    # pow with negative bases and integral exponents.
    a, b = tensor("f32", [-2.0, -2.0, -1.5, -8.0, 0.0]), tensor("f32", [3.0, 2.0, -1.0, 1.0 / 3.0, -1.0])
    add_case("pow", "negative_base_f32", [a, b], tensor("f32", np.power(a.f64(), b.f64())))
    # atan2 quadrants.
    a, b = tensor("f32", [1.0, 1.0, -1.0, -1.0, 0.0, 1.0, 0.0]), tensor("f32", [1.0, -1.0, -1.0, 1.0, -1.0, 0.0, 0.0])
    add_case("atan2", "quadrants_f32", [a, b], tensor("f32", np.arctan2(a.f64(), b.f64())))
    # Integer division truncates toward zero; rem takes the dividend's sign.
    a, b = tensor("i32", [7, -7, 7, -7, 0, 1, -1]), tensor("i32", [2, 2, -2, -2, 5, 3, 3])
    add_case("div", "i32_trunc", [a, b], tensor("i32", int_div(a.i64(), b.i64())))
    add_case("rem", "i32_sign_of_dividend", [a, b], tensor("i32", np.fmod(a.i64(), b.i64())))
    # MIN / -1 overflows: computed wide and wrapped like add/sub/mul (MIN).
    a, b = tensor("i8", [-128, -128]), tensor("i8", [-1, 1])
    add_case("div", "i8_min_by_neg1_wraps", [a, b], tensor("i8", int_div(a.i64(), b.i64())))
    add_case("rem", "i8_min_by_neg1", [a, b], tensor("i8", np.fmod(a.i64(), b.i64())))
    for op in ("div", "rem"):
        for dt in ("i32", "u8", "i64"):
            add_case(op, f"{dt}_by_zero_is_error", [tensor(dt, [4, 5, 6]), tensor(dt, [1, 0, 2])],
                     error="division by zero")

    gen_compare(rng)
    gen_logic(rng)
    gen_shift(rng)


COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def gen_compare(rng):
    for op, ref in COMPARE.items():
        def case(name, a, b):
            add_case(op, name, [a, b], tensor("bool", ref(a.a, b.a)))
        a = tensor("f32", [NAN, NAN, 1.0, 1.0, INF, -INF, 0.0, 2.5, -1.0])
        b = tensor("f32", [NAN, 1.0, NAN, 1.0, INF, INF, -0.0, 2.0, 3.0])
        case("special_f32", a, b)
        a = randint(rng, "i32", (2, 3), -3, 3)
        case("broadcast_i32", a, randint(rng, "i32", (3,), -3, 3))
        case("u8", tensor("u8", [0, 255, 128, 7]), tensor("u8", [255, 0, 128, 8]))
        case("i8", tensor("i8", [-128, 127, -1, 5]), tensor("i8", [127, -128, -1, 5]))
        # differ only below 2^-53 relative: must not be compared as f64
        case("i64_large", tensor("i64", [2**53 + 1, 2**62, -(2**63), 5]), tensor("i64", [2**53, 2**62 + 1, -(2**63), 5]))
        case("bool", tensor("bool", [False, False, True, True]), tensor("bool", [False, True, False, True]))
        a = tensor("f16", rng.integers(-3, 3, (2, 3)) * 0.5)
        case("f16", a, tensor("f16", rng.integers(-3, 3, (2, 3)) * 0.5))
        a = tensor("bf16", rng.integers(-3, 3, (4,)) * 0.25)
        case("scalar_bf16", a, tensor("bf16", 0.25))
        a = tensor("f64", rng.integers(-2, 2, (2, 1)))
        case("broadcast_f64", a, tensor("f64", rng.integers(-2, 2, (1, 3))))
        case("empty_f32", tensor("f32", np.zeros((0, 2))), tensor("f32", np.zeros((2,))))


def gen_logic(rng):
    logic = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
    for op, ref in logic.items():
        a, b = tensor("bool", [False, False, True, True]), tensor("bool", [False, True, False, True])
        add_case(op, "truth_table", [a, b], tensor("bool", ref(a.a, b.a)))
        a, b = rbool(rng, (2, 3)), rbool(rng, (3,))
        add_case(op, "broadcast", [a, b], tensor("bool", ref(a.a, b.a)))
        a, b = rbool(rng, (2, 2)), tensor("bool", True)
        add_case(op, "scalar", [a, b], tensor("bool", ref(a.a, b.a)))
    bitwise = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
    for op, ref in bitwise.items():
        for dt, (va, vb) in INT_PAIRS.items():
            a, b = tensor(dt, va), tensor(dt, vb)
            add_case(op, dt, [a, b], tensor(dt, ref(a.a, b.a)))
        a, b = randint(rng, "i32", (2, 3), -1000, 1000), randint(rng, "i32", (3,), -1000, 1000)
        add_case(op, "broadcast_i32", [a, b], tensor("i32", ref(a.a, b.a)))
        a, b = tensor("bool", [False, False, True, True]), tensor("bool", [False, True, False, True])
        add_case(op, "bool", [a, b], tensor("bool", ref(a.a, b.a)))


def shift_ref(va, vb, dt, left):
    """Shifts on Python ints, wrapped to the dtype's width (shr: Python's >> is arithmetic)."""
    bits = np.iinfo(NP_DTYPE[dt]).bits
    out = []
    for a, s in zip(va, vb):
        v = ((a << s) if left else (a >> s)) & ((1 << bits) - 1)
        if dt != "u8" and v >= 1 << (bits - 1):
            v -= 1 << bits
        out.append(v)
    return np.array(out, np.int64)


def gen_shift(rng):
    # Shift amounts stay in [0, bits): outside that range is backend-defined enough
    # (0 or -1) that only in-range shifts are vectors. shr is arithmetic for signed.
    cases = {
        "i8": ([1, 1, 3, -1, -128, 100, 64], [0, 7, 5, 3, 1, 2, 6]),
        "u8": ([1, 255, 3, 128, 200], [7, 4, 6, 7, 1]),
        "i16": ([1, -32768, 255, -2], [15, 15, 8, 3]),
        "i32": ([1, -1, 123456, -2147483648, 7], [31, 31, 9, 5, 0]),
        "i64": ([1, -1, 3037000500, -(2**63), 5], [63, 63, 33, 63, 2]),
    }
    for dt, (va, vb) in cases.items():
        a, b = tensor(dt, va), tensor(dt, vb)
        add_case("shl", dt, [a, b], tensor(dt, shift_ref(va, vb, dt, left=True)))
        add_case("shr", dt, [a, b], tensor(dt, shift_ref(va, vb, dt, left=False)))
    a, b = randint(rng, "i32", (2, 3), -1000, 1000), tensor("i32", 3)
    add_case("shl", "scalar_shift_i32", [a, b], tensor("i32", a.i64() << 3))
    add_case("shr", "scalar_shift_i32", [a, b], tensor("i32", a.i64() >> 3))


def gen_where_clamp_cast():
    rng = rng_for("where_clamp_cast")
    c, a, b = rbool(rng, (2, 3)), randn(rng, "f32", (3,)), tensor("f32", -1.0)
    add_case("where", "broadcast_f32", [c, a, b], tensor("f32", np.where(c.a, a.f64(), b.f64())), names=["c", "a", "b"])
    c, a, b = rbool(rng, (2, 1, 3)), randint(rng, "i64", (4, 1), -9, 9), randint(rng, "i64", (1, 3), -9, 9)
    add_case("where", "broadcast_all_i64", [c, a, b], tensor("i64", np.where(c.a, a.a, b.a)), names=["c", "a", "b"])
    c, a, b = tensor("bool", True), tensor("f16", [NAN, 1.5]), tensor("f16", [2.0, INF])
    add_case("where", "scalar_cond_f16", [c, a, b], tensor("f16", np.where(c.a, a.a, b.a)), names=["c", "a", "b"])
    c, a, b = rbool(rng, (4,)), rbool(rng, (4,)), rbool(rng, (4,))
    add_case("where", "bool", [c, a, b], tensor("bool", np.where(c.a, a.a, b.a)), names=["c", "a", "b"])
    c, a, b = rbool(rng, (3,)), randn(rng, "f64", (3,)), randn(rng, "f64", (2, 1))
    add_case("where", "f64", [c, a, b], tensor("f64", np.where(c.a, a.f64(), b.f64())), names=["c", "a", "b"])
    c = tensor("bool", np.zeros((0, 2)))
    a, b = tensor("f32", np.zeros((2,))), tensor("f32", np.zeros((0, 1)))
    add_case("where", "empty", [c, a, b], tensor("f32", np.zeros((0, 2))), names=["c", "a", "b"])

    def clamp(x, lo, hi, dt):
        y = x
        if lo is not None:
            y = np.maximum(y, lo)
        if hi is not None:
            y = np.minimum(y, hi)
        return tensor(dt, y)

    x = randn(rng, "f32", (3, 4), 2.0)
    add_case("clamp", "both_f32", [x], clamp(x.f64(), -1.0, 1.5, "f32"), {"min": -1.0, "max": 1.5})
    add_case("clamp", "min_only_f32", [x], clamp(x.f64(), 0.0, None, "f32"), {"min": 0.0})
    add_case("clamp", "max_only_f32", [x], clamp(x.f64(), None, -0.5, "f32"), {"max": -0.5})
    add_case("clamp", "no_bounds_f32", [x], clamp(x.f64(), None, None, "f32"))
    x = tensor("f32", [NAN, INF, -INF, 0.3])
    add_case("clamp", "nan_inf_f32", [x], clamp(x.f64(), -1.0, 1.0, "f32"), {"min": -1.0, "max": 1.0})
    x = randn(rng, "f64", (2, 3))
    add_case("clamp", "f64", [x], clamp(x.f64(), -0.25, 0.25, "f64"), {"min": -0.25, "max": 0.25})
    x = randn(rng, "f16", (5,))
    add_case("clamp", "f16", [x], clamp(x.f64(), -0.5, 0.5, "f16"), {"min": -0.5, "max": 0.5})
    x = randint(rng, "i32", (2, 4), -10, 10)
    add_case("clamp", "i32", [x], clamp(x.i64(), -3, 5, "i32"), {"min": -3.0, "max": 5.0})
    x = tensor("u8", [0, 5, 100, 250, 255])
    add_case("clamp", "u8", [x], clamp(x.i64(), 10, 200, "u8"), {"min": 10.0, "max": 200.0})
    x = tensor("i8", [-128, -5, 0, 127])
    add_case("clamp", "i8_min_only", [x], clamp(x.i64(), -4, None, "i8"), {"min": -4.0})

    def cast(name, x: T, to: str, want):
        # Conversions are exactly specified (truncation, wrapping, round-to-nearest-even).
        add_case("cast", name, [x], tensor(to, want), {"dtype": DT(to)}, tol=(0.0, 0.0))

    x = tensor("f32", [-2.9, -1.5, -0.5, 0.0, 0.5, 1.5, 2.9, 1e9, -3e9 / 2])
    cast("f32_to_i32_truncates", x, "i32", np.trunc(x.f64()))
    x = tensor("f32", [0.0, 0.9, 127.5, 200.2, 255.9])
    cast("f32_to_u8_truncates", x, "u8", np.trunc(x.f64()))
    x = tensor("f64", [-7.99, 3.5, 1e15 + 0.5, -(2.0**62)])
    cast("f64_to_i64_truncates", x, "i64", np.trunc(x.f64()))
    x = tensor("f16", [-3.5, 2.75, 100.0, -128.0])
    cast("f16_to_i8", x, "i8", np.trunc(x.f64()))
    x = tensor("i32", [300, -1, 255, 256, -129, 128, 0, 2147483647])
    cast("i32_to_u8_wraps", x, "u8", x.i64())
    cast("i32_to_i8_wraps", x, "i8", x.i64())
    x = tensor("i64", [2**40 + 5, -(2**33) - 1, -1])
    cast("i64_to_i32_wraps", x, "i32", x.i64())
    x = tensor("u8", [0, 127, 128, 200, 255])
    cast("u8_to_i8_wraps", x, "i8", x.i64())
    cast("u8_to_i32", x, "i32", x.i64())
    x = tensor("i8", [-128, -1, 0, 127])
    cast("i8_to_u8_wraps", x, "u8", x.i64())
    cast("i8_to_i64", x, "i64", x.i64())
    x = tensor("i32", [16777217, -16777217, 3, 2147483647])
    cast("i32_to_f32_rounds", x, "f32", x.f64())
    x = tensor("i64", [2**53 + 1, -(2**60) - 1, 42])
    cast("i64_to_f64_rounds", x, "f64", np.array([float(v) for v in x.a.tolist()]))
    # 1 + 2^-11 and 1 + 3*2^-11 are f16 ties (-> even); 65520 rounds to inf.
    x = tensor("f32", [1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 65520.0, 1e-8, -0.1, NAN, -INF, 3.14159])
    cast("f32_to_f16_rne", x, "f16", x.f64())
    # 1 + 2^-8 and 1 + 3*2^-8 are bf16 ties (-> even).
    x = tensor("f32", [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 3.4e38, -0.1, NAN, INF, 1e-40])
    cast("f32_to_bf16_rne", x, "bf16", x.f64())
    x = randn(rng, "f64", (2, 3))
    cast("f64_to_f32", x, "f32", x.f64())
    cast("f64_to_bf16", x, "bf16", x.f64())
    x = randn(rng, "f16", (4,))
    cast("f16_to_f32", x, "f32", x.f64())
    cast("f16_to_bf16", x, "bf16", x.f64())
    x = randn(rng, "bf16", (4,))
    cast("bf16_to_f32", x, "f32", x.f64())
    cast("bf16_to_f16", x, "f16", x.f64())
    x = tensor("f32", [0.0, -0.0, 0.5, -2.0, NAN, INF])
    cast("f32_to_bool", x, "bool", x.f64() != 0)
    x = tensor("i32", [0, 1, -1, 256])
    cast("i32_to_bool", x, "bool", x.i64() != 0)
    x = tensor("bool", [True, False, True])
    cast("bool_to_f32", x, "f32", x.a.astype(np.float64))
    cast("bool_to_i64", x, "i64", x.a.astype(np.int64))
    cast("bool_to_u8", x, "u8", x.a.astype(np.int64))
    x = randn(rng, "f32", (2, 2))
    cast("f32_to_f32", x, "f32", x.f64())
    cast("f32_to_f64", x, "f64", x.f64())
    x = tensor("f32", np.zeros((0, 3)))
    cast("empty_f32_to_i32", x, "i32", np.zeros((0, 3), np.int64))


# =============================================================================
# reductions and arg-reductions
# =============================================================================

def axes_tuple(axes, ndim):
    return tuple(range(ndim)) if not axes else tuple(a % ndim for a in axes)


REDUCE_FLOAT = {
    "reduce_sum": lambda x, ax, k: np.sum(x, axis=ax, keepdims=k),
    "reduce_mean": lambda x, ax, k: np.mean(x, axis=ax, keepdims=k),  # empty -> NaN
    "reduce_prod": lambda x, ax, k: np.prod(x, axis=ax, keepdims=k),
    "reduce_max": lambda x, ax, k: np.max(x, axis=ax, keepdims=k),  # NaN propagates
    "reduce_min": lambda x, ax, k: np.min(x, axis=ax, keepdims=k),
    "reduce_logsumexp": lambda x, ax, k: scipy.special.logsumexp(x, axis=ax, keepdims=k),
}
REDUCE_INT = {"reduce_sum": np.sum, "reduce_prod": np.prod, "reduce_max": np.max, "reduce_min": np.min}


def gen_reduce():
    rng = rng_for("reduce")
    layouts = [  # (name, shape, axes, keepdim)
        ("axis1", (2, 3, 4), [1], False),
        ("axes_0_2_keepdim", (2, 3, 4), [0, 2], True),
        ("all_axes", (3, 4), [], False),
        ("all_axes_keepdim", (3, 4), [], True),
        ("negative_axis", (2, 5), [-1], False),
        ("unsorted_axes", (2, 3, 2), [2, 0], False),
    ]
    for op, ref in REDUCE_FLOAT.items():
        for name, shape, axes, keep in layouts:
            x = randn(rng, "f32", shape) if op != "reduce_prod" else uniform(rng, "f32", shape, 0.5, 1.5)
            y = ref(x.f64(), axes_tuple(axes, len(shape)), keep)
            add_case(op, f"{name}_f32", [x], tensor("f32", y), {"axes": axes, "keepdim": keep}, acc=True)
        for dt in ("f64", "f16", "bf16"):
            x = randn(rng, dt, (3, 4)) if op != "reduce_prod" else uniform(rng, dt, (3, 4), 0.5, 1.5)
            add_case(op, dt, [x], tensor(dt, ref(x.f64(), (1,), False)), {"axes": [1]}, acc=True)
        x = tensor("f32", [[1.0, NAN, 2.0], [INF, 1.0, 2.0], [-INF, -1.0, 0.0]])
        add_case(op, "nan_inf_f32", [x], tensor("f32", ref(x.f64(), (1,), False)), {"axes": [1]})
        x = tensor("f32", 2.5)
        # Reducing a scalar over no axes gives a scalar (some SciPy refs return shape (1,)).
        add_case(op, "scalar_f32", [x], tensor("f32", np.asarray(ref(x.f64(), (), False)).reshape(())))
        if op not in ("reduce_max", "reduce_min"):  # empty max/min is a runtime error
            x = tensor("f32", np.zeros((2, 0)))
            add_case(op, "empty_axis_f32", [x], tensor("f32", ref(x.f64(), (1,), False)), {"axes": [1]})
    x = tensor("f32", [[-INF, -INF], [-INF, 0.0], [1000.0, 1000.0]])
    add_case("reduce_logsumexp", "minus_inf_and_large_f32", [x],
             tensor("f32", scipy.special.logsumexp(x.f64(), axis=1)), {"axes": [1]})
    for op, ref in REDUCE_INT.items():
        for dt in INTS:
            x = tensor(dt, INT_EDGE[dt][:6], (2, 3))
            add_case(op, f"{dt}", [x], tensor(dt, ref(x.i64(), axis=1)), {"axes": [1]})
        x = randint(rng, "i32", (2, 3, 2), -5, 6)
        add_case(op, "all_axes_i32", [x], tensor("i32", ref(x.i64())))
    x = tensor("i8", [[100, 100, 100], [-128, -1, 0]])
    add_case("reduce_sum", "i8_wraps", [x], tensor("i8", x.i64().sum(axis=1)), {"axes": [-1]})
    x = tensor("i32", [[65536, 65536], [46341, 46341]])
    add_case("reduce_prod", "i32_wraps", [x], tensor("i32", x.i64().prod(axis=1)), {"axes": [1]})
    x = tensor("i32", np.zeros((0, 3)))
    add_case("reduce_sum", "empty_i32", [x], tensor("i32", np.zeros(3, np.int64)), {"axes": [0]})
    add_case("reduce_prod", "empty_i32", [x], tensor("i32", np.ones(3, np.int64)), {"axes": [0]})

    for correction in (0, 1, 2):
        x = randn(rng, "f32", (3, 5))
        y = np.var(x.f64(), axis=1, ddof=correction)
        add_case("reduce_variance", f"correction{correction}_f32", [x], tensor("f32", y),
                 {"axes": [1], "keepdim": False, "correction": correction}, acc=True)
    x = randn(rng, "f32", (2, 3, 4), 3.0)
    add_case("reduce_variance", "all_axes_keepdim_f32", [x], tensor("f32", np.var(x.f64(), keepdims=True)),
             {"axes": [], "keepdim": True}, acc=True)
    x = randn(rng, "f32", (2, 3, 4))
    add_case("reduce_variance", "axes_neg_f32", [x], tensor("f32", np.var(x.f64(), axis=(0, 2), ddof=1)),
             {"axes": [-1, 0], "correction": 1}, acc=True)
    for dt in ("f64", "f16", "bf16"):
        x = randn(rng, dt, (2, 6))
        add_case("reduce_variance", dt, [x], tensor(dt, np.var(x.f64(), axis=1)), {"axes": [1]}, acc=True)
    x = tensor("f32", [[1.0, NAN, 2.0], [1e3 + 1, 1e3 + 2, 1e3 + 3]])
    add_case("reduce_variance", "nan_and_offset_f32", [x], tensor("f32", np.var(x.f64(), axis=1)), {"axes": [1]})

    for op, ref in (("reduce_any", np.any), ("reduce_all", np.all)):
        x = tensor("bool", [[False, False, False], [False, True, False], [True, True, True]])
        add_case(op, "rows", [x], tensor("bool", ref(x.a, axis=1)), {"axes": [1]})
        add_case(op, "cols_keepdim", [x], tensor("bool", ref(x.a, axis=0, keepdims=True)), {"axes": [0], "keepdim": True})
        add_case(op, "all_axes", [x], tensor("bool", ref(x.a)))
        x = rbool(rng, (2, 3, 2))
        add_case(op, "neg_axis", [x], tensor("bool", ref(x.a, axis=-1)), {"axes": [-1]})
        x = tensor("bool", np.zeros((2, 0), bool))
        add_case(op, "empty", [x], tensor("bool", ref(x.a, axis=1)), {"axes": [1]})

    for op, ref in (("argmax", np.argmax), ("argmin", np.argmin)):
        def arg(x, axis, keep):
            r = ref(x, axis=axis)
            return np.expand_dims(r, axis) if keep else r
        x = randn(rng, "f32", (3, 4))
        add_case(op, "last_axis_f32", [x], tensor("i64", arg(x.f64(), -1, False)))
        add_case(op, "axis0_keepdim_f32", [x], tensor("i64", arg(x.f64(), 0, True)), {"axis": 0, "keepdim": True})
        x = tensor("f32", [[1.0, 3.0, 3.0, -1.0], [-1.0, -1.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
        add_case(op, "ties_first_f32", [x], tensor("i64", arg(x.f64(), 1, False)), {"axis": 1})
        # NaN counts as maximal for argmax and minimal for argmin: the first NaN wins.
        x = tensor("f32", [[1.0, NAN, 5.0, NAN], [-INF, INF, 0.0, -1.0]])
        add_case(op, "nan_and_inf_f32", [x], tensor("i64", arg(x.f64(), 1, False)), {"axis": -1})
        for dt in ("i8", "u8", "i64", "f64", "f16", "bf16"):
            x = tensor(dt, INT_EDGE["i8" if dt != "u8" else "u8"][:6], (2, 3)) if dt in INTS else randn(rng, dt, (2, 3))
            add_case(op, dt, [x], tensor("i64", arg(x.a.astype(np.float64), 1, False)), {"axis": 1})
        x = randn(rng, "f32", (2, 3, 2))
        add_case(op, "axis_neg2_f32", [x], tensor("i64", arg(x.f64(), -2, False)), {"axis": -2})


# =============================================================================
# linalg: matmul, dot_general, convolutions, pooling, recurrent cells
# =============================================================================

def wrap_matmul(a: T, b: T, dt: str) -> T:
    if dt in INTS:
        return tensor(dt, np.matmul(a.i64(), b.i64()))  # int64 wraps like the narrow type mod 2^bits
    return tensor(dt, np.matmul(a.f64(), b.f64()))


def gen_matmul():
    rng = rng_for("matmul")
    shapes = [("2d", (3, 4), (4, 5)), ("batch", (2, 3, 4), (2, 4, 2)), ("batch_broadcast", (2, 1, 3, 4), (3, 4, 2)),
              ("vec_mat", (4,), (4, 3)), ("mat_vec", (3, 4), (4,)), ("vec_vec", (4,), (4,)),
              ("batch_vec", (2, 3, 4), (4,)), ("k_zero", (2, 0), (0, 3)), ("m_zero", (0, 4), (4, 3))]
    for name, sa, sb in shapes:
        a, b = randn(rng, "f32", sa), randn(rng, "f32", sb)
        add_case("matmul", f"{name}_f32", [a, b], wrap_matmul(a, b, "f32"), acc=True)
    for dt in ("f64", "f16", "bf16"):
        a, b = randn(rng, dt, (2, 3, 4)), randn(rng, dt, (4, 5))
        add_case("matmul", dt, [a, b], wrap_matmul(a, b, dt), acc=True)
    for dt in ("i32", "i64", "u8"):
        a, b = randint(rng, dt, (3, 4), 0 if dt == "u8" else -20, 20), randint(rng, dt, (4, 2), 0 if dt == "u8" else -20, 20)
        add_case("matmul", dt, [a, b], wrap_matmul(a, b, dt))
    a, b = tensor("i8", [[100, 100], [-128, 1]]), tensor("i8", [[2, 1], [1, 1]])
    add_case("matmul", "i8_wraps", [a, b], wrap_matmul(a, b, "i8"))

    def dg(name, a: T, b: T, lb, rb, lc, rc, dt="f32"):
        attrs = {"lhs_batch": lb, "rhs_batch": rb, "lhs_contract": lc, "rhs_contract": rc}
        ra, rb_ = a.a.ndim, b.a.ndim
        lb_, rbn, lcn, rcn = [[x % r for x in v] for v, r in ((lb, ra), (rb, rb_), (lc, ra), (rc, rb_))]
        # einsum subscripts: batch axes share letters, contracted pairs share letters.
        letters = iter("abcdefghijklmnopqrstuvwxyz")
        sa, sb = [None] * ra, [None] * rb_
        for i, j in zip(lb_, rbn):
            sa[i] = sb[j] = next(letters)
        for i, j in zip(lcn, rcn):
            sa[i] = sb[j] = next(letters)
        for v in (sa, sb):
            for i in range(len(v)):
                v[i] = v[i] or next(letters)
        out = [sa[i] for i in lb_] + [sa[i] for i in range(ra) if i not in lb_ + lcn] + \
              [sb[i] for i in range(rb_) if i not in rbn + rcn]
        spec = f"{''.join(sa)},{''.join(sb)}->{''.join(out)}"
        src = (a.i64(), b.i64()) if dt in INTS else (a.f64(), b.f64())
        add_case("dot_general", name, [a, b], tensor(dt, np.einsum(spec, *src)), attrs, acc=True)

    dg("batched_matmul", randn(rng, "f32", (2, 3, 4)), randn(rng, "f32", (2, 4, 5)), [0], [0], [2], [1])
    dg("no_batch_transposed_rhs", randn(rng, "f32", (3, 4)), randn(rng, "f32", (5, 4)), [], [], [1], [1])
    dg("two_contracting", randn(rng, "f32", (2, 3, 4)), randn(rng, "f32", (4, 5, 3)), [], [], [1, 2], [2, 0])
    dg("batch_not_leading", randn(rng, "f32", (3, 2, 4)), randn(rng, "f32", (4, 2, 5)), [1], [1], [2], [0])
    dg("negative_axes", randn(rng, "f32", (2, 3, 4)), randn(rng, "f32", (2, 5, 4)), [-3], [0], [-1], [-1])
    dg("outer_product", randn(rng, "f32", (3,)), randn(rng, "f32", (2, 2)), [], [], [], [])
    dg("two_batch_f64", randn(rng, "f64", (2, 2, 3, 2)), randn(rng, "f64", (2, 2, 3)), [0, 1], [0, 1], [2], [2], "f64")
    dg("i32", randint(rng, "i32", (2, 3), -9, 9), randint(rng, "i32", (3, 2), -9, 9), [], [], [1], [0], "i32")

    gen_conv(rng)
    gen_pool(rng)
    gen_cells(rng)


def conv_attrs_onnx(attrs: dict) -> dict:
    """Our conv attributes -> ONNX Conv/ConvTranspose attributes (empty = ONNX default)."""
    m = {"strides": "strides", "pads": "pads", "dilations": "dilations", "groups": "group",
         "output_padding": "output_padding", "kernel": "kernel_shape",
         "count_include_pad": "count_include_pad"}
    out = {}
    for k, v in attrs.items():
        if isinstance(v, list) and not v:
            continue
        out[m[k]] = int(v) if isinstance(v, bool) else v
    return out


def grouped_conv_transpose(inputs: list[np.ndarray], attrs: dict) -> np.ndarray:
    """ConvTranspose with groups > 1. ONNX's reference evaluator mishandles
    groups (onnx 1.22), so run it per group (group=1) in float64, concatenate
    the channels, and cross-check the whole op against ONNX Runtime."""
    g = attrs["groups"]
    x, w = inputs[0], inputs[1]
    one = conv_attrs_onnx({k: v for k, v in attrs.items() if k != "groups"})
    parts = [onnx_ref("ConvTranspose", [xg, wg], one)[0]
             for xg, wg in zip(np.split(x, g, axis=1), np.split(w, g, axis=0))]
    y = np.concatenate(parts, axis=1)
    if len(inputs) == 3:
        y = y + inputs[2].reshape((1, -1) + (1,) * (x.ndim - 2))
    rt = onnx_ort("ConvTranspose", [a.astype(np.float32) for a in inputs], conv_attrs_onnx(attrs))[0]
    check_close("grouped ConvTranspose vs ONNX Runtime", rt, y)
    return y


def gen_conv(rng):
    def conv_case(op, name, xs, ws, bias, attrs, dt="f32"):
        x, w = randn(rng, dt, xs), randn(rng, dt, ws, 0.5)
        inputs = [x, w] + ([randn(rng, dt, (bias,))] if bias else [])
        onnx_op = "Conv" if op == "conv" else "ConvTranspose"
        if op == "conv_transpose" and attrs.get("groups", 1) > 1:
            y = grouped_conv_transpose([t.f64() for t in inputs], attrs)
        else:
            y = onnx_both(onnx_op, [t.f64() for t in inputs], conv_attrs_onnx(attrs))[0]
        add_case(op, name, inputs, tensor(dt, y), attrs, acc=True, names=["x", "w", "b"][: len(inputs)])

    conv_case("conv", "1d_stride_pad_bias", (1, 2, 7), (3, 2, 3), 3, {"strides": [2], "pads": [1, 2]})
    conv_case("conv", "2d_defaults", (2, 3, 5, 5), (4, 3, 3, 3), 0, {})
    conv_case("conv", "2d_asym_pads_strides_dilations_bias", (1, 2, 6, 7), (2, 2, 3, 2), 2,
              {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]})
    conv_case("conv", "2d_depthwise", (1, 4, 5, 5), (4, 1, 3, 3), 4, {"pads": [1, 1, 1, 1], "groups": 4})
    conv_case("conv", "2d_groups2", (1, 4, 4, 4), (6, 2, 2, 2), 0, {"groups": 2})
    conv_case("conv", "3d", (1, 2, 4, 4, 4), (2, 2, 2, 2, 2), 2,
              {"strides": [1, 2, 1], "pads": [0, 1, 0, 0, 1, 1]})
    conv_case("conv", "2d_f64", (1, 2, 4, 4), (3, 2, 3, 3), 3, {"pads": [1, 1, 1, 1]}, "f64")
    conv_case("conv", "2d_f16", (1, 2, 4, 4), (2, 2, 2, 2), 2, {"strides": [2, 2]}, "f16")
    conv_case("conv", "1d_kernel_1", (2, 3, 4), (2, 3, 1), 0, {})

    conv_case("conv_transpose", "1d_stride_output_padding", (1, 2, 4), (2, 3, 3), 0,
              {"strides": [2], "pads": [1, 0], "output_padding": [1]})
    conv_case("conv_transpose", "2d_stride_pads_bias", (1, 2, 3, 3), (2, 2, 3, 3), 2,
              {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]})
    conv_case("conv_transpose", "2d_groups_dilations", (1, 4, 3, 3), (4, 1, 2, 2), 0,
              {"groups": 2, "dilations": [2, 1]})
    conv_case("conv_transpose", "2d_defaults", (2, 2, 3, 2), (2, 3, 2, 2), 0, {})
    conv_case("conv_transpose", "3d", (1, 1, 2, 2, 2), (1, 2, 2, 2, 2), 2, {"strides": [2, 1, 1]})
    conv_case("conv_transpose", "2d_f64", (1, 2, 3, 3), (2, 1, 3, 3), 1,
              {"strides": [2, 2], "pads": [0, 1, 1, 0]}, "f64")
    conv_case("conv_transpose", "2d_f16", (1, 2, 2, 2), (2, 2, 2, 2), 0, {"strides": [2, 2]}, "f16")


def pool_ref(x: np.ndarray, op: str, attrs: dict) -> np.ndarray:
    """ONNX MaxPool / AveragePool (ceil_mode=0) by explicit windows in float64:
    pads = [begins..., ends...]; padding never wins a max; an average divides
    by the whole kernel when count_include_pad, else by the real elements."""
    kernel = attrs["kernel"]
    n = len(kernel)
    strides = attrs.get("strides") or [1] * n
    dil = attrs.get("dilations") or [1] * n
    pads = attrs.get("pads") or [0] * (2 * n)
    sp = x.shape[2:]
    out_dims = [(sp[i] + pads[i] + pads[n + i] - (dil[i] * (kernel[i] - 1) + 1)) // strides[i] + 1 for i in range(n)]
    out = np.empty(x.shape[:2] + tuple(out_dims))
    for o in np.ndindex(*out_dims):
        axes = [[p for p in (o[i] * strides[i] - pads[i] + k * dil[i] for k in range(kernel[i])) if 0 <= p < sp[i]]
                for i in range(n)]
        win = x[(slice(None), slice(None)) + np.ix_(*axes)].reshape(x.shape[:2] + (-1,))
        if op == "max_pool":
            out[(slice(None), slice(None)) + o] = win.max(axis=-1)
        else:
            count = math.prod(kernel) if attrs.get("count_include_pad") else win.shape[-1]
            out[(slice(None), slice(None)) + o] = win.sum(axis=-1) / count
    return out


def gen_pool(rng):
    def pool_case(op, name, xs, attrs, dt="f32"):
        x = randn(rng, dt, xs, 2.0) if dt not in INTS else randint(rng, dt, xs, -100 if dt == "i8" else 0, 100)
        y = pool_ref(x.f64(), op, attrs)
        # ONNX Runtime is the external reference (float32; exact for these integers).
        # ONNX's reference evaluator misreads asymmetric pads, so it is not used here.
        rt = onnx_ort("MaxPool" if op == "max_pool" else "AveragePool", [x.f64().astype(np.float32)],
                      conv_attrs_onnx(attrs))[0]
        check_close(f"{op} {name} vs ONNX Runtime", rt, y)
        add_case(op, name, [x], tensor(dt, y.astype(np.int64) if dt in INTS else y), attrs, acc=True)

    # Negative inputs next to padding show that padding never wins.
    pool_case("max_pool", "2d_stride_pad", (1, 2, 5, 5), {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    pool_case("max_pool", "2d_defaults", (2, 1, 4, 3), {"kernel": [2, 2]})
    pool_case("max_pool", "1d_dilation", (1, 2, 8), {"kernel": [2], "dilations": [2], "pads": [1, 0]})
    pool_case("max_pool", "2d_asym", (1, 1, 5, 6), {"kernel": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 1],
                                                    "dilations": [2, 1]})
    pool_case("max_pool", "3d", (1, 2, 3, 4, 4), {"kernel": [2, 2, 2], "strides": [1, 2, 2]})
    pool_case("max_pool", "2d_f64", (1, 2, 4, 4), {"kernel": [2, 2], "strides": [2, 2]}, "f64")
    pool_case("max_pool", "2d_f16", (1, 1, 4, 4), {"kernel": [3, 3], "pads": [1, 1, 1, 1]}, "f16")
    pool_case("max_pool", "2d_i8", (1, 2, 4, 4), {"kernel": [2, 2], "pads": [1, 1, 0, 0]}, "i8")
    pool_case("max_pool", "1d_u8", (2, 1, 6), {"kernel": [3], "strides": [3]}, "u8")
    pool_case("max_pool", "2d_i32", (1, 1, 3, 3), {"kernel": [2, 2]}, "i32")

    pool_case("avg_pool", "2d_pad_exclude", (1, 2, 5, 5), {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    pool_case("avg_pool", "2d_pad_include", (1, 2, 5, 5), {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                          "count_include_pad": True})
    pool_case("avg_pool", "2d_asym_pad_include", (1, 1, 4, 5), {"kernel": [2, 3], "pads": [1, 0, 0, 2],
                                                               "count_include_pad": True})
    pool_case("avg_pool", "1d_defaults", (2, 2, 6), {"kernel": [3]})
    pool_case("avg_pool", "3d_pad", (1, 1, 3, 3, 4), {"kernel": [2, 2, 2], "pads": [1, 0, 0, 0, 1, 1]})
    pool_case("avg_pool", "2d_f64", (1, 2, 4, 4), {"kernel": [2, 2], "strides": [2, 1]}, "f64")
    pool_case("avg_pool", "2d_f16", (1, 1, 4, 4), {"kernel": [2, 2], "pads": [1, 1, 1, 1]}, "f16")

    for dt, shape in (("f32", (2, 3, 4, 5)), ("f32", (1, 2, 6)), ("f32", (1, 2, 2, 3, 2)), ("f64", (2, 2, 3, 3)),
                      ("f16", (1, 2, 4, 4)), ("bf16", (1, 2, 3))):
        x = randn(rng, dt, shape)
        name = f"{len(shape) - 2}d_{dt}"
        spatial = tuple(range(2, len(shape)))
        # NumPy in float64, checked against ONNX Runtime (ONNX's reference
        # evaluator drops an axis of 1-D GlobalMaxPool).
        y = x.f64().mean(axis=spatial, keepdims=True)
        check_close("GlobalAveragePool", onnx_ort("GlobalAveragePool", [x.f64().astype(np.float32)])[0], y)
        add_case("global_avg_pool", name, [x], tensor(dt, y), acc=True)
        y = x.f64().max(axis=spatial, keepdims=True)
        check_close("GlobalMaxPool", onnx_ort("GlobalMaxPool", [x.f64().astype(np.float32)])[0], y)
        add_case("global_max_pool", name, [x], tensor(dt, y))
    for dt in ("i32", "u8", "i8"):
        x = randint(rng, dt, (2, 2, 3, 2), 0 if dt == "u8" else -100, 100)
        y = x.i64().max(axis=(2, 3), keepdims=True)
        add_case("global_max_pool", f"2d_{dt}", [x], tensor(dt, y))


def sigmoid(x):
    return scipy.special.expit(x)


def rnn_ref(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity):
    pre = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    return np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0)


def lstm_ref(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """PyTorch LSTMCell; gates stacked i, f, g, o."""
    gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, g, o = np.split(gates, 4, axis=1)
    c2 = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c2), c2


def gru_ref(x, h, w_ih, w_hh, b_ih, b_hh):
    """PyTorch GRUCell; gates stacked r, z, n."""
    gi = x @ w_ih.T + b_ih
    gh = h @ w_hh.T + b_hh
    i_r, i_z, i_n = np.split(gi, 3, axis=1)
    h_r, h_z, h_n = np.split(gh, 3, axis=1)
    r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def gen_cells(rng):
    """The cells against PyTorch's formulas (float64 NumPy), cross-checked
    with ONNX Runtime's RNN/LSTM/GRU (gates reordered, one time step)."""
    B, I, H = 2, 3, 4
    names6 = ["x", "h", "w_ih", "w_hh", "b_ih", "b_hh"]
    for dt in ("f32", "f64", "f16"):
        for nl in ("tanh", "relu"):
            if dt == "f16" and nl == "relu":
                continue
            ins = [randn(rng, dt, s, 0.6) for s in ((B, I), (B, H), (H, I), (H, H), (H,), (H,))]
            v = [t.f64() for t in ins]
            y = rnn_ref(*v, nl)
            ort_y = onnx_ort("RNN", [v[0][None].astype(np.float32), v[2][None].astype(np.float32),
                                     v[3][None].astype(np.float32),
                                     np.concatenate([v[4], v[5]])[None].astype(np.float32), None,
                                     v[1][None].astype(np.float32)],
                             {"hidden_size": H, "activations": ["Tanh" if nl == "tanh" else "Relu"]}, nout=2)[1][0]
            check_close("rnn_cell vs ONNX RNN", ort_y, y)
            add_case("rnn_cell", f"{nl}_{dt}", ins, tensor(dt, y), {"nonlinearity": nl}, acc=True, names=names6)

        ins = [randn(rng, dt, s, 0.6) for s in ((B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,), (4 * H,))]
        v = [t.f64() for t in ins]
        h2, c2 = lstm_ref(*v)
        # ONNX LSTM gate order is i, o, f, c; PyTorch's is i, f, g, o.
        reorder = lambda m: np.concatenate([np.split(m, 4)[k] for k in (0, 3, 1, 2)])
        oy = onnx_ort("LSTM", [a.astype(np.float32) for a in (
            v[0][None], reorder(v[3])[None], reorder(v[4])[None],
            np.concatenate([reorder(v[5]), reorder(v[6])])[None])] + [None] +
            [v[1][None].astype(np.float32), v[2][None].astype(np.float32)], {"hidden_size": H}, nout=3)
        check_close("lstm_cell h vs ONNX LSTM", oy[1][0], h2)
        check_close("lstm_cell c vs ONNX LSTM", oy[2][0], c2)
        add_case("lstm_cell", dt, ins, [tensor(dt, h2), tensor(dt, c2)], acc=True,
                 names=["x", "h", "c", "w_ih", "w_hh", "b_ih", "b_hh"])

        ins = [randn(rng, dt, s, 0.6) for s in ((B, I), (B, H), (3 * H, I), (3 * H, H), (3 * H,), (3 * H,))]
        v = [t.f64() for t in ins]
        y = gru_ref(*v)
        # ONNX GRU gate order is z, r, h; linear_before_reset=1 is PyTorch's formula.
        reorder = lambda m: np.concatenate([np.split(m, 3)[k] for k in (1, 0, 2)])
        oy = onnx_ort("GRU", [a.astype(np.float32) for a in (
            v[0][None], reorder(v[2])[None], reorder(v[3])[None],
            np.concatenate([reorder(v[4]), reorder(v[5])])[None])] + [None, v[1][None].astype(np.float32)],
            {"hidden_size": H, "linear_before_reset": 1}, nout=2)
        check_close("gru_cell vs ONNX GRU", oy[1][0], y)
        add_case("gru_cell", dt, ins, tensor(dt, y), acc=True, names=names6)
    # batch of one, hidden 1
    ins = [randn(rng, "f32", s) for s in ((1, 2), (1, 1), (1, 2), (1, 1), (1,), (1,))]
    add_case("rnn_cell", "hidden1_default_tanh_f32", ins, tensor("f32", rnn_ref(*[t.f64() for t in ins], "tanh")),
             acc=True, names=names6)


# =============================================================================
# shape and movement ops
# =============================================================================

def same_as(x: T, arr) -> T:
    """A tensor of x's dtype holding `arr` (already of that dtype)."""
    return T(x.dtype, np.array(np.asarray(arr, dtype=x.a.dtype)))


def sample_of(rng, dt, shape) -> T:
    if dt == "bool":
        return rbool(rng, shape)
    if dt in INTS:
        return randint(rng, dt, shape, 0 if dt == "u8" else -50, 50)
    if dt == "c64":
        return tensor("c64", rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    return randn(rng, dt, shape)


def gen_shape():
    rng = rng_for("shape")

    def mv(op, name, x, fn, attrs):
        add_case(op, name, [x], same_as(x, fn(x.a)), attrs)

    x = sample_of(rng, "f32", (2, 3, 4))
    mv("reshape", "f32", x, lambda a: a.reshape(4, 6), {"shape": [4, 6]})
    mv("reshape", "infer_f32", x, lambda a: a.reshape(6, -1), {"shape": [6, -1]})
    mv("reshape", "to_rank1_c64", sample_of(rng, "c64", (2, 3)), lambda a: a.reshape(6), {"shape": [-1]})
    mv("reshape", "to_scalar_i64", sample_of(rng, "i64", (1, 1)), lambda a: a.reshape(()), {"shape": []})
    mv("reshape", "from_scalar_bool", sample_of(rng, "bool", ()), lambda a: a.reshape(1, 1, 1), {"shape": [1, 1, 1]})
    mv("reshape", "empty_f16", sample_of(rng, "f16", (0, 3)), lambda a: a.reshape(3, 0, 2), {"shape": [3, 0, 2]})

    for dt, shape, perm in (("f32", (2, 3, 4), [2, 0, 1]), ("c64", (2, 3), [1, 0]), ("i8", (2, 1, 3, 2), [3, 1, 0, 2]),
                            ("bf16", (2, 3, 2), [-1, 0, 1]), ("bool", (2, 3), [0, 1])):
        x = sample_of(rng, dt, shape)
        mv("permute", f"{dt}_rank{len(shape)}", x, lambda a: np.transpose(a, [p % len(shape) for p in perm]),
           {"perm": perm})

    for dt, shape, to in (("f32", (3,), [2, 3]), ("f32", (2, 1), [3, 2, 4]), ("i32", (), [2, 2]),
                          ("bool", (1, 3), [2, 3]), ("f16", (2, 1, 3), [2, 0, 3]), ("c64", (1,), [3])):
        x = sample_of(rng, dt, shape)
        mv("broadcast", f"{dt}_{'x'.join(map(str, shape)) or 'scalar'}_to_{'x'.join(map(str, to))}", x,
           lambda a: np.broadcast_to(a, to), {"shape": to})

    x = sample_of(rng, "f32", (3, 5))
    mv("narrow", "axis1_f32", x, lambda a: a[:, 1:3], {"axis": 1, "start": 1, "len": 2})
    mv("narrow", "neg_axis_f32", x, lambda a: a[:, 4:5], {"axis": -1, "start": 4, "len": 1})
    mv("narrow", "len0_f32", x, lambda a: a[3:3], {"axis": 0, "start": 3, "len": 0})
    x = sample_of(rng, "i32", (4, 2, 3))
    mv("narrow", "axis0_i32", x, lambda a: a[1:4], {"axis": 0, "start": 1, "len": 3})
    x = sample_of(rng, "c64", (2, 4))
    mv("narrow", "c64", x, lambda a: a[:, 0:2], {"axis": 1, "start": 0, "len": 2})

    gen_slice(rng)

    def concat(name, xs, axis):
        y = np.concatenate([x.a for x in xs], axis=axis)
        add_case("concat", name, xs, same_as(xs[0], y), {"axis": axis})

    concat("axis0_f32", [sample_of(rng, "f32", (2, 3)), sample_of(rng, "f32", (1, 3))], 0)
    concat("neg_axis_three_f32", [sample_of(rng, "f32", (2, 1)), sample_of(rng, "f32", (2, 3)),
                                  sample_of(rng, "f32", (2, 2))], -1)
    concat("with_empty_i32", [sample_of(rng, "i32", (2, 0, 2)), sample_of(rng, "i32", (2, 2, 2))], 1)
    concat("single_bf16", [sample_of(rng, "bf16", (3,))], 0)
    concat("c64", [sample_of(rng, "c64", (1, 2)), sample_of(rng, "c64", (2, 2))], 0)
    concat("bool", [sample_of(rng, "bool", (2,)), sample_of(rng, "bool", (3,))], 0)

    def split(name, x, axis, sizes):
        parts = np.split(x.a, np.cumsum(sizes)[:-1], axis=axis)
        add_case("split", name, [x], [same_as(x, p) for p in parts], {"axis": axis, "sizes": sizes})

    split("axis1_f32", sample_of(rng, "f32", (2, 4)), 1, [1, 2, 1])
    split("neg_axis_i64", sample_of(rng, "i64", (2, 3, 4)), -1, [2, 2])
    split("zero_size_piece_f32", sample_of(rng, "f32", (3, 2)), 0, [0, 3])
    split("single_piece_f16", sample_of(rng, "f16", (2, 2)), 0, [2])
    split("c64", sample_of(rng, "c64", (4,)), 0, [3, 1])

    def pad(name, x, pads, mode="constant", value=0.0):
        r = x.a.ndim
        width = [(pads[i], pads[r + i]) for i in range(r)]
        if mode == "constant":
            y = np.pad(x.a, width, mode="constant", constant_values=cast_values(value, x.dtype))
        else:
            y = np.pad(x.a, width, mode=mode)
        attrs = {"pads": pads}
        if mode != "constant":
            attrs["mode"] = mode
        if value != 0.0:
            attrs["value"] = value
        add_case("pad", name, [x], same_as(x, y), attrs)

    x = sample_of(rng, "f32", (2, 3))
    pad("constant_zero_f32", x, [1, 0, 0, 2])
    pad("constant_value_f32", x, [0, 1, 2, 1], value=-1.5)
    pad("reflect_f32", x, [1, 2, 1, 2], "reflect")
    pad("edge_f32", x, [2, 1, 0, 3], "edge")
    pad("zero_pads_f32", x, [0, 0, 0, 0])
    x = sample_of(rng, "i32", (2, 2, 3))
    pad("constant_i32", x, [0, 1, 1, 1, 0, 1], value=7.0)
    pad("reflect_3d_i32", x, [1, 1, 2, 0, 0, 1], "reflect")
    pad("edge_f16", sample_of(rng, "f16", (3,)), [2, 2], "edge")
    pad("constant_nan_f32", sample_of(rng, "f32", (2,)), [1, 1], value=NAN)
    pad("empty_axis_constant_f32", sample_of(rng, "f32", (0, 2)), [1, 0, 1, 0], value=2.0)
    pad("c64", sample_of(rng, "c64", (2,)), [1, 1])

    x = sample_of(rng, "f32", (1, 3, 1, 2))
    mv("squeeze", "all_f32", x, lambda a: a.squeeze(), {})
    mv("squeeze", "axis0_f32", x, lambda a: a.squeeze(0), {"axes": [0]})
    mv("squeeze", "neg_axis_f32", x, lambda a: a.squeeze(-2), {"axes": [-2]})
    mv("squeeze", "to_scalar_i8", sample_of(rng, "i8", (1, 1)), lambda a: a.squeeze(), {"axes": []})
    mv("squeeze", "nothing_c64", sample_of(rng, "c64", (2, 3)), lambda a: a, {})

    x = sample_of(rng, "f32", (2, 3))
    mv("unsqueeze", "front_f32", x, lambda a: np.expand_dims(a, 0), {"axes": [0]})
    mv("unsqueeze", "two_axes_f32", x, lambda a: np.expand_dims(a, (0, 3)), {"axes": [0, 3]})
    mv("unsqueeze", "neg_axes_f32", x, lambda a: np.expand_dims(a, (1, 3)), {"axes": [1, -1]})
    mv("unsqueeze", "scalar_bool", sample_of(rng, "bool", ()), lambda a: np.expand_dims(a, 0), {"axes": [0]})
    mv("unsqueeze", "u8", sample_of(rng, "u8", (3,)), lambda a: np.expand_dims(a, 1), {"axes": [1]})

    x = sample_of(rng, "f32", (2, 3, 4))
    mv("flip", "axis0_f32", x, lambda a: np.flip(a, 0), {"axes": [0]})
    mv("flip", "two_axes_f32", x, lambda a: np.flip(a, (0, 2)), {"axes": [0, 2]})
    mv("flip", "neg_axis_c64", sample_of(rng, "c64", (2, 3)), lambda a: np.flip(a, -1), {"axes": [-1]})
    mv("flip", "no_axes_i32", sample_of(rng, "i32", (3,)), lambda a: a, {"axes": []})
    mv("flip", "bool", sample_of(rng, "bool", (4,)), lambda a: a[::-1], {"axes": [0]})

    x = sample_of(rng, "f32", (3, 4))
    mv("roll", "axis0_f32", x, lambda a: np.roll(a, 1, 0), {"shifts": [1], "axes": [0]})
    mv("roll", "two_axes_f32", x, lambda a: np.roll(a, (-2, 1), (1, 0)), {"shifts": [-2, 1], "axes": [1, 0]})
    mv("roll", "shift_beyond_size_f32", x, lambda a: np.roll(a, 7, -1), {"shifts": [7], "axes": [-1]})
    mv("roll", "negative_large_i64", sample_of(rng, "i64", (5,)), lambda a: np.roll(a, -12, 0), {"shifts": [-12], "axes": [0]})
    mv("roll", "f16", sample_of(rng, "f16", (2, 3)), lambda a: np.roll(a, 2, 1), {"shifts": [2], "axes": [1]})
    mv("roll", "c64", sample_of(rng, "c64", (4,)), lambda a: np.roll(a, 1, 0), {"shifts": [1], "axes": [0]})

    mv("tile", "rows_f32", sample_of(rng, "f32", (2, 3)), lambda a: np.tile(a, (2, 1)), {"repeats": [2, 1]})
    mv("tile", "cols_f32", sample_of(rng, "f32", (2, 3)), lambda a: np.tile(a, (1, 3)), {"repeats": [1, 3]})
    mv("tile", "3d_i64", sample_of(rng, "i64", (1, 2, 2)), lambda a: np.tile(a, (2, 2, 1)), {"repeats": [2, 2, 1]})
    mv("tile", "zero_repeat_f32", sample_of(rng, "f32", (2, 2)), lambda a: np.tile(a, (0, 1)), {"repeats": [0, 1]})
    mv("tile", "bool", sample_of(rng, "bool", (3,)), lambda a: np.tile(a, 2), {"repeats": [2]})
    mv("tile", "c64", sample_of(rng, "c64", (2,)), lambda a: np.tile(a, 3), {"repeats": [3]})


def gen_slice(rng):
    """ONNX Slice semantics, computed by ONNX's reference evaluator (float64)
    and cross-checked with ONNX Runtime."""
    def slice_case(name, x: T, starts, ends, axes=(), steps=()):
        axes_in = list(axes) if axes else (list(range(len(starts))) if steps else [])
        ins = [np.array(starts, np.int64), np.array(ends, np.int64)]
        if axes_in or steps:
            ins.append(np.array(axes_in, np.int64))
        if steps:
            ins.append(np.array(steps, np.int64))
        want = onnx_move("Slice", x, ins)
        attrs = {"starts": list(starts), "ends": list(ends)}
        if axes:
            attrs["axes"] = list(axes)
        if steps:
            attrs["steps"] = list(steps)
        add_case("slice", name, [x], want, attrs)

    x = sample_of(rng, "f32", (3, 5))
    slice_case("one_axis_f32", x, [1], [3], [1])
    slice_case("default_axes_f32", x, [0, 1], [2, 4])
    slice_case("negative_steps_f32", x, [4, -100], [-100, 3], [1, 0], [-2, 1])
    slice_case("clamped_bounds_f32", x, [-10], [100], [-1])
    slice_case("reverse_all_f32", x, [-1], [-1000], [0], [-1])
    slice_case("empty_result_f32", x, [3], [1], [1])
    slice_case("default_axes_with_steps_f32", x, [0, 4], [3, 0], [], [2, -2])
    x = sample_of(rng, "i64", (2, 3, 4))
    slice_case("3d_mixed_i64", x, [1, -1, 0], [2, 0, 4], [0, -1, 1], [1, -1, 2])
    x = sample_of(rng, "c64", (6,))
    slice_case("step3_c64", x, [1], [6], [0], [3])
    x = sample_of(rng, "bool", (4, 2))
    slice_case("bool", x, [-3], [-1], [0])


# =============================================================================
# indexing
# =============================================================================

def gen_index():
    rng = rng_for("index")
    mv = lambda x, arr: same_as(x, arr)

    x = sample_of(rng, "f32", (4, 3))
    idx = tensor("i64", [3, -1, 0, 1])
    add_case("gather", "axis0_negative_idx_f32", [x, idx], mv(x, np.take(x.a, idx.a, axis=0)))
    idx = tensor("i32", [[2, 0], [1, 1]])
    add_case("gather", "axis1_2d_idx_i32_f32", [x, idx], mv(x, np.take(x.a, idx.a, axis=1)), {"axis": 1})
    idx = tensor("i64", -2)
    add_case("gather", "scalar_idx_neg_axis_f32", [x, idx], mv(x, np.take(x.a, idx.a, axis=-1)), {"axis": -1})
    xc = sample_of(rng, "c64", (3, 2))
    idx = tensor("i64", [2, 2, 0])
    add_case("gather", "c64", [xc, idx], mv(xc, np.take(xc.a, idx.a, axis=0)))
    xb = sample_of(rng, "i8", (2, 3, 2))
    idx = tensor("i64", [[1], [0]])
    add_case("gather", "3d_i8", [xb, idx], mv(xb, np.take(xb.a, idx.a, axis=1)), {"axis": 1})
    idx = tensor("i64", np.zeros((0,)))
    add_case("gather", "empty_idx_f32", [x, idx], mv(x, np.take(x.a, idx.a, axis=0)))
    add_case("gather", "out_of_range_is_error", [x, tensor("i64", [0, 4])], error="out of range")
    add_case("gather", "negative_out_of_range_is_error", [x, tensor("i32", [-5])], error="out of range")

    x = sample_of(rng, "f32", (3, 4))
    idx = tensor("i64", [2, 0, 2])
    add_case("index_select", "axis1_f32", [x, idx], mv(x, np.take(x.a, idx.a, axis=1)), {"axis": 1})
    idx = tensor("i32", [-1, 0])
    add_case("index_select", "axis0_i32_idx", [x, idx], mv(x, np.take(x.a, idx.a, axis=0)), {"axis": 0})
    xb = sample_of(rng, "bool", (3,))
    add_case("index_select", "bool", [xb, tensor("i64", [1, 1, 2, 0])], mv(xb, xb.a[[1, 1, 2, 0]]))
    add_case("index_select", "out_of_range_is_error", [x, tensor("i64", [3])], error="out of range")

    def via_onnx(op_type, x: T, ints: list, attrs: dict, check_ref=True):
        return onnx_move(op_type, x, [np.asarray(i, np.int64) for i in ints], attrs, check_ref=check_ref)

    x = sample_of(rng, "f32", (2, 3))
    idx = tensor("i64", [[1, 2], [0, -1]])
    add_case("gather_nd", "full_index_f32", [x, idx], via_onnx("GatherND", x, [idx.a], {}))
    x = sample_of(rng, "f32", (2, 3, 4))
    idx = tensor("i32", [[1], [0], [1]])
    add_case("gather_nd", "slices_i32_idx", [x, idx], via_onnx("GatherND", x, [idx.a], {}))
    idx = tensor("i64", [[[0, 1], [2, 3]], [[1, 1], [0, 0]]])
    add_case("gather_nd", "batch_dims1_f32", [x, idx], via_onnx("GatherND", x, [idx.a], {"batch_dims": 1}),
             {"batch_dims": 1})
    xc = sample_of(rng, "c64", (3, 2))
    idx = tensor("i64", [[2, 1], [0, 0]])
    add_case("gather_nd", "c64", [xc, idx], via_onnx("GatherND", xc, [idx.a], {}))

    x = sample_of(rng, "f32", (3, 4))
    idx = tensor("i64", [[0, 1, 2, 0], [2, 2, 1, -1]])
    want = via_onnx("GatherElements", x, [idx.a], {"axis": 0})
    assert np.array_equal(want.a, np.take_along_axis(x.a, idx.a % 3, axis=0))
    add_case("gather_elements", "axis0_f32", [x, idx], want)
    idx = tensor("i32", [[3, 0], [1, 1], [-4, 2]])
    add_case("gather_elements", "axis1_i32_idx", [x, idx], via_onnx("GatherElements", x, [idx.a], {"axis": 1}),
             {"axis": 1})
    idx = tensor("i64", [[1, 0, 2]])
    add_case("gather_elements", "smaller_idx_neg_axis_f32", [x, idx],
             via_onnx("GatherElements", x, [idx.a], {"axis": -2}, check_ref=False), {"axis": -2})
    xi = sample_of(rng, "i64", (2, 2, 3))
    idx = tensor("i64", rng.integers(0, 3, (2, 2, 3)))
    add_case("gather_elements", "3d_i64", [xi, idx], via_onnx("GatherElements", xi, [idx.a], {"axis": 2}), {"axis": 2})

    def scatter_elements(x: T, idx: T, upd: T, axis: int, reduction="none"):
        """ONNX ScatterElements in float64 (reference evaluator, checked by ORT)."""
        attrs = {"axis": axis} if reduction == "none" else {"axis": axis, "reduction": reduction}
        if x.dtype in INTS:
            src = [x.i64().astype(np.float64), idx.i64(), upd.i64().astype(np.float64)]
        elif x.dtype == "bool":
            src = [x.a.astype(np.float64), idx.i64(), upd.a.astype(np.float64)]
        else:
            src = [x.f64(), idx.i64(), upd.f64()]
        y = onnx_both("ScatterElements", src, attrs, opset=18)[0]
        return tensor(x.dtype, y.astype(np.int64) if x.dtype in INTS else y)

    x, idx, upd = sample_of(rng, "f32", (3, 3)), tensor("i64", [[1, 0, 2], [0, 2, 1]]), sample_of(rng, "f32", (2, 3))
    add_case("scatter", "axis0_f32", [x, idx, upd], scatter_elements(x, idx, upd, 0), names=["x", "idx", "upd"])
    idx = tensor("i32", [[2], [-3], [1]])
    upd = sample_of(rng, "f32", (3, 1))
    add_case("scatter", "axis1_neg_idx_i32", [x, idx, upd], scatter_elements(x, idx, upd, 1), {"axis": 1},
             names=["x", "idx", "upd"])
    xi, idx, upd = sample_of(rng, "i64", (2, 4)), tensor("i64", [[3, 0], [1, 2]]), sample_of(rng, "i64", (2, 2))
    add_case("scatter", "neg_axis_i64", [xi, idx, upd], scatter_elements(xi, idx, upd, -1), {"axis": -1},
             names=["x", "idx", "upd"])
    xb, idx, upd = sample_of(rng, "bool", (2, 2)), tensor("i64", [[1, 0]]), tensor("bool", [[True, True]])
    add_case("scatter", "bool", [xb, idx, upd], scatter_elements(xb, idx, upd, 0), names=["x", "idx", "upd"])

    def scatter_add_ref(x: T, idx: T, upd: T, axis: int):
        wide = x.i64() if x.dtype in INTS else x.f64()
        out = wide.copy()
        ax = axis % x.a.ndim
        full = list(np.indices(idx.shape))
        full[ax] = idx.i64() % x.shape[ax]
        np.add.at(out, tuple(full), upd.i64() if x.dtype in INTS else upd.f64())
        # cross-check with ScatterElements(reduction=add)
        check_close("scatter_add vs ONNX", scatter_elements(x, idx, upd, axis, "add").a.astype(np.float64),
                    cast_values(out, x.dtype).astype(np.float64))
        return tensor(x.dtype, out)

    x, idx, upd = sample_of(rng, "f32", (3, 3)), tensor("i64", [[1, 0, 1], [1, 0, 1]]), sample_of(rng, "f32", (2, 3))
    add_case("scatter_add", "duplicates_axis0_f32", [x, idx, upd], scatter_add_ref(x, idx, upd, 0),
             names=["x", "idx", "upd"])
    x, idx, upd = sample_of(rng, "f64", (2, 4)), tensor("i32", [[0, 0, 3], [-1, 1, 1]]), sample_of(rng, "f64", (2, 3))
    add_case("scatter_add", "axis1_f64", [x, idx, upd], scatter_add_ref(x, idx, upd, 1), {"axis": 1},
             names=["x", "idx", "upd"])
    x, idx, upd = tensor("i8", [[100, 0], [5, -128]]), tensor("i64", [[0, 1], [0, 1]]), tensor("i8", [[100, -1], [1, 2]])
    add_case("scatter_add", "i8_wraps", [x, idx, upd], scatter_add_ref(x, idx, upd, 0), names=["x", "idx", "upd"])
    x, idx, upd = sample_of(rng, "i32", (4,)), tensor("i64", [3, 3, 3]), sample_of(rng, "i32", (3,))
    add_case("scatter_add", "1d_i32", [x, idx, upd], scatter_add_ref(x, idx, upd, 0), names=["x", "idx", "upd"])

    def scatter_nd(x: T, idx: T, upd: T, reduction: str) -> T:
        """ONNX ScatterND. ONNX Runtime computes every reduction; the reference
        evaluator (wrong for max/min in onnx 1.22) cross-checks none/add/mul."""
        conv = (lambda t: t.i64().astype(np.float32)) if x.dtype in INTS else (lambda t: t.a.astype(np.float32))
        wide = (lambda t: t.i64().astype(np.float64)) if x.dtype in INTS else (lambda t: t.a.astype(np.float64))
        attrs = {} if reduction == "none" else {"reduction": reduction}
        y = onnx_ort("ScatterND", [conv(x), idx.i64(), conv(upd)], attrs, opset=18)[0].astype(np.float64)
        if reduction in ("none", "add", "mul"):
            check_close("scatter_nd vs reference", y, onnx_ref("ScatterND", [wide(x), idx.i64(), wide(upd)], attrs,
                                                                opset=18)[0])
            y = onnx_ref("ScatterND", [wide(x), idx.i64(), wide(upd)], attrs, opset=18)[0]
        elif reduction in ("max", "min"):
            # ONNX Runtime ran in float32 above; recompute in float64 with NumPy
            # (the float32 result cross-checks it) so f64 cases keep full precision.
            out = wide(x).copy()
            k = idx.shape[-1]
            rows = idx.i64().reshape(-1, k)
            ups = wide(upd).reshape((rows.shape[0],) + tuple(x.shape[k:]))
            pick = np.maximum if reduction == "max" else np.minimum
            for row, u in zip(rows, ups):
                out[tuple(row)] = pick(out[tuple(row)], u)
            check_close("scatter_nd vs ORT (float32)", y, out, rtol=1e-6, atol=1e-6)
            y = out
        return tensor(x.dtype, y.astype(np.int64) if x.dtype in INTS else y)

    x, idx, upd = sample_of(rng, "f32", (4, 3)), tensor("i64", [[2], [0]]), sample_of(rng, "f32", (2, 3))
    add_case("scatter_nd", "rows_none_f32", [x, idx, upd], scatter_nd(x, idx, upd, "none"), names=["x", "idx", "upd"])
    x, idx = sample_of(rng, "f32", (2, 3)), tensor("i64", [[0, 1], [1, 2], [0, 1]])
    upd = sample_of(rng, "f32", (3,))
    for red in ("add", "mul", "max", "min"):
        add_case("scatter_nd", f"duplicates_{red}_f32", [x, idx, upd], scatter_nd(x, idx, upd, red),
                 {"reduction": red}, names=["x", "idx", "upd"])
    x, idx, upd = sample_of(rng, "i32", (2, 2, 3)), tensor("i32", [[1, 0], [0, 1]]), sample_of(rng, "i32", (2, 3))
    add_case("scatter_nd", "depth2_i32", [x, idx, upd], scatter_nd(x, idx, upd, "none"), names=["x", "idx", "upd"])
    add_case("scatter_nd", "depth2_add_i32", [x, idx, upd], scatter_nd(x, idx, upd, "add"), {"reduction": "add"},
             names=["x", "idx", "upd"])
    x, idx, upd = sample_of(rng, "f64", (3,)), tensor("i64", [[2], [0], [2]]), sample_of(rng, "f64", (3,))
    add_case("scatter_nd", "1d_max_f64", [x, idx, upd], scatter_nd(x, idx, upd, "max"), {"reduction": "max"},
             names=["x", "idx", "upd"])
    xb = sample_of(rng, "bool", (2, 2))
    idx, upd = tensor("i64", [[0, 0], [1, 1]]), tensor("bool", [True, False])
    yb = xb.a.copy()
    yb[0, 0], yb[1, 1] = True, False
    add_case("scatter_nd", "bool_none", [xb, idx, upd], tensor("bool", yb), names=["x", "idx", "upd"])

    def one_hot(name, idx: T, depth, axis=-1, dtype="f32"):
        # Negative indices in [-depth, -1] count from the end; other out-of-range
        # indices give an all-zero row. ONNX Runtime implements exactly that
        # (ONNX's reference evaluator wraps them instead, so it is not used).
        # ONNX wants rank >= 1 indices: a scalar index runs as shape (1,).
        scalar = idx.a.ndim == 0
        assert not scalar or axis == -1
        y = onnx_ort("OneHot", [idx.i64().reshape(-1) if scalar else idx.i64(), np.array(depth, np.int64),
                                np.array([0.0, 1.0], np.float32)], {"axis": axis})[0]
        y = y[0] if scalar else y
        i = idx.i64()
        manual = np.moveaxis((np.where(i < 0, i + depth, i)[..., None] == np.arange(depth)), -1,
                             axis % (i.ndim + 1))
        assert np.array_equal(manual, y == 1)
        attrs = {"depth": depth}
        if axis != -1:
            attrs["axis"] = axis
        if dtype != "f32":
            attrs["dtype"] = DT(dtype)
        add_case("one_hot", name, [idx], tensor(dtype, y.astype(np.float64)), attrs)

    one_hot("last_axis_f32", tensor("i64", [0, 2, -1, 5, -6, 4, -5]), 5)
    one_hot("axis0_i32_idx", tensor("i32", [[1, 0, 3], [2, -1, 9]]), 4, axis=0)
    one_hot("middle_axis_i64_out", tensor("i64", [[0, 1], [2, 2]]), 3, axis=1, dtype="i64")
    one_hot("bool_out", tensor("i32", [1, -2, 2]), 3, dtype="bool")
    one_hot("f16_out_scalar_idx", tensor("i64", 2), 4, dtype="f16")

    table = sample_of(rng, "f32", (5, 3))
    ids = tensor("i64", [[4, 0], [2, 2]])
    add_case("embedding", "f32", [table, ids], mv(table, table.a[ids.a]), names=["table", "ids"])
    ids = tensor("i32", [1, 3, 1])
    add_case("embedding", "i32_ids", [table, ids], mv(table, table.a[ids.a]), names=["table", "ids"])
    t16 = sample_of(rng, "f16", (4, 2))
    ids = tensor("i64", 3)
    add_case("embedding", "scalar_id_f16", [t16, ids], mv(t16, t16.a[ids.a]), names=["table", "ids"])
    tc = sample_of(rng, "c64", (3, 2))
    ids = tensor("i64", [-1, 0])
    add_case("embedding", "negative_id_c64", [tc, ids], mv(tc, tc.a[ids.a]), names=["table", "ids"])
    add_case("embedding", "out_of_range_is_error", [table, tensor("i64", [5])], error="out of range",
             names=["table", "ids"])


# =============================================================================
# cumulative ops, sorting, FFT, complex, random
# =============================================================================

def cum_ref(x, axis, exclusive, reverse, prod):
    """cumsum/cumprod along axis. exclusive: out[i] combines the elements
    before i (starting from 0 / 1); reverse: runs from the end."""
    y = np.flip(x, axis) if reverse else x
    n = y.shape[axis]
    if exclusive and n:
        first = np.full(y.shape[:axis] + (1,) + y.shape[axis + 1:], 1 if prod else 0, y.dtype)
        y = np.concatenate([first, np.take(y, range(n - 1), axis=axis)], axis=axis)
    c = (np.cumprod if prod else np.cumsum)(y, axis=axis)
    return np.flip(c, axis) if reverse else c


def sort_order(v: list, descending: bool):
    """Stable order of a list: NaN last ascending, first descending; ties keep index order."""
    isnan = lambda e: isinstance(e, float) and math.isnan(e)
    if descending:
        return sorted(range(len(v)), key=lambda i: (not isnan(v[i]), -v[i] if not isnan(v[i]) else 0))
    return sorted(range(len(v)), key=lambda i: (isnan(v[i]), v[i] if not isnan(v[i]) else 0))


def argsort_ref(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    # Python floats / ints, so that large i64 values compare exactly.
    wide = a.astype(np.float64) if a.dtype.kind in "fV" else a.astype(np.int64)
    moved = np.moveaxis(wide, axis, -1)
    out = np.empty(moved.shape, np.int64)
    for pos in np.ndindex(moved.shape[:-1]):
        out[pos] = sort_order(moved[pos].tolist(), descending)
    return np.moveaxis(out, -1, axis)


def gen_signal():
    rng = rng_for("signal")
    for op, prod in (("cumsum", False), ("cumprod", True)):
        def case(name, x: T, axis, exclusive=False, reverse=False):
            src = x.i64() if x.dtype in INTS else x.f64()
            attrs = {"axis": axis}
            if exclusive:
                attrs["exclusive"] = True
            if reverse:
                attrs["reverse"] = True
            add_case(op, name, [x], tensor(x.dtype, cum_ref(src, axis % x.a.ndim, exclusive, reverse, prod)), attrs,
                     acc=True)
        x = uniform(rng, "f32", (3, 4), 0.5, 1.5) if prod else randn(rng, "f32", (3, 4))
        case("axis1_f32", x, 1)
        case("axis0_exclusive_f32", x, 0, exclusive=True)
        case("reverse_f32", x, -1, reverse=True)
        case("exclusive_reverse_f32", x, 1, exclusive=True, reverse=True)
        case("f64", uniform(rng, "f64", (2, 5), 0.5, 1.5), -1)
        case("f16", uniform(rng, "f16", (6,), 0.5, 1.5), 0)
        case("i8_wraps", tensor("i8", [100, 100, -128, 7, 3] if not prod else [16, 16, 3, -1, 2]), 0)
        case("u8_exclusive", tensor("u8", [200, 100, 50, 1]), 0, exclusive=True)
        case("i64_3d", randint(rng, "i64", (2, 3, 2), -4, 5), 1, reverse=True)
        case("empty_axis_f32", tensor("f32", np.zeros((2, 0))), 1, exclusive=True)
        case("nan_inf_f32", tensor("f32", [1.0, INF, 2.0, NAN, 3.0]), 0)

    for op in ("sort", "argsort"):
        def case(name, x: T, axis=-1, descending=False):
            order = argsort_ref(x.a, axis, descending)
            want = tensor("i64", order) if op == "argsort" else same_as(x, np.take_along_axis(x.a, order, axis))
            attrs = {}
            if axis != -1:
                attrs["axis"] = axis
            if descending:
                attrs["descending"] = True
            add_case(op, name, [x], want, attrs)
        x = tensor("f32", [[3.0, 1.0, NAN, 2.0, 1.0, -INF], [0.5, NAN, -1.0, 0.5, INF, 0.5]])
        case("nan_ties_f32", x)
        case("nan_ties_descending_f32", x, descending=True)
        x = randn(rng, "f32", (4, 3))
        case("axis0_f32", x, 0)
        case("axis0_descending_f32", x, 0, True)
        x = tensor("i32", [[5, -2, 5, 0, -2, 7]])
        case("ties_i32", x)
        case("ties_descending_i32", x, descending=True)
        case("u8", tensor("u8", [255, 0, 128, 1, 128]))
        case("i8_descending", tensor("i8", [-128, 127, 0, -1, 127]), descending=True)
        case("i64_large", tensor("i64", [2**53 + 1, 2**53, -(2**63), 2**63 - 1]))
        case("f16", tensor("f16", rng.integers(-4, 4, 8) * 0.5))
        case("bf16_descending", tensor("bf16", rng.integers(-4, 4, 6) * 0.25), descending=True)
        case("f64_3d_middle_axis", randn(rng, "f64", (2, 3, 2)), -2)
        case("empty_f32", tensor("f32", np.zeros((2, 0))))

    def topk(name, x: T, k, axis=-1, largest=True):
        order = argsort_ref(x.a, axis, descending=largest)
        order = np.take(order, range(k), axis=axis)
        vals = same_as(x, np.take_along_axis(x.a, order, axis))
        attrs = {"k": k}
        if axis != -1:
            attrs["axis"] = axis
        if not largest:
            attrs["largest"] = False
        add_case("topk", name, [x], [vals, tensor("i64", order)], attrs)

    x = tensor("f32", [[1.0, 3.0, 3.0, -1.0, 2.0], [0.0, 0.0, 0.0, 5.0, -5.0]])
    topk("largest_ties_f32", x, 3)
    topk("smallest_ties_f32", x, 2, largest=False)
    topk("k0_f32", x, 0)
    topk("k_full_f32", x, 5)
    topk("axis0_f32", randn(rng, "f32", (4, 3)), 2, axis=0)
    topk("i32", tensor("i32", [[7, -1, 7, 3, 9, -8]]), 4)
    topk("u8_smallest", tensor("u8", [9, 200, 0, 9, 3]), 3, largest=False)
    topk("f64", randn(rng, "f64", (2, 6)), 3)
    topk("f16_3d", tensor("f16", rng.integers(-3, 3, (2, 2, 4)) * 0.5), 2, axis=-1)
    topk("inf_f32", tensor("f32", [-INF, 1.0, INF, 0.0]), 2)

    gen_fft(rng)
    gen_random()


def c64(rng, shape) -> T:
    return tensor("c64", rng.standard_normal(shape) + 1j * rng.standard_normal(shape))


def make_complex(re, im):
    """re + i*im without arithmetic (1j * inf would give a NaN real part)."""
    z = np.empty(np.shape(re), np.complex128)
    z.real, z.imag = re, im
    return z


def gen_fft(rng):
    # FFTs in complex128 on the stored inputs, rounded to c64 / f32.
    tol = (1e-5, 1e-5)
    for name, x, axis in (("len8", c64(rng, (8,)), -1), ("len5_odd", c64(rng, (5,)), -1),
                          ("2d_axis0", c64(rng, (4, 3)), 0), ("2d_last_axis", c64(rng, (2, 6)), -1),
                          ("len1", c64(rng, (3, 1)), 1), ("3d_middle_axis", c64(rng, (2, 7, 2)), -2)):
        attrs = {} if axis == -1 else {"axis": axis}
        add_case("fft", name, [x], tensor("c64", np.fft.fft(x.f64(), axis=axis)), attrs, tol=tol)
        add_case("ifft", name, [x], tensor("c64", np.fft.ifft(x.f64(), axis=axis)), attrs, tol=tol)
    x = tensor("c64", [1.0, 0, 0, 0])
    add_case("fft", "impulse", [x], tensor("c64", np.fft.fft(x.f64())), tol=tol)
    x = tensor("c64", [1.0, 1.0, 1.0, 1.0])
    add_case("ifft", "constant", [x], tensor("c64", np.fft.ifft(x.f64())), tol=tol)

    for name, shape, axis in (("len8", (8,), -1), ("len5_odd", (5,), -1), ("2d_axis0", (6, 2), 0),
                              ("2d_last_axis", (3, 7), -1), ("len1", (1,), -1), ("len2", (2, 3), 0)):
        x = randn(rng, "f32", shape)
        attrs = {} if axis == -1 else {"axis": axis}
        add_case("rfft", name, [x], tensor("c64", np.fft.rfft(x.f64(), axis=axis)), attrs, tol=tol)

    def irfft(name, bins_shape, axis=-1, n=-1):
        # Spectra of real signals (DC, and Nyquist for even n, are real), so the
        # result doesn't depend on whether the imaginary parts there are read.
        m = bins_shape[axis]
        nn = 2 * (m - 1) if n < 0 else n
        sig = rng.standard_normal(tuple(nn if i == axis % len(bins_shape) else d for i, d in enumerate(bins_shape)))
        spec = np.fft.rfft(sig, axis=axis)
        full = np.zeros(bins_shape, np.complex128)
        sl = [slice(None)] * len(bins_shape)
        sl[axis] = slice(0, spec.shape[axis])
        full[tuple(sl)] = spec
        # bins beyond n/2+1 are ignored: fill them with noise
        rest = [slice(None)] * len(bins_shape)
        rest[axis] = slice(spec.shape[axis], None)
        full[tuple(rest)] = (rng.standard_normal(full[tuple(rest)].shape)
                             + 1j * rng.standard_normal(full[tuple(rest)].shape))
        x = tensor("c64", full)
        attrs = {}
        if axis != -1:
            attrs["axis"] = axis
        if n >= 0:
            attrs["n"] = n
        add_case("irfft", name, [x], tensor("f32", np.fft.irfft(x.f64(), n=nn, axis=axis)), attrs, tol=tol)

    irfft("default_n_even", (5,))
    irfft("explicit_odd_n", (5,), n=9)
    irfft("axis0", (3, 4), axis=0)
    irfft("cropped_n", (2, 6), n=4)
    irfft("n1", (1,), n=1)
    irfft("3d_middle_axis_odd", (2, 4, 2), axis=1, n=7)

    re, im = randn(rng, "f32", (2, 3)), randn(rng, "f32", (2, 3))
    add_case("complex", "2d", [re, im], tensor("c64", make_complex(re.f64(), im.f64())), names=["re", "im"])
    re, im = tensor("f32", [NAN, INF, 0.0]), tensor("f32", [1.0, -INF, -0.0])
    add_case("complex", "special", [re, im], tensor("c64", make_complex(re.f64(), im.f64())), names=["re", "im"])
    add_case("complex", "scalar", [tensor("f32", 1.5), tensor("f32", -2.0)], tensor("c64", 1.5 - 2j),
             names=["re", "im"])
    for op, part in (("real", np.real), ("imag", np.imag)):
        x = c64(rng, (2, 3))
        add_case(op, "2d", [x], tensor("f32", part(x.a)))
        x = tensor("c64", [complex(NAN, 1.0), complex(2.0, -INF)])
        add_case(op, "special", [x], tensor("f32", part(x.a)))
        add_case(op, "empty", [tensor("c64", np.zeros((0,)))], tensor("f32", np.zeros((0,))))


def gen_random():
    """Random ops are checked by moments: sample mean and variance of ~20000
    draws against the closed form, within 5 standard errors of the larger of
    the two statistics' standard errors."""
    N = 20000

    def tol_for(var, mu4):
        se_mean = math.sqrt(var / N)
        se_var = math.sqrt(max(mu4 - var * var, 0.0) / N)
        return 5 * max(se_mean, se_var)

    for name, dt, shape, lo, hi, seed in (("f32_unit", "f32", [N], 0.0, 1.0, 1), ("f64_shifted", "f64", [100, 200], -3.0, 5.0, 7),
                                         ("f16", "f16", [N], -1.0, 1.0, 3)):
        w = hi - lo
        var, mu4 = w * w / 12, w**4 / 80
        attrs = {"shape": shape, "seed": seed}
        if dt != "f32":
            attrs["dtype"] = DT(dt)
        if (lo, hi) != (0.0, 1.0):
            attrs["low"], attrs["high"] = lo, hi
        add_case("random_uniform", name, [], attrs=attrs, moments={"mean": (lo + hi) / 2, "var": var,
                                                                   "tol": tol_for(var, mu4)})
    for name, dt, shape, mean, std, seed in (("f32_standard", "f32", [N], 0.0, 1.0, 1), ("f64", "f64", [2, N // 2], 3.0, 0.5, 11),
                                            ("bf16", "bf16", [N], -1.0, 2.0, 5)):
        var = std * std
        attrs = {"shape": shape, "seed": seed}
        if dt != "f32":
            attrs["dtype"] = DT(dt)
        if (mean, std) != (0.0, 1.0):
            attrs["mean"], attrs["std"] = mean, std
        # bf16 rounding adds variance ~ (2^-8 |x|)^2 / 12: negligible next to tol.
        add_case("random_normal", name, [], attrs=attrs, moments={"mean": mean, "var": var,
                                                                  "tol": tol_for(var, 3 * var * var)})
    for name, dt, p, seed in (("f32_p03", "f32", 0.3, 1), ("f64_p08", "f64", 0.8, 2), ("f16_p05", "f16", 0.5, 3)):
        g = Graph()
        g.param("p", f"{dt}[]")
        g.node("broadcast", ["p"], {"shape": [N]}, "pb")
        g.node("bernoulli", ["pb"], {"seed": seed}, "r")
        g.ret("r")
        var = p * (1 - p)
        mu4 = p * (1 - p) * (1 - 3 * p + 3 * p * p)
        add_case("bernoulli", name, [tensor(dt, p)], graph=g, moments={"mean": p, "var": var, "tol": tol_for(var, mu4)})
    # Degenerate probabilities are exact.
    p = tensor("f32", [0.0, 1.0, 1.0, 0.0])
    add_case("bernoulli", "p0_p1_exact", [p], tensor("f32", p.a), {"seed": 42}, names=["p"])


# =============================================================================
# control flow
# =============================================================================

def const_node(g: Graph, name: str, t: T):
    g.node("constant", [], {"value": t}, name)


def gen_control():
    # if: both branches take the remaining inputs.
    def if_graph(cond_ty, a_ty="f32[3]"):
        then = Graph("then_branch")
        then.param("tx", a_ty)
        then.param("ty", a_ty)
        then.node("add", ["tx", "ty"], outs="ts")
        then.ret("ts")
        els = Graph("else_branch")
        els.param("ex", a_ty)
        els.param("ey", a_ty)
        els.node("mul", ["ex", "ey"], outs="es")
        els.ret("es")
        g = Graph()
        g.param("c", cond_ty)
        g.param("a", a_ty)
        g.param("b", a_ty)
        g.node("if", ["c", "a", "b"], {"then_branch": then, "else_branch": els}, "r")
        return g.ret("r")

    a, b = tensor("f32", [1.0, 2.0, -3.0]), tensor("f32", [0.5, 4.0, 2.0])
    add_case("if", "true_takes_then", [tensor("bool", True), a, b], tensor("f32", a.f64() + b.f64()),
             graph=if_graph("bool[]"))
    add_case("if", "false_takes_else", [tensor("bool", False), a, b], tensor("f32", a.f64() * b.f64()),
             graph=if_graph("bool[]"))
    add_case("if", "cond_shape1", [tensor("bool", [True]), a, b], tensor("f32", a.f64() + b.f64()),
             graph=if_graph("bool[1]"))

    # two outputs of different dtypes, branches using constants
    then = Graph("then_branch")
    then.param("tn", "i32[2]")
    const_node(then, "tk", tensor("i32", [10, 20]))
    then.node("add", ["tn", "tk"], outs="tsum")
    then.node("cast", ["tsum"], {"dtype": DT("f32")}, "tf")
    then.ret("tsum", "tf")
    els = Graph("else_branch")
    els.param("en", "i32[2]")
    els.node("neg", ["en"], outs="eneg")
    els.node("cast", ["en"], {"dtype": DT("f32")}, "ef")
    els.ret("eneg", "ef")
    g = Graph()
    g.param("c", "bool[]")
    g.param("n", "i32[2]")
    g.node("if", ["c", "n"], {"then_branch": then, "else_branch": els}, ["r0", "r1"])
    g.ret("r0", "r1")
    n = tensor("i32", [3, -4])
    add_case("if", "two_outputs_then", [tensor("bool", True), n],
             [tensor("i32", n.i64() + [10, 20]), tensor("f32", n.i64() + [10, 20])], graph=g)
    add_case("if", "two_outputs_else", [tensor("bool", False), n],
             [tensor("i32", -n.i64()), tensor("f32", n.i64())], graph=g)

    # while: (i, x) -> (i + 1, x * 2) while i < 5
    def while_graph(max_iterations=None):
        cond = Graph("cond")
        cond.param("ci", "i32[]")
        cond.param("cx", "f32[2]")
        const_node(cond, "lim", tensor("i32", 5))
        cond.node("lt", ["ci", "lim"], outs="cc")
        cond.ret("cc")
        body = Graph("body")
        body.param("bi", "i32[]")
        body.param("bx", "f32[2]")
        const_node(body, "one", tensor("i32", 1))
        const_node(body, "two", tensor("f32", 2.0))
        body.node("add", ["bi", "one"], outs="ni")
        body.node("mul", ["bx", "two"], outs="nx")
        body.ret("ni", "nx")
        g = Graph()
        g.param("i", "i32[]")
        g.param("x", "f32[2]")
        attrs = {"cond": cond, "body": body}
        if max_iterations is not None:
            attrs["max_iterations"] = max_iterations
        g.node("while", ["i", "x"], attrs, ["ri", "rx"])
        return g.ret("ri", "rx")

    x = tensor("f32", [1.5, -0.25])
    add_case("while", "counter_five_iterations", [tensor("i32", 0), x],
             [tensor("i32", 5), tensor("f32", x.f64() * 32)], graph=while_graph(100))
    add_case("while", "default_max_iterations", [tensor("i32", 2), x],
             [tensor("i32", 5), tensor("f32", x.f64() * 8)], graph=while_graph())
    add_case("while", "zero_iterations", [tensor("i32", 7), x], [tensor("i32", 7), x], graph=while_graph(100))
    add_case("while", "exceeds_max_iterations_is_error", [tensor("i32", 0), x], graph=while_graph(3),
             error="max_iterations")

    # data-dependent loop: x = x * 3 while x < 100 (single state value)
    cond = Graph("cond")
    cond.param("cx", "f32[]")
    const_node(cond, "lim", tensor("f32", 100.0))
    cond.node("lt", ["cx", "lim"], outs="cc")
    cond.ret("cc")
    body = Graph("body")
    body.param("bx", "f32[]")
    const_node(body, "three", tensor("f32", 3.0))
    body.node("mul", ["bx", "three"], outs="nx")
    body.ret("nx")
    g = Graph()
    g.param("x", "f32[]")
    g.node("while", ["x"], {"cond": cond, "body": body, "max_iterations": 50}, "r")
    g.ret("r")
    want = np.float32(0.5)
    while want < np.float32(100.0):  # the loop the graph describes
        want = np.float32(want * np.float32(3.0))
    add_case("while", "data_dependent_f32", [tensor("f32", 0.5)], tensor("f32", want), graph=g)

    # scan: carry c, slices x: c' = c + x, y = c' * x
    def scan_graph(steps, dt="f32"):
        body = Graph("body")
        body.param("c", f"{dt}[3]")
        body.param("xs", f"{dt}[3]")
        body.node("add", ["c", "xs"], outs="n")
        body.node("mul", ["n", "xs"], outs="y")
        body.ret("n", "y")
        g = Graph()
        g.param("c0", f"{dt}[3]")
        g.param("x", f"{dt}[{steps},3]")
        g.node("scan", ["c0", "x"], {"body": body, "num_carry": 1}, ["rc", "ry"])
        return g.ret("rc", "ry")

    def scan_ref(c0, xs):
        c, ys = c0.copy(), []
        for x in xs:
            c = c + x
            ys.append(c * x)
        return c, np.array(ys).reshape((len(xs),) + c0.shape)

    rng = rng_for("control")
    c0, xs = randn(rng, "f32", (3,)), randn(rng, "f32", (4, 3))
    c, ys = scan_ref(c0.f64(), xs.f64())
    add_case("scan", "running_sum_f32", [c0, xs], [tensor("f32", c), tensor("f32", ys)], graph=scan_graph(4))
    c0, xs = randint(rng, "i32", (3,), -5, 5), randint(rng, "i32", (2, 3), -5, 5)
    c, ys = scan_ref(c0.i64(), xs.i64())
    add_case("scan", "i32", [c0, xs], [tensor("i32", c), tensor("i32", ys)], graph=scan_graph(2, "i32"))
    c0, xs = randn(rng, "f32", (3,)), tensor("f32", np.zeros((0, 3)))
    add_case("scan", "zero_steps", [c0, xs], [c0, tensor("f32", np.zeros((0, 3)))], graph=scan_graph(0))

    # two carries, two scanned inputs, two per-step outputs
    body = Graph("body")
    body.param("cnt", "i32[]")
    body.param("mx", "f32[2]")
    body.param("sa", "f32[2]")
    body.param("sb", "i32[]")
    body.node("add", ["cnt", "sb"], outs="cnt2")
    body.node("max", ["mx", "sa"], outs="mx2")
    body.node("reduce_sum", ["sa"], outs="ya")
    body.node("cast", ["cnt2"], {"dtype": DT("f32")}, "yb")
    body.ret("cnt2", "mx2", "ya", "yb")
    g = Graph()
    for n, ty in (("cnt0", "i32[]"), ("mx0", "f32[2]"), ("xa", "f32[5,2]"), ("xb", "i32[5]")):
        g.param(n, ty)
    g.node("scan", ["cnt0", "mx0", "xa", "xb"], {"body": body, "num_carry": 2}, ["rcnt", "rmx", "rya", "ryb"])
    g.ret("rcnt", "rmx", "rya", "ryb")
    cnt0, mx0 = tensor("i32", 1), tensor("f32", [-INF, 0.0])
    xa, xb = randn(rng, "f32", (5, 2)), randint(rng, "i32", (5,), 0, 4)
    add_case("scan", "two_carries_two_inputs", [cnt0, mx0, xa, xb],
             [tensor("i32", 1 + xb.i64().sum()), tensor("f32", np.maximum(mx0.f64(), xa.f64().max(axis=0))),
              tensor("f32", xa.f64().sum(axis=1)), tensor("f32", 1 + np.cumsum(xb.i64()))], graph=g)

    # num_carry = 0: a map
    body = Graph("body")
    body.param("xs", "f32[2]")
    body.node("mul", ["xs", "xs"], outs="sq")
    body.ret("sq")
    g = Graph()
    g.param("x", "f32[3,2]")
    g.node("scan", ["x"], {"body": body, "num_carry": 0}, "r")
    g.ret("r")
    x = randn(rng, "f32", (3, 2))
    add_case("scan", "map_no_carry", [x], tensor("f32", x.f64() ** 2), graph=g)


# =============================================================================
# fused ops
# =============================================================================

def softmax_ref(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax_ref(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    d = x - m
    return d - np.log(np.exp(d).sum(axis=axis, keepdims=True))


def layer_norm_ref(x, gamma, beta, axis, eps, center=True):
    axes = tuple(range(axis % x.ndim, x.ndim))
    d = x - x.mean(axis=axes, keepdims=True) if center else x
    n = d / np.sqrt((d * d).mean(axis=axes, keepdims=True) + eps)
    return n * gamma + (beta if beta is not None else 0)


def per_channel(p, ndim):
    return p.reshape((-1,) + (1,) * (ndim - 2))


def group_norm_ref(x, gamma, beta, groups, eps):
    g = x.reshape(x.shape[0], groups, -1)
    d = g - g.mean(axis=2, keepdims=True)
    n = (d / np.sqrt((d * d).mean(axis=2, keepdims=True) + eps)).reshape(x.shape)
    return n * per_channel(gamma, x.ndim) + per_channel(beta, x.ndim)


def batch_norm_ref(x, scale, bias, mean, var, eps):
    pc = lambda p: per_channel(p, x.ndim)
    return (x - pc(mean)) / np.sqrt(pc(var) + eps) * pc(scale) + pc(bias)


def gelu_ref(x):
    return 0.5 * x * (1 + scipy.special.erf(x / math.sqrt(2)))


def gelu_tanh_ref(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def silu_ref(x):
    return x * sigmoid(x)


ACTIVATIONS = {"none": lambda x: x, "relu": lambda x: np.maximum(x, 0), "gelu": gelu_ref, "gelu_tanh": gelu_tanh_ref,
               "silu": silu_ref, "sigmoid": sigmoid, "tanh": np.tanh}


def attention_attrs(kind, window, scale):
    """The attributes of an attention case (defaults left out)."""
    attrs = {}
    if kind != "none":
        attrs["mask_kind"] = kind
    if window:
        attrs["window"] = window
    if scale is not None:
        attrs["scale"] = scale
    return attrs


def attention_ref(q, k, v, kind="none", mask=None, window=0, scale=None):
    d = q.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * (1 / math.sqrt(d) if scale is None else scale)
    sq, sk = q.shape[-2], k.shape[-2]
    keep = None
    if kind == "bias":
        s = s + mask
    elif kind == "custom":
        keep = mask
    elif kind in ("causal", "sliding_window"):
        # query i sits at position i + (Sk - Sq): bottom-right aligned
        qpos = np.arange(sq)[:, None] + (sk - sq)
        j = np.arange(sk)[None, :]
        keep = j <= qpos
        if kind == "sliding_window":
            keep &= (qpos - j) < window
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    # a fully masked row gives NaN (-inf - -inf)
    return np.matmul(softmax_ref(s, -1), v)


def rope_ref(x, cos, sin, interleaved):
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        y1, y2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        return np.stack([y1, y2], axis=-1).reshape(x.shape)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rope_checked(x, cos, sin, interleaved):
    """rope_ref, cross-checked with ONNX RotaryEmbedding (opset 23) run on x
    viewed as (N, 1, S, D) with per-batch cos/sin caches."""
    y = rope_ref(x, cos, sin, interleaved)
    s, d = x.shape[-2:]
    x4 = x.reshape(-1, 1, s, d)
    caches = [np.array(np.broadcast_to(c, (x4.shape[0], s, d // 2))) for c in (cos, sin)]
    o = onnx_ref("RotaryEmbedding", [x4] + caches, {"interleaved": int(interleaved)}, opset=23)[0]
    check_close("rope vs ONNX RotaryEmbedding", o.reshape(y.shape), y, 1e-12, 1e-12)
    return y


def rope_tables(dt, s, d, base=10000.0):
    inv = base ** (-np.arange(0, d, 2) / d)
    ang = np.arange(s)[:, None] * inv[None, :]
    return tensor(dt, np.cos(ang)), tensor(dt, np.sin(ang))


def gen_fused():
    rng = rng_for("fused")
    for op, ref in (("softmax", softmax_ref), ("log_softmax", log_softmax_ref)):
        def case(name, x: T, axis=-1, check_onnx=True):
            y = ref(x.f64(), axis)
            if check_onnx:
                onnx_y = onnx_ref("Softmax" if op == "softmax" else "LogSoftmax", [x.f64()], {"axis": axis}, opset=13)[0]
                check_close(f"{op} vs ONNX", onnx_y, y, 1e-12, 1e-12)
            add_case(op, name, [x], tensor(x.dtype, y), {} if axis == -1 else {"axis": axis}, acc=True)
        case("last_axis_f32", randn(rng, "f32", (2, 5), 2.0))
        case("axis0_f32", randn(rng, "f32", (3, 4), 2.0), 0)
        case("middle_axis_f32", randn(rng, "f32", (2, 3, 2)), 1)
        case("large_values_f32", tensor("f32", [[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]]))
        case("minus_inf_entries_f32", tensor("f32", [[-INF, 0.0, 1.0], [2.0, -INF, -INF]]))
        case("f64", randn(rng, "f64", (2, 4)))
        case("f16", randn(rng, "f16", (2, 4)))
        case("bf16", randn(rng, "bf16", (3, 3)), -2)
        case("single_element_axis_f32", randn(rng, "f32", (3, 1)))

    def ln_case(op, name, xs, axis=-1, eps=None, dt="f32"):
        x = randn(rng, dt, xs, 2.0)
        tail = xs[axis % len(xs):]
        gamma = randn(rng, dt, tail)
        beta = randn(rng, dt, tail) if op == "layer_norm" else None
        e = (1e-5 if op == "layer_norm" else 1e-6) if eps is None else eps
        y = layer_norm_ref(x.f64(), gamma.f64(), None if beta is None else beta.f64(), axis, e, op == "layer_norm")
        if op == "layer_norm":
            oy = onnx_ref("LayerNormalization", [x.f64(), gamma.f64(), beta.f64()], {"axis": axis, "epsilon": e},
                          opset=17)[0]
            check_close("layer_norm vs ONNX", oy, y, 1e-10, 1e-10)
        attrs = {}
        if axis != -1:
            attrs["axis"] = axis
        if eps is not None:
            attrs["eps"] = eps
        ins = [x, gamma] + ([beta] if beta is not None else [])
        add_case(op, name, ins, tensor(dt, y), attrs, acc=True, names=["x", "gamma", "beta"][: len(ins)])

    for op in ("layer_norm", "rms_norm"):
        ln_case(op, "last_axis_f32", (2, 3, 4))
        ln_case(op, "two_axes_f32", (2, 3, 4), axis=1)
        ln_case(op, "eps_1e-2_f32", (3, 5), eps=1e-2)
        ln_case(op, "rank1_f32", (6,))
        ln_case(op, "f64", (2, 4), axis=-1)
        ln_case(op, "f16", (2, 8))
        ln_case(op, "bf16", (2, 8))
        ln_case(op, "all_axes_f32", (2, 3), axis=0)

    def gn_case(name, xs, groups, eps=None, dt="f32"):
        x = randn(rng, dt, xs, 2.0)
        gamma, beta = randn(rng, dt, (xs[1],)), randn(rng, dt, (xs[1],))
        e = 1e-5 if eps is None else eps
        y = group_norm_ref(x.f64(), gamma.f64(), beta.f64(), groups, e)
        oy = onnx_ref("GroupNormalization", [x.f64(), gamma.f64(), beta.f64()], {"num_groups": groups, "epsilon": e,
                                                                         "stash_type": 11},  # compute in double
                      opset=21)[0]
        check_close("group_norm vs ONNX", oy, y, 1e-10, 1e-10)
        attrs = {"groups": groups}
        if eps is not None:
            attrs["eps"] = eps
        add_case("group_norm", name, [x, gamma, beta], tensor(dt, y), attrs, acc=True, names=["x", "gamma", "beta"])

    gn_case("groups2_f32", (2, 4, 3), 2)
    gn_case("groups3_2d_f32", (1, 6, 2, 2), 3, eps=1e-3)
    gn_case("groups1_f32", (2, 3, 4), 1)
    gn_case("groups_eq_channels_f32", (1, 4, 5), 4)
    gn_case("f64", (2, 4, 2), 2, dt="f64")
    gn_case("f16", (1, 4, 4), 2, dt="f16")

    def bn_case(name, xs, eps=None, dt="f32"):
        c = xs[1]
        x, scale, bias, mean = randn(rng, dt, xs, 2.0), randn(rng, dt, (c,)), randn(rng, dt, (c,)), randn(rng, dt, (c,))
        var = uniform(rng, dt, (c,), 0.2, 3.0)
        e = 1e-5 if eps is None else eps
        args = [t.f64() for t in (x, scale, bias, mean, var)]
        y = batch_norm_ref(*args, e)
        check_close("batch_norm vs ONNX", onnx_ref("BatchNormalization", args, {"epsilon": e}, opset=15)[0], y,
                    1e-10, 1e-10)
        add_case("batch_norm", name, [x, scale, bias, mean, var], tensor(dt, y), {} if eps is None else {"eps": eps},
                 acc=True, names=["x", "scale", "bias", "mean", "var"])

    bn_case("3d_f32", (2, 3, 4))
    bn_case("4d_f32", (1, 2, 2, 3), eps=1e-3)
    bn_case("2d_f32", (4, 3))
    bn_case("f64", (2, 2, 3), dt="f64")
    bn_case("f16", (1, 3, 4), dt="f16")

    for op, ref in (("gelu", gelu_ref), ("gelu_tanh", gelu_tanh_ref), ("silu", silu_ref)):
        for dt, shape in (("f32", (3, 4)), ("f64", (2, 3)), ("f16", (2, 4)), ("bf16", (2, 4))):
            x = randn(rng, dt, shape, 3.0)
            y = ref(x.f64())
            if op in ("gelu", "gelu_tanh"):
                approx = "none" if op == "gelu" else "tanh"
                # ONNX's evaluator rounds its constants to float32: a loose cross-check.
                check_close(f"{op} vs ONNX", onnx_ref("Gelu", [x.f64()], {"approximate": approx}, opset=20)[0], y,
                            1e-6, 1e-6)
            add_case(op, dt, [x], tensor(dt, y))
        x = tensor("f32", [-20.0, -8.0, -1e-4, 0.0, 1e-4, 8.0, 20.0])
        add_case(op, "tails_f32", [x], tensor("f32", ref(x.f64())))
        add_case(op, "empty_f32", [tensor("f32", np.zeros((0, 2)))], tensor("f32", np.zeros((0, 2))))
    for dt, shape in (("f32", (3, 4)), ("f64", (2, 3)), ("f16", (2, 4)), ("bf16", (4,))):
        gate, up = randn(rng, dt, shape, 2.0), randn(rng, dt, shape)
        add_case("swiglu", dt, [gate, up], tensor(dt, silu_ref(gate.f64()) * up.f64()), names=["gate", "up"])

    gen_attention(rng)
    gen_rope(rng)

    for act, ref in ACTIVATIONS.items():
        a, b, bias = randn(rng, "f32", (3, 4)), randn(rng, "f32", (4, 5)), randn(rng, "f32", (5,))
        add_case("matmul_bias_act", f"{act}_f32", [a, b, bias], tensor("f32", ref(a.f64() @ b.f64() + bias.f64())),
                 {"activation": act}, acc=True, names=["a", "b", "bias"])
    a, b = randn(rng, "f32", (2, 3)), randn(rng, "f32", (3, 4))
    add_case("matmul_bias_act", "no_bias_default_f32", [a, b], tensor("f32", a.f64() @ b.f64()), acc=True)
    add_case("matmul_bias_act", "no_bias_relu_f32", [a, b], tensor("f32", np.maximum(a.f64() @ b.f64(), 0)),
             {"activation": "relu"}, acc=True)
    a, b, bias = randn(rng, "f32", (2, 3, 4)), randn(rng, "f32", (4, 5)), randn(rng, "f32", (3, 5))
    add_case("matmul_bias_act", "batched_2d_bias_gelu_f32", [a, b, bias],
             tensor("f32", gelu_ref(a.f64() @ b.f64() + bias.f64())), {"activation": "gelu"}, acc=True,
             names=["a", "b", "bias"])
    for dt in ("f64", "f16", "bf16"):
        a, b, bias = randn(rng, dt, (2, 4)), randn(rng, dt, (4, 3)), randn(rng, dt, (3,))
        add_case("matmul_bias_act", f"silu_{dt}", [a, b, bias], tensor(dt, silu_ref(a.f64() @ b.f64() + bias.f64())),
                 {"activation": "silu"}, acc=True, names=["a", "b", "bias"])

    for name, m, n, k, block, dt in (("default_block_f32", 2, 3, 64, None, "f32"), ("block4_f32", 3, 2, 8, 4, "f32"),
                                     ("block8_f64", 2, 2, 16, 8, "f64"), ("block4_f16", 2, 2, 8, 4, "f16")):
        bs = 32 if block is None else block
        a, b = randn(rng, dt, (m, k)), randn(rng, dt, (n, k))
        sa, sb = uniform(rng, dt, (m, k // bs), 0.25, 2.0), uniform(rng, dt, (n, k // bs), 0.25, 2.0)
        y = (a.f64() * np.repeat(sa.f64(), bs, axis=1)) @ (b.f64() * np.repeat(sb.f64(), bs, axis=1)).T
        add_case("scaled_matmul", name, [a, b, sa, sb], tensor(dt, y), {} if block is None else {"block": block},
                 acc=True, names=["a", "b", "sa", "sb"])


def gen_folds():
    """Ops that fold a following node into a kernel: a residual add into the
    matmul epilogue, the head merge into attention. References in NumPy
    (attention's as for `attention`, then transposed and reshaped)."""
    rng = rng_for("matmul_residual")
    for name, sa, sb, bias, act, dt in (("residual_f32", (3, 4), (4, 5), False, "none", "f32"),
                                        ("bias_f32", (2, 3, 4), (4, 5), True, "none", "f32"),
                                        ("batched_weight_f32", (2, 3, 4), (2, 4, 2), False, "none", "f32"),
                                        ("gelu_bias_f32", (3, 4), (4, 5), True, "gelu", "f32"),
                                        ("relu_f16", (2, 8), (8, 3), True, "relu", "f16"),
                                        ("silu_bf16", (2, 4), (4, 3), False, "silu", "bf16"),
                                        ("f64", (2, 3), (3, 2), True, "none", "f64")):
        a, b = randn(rng, dt, sa), randn(rng, dt, sb)
        y = a.f64() @ b.f64()
        ins, names = [a, b], ["a", "b", "res"]
        r = randn(rng, dt, y.shape)
        ins.append(r)
        if bias:
            bv = randn(rng, dt, (y.shape[-1],))
            ins.append(bv)
            names.append("bias")
            y = y + bv.f64()
        if dt in ("f16", "bf16"):
            # The unfused graph rounds the epilogue's result before the add.
            y = tensor(dt, ACTIVATIONS[act](y)).f64()
        else:
            y = ACTIVATIONS[act](y)
        add_case("matmul_residual", name, ins, tensor(dt, y + r.f64()), {} if act == "none" else {"activation": act},
                 acc=True, names=names)

    rng = rng_for("conv_act")
    for name, xs, ws, bias, attrs, act, dt in (
            ("2d_relu_bias", (1, 3, 6, 6), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}, "relu", "f32"),
            ("2d_silu_stride", (2, 2, 7, 5), (3, 2, 3, 2), False, {"strides": [2, 1]}, "silu", "f32"),
            ("2d_depthwise_sigmoid", (1, 4, 5, 5), (4, 1, 3, 3), True, {"pads": [1, 1, 1, 1], "groups": 4}, "sigmoid", "f32"),
            ("1d_gelu", (1, 2, 9), (3, 2, 3), True, {"dilations": [2]}, "gelu", "f32"),
            ("2d_none", (1, 2, 4, 4), (2, 2, 2, 2), False, {}, "none", "f32"),
            ("2d_tanh_f64", (1, 2, 4, 4), (3, 2, 3, 3), True, {"pads": [1, 1, 1, 1]}, "tanh", "f64")):
        x, w = randn(rng, dt, xs), randn(rng, dt, ws, 0.5)
        ins = [x, w] + ([randn(rng, dt, (ws[0],))] if bias else [])
        y = onnx_both("Conv", [t.f64() for t in ins], conv_attrs_onnx(attrs))[0]
        add_case("conv_act", name, ins, tensor(dt, ACTIVATIONS[act](y)), {**attrs, "activation": act}, acc=True,
                 names=["x", "w", "b"][: len(ins)])

    rng = rng_for("attention_merged")
    def merged(name, qs, ks, vs, kind="none", mask=None, window=0, scale=None, dt="f32"):
        q, k, v = randn(rng, dt, qs), randn(rng, dt, ks), randn(rng, dt, vs)
        ins = [q, k, v] + ([mask] if mask is not None else [])
        m = None if mask is None else (mask.a if mask.dtype == "bool" else mask.f64())
        y = attention_ref(q.f64(), k.f64(), v.f64(), kind, m, window, scale)
        r = y.ndim
        y = np.swapaxes(y, r - 3, r - 2)
        y = y.reshape(y.shape[:r - 2] + (y.shape[r - 2] * y.shape[r - 1],))
        attrs = attention_attrs(kind, window, scale)
        add_case("attention_merged", name, ins, tensor(dt, y), attrs, acc=True,
                 names=["q", "k", "v", "mask"][: len(ins)])

    merged("bert_f32", (2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 5, 8))
    merged("causal_f32", (1, 3, 4, 4), (1, 3, 4, 4), (1, 3, 4, 2), "causal")
    merged("rank3_kv_cache_f32", (2, 2, 4), (2, 5, 4), (2, 5, 3), "causal")
    bias = randn(rng, "f32", (2, 1, 1, 6))
    merged("bias_mask_f32", (2, 2, 3, 4), (2, 2, 6, 4), (2, 2, 6, 4), "bias", bias)
    merged("window_scale_f32", (1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 4), "sliding_window", window=2, scale=0.3)
    merged("f16", (1, 2, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), dt="f16")
    merged("bf16", (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), dt="bf16")
    merged("f64", (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), "causal", dt="f64")

    # attention over a key/value cache and new keys/values (a decoder's
    # step): the reference is attention over the two joined along the
    # sequence axis, with the keep mask (unfilled cache slots masked).
    rng = rng_for("attention_cached")
    def cached(name, qs, cs, ns, dv, keep, scale=None, dt="f32"):
        q = randn(rng, dt, qs)
        kc, vc = randn(rng, dt, cs), randn(rng, dt, cs[:-1] + (dv,))
        kn, vn = randn(rng, dt, ns), randn(rng, dt, ns[:-1] + (dv,))
        axis = len(cs) - 2
        k = np.concatenate([kc.f64(), kn.f64()], axis)
        v = np.concatenate([vc.f64(), vn.f64()], axis)
        y = attention_ref(q.f64(), k, v, "custom", keep.a, 0, scale)
        add_case("attention_cached", name, [q, kc, vc, kn, vn, keep], tensor(dt, y),
                 {} if scale is None else {"scale": scale}, acc=True,
                 names=["q", "k_cache", "v_cache", "k_new", "v_new", "keep"])

    def step_keep(t, cap, filled):
        # Query i (of t new tokens) sees the filled cache slots and the new
        # tokens up to itself.
        keep = np.zeros((t, cap + t), dtype=bool)
        keep[:, :filled] = True
        for i in range(t):
            keep[i, cap:cap + i + 1] = True
        return tensor("bool", keep)

    # GQA as the decoder writes it: q (1, kv, g, T, D), k (1, kv, 1, S, D).
    cached("decode_gqa_f32", (1, 2, 3, 1, 8), (1, 2, 1, 6, 8), (1, 2, 1, 1, 8), 8, step_keep(1, 6, 4))
    cached("prefill_chunk_gqa_f32", (1, 2, 2, 3, 4), (1, 2, 1, 5, 4), (1, 2, 1, 3, 4), 4, step_keep(3, 5, 5))
    cached("rank3_scale_dv_ne_d_f32", (2, 2, 4), (2, 7, 4), (2, 2, 4), 3, step_keep(2, 7, 3), scale=0.25)
    keep = step_keep(1, 4, 2)
    keep.a[0, 2] = True  # an unfilled slot kept: it must be read
    cached("decode_rank4_f32", (2, 3, 1, 8), (2, 3, 4, 8), (2, 3, 1, 8), 8, keep)
    cached("decode_gqa_f16", (1, 1, 2, 1, 8), (1, 1, 1, 5, 8), (1, 1, 1, 1, 8), 8, step_keep(1, 5, 3), dt="f16")
    cached("decode_f64", (1, 2, 1, 4), (1, 2, 3, 4), (1, 2, 1, 4), 4, step_keep(1, 3, 3), dt="f64")


def gen_integer():
    """matmul_integer: (a − a_zero_point) @ (b − b_zero_point) of 8-bit
    integers, computed in NumPy int64 and wrapped to int32. Sums stay below
    2^24 in magnitude (the f32 decomposition other backends run is exact
    there); rlx-cpu's tests go past it."""
    rng = rng_for("matmul_integer")

    def ints(dt, shape):
        lo, hi = (0, 256) if dt == "u8" else (-128, 128)
        return tensor(dt, rng.integers(lo, hi, size=shape))

    for name, adt, bdt, ashape, n, za, zb in (
            ("u8_i8_scalar_zero_points", "u8", "i8", (5, 37), 19, (), ()),
            ("i8_u8_per_row_and_column", "i8", "u8", (2, 9, 64), 33, "row", "col"),
            ("u8_u8_no_zero_points", "u8", "u8", (3, 8), 5, None, None),
            ("i8_i8_a_zero_point_only", "i8", "i8", (17, 130), 40, (), None),
            ("vector_a", "u8", "i8", (12,), 7, (), "col")):
        k = ashape[-1]
        a, b = ints(adt, ashape), ints(bdt, (k, n))
        m = ashape[-2] if len(ashape) > 1 else 1
        ins, names = [a, b], ["a", "b"]
        a64, b64 = a.a.astype(np.int64), b.a.astype(np.int64)
        if za is not None:
            z = ints(adt, (m,) if za == "row" else ())
            ins.append(z)
            names.append("a_zero_point")
            a64 = a64 - (z.a.astype(np.int64).reshape(m, 1) if za == "row" else z.a.astype(np.int64))
        if zb is not None:
            z = ints(bdt, (n,) if zb == "col" else ())
            ins.append(z)
            names.append("b_zero_point")
            b64 = b64 - z.a.astype(np.int64)
        y = (a64 @ b64).astype(np.int32)
        add_case("matmul_integer", name, ins, tensor("i32", y), names=names)

    # dynamic_quantize_linear: ONNX's DynamicQuantizeLinear in float32 steps
    # (ONNX's reference formula); an all-zero x gets scale 1 as in ONNX
    # Runtime (checked: onnxruntime 1.32.0 gives y 0, scale 1, zero point 0).
    def dql(x):
        lo, hi = np.float32(min(x.min(), 0)), np.float32(max(x.max(), 0))
        rng_ = np.float32(hi - lo)
        scale = np.float32(1) if rng_ == 0 else np.float32(rng_ / np.float32(255))
        zp = np.clip(np.round(np.float32(-(lo / scale))), 0, 255)
        y = np.clip(np.round(x / scale) + np.float32(zp), 0, 255).astype(np.uint8)
        return y, np.float32(scale), np.uint8(zp)
    for name, x in (("normal", rng.normal(size=(3, 4, 5)) * 2),
                    ("all_positive", rng.uniform(0.5, 3.0, size=(17,))),
                    ("all_negative", -rng.uniform(0.5, 3.0, size=(4, 6))),
                    ("all_zero", np.zeros((2, 3)))):
        xt = tensor("f32", x)
        y, sc, zp = dql(xt.a)
        add_case("dynamic_quantize_linear", name, [xt],
                 [tensor("u8", y), tensor("f32", sc), tensor("u8", zp)], nout=3)

    # matmul_integer_scaled: the product's f32 cast · scale [+ bias], each
    # step rounded to f32 as the op's decomposition is.
    for name, adt, bdt, ashape, n, per_col, with_bias in (
            ("scalar_scale", "u8", "i8", (6, 40), 17, False, False),
            ("per_column_scale_and_bias", "u8", "i8", (2, 5, 64), 33, True, True),
            ("i8_activations_scalar_scale_bias", "i8", "i8", (9, 20), 8, False, True)):
        k = ashape[-1]
        a, b = ints(adt, ashape), ints(bdt, (k, n))
        za, zb = ints(adt, ()), ints(bdt, ())
        y = ((a.a.astype(np.int64) - za.a.astype(np.int64)) @ (b.a.astype(np.int64) - zb.a.astype(np.int64)))
        scale = tensor("f32", rng.uniform(1e-4, 1e-2, size=(n,) if per_col else ()))
        out = y.astype(np.int32).astype(np.float32) * scale.a
        ins, names = [a, b, za, zb, scale], ["a", "b", "a_zero_point", "b_zero_point", "scale"]
        if with_bias:
            bias = randn(rng, "f32", (n,))
            out = out + bias.a
            ins.append(bias)
            names.append("bias")
        add_case("matmul_integer_scaled", name, ins, tensor("f32", out), names=names)


def gen_fused_elementwise():
    """A region of elementwise ops run as one kernel: each op of the body
    rounds to its dtype, as it would unfused."""
    rng = rng_for("fused_elementwise")
    def region(params, nodes, out, attrs=None):
        body = Graph("region")
        for name, ty in params:
            body.param(name, ty)
        for outs, op, args, a in nodes:
            body.node(op, args, a, outs)
        body.ret(out)
        g = Graph()
        for name, ty in params:
            g.param(name, ty)
        g.node("fused_elementwise", [n for n, _ in params], {"body": body}, "r")
        return g.ret("r")

    # tanh(a·b) + 0.5 with b broadcast over rows and the constant inside the body.
    a, b = randn(rng, "f32", (2, 3)), randn(rng, "f32", (3,))
    g = region([("a", "f32[2,3]"), ("b", "f32[3]")],
               [("t", "mul", ["a", "b"], {}), ("u", "tanh", ["t"], {}),
                ("h", "constant", [], {"value": tensor("f32", 0.5)}), ("y", "add", ["u", "h"], {})], "y")
    add_case("fused_elementwise", "broadcast_chain_f32", [a, b], tensor("f32", np.tanh(a.f64() * b.f64()) + 0.5),
             graph=g)
    # where(m, clamp(−x, −1, 1), x) cast to f64: bool input, clamp, where, cast.
    x, m = randn(rng, "f32", (5,), 2.0), rbool(rng, (5,))
    g = region([("x", "f32[5]"), ("m", "bool[5]")],
               [("n", "neg", ["x"], {}), ("c", "clamp", ["n"], {"min": -1.0, "max": 1.0}),
                ("w", "where", ["m", "c", "x"], {}), ("y", "cast", ["w"], {"dtype": DT("f64")})], "y")
    add_case("fused_elementwise", "where_clamp_cast_f64", [x, m],
             tensor("f64", np.where(m.a, np.clip(-x.f64(), -1.0, 1.0), x.f64())), graph=g)
    # f16: exp(x)·x rounds after the exp and after the product.
    x = randn(rng, "f16", (2, 4))
    g = region([("x", "f16[2,4]")], [("e", "exp", ["x"], {}), ("y", "mul", ["e", "x"], {})], "y")
    e = np.exp(x.f64()).astype(np.float16).astype(np.float64)
    add_case("fused_elementwise", "exp_times_x_f16", [x], tensor("f16", e * x.f64()), graph=g)


def gen_attention(rng):
    def case(name, qs, ks, vs, kind="none", mask=None, window=0, scale=None, dt="f32"):
        q, k, v = randn(rng, dt, qs), randn(rng, dt, ks), randn(rng, dt, vs)
        ins = [q, k, v] + ([mask] if mask is not None else [])
        m = None if mask is None else (mask.a if mask.dtype == "bool" else mask.f64())
        y = attention_ref(q.f64(), k.f64(), v.f64(), kind, m, window, scale)
        # Cross-check with ONNX Attention (opset 23) where its semantics are ours:
        # rank 4, equal batch axes, and (its causal mask being top-left aligned) Sq == Sk.
        if len(qs) == 4 and qs[:2] == ks[:2] == vs[:2] and kind != "sliding_window" and \
                (kind != "causal" or qs[2] == ks[2]):
            attrs_onnx = {"is_causal": 1} if kind == "causal" else {}
            if scale is not None:
                attrs_onnx["scale"] = scale
            o = onnx_ref("Attention", [q.f64(), k.f64(), v.f64()] + ([m] if m is not None else []), attrs_onnx,
                         opset=23)[0]
            check_close("attention vs ONNX Attention", o, y, 1e-6, 1e-6)
        attrs = attention_attrs(kind, window, scale)
        add_case("attention", name, ins, tensor(dt, y), attrs, acc=True, names=["q", "k", "v", "mask"][: len(ins)])

    case("none_f32", (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    case("causal_square_f32", (2, 4, 8), (2, 4, 8), (2, 4, 8), "causal")
    case("causal_kv_cache_f32", (1, 2, 2, 4), (1, 2, 5, 4), (1, 2, 5, 4), "causal")
    case("sliding_window_f32", (1, 5, 4), (1, 5, 4), (1, 5, 4), "sliding_window", window=2)
    case("sliding_window_kv_cache_f32", (2, 3, 4), (2, 6, 4), (2, 6, 3), "sliding_window", window=3)
    keep = rbool(rng, (3, 5), 0.6)
    keep.a[:, 0] = True  # no fully masked row
    case("custom_mask_broadcast_f32", (2, 3, 4), (2, 5, 4), (2, 5, 4), "custom", keep)
    keep = tensor("bool", [[[True, False, True], [False, False, False]]])
    case("custom_mask_fully_masked_row_is_nan_f32", (1, 2, 4), (1, 3, 4), (1, 3, 2), "custom", keep)
    bias = randn(rng, "f32", (1, 1, 3, 5))
    bias.a[0, 0, 1, 2] = -np.inf
    case("bias_mask_f32", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), "bias", bias)
    case("explicit_scale_dv_ne_d_f32", (1, 3, 4), (1, 4, 4), (1, 4, 6), scale=0.5)
    case("batch_broadcast_f32", (2, 1, 3, 4), (1, 2, 3, 4), (1, 2, 3, 2))
    case("rank2_f32", (3, 4), (5, 4), (5, 2))
    case("causal_f64", (1, 3, 4), (1, 3, 4), (1, 3, 4), "causal", dt="f64")
    case("f16", (1, 2, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), dt="f16")
    case("causal_bf16", (2, 3, 4), (2, 3, 4), (2, 3, 4), "causal", dt="bf16")


def gen_rope(rng):
    def case(name, xs, interleaved=False, dt="f32"):
        x = randn(rng, dt, xs)
        cos, sin = rope_tables(dt, xs[-2], xs[-1])
        y = rope_checked(x.f64(), cos.f64(), sin.f64(), interleaved)
        add_case("rope", name, [x, cos, sin], tensor(dt, y), {"interleaved": True} if interleaved else {},
                 names=["x", "cos", "sin"])

    case("halves_f32", (2, 3, 8))
    case("interleaved_f32", (2, 3, 8), True)
    case("rank4_f32", (1, 2, 3, 4))
    case("rank2_interleaved_f32", (4, 6), True)
    case("f64", (2, 4, 4), dt="f64")
    case("f16_interleaved", (1, 3, 8), True, dt="f16")
    case("bf16", (2, 2, 4), dt="bf16")

    for name, qs, ks, il, dt in (("halves_f32", (1, 4, 3, 8), (1, 2, 3, 8), False, "f32"),
                                 ("interleaved_f32", (2, 3, 4), (2, 3, 4), True, "f32"),
                                 ("f64", (1, 2, 2, 4), (1, 1, 2, 4), False, "f64")):
        q, k = randn(rng, dt, qs), randn(rng, dt, ks)
        cos, sin = rope_tables(dt, qs[-2], qs[-1])
        outs = [tensor(dt, rope_checked(t.f64(), cos.f64(), sin.f64(), il)) for t in (q, k)]
        add_case("qk_rope", name, [q, k, cos, sin], outs, {"interleaved": True} if il else {},
                 names=["q", "k", "cos", "sin"])


# =============================================================================
# quantization
# =============================================================================

def gguf_quantize(x: np.ndarray, dtype: str) -> bytes:
    return gguf_quants.quantize(np.array(x, np.float32), GGUF_TYPE[dtype]).tobytes()


def gguf_dequantize(raw: bytes, dtype: str, shape) -> np.ndarray:
    rows = np.frombuffer(raw, np.uint8).reshape(-1, len(raw) // (math.prod(shape) // shape[-1]))
    return gguf_quants.dequantize(rows, GGUF_TYPE[dtype]).reshape(shape)


def kquant_blocks(rng, dtype: str, nblocks: int) -> bytes:
    """Random but valid k-quant super-blocks: random bytes, with the f16 scale
    fields (d, and dmin where present) set to small positive finite values."""
    nbytes = BLOCKS[dtype][1]
    blocks = rng.integers(0, 256, (nblocks, nbytes), dtype=np.uint8)
    f16 = lambda v: np.frombuffer(np.float16(v).tobytes(), np.uint8)
    # Byte offsets of the f16 fields (ggml block layouts).
    fields = {"q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}[dtype]
    for b in range(nblocks):
        for off in fields:
            blocks[b, off:off + 2] = f16(rng.uniform(0.002, 0.05))
    return blocks.tobytes()


def gen_quant():
    rng = rng_for("quant")
    for dt in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4"):
        x = tensor("f32", rng.standard_normal((2, 64)) * np.array([[1.0], [0.05]]))
        add_case("quantize", f"{dt}_2x64", [x], T(dt, raw=gguf_quantize(x.a, dt), shape=x.shape), {"dtype": DT(dt)})
        # a zero block, a large-magnitude block, a block with one outlier
        rows = np.zeros((3, 32))
        rows[1] = rng.uniform(-300, 300, 32)
        rows[2] = rng.standard_normal(32) * 0.1
        rows[2, 7] = -5.0
        x = tensor("f32", rows)
        add_case("quantize", f"{dt}_zero_large_outlier_rows", [x], T(dt, raw=gguf_quantize(x.a, dt), shape=x.shape),
                 {"dtype": DT(dt)})
        x = tensor("f32", rng.standard_normal((2, 2, 32)))
        add_case("quantize", f"{dt}_rank3", [x], T(dt, raw=gguf_quantize(x.a, dt), shape=x.shape), {"dtype": DT(dt)})

    def deq(name, q: T, want: np.ndarray, to="f32"):
        add_case("dequantize", name, [q], tensor(to, want), {} if to == "f32" else {"dtype": DT(to)})

    for dt in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4"):
        x = rng.standard_normal((2, 64)).astype(np.float32)
        raw = gguf_quantize(x, dt)
        deq(f"{dt}_2x64", T(dt, raw=raw, shape=(2, 64)), gguf_dequantize(raw, dt, (2, 64)))
        # arbitrary bytes (every code point), with a finite scale
        nb = BLOCKS[dt][1]
        blocks = rng.integers(0, 256, (2, nb), dtype=np.uint8)
        if dt == "mxfp4":
            blocks[:, 0] = rng.integers(110, 140, 2)  # E8M0 exponent, not the NaN code 255
        else:
            for b in range(2):
                blocks[b, 0:2] = np.frombuffer(np.float16(rng.uniform(-0.1, 0.1)).tobytes(), np.uint8)
                if dt in ("q4_1", "q5_1"):
                    blocks[b, 2:4] = np.frombuffer(np.float16(rng.uniform(-1, 1)).tobytes(), np.uint8)
        raw = blocks.tobytes()
        deq(f"{dt}_random_bytes", T(dt, raw=raw, shape=(1, 64)), gguf_dequantize(raw, dt, (1, 64)))
    for dt in ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k"):
        raw = kquant_blocks(rng, dt, 2)
        deq(f"{dt}_2x256", T(dt, raw=raw, shape=(2, 256)), gguf_dequantize(raw, dt, (2, 256)))
        raw = kquant_blocks(rng, dt, 2)
        deq(f"{dt}_1x512", T(dt, raw=raw, shape=(1, 512)), gguf_dequantize(raw, dt, (1, 512)))
    # other output dtypes: the f32 decode rounded once
    x = rng.standard_normal((1, 32)).astype(np.float32)
    raw = gguf_quantize(x, "q8_0")
    deq("q8_0_to_f16", T("q8_0", raw=raw, shape=(1, 32)), gguf_dequantize(raw, "q8_0", (1, 32)), "f16")
    deq("q8_0_to_f64", T("q8_0", raw=raw, shape=(1, 32)), gguf_dequantize(raw, "q8_0", (1, 32)), "f64")

    # i4 / u4: two per byte, low nibble first; i4 is two's complement.
    for dt, shape in (("i4", (2, 6)), ("u4", (8,)), ("i4", (16,))):
        n = math.prod(shape)
        raw = rng.integers(0, 256, n // 2, dtype=np.uint8)
        if dt == "i4" and n == 16:
            raw = np.array([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE], np.uint8)  # every nibble 0..15
        nib = np.stack([raw & 0x0F, raw >> 4], axis=1).reshape(-1).astype(np.int64)
        vals = np.where(nib >= 8, nib - 16, nib) if dt == "i4" else nib
        deq(f"{dt}_{'x'.join(map(str, shape))}", T(dt, raw=raw.tobytes(), shape=shape), vals.reshape(shape))
    raw = np.array([0x8F, 0x7F], np.uint8)
    deq("i4_to_f16", T("i4", raw=raw.tobytes(), shape=(4,)), np.array([-1, -8, -1, 7]), "f16")

    # mxfp8: per 32 elements one E8M0 scale byte (2^(e-127)), then 32 float8 E4M3FN bytes.
    for name, shape in (("2x32", (2, 32)), ("1x64", (1, 64))):
        nblocks = math.prod(shape) // 32
        blocks = np.zeros((nblocks, 33), np.uint8)
        blocks[:, 0] = rng.integers(118, 136, nblocks)
        elems = rng.integers(0, 256, (nblocks, 32), dtype=np.uint8)
        elems[(elems & 0x7F) == 0x7F] = 0x00  # 0x7F / 0xFF are NaN in E4M3FN
        blocks[:, 1:] = elems
        decoded = elems.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * np.exp2(blocks[:, :1].astype(np.float64) - 127)
        deq(f"mxfp8_{name}", T("mxfp8", raw=blocks.tobytes(), shape=shape), decoded.reshape(shape))
    deq_extremes = np.zeros((1, 33), np.uint8)
    deq_extremes[0, 0] = 127  # scale 1
    deq_extremes[0, 1:] = [0x00, 0x80, 0x01, 0x81, 0x07, 0x08, 0x7E, 0xFE, 0x38, 0xB8, 0x40, 0x30] + [0x3C] * 20
    decoded = deq_extremes[:, 1:].view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    deq("mxfp8_subnormals_max_scale1", T("mxfp8", raw=deq_extremes.tobytes(), shape=(1, 32)), decoded)

    # dequant_matmul: x (..., K) @ dequant(wq).T
    def dqmm(name, xs, n, dt, raw=None):
        k = xs[-1]
        if raw is None:
            raw = gguf_quantize(rng.standard_normal((n, k)) * 0.5, dt)
        w = gguf_dequantize(raw, dt, (n, k)).astype(np.float64)
        x = randn(rng, "f32", xs)
        add_case("dequant_matmul", name, [x, T(dt, raw=raw, shape=(n, k))], tensor("f32", x.f64() @ w.T),
                 tol=(1e-4, 1e-4), names=["x", "w"])

    dqmm("q4_0", (3, 64), 4, "q4_0")
    dqmm("q8_0_batched", (2, 2, 32), 3, "q8_0")
    dqmm("q4_k", (2, 256), 2, "q4_k", raw=kquant_blocks(rng, "q4_k", 2))
    dqmm("q4_0_vector", (32,), 2, "q4_0")
    dqmm("mxfp4", (2, 64), 2, "mxfp4")
    dqmm("q6_k", (1, 256), 2, "q6_k", raw=kquant_blocks(rng, "q6_k", 2))


# =============================================================================
# misc: constant, arange, identity, stop_gradient
# =============================================================================

def gen_misc():
    rng = rng_for("misc")

    def const(name, t: T):
        add_case("constant", name, [], t, {"value": t})

    const("f32", randn(rng, "f32", (2, 3)))
    const("special_f32", tensor("f32", [NAN, INF, -INF, -0.0, 1e-45]))
    const("i64_scalar", tensor("i64", -(2**40)))
    const("bool", tensor("bool", [True, False, True]))
    const("f16", randn(rng, "f16", (2, 2)))
    const("bf16", randn(rng, "bf16", (3,)))
    const("f64", randn(rng, "f64", (2,)))
    const("c64", c64(rng, (2,)))
    const("i8", tensor("i8", [-128, 0, 127]))
    const("u8", tensor("u8", [0, 255]))
    const("empty_f32", tensor("f32", np.zeros((0,))))

    def arange(name, n, start=None, step=None, dtype=None):
        s = 0.0 if start is None else start
        d = 1.0 if step is None else step
        dt = "i64" if dtype is None else dtype
        vals = s + np.arange(n) * d  # computed in float64, then cast to dtype
        attrs = {}
        if start is not None:
            attrs["start"] = start
        if step is not None:
            attrs["step"] = step
        attrs["len"] = n
        if dtype is not None:
            attrs["dtype"] = DT(dtype)
        want = tensor(dt, np.trunc(vals)) if dt in INTS else tensor(dt, vals)
        add_case("arange", name, [], want, attrs)

    arange("default_i64", 5)
    arange("negative_step_i32", 4, 2.0, -3.0, "i32")
    arange("f32_quarter_steps", 6, 0.5, 0.25, "f32")
    arange("f64_tenth_steps", 7, -1.0, 0.1, "f64")
    arange("f32_tenth_steps", 5, 0.1, 0.1, "f32")
    arange("empty", 0)
    arange("f16", 5, 0.0, 0.5, "f16")
    arange("u8", 4, 10.0, 50.0, "u8")
    arange("int_start_literal_i64", 3, 7.0, None)

    for op in ("identity", "stop_gradient"):
        for dt, shape in (("f32", (2, 3)), ("i64", (4,)), ("bool", (2,)), ("c64", (2,)), ("f16", ()), ("f32", (0, 2)),
                          ("bf16", (3,)), ("u8", (2, 2))):
            x = sample_of(rng, dt, shape)
            add_case(op, f"{dt}_{'x'.join(map(str, shape)) or 'scalar'}", [x], x)
        x = tensor("f32", [NAN, -INF])
        add_case(op, "nan_inf_f32", [x], x)
    # transfer moves a tensor between devices; on one device it is a copy.
    for dt, shape in (("f32", (2, 3)), ("i32", (4,)), ("bool", (2,)), ("f16", ())):
        x = sample_of(rng, dt, shape)
        add_case("transfer", f"{dt}_{'x'.join(map(str, shape)) or 'scalar'}", [x], x, {"to": "cpu"})


# =============================================================================
# coverage and output
# =============================================================================

def defined_ops() -> list[str]:
    """Every op name in the op tables: the first string argument of each
    def(...)/un(...)/bin(...)/red(...)/sh(...)/fused(...)/formula(...) entry."""
    pat = re.compile(r"\b(?:def|un|bin|red|sh|fused|formula)\(\s*\"([A-Za-z0-9_]+)\"")
    names = []
    for f in OP_SOURCES:
        names += pat.findall((OPS_SRC / f).read_text())
    assert len(names) == len(set(names)), "an op is defined twice"
    return names


def write_all() -> int:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for old in OUT_DIR.glob("*.json"):
        old.unlink()
    total = 0
    for op in sorted(CASES):
        # One case per line: compact, yet diffs stay readable.
        body = ",\n".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in CASES[op])
        text = f'{{"op":{json.dumps(op)},"cases":[\n{body}\n]}}\n'
        path = OUT_DIR / f"{op}.json"
        path.write_text(text)
        total += len(text.encode())
    return total


# =============================================================================
# unsigned 16/32/64-bit integers
# =============================================================================

# Operands per dtype, wrapping for add/sub/mul; u64 crosses 2^63 (where an
# i64 view of the bits turns negative) in both operands.
UINT_PAIRS = {
    "u16": ([65535, 0, 32768, 300, 7, 65000], [1, 1, 32768, 300, 2, 13]),
    "u32": ([2**32 - 1, 0, 2**31, 65536, 7, 4000000000], [1, 1, 2**31, 65536, 2, 3]),
    "u64": ([2**64 - 1, 0, 2**63, 2**63 - 1, 12345678901234567890, 7],
            [1, 1, 2**63, 2, 10, 2**64 - 2]),
}


def gen_unsigned():
    arith = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.floor_divide,
             "rem": np.remainder, "max": np.maximum, "min": np.minimum,
             "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
    for dt, (va, vb) in UINT_PAIRS.items():
        a, b = tensor(dt, va), tensor(dt, vb)
        for op, ref in arith.items():
            add_case(op, dt, [a, b], tensor(dt, ref(a.a, b.a)))
        for op, ref in COMPARE.items():
            add_case(op, dt, [a, b], tensor("bool", ref(a.a, b.a)))
        add_case("bitwise_not", dt, [a], tensor(dt, np.invert(a.a)))
        bits = np.iinfo(NP_DTYPE[dt]).bits
        s = tensor(dt, [0, 1, bits - 1, 3, bits // 2, 5])
        add_case("shl", dt, [a, s], tensor(dt, np.left_shift(a.a, s.a)))
        add_case("shr", dt, [a, s], tensor(dt, np.right_shift(a.a, s.a)))  # logical
        for to in ("f64", "f32", "i64", "i32"):
            add_case("cast", f"{dt}_to_{to}", [a], tensor(to, a.a.astype(NP_DTYPE[to])), {"dtype": DT(to)})
    # Into the unsigned types: integers wrap, floats truncate (in range).
    x = tensor("i64", [-1, 65536, 70000, 5, -(2**63), 2**62 + 3])
    for dt in UINTS:
        add_case("cast", f"i64_to_{dt}_wraps", [x], tensor(dt, x.a.astype(NP_DTYPE[dt])), {"dtype": DT(dt)})
    x = tensor("f64", [0.0, 1.9, 65535.5, 4294967295.0, 2.0**63, 1.8e19])
    add_case("cast", "f64_to_u64", [x], tensor("u64", x.a.astype(np.uint64)), {"dtype": DT("u64")})
    # u64 broadcast against a scalar, and division by zero is an error.
    a, b = tensor("u64", [[2**63 + 5, 9], [2**64 - 1, 0]]), tensor("u64", 2**63)
    add_case("div", "u64_broadcast", [a, b], tensor("u64", a.a // b.a))
    add_case("div", "u64_by_zero_is_error", [tensor("u64", [4, 5]), tensor("u64", [1, 0])],
             error="division by zero")
    # Kernels that order values in i64 refuse u64 above i64::MAX, not a wrong answer.
    x = tensor("u32", [[4000000000, 7, 65536], [1, 2**32 - 1, 0]])
    add_case("reduce_max", "u32", [x], tensor("u32", x.a.max(axis=1)), {"axes": [1], "keepdim": False})
    add_case("reduce_sum", "u32_wraps", [x], tensor("u32", x.a.sum(axis=1, dtype=np.uint32)),
             {"axes": [1], "keepdim": False})
    x = tensor("u64", [2**63 + 1, 3])
    add_case("reduce_max", "u64_above_i64_max_is_error", [x], error="above i64::MAX",
             attrs={"axes": [0], "keepdim": False})



def gen_bitcast():
    rng = rng_for("bitcast")
    pairs = [("f32", "i32"), ("i32", "f32"), ("f64", "i64"), ("i64", "f64"), ("f16", "i16"),
             ("bf16", "u16"), ("u16", "i16"), ("u32", "f32"), ("u64", "i64"), ("i8", "u8"),
             ("bool", "u8"), ("c64", "u64")]
    for a, b in pairs:
        if a in ("f32", "f64", "f16", "bf16"):
            x = tensor(a, list(rng.standard_normal(4) * 3) + [0.0, -0.0, INF, NAN])
        elif a == "bool":
            x = tensor(a, [True, False, True])
        elif a == "c64":
            x = tensor(a, [1.5 - 2j, -0.0 + 1j])
        else:
            info = np.iinfo(NP_DTYPE[a])
            x = tensor(a, [int(info.min), int(info.max), 0, 1, 12345 % int(info.max)])
        add_case("bitcast", f"{a}_to_{b}", [x], tensor(b, x.a.view(NP_DTYPE[b])), {"dtype": DT(b)})
    x = tensor("f32", rng.standard_normal((2, 3)))
    add_case("bitcast", "f32_to_i32_2d", [x], tensor("i32", x.a.view(np.int32)), {"dtype": DT("i32")})


def main() -> int:
    for gen in (gen_unary, gen_binary, gen_where_clamp_cast, gen_reduce, gen_matmul, gen_shape, gen_index,
                gen_signal, gen_control, gen_fused, gen_folds, gen_integer, gen_fused_elementwise, gen_quant, gen_misc,
                gen_unsigned, gen_bitcast):
        gen()
    ops = defined_ops()
    unknown = sorted(set(CASES) - set(ops))
    if unknown:
        print(f"error: vectors for ops that are not defined: {unknown}", file=sys.stderr)
        return 1
    size = write_all()
    missing = [op for op in ops if not (OUT_DIR / f"{op}.json").exists()]
    ncases = sum(len(v) for v in CASES.values())
    print(f"covered {len(ops) - len(missing)}/{len(ops)} ops, {ncases} cases, {size / 1e6:.2f} MB in {OUT_DIR}")
    print("ops: " + " ".join(op for op in ops if op not in missing))
    if missing:
        print(f"error: no vectors for: {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
