//===- MlstmCompileTest.cpp - Every mLSTM variant compiles, no GPU --------===//
//
// The candidates of every variant (recurrent, fused, two-phase,
// chunk-parallel: the enumerator offers it for 1 x 8 heads of 64/64) for a few
// problems, and each dtype, through the real compilers: nvrtc for sm_80 and
// sm_90a, hiprtc (Debian's ROCm 5.2) for gfx90a. AMD code is compiled only.
// Tensor-core configs (mma.sync / MFMA) of both 16-bit dtypes and a few
// fp32-FMA configs of 16-bit problems are added to the model's candidates.
//
//===----------------------------------------------------------------------===//

#include "CompileTargets.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <set>

using namespace kgen;

namespace {

MlstmProblem problem(int64_t b, int64_t s, int dqk, int dv, DType d) {
  MlstmProblem p;
  p.b = b;
  p.nh = 8;
  p.s = s;
  p.dqk = dqk;
  p.dv = dv;
  p.dtype = d;
  return p;
}

struct Job {
  MlstmProblem p;
  MlstmConfig c;
};

std::vector<Job> jobsFor(Target t) {
  std::vector<Job> jobs;
  for (const MlstmProblem &p : {problem(1, 2048, 64, 64, DType::BF16),
                                problem(8, 8192, 256, 512, DType::BF16),
                                problem(16, 1, 128, 128, DType::BF16)})
    for (const MlstmConfig &c : enumerateConfigs(p, t))
      jobs.push_back({p, c});
  // Tensor-core configs of each chunkwise variant and 16-bit dtype at the
  // three head sizes, where they fit the target (gfx90a's 64 KiB LDS takes
  // the 64/64 ones only): the model may rank FMA configs above them (on
  // gfx90a and sm_80 it does for short problems).
  const int mmaShapes[][5] = {
      {64, 64, 32, 32, 4}, {128, 128, 64, 64, 8}, {256, 512, 32, 64, 8}};
  for (DType d : {DType::BF16, DType::F16})
    for (MlstmVariant v :
         {MlstmVariant::Fused, MlstmVariant::TwoPhase, MlstmVariant::ChunkPar})
      for (const auto &x : mmaShapes) {
        MlstmProblem p = problem(2, 4096, x[0], x[1], d);
        MlstmConfig c{v, x[2], x[3], x[4]};
        if (!checkConfig(p, c, t) &&
            mlstmUsesMma(p, c, mlstmKernels(c).back(), t))
          jobs.push_back({p, c});
      }
  // 16-bit inputs on the fp32 FMA path (chunk 16: no tensor-core tiles),
  // which the model ranks below the tensor-core configs.
  for (MlstmVariant v :
       {MlstmVariant::Fused, MlstmVariant::TwoPhase, MlstmVariant::ChunkPar}) {
    MlstmProblem p = problem(1, 2048, 64, 64, DType::BF16);
    MlstmConfig c{v, 16, 32, 4};
    if (!checkConfig(p, c, t) && !mlstmUsesMma(p, c, mlstmKernels(c).back(), t))
      jobs.push_back({p, c});
  }
  for (DType d : {DType::F16, DType::F32}) {
    MlstmProblem p = problem(2, 4096, 128, 256, d);
    std::set<MlstmVariant> seen;
    for (const MlstmConfig &c : enumerateConfigs(p, t))
      if (seen.insert(c.variant).second)
        jobs.push_back({p, c});
  }
  return jobs;
}

} // namespace

TEST(MlstmCompile, EveryVariantCompiles) {
  RuntimeOptions opts;
  opts.target = Target::SM90A;
  Runtime rt(opts);
  const std::vector<Target> targets = compiletest::compilerTargets();
  if (targets.empty())
    GTEST_SKIP() << "neither nvrtc nor hiprtc is installed";
  // Per target: the kernels on tensor cores, and the variants compiled.
  std::vector<size_t> mmaCounts(targets.size());
  std::vector<std::set<MlstmVariant>> variants(targets.size());
  const std::vector<compiletest::TargetCompiles> results =
      compiletest::compileOnEachTarget(
          targets, [&](size_t n, compiletest::TargetCompiles &r) {
            const Target t = targets[n];
            for (const Job &j : jobsFor(t))
              r.add([&] {
                std::shared_ptr<const MlstmPlan> plan =
                    rt.compileMlstm(j.p, j.c, t);
                for (size_t i = 0; i < plan->kernels.size(); ++i)
                  if (mlstmUsesMma(j.p, j.c, mlstmKernels(j.c)[i], t))
                    ++mmaCounts[n];
                variants[n].insert(j.c.variant);
                return plan->kernels;
              });
          });
  for (size_t n = 0; n < targets.size(); ++n) {
    compiletest::report(targets[n], results[n], "mlstm kernels");
    std::printf("%s: %zu of them on tensor cores\n",
                std::string(toString(targets[n])).c_str(), mmaCounts[n]);
    EXPECT_GT(results[n].count, 20u);
    EXPECT_GT(mmaCounts[n], 4u) << "tensor-core kernels among them";
    EXPECT_EQ(variants[n].size(), 4u) << "every variant has a candidate";
  }
}
