"""Reference training steps from PyTorch for rlx-autodiff's parity test.

A small MLP (6-5-4-3, ReLU, mean cross-entropy on one-hot targets; the
same graph as rlx_autodiff::nets::mlp) takes two steps with each optimizer
from the same start; we record the loss of each step and the parameters
after each step. Weights are stored (in, out) like rlx's `x @ W` layout.

    python3 generate.py   # writes mlp_steps.json (torch CPU, float32)
"""
import json
import torch

torch.manual_seed(0)
sizes = [6, 5, 4, 3]
batch = 4
init = []
for a, b in zip(sizes[:-1], sizes[1:]):
    bound = 1.0 / a**0.5
    init.append((torch.rand(a, b) * 2 - 1) * bound)
    init.append((torch.rand(b) * 2 - 1) * bound)
xs = [torch.rand(batch, sizes[0]) for _ in range(2)]
ys = [torch.nn.functional.one_hot(torch.randint(0, 3, (batch,)), 3).float() for _ in range(2)]

optimizers = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
}


def loss_fn(params, x, y):
    h = x
    for k in range(0, len(params), 2):
        h = h @ params[k] + params[k + 1]
        if k + 2 < len(params):
            h = torch.relu(h)
    return -(torch.log_softmax(h, dim=-1) * y).sum() / x.shape[0]


out = {"sizes": sizes, "batch": batch, "init": [t.flatten().tolist() for t in init],
       "x": [x.flatten().tolist() for x in xs], "y": [y.flatten().tolist() for y in ys], "runs": {}}
for name, make in optimizers.items():
    params = [t.clone().requires_grad_(True) for t in init]
    opt = make(params)
    steps = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = loss_fn(params, x, y)
        loss.backward()
        opt.step()
        steps.append({"loss": loss.item(), "params": [p.detach().flatten().tolist() for p in params]})
    out["runs"][name] = steps
out["torch"] = torch.__version__
with open("mlp_steps.json", "w") as f:
    json.dump(out, f)
print("wrote mlp_steps.json with torch", torch.__version__)
