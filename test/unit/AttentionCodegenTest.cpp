//===- AttentionCodegenTest.cpp - Attention problems, configs, source -----===//

#include "kgen/Attention.h"
#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Error.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace kgen;

namespace {

AttentionProblem causalGqa() {
  AttentionProblem p;
  p.batch = 4;
  p.headsQ = 32;
  p.headsKv = 8;
  p.seqlenQ = p.seqlenK = 4096;
  p.causal = true;
  p.lse = true;
  return p;
}

bool contains(const std::string &s, const std::string &what) {
  return s.find(what) != std::string::npos;
}

/// The wgmma loop's 128x128 tile (two consumer warpgroups), the one fp8
/// tile family too.
AttentionConfig wgmma128x128() {
  AttentionConfig c;
  c.loop = AttentionLoop::Wgmma;
  c.blockM = 128;
  c.blockN = 128;
  c.warps = 8;
  return c;
}

} // namespace

TEST(AttentionJson, ProblemAndConfigRoundTrip) {
  AttentionProblem p = causalGqa();
  p.dtype = DType::F16;
  p.headDimQk = 192;
  p.headDimV = 128;
  p.layout = AttentionLayout::BHSD;
  p.windowLeft = 256;
  p.windowRight = 0;
  p.varlen = p.alibi = p.bias = true;
  EXPECT_EQ(attentionProblemFromJson(toJson(p)), p);
  AttentionConfig c;
  c.blockM = 128;
  c.blockN = 32;
  c.warps = 8;
  c.stages = 3;
  c.preloadV = true;
  c.splits = 4;
  c.packGqa = true;
  EXPECT_EQ(attentionConfigFromJson(toJson(c)), c);
  // A scalar stands for a pair.
  AttentionProblem q = attentionProblemFromJson(
      nlohmann::json::parse(R"({"heads": 8, "seqlen": 17, "head_dim": 64})"));
  EXPECT_EQ(q.headsQ, 8);
  EXPECT_EQ(q.headsKv, 8);
  EXPECT_EQ(q.seqlenK, 17);
  EXPECT_EQ(q.headDimV, 64);
}

TEST(AttentionJson, ErrorsNameTheField) {
  auto message = [](const char *text, bool config) {
    try {
      auto j = nlohmann::json::parse(text);
      if (config)
        attentionConfigFromJson(j);
      else
        attentionProblemFromJson(j);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(
      contains(message(R"({"headz": 8})", false), "unknown field 'headz'"));
  EXPECT_TRUE(contains(message(R"({"causal": 1})", false),
                       "'causal' must be true or false"));
  EXPECT_TRUE(contains(message(R"({"layout": "sbhd"})", false),
                       "\"bshd\" or \"bhsd\""));
  EXPECT_TRUE(
      contains(message(R"({"family": "gemm"})", false), "not \"attention\""));
  EXPECT_TRUE(contains(message(R"({"block": [64, 64, 64]})", true), "'block'"));
}

TEST(AttentionProblem, ChecksNameFieldValueAndRule) {
  AttentionProblem p = causalGqa();
  EXPECT_FALSE(checkProblem(p));
  p.headsKv = 5;
  EXPECT_EQ(*checkProblem(p),
            "attention: headsQ = 32 is not a multiple of headsKv = 5 (GQA maps "
            "query head h to KV head h / (headsQ / headsKv))");
  p = causalGqa();
  p.headDimV = 80;
  EXPECT_TRUE(contains(*checkProblem(p), "headDimV = 80 is not one of 32, 64"));
  p = causalGqa();
  p.dtype = DType::F32;
  EXPECT_TRUE(contains(*checkProblem(p), "dtype f32 is not supported"));
  p = causalGqa();
  p.seqlenK = 0;
  EXPECT_TRUE(contains(*checkProblem(p), "seqlenK = 0 must be >= 1"));
  p = causalGqa();
  p.windowLeft = -2;
  EXPECT_TRUE(contains(*checkProblem(p), "windowLeft = -2"));
}

TEST(AttentionConfig, LimitsPerTarget) {
  AttentionProblem p = causalGqa();
  AttentionConfig c;
  EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
  // 64 rows over 4 wave64s leaves 16 per wave, not a multiple of MFMA's 32.
  EXPECT_TRUE(contains(*checkConfig(p, c, Target::GFX90A),
                       "rows per warp = blockM / warps = 64/4 is not a "
                       "multiple of 32 (the MFMA 32x32x8 atom on gfx90a)"));
  c.warps = 2;
  // 64x64 tiles at D = 128 need 87040 B of LDS; 64x32 fit in 64 KiB.
  EXPECT_TRUE(contains(*checkConfig(p, c, Target::GFX90A),
                       "shared memory 87040 B exceeds gfx90a's 65536 B"));
  c.blockN = 32;
  EXPECT_FALSE(checkConfig(p, c, Target::GFX90A));
  // One K/V buffer is an AMD-only option (cp.async needs two).
  c.stages = 1;
  EXPECT_FALSE(checkConfig(p, c, Target::GFX90A));
  EXPECT_TRUE(contains(*checkConfig(p, c, Target::SM80), "stages = 1"));
  c = AttentionConfig();
  // D = 256 with 4 stages of 128-key tiles: past sm_80's shared memory.
  p.headDimQk = p.headDimV = 256;
  AttentionConfig big;
  big.blockM = 128;
  big.blockN = 128;
  big.warps = 8;
  big.stages = 4;
  EXPECT_TRUE(contains(*checkConfig(p, big, Target::SM80),
                       "exceeds sm_80's 166912 B per block"));
  big.stages = 1;
  EXPECT_TRUE(contains(*checkConfig(p, big, Target::SM80), "stages = 1"));
  AttentionConfig regs;
  regs.blockM = 128;
  regs.warps = 4; // 32 rows a warp at D = 256
  EXPECT_TRUE(contains(*checkConfig(p, regs, Target::SM90A),
                       "fp32 registers per thread"));
}

TEST(AttentionCandidates, ValidRankedAndSplitForDecode) {
  for (Target t : kAllTargets) {
    AttentionProblem p = causalGqa();
    auto cs = enumerateConfigs(p, t);
    ASSERT_FALSE(cs.empty()) << toString(t);
    // 12 at most, and on sm_90a the persistent twins of the wgmma ones.
    EXPECT_LE(
        std::count_if(cs.begin(), cs.end(),
                      [](const AttentionConfig &c) { return !c.persistent; }),
        12);
    for (const AttentionConfig &c : cs)
      EXPECT_FALSE(checkConfig(p, c, t)) << attentionKernelName(p, c, t);
    EXPECT_EQ(defaultConfig(p, t), cs.front());
    EXPECT_EQ(cs.front().splits, 1) << "prefill fills the machine";
    // Decode: 1 query, 32 heads, 32K keys leaves most of the GPU idle
    // without split-KV.
    AttentionProblem d;
    d.headsQ = 32;
    d.headsKv = 8;
    d.seqlenQ = 1;
    d.seqlenK = 32768;
    AttentionConfig dc = defaultConfig(d, t);
    EXPECT_GT(dc.splits, 1) << toString(t);
    EXPECT_FALSE(checkConfig(d, dc, t));
    for (int dim : {32, 64, 96, 128, 192, 256}) {
      AttentionProblem q = p;
      q.headDimQk = q.headDimV = dim;
      EXPECT_FALSE(enumerateConfigs(q, t).empty())
          << toString(t) << " D " << dim;
    }
  }
}

TEST(AttentionEmitter, NameSourceAndLaunch) {
  AttentionProblem p = causalGqa();
  AttentionConfig c;
  c.splits = 2;
  EXPECT_EQ(attentionKernelName(p, c, Target::SM90A),
            "kgen_attn_bf16_d128_causal_lse_b64x64_w4_s2_split2");
  p.headDimV = 64;
  p.varlen = true;
  c.splits = 1;
  c.preloadV = true;
  EXPECT_EQ(attentionKernelName(p, c, Target::SM80),
            "kgen_attn_bf16_d128v64_causal_varlen_lse_b64x64_w4_s2_pv");
  KernelSource ks = emitAttention(p, c, Target::SM80);
  EXPECT_TRUE(contains(ks.source, "#include \"kgen/attention/attention.h\""));
  EXPECT_TRUE(contains(ks.source, "kHeadDimQk = 128, kHeadDimV = 64"));
  EXPECT_TRUE(contains(ks.source, "kCausal = true"));
  EXPECT_TRUE(contains(ks.source, "(kgen::attention::Params p)"));
  EXPECT_FALSE(contains(ks.source, "_combine"));
  EXPECT_EQ(ks.smemBytes, attentionTraits(p, c, Target::SM80).smemBytes);
  // Headers: the NVIDIA mapping, then the template's includes, itself last.
  ASSERT_FALSE(ks.headers.empty());
  EXPECT_EQ(ks.headers.back(), "kgen/attention/attention.h");
  LaunchDims d = attentionLaunchDims(p, c, Target::SM80, 3, 130);
  EXPECT_EQ(d.grid[0], 3u); // ceil(130 / 64)
  EXPECT_EQ(d.grid[1], 32u);
  EXPECT_EQ(d.grid[2], 3u);
  EXPECT_EQ(d.block[0], 128u);
  c.splits = 4;
  ks = emitAttention(p, c, Target::GFX90A);
  EXPECT_TRUE(
      contains(ks.source, "_split4_combine(kgen::attention::Params p)"));
  EXPECT_TRUE(contains(ks.source, "MFMA 32x32x8"));
  d = attentionLaunchDims(p, c, Target::GFX90A, 1, 1);
  EXPECT_EQ(d.grid[1], 128u); // heads * splits
  EXPECT_EQ(attentionWorkspaceBytes(p, c, 1, 1), size_t(4 * 32 * (64 + 1) * 4));
  KernelSource inl = emitAttention(p, c, Target::GFX90A, true);
  EXPECT_TRUE(inl.headers.empty());
  EXPECT_TRUE(contains(inl.source, "begin kgen/attention/params.h"));
}

TEST(AttentionEmitter, PackedGqaNameSourceAndLaunch) {
  AttentionProblem p = causalGqa(); // 32 query heads over 8 KV heads: g = 4
  AttentionConfig c;
  c.blockM = 32;
  c.warps = 2;
  c.splits = 3;
  c.packGqa = true;
  ASSERT_FALSE(checkConfig(p, c, Target::SM90A));
  EXPECT_EQ(attentionKernelName(p, c, Target::SM90A),
            "kgen_attn_bf16_d128_causal_lse_b32x64_w2_s2_split3_gqa");
  KernelSource ks = emitAttention(p, c, Target::SM90A);
  EXPECT_TRUE(contains(ks.source, "kPackGqa = true"));
  EXPECT_TRUE(contains(ks.source, "grid (ceil(Sq * g/32), headsKv * 3"));
  // Decode, 5 sequences: 4 packed rows per KV head fit one row block.
  LaunchDims d = attentionLaunchDims(p, c, Target::SM90A, 5, 1);
  EXPECT_EQ(d.grid[0], 1u);
  EXPECT_EQ(d.grid[1], 24u); // headsKv * splits
  EXPECT_EQ(d.grid[2], 5u);
  // Prefill of 17 rows: 68 packed rows, 3 blocks of 32.
  d = attentionLaunchDims(p, c, Target::SM90A, 1, 17);
  EXPECT_EQ(d.grid[0], 3u);
  // Partials and the combine stay per query head.
  EXPECT_EQ(attentionWorkspaceBytes(p, c, 5, 1),
            size_t(3 * 5 * 32 * (128 + 1) * 4));
  d = attentionCombineLaunchDims(p, c, Target::SM90A, 5, 1);
  EXPECT_EQ(d.grid[1], 32u);
  // The combine waits for the partials in its template: on sm_90a it
  // launches while the main kernel finishes.
  EXPECT_TRUE(d.overlapsPrevious);
  EXPECT_FALSE(
      attentionCombineLaunchDims(p, c, Target::SM80, 5, 1).overlapsPrevious);
  c.packGqa = false;
  EXPECT_TRUE(
      contains(emitAttention(p, c, Target::SM90A).source, "kPackGqa = false"));
  // The rows of a packed grid are indexed with 32-bit values.
  p.headsKv = 1;
  p.seqlenQ = int64_t(1) << 27;
  c.packGqa = true;
  EXPECT_TRUE(contains(*checkConfig(p, c, Target::SM90A),
                       "past 2^31-1; leave pack_gqa off"));
}

TEST(AttentionCandidates, DecodePacksGqaAndSplitsToCoverTheMachine) {
  // The H200 decode shapes of bench/attention.py: 32 query heads over 8 KV
  // heads, D = 128, Sq = 1.
  for (int64_t batch : {1, 16})
    for (int64_t sk : {4096, 32768}) {
      AttentionProblem d;
      d.batch = batch;
      d.headsQ = 32;
      d.headsKv = 8;
      d.seqlenQ = 1;
      d.seqlenK = sk;
      // sm_90a: the packed wgmma loop (isMeasuredDecodeTile), one block a
      // multiprocessor; batch * headsKv * splits covers about half of the
      // 132 SMs, the splits rounded to the nearest (8 blocks: 8 splits, 9
      // measured slower at Sk 32768; 128: none).
      const AttentionConfig c = defaultConfig(d, Target::SM90A);
      const std::string name = attentionKernelName(d, c, Target::SM90A);
      EXPECT_TRUE(c.packGqa) << name;
      EXPECT_EQ(c.loop, AttentionLoop::Wgmma) << name;
      EXPECT_EQ(c.blockM, 64) << name;
      EXPECT_EQ(c.blockN, 64) << name;
      const int64_t blocks = batch * d.headsKv * c.splits;
      EXPECT_GE(blocks, 64) << name;
      EXPECT_EQ(c.splits, batch == 1 ? 8 : 1) << name;
      EXPECT_GE(sk / c.splits, 2 * c.blockN) << name;
      // sm_80: the tiled loop's packed configs, split so that batch *
      // headsKv * splits covers the 108 SMs, without splitting a row's
      // keys below two tiles.
      const AttentionConfig t = defaultConfig(d, Target::SM80);
      const std::string tname = attentionKernelName(d, t, Target::SM80);
      EXPECT_TRUE(t.packGqa) << tname;
      EXPECT_EQ(t.loop, AttentionLoop::Tiled) << tname;
      EXPECT_GE(batch * d.headsKv * t.splits,
                targetInfo(Target::SM80).computeUnits)
          << tname;
      EXPECT_GE(sk / t.splits, 2 * t.blockN) << tname;
      EXPECT_LE(t.splits, 128) << tname;
    }
  // MQA: one KV head for 8 query heads.
  AttentionProblem m;
  m.headsQ = 8;
  m.headsKv = 1;
  m.seqlenQ = 1;
  m.seqlenK = 4096;
  EXPECT_TRUE(defaultConfig(m, Target::SM80).packGqa);
  // One sequence over one KV head of 32 query heads: the wgmma loop's
  // splits keep 4 key tiles each (16 of 64 tiles, where covering half the
  // SMs would cut 66 of one tile), the fastest on an H100 (2026-12-06).
  m.headsQ = 32;
  const AttentionConfig mq = defaultConfig(m, Target::SM90A);
  EXPECT_EQ(mq.loop, AttentionLoop::Wgmma);
  EXPECT_EQ(mq.blockN, 64);
  EXPECT_EQ(mq.splits, 16) << attentionKernelName(m, mq, Target::SM90A);
  // 16 sequences: 16 blocks, 66 / 16 rounds to 4 splits (5 measured
  // slower); 4 KV heads of 16 sequences: 64 blocks, no split (2 measured
  // slower).
  m.batch = 16;
  const AttentionConfig mq16 = defaultConfig(m, Target::SM90A);
  EXPECT_EQ(mq16.splits, 4) << attentionKernelName(m, mq16, Target::SM90A);
  m.headsKv = 4;
  const AttentionConfig g16 = defaultConfig(m, Target::SM90A);
  EXPECT_EQ(g16.splits, 1) << attentionKernelName(m, g16, Target::SM90A);
  m.batch = 1;
  m.headsKv = 1;
  m.headsQ = 8;
  // MHA has nothing to pack; long prefill keeps the plain layout on ties.
  AttentionProblem h = m;
  h.headsKv = 8;
  for (const AttentionConfig &c : enumerateConfigs(h, Target::SM90A))
    EXPECT_FALSE(c.packGqa);
  EXPECT_FALSE(defaultConfig(causalGqa(), Target::SM90A).packGqa);
  // Every target still gets valid packed candidates.
  for (Target t : kAllTargets) {
    m.seqlenQ = 3;
    bool anyPacked = false;
    for (const AttentionConfig &c : enumerateConfigs(m, t)) {
      EXPECT_FALSE(checkConfig(m, c, t)) << attentionKernelName(m, c, t);
      anyPacked |= c.packGqa;
    }
    EXPECT_TRUE(anyPacked) << toString(t);
  }
}

TEST(AttentionWgmma, LimitsNameTheRule) {
  AttentionProblem p = causalGqa(); // D 128, bf16
  const AttentionConfig c = wgmma128x128();
  EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
  EXPECT_TRUE(
      contains(*checkConfig(p, c, Target::SM80), "loop = wgmma needs sm_90a"));
  EXPECT_TRUE(contains(*checkConfig(p, c, Target::GFX942),
                       "loop = wgmma needs sm_90a"));
  AttentionConfig w = c;
  w.warps = 4;
  EXPECT_TRUE(contains(*checkConfig(p, w, Target::SM90A),
                       "warps = blockM / 16 = 8 consumer warps, not 4"));
  w = c;
  w.blockM = 256;
  w.warps = 16;
  // (192 is three consumer warpgroups: fine for D = 64 with 128-key tiles.)
  EXPECT_TRUE(
      contains(*checkConfig(p, w, Target::SM90A), "blockM = 64, 128 or 192"));
  // GQA packing: on the one-block-per-row-block grid, with whole groups of
  // g = headsQ / headsKv rows in a block.
  w = c;
  w.packGqa = true;
  EXPECT_FALSE(checkConfig(p, w, Target::SM90A));
  w.persistent = true;
  EXPECT_TRUE(contains(*checkConfig(p, w, Target::SM90A),
                       "one-block-per-row-block grid only"));
  AttentionProblem g3 = p;
  g3.headsQ = 3 * g3.headsKv;
  w.persistent = false;
  EXPECT_TRUE(contains(*checkConfig(g3, w, Target::SM90A),
                       "must be a multiple of g = headsQ / headsKv = 3"));
  w = c;
  w.preloadV = true;
  EXPECT_TRUE(contains(*checkConfig(p, w, Target::SM90A), "preload_v = 0"));
  AttentionProblem v = p;
  v.varlen = true;
  EXPECT_TRUE(contains(*checkConfig(v, c, Target::SM90A), "varlen"));
  AttentionProblem d96 = p;
  d96.headDimQk = d96.headDimV = 96;
  EXPECT_TRUE(contains(*checkConfig(d96, c, Target::SM90A),
                       "headDimQk = 96; use loop = tiled"));
  // D = 256: O's 128 registers leave room for 64-key tiles only.
  AttentionProblem d256 = p;
  d256.headDimQk = d256.headDimV = 256;
  EXPECT_TRUE(contains(*checkConfig(d256, c, Target::SM90A),
                       "keeps O, S and P in 224 registers"));
  w = c;
  w.blockN = 64;
  EXPECT_FALSE(checkConfig(d256, w, Target::SM90A));
  // Three consumer warpgroups get 160 registers each.
  AttentionProblem d64 = p;
  d64.headDimQk = d64.headDimV = 64;
  w = c;
  w.blockM = 192;
  w.warps = 12;
  EXPECT_FALSE(checkConfig(d64, w, Target::SM90A));
  EXPECT_TRUE(contains(*checkConfig(p, w, Target::SM90A),
                       "past the 128 that fit the consumers' 160"));
  // Traits: a producer warpgroup on top of the consumers; Q + 2 stages of
  // K and V, unpadded, 1 KiB of alignment slack, 9 barriers (16-byte
  // aligned) and the 8 consumer warps' 2 KB slabs for O.
  const AttentionTraits tr = attentionTraits(p, c, Target::SM90A);
  EXPECT_EQ(tr.threads, 384);
  EXPECT_TRUE(tr.stageO);
  EXPECT_EQ(tr.smemBytes,
            1024 + 128 * 128 * 2 + 2 * 128 * 256 * 2 + 80 + 8 * 2048);
  // A third stage leaves no room for the slabs: O is stored from the
  // fragments. Split-KV writes fp32 partials, never through them.
  AttentionConfig deep = c;
  deep.stages = 3;
  const AttentionTraits trDeep = attentionTraits(p, deep, Target::SM90A);
  EXPECT_FALSE(trDeep.stageO);
  EXPECT_EQ(trDeep.smemBytes, 1024 + 128 * 128 * 2 + 3 * 128 * 256 * 2 + 112);
  AttentionConfig split = c;
  split.splits = 4;
  EXPECT_FALSE(attentionTraits(p, split, Target::SM90A).stageO);
}

TEST(AttentionWgmma, CandidatesJsonAndName) {
  AttentionProblem p = causalGqa();
  bool any = false;
  for (const AttentionConfig &c : enumerateConfigs(p, Target::SM90A))
    any |= c.loop == AttentionLoop::Wgmma;
  EXPECT_TRUE(any) << "sm_90a offers the wgmma loop for prefill";
  EXPECT_EQ(defaultConfig(p, Target::SM90A).loop, AttentionLoop::Wgmma);
  for (Target t : {Target::SM80, Target::GFX90A, Target::GFX942})
    for (const AttentionConfig &c : enumerateConfigs(p, t))
      EXPECT_EQ(c.loop, AttentionLoop::Tiled) << toString(t);
  // Varlen problems stay on the tiled loop.
  AttentionProblem v = p;
  v.varlen = true;
  for (const AttentionConfig &c : enumerateConfigs(v, Target::SM90A))
    EXPECT_EQ(c.loop, AttentionLoop::Tiled);

  AttentionConfig c;
  c.loop = AttentionLoop::Wgmma;
  c.blockM = 128;
  c.blockN = 64;
  c.warps = 8;
  c.stages = 3;
  const nlohmann::json j = toJson(c);
  EXPECT_EQ(j.at("loop"), "wgmma");
  EXPECT_EQ(attentionConfigFromJson(j), c);
  EXPECT_FALSE(toJson(AttentionConfig()).contains("loop"));
  nlohmann::json bad = j;
  bad["loop"] = "fa3";
  try {
    attentionConfigFromJson(bad);
    ADD_FAILURE() << "a bad loop was accepted";
  } catch (const Error &e) {
    EXPECT_TRUE(contains(e.what(), "'loop' = \"fa3\" must be \"tiled\" or "
                                   "\"wgmma\""))
        << e.what();
  }
  EXPECT_EQ(attentionKernelName(p, c, Target::SM90A),
            "kgen_attn_bf16_d128_causal_lse_wgmma_b128x64_w8_s3");
  const KernelSource ks = emitAttention(p, c, Target::SM90A);
  EXPECT_EQ(ks.threads, 384);
  EXPECT_TRUE(contains(ks.source, "kgen::attention_sm90::run<Config>(mapQ, "
                                  "mapK, mapV, p);"));
  // The file carries its two wgmma atoms, written by the emitter: S = Q K^T
  // (n = blockN) and P V with P from registers (n = Dv, V N-major).
  EXPECT_TRUE(contains(ks.source, "struct Wgmma<bf16, 64, kTransB, kTransA>"));
  EXPECT_TRUE(contains(ks.source, "struct WgmmaRs<bf16, 128, kTransB>"));
  EXPECT_TRUE(contains(ks.source,
                       "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16."
                       "bf16 {%0,"));
  EXPECT_TRUE(contains(ks.source, "{%64,%65,%66,%67}, %68, p, 1, 1, %70;"));
  EXPECT_TRUE(contains(ks.source, "\"r\"(scaleD), \"n\"(int(kTransB)));"));
}

TEST(AttentionEmitter, PersistentWgmmaConfig) {
  AttentionProblem p = causalGqa(); // B4, 32 query heads, S 4096
  AttentionConfig c = wgmma128x128();
  c.persistent = true;
  ASSERT_FALSE(checkConfig(p, c, Target::SM90A));
  EXPECT_EQ(attentionConfigFromJson(toJson(c)), c);
  EXPECT_EQ(toJson(c).at("persistent"), true);
  AttentionConfig plain = c;
  plain.persistent = false;
  EXPECT_FALSE(toJson(plain).contains("persistent"));
  EXPECT_EQ(attentionKernelName(p, c, Target::SM90A),
            "kgen_attn_bf16_d128_causal_lse_wgmma_b128x128_w8_s2_persistent");
  KernelSource ks = emitAttention(p, c, Target::SM90A);
  EXPECT_TRUE(contains(ks.source, "kPersistent = true"));
  EXPECT_TRUE(contains(ks.source, "attention_sm90::runPersistent<Config>"));
  EXPECT_TRUE(contains(emitAttention(p, plain, Target::SM90A).source,
                       "kPersistent = false"));
  // One more mbarrier (Q's "empty") than the one-block-per-tile kernel,
  // and the two slots of the work tile's index.
  EXPECT_EQ(attentionTraits(p, c, Target::SM90A).smemBytes,
            attentionTraits(p, plain, Target::SM90A).smemBytes + 16);
  // 32 row blocks * 32 heads * 4 = 4096 work tiles over the device's SMs.
  EXPECT_EQ(attentionWorkTiles(p, c, 4, 4096), 4096);
  LaunchDims d = attentionLaunchDims(p, c, Target::SM90A, 4, 4096, 132);
  EXPECT_EQ(d.grid[0], 132u);
  EXPECT_EQ(d.grid[1], 1u);
  EXPECT_EQ(d.grid[2], 1u);
  EXPECT_EQ(d.block[0], 384u);
  // Fewer work tiles than SMs: one block each. 0 SMs: the target's count.
  d = attentionLaunchDims(p, c, Target::SM90A, 1, 200, 132);
  EXPECT_EQ(d.grid[0], 2u * 32u);
  d = attentionLaunchDims(p, c, Target::SM90A, 4, 4096);
  EXPECT_EQ(d.grid[0], unsigned(targetInfo(Target::SM90A).computeUnits));
  // The tiled loop and split-KV are refused, naming the fix.
  AttentionConfig t = c;
  t.loop = AttentionLoop::Tiled;
  t.warps = 8;
  t.blockN = 64;
  EXPECT_TRUE(contains(*checkConfig(p, t, Target::SM90A),
                       "persistent = 1 needs loop = wgmma"));
  AttentionConfig s = c;
  s.splits = 2;
  EXPECT_TRUE(contains(*checkConfig(p, s, Target::SM90A),
                       "persistent = 1 does not take split-KV (splits = 2)"));
}

TEST(AttentionCandidates, PersistentTwinsForPrefillOnly) {
  // Prefill on sm_90a: every wgmma candidate comes with its persistent twin,
  // the twin first for short sequences (persistentFirst: head dims <= 128,
  // seqlen_q <= 1024, causal <= 4096), after it otherwise.
  for (bool causal : {true, false})
    for (int64_t s : {512, 1024, 1025, 4096})
      for (int d : {64, 128, 256}) {
        AttentionProblem p = causalGqa();
        p.causal = causal;
        p.seqlenQ = p.seqlenK = s;
        p.headDimQk = p.headDimV = d;
        SCOPED_TRACE("S " + std::to_string(s) + " D " + std::to_string(d) +
                     (causal ? " causal" : ""));
        const bool twinFirst = d <= 128 && (s <= 1024 || (causal && s <= 4096));
        EXPECT_EQ(attentionDynamicSchedule(p), causal && (s > 512 || d > 64));
        std::vector<AttentionConfig> cs = enumerateConfigs(p, Target::SM90A);
        int wgmma = 0, twins = 0;
        for (size_t i = 0; i < cs.size(); ++i) {
          if (cs[i].loop != AttentionLoop::Wgmma || cs[i].persistent)
            continue;
          ++wgmma;
          AttentionConfig twin = cs[i];
          twin.persistent = true;
          const size_t at = twinFirst ? i - 1 : i + 1;
          ASSERT_TRUE(twinFirst ? i > 0 : i + 1 < cs.size());
          EXPECT_EQ(cs[at], twin);
          twins += cs[at] == twin;
        }
        EXPECT_GT(wgmma, 0);
        EXPECT_EQ(twins, wgmma);
        const AttentionConfig dc = defaultConfig(p, Target::SM90A);
        EXPECT_EQ(dc.loop, AttentionLoop::Wgmma);
        EXPECT_EQ(dc.persistent, twinFirst);
        // The measured tile (isMeasuredWgmmaTile) leads where it is valid.
        EXPECT_EQ(dc.blockM, d <= 64 && !(causal && s <= 1024) ? 192 : 128);
        EXPECT_EQ(dc.blockN, d <= 64 ? 128 : (d <= 128 ? 128 : 64));
      }
  AttentionProblem p = causalGqa();
  for (Target t : {Target::SM80, Target::GFX942})
    for (const AttentionConfig &c : enumerateConfigs(p, t))
      EXPECT_FALSE(c.persistent);
  // Decode: none.
  AttentionProblem decode = p;
  decode.seqlenQ = 1;
  for (const AttentionConfig &c : enumerateConfigs(decode, Target::SM90A))
    EXPECT_FALSE(c.persistent);
}

namespace {

/// causalGqa in e4m3: fp8 Q, K and V, a bf16 O.
AttentionProblem fp8Gqa() {
  AttentionProblem p = causalGqa();
  p.dtype = DType::E4M3;
  return p;
}

} // namespace

TEST(AttentionFp8, ChecksNameTheRule) {
  const AttentionProblem p = fp8Gqa();
  const AttentionConfig c = wgmma128x128();
  EXPECT_FALSE(checkProblem(p));
  EXPECT_FALSE(checkProblemOnTarget(p, Target::SM90A));
  EXPECT_FALSE(checkConfig(p, c, Target::SM90A));
  AttentionProblem e5 = p;
  e5.dtype = DType::E5M2;
  e5.headDimQk = 256;
  EXPECT_FALSE(checkConfig(e5, c, Target::SM90A));
  // fp8 wgmma is sm_90a's.
  for (Target t : {Target::SM80, Target::GFX90A, Target::GFX942}) {
    EXPECT_FALSE(checkProblem(p));
    ASSERT_TRUE(checkProblemOnTarget(p, t)) << toString(t);
    EXPECT_EQ(*checkProblemOnTarget(p, t),
              "attention: dtype e4m3 needs sm_90a (fp8 wgmma), not " +
                  std::string(toString(t)));
    AttentionConfig tiled;
    EXPECT_TRUE(contains(*checkConfig(p, tiled, t), "needs sm_90a"));
  }
  AttentionProblem q = p;
  q.headDimQk = q.headDimV = 64;
  ASSERT_TRUE(checkProblem(q));
  EXPECT_TRUE(
      contains(*checkProblem(q), "dtype e4m3 needs headDimQk = 128 or 256"));
  q = p;
  q.headDimQk = q.headDimV = 256;
  ASSERT_TRUE(checkProblem(q));
  EXPECT_TRUE(contains(*checkProblem(q), "dtype e4m3 needs headDimV = 128"));
  q = p;
  q.varlen = true;
  ASSERT_TRUE(checkProblem(q));
  EXPECT_TRUE(contains(*checkProblem(q), "does not take varlen problems"));
  AttentionConfig tiled;
  tiled.blockN = 128;
  tiled.warps = 4;
  ASSERT_TRUE(checkConfig(p, tiled, Target::SM90A));
  EXPECT_TRUE(contains(*checkConfig(p, tiled, Target::SM90A),
                       "dtype e4m3 runs on loop = wgmma only"));
  AttentionConfig n64 = c;
  n64.blockN = 64;
  ASSERT_FALSE(checkConfig(causalGqa(), n64, Target::SM90A)) << "bf16 takes it";
  ASSERT_TRUE(checkConfig(p, n64, Target::SM90A));
  EXPECT_TRUE(contains(*checkConfig(p, n64, Target::SM90A),
                       "fp8 inputs take blockN = 128"));
}

TEST(AttentionFp8, CandidatesAreWgmmaWith128KeyTiles) {
  AttentionProblem prefill = fp8Gqa();
  AttentionProblem decode = fp8Gqa();
  decode.seqlenQ = 1;
  decode.seqlenK = 32768;
  AttentionProblem d256 = fp8Gqa();
  d256.dtype = DType::E5M2;
  d256.headDimQk = 256;
  for (const AttentionProblem &p : {prefill, decode, d256}) {
    SCOPED_TRACE("Sq " + std::to_string(p.seqlenQ) + " D " +
                 std::to_string(p.headDimQk) + " " +
                 std::string(toString(p.dtype)));
    const std::vector<AttentionConfig> cs = enumerateConfigs(p, Target::SM90A);
    ASSERT_FALSE(cs.empty());
    for (const AttentionConfig &c : cs) {
      const std::string name = attentionKernelName(p, c, Target::SM90A);
      EXPECT_EQ(c.loop, AttentionLoop::Wgmma) << name;
      EXPECT_EQ(c.blockN, 128) << name;
      EXPECT_FALSE(checkConfig(p, c, Target::SM90A)) << name;
      EXPECT_TRUE(contains(name, std::string(toString(p.dtype)))) << name;
    }
    EXPECT_EQ(defaultConfig(p, Target::SM90A), cs.front());
  }
  for (Target t : {Target::SM80, Target::GFX90A, Target::GFX942})
    EXPECT_TRUE(enumerateConfigs(prefill, t).empty()) << toString(t);
  // Short prefill leads with the persistent 128x128 tile at 3 stages (kgen
  // tune, H100: 5-9% ahead of 2 at S <= 1024); bf16 keeps 2 there.
  for (int64_t s : {512, 1024})
    for (bool causal : {false, true}) {
      AttentionProblem q = fp8Gqa();
      q.seqlenQ = q.seqlenK = s;
      q.causal = causal;
      const AttentionConfig dc = defaultConfig(q, Target::SM90A);
      EXPECT_TRUE(dc.persistent && dc.blockM == 128 && dc.blockN == 128 &&
                  dc.stages == 3)
          << attentionKernelName(q, dc, Target::SM90A);
      q.dtype = DType::BF16;
      EXPECT_EQ(defaultConfig(q, Target::SM90A).stages, 2);
    }
}

TEST(AttentionFp8, OutputTypeAndJson) {
  AttentionProblem p = causalGqa();
  EXPECT_EQ(attentionOutputDType(p), DType::BF16);
  p.dtype = DType::F16;
  EXPECT_EQ(attentionOutputDType(p), DType::F16);
  p.dtype = DType::E4M3;
  EXPECT_EQ(attentionOutputDType(p), DType::BF16);
  p.dtype = DType::E5M2;
  EXPECT_EQ(attentionOutputDType(p), DType::BF16);
  EXPECT_EQ(attentionProblemFromJson(toJson(p)), p);
  EXPECT_EQ(toJson(p).at("dtype"), "e5m2");
  // torch's names, as the GEMM's "ab" takes them.
  EXPECT_EQ(attentionProblemFromJson(
                nlohmann::json::parse(R"({"dtype": "float8_e4m3fn"})"))
                .dtype,
            DType::E4M3);
  try {
    attentionProblemFromJson(nlohmann::json::parse(R"({"dtype": "fp8"})"));
    ADD_FAILURE() << "an unknown dtype was accepted";
  } catch (const Error &e) {
    EXPECT_TRUE(contains(e.what(), "e4m3, e5m2")) << e.what();
  }
}

TEST(AttentionFp8, StagesHoldVAndItsTranspose) {
  // V lands in each stage as loaded and is transposed beside it in shared
  // memory (attention_sm90.h transposeV): a stage is K, V^T and V, and the
  // barriers add a raw-V barrier per stage and the stop word.
  AttentionProblem p = fp8Gqa(); // D 128, V 128
  AttentionConfig c = wgmma128x128();
  c.stages = 2;
  ASSERT_FALSE(checkConfig(p, c, Target::SM90A));
  const AttentionTraits tr = attentionTraits(p, c, Target::SM90A);
  const int barriers = 8 * (1 + 4 * 2 + 2 + 1); // 96 bytes, 16-aligned
  // (2 stages: 2 raw-V barriers, 2 stop flags in one slot)
  const int slabs = 8 * 16 * 64 * 2; // O's staging, bf16
  EXPECT_EQ(tr.smemBytes,
            1024 + 128 * 128 + 2 * 128 * (128 + 2 * 128) + barriers + slabs);
  EXPECT_TRUE(tr.stageO);
  // No workspace without split-KV; with it, the fp32 partials alone.
  EXPECT_EQ(attentionWorkspaceBytes(p, c, 4, 4096), 0u);
  AttentionProblem d = p;
  d.batch = 1;
  d.headsQ = 2;
  d.headsKv = 1;
  d.seqlenQ = 1;
  d.seqlenK = 1000;
  AttentionConfig split = c;
  split.splits = 3;
  ASSERT_FALSE(checkConfig(d, split, Target::SM90A));
  EXPECT_EQ(attentionWorkspaceBytes(d, split, 1, 1),
            size_t(3 * 1 * 2 * 1 * (128 + 1) * sizeof(float)));
  // The kernel's source: the raw V's load and the transposing warps, no
  // pre-pass kernel.
  const KernelSource ks = emitAttention(p, c, Target::SM90A);
  EXPECT_TRUE(contains(ks.source, "V transposed in shared memory"));
  EXPECT_FALSE(contains(ks.source, "_vt("));
}
