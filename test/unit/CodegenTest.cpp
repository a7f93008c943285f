//===- CodegenTest.cpp - Problems, JSON, limits, candidates, emitter ------===//

#include "gemm/params.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Emitter.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Codegen/Templates.h"
#include "kgen/Error.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace kgen;

namespace {

GemmProblem problem(int64_t m, int64_t n, int64_t k, const char *layout = "nt",
                    DType ab = DType::BF16, DType c = DType::BF16) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ab = ab;
  p.c = c;
  p.transA = layout[0] == 't';
  p.transB = layout[1] == 't';
  return p;
}

/// The wgmma loop's 128x128 tile: two consumer warpgroups, 4 stages.
GemmConfig wgmma128x128() {
  GemmConfig c;
  c.loop = GemmLoop::Wgmma;
  c.blockM = 128;
  c.blockN = 128;
  c.blockK = 64;
  c.warpsM = 2;
  c.warpsN = 1;
  c.stages = 4;
  c.smem = SmemLayout::Swizzled;
  c.smemPad = 0;
  return c;
}

} // namespace

TEST(Json, ProblemRoundTrip) {
  GemmProblem p = problem(532, 2048, 4099, "tn", DType::F16, DType::F32);
  p.staticM = true;
  p.staticK = false;
  p.alignA = 2;
  EXPECT_EQ(gemmProblemFromJson(toJson(p)), p);
  nlohmann::json j = toJson(p);
  EXPECT_EQ(j["layout"], "tn");
  EXPECT_EQ(j["static"], nlohmann::json::array({"m", "n"}));
}

TEST(Json, EpilogueAndBatchRoundTrip) {
  GemmProblem p = problem(532, 2048, 2048);
  // Plain problems keep their JSON: the new fields appear only when set.
  for (const char *f : {"bias", "act", "residual", "batch"})
    EXPECT_FALSE(toJson(p).contains(f)) << f;
  p.bias = BiasKind::AlongM;
  p.act = Activation::GeluErf;
  p.residual = true;
  p.batch = 12;
  nlohmann::json j = toJson(p);
  EXPECT_EQ(j["bias"], "m");
  EXPECT_EQ(j["act"], "gelu_erf");
  EXPECT_EQ(j["residual"], true);
  EXPECT_EQ(j["batch"], 12);
  EXPECT_EQ(gemmProblemFromJson(j), p);
  for (Activation a : {Activation::None, Activation::ReLU, Activation::GeluTanh,
                       Activation::GeluErf, Activation::SiLU}) {
    p.act = a;
    EXPECT_EQ(gemmProblemFromJson(toJson(p)), p) << toString(a);
  }
  EXPECT_EQ(mainLoopProblem(p), problem(532, 2048, 2048));
}

TEST(Json, SplitKConfigRoundTrip) {
  GemmConfig c;
  EXPECT_FALSE(toJson(c).contains("split_k")); // old configs read the same
  c.splitK = 4;
  EXPECT_EQ(toJson(c)["split_k"], 4);
  EXPECT_EQ(gemmConfigFromJson(toJson(c)), c);
}

TEST(Candidates, SplitKForIdleMultiprocessorsOnly) {
  // Decode: few tiles, long K: split-K candidates join, after the plain
  // ones' best, and the heuristic default has none.
  GemmProblem decode = problem(16, 4096, 4096);
  std::vector<GemmConfig> cs = enumerateConfigs(decode, Target::SM80);
  size_t split = 0;
  for (const GemmConfig &c : cs) {
    split += c.splitK > 1;
    EXPECT_FALSE(checkConfig(decode, c, Target::SM80));
  }
  EXPECT_GT(split, 0u);
  EXPECT_LE(split, 4u + 6u); // the tiled loop's, and the gemv loop's
  // The heuristic takes neither the gemv loop nor stream-K (measured slower
  // as defaults; see defaultConfig), and here no split either.
  EXPECT_NE(defaultConfig(decode, Target::SM80).loop, GemmLoop::Gemv);
  EXPECT_EQ(defaultConfig(decode, Target::GFX90A).splitK, 1);
  // 4096^3 fills the GPU many times over: no split-K.
  for (const GemmConfig &c :
       enumerateConfigs(problem(4096, 4096, 4096), Target::SM80))
    EXPECT_EQ(c.splitK, 1);
  // The workspace: a partial tile per split, a counter per tile.
  GemmConfig c;
  c.blockM = 16;
  c.blockN = 64;
  c.splitK = 4;
  GemmWorkspace w = gemmWorkspace(decode, c, 16, 3);
  EXPECT_EQ(w.counters, 3 * 64);
  EXPECT_EQ(w.partialBytes, 3 * 64 * 4 * 16 * 64 * 4);
  EXPECT_EQ(gemmLaunchDims(decode, c, Target::SM80, 16, 0, 3).grid[2], 12u);
  c.splitK = 1;
  EXPECT_EQ(gemmWorkspace(decode, c, 16, 3).bytes(), 0);
}

TEST(Json, ConfigRoundTrip) {
  GemmConfig c;
  c.blockM = 64;
  c.blockN = 256;
  c.blockK = 64;
  c.warpsM = 1;
  c.warpsN = 4;
  c.stages = 4;
  c.smem = SmemLayout::Swizzled;
  c.smemPad = 0;
  EXPECT_EQ(gemmConfigFromJson(toJson(c)), c);
}

TEST(Json, ErrorsNameTheField) {
  auto expectError = [](const char *text, const char *needle) {
    try {
      gemmProblemFromJson(nlohmann::json::parse(text));
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << e.what();
    }
  };
  expectError(R"({"m":1,"n":2})", "missing 'k'");
  expectError(R"({"m":1,"n":2,"k":3,"ab":"int8"})", "'ab' = \"int8\"");
  expectError(R"({"m":1,"n":2,"k":3,"layout":"xy"})", "'layout'");
  expectError(R"({"m":1,"n":2,"k":3,"bogus":1})", "unknown field 'bogus'");
  expectError(R"({"m":"7","n":2,"k":3})", "'m' must be an integer");
  expectError(R"({"m":1,"n":2,"k":3,"static":["q"]})", "'static'");
  expectError(R"({"m":1,"n":2,"k":3,"bias":"k"})", "'bias' = \"k\"");
  expectError(R"({"m":1,"n":2,"k":3,"act":"gelu"})", "'act' = \"gelu\"");
  expectError(R"({"m":1,"n":2,"k":3,"residual":1})", "'residual'");
  expectError(R"({"m":1,"n":2,"k":3,"batch":"4"})", "'batch'");
  EXPECT_THROW(gemmConfigFromJson(nlohmann::json::parse(R"({"block":[1,2]})")),
               Error);
}

TEST(Json, WgmmaConfigTakesTheSwizzledLayout) {
  // As --loop wgmma on the command line: the layout TMA writes, pad 0.
  const GemmConfig c = gemmConfigFromJson(nlohmann::json::parse(
      R"({"loop":"wgmma","block":[128,80,64],"warps":[2,1],"stages":8})"));
  EXPECT_EQ(c.smem, SmemLayout::Swizzled);
  EXPECT_EQ(c.smemPad, 0);
  EXPECT_FALSE(checkConfig(problem(532, 2048, 2048), c, Target::SM90A));
  // A layout given is kept (and refused by the limits, with the fix named).
  const GemmConfig padded = gemmConfigFromJson(nlohmann::json::parse(
      R"({"loop":"wgmma","block":[128,80,64],"warps":[2,1],"smem":"padded"})"));
  EXPECT_EQ(padded.smem, SmemLayout::Padded);
  EXPECT_EQ(padded.smemPad, 8);
  auto why = checkConfig(problem(532, 2048, 2048), padded, Target::SM90A);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("set smem = swizzled"), std::string::npos) << *why;
}

TEST(Problem, BadProblemsAreNamed) {
  EXPECT_NE(checkProblem(problem(0, 1, 1))->find("m = 0"), std::string::npos);
  EXPECT_NE(checkProblem(problem(1, -3, 1))->find("n = -3"), std::string::npos);
  EXPECT_NE(checkProblem(problem(1, 1, int64_t(1) << 32))->find("k = "),
            std::string::npos);
  EXPECT_NE(checkProblem(problem(1, 1, 1, "nn", DType::F32))->find("f32"),
            std::string::npos);
  GemmProblem p = problem(1, 1, 1);
  p.alignB = 3;
  EXPECT_NE(checkProblem(p)->find("alignB = 3"), std::string::npos);
  EXPECT_FALSE(checkProblem(problem(1, 1, 1)));
  p = problem(1, 1, 1);
  p.batch = 0;
  EXPECT_NE(checkProblem(p)->find("batch = 0"), std::string::npos);
  p.batch = 65536;
  EXPECT_NE(checkProblem(p)->find("65535"), std::string::npos);
}

TEST(Emitter, EpilogueFeaturesAreNamedAndFixed) {
  GemmProblem p = problem(127, 4099, 1023);
  GemmConfig c;
  const std::string plain = gemmKernelName(p, c, Target::SM80);
  p.batch = 8; // run time: the same kernel
  EXPECT_EQ(gemmKernelName(p, c, Target::SM80), plain);
  p.bias = BiasKind::AlongN;
  p.act = Activation::ReLU;
  p.residual = true;
  EXPECT_EQ(gemmKernelName(p, c, Target::SM80), plain + "_biasn_relu_res");
  KernelSource ks = emitGemm(p, c, Target::SM80);
  EXPECT_NE(ks.source.find("kBias = kgen::gemm::kBiasN, kActivation = "
                           "kgen::gemm::kActReLU"),
            std::string::npos);
  EXPECT_NE(ks.source.find("kResidual = true"), std::string::npos);
  EXPECT_NE(ks.source.find("(const kgen::gemm::Params p)"), std::string::npos);
  LaunchDims d = gemmLaunchDims(p, c, Target::SM80, 127, 0, 8);
  EXPECT_EQ(d.grid[2], 8u);
}

TEST(Limits, MessagesNameTheLimit) {
  GemmProblem p = problem(4096, 4096, 4096);
  GemmConfig c;
  c.blockM = c.blockN = 256;
  c.blockK = 64;
  c.stages = 4;
  auto e = checkConfig(p, c, Target::SM90A);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("shared memory"), std::string::npos) << *e;
  EXPECT_NE(e->find("232448"), std::string::npos) << *e;

  GemmConfig amd;
  amd.blockM = amd.blockN = 128;
  amd.blockK = 64;
  amd.stages = 2;
  e = checkConfig(p, amd, Target::GFX90A);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("65536"), std::string::npos) << *e;

  GemmConfig threads;
  threads.blockM = threads.blockN = 256;
  threads.warpsM = threads.warpsN = 8;
  threads.blockK = 32;
  threads.stages = 2;
  e = checkConfig(p, threads, Target::SM90A);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("threads per block"), std::string::npos) << *e;

  GemmConfig atom; // a 32-wide warp tile is fine on NVIDIA, not on MFMA 32x32
  atom.blockM = 64;
  atom.warpsM = 4;
  e = checkConfig(p, atom, Target::GFX90A);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("MFMA"), std::string::npos) << *e;

  GemmConfig bk;
  bk.blockK = 8;
  EXPECT_NE(checkConfig(p, bk, Target::SM80)->find("blockK = 8"),
            std::string::npos);
  GemmConfig stages;
  stages.stages = 1;
  EXPECT_NE(checkConfig(p, stages, Target::SM80)->find("stages = 1"),
            std::string::npos);
  GemmConfig swz;
  swz.smem = SmemLayout::Swizzled;
  swz.smemPad = 8;
  EXPECT_NE(checkConfig(p, swz, Target::SM80)->find("swizzled"),
            std::string::npos);
  GemmConfig acc;
  acc.blockM = acc.blockN = 256;
  acc.warpsM = acc.warpsN = 2;
  acc.stages = 2;
  EXPECT_NE(checkConfig(p, acc, Target::SM90A)->find("accumulators"),
            std::string::npos);
  EXPECT_FALSE(checkConfig(p, GemmConfig{}, Target::SM90A));
}

TEST(Candidates, EveryCandidateIsValidAndThereIsOne) {
  const int64_t dims[][3] = {{1, 1, 1},       {1, 4096, 4096}, {127, 4099, 1023},
                             {532, 2048, 2048}, {4096, 4096, 4096}, {3, 5, 7}};
  for (Target t : kAllTargets)
    for (auto &d : dims)
      for (const char *layout : {"nn", "nt", "tn", "tt"})
        for (DType c : {DType::BF16, DType::F32}) {
          GemmProblem p = problem(d[0], d[1], d[2], layout, DType::BF16, c);
          std::vector<GemmConfig> cs = enumerateConfigs(p, t);
          ASSERT_FALSE(cs.empty()) << toString(t) << " " << d[0] << "x" << d[1];
          // 12 configs at most, up to 4 split-K, 4 stream-K, 4 lockstep
          // split-K (wgmma) and 4 pair (cluster = 2) ones on top, up to 6
          // of the gemv loop (first) for small M, up to 8 of fitted wgmma
          // widths and 4 swapped ones (wgmma), and up to 7 repack ones
          // (last) for misaligned rows.
          size_t split = 0, streamK = 0, lockstep = 0, gemv = 0, repack = 0,
                 pairs = 0, fitted = 0, swapped = 0;
          for (const GemmConfig &cfg : cs) {
            EXPECT_FALSE(checkConfig(p, cfg, t));
            if (cfg.repack)
              ++repack;
            else if (cfg.loop == GemmLoop::Gemv)
              ++gemv;
            else if (cfg.loop == GemmLoop::Wgmma)
              lockstep += cfg.splitK > 1;
            else
              split += cfg.splitK > 1;
            streamK += cfg.streamK && !cfg.repack;
            const bool fit = cfg.loop == GemmLoop::Wgmma && cfg.blockN % 64;
            fitted += fit;
            swapped += cfg.swapAB;
            pairs += cfg.cluster > 1 && !fit;
          }
          EXPECT_LE(cs.size() - split - streamK - lockstep - gemv - repack -
                        pairs - fitted - swapped,
                    12u);
          // An f32 C (promoted sums) adds 128x160 and 128x208 at two depths.
          EXPECT_LE(fitted, c == DType::F32 ? 12u : 8u);
          EXPECT_LE(swapped, 4u);
          EXPECT_TRUE(swapped == 0 || (t == Target::SM90A && layout[0] == 'n'));
          EXPECT_LE(pairs, 4u);
          // Pairs are the wgmma loop's (sm_90a, A stored M x K), for more
          // than one 128-row tile.
          EXPECT_TRUE(pairs == 0 || t == Target::SM90A);
          if (t == Target::SM90A && layout[0] == 'n' && d[0] >= 532)
            EXPECT_GT(pairs, 0u);
          EXPECT_LE(repack, 7u);
          EXPECT_LE(split, 4u);
          EXPECT_LE(streamK, 4u);
          EXPECT_LE(lockstep, 4u);
          EXPECT_TRUE(lockstep == 0 || t == Target::SM90A);
          EXPECT_LE(gemv, 6u);
          EXPECT_EQ(gemv > 0, d[0] <= 64 && layout[0] == 'n' &&
                                  targetInfo(t).vendor == Vendor::NVIDIA);
          // The default: the best-ranked one that is neither the gemv
          // loop nor stream-K.
          GemmConfig first = *std::find_if(cs.begin(), cs.end(), [](auto &c) {
            return c.loop != GemmLoop::Gemv && !c.streamK;
          });
          EXPECT_EQ(defaultConfig(p, t), first);
          if (gemv)
            EXPECT_EQ(cs.front().loop, GemmLoop::Gemv);
        }
}

TEST(Candidates, SmallMDefaultsToAFittedTileWithADeepRing) {
  // 32 < M <= 128 on sm_90a (B stored N x K): the 64-row tile whose
  // width makes one wave, at the deepest ring that fits (see the top of
  // Candidates.cpp): 128 tiles of 64x32 at 16 stages of 12 KB, 2 x 64 of
  // 64x64 at 12 of 16 KB.
  auto expect = [](int64_t m, int64_t n, int bn, int stages) {
    GemmConfig c = defaultConfig(problem(m, n, n), Target::SM90A);
    EXPECT_EQ(c.loop, GemmLoop::Wgmma) << m << "x" << n;
    EXPECT_EQ(c.blockM, 64) << m << "x" << n;
    EXPECT_EQ(c.blockN, bn) << m << "x" << n;
    EXPECT_EQ(c.stages, stages) << m << "x" << n;
    EXPECT_EQ(c.cluster, 1) << m << "x" << n;
  };
  expect(33, 4096, 32, 16);
  expect(64, 4096, 32, 16);
  expect(128, 4096, 64, 12);
  expect(64, 8192, 64, 12);
  // B stored K x N: 64x64 at 12 stages where one wave holds the tiles.
  GemmConfig nn = defaultConfig(problem(64, 4096, 4096, "nn"), Target::SM90A);
  EXPECT_TRUE(nn.loop == GemmLoop::Wgmma && nn.blockM == 64 &&
              nn.blockN == 64 && nn.stages == 12);
  // Where no fitted tile makes one wave (the fixed list has 64x128 and
  // 128x64) and up to M = 256: the fixed tiles at 8 stages.
  for (GemmProblem q :
       {problem(128, 8192, 8192, "nn"), problem(256, 4096, 4096)}) {
    GemmConfig c = defaultConfig(q, Target::SM90A);
    EXPECT_EQ(c.blockM * c.blockN, 64 * 128) << q.m << "x" << q.n;
    EXPECT_EQ(c.stages, 8) << q.m << "x" << q.n;
  }
  // Not for M <= 32 (a swapped tile, SmallMDefaultsToASwappedTileOnSm90a),
  // M > 256 (a swapped tile there too, see SwapAB), nor off sm_90a.
  EXPECT_TRUE(defaultConfig(problem(32, 4096, 4096), Target::SM90A).swapAB);
  EXPECT_TRUE(defaultConfig(problem(532, 2048, 2048), Target::SM90A).swapAB);
  EXPECT_EQ(defaultConfig(problem(64, 4096, 4096), Target::SM80).loop,
            GemmLoop::Tiled);
}

TEST(Candidates, SmallMTiledLoopTakesTheDeepestSwizzledRing) {
  // M <= 16 on sm_80 (and on sm_90a where no swapped tile is offered: A
  // stored K x M): 16-row tiles of the tiled loop at 6 stages, swizzled
  // (H100, kgen tune before the swapped tiles: the winner or within 1.5% of
  // it on 1 and 16 x 4096 and 8192, nt and nn). Not on AMD, nor for large
  // M.
  for (const char *layout : {"nt", "nn"}) {
    GemmConfig c = defaultConfig(problem(1, 8192, 8192, layout), Target::SM80);
    EXPECT_EQ(c.loop, GemmLoop::Tiled) << layout;
    EXPECT_EQ(c.stages, 6) << layout;
    EXPECT_EQ(c.smem, SmemLayout::Swizzled) << layout;
  }
  GemmConfig tn = defaultConfig(problem(1, 8192, 8192, "tn"), Target::SM90A);
  EXPECT_EQ(tn.loop, GemmLoop::Tiled);
  EXPECT_EQ(tn.stages, 6);
  EXPECT_LE(defaultConfig(problem(1, 8192, 8192), Target::GFX90A).stages, 4);
  EXPECT_LE(defaultConfig(problem(4096, 4096, 4096), Target::SM80).stages, 4);
}

TEST(Candidates, SmallMDefaultsToASwappedTileOnSm90a) {
  // M <= 32 on sm_90a, 16-bit A stored M x K: the swapped tile 64 columns
  // of N wide and 8 to 32 rows of M high (M over the tiles of M that the
  // multiprocessors left hold) at 12 stages (H100, kgen tune: it or its
  // 8-stage twin won 11 of 1, 16 and 32 x 4096 and 8192, nt and nn).
  for (const char *layout : {"nt", "nn"})
    for (int64_t m : {1, 16, 32})
      for (int64_t n : {4096, 8192}) {
        GemmConfig c = defaultConfig(problem(m, n, n, layout), Target::SM90A);
        EXPECT_EQ(c.loop, GemmLoop::Wgmma) << m << "x" << n << " " << layout;
        EXPECT_TRUE(c.swapAB) << m << "x" << n << " " << layout;
        EXPECT_EQ(c.blockN, 64) << m << "x" << n << " " << layout;
        EXPECT_EQ(c.blockM, m == 1      ? 8
                            : n == 8192 ? m
                                        : m / 2)
            << m << "x" << n << " " << layout;
        EXPECT_EQ(c.stages, 12) << m << "x" << n << " " << layout;
      }
  // fp8 has no swapped tiles: its 64-row fitted tile stays the default.
  GemmProblem f8 = problem(1, 4096, 4096);
  f8.ab = DType::E4M3;
  f8.c = DType::BF16;
  GemmConfig c8 = defaultConfig(f8, Target::SM90A);
  EXPECT_FALSE(c8.swapAB);
  EXPECT_EQ(c8.blockM, 64);
}

TEST(Candidates, SmallMGetsSmallTiles) {
  GemmProblem p = problem(1, 4096, 4096);
  for (const GemmConfig &c : enumerateConfigs(p, Target::SM90A))
    EXPECT_LE(c.blockM, 16);
  GemmProblem big = problem(4096, 4096, 4096);
  EXPECT_GE(defaultConfig(big, Target::SM90A).blockM, 128);
}

TEST(Emitter, NamesAreStableAndDescriptive) {
  GemmProblem p = problem(532, 2048, 2048);
  GemmConfig c;
  EXPECT_EQ(gemmKernelName(p, c, Target::SM90A),
            "kgen_gemm_bf16_nt_mdyn_n2048_k2048_b128x128x32_w2x2_s3_pad8_v888");
  p.staticM = true;
  p.c = DType::F32;
  c.smem = SmemLayout::Swizzled;
  c.smemPad = 0;
  EXPECT_EQ(gemmKernelName(p, c, Target::SM90A),
            "kgen_gemm_bf16_cf32_nt_m532_n2048_k2048_b128x128x32_w2x2_s3_swz_v888");
}

TEST(Emitter, BakesConstantsAndChecksOnlyRaggedDims) {
  GemmProblem p = problem(532, 2048, 2048);
  KernelSource ks = emitGemm(p, GemmConfig{}, Target::SM90A);
  EXPECT_NE(ks.source.find("kN = 2048;"), std::string::npos);
  EXPECT_NE(ks.source.find("kK = 2048;"), std::string::npos);
  EXPECT_NE(ks.source.find("kM = 0;"), std::string::npos);
  EXPECT_NE(ks.source.find("kCheckM = true, kCheckN = false, kCheckK = false"),
            std::string::npos);
  EXPECT_NE(ks.source.find("#include \"kgen/gemm/gemm.h\""), std::string::npos);
  EXPECT_NE(ks.source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_EQ(ks.threads, 128);

  GemmProblem ragged = problem(127, 4099, 1023);
  ragged.staticM = true;
  KernelSource rs = emitGemm(ragged, GemmConfig{}, Target::SM90A);
  EXPECT_NE(rs.source.find("kCheckM = true, kCheckN = true, kCheckK = true"),
            std::string::npos);
  EXPECT_NE(rs.source.find("kVecA = 1, kVecB = 1, kVecC = 1"),
            std::string::npos);

  GemmProblem exact = problem(256, 256, 256);
  exact.staticM = true;
  EXPECT_NE(emitGemm(exact, GemmConfig{}, Target::SM90A)
                .source.find("kCheckM = false, kCheckN = false, kCheckK = false"),
            std::string::npos);
}

TEST(Emitter, HeadersPerVendorAndInline) {
  GemmProblem p = problem(64, 64, 64);
  GemmConfig amd;
  amd.blockM = amd.blockN = 64;
  KernelSource nv = emitGemm(p, GemmConfig{}, Target::SM80);
  KernelSource am = emitGemm(p, amd, Target::GFX90A);
  auto has = [](const KernelSource &k, std::string_view h) {
    for (const std::string &x : k.headers)
      if (x == h)
        return true;
    return false;
  };
  EXPECT_TRUE(has(nv, kHipRuntimeNvidia));
  EXPECT_FALSE(has(am, kHipRuntimeNvidia));
  EXPECT_TRUE(has(nv, "kgen/gemm/gemm.h"));
  for (const std::string &h : nv.headers)
    EXPECT_FALSE(templateText(h).empty()) << h;

  KernelSource in = emitGemm(p, GemmConfig{}, Target::SM90A, true);
  EXPECT_TRUE(in.headers.empty());
  EXPECT_EQ(in.source.find("#include \"kgen/"), std::string::npos);
  EXPECT_EQ(in.source.find("#include <hip/hip_runtime.h>"), std::string::npos);
  KernelSource inAmd = emitGemm(p, amd, Target::GFX90A, true);
  EXPECT_NE(inAmd.source.find("#include <hip/hip_runtime.h>"),
            std::string::npos);
}

TEST(Emitter, LaunchDims) {
  GemmProblem p = problem(532, 2048, 2048);
  GemmConfig c;
  LaunchDims d = gemmLaunchDims(p, c, Target::SM90A, 533);
  EXPECT_EQ(d.grid[0], 16u);
  EXPECT_EQ(d.grid[1], 5u);
  EXPECT_EQ(d.block[0], 128u);
  EXPECT_EQ(d.smemBytes, unsigned(gemmTraits(p, c, Target::SM90A).smemBytes));
}

TEST(Candidates, LockstepSplitKForLongKOnSm90a) {
  // 532x2048x16384: 40 tiles of 128x256 in 3 parts fill 120 of 132 SMs
  // with 86 k-slices each instead of 256; the model ranks it first (H100:
  // 71.7 against 83.1 us for the best whole tiles). At K = 2048 the fix-up
  // costs more than the idle SMs (24.1 against 13.6 us): offered, not
  // ranked first. (The default is the swapped 136x64 tile, which goes before
  // the ranked list: 59.4 / 68.4 us nn / nt against 70.1 / 68.7; SwapAB.)
  auto firstRanked = [](const GemmProblem &p) {
    for (const GemmConfig &c : enumerateConfigs(p, Target::SM90A))
      if (!c.swapAB && c.loop != GemmLoop::Gemv && !c.streamK && !c.repack)
        return c;
    return GemmConfig{};
  };
  for (const char *layout : {"nt", "nn"}) {
    EXPECT_TRUE(
        defaultConfig(problem(532, 2048, 16384, layout), Target::SM90A).swapAB);
    const GemmConfig c = firstRanked(problem(532, 2048, 16384, layout));
    EXPECT_EQ(c.loop, GemmLoop::Wgmma);
    EXPECT_EQ(c.blockM * 1000 + c.blockN, 128256);
    EXPECT_EQ(c.splitK, 3);
    EXPECT_EQ(c.cluster, 1);
    EXPECT_FALSE(c.streamK);
    const GemmProblem shortK = problem(532, 2048, 2048, layout);
    EXPECT_EQ(firstRanked(shortK).splitK, 1);
    size_t lockstep = 0;
    for (const GemmConfig &cfg : enumerateConfigs(shortK, Target::SM90A))
      lockstep += cfg.loop == GemmLoop::Wgmma && cfg.splitK > 1;
    EXPECT_GT(lockstep, 0u);
  }
  // HBM-bound (M N / (M + N) < 256) or enough tiles: none.
  for (auto [m, n, k] : {std::tuple{128, 8192, 8192},
                         {256, 4096, 4096},
                         {64, 8192, 8192},
                         {4096, 4096, 4096}})
    for (const GemmConfig &c :
         enumerateConfigs(problem(m, n, k), Target::SM90A))
      EXPECT_FALSE(c.loop == GemmLoop::Wgmma && c.splitK > 1)
          << m << "x" << n << "x" << k;
}

TEST(Candidates, StreamKForMidShapesOnSm90a) {
  // Fewer tiles than an H100/H200's 132 SMs: stream-K wgmma candidates
  // join; where the model finds the SMs idle enough to pay for the fix-up
  // (80 tiles of 532x2048, not 112 of 788x2048), the heuristic picks one.
  struct Mid {
    int64_t m, n, k;
    bool picked;
  };
  const Mid mid[] = {{532, 2048, 2048, true},
                     {532, 2048, 16384, true},
                     {128, 8192, 8192, true},
                     {788, 2048, 2048, false}};
  for (const Mid &d : mid)
    for (const char *layout : {"nt", "nn"}) {
      GemmProblem p = problem(d.m, d.n, d.k, layout);
      size_t streamK = 0;
      for (const GemmConfig &c : enumerateConfigs(p, Target::SM90A)) {
        EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
        if (c.streamK) {
          ++streamK;
          EXPECT_EQ(c.loop, GemmLoop::Wgmma);
          EXPECT_EQ(c.cluster, 1);
          EXPECT_LT((p.m + c.blockM - 1) / c.blockM *
                        ((p.n + c.blockN - 1) / c.blockN),
                    132);
        }
      }
      EXPECT_GT(streamK, 0u) << d.m << "x" << d.n << "x" << d.k;
      // Candidates only: as the heuristic's pick, stream-K measured slower
      // than the plain wgmma loop on an H200 (see defaultConfig).
      (void)d.picked;
      EXPECT_FALSE(defaultConfig(p, Target::SM90A).streamK)
          << d.m << "x" << d.n << "x" << d.k << " " << layout;
    }
  // Enough tiles, or no persistent loop: none.
  for (const GemmConfig &c :
       enumerateConfigs(problem(4096, 4096, 4096), Target::SM90A))
    EXPECT_FALSE(c.streamK);
  for (const GemmConfig &c :
       enumerateConfigs(problem(532, 2048, 2048), Target::SM80))
    EXPECT_FALSE(c.streamK);
}

TEST(Candidates, FittedWgmmaTilesAndPairsSharingA) {
  // 532x2048x2048 with B stored N x K: 128-row tiles 80 wide (5 x 26 = 130
  // tiles) and 64-row tiles 152 wide (9 x 14 = 126) fill the 132
  // multiprocessors; their pairs share A (tiles taller than wide). The
  // kernel file carries the m64n80k16 atom the header lacks.
  const GemmProblem nt = problem(532, 2048, 2048, "nt");
  bool fitted80 = false, fitted152 = false, pairA = false;
  for (const GemmConfig &c : enumerateConfigs(nt, Target::SM90A)) {
    if (c.loop != GemmLoop::Wgmma)
      continue;
    fitted80 |= c.blockM == 128 && c.blockN == 80 && c.cluster == 1;
    fitted152 |= c.blockM == 64 && c.blockN == 152 && c.warpsM == 1;
    if (c.cluster == 2 && c.blockN == 80) {
      pairA = true;
      EXPECT_TRUE(c.pairSharesA());
      // Pairs of units side by side: 5 x 13 of them, two CTAs each.
      EXPECT_EQ(gemmLaunchDims(nt, c, Target::SM90A, 532, 132).grid[0], 130u);
    }
  }
  EXPECT_TRUE(fitted80 && fitted152 && pairA);
  // Candidates for the tuner, not the default (see defaultConfig; a
  // swapped tile is the default here, see SwapAB). The model's best whole
  // tile, the first unswapped wgmma config of the list:
  EXPECT_TRUE(defaultConfig(nt, Target::SM90A).swapAB);
  std::vector<GemmConfig> list = enumerateConfigs(nt, Target::SM90A);
  GemmConfig c = *std::find_if(list.begin(), list.end(), [](auto &x) {
    return x.loop == GemmLoop::Wgmma && !x.swapAB && !x.streamK &&
           x.splitK == 1 && x.cluster == 1;
  });
  EXPECT_EQ(c.blockN, 128);
  EXPECT_EQ(c.stages, 6) << "the deepest ring that fits";
  c.blockN = 80;
  const std::string src = emitGemm(nt, c, Target::SM90A).source;
  EXPECT_NE(src.find("struct Wgmma<bf16, 80, kTransB, kTransA>"), std::string::npos);
  EXPECT_NE(src.find("wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16"),
            std::string::npos);
  // Every width's atom comes from the emitter, 128 as well: exactly one
  // specialization a kernel file.
  c.blockN = 128;
  const std::string src128 = emitGemm(nt, c, Target::SM90A).source;
  const size_t at = src128.find("struct Wgmma<bf16, 128, kTransB, kTransA>");
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(src128.find("struct Wgmma<", at + 1), std::string::npos);
  // B stored K x N comes in 64-column boxes: no fitted widths, and the
  // limits say why.
  const GemmProblem nn = problem(532, 2048, 2048, "nn");
  for (const GemmConfig &x : enumerateConfigs(nn, Target::SM90A))
    EXPECT_EQ(x.loop == GemmLoop::Wgmma ? x.blockN % 64 : 0, 0);
  c.blockN = 80;
  auto why = checkConfig(nn, c, Target::SM90A);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("64, 128, 192 or 256 when B is stored K x N"),
            std::string::npos);
  c.blockN = 84;
  why = checkConfig(nt, c, Target::SM90A);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("a multiple of 8 from 16 to 256"), std::string::npos);
  // A pair of wide tiles splits B: 8-row groups each, so 16 | blockN.
  c.blockM = 64;
  c.warpsM = 1;
  c.blockN = 152;
  c.cluster = 2;
  EXPECT_FALSE(c.pairSharesA());
  why = checkConfig(nt, c, Target::SM90A);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("must be a multiple of 16"), std::string::npos) << *why;
}

TEST(Limits, StreamKNeedsSingleWgmmaCtas) {
  GemmProblem p = problem(532, 2048, 2048);
  GemmConfig c = wgmma128x128();
  c.streamK = true;
  EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
  c.cluster = 2;
  EXPECT_NE(checkConfig(p, c, Target::SM90A)
                ->find("split tiles run on single "
                       "CTAs"),
            std::string::npos);
  c.cluster = 1;
  c.splitK = 2;
  EXPECT_NE(checkConfig(p, c, Target::SM90A)->find("splitK = 2 with streamK"),
            std::string::npos);
  // The wgmma loop's split-K in lockstep: single CTAs, 1 to 16 units a tile.
  c.streamK = false;
  EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
  c.cluster = 2;
  EXPECT_NE(checkConfig(p, c, Target::SM90A)->find("splitK = 2 with cluster"),
            std::string::npos);
  c.cluster = 1;
  c.splitK = 17;
  EXPECT_NE(checkConfig(p, c, Target::SM90A)->find("between 1 and 16"),
            std::string::npos);
  GemmConfig tiled;
  tiled.streamK = true;
  EXPECT_NE(
      checkConfig(p, tiled, Target::SM90A)->find("streamK needs loop = wgmma"),
      std::string::npos);
  // Stream-K and swapped tiles are the wgmma loop's alone: the tiled and
  // gemv loops refuse them rather than run without them.
  const GemmProblem small = problem(64, 4096, 4096);
  const std::vector<GemmConfig> cs = enumerateConfigs(small, Target::SM90A);
  const auto gemvIt = std::find_if(
      cs.begin(), cs.end(), [](auto &x) { return x.loop == GemmLoop::Gemv; });
  ASSERT_NE(gemvIt, cs.end());
  GemmConfig gemv = *gemvIt;
  ASSERT_FALSE(checkConfig(small, gemv, Target::SM90A));
  gemv.streamK = true;
  EXPECT_NE(checkConfig(small, gemv, Target::SM90A)
                ->find("streamK needs loop = wgmma"),
            std::string::npos);
  gemv.streamK = false;
  for (GemmConfig x : {GemmConfig{}, gemv}) {
    x.swapAB = true;
    for (Target t : {Target::SM80, Target::SM90A})
      EXPECT_NE(checkConfig(small, x, t)->find("swapAB needs loop = wgmma"),
                std::string::npos)
          << toString(x.loop) << " " << toString(t);
  }
}

TEST(Emitter, StreamKNameSourceWorkspaceAndGrid) {
  GemmProblem p = problem(532, 2048, 2048);
  GemmConfig c = wgmma128x128();
  const GemmTraits plain = gemmTraits(p, c, Target::SM90A);
  c.streamK = true;
  EXPECT_EQ(gemmTraits(p, c, Target::SM90A).smemBytes, plain.smemBytes + 16);
  KernelSource ks = emitGemm(p, c, Target::SM90A);
  EXPECT_EQ(ks.name,
            "kgen_gemm_bf16_nt_mdyn_n2048_k2048_wgmma_b128x128x64_wg2_s4_v888_"
            "streamk");
  EXPECT_NE(ks.source.find("static constexpr bool kStreamK = true;"),
            std::string::npos);
  EXPECT_NE(ks.source.find("// stream-K: "), std::string::npos);
  // Persistent: one CTA per SM, at most one per k-iteration (80 tiles x 32).
  EXPECT_EQ(gemmLaunchDims(p, c, Target::SM90A, 532, 132).grid[0], 132u);
  EXPECT_EQ(gemmLaunchDims(p, c, Target::SM90A, 532).grid[0], 80u * 32u);
  EXPECT_EQ(gemmLaunchDims(p, c, Target::SM90A, 1).grid[0], 16u * 32u);
  EXPECT_EQ(gemmLaunchDims(p, c, Target::SM90A, 1, 132).grid[0], 132u);
  EXPECT_EQ(gemmLaunchDims(p, c, Target::SM90A, 1, 600).grid[0], 16u * 32u);
  // Two fp32 partial tiles per CTA, a counter per tile.
  GemmWorkspace w = gemmWorkspace(p, c, 532, 1, 132);
  EXPECT_EQ(w.counters, 80);
  EXPECT_EQ(w.partialBytes, 2 * 132 * 128 * 128 * 4);
  EXPECT_EQ(gemmWorkspace(p, c, 1, 1, 132).counters, 16);
  c.streamK = false;
  EXPECT_EQ(gemmWorkspace(p, c, 532, 1, 132).bytes(), 0);
}

TEST(Json, StreamKConfigRoundTrip) {
  GemmConfig c;
  c.loop = GemmLoop::Wgmma;
  EXPECT_FALSE(toJson(c).contains("stream_k")); // old configs read the same
  c.streamK = true;
  EXPECT_EQ(toJson(c)["stream_k"], true);
  EXPECT_EQ(gemmConfigFromJson(toJson(c)), c);
}

TEST(Tf32, JsonRoundTripAndOnlyWhenSet) {
  GemmProblem p = problem(64, 4096, 4096, "nt", DType::F32, DType::F32);
  EXPECT_FALSE(toJson(problem(1, 2, 3)).contains("tf32"));
  p.tf32 = true;
  EXPECT_EQ(toJson(p)["tf32"], true);
  EXPECT_EQ(gemmProblemFromJson(toJson(p)), p);
  EXPECT_THROW(gemmProblemFromJson(nlohmann::json::parse(
                   R"({"m":1,"n":2,"k":3,"ab":"f32","tf32":1})")),
               Error);
}

TEST(Tf32, DiagnosticsNameTheFlagAndTheTarget) {
  auto has = [](const std::optional<std::string> &e, const char *needle) {
    return e && e->find(needle) != std::string::npos;
  };
  GemmProblem p = problem(64, 256, 512, "nt", DType::F32, DType::F32);
  // f32 without the flag: refused, naming the flag (never a silent TF32).
  EXPECT_TRUE(has(checkProblem(p), "tf32 = true"));
  p.tf32 = true;
  EXPECT_FALSE(checkProblem(p));
  // The flag on 16-bit inputs is a mistake, not a no-op.
  GemmProblem q = problem(64, 256, 512);
  q.tf32 = true;
  EXPECT_TRUE(has(checkProblem(q), "needs input dtype f32"));
  // AMD refuses with the reason per target.
  EXPECT_TRUE(
      has(checkProblemOnTarget(p, Target::GFX90A), "gfx90a has no TF32"));
  EXPECT_TRUE(has(checkProblemOnTarget(p, Target::GFX942), "xf32 MFMA"));
  EXPECT_FALSE(checkProblemOnTarget(p, Target::SM80));
  EXPECT_TRUE(
      has(checkConfig(p, wgmma128x128(), Target::SM90A), "loop = tiled"));
  GemmConfig s;
  s.smem = SmemLayout::Swizzled;
  s.smemPad = 0;
  EXPECT_TRUE(has(checkConfig(p, s, Target::SM80), "smem = padded"));
  // f32 vectors stop at 16 bytes (cp.async's widest): 4 elements.
  GemmConfig d;
  EXPECT_EQ(gemmTraits(p, d, Target::SM80).vecA, 4);
  EXPECT_EQ(gemmTraits(p, d, Target::SM80).vecB, 4);
  EXPECT_FALSE(checkConfig(p, d, Target::SM80));
}

TEST(Tf32, CandidatesAreTiledAndPaddedAndTheEmitterSaysTf32) {
  for (Target t : {Target::SM80, Target::SM90A})
    for (const char *layout : {"nn", "nt", "tn", "tt"}) {
      GemmProblem p = problem(127, 4099, 1023, layout, DType::F32, DType::F32);
      p.tf32 = true;
      std::vector<GemmConfig> cs = enumerateConfigs(p, t);
      ASSERT_FALSE(cs.empty()) << toString(t) << " " << layout;
      for (const GemmConfig &c : cs) {
        EXPECT_FALSE(checkConfig(p, c, t));
        EXPECT_EQ(c.loop, GemmLoop::Tiled);
        EXPECT_EQ(c.smem, SmemLayout::Padded);
      }
      KernelSource ks = emitGemm(p, defaultConfig(p, t), t);
      EXPECT_EQ(ks.name.rfind("kgen_gemm_f32_tf32_", 0), 0u) << ks.name;
      EXPECT_NE(ks.source.find("mma.sync m16n8k8 .tf32"), std::string::npos);
      EXPECT_NE(ks.source.find("using TypeA = float;"), std::string::npos);
    }
  GemmProblem p = problem(1, 1, 1, "nt", DType::F32, DType::F32);
  p.tf32 = true;
  for (Target t : {Target::GFX90A, Target::GFX942})
    EXPECT_TRUE(enumerateConfigs(p, t).empty()) << toString(t);
}

TEST(Gemv, LimitsNameTheRule) {
  auto has = [](const std::optional<std::string> &e, const char *needle) {
    return e && e->find(needle) != std::string::npos;
  };
  GemmProblem p = problem(16, 4096, 4096);
  GemmConfig c;
  c.loop = GemmLoop::Gemv;
  c.blockM = 16;
  c.blockN = 128;
  c.blockK = 32;
  c.warpsM = 1;
  c.warpsN = 4;
  c.stages = 2;
  c.splitK = 4;
  EXPECT_FALSE(checkConfig(p, c, Target::SM80));
  EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
  EXPECT_TRUE(has(checkConfig(p, c, Target::GFX90A), "runs on mma.sync"));
  GemmConfig bad = c;
  bad.blockM = 12;
  EXPECT_TRUE(has(checkConfig(p, bad, Target::SM80), "multiple of 8 up to 64"));
  bad = c;
  bad.blockK = 64;
  EXPECT_TRUE(has(checkConfig(p, bad, Target::SM80), "must be 32"));
  bad = c;
  bad.blockN = 72;
  EXPECT_TRUE(has(checkConfig(p, bad, Target::SM80), "warpsN * 16"));
  GemmProblem nn = problem(16, 4096, 4096, "nn");
  EXPECT_TRUE(has(checkConfig(nn, c, Target::SM80), "multiple of 4"));
  bad = c;
  bad.blockN = 512; // 4 warps of 8 row tiles
  bad.stages = 4;
  bad.blockM = 64;
  EXPECT_TRUE(has(checkConfig(p, bad, Target::SM80), "registers"));
  // The ring: 16 slots x (2 * 2 B runs + 64 / 8 A runs) x 256 threads x 16
  // B = 768 KiB; 4 slots (192 KiB) fit an sm_90a block, not an sm_80 one.
  GemmProblem p64 = problem(64, 4096, 4096);
  bad = c;
  bad.blockM = 64;
  bad.warpsN = 8;
  bad.blockN = 256;
  bad.stages = 16;
  EXPECT_TRUE(has(checkConfig(p64, bad, Target::SM90A), "shared memory"));
  bad.stages = 4;
  EXPECT_EQ(gemmTraits(p64, bad, Target::SM90A).smemBytes,
            4 * 12 * 256 * 16 + 16);
  EXPECT_FALSE(checkConfig(p64, bad, Target::SM90A));
  EXPECT_TRUE(has(checkConfig(p64, bad, Target::SM80), "shared memory"));
  bad.stages = 17;
  EXPECT_TRUE(has(checkConfig(p, bad, Target::SM90A), "1 to 16"));
  GemmProblem tn = problem(16, 4096, 4096, "tn");
  EXPECT_TRUE(has(checkConfig(tn, c, Target::SM80), "reads A K-major"));
  GemmProblem f32 = problem(16, 4096, 4096, "nt", DType::F32, DType::F32);
  f32.tf32 = true;
  EXPECT_TRUE(has(checkConfig(f32, c, Target::SM80), "loop = tiled"));
}

TEST(Gemv, CandidatesFillTheGpuAndTheEmitterNamesTheLoop) {
  for (int64_t m : {1, 16, 32, 64})
    for (int64_t nk : {4096, 8192})
      for (const char *layout : {"nt", "nn"}) {
        GemmProblem p = problem(m, nk, nk, layout);
        // The enumerator ranks its gemv configs first (the tuner measures
        // them; the heuristic does not take them).
        GemmConfig c = enumerateConfigs(p, Target::SM90A).front();
        ASSERT_EQ(c.loop, GemmLoop::Gemv) << m << " " << layout;
        EXPECT_EQ(c.blockM, std::max<int64_t>(8, m));
        // Blocks for at least 96% of an H100/H200's 132 multiprocessors
        // (128 = N / 32 tiles: memory-bound, the 4 idle ones cost nothing
        // while the others keep HBM busy), and at most 4 a multiprocessor
        // (each block fills its ring once).
        LaunchDims d = gemmLaunchDims(p, c, Target::SM90A, m, 132, 1);
        const int64_t blocks = int64_t(d.grid[0]) * d.grid[1] * d.grid[2];
        EXPECT_GE(blocks * 100, 132 * 96) << m << "x" << nk << " " << layout;
        EXPECT_LE(blocks, 4 * 132) << m << "x" << nk << " " << layout;
        KernelSource ks = emitGemm(p, c, Target::SM90A);
        EXPECT_NE(ks.name.find("_gemv_b"), std::string::npos) << ks.name;
        EXPECT_NE(ks.source.find("kgen::gemm::runGemv<Config>(p);"),
                  std::string::npos);
        EXPECT_NE(ks.source.find("#include \"kgen/gemm/gemv.h\""),
                  std::string::npos);
        // The workspace of its split-K: a fp32 tile a block.
        GemmWorkspace w = gemmWorkspace(p, c, m, 1);
        EXPECT_EQ(w.partialBytes, c.splitK > 1
                                      ? int64_t(d.grid[0]) * d.grid[1] *
                                            c.splitK * c.blockM * c.blockN * 4
                                      : 0);
      }
  // Larger M, AMD, A stored 'T': no gemv candidate.
  for (auto [q, t] : {std::pair{problem(65, 4096, 4096), Target::SM90A},
                      {problem(16, 4096, 4096), Target::GFX942},
                      {problem(16, 4096, 4096, "tn"), Target::SM90A}})
    for (const GemmConfig &g : enumerateConfigs(q, t))
      EXPECT_NE(g.loop, GemmLoop::Gemv);
}

TEST(Gemv, ConfigJsonRoundTrip) {
  GemmConfig c;
  c.loop = GemmLoop::Gemv;
  c.blockM = 8;
  c.blockN = 256;
  c.blockK = 32;
  c.warpsM = 1;
  c.warpsN = 4;
  c.stages = 4;
  c.splitK = 8;
  EXPECT_EQ(toJson(c)["loop"], "gemv");
  EXPECT_EQ(gemmConfigFromJson(toJson(c)), c);
  EXPECT_THROW(gemmConfigFromJson(nlohmann::json::parse(R"({"loop":"gemm"})")),
               Error);
}

namespace {

/// The emitted source of a problem's first repack candidate on `t`.
GemmConfig firstRepack(const GemmProblem &p, Target t) {
  for (const GemmConfig &c : enumerateConfigs(p, t))
    if (c.repack)
      return c;
  ADD_FAILURE() << "no repack candidate";
  return GemmConfig{};
}

} // namespace

TEST(Repack, OfferedForMisalignedOperandsLastButTheSm90aDefault) {
  // Issue 3's shape: rows of 1023 bf16. On sm_90a two wgmma tiles at two
  // depths each, 64x64 among them (130 tiles for 132 multiprocessors), one
  // wgmma stream-K (64x64 too, at the deepest ring) and two tiled picks;
  // tiled ones elsewhere; after every other candidate, but for the first
  // wgmma one on sm_90a, which goes first: the default there (a 2-byte loop
  // elsewhere).
  const GemmProblem ragged = problem(127, 4099, 1023, "nt");
  for (Target t : {Target::SM90A, Target::SM80, Target::GFX90A}) {
    const std::vector<GemmConfig> all = enumerateConfigs(ragged, t);
    size_t wgmma = 0, tiled = 0, streamK = 0, fill = 0;
    bool seen = false;
    for (size_t i = 0; i < all.size(); ++i) {
      const GemmConfig &c = all[i];
      if (c.repack)
        EXPECT_FALSE(checkConfig(ragged, c, t)) << toString(t);
      if (c.repack && i == 0 && t == Target::SM90A) { // the default
        wgmma += 1;
        fill += c.blockM == 64 && c.blockN == 64;
      } else if (c.repack) {
        seen = true;
        (c.loop == GemmLoop::Wgmma ? wgmma : tiled) += 1;
        streamK += c.streamK;
        fill += c.loop == GemmLoop::Wgmma && c.blockM == 64 && c.blockN == 64;
      } else {
        EXPECT_FALSE(seen) << "a repack config comes before another on "
                           << toString(t);
      }
    }
    EXPECT_EQ(wgmma, t == Target::SM90A ? 5u : 0u) << toString(t);
    EXPECT_EQ(streamK, t == Target::SM90A ? 1u : 0u) << toString(t);
    EXPECT_EQ(fill, t == Target::SM90A ? 3u : 0u) << toString(t);
    EXPECT_EQ(tiled, 2u) << toString(t);
    const GemmConfig def = defaultConfig(ragged, t);
    if (t == Target::SM90A) {
      EXPECT_TRUE(def.repack && def.loop == GemmLoop::Wgmma && !def.streamK);
      EXPECT_EQ(def, all.front());
      EXPECT_EQ(def.blockM, 64);
      EXPECT_EQ(def.blockN, 64);
    } else {
      EXPECT_FALSE(def.repack) << toString(t);
    }
  }
  // Too small for the copy's launch to pay, or M <= 64 (unmeasured): the
  // 2-byte loop stays.
  EXPECT_FALSE(defaultConfig(problem(33, 17, 9, "nt"), Target::SM90A).repack);
  EXPECT_FALSE(
      defaultConfig(problem(128, 256, 1023, "nt"), Target::SM90A).repack);
  EXPECT_FALSE(
      defaultConfig(problem(64, 8192, 8191, "nt"), Target::SM90A).repack);
  EXPECT_TRUE(
      defaultConfig(problem(1000, 1000, 1001, "nn"), Target::SM90A).repack);
  // Aligned operands: nothing to repack (nor the repack-only 64x64 wgmma
  // tile of the fixed list; 64 is the fitted width here, 2 x 65 tiles, at
  // its deep rings only). A ragged N of B 'T' is not a row.
  for (const GemmConfig &c :
       enumerateConfigs(problem(127, 4099, 1024, "nt"), Target::SM90A)) {
    EXPECT_FALSE(c.repack);
    EXPECT_FALSE(c.loop == GemmLoop::Wgmma && c.blockN == 64 &&
                 c.blockM == 64 && c.stages <= 6);
  }
  // A ragged N of B 'N' is: repack offered.
  EXPECT_TRUE(
      firstRepack(problem(127, 4099, 1024, "nn"), Target::SM90A).repack);
  // TF32 inputs are 4 bytes: never.
  GemmProblem tf = problem(127, 4099, 1023, "nt", DType::F32, DType::F32);
  tf.tf32 = true;
  for (const GemmConfig &c : enumerateConfigs(tf, Target::SM80))
    EXPECT_FALSE(c.repack);
}

TEST(Repack, LimitsTraitsAndNames) {
  const GemmProblem ragged = problem(127, 4099, 1023, "nt");
  GemmConfig wg = wgmma128x128();
  // Without repack, TMA refuses the 2046-byte rows; with it, the loop reads
  // 16-byte vectors of the copies.
  ASSERT_TRUE(checkConfig(ragged, wg, Target::SM90A));
  wg.repack = true;
  EXPECT_FALSE(checkConfig(ragged, wg, Target::SM90A));
  const GemmTraits tr = gemmTraits(ragged, wg, Target::SM90A);
  EXPECT_EQ(tr.vecA, 8);
  EXPECT_EQ(tr.vecB, 8);
  EXPECT_EQ(repackedProblem(ragged).k, 1024);
  EXPECT_EQ(gemmKernelName(ragged, wg, Target::SM90A),
            "kgen_gemm_bf16_nt_mdyn_n4099_k1023_wgmma_b128x128x64_wg2_s4_"
            "v881_repack"); // C: N = 4099 is ragged
  const KernelSource ks = emitGemm(ragged, wg, Target::SM90A);
  EXPECT_EQ(ks.prologue, ks.name + "_copy");
  EXPECT_NE(ks.source.find("static constexpr int kK = 1024;"),
            std::string::npos);
  EXPECT_NE(ks.source.find(ks.prologue + "(const kgen::gemm::RepackParams p)"),
            std::string::npos);
  EXPECT_NE(
      std::find(ks.headers.begin(), ks.headers.end(), "kgen/gemm/repack.h"),
      ks.headers.end());
  EXPECT_TRUE(emitGemm(ragged, GemmConfig{}, Target::SM80).prologue.empty());
  // Refused: the gemv loop, 4-byte inputs.
  GemmConfig gemv;
  gemv.repack = true;
  gemv.loop = GemmLoop::Gemv;
  gemv.blockM = 8;
  gemv.blockN = 64;
  gemv.blockK = 32;
  gemv.warpsM = 1;
  gemv.warpsN = 2;
  gemv.splitK = 1;
  auto e = checkConfig(problem(8, 4099, 1023, "nt"), gemv, Target::SM80);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("repack with loop = gemv"), std::string::npos) << *e;
  GemmProblem tf = problem(127, 4099, 1023, "nt", DType::F32, DType::F32);
  tf.tf32 = true;
  GemmConfig tiled;
  tiled.repack = true;
  e = checkConfig(tf, tiled, Target::SM80);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("repack copies 2-byte elements"), std::string::npos) << *e;
  // JSON round trip.
  EXPECT_EQ(toJson(wg)["repack"], true);
  EXPECT_EQ(gemmConfigFromJson(toJson(wg)), wg);
  EXPECT_FALSE(toJson(GemmConfig{}).contains("repack"));
}

TEST(Repack, PlanPadsRowsAndKAndSizesTheWorkspace) {
  // nt, K = 1023: both operands copied, K padded to 1024, A at the
  // workspace's start, B 256-byte aligned after it.
  gemm::Params p{};
  char base[1];
  p.a = base;
  p.b = base;
  p.m = 127;
  p.n = 4099;
  p.k = 1023;
  p.lda = p.ldb = 1023;
  p.strideA = p.strideB = 1;
  p.batch = 1;
  gemm::RepackParams rp;
  const long long aBytes = 127LL * 1024 * 2, bBytes = 4099LL * 1024 * 2;
  const long long want = (aBytes + 255) / 256 * 256 + bBytes;
  gemm::Params sizing = p;
  EXPECT_EQ(gemm::planRepack(sizing, rp, false, true, false, false, nullptr),
            want);
  EXPECT_EQ(sizing.k, 1023); // a null workspace only sizes
  char *ws = reinterpret_cast<char *>(uintptr_t(1) << 32);
  EXPECT_EQ(gemm::planRepack(p, rp, false, true, false, false, ws), want);
  EXPECT_EQ(p.k, 1024);
  EXPECT_EQ(p.a, ws);
  EXPECT_EQ(p.lda, 1024);
  EXPECT_EQ(p.b, ws + (aBytes + 255) / 256 * 256);
  EXPECT_EQ(p.ldb, 1024);
  EXPECT_EQ(rp.op[0].rows, 127);
  EXPECT_EQ(rp.op[0].extent, 1023);
  EXPECT_EQ(rp.op[1].dstRows, 4099);
  // gemmWorkspace counts the same, for both operands.
  GemmConfig c;
  c.repack = true;
  EXPECT_EQ(gemmWorkspace(problem(127, 4099, 1023, "nt"), c, 127).repackBytes,
            want);
  // nn with K = 1024 and A aligned: only B (K x N) is copied, its rows of
  // N = 4099 padded to 4104; A stays the caller's.
  gemm::Params q{};
  q.a = base;
  q.b = base;
  q.m = 127;
  q.n = 4099;
  q.k = 1024;
  q.lda = 1024;
  q.ldb = 4099;
  q.strideA = 0;
  q.strideB = 5000LL * 1024; // batches of B
  q.batch = 3;
  EXPECT_EQ(gemm::planRepack(q, rp, false, false, false, true, ws),
            3LL * 1024 * 4104 * 2);
  EXPECT_EQ(q.a, static_cast<const void *>(base));
  EXPECT_EQ(rp.op[0].src, nullptr);
  EXPECT_EQ(q.b, ws);
  EXPECT_EQ(q.ldb, 4104);
  EXPECT_EQ(q.strideB, 1024LL * 4104);
  EXPECT_EQ(rp.op[1].batch, 3);
  EXPECT_EQ(rp.op[1].rows, 1024);
  EXPECT_EQ(rp.op[1].extent, 4099);
  // The grid: B's blocks alone (A is not copied), one a kRepackWarps of
  // (row, segment) units: rows of 4104 / 8 = 513 chunks are 5 segments of
  // up to kRepackSegment; capped, the warps stride.
  static_assert(gemm::kRepackSegment == 128 && gemm::kRepackWarps == 8);
  unsigned grid[3];
  EXPECT_EQ(gemm::repackGrid(rp, 1 << 20, grid), (1024LL * 5 + 7) / 8);
  EXPECT_EQ(grid[0], unsigned((1024LL * 5 + 7) / 8));
  EXPECT_EQ(rp.op[0].blocks, 0);
  EXPECT_EQ(rp.op[1].blocks, int(grid[0]));
  EXPECT_EQ(grid[1], 1u);
  EXPECT_EQ(grid[2], 3u);
  EXPECT_EQ(gemm::repackGrid(rp, 7, grid), 7);
  EXPECT_EQ(rp.op[1].blocks, 7);
  // Both copied (nt, K = 1023): A's blocks first, then B's.
  gemm::Params both = p;
  both.a = both.b = base;
  both.k = 1023;
  both.lda = both.ldb = 1023;
  gemm::planRepack(both, rp, false, true, true, true, ws);
  // Rows of 1024 / 8 = 128 chunks: one segment a row, one warp.
  EXPECT_EQ(gemm::repackGrid(rp, 1 << 20, grid),
            (127 + 7) / 8 + (4099 + 7) / 8);
  EXPECT_EQ(rp.op[0].blocks, (127 + 7) / 8);
  EXPECT_EQ(grid[0], unsigned(rp.op[0].blocks + rp.op[1].blocks));
  // A shared operand (stride 0) is copied once and stays shared.
  gemm::Params s = q;
  s.b = base;
  s.ldb = 4099;
  s.strideB = 0;
  gemm::planRepack(s, rp, false, false, false, true, ws);
  EXPECT_EQ(rp.op[1].batch, 1);
  EXPECT_EQ(s.strideB, 0);
  // Which operands need it: pointer, ld, extent, batch stride, K.
  alignas(16) static char aligned[32];
  EXPECT_FALSE(gemm::repackNeeded(aligned, 1024, 1024, 0, 1024));
  EXPECT_TRUE(gemm::repackNeeded(aligned + 2, 1024, 1024, 0, 1024));
  EXPECT_TRUE(gemm::repackNeeded(aligned, 1023, 1016, 0, 1024));
  EXPECT_TRUE(gemm::repackNeeded(aligned, 4104, 4099, 0, 1024));
  EXPECT_TRUE(gemm::repackNeeded(aligned, 1024, 1024, 1023, 1024));
  EXPECT_TRUE(gemm::repackNeeded(aligned, 1024, 1024, 0, 1023));
}

TEST(Candidates, SixtyFourRowFittedTilesWhereHalfATileRowIsPadding) {
  // The ranked list's 128-row tiles compute up to 64 rows past M here, one
  // tile a CTA: the default is the 64-row fitted tile (one wave of them) at
  // its deepest ring. 788 rows: 13 x 10 tiles of 64x208 (7 x 16 of
  // 128x128); 160 rows: 3 x 43 of 64x192 (2 x 64 of 128x128).
  struct Pick {
    int64_t m, n, k;
    int blockN;
  };
  for (const Pick &q : {Pick{788, 2048, 2048, 208}, Pick{160, 8192, 8192, 192},
                        Pick{700, 2304, 8192, 192}}) {
    const GemmConfig c =
        defaultConfig(problem(q.m, q.n, q.k, "nt"), Target::SM90A);
    EXPECT_EQ(c.loop, GemmLoop::Wgmma) << q.m;
    EXPECT_EQ(c.blockM, 64) << q.m;
    EXPECT_EQ(c.blockN, q.blockN) << q.m;
    EXPECT_EQ(c.stages, 6) << q.m;
    EXPECT_FALSE(c.swapAB);
    EXPECT_LE((q.m + 63) / 64 * ((q.n + c.blockN - 1) / c.blockN), 132);
  }
  // Not where the 128-row tiles' last row is more than half full (1000 =
  // 7 x 128 + 104), nor where the ranked pick has 64-row tiles already
  // (150x4096x4096: 64x128, which ran 18.4-18.6 us against 21.0-21.2 for
  // the fitted 64x96 on the H100).
  EXPECT_EQ(
      defaultConfig(problem(1000, 3072, 2048, "nt"), Target::SM90A).blockM,
      128);
  const GemmConfig at150 =
      defaultConfig(problem(150, 4096, 4096, "nt"), Target::SM90A);
  EXPECT_EQ(at150.blockM, 64);
  EXPECT_EQ(at150.blockN, 128);
  // B stored K x N has no fitted tiles past M = 128: the swapped tile with
  // the most CTAs, 64 columns wide on a tie, at its deepest ring. 788 rows:
  // 4 x 32 tiles of 200x64 or 8 x 16 of 104x128; 160 rows: 1 x 128 of
  // 160x64 or 2 x 64 of 80x128; 700 rows: 3 x 36 of 240x64 (108) against 7
  // x 18 of 104x128 (126).
  struct Swapped {
    int64_t m, n, k;
    int blockM, blockN;
  };
  for (const Swapped &q :
       {Swapped{788, 2048, 2048, 200, 64}, Swapped{160, 8192, 8192, 160, 64},
        Swapped{700, 2304, 8192, 104, 128}}) {
    const GemmConfig c =
        defaultConfig(problem(q.m, q.n, q.k, "nn"), Target::SM90A);
    EXPECT_TRUE(c.swapAB) << q.m;
    EXPECT_EQ(c.blockM, q.blockM) << q.m;
    EXPECT_EQ(c.blockN, q.blockN) << q.m;
    EXPECT_EQ(c.stages, 6) << q.m;
  }
  // Not past the swapped tile's 256 rows (4100 rows: no swapped candidate),
  // nor where the padded rows are at most a 16th of the 128-row tiles'
  // (1200 rows: 80 of 1280).
  EXPECT_FALSE(
      defaultConfig(problem(4100, 4096, 4096, "nn"), Target::SM90A).swapAB);
  for (const char *layout : {"nn", "nt"})
    EXPECT_FALSE(
        defaultConfig(problem(1200, 2048, 2048, layout), Target::SM90A).swapAB)
        << layout;
}

TEST(SwapAB, TallProblemsWithFewTiles) {
  // From M = 1024 (B stored K x N: 1600), where 128-row tiles leave SMs
  // idle: plain 64x128 tiles (one consumer, 8 stages) where they make one
  // wave of 70-100% of the 132 SMs (2000x512: 32 x 4 = 128 tiles; 1300x768:
  // 21 x 6 = 126, which also stands for the swapped fallback of 128-row
  // tiles padding 108 rows).
  struct Pick {
    int64_t m, n, k;
    const char *layout;
  };
  for (const Pick &q :
       {Pick{2000, 512, 4096, "nt"}, Pick{2000, 512, 4096, "nn"},
        Pick{1024, 1024, 4096, "nt"}, Pick{1300, 768, 4096, "nt"},
        Pick{1600, 640, 4096, "nn"}, Pick{3000, 256, 4096, "nn"}}) {
    const GemmConfig c =
        defaultConfig(problem(q.m, q.n, q.k, q.layout), Target::SM90A);
    EXPECT_EQ(c.loop, GemmLoop::Wgmma) << q.m << " " << q.layout;
    EXPECT_FALSE(c.swapAB) << q.m << " " << q.layout;
    EXPECT_EQ(c.blockM, 64) << q.m << " " << q.layout;
    EXPECT_EQ(c.blockN, 128) << q.m << " " << q.layout;
    EXPECT_EQ(c.warpsM, 1) << q.m << " " << q.layout;
    EXPECT_EQ(c.stages, 8) << q.m << " " << q.layout;
  }
  // B stored K x N below M = 1600 keeps the swapped 64-column tile (its
  // 128-column twin's n would be 64: 1024 rows, 8 x 16 tiles of 128x64).
  const GemmConfig nn1024 =
      defaultConfig(problem(1024, 1024, 4096, "nn"), Target::SM90A);
  EXPECT_TRUE(nn1024.swapAB);
  EXPECT_EQ(nn1024.blockM, 128);
  EXPECT_EQ(nn1024.blockN, 64);
  // Where those would take more than one wave (1100x1024: 18 x 8 = 144):
  // the swapped tile 128 columns wide (two consumers, n fitted to 72: 16 x
  // 8 tiles), where below M = 1024 it stays 64 wide (900x1536: 184x64).
  for (const char *layout : {"nt", "nn"}) {
    const GemmConfig c =
        defaultConfig(problem(1100, 1024, 4096, layout), Target::SM90A);
    EXPECT_TRUE(c.swapAB) << layout;
    EXPECT_EQ(c.blockM, 72) << layout;
    EXPECT_EQ(c.blockN, 128) << layout;
    EXPECT_EQ(c.warpsM, 2) << layout;
    const GemmConfig below =
        defaultConfig(problem(900, 1536, 4096, layout), Target::SM90A);
    EXPECT_TRUE(below.swapAB) << layout;
    EXPECT_EQ(below.blockM, 184) << layout;
    EXPECT_EQ(below.blockN, 64) << layout;
  }
  // The candidates hold the 64x128 tile once.
  const std::vector<GemmConfig> cs =
      enumerateConfigs(problem(2000, 512, 4096, "nt"), Target::SM90A);
  EXPECT_EQ(
      std::count(cs.begin(), cs.end(),
                 defaultConfig(problem(2000, 512, 4096, "nt"), Target::SM90A)),
      1);
}

TEST(SwapAB, FittedTilesLimitsAndJson) {
  // 532 x 2048 on sm_90a's 132 SMs: 32 columns of 64, so 4 rows of tiles,
  // 136 = ceil(532 / 4) rounded to 8 rows each.
  GemmProblem p = problem(532, 2048, 2048, "nt");
  std::vector<GemmConfig> cs = enumerateConfigs(p, Target::SM90A);
  auto swapped = std::find_if(cs.begin(), cs.end(), [](const GemmConfig &c) {
    return c.swapAB && c.blockN == 64;
  });
  ASSERT_NE(swapped, cs.end());
  EXPECT_EQ(swapped->blockM, 136);
  EXPECT_FALSE(checkConfig(p, *swapped, Target::SM90A));
  EXPECT_EQ(gemmTraits(p, *swapped, Target::SM90A).accumPerThread, 68);
  // The default here: 128x128 tiles would take 80 of 132 SMs. Not where
  // whole tiles fill the SMs (788 rows: 112 tiles; 1024^3: 128 of 64x128),
  // nor at M <= 256 (the tuner measures it there).
  EXPECT_EQ(defaultConfig(p, Target::SM90A), *swapped);
  EXPECT_EQ(defaultConfig(problem(532, 2048, 2048, "nn"), Target::SM90A),
            *swapped);
  EXPECT_FALSE(
      defaultConfig(problem(788, 2048, 2048, "nt"), Target::SM90A).swapAB);
  EXPECT_FALSE(
      defaultConfig(problem(1024, 1024, 1024, "nt"), Target::SM90A).swapAB);
  EXPECT_FALSE(
      defaultConfig(problem(256, 4096, 4096, "nt"), Target::SM90A).swapAB);
  EXPECT_FALSE(defaultConfig(p, Target::SM80).swapAB);
  // B stored K x N is wgmma's A operand M-major: the same fitted tiles.
  const GemmProblem nn = problem(532, 2048, 2048, "nn");
  std::vector<GemmConfig> nnCs = enumerateConfigs(nn, Target::SM90A);
  EXPECT_NE(std::find(nnCs.begin(), nnCs.end(), *swapped), nnCs.end());
  EXPECT_FALSE(checkConfig(nn, *swapped, Target::SM90A));
  // A is K-major only; pairs and split tiles are refused with the reason.
  EXPECT_TRUE(
      checkConfig(problem(532, 2048, 2048, "tn"), *swapped, Target::SM90A));
  GemmConfig pair = *swapped;
  pair.cluster = 2;
  auto e = checkConfig(p, pair, Target::SM90A);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("swapAB needs single CTAs on whole tiles"),
            std::string::npos)
      << *e;
  GemmConfig wide = *swapped;
  wide.blockN = 192;
  EXPECT_TRUE(checkConfig(nn, wide, Target::SM90A));
  // JSON round trip; configs without it read the same.
  EXPECT_EQ(toJson(*swapped)["swap_ab"], true);
  EXPECT_EQ(gemmConfigFromJson(toJson(*swapped)), *swapped);
  EXPECT_FALSE(toJson(GemmConfig{}).contains("swap_ab"));
  EXPECT_NE(gemmKernelName(p, *swapped, Target::SM90A).find("_swap"),
            std::string::npos);
}

TEST(Fp8, NamesJsonDefaultsAndRules) {
  auto has = [](const std::optional<std::string> &e, const char *needle) {
    return e && e->find(needle) != std::string::npos;
  };
  EXPECT_EQ(parseDType("e4m3"), DType::E4M3);
  EXPECT_EQ(parseDType("float8_e4m3fn"), DType::E4M3);
  EXPECT_EQ(parseDType("e5m2"), DType::E5M2);
  EXPECT_EQ(toString(DType::E5M2), "e5m2");
  EXPECT_EQ(sizeOf(DType::E4M3), 1);
  // JSON without "c" and "align": bf16 out, 16-byte rows.
  GemmProblem j = gemmProblemFromJson(nlohmann::json::parse(
      R"({"m":64,"n":4096,"k":4096,"ab":"e4m3","layout":"nt"})"));
  EXPECT_EQ(j.c, DType::BF16);
  EXPECT_EQ(j.alignA, 16);
  EXPECT_EQ(j.alignB, 16);
  EXPECT_FALSE(checkProblem(j));
  EXPECT_EQ(gemmProblemFromJson(toJson(j)), j);
  // The rules, each named.
  GemmProblem p = j;
  p.transB = false;
  EXPECT_TRUE(has(checkProblem(p), "need layout nt"));
  p = j;
  p.alignA = 8;
  EXPECT_TRUE(has(checkProblem(p), "alignA = alignB = 16"));
  p = j;
  p.c = DType::E5M2;
  EXPECT_TRUE(has(checkProblem(p), "input type only"));
  p.c = DType::F32;
  EXPECT_TRUE(has(checkProblem(p), "bf16 or f16, not f32"));
  p.c = DType::F16;
  EXPECT_FALSE(checkProblem(p));
  for (Target t : {Target::SM80, Target::GFX90A, Target::GFX942}) {
    EXPECT_TRUE(has(checkProblemOnTarget(j, t), "sm_90a's fp8 wgmma only"));
    EXPECT_TRUE(enumerateConfigs(j, t).empty()) << toString(t);
  }
  // Only the wgmma loop, with 128-element k-slices.
  GemmConfig tiled;
  EXPECT_TRUE(has(checkConfig(j, tiled, Target::SM90A), "loop = wgmma only"));
  GemmConfig w = wgmma128x128();
  EXPECT_TRUE(has(checkConfig(j, w, Target::SM90A), "must be 128"));
  w.blockK = 128;
  EXPECT_FALSE(checkConfig(j, w, Target::SM90A));
  // The promoted sums double the accumulators: 128x256 does not fit,
  // 128x208 does (and is a candidate).
  w.blockN = 256;
  EXPECT_TRUE(has(checkConfig(j, w, Target::SM90A), "doubled for fp8"));
  w.blockN = 208;
  EXPECT_FALSE(checkConfig(j, w, Target::SM90A));
  GemmProblem big = j;
  big.m = 4096;
  const std::vector<GemmConfig> cands = enumerateConfigs(big, Target::SM90A);
  EXPECT_TRUE(std::any_of(cands.begin(), cands.end(), [](const GemmConfig &c) {
    return c.blockM == 128 && c.blockN == 208;
  }));
  // Scales are fp8's only.
  GemmProblem bf = problem(64, 4096, 4096);
  GemmArgs args;
  args.a = args.b = args.c = reinterpret_cast<void *>(uintptr_t(1) << 32);
  float scale = 1;
  args.scaleA = &scale;
  EXPECT_THROW(Runtime::resolve(bf, args), Error);
  EXPECT_NO_THROW(Runtime::resolve(j, args));
}

TEST(Fp8, CandidatesAreWgmmaAndTheSourceSaysK32) {
  for (DType ab : {DType::E4M3, DType::E5M2})
    for (int64_t m : {1, 64, 532, 4096}) {
      GemmProblem p = problem(m, 2048, 4096, "nt", ab, DType::BF16);
      p.alignA = p.alignB = 16;
      std::vector<GemmConfig> cs = enumerateConfigs(p, Target::SM90A);
      ASSERT_FALSE(cs.empty()) << m;
      for (const GemmConfig &c : cs) {
        EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
        EXPECT_EQ(c.loop, GemmLoop::Wgmma);
        EXPECT_EQ(c.blockK, 128);
        EXPECT_FALSE(c.swapAB);
      }
      const GemmConfig c = defaultConfig(p, Target::SM90A);
      KernelSource ks = emitGemm(p, c, Target::SM90A);
      EXPECT_EQ(ks.name.rfind(std::string("kgen_gemm_") +
                                  std::string(toString(ab)) + "_cbf16_nt_",
                              0),
                0u)
          << ks.name;
      const std::string atom = "wgmma.mma_async.sync.aligned.m64n" +
                               std::to_string(c.wgmmaN()) + "k32.f32." +
                               std::string(toString(ab)) + "." +
                               std::string(toString(ab));
      EXPECT_NE(ks.source.find(atom), std::string::npos) << atom;
      EXPECT_NE(ks.source.find(
                    "using TypeA = kgen::" + std::string(toString(ab)) + ";"),
                std::string::npos);
    }
}
