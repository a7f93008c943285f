//===- AttentionCandidates.cpp - Attention configs and their ranking ------===//
//
// The space: blockM 32..128 (16 or 32 rows per warp, the MMA atom's rows
// times one or two), blockN 32..128, 1-3 stages (1 on AMD only), V preloaded or
// not, GQA packing or not (headsQ > headsKv), and per config the split count
// the decode model picks (see chooseSplits); on sm_90a also the wgmma loop
// (blockM 64/128/192, blockN 64/128, 2-3 stages, one block per row block or
// a persistent grid without split-KV). Each valid config gets a model
// cost:
//
//   cost = waves * tilesPerBlock * tileTime
//   waves          = ceil(blocks / (computeUnits * blocksPerUnit)),
//                    blocks = ceil(rows / blockM) * heads * batch * splits,
//                    rows, heads = Sq, headsQ; packed Sq * g, headsKv
//                    (g = headsQ / headsKv),
//                    blocksPerUnit from shared memory and registers (at
//                    most 2; 1 for the wgmma loop, whose warpgroups fill
//                    the registers)
//   tilesPerBlock  = ceil(keys / blockN) / splits, keys halved for causal
//   tileTime       = blockM * blockN * (Dqk + Dv) / speed, the speed growing
//                    with the tile's arithmetic intensity blockM*blockN /
//                    (blockM + blockN) up to saturation, plus one tile load
//                    ((Dqk + Dv) * blockN) weighted as memory time; the
//                    wgmma loop's math at twice the speed
//   + with splits, the fp32 partials written and read by the combine pass
//
// with small factors for the pipeline (3 stages hide latency better at long
// sequences, preloading V costs a wait less per tile but serializes V's copy
// with QK^T). Packing needs no term of its own: it divides the blocks (and
// so the K/V tile loads) by g where Sq * g fits a row block (decode), and
// ties otherwise, where a 1% factor for its per-row index arithmetic keeps
// the plain layout. The best kMaxCandidates are kept, and for prefill each
// kept wgmma config's persistent twin. On sm_90a prefill two measured rules
// override the model's order (isMeasuredWgmmaTile, persistentFirst), and on
// GQA decode a third (isMeasuredDecodeTile).
//
//===----------------------------------------------------------------------===//

#include "kgen/Attention.h"

#include <algorithm>
#include <cmath>

namespace kgen {

namespace {

constexpr size_t kMaxCandidates = 12;

/// Whether a prefill problem's persistent twins go before their
/// one-block-per-row-block configs. Measured on an H200 (kgen tune of the
/// attention-bench preset, 2026-11-21):
/// with head dims <= 128 and seqlen_q <= 1024 the persistent grid won 7 of
/// 8 shapes by 7-36% over the heuristic of the time (its prologue and
/// epilogue overlap the neighbour tile's work, which matters when a block
/// has few key tiles); beyond 1024 each grid won 4 of the 8, so the
/// one-block grid stays first there, and at D 256 it won all 4 (causal S
/// 512: by 3.4%). Causal, with the dynamic schedule (attentionDynamicSchedule
/// below; 2026-11-22, H200) the persistent grid won S 1024 and 4096 at D 64
/// and 128 by 6-12% over the one-block grid (with the static schedule,
/// which left 15% of the multiprocessors' cycles idle at D 64 S 1024, the
/// one-block grid had won S 1024). Causal S 16384 was not measured with it:
/// the one-block grid stays first there.
bool persistentFirst(const AttentionProblem &p) {
  return std::max(p.headDimQk, p.headDimV) <= 128 &&
         (p.seqlenQ <= 1024 || (p.causal && p.seqlenQ <= 4096));
}

/// The wgmma tile `kgen tune` found best on an H200 (2026-11-21, the
/// attention-bench preset: 20 prefill shapes, bf16 D 64/128 and f16 D 256,
/// S 512-16384, causal and not), which the cost model ranks lower:
///   D <= 64:  192x128, 12 warps, 2 stages (192x128 won 7 of 8 D64 shapes,
///             with 2 stages in 5; causal S 512 went to 128x128); causal
///             up to S 1024: 128x128, 8 warps (2026-11-22, after the mask
///             became a template argument: it won causal S 512 and 1024, by
///             16.4% and 2.5% over 192x128, whose last row block is a third
///             empty at those lengths; at S 4096 and 16384 it ran 4% behind)
///   D <= 128: 128x128, 8 warps (won all 8 D128 shapes, 10-36% ahead of the
///             model's 192x64); where its persistent twin goes first
///             (persistentFirst), 2 stages: only they leave room for the
///             slabs that store O in 16-byte rows (kStageO; H100,
///             2026-11-22, persistent 128x128 forced in bench/attention.py:
///             2 stages ahead at all 8 D128 shapes, S 512 136.4 against
///             172.5 us, S 1024 266.0 against 287.0, causal 1024 172.6
///             against 189.6); fp8, whose stages also hold V as loaded,
///             3 stages there (H100, 2026-11-24, kgen tune --preset
///             attention-fp8-bench: 3 won all 4 S <= 1024 shapes, by 5.3-
///             8.8% over 2, and causal S 4096 by 0.7%)
///   D <= 256: 128x64, 8 warps, 2 stages (won all 4 D256 shapes; also the
///             model's pick)
/// Stages are left to the model where they were within 1.5% of each other.
bool isMeasuredWgmmaTile(const AttentionProblem &p, const AttentionConfig &c) {
  if (c.loop != AttentionLoop::Wgmma || c.splits != 1 || c.persistent)
    return false;
  const int d = std::max(p.headDimQk, p.headDimV);
  if (d <= 64 && p.causal && p.seqlenQ <= 1024)
    return c.blockM == 128 && c.blockN == 128;
  if (d <= 64)
    return c.blockM == 192 && c.blockN == 128 && c.stages == 2;
  if (d <= 128)
    return c.blockM == 128 && c.blockN == 128 &&
           (!persistentFirst(p) || c.stages == (isFp8(p.dtype) ? 3 : 2));
  return c.blockM == 128 && c.blockN == 64 && c.stages == 2;
}

/// GQA decode on sm_90a: where a KV head's query rows (Sq * g) fit one
/// m64 block, the packed wgmma loop goes first, with 64-key tiles and 3
/// stages. Measured on an H100 (bench/attention.py --only decode --config,
/// 2026-11-24, bf16 D 128, H 32 over 8, 4 and 1 KV heads, B 1 and 16, Sk
/// 4096 and 32768): against the tiled loop's packed configs that the model
/// ranks first (b16x32, one warp) it ran every decode shape as fast or
/// faster: B16 Sk4096 90.2 against 104.8 us, B16 Sk32768 694 against 760,
/// B1 Sk32768 49.8 against 58.0, B1 Sk4096 10.5 against 12.6; 64-key tiles
/// won 6 of the 8 shapes over 128 (the others within 1%). Its splits:
/// chooseSplits' cover for the wgmma loop.
bool isMeasuredDecodeTile(const AttentionProblem &p, Target t,
                          const AttentionConfig &c) {
  return t == Target::SM90A && c.loop == AttentionLoop::Wgmma && c.packGqa &&
         !c.persistent && c.blockM == 64 && c.blockN == 64 && c.stages == 3 &&
         p.seqlenQ * (p.headsQ / p.headsKv) <= 64;
}

} // namespace

/// The dynamic schedule pays where the static one piles long causal tiles
/// on some blocks: H200, 2026-11-22, causal S 1024 and 4096 (above). At
/// causal S 512 (4 row blocks of at most 4 key tiles) it measured slower
/// than the static one at D 64 (B 32: 86.5 against 79.8 us; H100,
/// 2026-11-24: 84.3 and 85.9 against 80.1 and 82.5), but at D 128 it is
/// the static one that loses (H100, 2026-11-24, B 32: 104.6 and 108.5
/// against 133.6 and 132.5 us; ncu: the static grid read 285 MB from DRAM
/// where Q, K and V take 201, and a back-and-forth static order did not
/// help: 129.3). Without causal the tiles are equal, so the static
/// schedule is kept there.
bool attentionDynamicSchedule(const AttentionProblem &p) {
  return p.causal && (p.seqlenQ > 512 || p.headDimQk > 64);
}

namespace {

/// The (row block, head, batch) blocks of a config before splitting.
int64_t unsplitBlocks(const AttentionProblem &p, const AttentionConfig &c) {
  const int64_t g = c.packGqa ? p.headsQ / p.headsKv : 1;
  const int64_t heads = c.packGqa ? p.headsKv : p.headsQ;
  return (p.seqlenQ * g + c.blockM - 1) / c.blockM * heads * p.batch;
}

/// Split-KV for decode (flash decoding). Decode reads every K/V byte once
/// and does little math per byte, so its time is how many bytes the
/// machine has in flight: a grid of batch * heads blocks (batch * headsKv
/// packed: 8 for one sequence of a 32/8 GQA model) leaves most of the 132
/// SMs of an H200 idle. When the unsplit grid is under one block per
/// unit, cut each row's keys so that blocks * splits covers the units
/// 4 times over (two resident blocks per unit, and a second round that
/// evens out the tail; the wgmma loop: half a block per unit, the count
/// rounded to the nearest), keeping at least
/// kMinTiles key tiles per split (2, so the K/V pipeline still has a tile in
/// flight behind the one being used; the enumerator also offers 1 for the
/// tuner; the wgmma loop 4, below), and at most 128 splits (checkConfig). The
/// combine kernel re-reads splits * rows * Dv fp32 values, which stays small
/// next to K/V while rows (batch * headsQ * Sq) are few. bestSplits then rounds
/// the count down (to no less than half) where whole waves come out: 640 equal
/// blocks on 264 resident slots take 3 rounds, 512 take 2.
int chooseSplits(const AttentionProblem &p, const AttentionConfig &c, Target t,
                 int64_t kMinTiles = 2) {
  // The wgmma loop's blocks hold a whole multiprocessor each (registers)
  // and have up to 3 tiles of 64 or 128 keys in flight: half a block per
  // unit measured best (H100, 2026-11-24, isMeasuredDecodeTile's shapes:
  // B1 H32/8 Sk4096 10.5 us with 8 splits of 8 blocks, 11.8 with 16; H32/4
  // 8.8 with 16 of 4 blocks, 10.2 with 32).
  // Its splits keep at least 4 key tiles each: a block's fixed part (its
  // set-up, Q's load, the first tile's trip from DRAM, the partials) is
  // worth about as much as a few tiles (H100, 2026-12-06, B1 H32/1 Sk4096:
  // 32 splits of 2 tiles 10.2 us, 16 of 4 7.9, 8 of 8 9.8).
  const bool wgmma = c.loop == AttentionLoop::Wgmma;
  const int64_t units = targetInfo(t).computeUnits;
  const int64_t cover = wgmma ? (units + 1) / 2 : 4 * units;
  const int64_t blocks = unsplitBlocks(p, c);
  if (blocks >= (wgmma ? cover : units) || p.varlen)
    return 1;
  const int64_t tiles = (p.seqlenK + c.blockN - 1) / c.blockN;
  const int64_t minTiles = wgmma ? std::max<int64_t>(kMinTiles, 4) : kMinTiles;
  const int64_t maxByKeys = std::max<int64_t>(1, tiles / minTiles);
  // The wgmma loop's cover is rounded to the nearest count of splits, not
  // up: past the cover the extra blocks measured slower (H100, 64x64 s3,
  // pairs in one process, bench/results 2026-12-06: B16 H32/1 Sk4096 4
  // splits 16.2-17.0 us against 5 at 16.7-17.7 in 7 pairs; B2 H32/8 Sk4096
  // 4 at 16.4 against 5 at 16.5-16.6; B1 H32/8 Sk32768 8 at 49.5-49.6
  // against 9 at 49.9-50.8; 2026-11-24: B16 H32/4 Sk4096 1 split 48.7
  // against 2 at 49.7).
  const int64_t want =
      wgmma ? (cover + blocks / 2) / blocks : (cover + blocks - 1) / blocks;
  return int(std::clamp<int64_t>(std::min(want, maxByKeys), 1, 128));
}

double modelCost(const AttentionProblem &p, const AttentionConfig &c,
                 Target t) {
  const AttentionTraits tr = attentionTraits(p, c, t);
  const double units = targetInfo(t).computeUnits;
  // Resident blocks per unit, by shared memory and by registers: the
  // accumulators plus ~64 for addresses, Q's fragments and P, of a 64K
  // register file. The wgmma loop's warpgroups take the whole register
  // file (setmaxnreg): one block.
  const double bySmem =
      double(targetInfo(t).maxSharedBytes / std::max(tr.smemBytes, 1));
  const double byRegs =
      std::floor(65536.0 / (double(tr.threads) * (tr.accumPerThread + 64)));
  const double perUnit = c.loop == AttentionLoop::Wgmma
                             ? 1.0
                             : std::clamp(std::min(bySmem, byRegs), 1.0, 2.0);
  const double blocks = double(unsplitBlocks(p, c)) * c.splits;
  const double waves = std::ceil(blocks / (units * perUnit));
  double keys = double(p.seqlenK);
  if (p.causal)
    keys = std::max(double(c.blockN), keys / 2);
  if (p.windowLeft >= 0 || p.windowRight >= 0) {
    double span = 1 + std::max(p.windowLeft, 0) + std::max(p.windowRight, 0);
    keys = std::min(keys, span + c.blockM);
  }
  const double tiles = std::ceil(std::ceil(keys / c.blockN) / c.splits);
  const double intensity = double(c.blockM) * c.blockN / (c.blockM + c.blockN);
  // wgmma issues a warpgroup's m64nNk16 from shared memory at about twice
  // mma.sync's rate on an H100/H200 (the GEMM loops measured 1.9x), and it
  // keeps gaining up to 128 x 128 tiles (128 x 64 measured 3-8% slower at
  // D = 128 on an H200) where mma.sync saturates earlier.
  const bool wgmma = c.loop == AttentionLoop::Wgmma;
  const double speed =
      std::min(intensity, wgmma ? 64.0 : 42.0) * (wgmma ? 2.0 : 1.0);
  const double dims = p.headDimQk + p.headDimV;
  const double tileTime = double(c.blockM) * c.blockN * dims / speed +
                          4.0 * c.blockN * dims; // the tile's load
  double factor = 1.0;
  if (c.stages == 1) // no copy overlaps the math (AMD only; needed at D=256)
    factor *= 1.3;
  if (c.stages == 2 && tiles > 4)
    factor *= 1.05;
  if (c.stages == 4)
    factor *= 1.02; // no gain over 3 in the model, more shared memory
  if (c.preloadV)
    factor *= 1.02;
  if (c.packGqa)
    factor *= 1.01;
  // The split partials (fp32, splits * rows * Dv) are written and read back
  // by the combine pass, spread over the units; 16 per element is the tile
  // load's 4 per 16-bit element scaled to 4 bytes, twice.
  const double rowsTotal = double(p.seqlenQ) * p.headsQ * p.batch;
  const double combine =
      c.splits > 1 ? 16.0 * c.splits * rowsTotal * p.headDimV / units : 0;
  return waves * tiles * tileTime * factor + combine;
}

/// chooseSplits' count, or a smaller one down to half of it where the model
/// (waves of equal blocks) says it is faster; ties keep the larger.
int bestSplits(const AttentionProblem &p, AttentionConfig c, Target t) {
  const int most = chooseSplits(p, c, t);
  int best = most;
  c.splits = most;
  double bestCost = modelCost(p, c, t);
  for (int sp = most - 1; sp > 1 && 2 * sp >= most; --sp) {
    c.splits = sp;
    const double cost = modelCost(p, c, t);
    if (cost < bestCost) {
      bestCost = cost;
      best = sp;
    }
  }
  return best;
}

} // namespace

std::vector<AttentionConfig> enumerateConfigs(const AttentionProblem &p,
                                              Target t) {
  const int atom = targetInfo(t).vendor == Vendor::AMD ? 32 : 16;
  std::vector<bool> packs{false};
  if (p.headsQ > p.headsKv)
    packs.push_back(true);
  std::vector<std::pair<double, AttentionConfig>> ranked;
  // A valid config not offered yet, with its model cost.
  auto offer = [&](const AttentionConfig &c) {
    if (checkConfig(p, c, t))
      return;
    for (auto &r : ranked)
      if (r.second == c)
        return;
    ranked.push_back({modelCost(p, c, t), c});
  };
  // Decode (at most one atom of rows, packed): also one-warp blocks of one
  // atom, half the idle rows of a 32-row block and more blocks per SM; with
  // 32-key tiles only (H200: b16x32 won 4 of the 8 decode shapes of
  // bench/attention.py, b16x64 none, up to 30% behind).
  const int64_t packedRows =
      p.seqlenQ * (p.headsQ > p.headsKv ? p.headsQ / p.headsKv : 1);
  std::vector<int> blockMs{32, 64, 128};
  if (atom == 16 && packedRows <= 16)
    blockMs.insert(blockMs.begin(), 16);
  for (bool pack : packs)
    for (int bm : blockMs)
      for (int rowsPerWarp : {atom, 2 * atom})
        for (int bn : {32, 64, 128})
          for (int stages : {1, 2, 3})
            for (bool preloadV : {false, true}) {
              AttentionConfig c;
              c.blockM = bm;
              c.warps = bm / rowsPerWarp;
              c.blockN = bn;
              c.stages = stages;
              c.preloadV = preloadV;
              c.packGqa = pack;
              // And one key tile per split, for the tuner: where blocks
              // are few, that puts the most bytes in flight at once.
              for (int sp :
                   {1, bestSplits(p, c, t), chooseSplits(p, c, t, 1)}) {
                c.splits = sp;
                if (c.warps >= 1 && c.warps <= 8 && !(bm == 16 && bn > 32))
                  offer(c);
              }
            }
  // sm_90a: the warp-specialized wgmma loop (its own rules: blockM 64, 128
  // or 192 with one consumer warp per 16 rows, blockN 64 or 128).
  if (t == Target::SM90A)
    for (int bm : {64, 128, 192})
      for (int bn : {64, 128})
        for (int stages : {2, 3}) {
          AttentionConfig c;
          c.loop = AttentionLoop::Wgmma;
          c.blockM = bm;
          c.warps = bm / 16;
          c.blockN = bn;
          c.stages = stages;
          // GQA packing: for fp8, whose only loop this is, and for 16-bit
          // decode whose packed rows fit one m64 block (measured:
          // isMeasuredDecodeTile); elsewhere the tiled loop's packed configs
          // stay the measured ones.
          for (bool pack : {false, true}) {
            if (pack && (p.headsQ == p.headsKv ||
                         !(isFp8(p.dtype) || packedRows <= 64)))
              continue;
            c.packGqa = pack;
            for (int sp : {1, bestSplits(p, c, t)}) {
              c.splits = sp;
              offer(c);
            }
          }
        }
  // Prefill on sm_90a (a full m64 slice of query rows): the wgmma loop
  // first. Measured on an H200 (bench/attention.py, 2026-11-21) it ran every
  // prefill shape of bench/attention.py 1.3-1.6x faster than the best tiled
  // config, which this model (tuned on decode, where loads dominate) does
  // not see; the tiled configs stay as candidates behind it. Among the
  // wgmma configs the measured tile goes first (measuredWgmmaTile).
  const bool wgmmaFirst = t == Target::SM90A && p.seqlenQ >= 64;
  std::stable_sort(ranked.begin(), ranked.end(), [&](auto &a, auto &b) {
    const bool da = isMeasuredDecodeTile(p, t, a.second),
               db = isMeasuredDecodeTile(p, t, b.second);
    if (da != db)
      return da;
    if (wgmmaFirst) {
      const bool wa = a.second.loop == AttentionLoop::Wgmma,
                 wb = b.second.loop == AttentionLoop::Wgmma;
      if (wa != wb)
        return wa;
      const bool ma = isMeasuredWgmmaTile(p, a.second),
                 mb = isMeasuredWgmmaTile(p, b.second);
      if (ma != mb)
        return ma;
    }
    return a.first < b.first;
  });
  // Each unsplit wgmma config kept for prefill brings its persistent twin
  // (not counted in kMaxCandidates), so kgen tune measures both; the model
  // cannot tell them apart (it does not see the prologue and epilogue
  // overlap), so a measured rule orders each pair (persistentFirst).
  const bool twinFirst = persistentFirst(p);
  std::vector<AttentionConfig> out;
  size_t kept = 0;
  for (auto &[cost, c] : ranked) {
    if (kept++ == kMaxCandidates)
      break;
    AttentionConfig twin = c;
    twin.persistent = true;
    const bool hasTwin = c.loop == AttentionLoop::Wgmma && p.seqlenQ >= 64 &&
                         !checkConfig(p, twin, t);
    if (hasTwin && twinFirst)
      out.push_back(twin);
    out.push_back(c);
    if (hasTwin && !twinFirst)
      out.push_back(twin);
  }
  return out;
}

AttentionConfig defaultConfig(const AttentionProblem &p, Target t) {
  std::vector<AttentionConfig> cs = enumerateConfigs(p, t);
  if (!cs.empty())
    return cs.front();
  // Every valid problem has a 64x32 (NVIDIA) / 64x32, 2-wave (AMD) config
  // in the space; reaching here means the problem itself is invalid.
  AttentionConfig c;
  c.blockM = 64;
  c.blockN = 32;
  c.warps = targetInfo(t).vendor == Vendor::AMD ? 2 : 4;
  return c;
}

} // namespace kgen
