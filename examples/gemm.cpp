//===- gemm.cpp - JIT one GEMM from a host program ------------------------===//
//
// y = x * W^T for x of 532 x 2048 and W of 2048 x 2048 in bf16 (layout nt,
// the shape of a linear layer at a batch of 532 tokens): kgen generates the
// kernel for this problem, compiles it on the first call (or loads it from
// the disk cache) and runs it; the second call reuses it. A few entries are
// checked against an fp32 dot product on the CPU.
//
//   build/bin/kgen-example-gemm
//
// Without a GPU the kernel is still generated and compiled for sm_90a.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/kgen.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

uint16_t toBf16(float f) { // round to nearest even; inputs are finite
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float fromBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

} // namespace

int main() try {
  kgen::Runtime rt;
  // A 'N': x is M x K; B 'T': W is stored N x K. N and K are baked into the
  // kernel, M is taken at run time (the default).
  kgen::GemmProblem p{.m = 532, .n = 2048, .k = 2048, .transB = true};

  if (!rt.backend()) {
    auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<kgen::Kernel> k =
        rt.compile(p, kgen::defaultConfig(p, rt.target()));
    std::printf("no GPU found: compiled %s for %s (%s, %.1f ms, %zu bytes); "
                "it cannot run here\n",
                k->source.name.c_str(),
                std::string(kgen::toString(rt.target())).c_str(),
                k->cacheHit ? "from the cache" : "compiled", msSince(t0),
                k->binary.size());
    return 0;
  }

  kgen::Backend &gpu = *rt.backend();
  std::printf("device: %s (%s)\n", gpu.deviceName().c_str(),
              gpu.archName().c_str());
  const int64_t M = p.m, N = p.n, K = p.k;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint16_t> x(M * K), w(N * K), y(M * N);
  for (uint16_t &v : x)
    v = toBf16(uni(rng));
  for (uint16_t &v : w)
    v = toBf16(uni(rng));

  void *dx = gpu.alloc(x.size() * 2), *dw = gpu.alloc(w.size() * 2),
       *dy = gpu.alloc(y.size() * 2);
  gpu.copyToDevice(dx, x.data(), x.size() * 2);
  gpu.copyToDevice(dw, w.data(), w.size() * 2);

  kgen::GemmArgs args{.a = dx, .b = dw, .c = dy, .m = M};
  double ms[2];
  for (double &t : ms) {
    auto t0 = std::chrono::steady_clock::now();
    rt.gemm(p, args); // the default stream
    gpu.synchronize();
    t = msSince(t0);
  }
  std::printf("first call (generate, compile or load from cache, run): "
              "%.2f ms\nsecond call (run): %.3f ms\n",
              ms[0], ms[1]);

  gpu.copyToHost(y.data(), dy, y.size() * 2);
  gpu.free(dx);
  gpu.free(dw);
  gpu.free(dy);

  // The fp32 dot product rounded to bf16 is within half a bf16 ulp of the
  // exact value; the kernel's fp32 sum in another order adds ~1e-6.
  int bad = 0;
  const int64_t rows[] = {0, 1, 263, M - 1}, cols[] = {0, 7, 1029, N - 1};
  for (int64_t i : rows)
    for (int64_t j : cols) {
      float ref = 0;
      for (int64_t kk = 0; kk < K; ++kk)
        ref += fromBf16(x[i * K + kk]) * fromBf16(w[j * K + kk]);
      float got = fromBf16(y[i * N + j]);
      float tol = std::ldexp(std::fabs(ref), -8) + 1e-3f;
      bool ok = std::fabs(got - ref) <= tol;
      bad += !ok;
      std::printf("  y[%3lld][%4lld] = %10.4f  cpu %10.4f  %s\n", (long long)i,
                  (long long)j, got, ref, ok ? "ok" : "WRONG");
    }
  std::printf("%s\n", bad ? "MISMATCH" : "all checked entries match");
  return bad ? 1 : 0;
} catch (const kgen::Error &e) {
  std::fprintf(stderr, "kgen: %s\n", e.what());
  return 1;
}
