#!/usr/bin/env python3
"""PyTorch side of the MiniLM GPU benchmark (run on the GPU machine by
tests/gpu/run.sh --bench). Same model, same weights (fp16 file, upcast for
fp32), same inputs shape, same measurement as the rlx side: wall time of
one forward (encoder + mean pooling + L2 normalize) followed by
torch.cuda.synchronize(), inputs already on the GPU, p50 over --runs.

Variants: eager, eager + CUDA graph (torch.cuda.CUDAGraph), torch.compile
(inductor, default mode, batch dim dynamic so one compile per dtype), and
torch.compile + CUDA graph (the compiled function captured per batch).

usage: torch_minilm.py WEIGHTS_DIR --batches 1,2,4,8,16,32 --seq 128 --runs 50 --json OUT
"""
import argparse, json, time, statistics
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertModel

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--batches", default="1,2,4,8,16,32")
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--runs", type=int, default=50)
ap.add_argument("--modes", default="fp32,fp16")
ap.add_argument("--variants", default="eager,eager+graph,compile,compile+graph")
ap.add_argument("--json", default=None)
a = ap.parse_args()
batches = [int(x) for x in a.batches.split(",")]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
cfg = BertConfig.from_json_file(f"{a.dir}/config.json")
sd = load_file(f"{a.dir}/model.fp16.safetensors")
print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)


def inputs(b, s):
    g = torch.Generator().manual_seed(42 + b)
    ids = torch.zeros(b, s, dtype=torch.long)
    mask = torch.zeros(b, s, dtype=torch.long)
    for r in range(b):
        n = s - (r * 7) % (s // 2)
        ids[r, :n] = torch.randint(1000, cfg.vocab_size, (n,), generator=g)
        ids[r, 0], ids[r, n - 1] = 101, 102
        mask[r, :n] = 1
    return ids.to(dev), mask.to(dev), torch.zeros_like(ids).to(dev)


def p50_ms(fn, runs):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def graphed(fn, args):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*args)
    return lambda: g.replay(), out


results = []
for mode in a.modes.split(","):
    dtype = torch.float16 if mode == "fp16" else torch.float32
    model = BertModel(cfg, add_pooling_layer=False)
    missing = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    model = model.to(dev, dtype).eval()

    def embed(ids, mask, types):
        h = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)

    compiled = None
    for variant in a.variants.split(","):
        for b in batches:
            args = inputs(b, a.seq)
            with torch.inference_mode():
                if variant.startswith("compile"):
                    if compiled is None:
                        t = time.perf_counter()
                        compiled = torch.compile(embed, dynamic=True)
                        compiled(*args)
                        torch.cuda.synchronize()
                        print(f"  torch.compile {mode}: {time.perf_counter() - t:.1f} s", flush=True)
                    fn = compiled
                else:
                    fn = embed
                if variant.endswith("+graph"):
                    run, _ = graphed(fn, args)
                else:
                    run = lambda: fn(*args)
                ms = p50_ms(run, a.runs)
            print(f"torch {mode} {variant:<14} B={b:<3} p50 {ms:.3f} ms", flush=True)
            results.append({"impl": "torch", "mode": mode, "variant": variant, "batch": b, "seq": a.seq, "p50_ms": ms})
if a.json:
    json.dump(results, open(a.json, "w"), indent=1)
