//===- MlstmCodegenTest.cpp - mLSTM problem, config, JSON, emitter --------===//

#include "kgen/Error.h"
#include "kgen/Mlstm.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

using namespace kgen;

namespace {

MlstmProblem problem(int64_t b, int64_t nh, int64_t s, int dqk, int dv) {
  MlstmProblem p;
  p.b = b;
  p.nh = nh;
  p.s = s;
  p.dqk = dqk;
  p.dv = dv;
  return p;
}

} // namespace

TEST(MlstmJson, RoundTrip) {
  MlstmProblem p = problem(4, 16, 8192, 128, 256);
  p.dtype = DType::F16;
  p.initialState = true;
  p.finalState = true;
  p.eps = 1e-5f;
  EXPECT_EQ(mlstmProblemFromJson(toJson(p)), p);
  MlstmConfig c{MlstmVariant::TwoPhase, 32, 16, 8};
  EXPECT_EQ(mlstmConfigFromJson(toJson(c)), c);
  EXPECT_EQ(toJson(c).dump(),
            R"({"blockDV":16,"chunk":32,"variant":"twophase","warps":8})");
  MlstmConfig cp{MlstmVariant::ChunkPar, 128, 32, 16};
  EXPECT_EQ(mlstmConfigFromJson(toJson(cp)), cp);
  EXPECT_EQ(toJson(cp).dump(),
            R"({"blockDV":32,"chunk":128,"variant":"chunkpar","warps":16})");
}

TEST(MlstmJson, ErrorsNameTheField) {
  auto msg = [](const char *text, bool config) {
    try {
      auto j = nlohmann::json::parse(text);
      if (config)
        mlstmConfigFromJson(j);
      else
        mlstmProblemFromJson(j);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg(R"({"dqk":64,"dv":64,"heads":8})", false),
            "invalid mlstm JSON: unknown field 'heads' in mlstm problem");
  EXPECT_EQ(msg(R"({"dqk":64})", false), "invalid mlstm JSON: missing 'dv'");
  EXPECT_EQ(msg(R"({"dqk":64,"dv":64,"dtype":"f8"})", false),
            "invalid mlstm JSON: 'dtype' = \"f8\" is not a dtype (bf16, f16, "
            "f32)");
  EXPECT_EQ(msg(R"({"variant":"flash"})", true),
            "invalid mlstm JSON: 'variant' = \"flash\" must be "
            "\"recurrent\", \"fused\", \"twophase\" or \"chunkpar\"");
  EXPECT_EQ(msg(R"({"dqk":64,"dv":64,"final":1})", false),
            "invalid mlstm JSON: 'final' must be true or false, got 1");
}

TEST(MlstmLimits, ProblemMessages) {
  EXPECT_EQ(*checkProblem(problem(1, 1, 1, 48, 64)),
            "mlstm: dqk = 48 must be a multiple of 16 between 64 and 512");
  EXPECT_EQ(*checkProblem(problem(1, 1, 1, 64, 1024)),
            "mlstm: dv = 1024 must be a multiple of 16 between 64 and 512");
  EXPECT_EQ(*checkProblem(problem(1, 1, 0, 64, 64)),
            "mlstm: s = 0 must be >= 1");
  EXPECT_EQ(*checkProblem(problem(1024, 128, 1, 64, 64)),
            "mlstm: b * nh = 131072 exceeds 65535 (one grid row per head); "
            "split the batch");
  EXPECT_FALSE(checkProblem(problem(1, 8, 1, 64, 512)));
}

TEST(MlstmLimits, ConfigMessages) {
  MlstmProblem p = problem(1, 8, 100, 256, 512);
  EXPECT_EQ(*checkConfig(p, {MlstmVariant::Fused, 24, 64, 4}, Target::SM90A),
            "config: chunk = 24 must be 16, 32, 64 or 128 for the fused "
            "variant");
  EXPECT_EQ(*checkConfig(p, {MlstmVariant::Fused, 64, 48, 4}, Target::SM90A),
            "config: blockDV = 48 must be a power of two >= 8 that divides "
            "dv = 512");
  EXPECT_EQ(*checkConfig(p, {MlstmVariant::Fused, 128, 128, 4}, Target::SM90A),
            "config: shared memory 366624 B of the fused kernel exceeds "
            "sm_90a's 232448 B per block; lower chunk or blockDV");
  EXPECT_EQ(*checkConfig(p, {MlstmVariant::Recurrent, 0, 64, 2}, Target::SM80),
            "config: 256 fp32 state registers per thread (4 columns of dqk "
            "* blockDV / threads / 4 rows) exceed the 128 kgen allows on "
            "sm_80; use more warps or a smaller blockDV");
  // Four columns a thread: 4 warps cannot tile a 512-column slice.
  EXPECT_NE(checkConfig(p, {MlstmVariant::Recurrent, 0, 512, 1}, Target::SM80)
                ->find("threads of 4 columns each"),
            std::string::npos);
  EXPECT_FALSE(checkConfig(p, {MlstmVariant::Fused, 64, 64, 4}, Target::SM90A));
  // The recurrent kernel ignores chunk.
  EXPECT_FALSE(
      checkConfig(p, {MlstmVariant::Recurrent, 0, 32, 8}, Target::SM90A));
}

TEST(MlstmCandidates, ValidRankedAndEveryVariant) {
  for (Target t : kAllTargets)
    for (const MlstmProblem &p :
         {problem(8, 8, 8192, 256, 512), problem(1, 8, 2048, 64, 64),
          problem(64, 8, 1, 256, 512), problem(4, 16, 8192, 128, 256)}) {
      std::vector<MlstmConfig> cs = enumerateConfigs(p, t);
      ASSERT_FALSE(cs.empty()) << toString(t);
      std::set<MlstmVariant> variants;
      double last = 0;
      for (const MlstmConfig &c : cs) {
        EXPECT_FALSE(checkConfig(p, c, t)) << toJson(c).dump();
        double cost = mlstmModelCost(p, c, t);
        EXPECT_GE(cost, last);
        last = cost;
        variants.insert(c.variant);
      }
      // CDNA's 64 KiB LDS holds no chunk of DQK = 256 with its C slice.
      if (targetInfo(t).vendor == Vendor::NVIDIA || p.dqk <= 128)
        for (MlstmVariant v : {MlstmVariant::Recurrent, MlstmVariant::Fused,
                               MlstmVariant::TwoPhase})
          EXPECT_TRUE(variants.count(v))
              << toString(t) << " dqk " << p.dqk << " " << toString(v);
      // Chunk-parallel: offered for few heads x slices and long S only.
      if (p.b * p.nh == 8 && p.s == 2048)
        EXPECT_TRUE(variants.count(MlstmVariant::ChunkPar)) << toString(t);
      if (p.s < 64)
        EXPECT_FALSE(variants.count(MlstmVariant::ChunkPar)) << toString(t);
      EXPECT_FALSE(checkConfig(p, defaultConfig(p, t), t));
    }
}

TEST(MlstmCandidates, BatchAwareDefault) {
  // Decoding: recurrent; many heads: fused; few heads: chunk-parallel (the
  // model ranks it above two-phase there).
  EXPECT_EQ(defaultConfig(problem(64, 8, 1, 256, 512), Target::SM90A).variant,
            MlstmVariant::Recurrent);
  EXPECT_EQ(defaultConfig(problem(8, 8, 8192, 256, 512), Target::SM90A).variant,
            MlstmVariant::Fused);
  EXPECT_EQ(defaultConfig(problem(1, 8, 2048, 64, 64), Target::SM90A).variant,
            MlstmVariant::ChunkPar);
}

TEST(MlstmCandidates, WgmmaWhereFused) {
  // sm_90a: the wgmma kernel where the fused form is wanted (H100: 1.4-1.8x
  // the mma.sync fused config the model ranked first at the 7B heads B = 1,
  // 128/256 NH 16 B = 1 and 128/128 B = 4) and, its sequence split, where
  // the heads x slices are few and DQK >= 128 (128/128 B = 1: 40 against
  // 55 us chunk-parallel); chunk-parallel at DQK 64 (64/128 B = 1); never on
  // sm_80 or for fp32 inputs.
  for (const MlstmProblem &p :
       {problem(1, 8, 8192, 256, 512), problem(8, 8, 8192, 256, 512),
        problem(1, 16, 8192, 128, 256), problem(4, 8, 2048, 128, 128),
        problem(1, 8, 2048, 128, 128)}) {
    const MlstmConfig c = defaultConfig(p, Target::SM90A);
    EXPECT_TRUE(c.wgmma) << p.b << " " << p.dqk << "/" << p.dv;
    EXPECT_EQ(c.variant, MlstmVariant::Fused);
    // And the tuner times it.
    const std::vector<MlstmConfig> cs = enumerateConfigs(p, Target::SM90A);
    EXPECT_TRUE(std::any_of(cs.begin(), cs.end(),
                            [](const MlstmConfig &x) { return x.wgmma; }));
  }
  EXPECT_EQ(defaultConfig(problem(1, 8, 2048, 64, 128), Target::SM90A).variant,
            MlstmVariant::ChunkPar);
  EXPECT_FALSE(
      defaultConfig(problem(1, 8, 8192, 256, 512), Target::SM80).wgmma);
  MlstmProblem f32 = problem(1, 8, 8192, 256, 512);
  f32.dtype = DType::F32;
  EXPECT_FALSE(defaultConfig(f32, Target::SM90A).wgmma);
}

TEST(MlstmCandidates, ChunkParallelSmallHeads) {
  // H200, tuned (bench/results): with few chunk blocks 128-token chunks on
  // 16 warps win, with many (64/64 at B = 4 S = 4096: 1024 of them)
  // 64-token chunks on 4 warps, by 12.7% over the runner-up and 23% over
  // the 128-token config the heuristic took before.
  const MlstmConfig few =
      defaultConfig(problem(1, 8, 2048, 64, 64), Target::SM90A);
  EXPECT_EQ(few.variant, MlstmVariant::ChunkPar);
  EXPECT_EQ(few.chunk, 128);
  EXPECT_EQ(few.warps, 16);
  const MlstmConfig many =
      defaultConfig(problem(4, 8, 4096, 64, 64), Target::SM90A);
  EXPECT_EQ(many.variant, MlstmVariant::ChunkPar);
  EXPECT_EQ(many.chunk, 64);
  EXPECT_EQ(many.warps, 4);
}

TEST(MlstmCandidates, StepSlicesByStateTraffic) {
  // The decoding step (7B heads, states in place) is its C traffic: the
  // heuristic takes 256-byte row runs (64 columns) once the slices fill the
  // GPU, and 32 columns at B = 1, where 64 would leave half the units idle.
  // H200, tuned: d32 w16 won at B = 1, d64 w4 at B = 16 and 64.
  for (int64_t b : {1, 16, 64}) {
    MlstmProblem p = problem(b, 8, 1, 256, 512);
    p.initialState = p.finalState = true;
    const MlstmConfig c = defaultConfig(p, Target::SM90A);
    EXPECT_EQ(c.variant, MlstmVariant::Recurrent) << b;
    EXPECT_EQ(c.blockDV, b == 1 ? 32 : 64) << b;
    // Compiled for as many blocks per SM as its C registers allow.
    const MlstmTraits tr =
        mlstmTraits(p, c, MlstmKernel::Recurrent, Target::SM90A);
    EXPECT_EQ(tr.minBlocks, 65536 / (tr.threads * (4 * tr.rows + 32))) << b;
    EXPECT_NE(emitMlstm(p, c, MlstmKernel::Recurrent, Target::SM90A)
                  .source.find("__launch_bounds__(" +
                               std::to_string(tr.threads) + ", " +
                               std::to_string(tr.minBlocks) + ")"),
              std::string::npos)
        << b;
  }
}

TEST(MlstmEmitter, NamesSourceAndLaunch) {
  MlstmProblem p = problem(2, 8, 100, 256, 512);
  MlstmConfig c{MlstmVariant::TwoPhase, 64, 32, 4};
  EXPECT_EQ(mlstmKernelName(p, c, MlstmKernel::States),
            "kgen_mlstm_bf16_qk256_v512_states_c64_d32_w4");
  EXPECT_EQ(mlstmKernelName(p, {MlstmVariant::Recurrent, 0, 64, 8},
                            MlstmKernel::Recurrent),
            "kgen_mlstm_bf16_qk256_v512_recurrent_d64_w8");
  KernelSource ks = emitMlstm(p, c, MlstmKernel::Outputs, Target::SM90A);
  EXPECT_EQ(ks.name, "kgen_mlstm_bf16_qk256_v512_outputs_c64_d32_w4");
  EXPECT_NE(ks.source.find("kgen::mlstm::outputs<Config>(p);"),
            std::string::npos);
  EXPECT_NE(ks.source.find("static constexpr int kDQK = 256, kDV = 512;"),
            std::string::npos);
  EXPECT_EQ(ks.threads, 128);
  EXPECT_EQ(ks.headers.back(), "kgen/mlstm/mlstm.h");
  LaunchDims d =
      mlstmLaunchDims(p, c, MlstmKernel::Outputs, Target::SM90A, 2, 8, 100);
  EXPECT_EQ(d.grid[0], 16u * 2u); // 16 slices x 2 chunks
  EXPECT_EQ(d.grid[1], 16u);
  EXPECT_EQ(d.smemBytes, unsigned(ks.smemBytes));
  // The outputs kernel waits for the states in its template, so on sm_90a
  // it launches while the states kernel finishes; elsewhere it has no wait.
  EXPECT_TRUE(d.overlapsPrevious);
  EXPECT_FALSE(
      mlstmLaunchDims(p, c, MlstmKernel::Outputs, Target::SM80, 2, 8, 100)
          .overlapsPrevious);
  d = mlstmLaunchDims(p, c, MlstmKernel::States, Target::SM90A, 2, 8, 100);
  EXPECT_EQ(d.grid[0], 16u);
  // The first kernel of the call waits for the caller's kernels at its
  // start (mlstm.h), so it too launches while they finish.
  EXPECT_TRUE(d.overlapsPrevious);
  EXPECT_EQ(mlstmWorkspaceBytes(p, c, 2, 8, 100),
            size_t(16 * 2) * (256 * 512 + 256 + 1) * 4);
  EXPECT_EQ(mlstmWorkspaceBytes(p, {MlstmVariant::Fused, 64, 32, 4}, 2, 8, 100),
            0u);
}

TEST(MlstmEmitter, ChunkParallelKernels) {
  MlstmProblem p = problem(1, 8, 2048, 64, 64);
  MlstmConfig c{MlstmVariant::ChunkPar, 128, 32, 16};
  ASSERT_FALSE(checkConfig(p, c, Target::SM90A));
  const std::vector<MlstmKernel> ks = mlstmKernels(c);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0], MlstmKernel::ChunkStates);
  EXPECT_EQ(ks[1], MlstmKernel::Combine);
  EXPECT_EQ(ks[2], MlstmKernel::Outputs);
  KernelSource a = emitMlstm(p, c, MlstmKernel::ChunkStates, Target::SM90A);
  EXPECT_EQ(a.name, "kgen_mlstm_bf16_qk64_v64_chunkstates_c128_d32_w16");
  EXPECT_NE(a.source.find("kgen::mlstm::chunkStates<Config>(p);"),
            std::string::npos);
  EXPECT_TRUE(mlstmUsesMma(p, c, MlstmKernel::ChunkStates, Target::SM90A));
  // The same tiles and shared memory as the two-phase states kernel.
  MlstmConfig two = c;
  two.variant = MlstmVariant::TwoPhase;
  EXPECT_EQ(a.smemBytes,
            mlstmTraits(p, two, MlstmKernel::States, Target::SM90A).smemBytes);
  KernelSource b = emitMlstm(p, c, MlstmKernel::Combine, Target::SM90A);
  EXPECT_EQ(b.name, "kgen_mlstm_bf16_qk64_v64_combine_c128_d32_w16");
  EXPECT_NE(b.source.find("kgen::mlstm::combine<Config>(p);"),
            std::string::npos);
  EXPECT_EQ(b.threads, 256);
  EXPECT_FALSE(mlstmUsesMma(p, c, MlstmKernel::Combine, Target::SM90A));
  // Phase A: one block per (chunk, slice, head); phase B: one thread per
  // element of C and n; phase C: the two-phase outputs grid.
  LaunchDims d = mlstmLaunchDims(p, c, MlstmKernel::ChunkStates, Target::SM90A,
                                 1, 8, 2048);
  EXPECT_EQ(d.grid[0], 2u * 16u);
  EXPECT_EQ(d.grid[1], 8u);
  EXPECT_TRUE(d.overlapsPrevious);
  d = mlstmLaunchDims(p, c, MlstmKernel::Combine, Target::SM90A, 1, 8, 2048);
  EXPECT_EQ(d.grid[0], (64u * 64u + 64u + 255u) / 256u);
  EXPECT_EQ(d.block[0], 256u);
  EXPECT_TRUE(d.overlapsPrevious);
  EXPECT_FALSE(
      mlstmLaunchDims(p, c, MlstmKernel::Combine, Target::SM80, 1, 8, 2048)
          .overlapsPrevious);
  d = mlstmLaunchDims(p, c, MlstmKernel::Outputs, Target::SM90A, 1, 8, 2048);
  EXPECT_EQ(d.grid[0], 2u * 16u);
  EXPECT_TRUE(d.overlapsPrevious);
  // (g, m_loc) in fp64 first, then the two-phase layout.
  const MlstmWorkspaceLayout l = mlstmWorkspaceLayout(p, c, 1, 8, 2048);
  EXPECT_EQ(l.gm, 0u);
  EXPECT_EQ(l.c, size_t(8 * 16) * 16);
  EXPECT_EQ(l.n, l.c + size_t(8 * 16) * 64 * 64 * 4);
  EXPECT_EQ(l.m, l.n + size_t(8 * 16) * 64 * 4);
  EXPECT_EQ(l.bytes, l.m + size_t(8 * 16) * 4);
  EXPECT_EQ(mlstmWorkspaceBytes(p, c, 1, 8, 2048), l.bytes);
}

TEST(MlstmEmitter, WgmmaFusedRunsTheGatePrePassFirst) {
  // The 7B heads at S = 8192 - 5: 128 chunks, the last one short.
  MlstmProblem p = problem(8, 8, 8187, 256, 512);
  MlstmConfig c{MlstmVariant::Fused, 64, 128, 12};
  c.wgmma = true;
  ASSERT_FALSE(checkConfig(p, c, Target::SM90A));
  const std::vector<MlstmKernel> ks = mlstmKernels(c);
  ASSERT_EQ(ks.size(), 5u);
  EXPECT_EQ(ks[0], MlstmKernel::GateSums);
  EXPECT_EQ(ks[1], MlstmKernel::Gates);
  EXPECT_EQ(ks[2], MlstmKernel::SegmentStates);
  EXPECT_EQ(ks[3], MlstmKernel::Combine);
  EXPECT_EQ(ks[4], MlstmKernel::Fused);
  EXPECT_EQ(mlstmLeadKernel(c), MlstmKernel::Fused);
  c.wgmma = false; // the mma.sync fused kernel scans its gates itself
  EXPECT_EQ(mlstmKernels(c).size(), 1u);
  EXPECT_EQ(mlstmWorkspaceBytes(p, c, 8, 8, 8187), 0u);
  c.wgmma = true;

  KernelSource g = emitMlstm(p, c, MlstmKernel::Gates, Target::SM90A);
  EXPECT_EQ(g.name, "kgen_mlstm_bf16_qk256_v512_gates_c64_d128_w12_wgmma");
  EXPECT_NE(g.source.find("kgen::mlstm::gateTerms<Config>(p);"),
            std::string::npos);
  EXPECT_EQ(g.smemBytes, 0);
  EXPECT_FALSE(mlstmUsesMma(p, c, MlstmKernel::Gates, Target::SM90A));
  KernelSource sums = emitMlstm(p, c, MlstmKernel::GateSums, Target::SM90A);
  EXPECT_EQ(sums.name,
            "kgen_mlstm_bf16_qk256_v512_gatesums_c64_d128_w12_wgmma");
  EXPECT_NE(sums.source.find("kgen::mlstm::gateSums<Config>(p);"),
            std::string::npos);
  // Both: one warp a chunk, four chunks a block; each next kernel may start
  // while the one before finishes (it waits before it reads what that one
  // wrote).
  for (MlstmKernel k : {MlstmKernel::GateSums, MlstmKernel::Gates}) {
    const LaunchDims d = mlstmLaunchDims(p, c, k, Target::SM90A, 8, 8, 8187);
    EXPECT_EQ(d.grid[0], 32u);
    EXPECT_EQ(d.grid[1], 64u);
    EXPECT_EQ(d.block[0], 128u);
    EXPECT_EQ(d.smemBytes, 0u);
    EXPECT_TRUE(d.overlapsPrevious);
  }
  EXPECT_FALSE(
      mlstmLaunchDims(p, c, MlstmKernel::Gates, Target::SM80, 8, 8, 8187)
          .overlapsPrevious);
  LaunchDims d =
      mlstmLaunchDims(p, c, MlstmKernel::Fused, Target::SM90A, 8, 8, 8187);
  EXPECT_EQ(d.grid[0], 4u);
  EXPECT_TRUE(d.overlapsPrevious);
  // One block an SM (227 KiB at most): V twice, Wp, Cp, h's staging, Q and
  // K with n's rows. Past the 196 KiB carve-out, which once kept the walk's
  // spills in L1 (bench/results, 2026-11-23); the warp-specialized walk
  // spills 24 bytes a thread, not 96.
  EXPECT_EQ(d.smemBytes, 211376u);
  EXPECT_LE(d.smemBytes, 227u * 1024);
  EXPECT_EQ(d.smemBytes,
            mlstmTraits(p, c, MlstmKernel::Fused, Target::SM90A).smemBytes);
  // The terms of 64 tokens per chunk: seven fp32 a token, the decay, m and
  // g, pads.
  const MlstmWorkspaceLayout l = mlstmWorkspaceLayout(p, c, 8, 8, 8187);
  EXPECT_EQ(l.gates, 0u);
  EXPECT_EQ(l.bytes, size_t(64 * 128) * (64 * 28 + 32));
  // 256 blocks fill the 132 SMs: one walk a head and slice.
  EXPECT_EQ(mlstmSegments(p, c, 8, 8, 8187), 1);
  EXPECT_EQ(d.grid[2], 1u);
  // The walk's file carries each wgmma atom it runs once: the scores with
  // n's rows (m64n72), n's increment (m64n8), Q Cp and the update (m64n128),
  // P V from registers (m64n128).
  const std::string f =
      emitMlstm(p, c, MlstmKernel::Fused, Target::SM90A).source;
  for (const char *atom : {"struct Wgmma<bf16, 72, kTransB, kTransA>",
                           "struct Wgmma<bf16, 8, kTransB, kTransA>",
                           "struct Wgmma<bf16, 128, kTransB, kTransA>",
                           "struct WgmmaRs<bf16, 128, kTransB>"}) {
    const size_t at = f.find(atom);
    EXPECT_NE(at, std::string::npos) << atom;
    EXPECT_EQ(f.find(atom, at + 1), std::string::npos) << atom;
  }
}

TEST(MlstmEmitter, WgmmaFusedSplitsTheSequenceOfFewHeads) {
  // The 7B heads at B = 1: 32 blocks, so four segments of 32 chunks: the
  // segments' own states (all 128 blocks at once), combine over the four,
  // then the fused walk of each segment from the state entering it.
  MlstmProblem p = problem(1, 8, 8192, 256, 512);
  const MlstmConfig c{MlstmVariant::Fused, 64, 128, 12, true};
  ASSERT_FALSE(checkConfig(p, c, Target::SM90A));
  EXPECT_EQ(mlstmSegments(p, c, 1, 8, 8192), 4);
  // At least 4 chunks a segment; never for other configs.
  EXPECT_EQ(mlstmSegments(p, c, 1, 8, 1024), 4);
  EXPECT_EQ(mlstmSegments(p, c, 1, 8, 512), 2);
  EXPECT_EQ(mlstmSegments(p, c, 1, 8, 448), 1);
  EXPECT_EQ(mlstmSegments(p, c, 2, 8, 8192), 2);
  EXPECT_EQ(
      mlstmSegments(p, MlstmConfig{MlstmVariant::Fused, 64, 32, 8}, 1, 8, 8192),
      1);
  for (MlstmKernel k : {MlstmKernel::SegmentStates, MlstmKernel::Fused}) {
    const LaunchDims d = mlstmLaunchDims(p, c, k, Target::SM90A, 1, 8, 8192);
    EXPECT_EQ(d.grid[0], 4u);
    EXPECT_EQ(d.grid[1], 8u);
    EXPECT_EQ(d.grid[2], 4u);
    EXPECT_TRUE(d.overlapsPrevious);
  }
  const KernelSource s =
      emitMlstm(p, c, MlstmKernel::SegmentStates, Target::SM90A);
  EXPECT_EQ(s.name, "kgen_mlstm_bf16_qk256_v512_segstates_c64_d128_w12_wgmma");
  EXPECT_NE(s.source.find("kgen::mlstm::segmentStatesWgmma<Config>(&mapQ, "
                          "&mapK, &mapV, &mapH, p);"),
            std::string::npos);
  EXPECT_TRUE(mlstmUsesMma(p, c, MlstmKernel::SegmentStates, Target::SM90A));
  const KernelSource cb = emitMlstm(p, c, MlstmKernel::Combine, Target::SM90A);
  EXPECT_NE(cb.source.find("kgen::mlstm::combine<Config>(p);"),
            std::string::npos);
  // The chunk terms, then the four segments' states of the 8 heads as the
  // chunk-parallel variant lays out its chunks' (fp64 g and m first).
  const MlstmWorkspaceLayout l = mlstmWorkspaceLayout(p, c, 1, 8, 8192);
  const size_t terms = size_t(8 * 128) * (64 * 28 + 32), units = 8 * 4;
  EXPECT_EQ(l.gates, 0u);
  EXPECT_EQ(l.gm, terms);
  EXPECT_EQ(l.c, terms + units * 16);
  EXPECT_EQ(l.n, l.c + units * 256 * 512 * 4);
  EXPECT_EQ(l.m, l.n + units * 256 * 4);
  EXPECT_EQ(l.bytes, l.m + units * 4);
}
