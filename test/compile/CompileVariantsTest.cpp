//===- CompileVariantsTest.cpp - Every variant compiles, no GPU needed ----===//
//
// Every GEMM config the enumerator yields for a set of shapes, and every
// layout x dtype for two of them (fp8 on sm_90a), goes through the real
// compilers: nvrtc for sm_80 and sm_90a, hiprtc (Debian's ROCm 5.2) for gfx90a.
// This is how CI checks the templates without a GPU; the AMD code is compiled,
// never run.
//
//===----------------------------------------------------------------------===//

#include "CompileTargets.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

using namespace kgen;

namespace {

struct Job {
  GemmProblem problem;
  GemmConfig config;
};

GemmProblem problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, DType ab,
                    DType c) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.transA = ta;
  p.transB = tb;
  p.ab = ab;
  p.c = c;
  return p;
}

std::vector<Job> jobsFor(Target t) {
  std::vector<Job> jobs;
  const int64_t shapes[][3] = {{1, 4096, 4096},
                               {127, 4099, 1023},
                               {532, 2048, 2048},
                               {4096, 4096, 4096}};
  for (auto &s : shapes) {
    GemmProblem p =
        problem(s[0], s[1], s[2], false, true, DType::BF16, DType::BF16);
    for (const GemmConfig &c : enumerateConfigs(p, t))
      jobs.push_back({p, c});
  }
  // Repack (the loop above compiles nt's picks): the first pick of each
  // other layout, with an f16 C.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      if (!ta && tb)
        continue;
      GemmProblem p = problem(127, 4099, 1023, ta, tb, DType::BF16, DType::F16);
      for (const GemmConfig &c : enumerateConfigs(p, t))
        if (c.repack) {
          jobs.push_back({p, c});
          break;
        }
    }
  for (auto &s : {shapes[1], shapes[2]})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType ab : {DType::BF16, DType::F16})
          for (DType c : {ab, DType::F32}) {
            GemmProblem p = problem(s[0], s[1], s[2], ta, tb, ab, c);
            jobs.push_back({p, defaultConfig(p, t)});
          }
  // The fused epilogue: each feature, on a ragged shape (the checked
  // epilogue, pairs or single elements) and a divisible one, with each C
  // dtype; batches change no code but are compiled once as the runtime
  // would build them.
  struct Epilogue {
    BiasKind bias;
    Activation act;
    bool residual;
  };
  const Epilogue epilogues[] = {
      {BiasKind::AlongN, Activation::None, false},
      {BiasKind::AlongM, Activation::ReLU, false},
      {BiasKind::AlongN, Activation::GeluTanh, true},
      {BiasKind::None, Activation::GeluErf, false},
      {BiasKind::AlongM, Activation::SiLU, true},
  };
  for (auto &s : {shapes[1], shapes[2]})
    for (const Epilogue &e : epilogues)
      for (DType c : {DType::BF16, DType::F16, DType::F32}) {
        GemmProblem p = problem(s[0], s[1], s[2], false, true,
                                c == DType::F16 ? DType::F16 : DType::BF16, c);
        p.bias = e.bias;
        p.act = e.act;
        p.residual = e.residual;
        p.batch = c == DType::F32 ? 4 : 1;
        jobs.push_back({p, defaultConfig(p, t)});
      }
  // f32 through TF32 (NVIDIA only: AMD refuses it): every layout, an f32
  // and a bf16 C, an epilogue, and every candidate of a small-M shape
  // (split-K among them).
  if (targetInfo(t).vendor == Vendor::NVIDIA) {
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType c : {DType::F32, DType::BF16}) {
          GemmProblem p = problem(127, 4099, 1023, ta, tb, DType::F32, c);
          p.tf32 = true;
          if (c == DType::BF16) {
            p.bias = BiasKind::AlongN;
            p.act = Activation::GeluTanh;
            p.residual = true;
          }
          jobs.push_back({p, defaultConfig(p, t)});
        }
    GemmProblem p =
        problem(16, 4096, 4096, false, true, DType::F32, DType::F32);
    p.tf32 = true;
    for (const GemmConfig &c : enumerateConfigs(p, t))
      jobs.push_back({p, c});
  }
  // fp8 inputs (sm_90a only; the others refuse them): every candidate of an
  // LLM shape and a small-M one in e4m3, and e5m2's default into bf16 and
  // f16, the last with the fused epilogue.
  if (t == Target::SM90A) {
    for (int64_t m : {532, 64}) {
      GemmProblem p =
          problem(m, 2048, 4096, false, true, DType::E4M3, DType::BF16);
      p.alignA = p.alignB = 16;
      for (const GemmConfig &c : enumerateConfigs(p, t))
        jobs.push_back({p, c});
    }
    for (DType c : {DType::BF16, DType::F16}) {
      GemmProblem p = problem(127, 4099, 1040, false, true, DType::E5M2, c);
      p.alignA = p.alignB = 16;
      if (c == DType::F16) {
        p.bias = BiasKind::AlongN;
        p.act = Activation::SiLU;
        p.residual = true;
      }
      jobs.push_back({p, defaultConfig(p, t)});
    }
  }
  // The gemv loop (NVIDIA, small M; candidates of {1, 4096, 4096} above
  // too): B stored K x N, each M tile size, the epilogue with an f32 C.
  for (int64_t m : {1, 16, 32, 64}) {
    GemmProblem p =
        problem(m, 4096, 4096, false, false, DType::F16, DType::F16);
    if (m == 64) {
      p.c = DType::F32;
      p.bias = BiasKind::AlongN;
      p.act = Activation::GeluErf;
      p.residual = true;
    }
    for (const GemmConfig &c : enumerateConfigs(p, t))
      if (c.loop == GemmLoop::Gemv)
        jobs.push_back({p, c});
  }
  return jobs;
}

} // namespace

TEST(CompileVariants, EveryVariantCompiles) {
  RuntimeOptions opts;
  opts.target = Target::SM90A;
  Runtime rt(opts);
  const std::vector<Target> targets = compiletest::compilerTargets();
  if (targets.empty())
    GTEST_SKIP() << "neither nvrtc nor hiprtc is installed";
  const std::vector<compiletest::TargetCompiles> results =
      compiletest::compileJobsOnEachTarget(rt, targets, jobsFor);
  for (size_t i = 0; i < targets.size(); ++i) {
    compiletest::report(targets[i], results[i], "variants");
    EXPECT_GT(results[i].count, 40u);
  }
}
