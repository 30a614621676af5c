"""PyTorch's CPU matmul on the shapes of examples/gemm_bf16.rs, bf16 (oneDNN,
AVX512-BF16 here) and fp32, 2 threads; one JSON line per shape."""
import json, time, torch

torch.set_num_threads(2)
shapes = [(128, 384, 384), (128, 384, 1536), (128, 1536, 384), (4096, 384, 384),
          (4096, 384, 1536), (4096, 1536, 384), (4096, 768, 384), (1024, 1024, 1024), (2048, 2048, 2048)]


def p50(f):
    f()
    t = time.perf_counter(); f(); once = time.perf_counter() - t
    reps = min(max(int(0.4 / once), 5), 2000)
    v = []
    for _ in range(reps):
        t = time.perf_counter(); f(); v.append(time.perf_counter() - t)
    return sorted(v)[len(v) // 2]


for m, k, n in shapes:
    a = torch.rand(m, k) * 2 - 1
    b = torch.rand(k, n) * 2 - 1
    ab, bb = a.bfloat16(), b.bfloat16()
    t16 = p50(lambda: ab @ bb)
    t32 = p50(lambda: a @ b)
    fl = 2 * m * k * n
    print(json.dumps({"m": m, "k": k, "n": n, "torch_bf16_ms": t16 * 1e3, "torch_f32_ms": t32 * 1e3,
                      "torch_bf16_gflops": fl / t16 / 1e9, "torch_f32_gflops": fl / t32 / 1e9}), flush=True)
