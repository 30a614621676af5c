#!/usr/bin/env python3
"""Full GGUF conformance on real files (scripts/check-gguf runs it).

1. Dequantize: for each GGUF given, `rlx convert FILE.gguf OUT.safetensors`
   must give, for every tensor, the f32 bits of `gguf.quants.dequantize`.
2. Quantize: `rlx quantize SRC.safetensors OUT.gguf --type T` on real f32
   weights must give, for every quantized tensor, the bytes of
   `libgguf.quantize_rows` (ggml's encoders), and of `gguf.quants.quantize`
   where gguf has an encoder.
3. Round trip: safetensors -> GGUF -> safetensors keeps every tensor.

Usage: check_real.py RLX_BINARY WORK_DIR --gguf FILE... --safetensors FILE
"""
import argparse
import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import gguf
import libgguf
from gguf import GGMLQuantizationType as Q

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8,
             "I16": np.int16, "I32": np.int32, "I64": np.int64, "BF16": np.uint16}


def read_safetensors(path):
    b = pathlib.Path(path).read_bytes()
    n = int.from_bytes(b[:8], "little")
    header = json.loads(b[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        a = np.frombuffer(b[8 + n + s:8 + n + e], ST_DTYPES[v["dtype"]]).reshape(v["shape"])
        out[k] = (v["dtype"], a)
    return out


def rlx(binary, *args):
    t = time.time()
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"rlx {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return time.time() - t, r.stdout.strip()


def check_dequantize(binary, work, path):
    out = work / (pathlib.Path(path).stem + ".safetensors")
    secs, msg = rlx(binary, "convert", path, str(out))
    print(f"  rlx convert: {secs:.1f} s: {msg}")
    ours = read_safetensors(out)
    r = gguf.GGUFReader(path)
    counts = {}
    for t in r.tensors:
        ty = Q(t.tensor_type)
        if ty in (Q.F32, Q.F16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64, Q.BF16):
            want = np.asarray(t.data)
            if ty == Q.BF16:
                want = want.view(np.uint16)
        else:
            want = gguf.quants.dequantize(np.asarray(t.data), ty).astype(np.float32)
        dtype, got = ours[t.name]
        want = want.reshape(got.shape)
        same = got.tobytes() == want.astype(got.dtype).tobytes() and got.dtype == want.dtype
        if not same:
            bad = np.flatnonzero(got.view(np.uint8) != want.view(np.uint8))
            sys.exit(f"FAIL {path}: tensor {t.name} ({ty.name}) differs, first byte {bad[:1]}")
        counts[ty.name] = counts.get(ty.name, 0) + 1
    print(f"  dequantize bit-exact: {len(r.tensors)} tensors ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})")
    return out


def check_quantize(binary, work, src, types):
    total = 0
    f32 = {k: a for k, (d, a) in read_safetensors(src).items() if d == "F32"}
    for name in types:
        t = getattr(Q, name.upper())
        out = work / f"quant-{name}.gguf"
        secs, msg = rlx(binary, "quantize", src, str(out), "--type", name, "--fallback", "q8_0")
        r = gguf.GGUFReader(str(out))
        n = 0
        for ti in r.tensors:
            ty = Q(ti.tensor_type)
            if ty in (Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64):
                continue
            x = f32[ti.name].reshape(-1, f32[ti.name].shape[-1])
            want = np.asarray(libgguf.quantize_rows(np.ascontiguousarray(x), ty)).tobytes()
            got = np.asarray(ti.data).tobytes()
            if got != want:
                sys.exit(f"FAIL quantize {name}: tensor {ti.name} ({ty.name}) differs from libgguf")
            if ty in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4):
                assert gguf.quants.quantize(x, ty).tobytes() == got, (name, ti.name)
            n += 1
        total += n
        print(f"  quantize {name}: {n} tensors bit-exact vs libgguf ({secs:.1f} s): {msg}")
    return total


def check_round_trip(binary, work, src):
    g = work / "round.gguf"
    s = work / "round.safetensors"
    rlx(binary, "convert", src, str(g))
    rlx(binary, "convert", str(g), str(s))
    a, b = read_safetensors(src), read_safetensors(s)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k][0] == b[k][0] and a[k][1].tobytes() == b[k][1].tobytes(), k
    print(f"  safetensors -> gguf -> safetensors: {len(a)} tensors identical")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("rlx")
    p.add_argument("work")
    p.add_argument("--gguf", nargs="*", default=[])
    p.add_argument("--safetensors")
    p.add_argument("--types", default="q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k,q4_k,q5_k,q6_k,mxfp4")
    a = p.parse_args()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    converted = []
    for f in a.gguf:
        print(f"{f}:")
        converted.append(check_dequantize(a.rlx, work, f))
    # Real LLM weights (the first file's, dequantized) through the k-quants.
    if converted:
        print(f"{converted[0]} (dequantized LLM weights):")
        check_quantize(a.rlx, work, str(converted[0]), ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"])
    if a.safetensors:
        print(f"{a.safetensors}:")
        check_quantize(a.rlx, work, a.safetensors, a.types.split(","))
        check_round_trip(a.rlx, work, a.safetensors)
    print("check-gguf: OK")


if __name__ == "__main__":
    main()
