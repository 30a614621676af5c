#!/usr/bin/env python3
"""Convert the all-MiniLM-L6-v2 checkpoint (fp32, 90.9 MB) to fp16
safetensors (~45 MB) so it fits the GPU machine's 64 MiB transfer limit.
The GPU side upcasts to fp32 for the fp32 runs (both rlx and PyTorch), so
both see identical weights.

usage: make_fp16_weights.py SRC_DIR DEST_DIR
"""
import json, os, shutil, sys
from safetensors.numpy import load_file, save_file
import numpy as np

src, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest, exist_ok=True)
w = load_file(os.path.join(src, "model.safetensors"))
out = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in w.items()}
save_file(out, os.path.join(dest, "model.fp16.safetensors"))
shutil.copy(os.path.join(src, "config.json"), os.path.join(dest, "config.json"))
print(f"{len(out)} tensors -> {dest}/model.fp16.safetensors")
