//===- Candidates.cpp - Enumerate valid configs and rank them -------------===//
//
// The space is small on purpose: block tiles from 16x64 to 256x128, the
// warp grid that gives each warp a 32x32..64x64 tile, blockK 32 or 64, 2-4
// stages (to 6 at M <= 64 on NVIDIA), padded or swizzled shared memory; on
// sm_90a also the wgmma loop's tiles from 64x128 to 128x256 with 3-6 stages (8
// beyond M = 16), and the fitted widths below. Every combination that passes
// checkConfig is ranked by a roofline-style model with wave quantization, and
// the best `kMaxCandidates` are kept: enough for the dispatcher to find the
// winner, few enough that tuning and the compile tests stay fast.
//
// Split-K (tiled loop) joins when the tiles of a config leave
// multiprocessors idle (fewer tiles than the assumed multiprocessor count:
// small M, or few tiles with a long K, as 127x4099x1023): S blocks per tile
// each run 1/S of the k-slices, and the model charges the fix-up (each
// block writes its fp32 tile, the last reads the others). Up to
// kMaxSplitCandidates of them are added to the list for the tuner to
// measure; the heuristic default is the best-ranked config of the list,
// split-K included, gemv and stream-K excepted (defaultConfig).
//
// Stream-K (wgmma loop) joins on sm_90a under the same condition: the
// persistent CTAs share out all tiles' k-iterations in equal runs, so the
// time is that of total / multiprocessors iterations plus the fix-up of
// the tiles split between CTAs (two partial tiles per CTA at most). Up to
// kMaxSplitCandidates of them join the list as split-K's do, for the
// tuner.
//
// Split-K in lockstep (wgmma loop, splitK = P) joins under the same
// condition: P units a tile, k-slices interleaved, dealt out part-major so
// that the CTAs running together load the same k-slices (schedule.h says
// why that wins over stream-K). P is the one of 2..8 that makes the fewest
// k-slices a CTA walks (units / multiprocessors waves of slices / P),
// offered where that is at most 3/4 of the data-parallel walk and the GEMM
// is not HBM-bound (M N / (M + N) >= 256, about the FLOPs a byte of A and
// B: the H100's tensor cores do 295 a byte of HBM; kgen tune on the H100 at
// M = 64..256 with N = K = 4096 and 8192: every split ran 10-25% behind the
// best whole-tile config). The model charges each wave a partial written
// and P read back, at a MAC unit a byte plus 10% (fitted on the H100, kgen
// tune of 532x2048xK: 128x128 P = 3 at K = 2048 24.7 us against 13.5
// data-parallel; 128x256 P = 3 at K = 16384 71.7 against 83.1, the model's
// pick). Up to kMaxSplitCandidates.
//
// Swapped tiles (wgmma loop, swapAB) join on sm_90a after
// the ranked list, like the fitted widths: 64 or 128 columns of N a tile,
// and M cut into as many rows of tiles as the multiprocessors left over
// allow, the height a wgmma n (a multiple of 8): 136 x 64 at 532 x 2048 (128
// CTAs). The model has no term for them; the tuner measures them (H100:
// 532x2048x2048 11.06 us against 13.57 for the best other tile). One of
// them is the default (first, after gemv) where M > 256, the best-ranked
// config's whole tiles leave more than a third of the multiprocessors idle
// and the 64-column swapped tile fills 90% of them: 532 x 2048 (80 tiles of
// 128x128, or 40 of 128x256 split in 3, against 4 x 32 of 136x64), not 788
// x 2048 (112 tiles) or 1024^3 (128 tiles of 64x128). From M = 1024 that
// default is the 128-column swapped tile, or plain 64x128 tiles where they
// make one wave of 70-100% of the multiprocessors (2000 x 512: 128 tiles;
// measured in enumerateConfigs).
//
// The gemv loop (NVIDIA, M <= 64, A 'N') joins for small M, ranked by its
// own model (gemvSeconds: bytes over bandwidth; see there) and placed first
// for the tuner, up to kMaxGemvCandidates. defaultConfig takes neither it nor
// stream-K (measured slower as defaults; see there).
//
// Pairs (cluster = 2: two CTAs on adjacent tiles, each loading half of the
// slice they share and multicasting it) join on sm_90a for 128-row tiles:
// one above the other sharing B when 128 or 256 wide, side by side sharing
// A when narrower (64, or fitted as 80). Up to kMaxSplitCandidates, for the
// tuner: they halve one operand's traffic from L2, which the model does not
// price, and the default stays a single CTA (the model ranks a pair like
// its single twin, after it).
//
// Fitted widths (wgmma, B stored N x K): the tile width that makes one wave
// of 64- or 128-row tiles fill the multiprocessors (fittedWgmmaShapes), at
// their two deepest rings (up to 16 stages), single and in pairs sharing
// A, after the ranked list: the model prefers them for the filled
// multiprocessors, but the measured time is bound by L2 bandwidth more
// than the model knows (788x2048x2048 nt on an H200: 128x120 at 6 stages
// 18.0 us, 128x128 16.0), and the tuner takes them where they win (64x208
// there, 14.8 us). Except at small M (32 < M <= 128), where the 64-row
// fitted tile at its deepest ring comes first and is the default: there
// the time is that of streaming B from HBM, and a narrow tile with a deep
// ring keeps more of each B row in flight (H100, kgen tune: 64x4096x4096
// 64x32 at 16 stages 14.9 us, the old default 64x128 at 6 stages 22.8,
// cuBLAS's 64x32 kernel 15.4 in bench/gemm.py; 32x4096x4096 16.4 against
// 20.7; 128x4096x4096 64x64 at 12 stages 16.2 against 23.2; 64x8192x8192
// 51.6 against 54.1). B stored K x N has 64x64 there (fittedWgmmaShapes).
// At M <= 32 (bf16/f16, A stored M x K) the default is the swapped tile 64
// columns of N wide, M rows high (8 to 32: as many tiles of M as the
// multiprocessors left hold), at its deepest ring: kgen tune on the H100
// (2026-11-23) took a swapped tile on all 12 of 1, 16 and 32 x 4096 and
// 8192, nt and nn, that one or its 8-stage twin on 11. bench/gemm.py
// untuned, H100, 2026-11-24, the old and the new default in one session:
// 1x4096x4096 nn 15.6 -> 14.0 us, 16x4096x4096 nt 16.5 -> 14.7,
// 1x8192x8192 nt 50.8 -> 47.5 (cuBLAS 14.2, 17.2, 47.5); from M = 16 to 32
// (two rounds each, 23:20 UTC): 24x4096x4096 nt 17.4-17.5 -> 14.7-15.0,
// 32x4096x4096 nt 16.5-16.7 -> 14.8-15.1, nn 15.1-15.2 -> 14.3-14.7,
// 32x8192x8192 nt 49.0-49.4 -> 48.0-48.4 (cuBLAS 14.7-14.9, 15.0-15.3,
// 14.7-14.9, 48.7-49.1); 16 and 48 rows unchanged.
// Past M = 128, where the best-ranked config's 128-row tiles compute up to
// 64 rows past M (M mod 128 in 1..64), the 64-row fitted tile at its
// deepest ring is the default too: one tile a CTA, and fewer padded rows.
// H100, bench/gemm.py untuned, two rounds (2026-11-25, µs, cuBLAS in
// brackets): 788x2048x2048 nt 15.2-15.3 -> 14.4-15.1 (13.5-13.9),
// 700x2304x8192 43.5-44.5 -> 38.7-39.2 (55.5-57.3), 160x8192x8192
// 82.4-82.6 -> 53.6-54.2 (51.7-52.3). kgen tune: with no padded rows
// 128x128 won (1024x2048x2048 13.9 against 14.6 for 64x256, 640x2816x2048
// 13.8 against 14.7); at 900x1536x4096, where the swapped rule above
// picks 184x64 (24.5), 64x192 ran 22.3 (left to the tuner). Not where
// the ranked pick has 64-row tiles already:
// 150x4096x4096's 64x128 ran 18.4-18.6 against 21.0-21.2 for the fitted
// 64x96.
// B stored K x N has no 64-row fitted tiles past M = 128: there the
// swapped tile that makes the most CTAs (64 columns on a tie) at its
// deepest ring goes first instead. kgen tune, H100, 2026-11-25 (all
// candidates, µs; the old default 128x128 in brackets): 788x2048x2048 nn
// 200x64 13.86 (14.73), 160x8192x8192 nn 80x128 49.80 and 160x64 50.72
// (84.31), 700x2304x8192 nn 104x128 43.37 (45.23), 400x4096x4096 nn 200x64
// 23.52 (32.14). bench/gemm.py untuned, old and new in one session, two
// rounds: 160x8192x8192 nn 85.2/84.7 -> 51.1/51.5 (cuBLAS 49.7-50.2),
// 400x4096x4096 nn 32.5/30.7 -> 24.5/24.6 (21.0-21.6), 788x2048x2048 nn
// 14.7/14.2 -> 14.5/14.2 (13.2-13.5), 700x2304x8192 nn 44.0/45.3 ->
// 44.1/44.6 (56.3-56.9). Only where the 128-row tiles' padded rows are
// more than a 16th of theirs (700 rows: 68 of 768): at 1200 (80 of 1280)
// kgen tune ran the swapped 152x128 at 19.01 us against 18.47 for the
// ranked 128x192 (nn; nt, which has no fitted 64-row tile there either:
// 19.22 against 18.44-19.03).
//
// Repack variants (GemmConfig::repack) join when A or B cannot be read with
// 16-byte vectors (rows of 1023 bf16, a ragged N of B 'N'): on the padded
// copies, the best two wgmma tile shapes at their best two depths (the
// model ties 4, 5 and 6 stages; 64x64 tiles, repack only, fill 130 of 132
// multiprocessors at 127x4099), the best wgmma stream-K config where the
// tiles leave multiprocessors idle, and the best two tiled configs (split-K
// included), placed last (repackCost says why); but on sm_90a the first wgmma
// one goes first, the default, for M > 64 and M * N * K >= 2^26 (measured:
// see the end of enumerateConfigs).
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Limits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <optional>

namespace kgen {

namespace {

constexpr size_t kMaxCandidates = 12;
constexpr size_t kMaxSplitCandidates = 4;

/// Small M on NVIDIA: the GEMM is a stream of B from HBM, and the deeper the
/// ring, the more of each B row is in flight (see modelCost; the tiled loop
/// gets 5 and 6 stages there).
bool streamsB(const GemmProblem &p, Target t) {
  return p.m <= 64 && targetInfo(t).vendor == Vendor::NVIDIA;
}

/// Relative run time of `c` for `p`: waves of tiles times the time of one
/// tile, where a tile's speed grows with its arithmetic intensity
/// (BM*BN/(BM+BN)) until the tensor cores are saturated. Lower is better.
double modelCost(const GemmProblem &p, const GemmConfig &c, Target t) {
  double tilesM = std::ceil(double(p.m) / c.blockM);
  double tilesN = std::ceil(double(p.n) / c.blockN);
  double tiles = tilesM * tilesN;
  double waves = std::ceil(tiles / targetInfo(t).computeUnits);
  double kSteps = std::ceil(double(p.k) / c.blockK);
  double intensity = double(c.blockM) * c.blockN / (c.blockM + c.blockN);
  double speed = std::min(intensity, 64.0); // saturates at 128x128
  double tileTime = double(c.blockM) * c.blockN * kSteps * c.blockK / speed;
  // Deeper pipelines hide latency until about 3-4 stages.
  double stageFactor = c.stages >= 3 ? 1.0 : 1.15;
  // Where B streams from HBM (streamsB), deeper rings rank first (H100, kgen
  // tune, 1x4096x4096 nn split-K 2 16x64: 4 stages 15.9 us, 3 stages
  // 18.1-20.8), and the swizzled layout ran ahead of the padded one
  // (16x4096x4096 nn: 16.1 against 18.0 us).
  const bool streaming = streamsB(p, t);
  if (streaming && c.stages >= 3)
    stageFactor = 1.0 - 0.02 * (c.stages - 3);
  // Bank conflicts: padded and swizzled are both conflict-free by design;
  // elsewhere prefer the padded layout slightly since it has no index math.
  const SmemLayout preferred =
      streaming ? SmemLayout::Swizzled : SmemLayout::Padded;
  double smemFactor = c.smem == preferred ? 1.0 : 1.01;
  // Long K loops keep a stage's worth of loads in flight; blockK 64 halves
  // the barriers per FLOP.
  double bkFactor = c.blockK >= 64 ? 0.98 : 1.0;
  if (c.loop == GemmLoop::Wgmma) {
    // wgmma runs about twice as fast as mma.sync on sm_90a, and its
    // 64-row atoms saturate at larger tiles; the persistent grid keeps the
    // waves but overlaps one tile's stores with the next tile's loads.
    double wgSpeed = std::min(intensity, 96.0);
    tileTime = double(c.blockM) * c.blockN * kSteps * c.blockK / wgSpeed;
    // Deeper rings win on sm_90a where they fit: the tuned winners of
    // 128x128 and smaller wgmma tiles on issue 3's nt shapes (H200) ran 6
    // stages in 9 of 11 cases, 5 in the others (532x2048x2048: 14.7 us at
    // 6 stages, 16.3-16.7 at 4).
    stageFactor = c.stages >= 4 ? 1.0 - 0.01 * (c.stages - 4) : 1.1;
    if (c.streamK) {
      // Equal runs of k-iterations; each CTA writes up to two fp32 partial
      // tiles and the last contributor reads them back (as split-K's
      // fix-up, a MAC unit a byte), at most two per CTA.
      double cus = targetInfo(t).computeUnits;
      double run = std::ceil(tiles * kSteps / cus);
      double fixup = 2.0 * c.blockM * c.blockN * 4.0;
      return 0.5 * (run * double(c.blockM) * c.blockN * c.blockK / wgSpeed *
                        stageFactor +
                    fixup);
    }
    if (c.splitK > 1) {
      // Split-K in lockstep: waves of units of kSteps / P slices; each wave
      // writes a partial and its last arrivals read P of them (see the top).
      const double parts = std::min(double(c.splitK), kSteps);
      const double unitWaves =
          std::ceil(tiles * parts / targetInfo(t).computeUnits);
      const double slices = std::ceil(kSteps / parts);
      const double fixup =
          unitWaves * (1.0 + parts) * c.blockM * c.blockN * 4.0 * 1.1;
      return 0.5 * (unitWaves * slices * double(c.blockM) * c.blockN *
                        c.blockK / wgSpeed * stageFactor +
                    fixup);
    }
    return 0.5 * waves * tileTime * stageFactor;
  }
  if (c.splitK > 1) {
    // kSplitK blocks a tile, each with its share of the k-slices; the
    // fix-up moves splitK fp32 tiles through L2 per tile (about a MAC unit
    // a byte at this model's scale).
    double blocks = tiles * c.splitK;
    waves = std::ceil(blocks / targetInfo(t).computeUnits);
    double kPer = std::ceil(kSteps / c.splitK);
    tileTime = double(c.blockM) * c.blockN * kPer * c.blockK / speed +
               double(c.splitK) * c.blockM * c.blockN * 4.0;
  }
  return waves * tileTime * stageFactor * smemFactor * bkFactor;
}

struct Shape {
  int bm, bn, wm, wn;
};

/// The wgmma loop's split-K in lockstep: the smallest P in 2..8 whose units
/// walk within 10% of the fewest k-slices a CTA (ceil(tiles P / units) waves
/// of ceil(slices / P)): every part past the first writes and reads a whole
/// fp32 tile through the workspace (fp8 532x2048x16384, H100: P = 8 of
/// 128x128 tiles, walk 80, moved 640 partial tiles and ran 71.6 us where
/// the unsplit tiles ran 49.7). 1 where none walks at most 3/4 of the
/// data-parallel ceil(tiles / units) x slices.
int lockstepSplits(double tiles, double slices, double computeUnits) {
  auto walk = [&](double parts) {
    return std::ceil(tiles * parts / computeUnits) * std::ceil(slices / parts);
  };
  double fewest = walk(1);
  for (int parts = 2; parts <= 8 && parts <= slices; ++parts)
    fewest = std::min(fewest, walk(parts));
  int best = 1;
  for (int parts = 2; parts <= 8 && parts <= slices && best == 1; ++parts)
    if (walk(parts) <= 1.1 * fewest)
      best = parts;
  return walk(best) <= 0.75 * walk(1) ? best : 1;
}

/// The wgmma loop's fixed tiles (consumer warpgroups x m64 slices, n up to
/// 256); 64x64 is offered for repack configs only (see the top).
constexpr Shape kWgmmaShapes[] = {
    {64, 128, 1, 1},  {64, 256, 1, 1},  {128, 64, 2, 1},  {128, 128, 2, 1},
    {128, 192, 2, 1}, {128, 256, 2, 1}, {256, 128, 2, 1}, {64, 64, 1, 1},
};

/// Problems whose wgmma consumers keep promoted fp32 sums beside their
/// accumulators (an f32 C, fp8 inputs; gemm_sm90.h): 128x256 does not fit
/// their registers, so these widths between 128 and 256 are offered too
/// (208: the widest whose two sets of accumulators fit, see Limits.cpp).
constexpr Shape kPromotedWgmmaShapes[] = {{128, 160, 2, 1}, {128, 208, 2, 1}};

bool isRepackOnlyWgmmaShape(int bm, int bn) { return bm == 64 && bn == 64; }

/// A tile the fixed list offers beyond repack, which fitted widths skip.
bool isFixedWgmmaShape(int bm, int bn) {
  return !isRepackOnlyWgmmaShape(bm, bn) &&
         std::any_of(std::begin(kWgmmaShapes), std::end(kWgmmaShapes),
                     [&](const Shape &s) { return s.bm == bm && s.bn == bn; });
}

/// The wgmma loop's config of tile `s` (s.wm consumer warpgroups) for
/// inputs of `ab`: a k-slice is one 128-byte swizzled row.
GemmConfig wgmmaConfig(const Shape &s, int stages, DType ab) {
  GemmConfig c;
  c.loop = GemmLoop::Wgmma;
  c.blockM = s.bm;
  c.blockN = s.bn;
  c.blockK = 128 / sizeOf(ab);
  c.warpsM = s.wm;
  c.warpsN = 1;
  c.stages = stages;
  c.smem = SmemLayout::Swizzled;
  c.smemPad = 0;
  return c;
}

/// wgmma tiles whose width is fitted to the problem (B stored N x K, where
/// any multiple of 8 is a valid wgmma n): for 64- and 128-row tiles (none
/// taller than M needs), the narrowest width that makes one wave of tiles
/// fill the multiprocessors, as cuBLAS's 64x136 and 64x200 tiles do at 532
/// and 788 x 2048 x 2048 (128x128 leaves 52 of 132 multiprocessors idle at
/// 532), and its 64x32 tiles at 64x4096x4096 (16 stages, pairs sharing A;
/// ncu, H100). Only shapes the fixed list lacks, from 16 wide.
std::vector<Shape> fittedWgmmaShapes(const GemmProblem &p, Target t) {
  std::vector<Shape> out;
  // The tiled and gemv loops' 16-row tiles; fp8 has the wgmma loop only,
  // whose fitted 64-row tiles (64x32 at N = 4096) stream B on all the
  // multiprocessors where 64x128 tiles keep 32 of them busy.
  if (p.m <= 16 && !isFp8(p.ab))
    return out;
  const int64_t cus = targetInfo(t).computeUnits;
  // B stored K x N comes in 64-column boxes: at small M, 64x64 (repack only
  // in the fixed list) where one wave holds its tiles, for its deep
  // rings (H100: 64x4096x4096 15.5 us at 12 stages, 22.4 for the fixed
  // list's best).
  if (!p.transB) {
    if (p.m <= 128 && (p.m + 63) / 64 * ((p.n + 63) / 64) <= cus)
      out.push_back({64, 64, 1, 1});
    return out;
  }
  for (int bm : {64, 128}) {
    if (bm > 64 && p.m <= 64)
      continue;
    const int64_t tilesM = (p.m + bm - 1) / bm;
    const int64_t tilesN = cus / tilesM;
    if (tilesN < 1)
      continue;
    const int64_t bn = ((p.n + tilesN - 1) / tilesN + 7) / 8 * 8;
    if (bn < 16 || bn > 256 || isFixedWgmmaShape(bm, int(bn)))
      continue;
    out.push_back({bm, int(bn), bm / 64, 1});
  }
  return out;
}

/// Split-K versions of a tiled config whose tiles leave multiprocessors
/// idle: 2, 4, 8 or 16 splits, each with at least two k-slices and at most
/// two blocks a multiprocessor; the valid ones.
std::vector<GemmConfig> splitKConfigs(const GemmProblem &p,
                                      const GemmConfig &base, Target t) {
  std::vector<GemmConfig> out;
  if (base.loop != GemmLoop::Tiled)
    return out;
  const double cus = targetInfo(t).computeUnits;
  const double tiles = std::ceil(double(p.m) / base.blockM) *
                       std::ceil(double(p.n) / base.blockN) * double(p.batch);
  const double kSteps = std::ceil(double(p.k) / base.blockK);
  if (tiles >= cus)
    return out;
  for (int s : {2, 4, 8, 16}) {
    if (kSteps < 2 * s || tiles * s > 2 * cus)
      continue;
    GemmConfig c = base;
    c.splitK = s;
    if (!checkConfig(p, c, t))
      out.push_back(c);
  }
  return out;
}

/// A repack config's cost in modelCost's units: the main loop on the padded
/// problem, plus the copy kernel, which reads and writes (M + N) x K x 2
/// bytes spread over the multiprocessors (at split-K's fix-up rate, a MAC
/// unit a byte). The model has no term for the narrow loads repack removes
/// (a vector-1 tiled loop costs the same as a vector-8 one here), so these
/// costs only rank repack configs among themselves: the enumerator puts
/// them last, but for the measured rule that makes the best wgmma one the
/// sm_90a default (the end of enumerateConfigs), and the tuner decides per
/// shape.
double repackCost(const GemmProblem &p, const GemmConfig &c, Target t) {
  GemmConfig inner = c;
  inner.repack = false;
  const GemmProblem q = repackedProblem(p);
  const double bytes =
      double(q.m + q.n) * double(q.k) * 2.0 * sizeOf(p.ab) * double(p.batch);
  return modelCost(q, inner, t) + bytes / targetInfo(t).computeUnits;
}

constexpr size_t kMaxGemvCandidates = 6;

/// The gemv loop's model, in seconds. Assumption: a small-M GEMM takes the
/// time to move the bytes of A, B and C once at HBM bandwidth (4.8 TB/s on
/// the H200 sm_90a stands for, 2.0 TB/s on the A100 of sm_80), provided
/// enough bytes are in flight: a multiprocessor needs ~32 KB outstanding to
/// keep HBM busy (Little's law: ~36 B/ns a multiprocessor times ~0.9 us of
/// loaded latency), so a grid with less gets that fraction of the
/// bandwidth. A warp keeps stages - 1 chunks of its ring in flight; the
/// blocks a multiprocessor holds are bounded by registers, threads and the
/// ring's shared memory, and one multiprocessor draws at most 1.5 times
/// its share of the bandwidth. Added: A's reads from L2 (once a block), the
/// tensor cores' time at large M (mma.sync at ~400 / 250 TFLOP/s), waves of
/// blocks that leave multiprocessors idle at the end, a ring fill (one latency,
/// ~0.8 us) a wave, and split-K's partials through L2 (~10 TB/s) plus a fix-up
/// latency.
double gemvSeconds(const GemmProblem &p, const GemmConfig &c, Target t) {
  const TargetInfo &ti = targetInfo(t);
  const bool hopper = t == Target::SM90A;
  const double hbm = hopper ? 4.8e12 : 2.0e12, mma = hopper ? 4e14 : 2.5e14;
  const double es = sizeOf(p.ab), m = double(p.m), n = double(p.n),
               k = double(p.k), batch = double(p.batch);
  const double bytes =
      batch * ((n * k + m * k) * es + m * n * double(sizeOf(p.c)));
  const GemmTraits tr = gemmTraits(p, c, t);
  const int rowTiles = c.blockN / (16 * c.warpsN), colTiles = c.blockM / 8;
  const double blocks =
      std::ceil(n / c.blockN) * std::ceil(m / c.blockM) * batch * c.splitK;
  const double chunksPerSplit = std::ceil(std::ceil(k / 32) / c.splitK);
  // Registers a thread (one chunk, accumulators, ~40 of addressing), and so
  // blocks a multiprocessor holds (shared memory: the per-block limit plus
  // the 1 KiB the driver reserves a block).
  const double regs =
      (2 * rowTiles + colTiles) * 4 + rowTiles * colTiles * 4 + 40;
  const double bySmem =
      std::floor((ti.maxSharedBytes + 1024.0) / (tr.smemBytes + 1024.0));
  const double perSm = std::max(
      1.0, std::min({64.0 / c.warpsN, std::floor(65536 / (regs * tr.threads)),
                     bySmem, 32.0}));
  const double resident = std::min(blocks, perSm * ti.computeUnits);
  const double inFlight =
      resident * tr.threads *
      std::min<double>(std::max(1, c.stages - 1), chunksPerSplit) * 2 *
      rowTiles * 16;
  // A multiprocessor draws at most about 1.5 times its share of HBM (its
  // load path and L2 slices), so a grid of few blocks cannot make up for
  // the idle ones with depth.
  const double active = std::min<double>(blocks, ti.computeUnits);
  const double fraction = std::min({1.0, inFlight / (32768.0 * ti.computeUnits),
                                    1.5 * active / ti.computeUnits});
  double seconds = bytes / (hbm * fraction);
  // A comes from L2 once a block (its warps share it through L1), so every
  // column tile reads all of A again: at M = 64 and narrow blocks that is
  // more than B (L2 at ~8 / 5 TB/s).
  const double l2Bytes = batch * std::ceil(n / c.blockN) *
                             std::ceil(m / c.blockM) * c.blockM * k * es +
                         bytes;
  seconds = std::max(seconds, l2Bytes / (hopper ? 8e12 : 5e12));
  seconds = std::max(seconds, 2 * double(c.blockM) * std::ceil(m / c.blockM) *
                                  n * k * batch / mma);
  const double waves = std::ceil(blocks / resident);
  seconds *= waves * resident / blocks;
  seconds += waves * 0.8e-6;
  if (c.splitK > 1)
    seconds += blocks * c.blockM * c.blockN * 4.0 * 2 / 1e13 + 1e-6;
  return seconds;
}

/// The gemv loop's configs for a small-M problem, best first.
std::vector<GemmConfig> gemvConfigs(const GemmProblem &p, Target t) {
  std::vector<std::pair<double, GemmConfig>> ranked;
  if (targetInfo(t).vendor != Vendor::NVIDIA || p.m > 64 || p.transA || p.tf32)
    return {};
  const int blockM = int(std::min<int64_t>(64, (p.m + 7) / 8 * 8));
  const double chunks = std::ceil(double(p.k) / 32);
  for (int warps : {2, 4, 8})
    for (int rowTiles : {1, 2, 4, 8})
      for (int stages : {2, 4, 8, 16})
        for (int split : {1, 2, 4, 8, 16}) {
          if (split > 1 && chunks < 2 * split)
            continue;
          GemmConfig c;
          c.loop = GemmLoop::Gemv;
          c.blockM = blockM;
          c.blockN = warps * 16 * rowTiles;
          c.blockK = 32;
          c.warpsM = 1;
          c.warpsN = warps;
          c.stages = stages;
          c.smemPad = 0;
          c.splitK = split;
          if (checkConfig(p, c, t))
            continue;
          ranked.push_back({gemvSeconds(p, c, t), c});
        }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](auto &a, auto &b) { return a.first < b.first; });
  std::vector<GemmConfig> out;
  for (size_t i = 0; i < ranked.size() && i < kMaxGemvCandidates; ++i)
    out.push_back(ranked[i].second);
  return out;
}

} // namespace

std::vector<GemmConfig> enumerateConfigs(const GemmProblem &p, Target t) {
  const bool amd = targetInfo(t).vendor == Vendor::AMD;
  static const Shape nvidiaShapes[] = {
      {16, 64, 1, 2},   {32, 64, 1, 2},   {32, 128, 1, 4},
      {64, 64, 2, 2},   {64, 128, 2, 2},  {128, 64, 2, 2},
      {128, 128, 2, 2}, {128, 256, 2, 4}, {256, 128, 4, 2},
  };
  static const Shape amdShapes[] = {
      {32, 64, 1, 2},  {64, 64, 2, 2},   {64, 128, 2, 2},
      {128, 64, 2, 2}, {128, 128, 2, 2}, {256, 128, 4, 2},
  };
  std::vector<Shape> shapes;
  if (amd)
    shapes.assign(std::begin(amdShapes), std::end(amdShapes));
  else
    shapes.assign(std::begin(nvidiaShapes), std::end(nvidiaShapes));

  // No tile far larger than the problem: a block dimension is at most the
  // next power of two of the problem dimension (but never below the
  // smallest shape, so 1x1x1 still has candidates).
  auto pow2Ceil = [](int64_t v) {
    int64_t r = 1;
    while (r < v)
      r <<= 1;
    return r;
  };
  int64_t capM = std::max<int64_t>(pow2Ceil(p.m), amd ? 32 : 16);
  int64_t capN = std::max<int64_t>(pow2Ceil(p.n), 64);

  std::vector<std::pair<double, GemmConfig>> ranked, streamK, lockstep, pairs,
      repacked;
  std::vector<GemmConfig> fittedPicks;
  // Repack variants, for operands the main loops cannot read with 16-byte
  // vectors (see repackCost): the config on the padded copies.
  const bool misaligned = sizeOf(p.ab) == 2 && [&] {
    const GemmTraits tr = gemmTraits(p, GemmConfig{}, t);
    return tr.vecA < 8 || tr.vecB < 8;
  }();
  auto offerRepack = [&](GemmConfig c) {
    if (!misaligned)
      return;
    c.repack = true;
    if (checkConfig(p, c, t))
      return;
    repacked.push_back({repackCost(p, c, t), c});
    // Stream-K under the same rule as below, on the padded problem.
    const double tiles =
        std::ceil(double(p.m) / c.blockM) * std::ceil(double(p.n) / c.blockN);
    c.streamK = true;
    if (c.loop == GemmLoop::Wgmma && c.blockM <= capM &&
        tiles < targetInfo(t).computeUnits && !checkConfig(p, c, t))
      repacked.push_back({repackCost(p, c, t), c});
  };
  for (const Shape &s : shapes) {
    if (s.bm > capM || s.bn > capN)
      continue;
    for (int bk : {32, 64})
      for (int stages : {2, 3, 4, 5, 6})
        for (SmemLayout smem : {SmemLayout::Padded, SmemLayout::Swizzled}) {
          if (stages > 4 && !streamsB(p, t))
            continue;
          GemmConfig c;
          c.blockM = s.bm;
          c.blockN = s.bn;
          c.blockK = bk;
          c.warpsM = s.wm;
          c.warpsN = s.wn;
          c.stages = stages;
          c.smem = smem;
          c.smemPad = smem == SmemLayout::Padded ? 8 : 0;
          offerRepack(c);
          if (checkConfig(p, c, t))
            continue;
          ranked.push_back({modelCost(p, c, t), c});
        }
  }
  // sm_90a: the wgmma loop's tiles (consumer warpgroups x m64 slices, n up
  // to 256), as deep as shared memory allows from 3 stages.
  if (t == Target::SM90A) {
    for (const Shape &s : kWgmmaShapes) {
      const bool repackOnly = isRepackOnlyWgmmaShape(s.bm, s.bn);
      if (s.bm > std::max<int64_t>(capM, 64) || s.bn > capN)
        continue;
      for (int stages : {3, 4, 5, 6, 8}) {
        // 8 stages where they fit (64x128, 128x64): at small M B streams
        // from HBM (see the top; H100: 256x4096x4096 nt 64x128 at 8 stages
        // 21.7 us, at 6 23.7; 128x8192x8192 53.4 against 55.3), and
        // 1024x1024x1024 ran 8.17 us against 8.55. M <= 16 keeps the
        // 16-row tiles.
        if (stages == 8 && p.m <= 16)
          continue;
        GemmConfig c = wgmmaConfig(s, stages, p.ab);
        offerRepack(c);
        if (repackOnly || checkConfig(p, c, t))
          continue;
        ranked.push_back({modelCost(p, c, t), c});
        // Stream-K where the tiles leave multiprocessors idle, with tiles
        // no taller than M (small M belongs to the tiled loop's split-K).
        const double tiles = std::ceil(double(p.m) / c.blockM) *
                             std::ceil(double(p.n) / c.blockN);
        c.streamK = true;
        if (s.bm <= capM && tiles < targetInfo(t).computeUnits &&
            !checkConfig(p, c, t))
          streamK.push_back({modelCost(p, c, t), c});
        c.streamK = false;
        // Split-K in lockstep under the same rule, at its best P, where
        // the GEMM is not bound by HBM (see the top).
        if (s.bm <= capM && tiles < targetInfo(t).computeUnits &&
            double(p.m) * p.n / double(p.m + p.n) >= 256) {
          c.splitK = lockstepSplits(tiles, std::ceil(double(p.k) / c.blockK),
                                    targetInfo(t).computeUnits);
          if (c.splitK > 1 && !checkConfig(p, c, t))
            lockstep.push_back({modelCost(p, c, t), c});
          c.splitK = 1;
        }
        c.cluster = 2;
        // Pairs of 128-row tiles: one above the other sharing B (128 or
        // 256 wide), or side by side sharing A (narrower tiles).
        const bool sharesB = s.bn == 128 || s.bn == 256;
        if (s.bm == 128 && (sharesB ? p.m > s.bm : s.bn < s.bm && p.n > s.bn) &&
            !checkConfig(p, c, t))
          pairs.push_back({modelCost(p, c, t), c});
      }
    }
    // The fitted widths: each at its two deepest rings, single CTAs then
    // pairs sharing A (128-row tiles), after the ranked list (the small-M
    // default excepted; see the top). Problems that promote their sums also
    // get the widths between 128 and 256 that fit their registers, the same
    // way.
    std::vector<Shape> fitted = fittedWgmmaShapes(p, t);
    if (promotesSums(p))
      for (const Shape &s : kPromotedWgmmaShapes)
        if (s.bm <= capM && s.bn <= capN)
          fitted.push_back(s);
    for (const Shape &s : fitted) {
      int depths = 0;
      for (int stages : {16, 12, 8, 6, 5, 4, 3}) {
        GemmConfig c = wgmmaConfig(s, stages, p.ab);
        if (depths == 2 || checkConfig(p, c, t))
          continue;
        ++depths;
        fittedPicks.push_back(c);
        c.cluster = 2;
        if (c.pairSharesA() && p.n > s.bn && !checkConfig(p, c, t))
          fittedPicks.push_back(c);
      }
    }
  }
  // Swapped tiles (C^T = B^T A^T): 64 or 128 columns of N a tile, M cut
  // into as many tiles as the multiprocessors left allow, the n fitted.
  if (t == Target::SM90A && !p.transA && sizeOf(p.ab) == 2)
    for (int bn : {64, 128}) {
      const int64_t tilesN = (p.n + bn - 1) / bn;
      const int64_t tilesM =
          std::max<int64_t>(1, targetInfo(t).computeUnits / tilesN);
      const int64_t bm = ((p.m + tilesM - 1) / tilesM + 7) / 8 * 8;
      if (bm > 256 || bm < 8)
        continue;
      int depths = 0;
      for (int stages : {12, 8, 6, 5, 4, 3}) {
        GemmConfig c = wgmmaConfig({int(bm), bn, bn / 64, 1}, stages, p.ab);
        c.swapAB = true;
        if (depths == 2 || checkConfig(p, c, t))
          continue;
        ++depths;
        fittedPicks.push_back(c);
      }
    }
  // Split-K for the tiled configs whose tiles leave multiprocessors idle,
  // with at least two k-slices per split.
  std::vector<std::pair<double, GemmConfig>> split;
  for (const auto &[cost, base] : ranked)
    for (const GemmConfig &c : splitKConfigs(p, base, t))
      split.push_back({modelCost(p, c, t), c});
  // The tiled repack configs' split-K, under split-K's own rule.
  for (size_t i = 0, n = repacked.size(); i < n; ++i)
    for (const GemmConfig &c : splitKConfigs(p, repacked[i].second, t))
      repacked.push_back({repackCost(p, c, t), c});
  auto byCost = [](auto &a, auto &b) { return a.first < b.first; };
  std::stable_sort(repacked.begin(), repacked.end(), byCost);
  std::vector<GemmConfig> repackPicks;
  // The cheapest `depths` configs of each of the `shapes` cheapest tiles
  // (block and split-K) of one loop, stream-K or not.
  auto pickRepack = [&](GemmLoop loop, bool streamK, size_t shapes,
                        size_t depths) {
    std::vector<std::pair<std::array<int, 4>, size_t>> taken;
    for (const auto &[cost, c] : repacked) {
      if (c.loop != loop || c.streamK != streamK)
        continue;
      const std::array<int, 4> tile = {c.blockM, c.blockN, c.blockK, c.splitK};
      auto it = std::find_if(taken.begin(), taken.end(),
                             [&](auto &e) { return e.first == tile; });
      if (it == taken.end()) {
        if (taken.size() == shapes)
          continue;
        it = taken.insert(taken.end(), {tile, 0});
      }
      if (it->second < depths) {
        repackPicks.push_back(c);
        ++it->second;
      }
    }
  };
  // Seven at most: 2 wgmma shapes x 2 depths, 1 wgmma stream-K, 2 tiled.
  pickRepack(GemmLoop::Wgmma, false, 2, 2);
  pickRepack(GemmLoop::Wgmma, true, 1, 1);
  pickRepack(GemmLoop::Tiled, false, 2, 1);
  std::stable_sort(ranked.begin(), ranked.end(), byCost);
  std::stable_sort(split.begin(), split.end(), byCost);
  std::stable_sort(streamK.begin(), streamK.end(), byCost);
  std::stable_sort(lockstep.begin(), lockstep.end(), byCost);
  std::stable_sort(pairs.begin(), pairs.end(), byCost);
  if (ranked.size() > kMaxCandidates)
    ranked.resize(kMaxCandidates);
  if (split.size() > kMaxSplitCandidates)
    split.resize(kMaxSplitCandidates);
  if (streamK.size() > kMaxSplitCandidates)
    streamK.resize(kMaxSplitCandidates);
  if (lockstep.size() > kMaxSplitCandidates)
    lockstep.resize(kMaxSplitCandidates);
  if (pairs.size() > kMaxSplitCandidates)
    pairs.resize(kMaxSplitCandidates);
  ranked.insert(ranked.end(), split.begin(), split.end());
  ranked.insert(ranked.end(), streamK.begin(), streamK.end());
  ranked.insert(ranked.end(), lockstep.begin(), lockstep.end());
  ranked.insert(ranked.end(), pairs.begin(), pairs.end());
  std::stable_sort(ranked.begin(), ranked.end(), byCost);
  std::vector<GemmConfig> out = gemvConfigs(p, t);
  // At M <= 32 the swapped 64-column tile at its deepest ring goes first,
  // before the ranked list: the default there (see the top); at 32 < M <=
  // 128 the 64-row fitted tile at its deepest ring. So does the fitted
  // swapped tile where M > 256 leaves few whole tiles (see the top).
  auto firstPick = fittedPicks.end();
  auto tilesOf = [&](int64_t bm, int64_t bn) {
    return (p.m + bm - 1) / bm * ((p.n + bn - 1) / bn);
  };
  const int64_t units = targetInfo(t).computeUnits;
  // Where M > 256 leaves few whole tiles, two rules from M = 1024 (kgen
  // tune, H100, us; untuned bench/gemm.py agreed, two rounds):
  // - Plain 64x128 tiles (one consumer, 8 stages) where they make one wave
  //   of 70-100% of the multiprocessors; B stored K x N from M = 1600 only.
  //   Against the swapped picks before (nt, nn): 2000x512x4096 25.4 -> 16.8,
  //   25.1 -> 17.6; 1800x512x8192 38.3 -> 32.1, 38.3 -> 32.3; 1600x640x4096
  //   21.8 -> 16.5, 21.7 -> 17.4; 4000x256x8192 50.3 -> 33.7, 48.1 -> 34.2;
  //   1024x1024x4096 nt 18.4 -> 16.0; 1024x768x8192 nt 33.5 -> 29.4. Below
  //   it, with B stored K x N, the swapped 64-column tile stays: 1024x1024x4096
  //   nn 17.3 against 18.0, 1024x768x8192 nn 28.5 against 31.8,
  //   1536x640x8192 nn 30.3 against 32.0; and below M = 1024 too
  //   (400x2048x8192 nt 28.0 against 30.6).
  // - Otherwise the swapped tile 128 columns wide (two consumers of one m64
  //   slice each) where its fitted n is at least 72, not 64 wide (one
  //   consumer, n twice that): 1100x1024x4096 27.4 -> 19.4, 26.8 -> 20.6;
  //   1500x768x4096 25.2 -> 19.3, 27.4 -> 20.7; 1200x1024x4096 24.1 -> 19.2,
  //   24.3 -> 21.4; 2200x512x2048 15.8 -> 12.0, 15.9 -> 12.3. At n = 64 or
  //   less it lost (1024x1024x4096 nn 17.8 -> 20.5, 1024x768x8192 nn 29.1 ->
  //   35.4 at n = 48), and below M = 1024 the 64-column tile was as fast or
  //   faster (900x1536x4096 24.4 against 24.8, 23.0 against 24.1;
  //   532x2048x2048 10.8 against 11.4).
  const auto wideSwapped = std::find_if(
      fittedPicks.begin(), fittedPicks.end(),
      [](const GemmConfig &c) { return c.swapAB && c.blockN == 128; });
  const int swappedCols = p.m >= 1024 && wideSwapped != fittedPicks.end() &&
                                  wideSwapped->blockM >= 72
                              ? 128
                              : 64;
  const GemmConfig rows64 = wgmmaConfig({64, 128, 1, 1}, 8, p.ab);
  const int64_t tiles64 = tilesOf(64, 128);
  const bool rows64Fill = p.m >= (p.transB ? 1024 : 1600) &&
                          10 * tiles64 >= 7 * units && tiles64 <= units &&
                          !checkConfig(p, rows64, t);
  std::optional<GemmConfig> tallPick;
  const auto swapped64 = std::find_if(
      fittedPicks.begin(), fittedPicks.end(),
      [](const GemmConfig &c) { return c.swapAB && c.blockN == 64; });
  if (p.m <= 32 && swapped64 != fittedPicks.end())
    firstPick = swapped64;
  else if (p.m <= 128)
    firstPick = std::find_if(
        fittedPicks.begin(), fittedPicks.end(),
        [](const GemmConfig &c) { return c.blockM == 64 && c.cluster == 1; });
  else if (p.m > 256 && !ranked.empty() &&
           3 * tilesOf(ranked.front().second.blockM,
                       ranked.front().second.blockN) <
               2 * units) {
    if (rows64Fill)
      tallPick = rows64;
    else
      firstPick = std::find_if(
          fittedPicks.begin(), fittedPicks.end(), [&](const GemmConfig &c) {
            return c.swapAB && c.blockN == swappedCols &&
                   10 * tilesOf(c.blockM, c.blockN) >= 9 * units;
          });
  }
  // Where the best-ranked config has 128-row tiles whose last row is at
  // most half full (M > 128, M mod 128 in 1..64) and no rule above chose:
  // the 64-row fitted tile at its deepest ring, where one wave holds it (B
  // stored N x K). One tile a CTA, and fewer rows computed past M (see the
  // top). B stored K x N has no such tile: there the swapped tile that
  // makes the most CTAs (64 columns wide on a tie) at its deepest ring,
  // whose n fits M the same way, where the padded rows are more than a
  // 16th of the 128-row tiles' (see the top). From M = 1024 the rules above
  // this one apply there too: plain 64x128 tiles where they fill one wave,
  // else only swapped tiles swappedCols wide.
  if (firstPick == fittedPicks.end() && !tallPick && p.m > 128 &&
      p.m % 128 != 0 && p.m % 128 <= 64 && !ranked.empty() &&
      ranked.front().second.blockM == 128) {
    firstPick = std::find_if(
        fittedPicks.begin(), fittedPicks.end(), [](const GemmConfig &c) {
          return c.blockM == 64 && !c.swapAB && c.cluster == 1;
        });
    const int64_t rows = (p.m + 127) / 128 * 128;
    if (firstPick == fittedPicks.end() && 16 * (rows - p.m) > rows &&
        rows64Fill)
      tallPick = rows64;
    else if (firstPick == fittedPicks.end() && 16 * (rows - p.m) > rows)
      for (auto it = fittedPicks.begin(); it != fittedPicks.end(); ++it)
        if (it->swapAB && (p.m < 1024 || it->blockN == swappedCols) &&
            (firstPick == fittedPicks.end() ||
             tilesOf(it->blockM, it->blockN) >
                 tilesOf(firstPick->blockM, firstPick->blockN)))
          firstPick = it;
  }
  // Promoted sums (fp8, an f32 C) in tiles that fill the GPU twice over:
  // 128x208 at 4 stages (H100, kgen tune: fp8 the winner or within 1.4% of
  // it at 4096^3, 4096x14336x4096 and 4096x4096x14336, where the model's
  // 128x192 at 5 stages ran 8-19% slower; bf16 into f32 at 4096^3 0.5%
  // behind 128x208 at 3 stages, the model's pick 9% behind). At 2048^3 its
  // 160 tiles (1.2 waves) ran 40% behind 128x128.
  if (promotesSums(p) && tilesOf(128, 208) >= 2 * units)
    firstPick = std::find_if(fittedPicks.begin(), fittedPicks.end(),
                             [](const GemmConfig &c) {
                               return c.blockM == 128 && c.blockN == 208 &&
                                      c.stages == 4 && c.cluster == 1;
                             });
  // Rows the main loops can read only in 2-byte pieces, on sm_90a: the
  // first wgmma repack pick goes first of all (the default), where the copy
  // kernel's launch and traffic pay: M > 64 and M * N * K >= 2^26. H100,
  // bench/gemm.py KGEN_TUNE=off, the vector-1 tiled default against this
  // rule's pick in one session (2026-11-24, us, cuBLAS in brackets):
  // 127x4099x1023 nt 27.2 -> 16.3 (21.7), nn 26.9 -> 17.5 (19.7);
  // 1000x1000x1001 nt 42.9 -> 13.0 (29.0); 4000x4000x4001 nt 1369 -> 376
  // (994); 300x4096x1023 nt 90.7 -> 18.8 (42.7). At 33x17x9 the vector-1
  // loop stays (2.6-3.1 us, about a copy's launch). The bounds are not
  // measured in between; at M <= 64 (memory-bound, where the copy moves as
  // many bytes as the product) nothing was measured.
  if (t == Target::SM90A && p.m > 64 &&
      double(p.m) * double(p.n) * double(p.k) >= double(1 << 26)) {
    auto wgmmaRepack =
        std::find_if(repackPicks.begin(), repackPicks.end(), [](auto &c) {
          return c.loop == GemmLoop::Wgmma && !c.streamK;
        });
    if (wgmmaRepack != repackPicks.end()) {
      out.push_back(*wgmmaRepack);
      repackPicks.erase(wgmmaRepack);
    }
  }
  if (firstPick != fittedPicks.end()) {
    out.push_back(*firstPick);
    fittedPicks.erase(firstPick);
  }
  if (tallPick) {
    out.push_back(*tallPick);
    std::erase_if(ranked, [&](const auto &r) { return r.second == *tallPick; });
    std::erase(fittedPicks, *tallPick);
  }
  for (auto &[cost, c] : ranked)
    out.push_back(c);
  // Then the fitted widths, which the model would rank too well (see the
  // top); last the other repack picks: the model cannot rank them against
  // the rest (see repackCost).
  out.insert(out.end(), fittedPicks.begin(), fittedPicks.end());
  out.insert(out.end(), repackPicks.begin(), repackPicks.end());
  return out;
}

GemmConfig defaultConfig(const GemmProblem &p, Target t) {
  // The best-ranked config of the tiled and wgmma loops, split-K included,
  // but neither the gemv loop nor stream-K: measured on an H200 (kgen tune
  // on issue 3's shapes, 2026-11-21; bench/results/nvidia-h200.md), on the
  // 10 shapes where the heuristic had picked one of them (gemv for M <= 64,
  // stream-K for 532x2048x2048 and 532x2048x16384) its pick ran 15-199%
  // slower than the winner, another loop's in 9 of them. They stay
  // candidates, and the tuner takes them where they win (gemv at
  // 1x4096x4096, stream-K at 64x4096x4096).
  // Repack configs come last but where enumerateConfigs puts its wgmma pick
  // first (rows read in 2-byte pieces, on sm_90a).
  for (const GemmConfig &c : enumerateConfigs(p, t))
    if (c.loop != GemmLoop::Gemv && !c.streamK)
      return c;
  // The enumerated space always contains a 64x64x32, 2-stage config that is
  // valid for every well-formed problem; reaching here means the problem
  // itself is invalid, which callers check first.
  GemmConfig c;
  c.blockM = c.blockN = 64;
  c.blockK = 32;
  c.stages = 2;
  return c;
}

} // namespace kgen
