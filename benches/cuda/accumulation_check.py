"""Is the bf16 tensor-core GEMM's fp32 accumulation as accurate as fp32 FMAs? (benches/results/cuda-fp32-emulation.txt)
Run on the GPU machine: python3 benches/cuda/accumulation_check.py
"""
import torch
torch.manual_seed(0)
print("bf16 inputs, fp32 output: error of the tensor-core GEMM vs the exact (fp64) product of the SAME bf16 inputs")
print("K | rms rel err tensor-core bf16->fp32 | rms rel err fp32 SIMT on the same (bf16-valued) inputs")
for K in (384, 1536, 6144):
    a = torch.randn(1024, K, device="cuda").to(torch.bfloat16)
    b = (torch.randn(K, 1152, device="cuda") / K**0.5).to(torch.bfloat16)
    ref = a.double() @ b.double()
    tc = torch.mm(a, b, out_dtype=torch.float32)
    torch.backends.cuda.matmul.allow_tf32 = False
    simt = a.float() @ b.float()
    e = lambda x: ((x.double() - ref).norm() / ref.norm()).item()
    print(K, "| %.1e | %.1e" % (e(tc), e(simt)))
