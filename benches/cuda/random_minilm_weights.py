# Random fp16 weights with MiniLM's tensor names and shapes (the header of
# the real file: its first 8 bytes give the JSON header's length)
# Usage: random_minilm_weights.py HEADER.json OUT.safetensors: timings do not depend on the values, and every check
# compares the GPU with the CPU on the same weights.
import json, struct, sys
import numpy as np
h = open(sys.argv[1], "rb").read()
d = json.loads(h)
end = max(v["data_offsets"][1] for k, v in d.items() if k != "__metadata__")
buf = bytearray(end)
rng = np.random.default_rng(0)
for k, v in d.items():
    if k == "__metadata__":
        continue
    a, b = v["data_offsets"]
    if v["dtype"] == "I64":  # position ids
        buf[a:b] = np.arange((b - a) // 8, dtype=np.int64).tobytes()
        continue
    n = (b - a) // 2
    x = rng.normal(0, 0.05, n)
    if k.endswith("LayerNorm.weight"):
        x = 1 + x
    buf[a:b] = x.astype(np.float16).tobytes()
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    f.write(buf)
