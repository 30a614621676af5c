"""MiniLM's Q/K/V projections on the H200, strict fp32 (no TF32): three
weights as one strided-batched cuBLAS GEMM (what rlx-cuda runs now) vs one
GEMM over the weights concatenated along N (1152 outputs), at B = 8, 16, 32
(M = 128·B rows). Times with CUDA events over 200 calls after a warm-up.
Run: python3 benches/cuda/qkv_concat.py"""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
H = 384


def timed(f, reps=200):
    for _ in range(10):
        f()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        f()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / reps * 1e3  # µs


print("| B | rows | batched 3 × (384→384) µs | one 384→1152 µs | ratio | TFLOP/s batched | TFLOP/s one |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for b in (8, 16, 32):
    m = 128 * b
    x = torch.randn(m, H, device=dev)
    w = torch.randn(3, H, H, device=dev)  # (out, in) each, adjacent
    bias = torch.randn(3, 1, H, device=dev)
    xb = x.expand(3, m, H)
    wt = w.transpose(1, 2)
    wcat = w.reshape(3 * H, H).t()
    bcat = bias.reshape(3 * H)
    t3 = timed(lambda: torch.baddbmm(bias, xb, wt))
    t1 = timed(lambda: torch.addmm(bcat, x, wcat))
    ref = torch.baddbmm(bias.double(), xb.double(), wt.double())
    got = torch.addmm(bcat, x, wcat).reshape(m, 3, H).permute(1, 0, 2)
    err = (got.double() - ref).abs().max().item()
    fl = 2 * m * H * 3 * H / 1e12
    print(f"| {b} | {m} | {t3:.1f} | {t1:.1f} | {t1 / t3:.2f} | {fl / t3 * 1e6:.1f} | {fl / t1 * 1e6:.1f} |  (max err {err:.1e})")
