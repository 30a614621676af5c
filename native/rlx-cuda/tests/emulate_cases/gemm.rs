//! The f16/bf16 tensor-core GEMM in the CPU emulation (part of
//! `emulate.rs`, split out by what it holds).

use super::*;

/// Every tile of our tensor-core GEMM (`hgemm.rs`), f16 and bf16, with a
/// bias, a residual and the erf GELU in the epilogue, on a batched GEMM
/// whose sizes are no multiple of any tile (M = 136 features, N = 45
/// tokens, K = 40, padded leading dimensions), against an f64 reference
/// computed from the same 16-bit inputs. Each output may differ by the
/// 16-bit rounding of the result plus fp32 summation error; elements
/// outside the matrix must stay untouched.
#[test]
fn hgemm_every_tile_with_a_fused_epilogue() {
    if !gxx_ok() {
        eprintln!("skipped: no g++ with C++20");
        return;
    }
    for d in [DType::F16, DType::BF16] {
        let act = rlx_cuda::codegen::expr::unary("gelu", d, "y").unwrap();
        let (bits, val, unit) = match d {
            DType::F16 => ("f2h(v).b", "h2f(h16{b})", 1.0 / 2048.0),
            _ => ("f2b(v).b", "b2f(b16{b})", 1.0 / 256.0),
        };
        let mut src = String::from(PRELUDE);
        src += &rlx_cuda::hgemm::kernels(d, Some(&act));
        let mut runs = String::new();
        for t in rlx_cuda::hgemm::TILES {
            let _ = writeln!(
                runs,
                "  check(\"{n}\", dim3{{(M + {bf} - 1) / {bf}, (N + {bt} - 1) / {bt}, Z}}, {th}, [&] {{ {n}(A.data(), B.data(), D.data(), C.data(), bias.data(), M, N, K, lda, ldb, ldd, sA, sB, sD, M, 1, nullptr, nullptr); }});",
                n = t.name(),
                bf = t.bf,
                bt = t.bt,
                th = t.threads()
            );
        }
        src += &format!(
            r#"
static unsigned short bits(float v) {{ return {bits}; }}
static double val(unsigned short b) {{ return {val}; }}
int main() {{
  const int M = 136, N = 45, K = 40, Z = 2, lda = K + 8, ldb = K, ldd = M + 2;
  const long long sA = (long long)M * lda, sB = (long long)N * ldb, sD = (long long)N * ldd;
  std::vector<unsigned short> A(Z * sA), B(Z * sB), C(Z * sD), bias(Z * M), D(Z * sD);
  auto fill = [](std::vector<unsigned short>& v, int seed) {{
    for (size_t i = 0; i < v.size(); ++i) v[i] = bits((float)((int)((i * 37 + seed * 11) % 97) - 48) / 48.0f);
  }};
  fill(A, 1); fill(B, 2); fill(C, 3); fill(bias, 4);
  int bad = 0;
  auto check = [&](const char* name, dim3 grid, unsigned threads, std::function<void()> k) {{
    std::fill(D.begin(), D.end(), (unsigned short)0x7e00);
    launch(grid, threads, k);
    double worst = 0;
    for (int z = 0; z < Z; ++z) for (int t = 0; t < N; ++t) for (int f = 0; f < ldd; ++f) {{
      unsigned short got = D[z * sD + (long long)t * ldd + f];
      if (f >= M) {{ if (got != 0x7e00) {{ ++bad; printf("%s: wrote outside the matrix at %d,%d\n", name, t, f); }} continue; }}
      double y = 0, mag = 0;
      for (int k = 0; k < K; ++k) {{
        double p = val(A[z * sA + (long long)f * lda + k]) * val(B[z * sB + (long long)t * ldb + k]);
        y += p; mag += fabs(p);
      }}
      double c = val(C[z * sD + (long long)t * ldd + f]), b = val(bias[z * M + f]);
      y += b + c; mag += fabs(b) + fabs(c);
      double want = 0.5 * y * (1 + erf(y / sqrt(2.0)));
      double err = fabs(val(got) - want), tol = {unit} * fabs(want) + 1e-5 * mag + 1e-6;
      worst = std::max(worst, err / tol);
      if (!(err <= tol)) {{ if (++bad < 10) printf("%s: (%d,%d,%d) got %g want %g\n", name, z, t, f, val(got), want); }}
    }}
    printf("%s: worst error / tolerance %.3f\n", name, worst);
  }};
{runs}  printf("bad %d\n", bad);
  return bad ? 1 : 0;
}}
"#
        );
        let exe = gxx(&format!("hgemm_{d}"), &src).unwrap();
        let run = Command::new(&exe).output().unwrap();
        let log = String::from_utf8_lossy(&run.stdout);
        eprintln!("{d}:\n{log}");
        assert!(run.status.success(), "{d}: {log}");
        assert_eq!(
            log.matches("worst error").count(),
            rlx_cuda::hgemm::TILES.len(),
            "{log}"
        );
    }
}
