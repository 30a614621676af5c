"""MLP 784-512-512-10 training throughput (img/s) of the peers, on the same
fixed synthetic batch as rlx's `train_bench` example: fp32, mean
cross-entropy, SGD(lr 0.01, momentum 0.9), 3 warm-up steps, then `repeats`
timings of `steps` steps each; the median is reported.

    python3 peers.py torch|numpy BATCH STEPS REPEATS THREADS   # prints one JSON line
"""
import json
import sys
import time

import numpy as np

SIZES = [784, 512, 512, 10]


def data(batch):
    # The same LCG as train_bench.rs: pixels in [0, 1), labels r % 10.
    s = 42
    x = np.empty(batch * 784, dtype=np.float32)
    a, c, m = 6364136223846793005, 1442695040888963407, 1 << 64
    for i in range(x.size):
        s = (s * a + c) % m
        x[i] = (s >> 40) / float(1 << 24)
    y = np.zeros((batch, 10), dtype=np.float32)
    y[np.arange(batch), np.arange(batch) % 10] = 1.0
    return x.reshape(batch, 784), y


def init():
    rng = np.random.default_rng(1)
    ps = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(a)
        ps.append(rng.uniform(-bound, bound, (a, b)).astype(np.float32))
        ps.append(rng.uniform(-bound, bound, (b,)).astype(np.float32))
    return ps


def numpy_step(ps, bufs, x, y, lr=0.01, mom=0.9):
    """Hand-written forward, backward and SGD-momentum update (OpenBLAS GEMMs)."""
    w1, b1, w2, b2, w3, b3 = ps
    h1 = x @ w1 + b1
    a1 = np.maximum(h1, 0)
    h2 = a1 @ w2 + b2
    a2 = np.maximum(h2, 0)
    z = a2 @ w3 + b3
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = -(y * (z - np.log(e.sum(axis=1, keepdims=True)))).sum() / n
    dz = (p - y) / n
    g3, gb3 = a2.T @ dz, dz.sum(0)
    d2 = (dz @ w3.T) * (h2 > 0)
    g2, gb2 = a1.T @ d2, d2.sum(0)
    d1 = (d2 @ w2.T) * (h1 > 0)
    g1, gb1 = x.T @ d1, d1.sum(0)
    for p_, b_, g_ in zip(ps, bufs, (g1, gb1, g2, gb2, g3, gb3)):
        b_ *= mom
        b_ += g_
        p_ -= lr * b_
    return loss


def run(system, batch, steps, repeats, threads):
    x, y = data(batch)
    if system == "numpy":
        ps = init()
        bufs = [np.zeros_like(p) for p in ps]
        step = lambda: numpy_step(ps, bufs, x, y)
        version = np.__version__
    else:
        import torch
        torch.set_num_threads(threads)
        ps = [torch.tensor(p, requires_grad=True) for p in init()]
        opt = torch.optim.SGD(ps, lr=0.01, momentum=0.9)
        xt, yt = torch.tensor(x), torch.tensor(y)

        def step():
            opt.zero_grad()
            h = torch.relu(xt @ ps[0] + ps[1])
            h = torch.relu(h @ ps[2] + ps[3])
            z = h @ ps[4] + ps[5]
            loss = -(torch.log_softmax(z, -1) * yt).sum() / batch
            loss.backward()
            opt.step()
            return loss
        version = torch.__version__
    for _ in range(3):
        step()
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(batch * steps / (time.perf_counter() - t))
    rates.sort()
    print(json.dumps({"system": system, "batch": batch, "img_per_s": round(rates[len(rates) // 2], 1),
                      "runs": rates, "version": version, "threads": threads}))


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
