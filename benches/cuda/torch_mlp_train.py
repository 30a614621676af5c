#!/usr/bin/env python3
"""PyTorch side of the GPU training benchmark: the MLP 784-512-512-10
(mean cross-entropy on one-hot labels, SGD lr 0.01 momentum 0.9, fp32
strict), the whole step (forward, backward, optimizer) captured as one CUDA
graph with static inputs, as in PyTorch's whole-network capture recipe.
Timed like the rlx side: `steps` replays, then one synchronize.

usage: torch_mlp_train.py --batches 128,1024 --steps 200 --json OUT
"""
import argparse, json, time
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--batches", default="128,1024")
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--json", default=None)
a = ap.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
res = []
for b in [int(x) for x in a.batches.split(",")]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(b, 784, device=dev)
    y = torch.nn.functional.one_hot(torch.arange(b, device=dev) * 7 % 10, 10).float()

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(x)
        loss = -(y * torch.log_softmax(logits, 1)).sum(1).mean()
        loss.backward()
        opt.step()
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_loss = step()
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(a.steps):
        g.replay()
    torch.cuda.synchronize()
    sec = time.perf_counter() - t
    ips = b * a.steps / sec
    print(f"torch train B={b}: {ips:.0f} img/s ({sec / a.steps * 1e6:.1f} us/step, CUDA graph), loss {static_loss.item():.4f}", flush=True)
    res.append({"impl": "torch cuda-graph step", "batch": b, "img_per_s": ips, "us_per_step": sec / a.steps * 1e6})
if a.json:
    json.dump(res, open(a.json, "w"), indent=1)
