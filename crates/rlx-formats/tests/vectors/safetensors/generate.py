#!/usr/bin/env python3
"""Reference safetensors files for rlx-formats, written by Hugging Face's
Python `safetensors` package (with numpy, torch and ml_dtypes supplying the
values), plus `expected.json`: every element of every tensor as its raw bit
pattern, so the Rust test compares bits, not rounded decimals.

Regenerate (deterministic; the files are committed):

    pip install safetensors numpy torch ml_dtypes
    python3 crates/rlx-formats/tests/vectors/safetensors/generate.py

Files:
* native.safetensors  -- every dtype rlx stores natively (F64 F32 F16 BF16
  I64 I32 I16 I8 U8 BOOL C64), written by safetensors.torch; rlx must read
  the exact bits and re-serialize the file byte for byte.
* numpy.safetensors   -- written by safetensors.numpy, including the
  unsigned types (U16, U32, U64; rlx loads them as u16, u32, u64).
* fp8.safetensors     -- all 256 bit patterns of F8_E4M3, F8_E5M2,
  F8_E4M3FNUZ, F8_E5M2FNUZ (torch) and F8_E8M0 (ml_dtypes, written through
  the low-level `safetensors.serialize`); the expected values are the
  decoded float32 bits from torch / ml_dtypes.
"""
import json
import os

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261129)

F32_SPECIAL = np.array(
    [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38, 1.1754944e-38],
    dtype=np.float32,
)


def bits(a: np.ndarray):
    """Element bit patterns (ints), row-major."""
    a = np.ascontiguousarray(a).reshape(-1)
    if a.dtype == np.bool_:
        return [int(x) for x in a]
    if a.dtype == np.complex64:
        pairs = a.view(np.uint32).reshape(-1, 2)
        return [[int(r), int(i)] for r, i in pairs]
    if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16:
        width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return [int(x) for x in a.view(width)]
    return [int(x) for x in a]


def entry(stored: str, a: np.ndarray):
    return {"dtype": stored, "shape": list(a.shape), "bits": bits(a)}


expected = {}

# ---- native.safetensors: safetensors.torch, one metadata key -------------
f32 = np.concatenate([F32_SPECIAL, rng.standard_normal(14).astype(np.float32)]).reshape(4, 6)
f64 = np.concatenate([np.array([0.0, -0.0, np.inf, -np.nan, 5e-324, 1.7976931348623157e308]),
                      rng.standard_normal(6)]).reshape(2, 2, 3)
f16 = np.concatenate([np.array([0.0, -0.0, 65504.0, 6e-8, np.inf, np.nan], dtype=np.float16),
                      rng.standard_normal(4).astype(np.float16)])
bf16_vals = np.concatenate([np.array([0.0, -0.0, 3.0e38, 1e-40, np.inf, np.nan, 1.0, -2.5]),
                            rng.standard_normal(4)]).astype(np.float32)
bf16 = torch.from_numpy(bf16_vals).to(torch.bfloat16).reshape(3, 4)
i64 = np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max, 12345678901234], dtype=np.int64)
i32 = np.array([np.iinfo(np.int32).min, -7, 0, 7, np.iinfo(np.int32).max, 99], dtype=np.int32).reshape(2, 3)
i16 = np.array([-32768, -1, 0, 1, 32767, 300], dtype=np.int16).reshape(3, 2)
i8 = np.array([-128, -1, 0, 1, 127, 42], dtype=np.int8)
u8 = np.array([0, 1, 127, 128, 255, 200], dtype=np.uint8).reshape(1, 6)
boolean = np.array([[True, False, True], [False, False, True]])
c64 = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64).reshape(2, 2)
scalar = np.array(2.5, dtype=np.float32)
empty = np.zeros((0, 3), dtype=np.float32)

native = {
    "f64": torch.from_numpy(f64),
    "layer.0.weight": torch.from_numpy(f32),
    "f16": torch.from_numpy(f16),
    "bf16": bf16,
    "i64": torch.from_numpy(i64),
    "i32": torch.from_numpy(i32),
    "i16": torch.from_numpy(i16),
    "i8": torch.from_numpy(i8),
    "u8": torch.from_numpy(u8),
    "bool": torch.from_numpy(boolean),
    "c64": torch.from_numpy(c64),
    "scalar": torch.from_numpy(scalar),
    "empty": torch.from_numpy(empty),
}
safetensors.torch.save_file(native, os.path.join(HERE, "native.safetensors"), metadata={"format": "pt"})
expected["native.safetensors"] = {
    "metadata": {"format": "pt"},
    "tensors": {
        "f64": entry("F64", f64),
        "layer.0.weight": entry("F32", f32),
        "f16": entry("F16", f16),
        "bf16": {"dtype": "BF16", "shape": [3, 4], "bits": [int(x) for x in bf16.view(torch.int16).reshape(-1).numpy().view(np.uint16)]},
        "i64": entry("I64", i64),
        "i32": entry("I32", i32),
        "i16": entry("I16", i16),
        "i8": entry("I8", i8),
        "u8": entry("U8", u8),
        "bool": entry("BOOL", boolean),
        "c64": entry("C64", c64),
        "scalar": entry("F32", scalar),
        "empty": entry("F32", empty),
    },
}

# ---- numpy.safetensors: safetensors.numpy, unsigned widening -------------
u16 = np.array([0, 1, 32767, 32768, 65535, 4242], dtype=np.uint16).reshape(2, 3)
u32 = np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 1, 77], dtype=np.uint32)
u64 = np.array([0, 1, 2**53 + 1, 2**63 - 1], dtype=np.uint64).reshape(2, 2)
np_f32 = rng.standard_normal((3, 5)).astype(np.float32)
np_tensors = {"u16": u16, "u32": u32, "u64": u64, "embeddings.word_embeddings.weight": np_f32}
np_meta = {"format": "np", "note": "written by safetensors.numpy"}
safetensors.numpy.save_file(np_tensors, os.path.join(HERE, "numpy.safetensors"), metadata=np_meta)
expected["numpy.safetensors"] = {
    "metadata": np_meta,
    "tensors": {
        "u16": entry("U16", u16),
        "u32": entry("U32", u32),
        "u64": entry("U64", u64),
        "embeddings.word_embeddings.weight": entry("F32", np_f32),
    },
}

# ---- fp8.safetensors: every bit pattern, decoded by torch / ml_dtypes -----
# Written through the low-level `safetensors.serialize` (TensorSpec over the
# raw bytes 0..255), so F8_E8M0 -- which safetensors.torch does not map --
# comes out of the same writer as the others.
all_bytes = np.arange(256, dtype=np.uint8)
specs = {}
fp8_expected = {}
for stored, spec_dtype, decode in [
    ("F8_E4M3", "float8_e4m3fn", lambda b: torch.from_numpy(b).view(torch.float8_e4m3fn).float().numpy()),
    ("F8_E5M2", "float8_e5m2", lambda b: torch.from_numpy(b).view(torch.float8_e5m2).float().numpy()),
    ("F8_E4M3FNUZ", "float8_e4m3fnuz", lambda b: torch.from_numpy(b).view(torch.float8_e4m3fnuz).float().numpy()),
    ("F8_E5M2FNUZ", "float8_e5m2fnuz", lambda b: torch.from_numpy(b).view(torch.float8_e5m2fnuz).float().numpy()),
    ("F8_E8M0", "float8_e8m0fnu", lambda b: b.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)),
]:
    name = stored.lower()
    specs[name] = safetensors.TensorSpec(dtype=spec_dtype, shape=[16, 16],
                                         data_ptr=all_bytes.ctypes.data, data_len=256)
    decoded = decode(all_bytes.copy()).reshape(16, 16)
    fp8_expected[name] = {"dtype": stored, "shape": [16, 16], "f32_bits": bits(decoded)}
with open(os.path.join(HERE, "fp8.safetensors"), "wb") as f:
    f.write(safetensors.serialize(specs))
expected["fp8.safetensors"] = {"metadata": {}, "tensors": fp8_expected}

expected["_generator"] = {
    "safetensors": safetensors.__version__,
    "numpy": np.__version__,
    "torch": torch.__version__.split("+")[0],
    "ml_dtypes": ml_dtypes.__version__,
}
with open(os.path.join(HERE, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", sorted(k for k in expected if not k.startswith("_")))
