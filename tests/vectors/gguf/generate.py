#!/usr/bin/env python3
"""Reference vectors for rlx's GGUF reader/writer and block quantizers.

Run from the repository root with the pinned packages
(tests/vectors/gguf/requirements.txt):

    python tests/vectors/gguf/generate.py

Writes, next to this script:

* `rows.f32` + `quant.json`: test rows (little-endian f32, shape in the
  manifest) and, per type, the file `quant-<type>.bin` holding the rows
  quantized by `libgguf.quantize_rows` (ggml's reference encoders; for the
  32-element types and MXFP4 checked here to equal `gguf.quants.quantize`),
  plus the sha256 of `gguf.quants.dequantize` of those bytes as f32.
* `all-types.gguf` + `all-types.json`: a file written by `gguf.GGUFWriter`
  with one metadata key of every value type (arrays of each, nested
  arrays, unicode strings) and tensors of the storage types F32, F16,
  BF16, F64, I8, I16, I32, I64 and quantized Q4_0, Q8_0, Q4_K, Q6_K, with
  what `gguf.GGUFReader` reads back (keys, types, values, tensor names,
  types, ggml `ne`, absolute offsets, the bytes in hex, and for BF16 and
  quantized tensors `gguf.quants.dequantize` as f32).
"""
import hashlib
import json
import pathlib

import numpy as np
import gguf
import libgguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

HERE = pathlib.Path(__file__).resolve().parent
TYPES = {
    "q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1, "q8_0": Q.Q8_0,
    "q2_k": Q.Q2_K, "q3_k": Q.Q3_K, "q4_k": Q.Q4_K, "q5_k": Q.Q5_K, "q6_k": Q.Q6_K,
    "mxfp4": Q.MXFP4,
}
GGUF_ENCODES = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4"}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_rows() -> np.ndarray:
    """Rows of 512 values that reach every branch of the encoders."""
    rng = np.random.default_rng(20261203)
    n = 512
    rows = [
        rng.standard_normal(n),
        rng.standard_normal(n) * 0.02,             # weight-like magnitudes
        rng.standard_normal(n) * 1e3,
        rng.uniform(0.0, 1.0, n),                  # all positive: min clamps to 0
        -rng.uniform(0.5, 2.0, n),                 # all negative
        rng.laplace(size=n),                       # heavy tails
        np.zeros(n),                               # all-zero super-blocks
        np.full(n, 0.75),                          # constant
        np.where(rng.uniform(size=n) < 0.9, 0.0, rng.standard_normal(n)),  # sparse
        rng.standard_normal(n) * 1e-20,            # below the all-zero threshold
        np.round(rng.standard_normal(n) * 4) / 4,  # many exact ties
        np.linspace(-3, 3, n),
    ]
    spike = rng.standard_normal(n) * 0.01
    spike[::37] = 50.0
    rows.append(spike)
    mixed = rng.standard_normal(n)
    mixed[:16] = 0.0                                # one zero group inside a block
    mixed[256:288] = 1e-3
    rows.append(mixed)
    for scale in (0.1, 10.0):
        rows.append(rng.standard_t(3, n) * scale)
    return np.stack(rows).astype(np.float32)


def quant_vectors() -> None:
    x = test_rows()
    (HERE / "rows.f32").write_bytes(x.astype("<f4").tobytes())
    manifest = {"rows": x.shape[0], "cols": x.shape[1], "types": {}}
    for name, t in TYPES.items():
        q = libgguf.quantize_rows(x, t)
        raw = np.asarray(q).tobytes()
        if name in GGUF_ENCODES:
            ref = gguf.quants.quantize(x, t).tobytes()
            assert ref == raw, f"libgguf and gguf disagree on {name}"
        (HERE / f"quant-{name}.bin").write_bytes(raw)
        manifest["types"][name] = {"bytes": len(raw), "sha256": sha(raw)}
    (HERE / "quant.json").write_text(json.dumps(manifest, indent=1) + "\n")


def value_json(field) -> object:
    return field.contents()


def gguf_file() -> None:
    rng = np.random.default_rng(7)
    path = HERE / "all-types.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo wörld 🦀")
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", -1.5e300)
    w.add_key_value("t.arr.i32", [1, -2, 3], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("t.arr.f32", [0.5, -0.25], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("t.arr.u8", [0, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("t.arr.bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_array("t.arr.str", ["a", "", "ü✓", "<|im_start|>"])
    w.add_key_value("t.arr.u64", [2**64 - 1], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("t.arr.nested", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)
    w.add_context_length(2048)

    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    w.add_tensor("w.f32", f32)
    w.add_tensor("w.f16", rng.standard_normal((4, 8)).astype(np.float16))
    bf = (rng.standard_normal((2, 8)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("w.bf16", bf.view(np.uint8).reshape(2, 16), raw_dtype=Q.BF16)
    w.add_tensor("w.f64", rng.standard_normal((2, 3)).astype(np.float64))
    w.add_tensor("w.i8", rng.integers(-128, 127, (7,), dtype=np.int8))
    w.add_tensor("w.i16", rng.integers(-3000, 3000, (2, 2), dtype=np.int16))
    w.add_tensor("w.i32", rng.integers(-10**9, 10**9, (5,), dtype=np.int32))
    w.add_tensor("w.i64", rng.integers(-10**15, 10**15, (1, 3), dtype=np.int64))
    w.add_tensor("w.scalar", np.array([3.25], np.float32))
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    w.add_tensor("w.q4_0", gguf.quants.quantize(x, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("w.q8_0", gguf.quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    k = rng.standard_normal((3, 256)).astype(np.float32)
    w.add_tensor("w.q4_k", np.asarray(libgguf.quantize_rows(k, Q.Q4_K)), raw_dtype=Q.Q4_K)
    w.add_tensor("w.q6_k", np.asarray(libgguf.quantize_rows(k, Q.Q6_K)), raw_dtype=Q.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(str(path))
    fields = []
    for f in r.fields.values():
        fields.append({
            "key": f.name,
            "type": [V(t).name for t in f.types],
            "value": f.contents(),
        })
    tensors = []
    for t in r.tensors:
        raw = np.asarray(t.data).tobytes()
        entry = {
            "name": t.name,
            "type": Q(t.tensor_type).name,
            "ne": [int(d) for d in t.shape],
            "offset": int(t.data_offset),
            "bytes": int(t.n_bytes),
            "hex": raw.hex(),
        }
        if t.tensor_type not in (Q.F32, Q.F16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64):
            deq = gguf.quants.dequantize(np.frombuffer(raw, np.uint8), t.tensor_type)
            entry["dequantized"] = [float(v) for v in np.asarray(deq, np.float32).ravel()]
        tensors.append(entry)
    # f64 values that JSON prints exactly; f32 scalars are given as their bits too.
    doc = {"alignment": r.alignment, "data_offset": int(r.data_offset), "fields": fields, "tensors": tensors}
    (HERE / "all-types.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    quant_vectors()
    gguf_file()
    print("wrote", sorted(p.name for p in HERE.iterdir() if p.suffix != ".py"))
