//===- AttentionCompileTest.cpp - Every attention variant compiles --------===//
//
// Every candidate config kgen::enumerateConfigs yields for three attention
// problems (causal GQA prefill, split-KV decode, varlen with every other
// feature), GQA-packed twins of the first candidates of the prefill and of
// a GQA varlen problem with every feature, persistent wgmma configs (sm_90a),
// and the default config of every head dim pair, goes through the
// real compilers: nvrtc for sm_80 and sm_90a, hiprtc (Debian's ROCm 5.2) for
// gfx90a. The AMD code is compiled, never run (it runs in the emulator).
//
//===----------------------------------------------------------------------===//

#include "CompileTargets.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace kgen;

namespace {

struct Job {
  AttentionProblem problem;
  AttentionConfig config;
};

std::vector<Job> jobsFor(Target t) {
  std::vector<Job> jobs;
  AttentionProblem prefill;
  prefill.batch = 2;
  prefill.headsQ = 16;
  prefill.headsKv = 4;
  prefill.seqlenQ = prefill.seqlenK = 2048;
  prefill.causal = true;
  prefill.lse = true;
  AttentionProblem decode;
  decode.batch = 1;
  decode.headsQ = 32;
  decode.headsKv = 8;
  decode.seqlenQ = 1;
  decode.seqlenK = 32768;
  AttentionProblem varlen;
  varlen.dtype = DType::F16;
  varlen.headDimQk = 64;
  varlen.headDimV = 64;
  varlen.headsQ = varlen.headsKv = 8;
  varlen.seqlenQ = varlen.seqlenK = 513;
  varlen.varlen = varlen.alibi = varlen.bias = varlen.lse = true;
  varlen.windowLeft = 128;
  varlen.windowRight = 0;
  for (const AttentionProblem &p : {prefill, decode, varlen})
    for (const AttentionConfig &c : enumerateConfigs(p, t))
      jobs.push_back({p, c});
  AttentionProblem gqaVarlen = varlen;
  gqaVarlen.headsKv = 2;
  for (const AttentionProblem &p : {prefill, gqaVarlen}) {
    const std::vector<AttentionConfig> cs = enumerateConfigs(p, t);
    for (size_t i = 0; i < cs.size() && i < 4; ++i) {
      AttentionConfig c = cs[i];
      c.packGqa = !c.packGqa;
      if (!checkConfig(p, c, t))
        jobs.push_back({p, c});
    }
  }
  // The persistent wgmma grid: one, two and three consumer warpgroups, on
  // the causal GQA prefill and on a plain head dim of 64.
  if (t == Target::SM90A) {
    AttentionProblem d64 = prefill;
    d64.headDimQk = d64.headDimV = 64;
    d64.headsKv = d64.headsQ;
    d64.causal = d64.lse = false;
    for (const AttentionProblem &p : {prefill, d64})
      for (auto [bm, bn, stages] : {std::tuple{64, 128, 3},
                                    {128, 128, 2},
                                    {192, 64, 2},
                                    {192, 128, 2}}) {
        AttentionConfig c;
        c.loop = AttentionLoop::Wgmma;
        c.blockM = bm;
        c.blockN = bn;
        c.warps = bm / 16;
        c.stages = stages;
        c.persistent = true;
        if (!checkConfig(p, c, t))
          jobs.push_back({p, c});
      }
  }
  for (int dqk : {32, 64, 96, 128, 192, 256})
    for (int dv : {dqk, dqk == 192 ? 128 : 64}) {
      AttentionProblem p;
      p.headDimQk = dqk;
      p.headDimV = dv;
      p.seqlenQ = p.seqlenK = 1024;
      p.dtype = dqk % 64 == 0 ? DType::BF16 : DType::F16;
      p.causal = dqk >= 128;
      jobs.push_back({p, defaultConfig(p, t)});
    }
  return jobs;
}

} // namespace

TEST(AttentionCompile, EveryVariantCompiles) {
  RuntimeOptions opts;
  opts.target = Target::SM90A;
  Runtime rt(opts);
  const std::vector<Target> targets = compiletest::compilerTargets();
  if (targets.empty())
    GTEST_SKIP() << "neither nvrtc nor hiprtc is installed";
  const std::vector<compiletest::TargetCompiles> results =
      compiletest::compileJobsOnEachTarget(rt, targets, jobsFor);
  for (size_t i = 0; i < targets.size(); ++i) {
    compiletest::report(targets[i], results[i], "attention variants");
    EXPECT_GT(results[i].count, 20u);
  }
}
