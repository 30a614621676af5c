"""fp32 GEMM emulated on bf16 tensor cores vs strict fp32 (SIMT) on MiniLM's shapes.

Each fp32 operand is split into three bf16 pieces x = x0 + x1 + x2 (8 significant
bits each, 24 in all: an fp32 significand). The six products whose pieces' orders
sum to <= 2 are summed in fp32 by ONE bf16 GEMM over K' = 6K:
    A' = [a0 a0 a0 a1 a1 a2],  B' = [b0; b1; b2; b0; b1; b0].
The products of two bf16 values are exact in fp32; the terms left out are below
2^-24 of the result. Usage (GPU machine): python3 benches/cuda/emu_gemm.py
Prints time per GEMM (CUDA events, median of 20 x 50 calls) and the error vs an
fp64 reference, for strict fp32, TF32, bf16x3 (2 pieces, 3 products) and bf16x6.
"""
import statistics, torch

torch.manual_seed(0)
dev = "cuda"

def split3(x):
    x0 = x.to(torch.bfloat16)
    r = x - x0.float()
    x1 = r.to(torch.bfloat16)
    x2 = (r - x1.float()).to(torch.bfloat16)
    return x0, x1, x2

def mm32(a, b):
    return torch.mm(a, b, out_dtype=torch.float32)

def emu6_prep(a, b):
    a0, a1, a2 = split3(a)
    b0, b1, b2 = split3(b)
    return torch.cat([a0, a0, a0, a1, a1, a2], 1).contiguous(), torch.cat([b0, b1, b2, b0, b1, b0], 0).contiguous()

def emu3_prep(a, b):
    a0, a1, _ = split3(a)
    b0, b1, _ = split3(b)
    return torch.cat([a0, a0, a1], 1).contiguous(), torch.cat([b0, b1, b0], 0).contiguous()

def timed(fn, reps=50, rounds=20):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000 / reps)
    return statistics.median(ts)

def rel_err(x, ref):
    d = (x.double() - ref).abs()
    return (d.max() / ref.abs().max()).item(), (d.norm() / ref.norm()).item()

print(torch.__version__, torch.cuda.get_device_name())
print("shape (tokens x K -> N) | us: fp32 strict, tf32, bf16x3, bf16x6 (mm only), split of A | max/rms rel err vs fp64: fp32, tf32, bf16x3, bf16x6")
for B in (1, 8, 32):
    T = B * 128
    for (K, N, name) in ((384, 1152, "qkv"), (384, 384, "out"), (384, 1536, "up"), (1536, 384, "down")):
        a = torch.randn(T, K, device=dev)
        w = torch.randn(K, N, device=dev) / K ** 0.5
        ref = a.double() @ w.double()
        torch.backends.cuda.matmul.allow_tf32 = False
        f32 = torch.mm(a, w)
        t32 = timed(lambda: torch.mm(a, w))
        torch.backends.cuda.matmul.allow_tf32 = True
        tf = torch.mm(a, w)
        ttf = timed(lambda: torch.mm(a, w))
        torch.backends.cuda.matmul.allow_tf32 = False
        a3, w3 = emu3_prep(a, w)
        a6, w6 = emu6_prep(a, w)
        e3, e6 = mm32(a3, w3), mm32(a6, w6)
        t3 = timed(lambda: mm32(a3, w3))
        t6 = timed(lambda: mm32(a6, w6))
        tsplit = timed(lambda: split3(a))
        errs = [rel_err(x, ref) for x in (f32, tf, e3, e6)]
        print(f"B={B:2} {name:4} {T}x{K}->{N} | {t32:7.1f} {ttf:7.1f} {t3:7.1f} {t6:7.1f} {tsplit:7.1f} | "
              + "  ".join(f"{m:.1e}/{r:.1e}" for m, r in errs), flush=True)
