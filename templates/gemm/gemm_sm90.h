//===- gemm_sm90.h - Hopper GEMM: TMA + wgmma, warp-specialized -*- C++ -*-===//
//
// C = alpha * op(A) * op(B) + beta * C on sm_90a. A persistent grid (one
// block per multiprocessor) walks the kBlockM x kBlockN tiles of C in a
// grouped order (kGroupM tile rows at a time, so the blocks running together
// share their A rows and B columns in L2). Each block is
//
//   warpgroup 0         the producer: one thread issues the TMA loads of
//                       each 128-byte k-slice of A and B (kBlockK = 64
//                       2-byte or 128 fp8 elements) into a ring of
//                       kStages shared-memory stages; full[s] completes
//                       when a stage's bytes have landed;
//   warpgroups 1..kC    the consumers: each owns kBlockM / kC rows of the
//                       tile as m64 slices, runs wgmma m64nkBlockNk16 (fp8:
//                       k32, the same 32 bytes of K a step) on the
//                       stage (keeping one k-slice of wgmmas in flight),
//                       releases it through empty[s], and at the end of a
//                       tile writes its fp32 accumulators to C while the
//                       producer already loads the next tile.
//
// With kCluster = 2, the two CTAs of a cluster share the larger of their
// two slices: with tiles at least as wide as tall they take vertically
// adjacent tiles (the same columns of B) and each loads half of the B slice;
// with taller tiles (128x80, fitted to the multiprocessors) they take
// horizontally adjacent tiles (the same rows of A) and each loads half of
// the A slice. Each multicasts its half to both, and a stage is refilled
// only when the consumers of both CTAs have released it. What this saves is
// L2-to-SM traffic, which bounds the mid-size shapes (single 128x80 tiles
// at 532x2048x2048 wait on their TMA loads with ~8 TB/s coming from L2;
// ncu, H200). It does not always pay: there the pairs of 128x80 ran 15.1 us
// against 14.7 for single CTAs, so the tuner decides.
//
// With kSwapAB, the roles swap: C^T = B^T A^T, wgmma's m64 slices run along
// N (B's 64-column slices) and its n along M (rows of A), so the tile
// height kBlockM is a wgmma n (any multiple of 8) and can be fitted to M:
// 532 rows in 4 tiles of 136 with 64-column tiles fill 128 SMs, where
// 128-row tiles fill 80 (H100: 11.1 against 13.6 us). wgmma's B operand is
// then A's K-major rows; its A operand is B's slice, K-major when B is
// stored N x K and M-major (the transpose bit) when stored K x N, the same
// 64-column boxes the unswapped loop reads N-major. storeTile transposes
// through its slab.
//
// With kSplitK > 1 or kStreamK, the CTAs do not take whole tiles, so that a
// grid of 132 CTAs has work when there are only 40 or 80 tiles
// (templates/gemm/schedule.h). Split-K deals each tile's k-slices to
// kSplitK units, interleaved, so that the CTAs running together load the
// same k-slices at the same time (what the L2 serves best); stream-K deals
// the k-iterations of all tiles out in equal runs, one per CTA. The
// producer walks the same segments as the consumers; a tile split between
// CTAs is added up by the last of them through the workspace
// (templates/gemm/fixup.h) before its epilogue.
//
// fp8 inputs (e4m3, e5m2; layout nt, both operands K-major, unswapped)
// take the same ring and descriptors: a k-slice is 128 fp8 elements in the
// same 128-byte rows. The tensor cores add fp8 products with fewer bits
// than fp32 (an H100 measured ~2^-12 relative for sums over K = 1040), so,
// as DeepGEMM does, each k-slice's wgmmas start from zero and are added to
// fp32 totals (kPromote; C must be bf16 or f16, whose rounding covers the
// rest); the totals are scaled by the inputs' per-tensor scales before the
// epilogue.
//
// setmaxnreg moves registers from the producer (which needs few) to the
// consumers (which hold up to 2 x 128 accumulators each). TMA zero-fills
// what lies past M, N or K, so only the stores check bounds; the stores are
// the fused epilogue every GEMM loop shares (templates/gemm/epilogue.h).
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"
#include "kgen/common/wgmma_sm90.h"
#include "kgen/gemm/epilogue.h"
#include "kgen/gemm/fixup.h"
#include "kgen/gemm/schedule.h"

namespace kgen::gemm_sm90 {

using gemm::Segment;
using gemm::SplitK;
using gemm::StreamK;
using sm90::TensorMap;

template <class Config> struct Shape {
  using T = typename Config::TypeA;
  using TC = typename Config::TypeC;
  static constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN,
                       kBlockK = Config::kBlockK, kStages = Config::kStages;
  static constexpr int kConsumers = Config::kConsumers;
  static constexpr int kCluster = Config::kCluster; ///< CTAs of a pair
  /// A pair shares A (tiles side by side) when its tiles are taller than
  /// wide, else B (tiles one above the other).
  static constexpr bool kShareA = kCluster > 1 && kBlockM > kBlockN;
  static constexpr int kClusterM = kShareA ? 1 : kCluster;
  static constexpr int kClusterN = kShareA ? kCluster : 1;
  static constexpr bool kStreamK = Config::kStreamK;
  static constexpr int kSplitK = Config::kSplitK; ///< units a tile
  /// Tiles may be split between CTAs and added up through the workspace.
  static constexpr bool kFixup = kStreamK || kSplitK > 1;
  static constexpr int kConsumerThreads = 128 * kConsumers;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  /// Swapped (C^T = B^T A^T): wgmma's m64 slices run along N (slices of B),
  /// its n along M (rows of A).
  static constexpr bool kSwapAB = Config::kSwapAB;
  static constexpr int kRowsP = kSwapAB ? kBlockN : kBlockM; ///< wgmma m
  static constexpr int kRowsQ = kSwapAB ? kBlockM : kBlockN; ///< wgmma n
  static constexpr int kRowsPerConsumer = kRowsP / kConsumers;
  static constexpr int kMmaM = kRowsPerConsumer / 64; ///< m64 slices
  static constexpr int kAccum = kRowsQ / 2; ///< fp32 per thread per slice
  /// Operand B stored K x N (N contiguous): wgmma reads it N-major, as its
  /// B operand, or swapped as its A operand (M-major).
  static constexpr bool kBNMajor = !Config::kTransB;
  static constexpr bool kMmaAMNMajor = kSwapAB && kBNMajor;
  static constexpr bool kMmaBMNMajor = !kSwapAB && kBNMajor;
  static constexpr int kRowBytes = 128; ///< one swizzled row of K
  /// fp8 inputs: 128 elements a row, wgmma k32 (32 bytes a step, as k16).
  static constexpr bool kFp8 = sizeof(T) == 1;
  static constexpr int kKSteps = kRowBytes / 32; ///< wgmmas a k-slice
  static constexpr int kStageBytesA = kBlockM * kRowBytes;
  static constexpr int kStageBytesB = kBlockN * kRowBytes;
  static constexpr int kStageBytes = kStageBytesA + kStageBytesB;
  static constexpr int kGroupM = 8;
  /// The epilogue's staging: per consumer warp 16 rows of kSlabCols fp32.
  static constexpr int kSlabCols = 32; ///< 8 chunks: the swizzle's period
  static constexpr int kSlabFloats = 16 * kSlabCols;
  /// wgmma, like mma.sync, adds into its accumulators with truncation; with
  /// an fp32 C that error shows (2x a plain fp32 loop at K = 2048 on an
  /// H200), so each k-slice's sum is promoted with FADDs; fp8's narrower
  /// sums always (see the top). The limits keep the doubled accumulators
  /// within the consumers' registers. (Adding a slice's sum while the next
  /// slice's wgmmas run, from a second set of accumulators, makes ptxas
  /// serialize every wgmma: it lets no instruction read accumulators while
  /// any wgmma is in flight here. The two consumers overlap instead.)
  static constexpr bool kPromote = IsSame<TC, float>::value || kFp8;

  static_assert(IsSame<T, typename Config::TypeB>::value &&
                    (IsSame<T, bf16>::value || IsSame<T, f16>::value ||
                     IsSame<T, e4m3>::value || IsSame<T, e5m2>::value),
                "A and B are both bf16, f16, e4m3 or e5m2");
  static_assert(!Config::kTransA, "A is K-major (layout 'N')");
  static_assert(kBlockK * int(sizeof(T)) == kRowBytes,
                "a k-slice is one 128-byte swizzle row");
  static_assert(!kFp8 || (!kBNMajor && !kSwapAB),
                "fp8 wgmma reads both operands K-major (layout nt), "
                "unswapped");
  static_assert(kThreads == Config::kThreads, "128 threads per warpgroup");
  /// The ring, its full and empty barriers, the fix-up's flag and the
  /// consumer warps' slabs, after 1024 bytes of slack for the alignment.
  static_assert(1024 + kStages * (kStageBytes + 16) + (kFixup ? 16 : 0) +
                        kConsumers * 4 * kSlabFloats * 4 ==
                    Config::kSmemBytes,
                "kSmemBytes disagrees with the template's smem layout");
  static_assert(kRowsPerConsumer % 64 == 0 && kMmaM <= 2,
                "each consumer owns one or two m64 slices");
  static_assert(kBlockN <= 256 && (kBNMajor ? kBlockN % 64 == 0
                                            : kBlockN % 8 == 0),
                "wgmma n <= 256; B stored K x N comes in 64-column boxes");
  static_assert(kBlockM <= 256, "a TMA box has at most 256 rows");
  static_assert(!kSwapAB || (kCluster == 1 && !kFixup && kBlockM % 8 == 0),
                "swapped: single CTAs, whole tiles");
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs");
  static_assert(!kFixup || kCluster == 1,
                "split-K and stream-K run single CTAs (a pair shares its "
                "k-slices)");
  static_assert(kSplitK >= 1 && !(kStreamK && kSplitK > 1),
                "split-K or stream-K, not both");
  static_assert(kClusterM == 1 || (kBNMajor ? kBlockN % 128 == 0
                                            : kBlockN % 16 == 0),
                "each CTA of a pair loads half of the B slice");
};

/// The grouped tile order: consecutive tile indices walk down kGroupM tile
/// rows before moving right, so blocks running together reuse L2.
template <class S>
KGEN_DEVICE void tileCoords(int tile, int tilesM, int tilesN, int &tm,
                            int &tn) {
  const int perGroup = S::kGroupM * tilesN;
  const int group = tile / perGroup;
  const int firstM = group * S::kGroupM;
  const int rows = min(tilesM - firstM, S::kGroupM);
  const int inGroup = tile % perGroup;
  tm = firstM + inGroup % rows;
  tn = inGroup / rows;
}

/// The tile CTA `rank` of a pair takes in unit `unit` (a single CTA's unit
/// is its tile): unitsM x unitsN units in the grouped order, each kClusterM
/// tiles tall and kClusterN wide.
template <class S>
KGEN_DEVICE void pairTile(int unit, int unitsM, int unitsN, uint32_t rank,
                          int &tm, int &tn) {
  int um, un;
  tileCoords<S>(unit, unitsM, unitsN, um, un);
  tm = um * S::kClusterM + (S::kClusterM > 1 ? int(rank) : 0);
  tn = un * S::kClusterN + (S::kClusterN > 1 ? int(rank) : 0);
}

/// What one CTA computes, segment by segment: units unit0, unit0 + stride,
/// ... with all their k-slices; with kSplitK the split units unit0, unit0 +
/// stride, ...; with kStreamK its run of k-iterations. The producer and
/// the consumers each walk their own copy.
template <class S> struct Work {
  StreamK sk;
  SplitK split;
  long long pos, stop;
  int stride, cta;

  KGEN_DEVICE Work(int units, int slices, int unit0, int stride)
      : sk(units, slices, int(gridDim.x)), split(units, slices, S::kSplitK),
        stride(stride), cta(int(blockIdx.x)) {
    pos = S::kStreamK ? sk.begin(cta) : unit0;
    stop = S::kStreamK      ? sk.begin(cta + 1)
           : S::kSplitK > 1 ? split.units()
                            : units;
  }

  KGEN_DEVICE bool next(Segment &seg) {
    if (pos >= stop)
      return false;
    if constexpr (S::kStreamK) {
      seg = sk.segment(cta, pos);
      pos += seg.kCount;
    } else if constexpr (S::kSplitK > 1) {
      seg = split.segment(pos);
      pos += stride;
    } else {
      seg = Segment{int(pos), 0, sk.slices, 0, 1, 0};
      pos += stride;
    }
    return true;
  }
};

/// A consumer thread's accumulators as the flat list fixupPartials moves.
template <class S> struct AccView {
  static constexpr int kAccum = S::kMmaM * S::kAccum;
  float (&acc)[S::kMmaM][S::kAccum];
  KGEN_DEVICE float get(int e) const {
    return acc[e / S::kAccum][e % S::kAccum];
  }
  KGEN_DEVICE void set(int e, float x) const {
    acc[e / S::kAccum][e % S::kAccum] = x;
  }
};

/// The fix-up of a tile split between CTAs: each contributor's partial in
/// the slot its schedule assigns it (one tile of fp32 each; schedule.h).
/// True in the last contributor, which then holds the sum.
template <class S>
KGEN_DEVICE bool fixup(const gemm::Params &p, float (&acc)[S::kMmaM][S::kAccum],
                       const Work<S> &work, const Segment &seg, int *flag) {
  struct ConsumerSync {
    KGEN_DEVICE void operator()() const {
      sm90::namedBarrierSync<S::kConsumerThreads>(1);
    }
  };
  AccView<S> view{acc};
  auto run = [&](const auto &slots) {
    return gemm::fixupPartials<S::kConsumerThreads>(
        p, view, seg.tile, seg.part, seg.parts, slots, int(threadIdx.x) - 128,
        flag, ConsumerSync{});
  };
  float *const workspace = static_cast<float *>(p.workspace);
  if constexpr (S::kStreamK)
    return run(gemm::StreamKSlots{workspace, work.sk, work.cta - seg.part,
                                  seg.tile, S::kBlockM * S::kBlockN});
  else
    return run(gemm::SplitKSlots{workspace, work.split.tiles, seg.tile,
                                 S::kBlockM * S::kBlockN});
}

/// Hands a consumer's accumulators to the fused epilogue (alpha/beta, bias,
/// activation, residual, cast; templates/gemm/epilogue.h) in runs of 8
/// columns of one row, so C moves in 16-byte vectors. wgmma's m64nN layout
/// gives each thread only column pairs (rows warp*16 + lane/4 (+8), columns
/// 8j + 2*(lane%4)): stored as they are, each warp store writes 16 bytes of
/// 8 rows, and the stores of a 128x256 tile took ~7 us of 2048^3's 32
/// (ncu, H100: the LSU queue full). So each warp first writes 32 columns of
/// its 16 rows to its own staging slab (fp32; 16-byte chunks XOR-swizzled by
/// row, so neither side conflicts on a bank), then each lane reads 8 columns
/// of one row back: 4 lanes cover 128 contiguous bytes of fp32, 64 of C.
/// Where C's rows allow single elements only (kVecC = 1), each lane reads a
/// column instead, so a warp stores 32 adjacent elements of a row.
template <class Config>
KGEN_DEVICE void
storeTile(const float (&acc)[Shape<Config>::kMmaM][Shape<Config>::kAccum],
          const gemm::Params &p, int row0, int col0, float *slab) {
  using S = Shape<Config>;
  constexpr int kCols = S::kSlabCols;
  const int lane = int(threadIdx.x % 32u), warp = int(threadIdx.x / 32u) % 4;
  const int key = lane / 4; // the row's swizzle: both sides use rows r, r+8
#pragma unroll
  for (int mi = 0; mi < S::kMmaM; ++mi)
#pragma unroll
    for (int c0 = 0; c0 < S::kRowsQ; c0 += kCols) {
      const int width = S::kRowsQ - c0 < kCols ? S::kRowsQ - c0 : kCols;
      __syncwarp(); // the last slab's reads are done
#pragma unroll
      for (int j = 0; j < kCols / 8; ++j)
        if (j * 8 < width)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int col = j * 8 + (lane % 4) * 2;
            const int chunk = (col / 4) ^ key;
            const float *a = &acc[mi][(c0 / 8 + j) * 4 + half * 2];
            *reinterpret_cast<float2 *>(slab + (key + half * 8) * kCols +
                                        chunk * 4 + col % 4) =
                make_float2(a[0], a[1]);
          }
      __syncwarp();
      if constexpr (S::kSwapAB) {
        // The slab is 16 columns of C (n) by 32 rows (m): lane l takes row
        // c0 + l, 8 columns at a time.
        if (lane < width)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float v[8];
#pragma unroll
            for (int i = 0; i < 8; ++i)
              v[i] =
                  slab[(h * 8 + i) * kCols + (((lane / 4) ^ i) * 4) + lane % 4];
            gemm::epilogue<Config, 8>(p, 0, row0 + c0 + lane,
                                      col0 + mi * 64 + warp * 16 + h * 8, v);
          }
        continue;
      }
      if constexpr (Config::kVecC == 1) {
        // C's rows allow single elements only (an odd N or leading
        // dimension): lane l stores column c0 + l of each of the 16 rows,
        // so a warp's store is 32 adjacent elements of one row (whole
        // sectors), where runs of 8 wrote 2 bytes of 16 rows' sectors 8
        // times over. ncu, H100, warm L2, 64x64 tiles: 127x4099x1024 (A and
        // B aligned) 10.0-10.8 -> 8.5-8.9 us (128x4096x1024: 6.6-6.9);
        // bench/gemm.py 127x4099x1023 nt 16.3-16.4 -> 14.1-14.6.
        if (lane < width)
#pragma unroll 4
          for (int r = 0; r < 16; ++r) {
            const float v =
                slab[r * kCols + (((lane / 4) ^ (r % 8)) * 4) + lane % 4];
            gemm::epilogue<Config, 1>(p, 0, row0 + mi * 64 + warp * 16 + r,
                                      col0 + c0 + lane, &v);
          }
        continue;
      }
      const int q = lane % 4; // this lane's 8 columns: chunks 2q, 2q + 1
      if (q * 8 < width)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = key + half * 8;
          float v[8];
          *reinterpret_cast<float4 *>(v) = *reinterpret_cast<const float4 *>(
              slab + r * kCols + ((2 * q) ^ key) * 4);
          *reinterpret_cast<float4 *>(v + 4) =
              *reinterpret_cast<const float4 *>(slab + r * kCols +
                                                ((2 * q + 1) ^ key) * 4);
          gemm::epilogue<Config, 8>(p, 0, row0 + mi * 64 + warp * 16 + r,
                                    col0 + c0 + q * 8, v);
        }
    }
}

/// Gives a stage back to the producers of every CTA that fills it.
template <class S> KGEN_DEVICE void release(uint64_t *emptyBar) {
  if constexpr (S::kCluster > 1) {
#pragma unroll
    for (int r = 0; r < S::kCluster; ++r)
      sm90::barrierArriveCluster(emptyBar, uint32_t(r));
  } else {
    sm90::barrierArrive(emptyBar);
  }
}

/// Loads this CTA's part of the B slice of columns n0.. and k-slice k0: all
/// of it, or with a pair sharing B, half of it multicast to both CTAs.
template <class S>
KGEN_DEVICE void loadB(unsigned char *b, const TensorMap &mapB, uint64_t *bar,
                       int n0, int k0, uint32_t rank) {
  if constexpr (S::kBNMajor) {
    // 64-column boxes (one swizzle row wide) of 64 k-rows each; with a pair,
    // CTA r loads boxes r, r + 2, ...
#pragma unroll
    for (int j = 0; j < S::kBlockN / 64; ++j) {
      if constexpr (S::kClusterM > 1) {
        if (j % S::kCluster == int(rank))
          sm90::tmaLoad2dMulticast(b + j * 64 * S::kRowBytes, &mapB, bar,
                                   n0 + j * 64, k0, 0x3);
      } else {
        sm90::tmaLoad2d(b + j * 64 * S::kRowBytes, &mapB, bar, n0 + j * 64,
                        k0);
      }
    }
  } else if constexpr (S::kClusterM > 1) {
    constexpr int kRows = S::kBlockN / S::kCluster;
    sm90::tmaLoad2dMulticast(b + rank * kRows * S::kRowBytes, &mapB, bar, k0,
                             n0 + int(rank) * kRows, 0x3);
  } else {
    sm90::tmaLoad2d(b, &mapB, bar, k0, n0);
  }
}

/// The consumer warpgroups' part: wgmma over each stage, then the stores.
template <class Config>
KGEN_DEVICE void consume(unsigned char *smem, uint64_t *full, uint64_t *empty,
                         int *flag, float *staging, uint32_t rank, int unit0,
                         int unitStride, int units, int unitsM, int unitsN,
                         int tilesM, int tilesN, int slices,
                         const gemm::Params &p) {
  using S = Shape<Config>;
  using T = typename S::T;
  sm90::setMaxRegsInc<232>();
  const int consumer = int(threadIdx.x / 128u) - 1;
  const bool warpLeader = threadIdx.x % 32u == 0;
  float *slab = staging + (int(threadIdx.x) / 32 - 4) * S::kSlabFloats;
  using Mma = sm90::Wgmma<T, S::kRowsQ, S::kMmaBMNMajor, S::kMmaAMNMajor>;
  float acc[S::kMmaM][S::kAccum];
  // With an fp32 C or fp8 inputs, each k-slice's wgmmas start from zero and
  // their sum is added here with round-to-nearest FADDs (see kPromote);
  // otherwise unused.
  float total[S::kPromote ? S::kMmaM : 1][S::kPromote ? S::kAccum : 1];
  // fp8: the product of the inputs' per-tensor scales (run() has waited
  // for the previous kernel, which may have written them).
  float scale = 1.f;
  if constexpr (S::kFp8)
    scale = (p.scaleA ? *p.scaleA : 1.f) * (p.scaleB ? *p.scaleB : 1.f);
  int stage = 0;
  uint32_t phase = 0;
  Work<S> work(units, slices, unit0, unitStride);
  Segment seg;
  while (work.next(seg)) {
    int tm, tn;
    pairTile<S>(seg.tile, unitsM, unitsN, rank, tm, tn);
    if constexpr (S::kPromote) {
#pragma unroll
      for (int mi = 0; mi < S::kMmaM; ++mi)
#pragma unroll
        for (int i = 0; i < S::kAccum; ++i)
          total[mi][i] = 0.0f;
    }
    int prevStage = -1;
    for (int kt = 0; kt < seg.kCount; ++kt) {
      sm90::barrierWait(&full[stage], phase);
      const unsigned char *a = smem + stage * S::kStageBytes +
                               (S::kSwapAB ? S::kStageBytesA : 0) +
                               consumer * S::kRowsPerConsumer * S::kRowBytes;
      const unsigned char *b =
          smem + stage * S::kStageBytes + (S::kSwapAB ? 0 : S::kStageBytesA);
#pragma unroll
      for (int mi = 0; mi < S::kMmaM; ++mi)
        sm90::fenceAccumulators(acc[mi]);
      sm90::wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < S::kKSteps; ++kk) {
        // A k16 (fp8: k32) step: 32 bytes into K-major rows, two 8-k groups
        // (2048 bytes) into N- or M-major boxes (64 columns, 64 * 128
        // bytes; 2-byte types only).
        const uint64_t descB =
            S::kMmaBMNMajor
                ? sm90::matrixDescriptor(b + kk * 2048, 64 * S::kRowBytes, 1024)
                : sm90::matrixDescriptor(b + kk * 32, 16, 1024);
        const int accumulate = S::kPromote ? kk > 0 : (kt > 0 || kk > 0);
#pragma unroll
        for (int mi = 0; mi < S::kMmaM; ++mi)
          Mma::run(acc[mi],
                   S::kMmaAMNMajor
                       ? sm90::matrixDescriptor(a + mi * 64 * S::kRowBytes +
                                                    kk * 2048,
                                                64 * S::kRowBytes, 1024)
                       : sm90::matrixDescriptor(
                             a + mi * 64 * S::kRowBytes + kk * 32, 16, 1024),
                   descB, accumulate);
      }
      sm90::wgmmaCommit();
      if constexpr (S::kPromote) {
        sm90::wgmmaWait<0>();
#pragma unroll
        for (int mi = 0; mi < S::kMmaM; ++mi) {
          sm90::fenceAccumulators(acc[mi]);
#pragma unroll
          for (int i = 0; i < S::kAccum; ++i)
            total[mi][i] += acc[mi][i];
        }
        if (warpLeader)
          release<S>(&empty[stage]);
      } else {
        // One k-slice of wgmmas stays in flight; the one before it is done,
        // so its stage goes back to the producer.
        sm90::wgmmaWait<1>();
#pragma unroll
        for (int mi = 0; mi < S::kMmaM; ++mi)
          sm90::fenceAccumulators(acc[mi]);
        if (prevStage >= 0 && warpLeader)
          release<S>(&empty[prevStage]);
        prevStage = stage;
      }
      if (++stage == S::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    if constexpr (!S::kPromote) {
      sm90::wgmmaWait<0>();
#pragma unroll
      for (int mi = 0; mi < S::kMmaM; ++mi)
        sm90::fenceAccumulators(acc[mi]);
      if (warpLeader)
        release<S>(&empty[prevStage]);
    }
    if (S::kCluster > 1 && (tm >= tilesM || tn >= tilesN))
      continue; // the pair's second tile lies past M or N
    if constexpr (S::kFixup) {
      // A tile split between CTAs: the last contributor stores the sum.
      if (seg.parts > 1) {
        bool last;
        if constexpr (S::kPromote)
          last = fixup<S>(p, total, work, seg, flag);
        else
          last = fixup<S>(p, acc, work, seg, flag);
        if (!last)
          continue;
      }
    }
    if constexpr (S::kFp8) {
#pragma unroll
      for (int mi = 0; mi < S::kMmaM; ++mi)
#pragma unroll
        for (int i = 0; i < S::kAccum; ++i)
          total[mi][i] *= scale;
    }
    const int row0 =
        tm * S::kBlockM + (S::kSwapAB ? 0 : consumer * S::kRowsPerConsumer);
    const int col0 =
        tn * S::kBlockN + (S::kSwapAB ? consumer * S::kRowsPerConsumer : 0);
    if constexpr (S::kPromote)
      storeTile<Config>(total, p, row0, col0, slab);
    else
      storeTile<Config>(acc, p, row0, col0, slab);
  }
}

template <class Config>
KGEN_DEVICE void run(const TensorMap &mapA, const TensorMap &mapB,
                     const gemm::Params &p) {
  using S = Shape<Config>;
  const int m = Config::kM ? Config::kM : p.m;
  const int n = Config::kN ? Config::kN : p.n;
  const int k = Config::kK ? Config::kK : p.k;

  // Stages start on a 1024-byte boundary, the period of the 128-byte
  // swizzle, so TMA and wgmma agree on the pattern.
  extern __shared__ __align__(1024) unsigned char smemRaw[];
  unsigned char *smem =
      smemRaw + ((1024 - (sm90::smemAddress(smemRaw) & 1023)) & 1023);
  uint64_t *full =
      reinterpret_cast<uint64_t *>(smem + S::kStages * S::kStageBytes);
  uint64_t *empty = full + S::kStages;
  int *flag = reinterpret_cast<int *>(empty + S::kStages); // the fix-up's
  // The consumer warps' epilogue slabs (storeTile), after the flag.
  float *staging = reinterpret_cast<float *>(
      reinterpret_cast<unsigned char *>(empty + S::kStages) +
      (S::kFixup ? 16 : 0));

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < S::kStages; ++s) {
      sm90::barrierInit(&full[s], 1);
      // One arrival per consumer warp of every CTA that reads the stage.
      sm90::barrierInit(&empty[s], S::kConsumers * 4 * S::kCluster);
    }
    sm90::fenceBarrierInit();
  }
  // The peer's barriers must exist before its stages receive multicasts.
  if constexpr (S::kCluster > 1)
    sm90::clusterSync();
  else
    __syncthreads();
  // The launch overlaps the kernel before it on the stream
  // (LaunchDims::overlapsPrevious: the setup above runs while that one's
  // last blocks finish or its memory is flushed): nothing of A, B, C or the
  // workspace is touched before it has completed. This kernel does not
  // call allowNextGrid(): the next kernel's blocks, taking the SMs this
  // grid leaves idle (128 CTAs on 132) while it runs, slowed it (H100,
  // 532x2048x16384: 73.6 us against 62.2 with the implicit trigger at exit).
  waitForPreviousGrid();

  // Tiles go out in units of kCluster adjacent tiles (pairTile); CTA `rank`
  // of a cluster takes tile rank of each unit (one past M or N reads zeros
  // and stores nothing).
  const uint32_t rank = S::kCluster > 1 ? sm90::clusterRank() : 0;
  const int unit0 = int(blockIdx.x) / S::kCluster;
  const int unitStride = int(gridDim.x) / S::kCluster;
  const int tilesM = (m + S::kBlockM - 1) / S::kBlockM;
  const int tilesN = (n + S::kBlockN - 1) / S::kBlockN;
  const int unitsM = (tilesM + S::kClusterM - 1) / S::kClusterM;
  const int unitsN = (tilesN + S::kClusterN - 1) / S::kClusterN;
  const int units = unitsM * unitsN;
  const int slices = (k + S::kBlockK - 1) / S::kBlockK;
  const int warpgroup = int(threadIdx.x / 128u);

  if (warpgroup == 0) {
    sm90::setMaxRegsDec<40>();
    // Warp 0 walks the slices together and its lane 0 issues the loads: no
    // lane of the issuing warp waits elsewhere (at the final cluster
    // barrier) while lane 0 still has loads to issue.
    if (threadIdx.x < 32) {
      const bool issuer = threadIdx.x == 0;
      int stage = 0;
      uint32_t phase = 0;
      Work<S> work(units, slices, unit0, unitStride);
      Segment seg;
      while (work.next(seg)) {
        int tm, tn;
        pairTile<S>(seg.tile, unitsM, unitsN, rank, tm, tn);
        for (int kt = 0; kt < seg.kCount; ++kt) {
          if (issuer) {
            sm90::barrierWait(&empty[stage], phase ^ 1);
            unsigned char *a = smem + stage * S::kStageBytes;
            unsigned char *b = a + S::kStageBytesA;
            sm90::barrierArriveExpectTx(&full[stage], S::kStageBytes);
            const int k0 = (seg.kBegin + kt * seg.kStride) * S::kBlockK;
            if constexpr (S::kShareA) {
              constexpr int kRows = S::kBlockM / S::kCluster;
              sm90::tmaLoad2dMulticast(a + rank * kRows * S::kRowBytes, &mapA,
                                       &full[stage], k0,
                                       tm * S::kBlockM + int(rank) * kRows,
                                       0x3);
            } else {
              sm90::tmaLoad2d(a, &mapA, &full[stage], k0, tm * S::kBlockM);
            }
            loadB<S>(b, mapB, &full[stage], tn * S::kBlockN, k0, rank);
          }
          __syncwarp();
          if (++stage == S::kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    consume<Config>(smem, full, empty, flag, staging, rank, unit0, unitStride,
                    units, unitsM, unitsN, tilesM, tilesN, slices, p);
  }
  // No CTA of a cluster leaves while the other may still arrive on its
  // barriers or multicast into its shared memory.
  if constexpr (S::kCluster > 1)
    sm90::clusterSync();
}

} // namespace kgen::gemm_sm90
