//===- WgmmaPipelineTest.cpp - ptxas keeps every wgmma pipeline async -----===//
//
// ptxas serializes a kernel's wgmmas (each waits for the one before) when
// other instructions touch their accumulators inside the pipeline (C7514),
// when the accumulators do not fit the registers (C7511), and for a few
// other reasons, and only says so as an info line of a verbose compile:
// "wgmma.mma_async instructions are serialized due to ...". Nothing fails
// and the kernel stays correct, but it runs at a fraction of the tensor
// cores' rate, so a GPU-less CI would never notice. This test compiles the
// sm_90a wgmma variants of every family through nvrtc with
// --ptxas-options=-v and fails on that line. (A DSMEM reduction fed st.async
// from accumulators through __float_as_uint made ptxas serialize a whole
// GEMM kernel: C7514 at 128x192, C7511 at 128x256; see
// bench/results/nvidia-h100.md, 2026-11-23.)
//
//===----------------------------------------------------------------------===//

#include "kgen/Attention.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Error.h"
#include "kgen/Mlstm.h"
#include "kgen/Runtime/Compiler.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace kgen;

namespace {

/// The sm_90a wgmma kernels: the GEMM candidates of four problems (whole
/// tiles, pairs, stream-K, lockstep split-K, fitted widths, swapped tiles;
/// B stored N x K and K x N; bf16 and an f32 C), the attention candidates of a
/// causal GQA prefill, and the mLSTM fused kernel with its gate pre-pass.
std::vector<KernelSource> wgmmaKernels() {
  const Target t = Target::SM90A;
  std::vector<KernelSource> out;
  auto gemm = [](int64_t m, int64_t n, int64_t k, DType c, bool transB = true) {
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.transB = transB;
    p.c = c;
    return p;
  };
  for (const GemmProblem &p :
       {gemm(532, 2048, 2048, DType::BF16), gemm(64, 4096, 4096, DType::BF16),
        gemm(1024, 1024, 1024, DType::F32),
        gemm(532, 2048, 2048, DType::BF16, false)})
    for (const GemmConfig &c : enumerateConfigs(p, t))
      if (c.loop == GemmLoop::Wgmma)
        out.push_back(emitGemm(p, c, t));
  AttentionProblem a;
  a.batch = 2;
  a.headsQ = 16;
  a.headsKv = 4;
  a.seqlenQ = a.seqlenK = 2048;
  a.causal = true;
  for (const AttentionConfig &c : enumerateConfigs(a, t))
    if (c.loop == AttentionLoop::Wgmma)
      out.push_back(emitAttention(a, c, t));
  MlstmProblem m;
  m.dqk = 256;
  m.dv = 512;
  m.b = 8;
  m.nh = 8;
  m.s = 8192;
  for (const MlstmConfig &c : enumerateConfigs(m, t))
    if (c.wgmma) {
      for (MlstmKernel k : mlstmKernels(c))
        out.push_back(emitMlstm(m, c, k, t));
      break;
    }
  return out;
}

} // namespace

TEST(WgmmaPipeline, NoKernelHasItsWgmmasSerialized) {
  std::string why;
  std::unique_ptr<Compiler> nvrtc = openCompiler(Vendor::NVIDIA, &why);
  if (!nvrtc)
    GTEST_SKIP() << "nvrtc unavailable: " << why;
  const std::vector<KernelSource> kernels = wgmmaKernels();
  ASSERT_GE(kernels.size(), 20u) << "too few wgmma variants enumerated";
  // Two threads (CI has two cores; nvrtc compiles single-threaded).
  std::vector<std::string> logs(kernels.size()), errors(kernels.size());
  auto work = [&](size_t first) {
    for (size_t i = first; i < kernels.size(); i += 2) {
      try {
        nvrtc->compile(kernels[i], {"--ptxas-options=-v"}, &logs[i]);
      } catch (const Error &e) {
        errors[i] = e.what();
      }
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string &name = kernels[i].name, &log = logs[i];
    if (!errors[i].empty()) {
      ADD_FAILURE() << name << ": " << errors[i];
      continue;
    }
    // The verbose log names the kernel it compiled: proof it is ptxas's.
    EXPECT_NE(log.find("Compiling entry function"), std::string::npos)
        << name << ": no ptxas info in the log:\n"
        << log;
    EXPECT_EQ(log.find("wgmma.mma_async instructions are serialized"),
              std::string::npos)
        << name << ": ptxas serialized its wgmmas:\n"
        << log;
  }
  std::printf("%zu wgmma kernels compiled with ptxas -v\n", kernels.size());
}
