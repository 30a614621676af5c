#!/usr/bin/env python3
"""PyTorch side of the rlx-wgpu MiniLM benchmark (benches/wgpu/run.sh, on the
GPU machine). Same architecture as rlx's (all-MiniLM-L6-v2: 6 layers, 384
hidden, 12 heads, 1536 FFN), seeded random weights (speed does not depend
on their values), ids fixed, mask all ones, token types 0; the timed
function is the encoder (last_hidden_state) + masked mean pool + L2
normalize, as in rlx's graph. fp32 with TF32 off (strict fp32, as rlx).
Wall time of one call + torch.cuda.synchronize(), inputs already on the
GPU, p50 over --runs after 10 warm-ups; eager variants: the lowest of
--repeat such p50s (PyTorch's best showing).

Variants: eager; eager with both outputs copied to the host ("eager+host",
the like-for-like peer of rlx-wgpu's e2e time, which reads its outputs
back); torch.compile (inductor, dynamic batch) captured in a CUDA graph per
batch ("compile+graph").

usage: torch_minilm.py --batches 1,2,4,8,16,32 --seq 128 --runs 30 --json OUT
"""
import argparse, json, time, statistics
import torch
from transformers import BertConfig, BertModel

ap = argparse.ArgumentParser()
ap.add_argument("--batches", default="1,2,4,8,16,32")
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--runs", type=int, default=30)
ap.add_argument("--variants", default="eager,eager+host,compile+graph")
ap.add_argument("--fp16-variants", default="eager", help="run after fp32 with the model in fp16")
ap.add_argument("--repeat", type=int, default=3,
                help="eager variants: p50 measured this many times, the lowest kept (eager is launch-bound and its p50 swings between measurements)")
ap.add_argument("--json", default=None)
a = ap.parse_args()
batches = [int(x) for x in a.batches.split(",")]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
dev = torch.device("cuda")
cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                 intermediate_size=1536, max_position_embeddings=512, layer_norm_eps=1e-12)
model = BertModel(cfg, add_pooling_layer=False).to(dev).eval()
print("torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)


def inputs(b, s):
    ids = torch.tensor([[1000 + ((r * s + k) * 7919) % 20000 for k in range(s)] for r in range(b)], dtype=torch.long)
    mask = torch.ones(b, s, dtype=torch.long)
    return ids.to(dev), mask.to(dev), torch.zeros_like(ids).to(dev)


def embed(ids, mask, types):
    h = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    m = mask.unsqueeze(-1).to(h.dtype)
    pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return h, torch.nn.functional.normalize(pooled, p=2, dim=1)


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
        fn(*args)
    return lambda: g.replay()


results = []
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
                    print(f"  torch.compile: {time.perf_counter() - t:.1f} s", flush=True)
                run = graphed(compiled, args) if variant.endswith("+graph") else (lambda: compiled(*args))
            elif variant == "eager+host":
                run = lambda: [x.cpu() for x in embed(*args)]
            else:
                run = lambda: embed(*args)
            reps = 1 if variant.startswith("compile") else a.repeat
            all_ms = [p50_ms(run, a.runs) for _ in range(reps)]
            ms = min(all_ms)
        print(f"torch fp32 {variant:<14} B={b:<3} p50 {ms:.3f} ms (of {', '.join(f'{x:.3f}' for x in all_ms)})", flush=True)
        results.append({"impl": "torch", "variant": variant, "batch": b, "seq": a.seq, "p50_ms": ms, "p50_ms_each": all_ms})
# fp16 (the peer of rlx-wgpu's f16 run): the same model halved.
if a.fp16_variants:
    model = model.half()
    for variant in a.fp16_variants.split(","):
        assert variant == "eager", "fp16: eager only"
        for b in batches:
            args = inputs(b, a.seq)
            with torch.inference_mode():
                all_ms = [p50_ms(lambda: embed(*args), a.runs) for _ in range(a.repeat)]
                ms = min(all_ms)
            print(f"torch fp16 {variant:<14} B={b:<3} p50 {ms:.3f} ms (of {', '.join(f'{x:.3f}' for x in all_ms)})", flush=True)
            results.append({"impl": "torch", "variant": variant + "-fp16", "batch": b, "seq": a.seq, "p50_ms": ms, "p50_ms_each": all_ms})
# The fp32 matmul ceiling as cuBLAS reaches it (strict fp32), for the
# GFLOP/s comparison.
# fp16 (tensor cores, fp32 accumulation) for rlx-wgpu's f16 matmuls.
for dt, name in [(torch.float32, "f32"), (torch.float16, "f16")]:
    for n in [1024, 2048, 4096]:
        x = torch.randn(n, n, device=dev, dtype=dt)
        ms = p50_ms(lambda: x @ x, 10)
        print(f"torch matmul {name} n={n} {ms:.3f} ms {2 * n**3 / ms / 1e6:.0f} GFLOP/s", flush=True)
        results.append({"impl": "torch", "bench": "matmul", "dtype": name, "n": n, "ms": ms, "gflops": 2 * n**3 / ms / 1e6})
if a.json:
    json.dump(results, open(a.json, "w"), indent=1)
