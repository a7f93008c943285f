//===- gemv.h - Small-M GEMM that streams B, C = epilogue(A*op(B)) -*- C++
//-*-===//
//
// For decode shapes (M <= 64) a GEMM is a read of B: 2 bytes of B per
// 2*M FLOPs. This loop reads B once and keeps HBM busy: every lane streams
// its own 16-byte runs of B (and of A, tiny and L2-resident) into a private
// ring of kStages k-chunks in shared memory with cp.async, so kStages - 1
// chunks a warp stay in flight while the warp runs the MMAs of the oldest
// (Little's law: an H200 multiprocessor needs ~30 KB outstanding; the ring,
// not the register file, holds them). A lane reads back only what it copied,
// so no barrier and no bank conflict (a warp's runs of one kind lie side by
// side, 512 bytes). K is split over blocks to fill every multiprocessor.
//
// Tensor cores do the math (at M = 64 FMAs could not keep up with HBM): it
// computes C^T = op(B)^T A^T on mma.sync m16n8k16, B's columns n as the
// atom's 16 rows, A's rows m as its 8 columns. Lane (g, t) = (lane/4,
// lane%4) reads k [8t, 8t + 8) of each 32-wide k-chunk, 16 bytes a row,
// which the atom accepts through two permutations (the sum does not depend
// on how k is ordered, nor on which atom row is which column n, as long as
// both operands and the epilogue agree):
//
//   k: in mma step s (0, 1) of a chunk, the atom's k {2t, 2t+1, 2t+8, 2t+9}
//      are the chunk's 8t+4s .. 8t+4s+3, the same for A and B; so a lane's
//      16-byte run of A row m feeds its B fragment (b0, b1) directly.
//   n: atom row g of row tile r is column nBase(r, g) of C, row g + 8 is
//      nBase + 1; a lane's accumulators (d0, d2) and (d1, d3) are then two
//      adjacent columns of one row of C: pairs for the epilogue.
//        B 'T' (nt, N x K): nBase = 16r + 2g; the lane reads rows nBase and
//                           nBase + 1 of B, 16 bytes of k each;
//        B 'N' (nn, K x N): nBase = 64(r/4) + 8g + 2(r%4); the lane reads
//                           16 bytes (8 columns) of each of its 8 k rows
//                           per group of 4 row tiles, and pairs the k rows
//                           column by column (byte permutes).
//
// Block: kWarps warps side by side along n, each owning kRowTiles * 16
// columns; the block covers kBlockM rows of A (kBlockM / 8 atom columns).
// Grid: (ceil(N / kBlockN), ceil(M / kBlockM), batch * kSplitK); with
// kSplitK > 1 the blocks of a tile take near-equal runs of k-chunks and
// gemm.h's splitKFixup lets the last to arrive add their partials in split
// order (no second kernel). Ring: slot s, run i (B's 2 * kRowTiles, then
// A's kBlockM / 8), thread x at byte ((s * kRuns + i) * kThreads + x) * 16;
// split-K's flag after it. Runs narrower than 16 bytes (vectors of 1, 2 or
// 4 elements) go through registers into the same slots, synchronously.
// NVIDIA only: AMD runs small M on the tiled loop with split-K.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/gemm/gemm.h"

namespace kgen::gemm {

/// Eight 2-byte elements, as four 32-bit words (element 2i in the low half
/// of word i): one lane's run of a k-chunk (or, B 'N', of 8 columns); one
/// 16-byte shared access in the ring.
struct alignas(16) Run8 {
  uint32_t w[4];
};

/// The 8 elements at p, of which the first `valid` lie inside the matrix
/// (kCheck), in accesses of kVec elements; a vector is wholly inside or
/// outside (the vector contract), and outside reads as zero.
template <int kVec, bool kCheck, class T>
KGEN_DEVICE Run8 load8(const T *p, int valid) {
  static_assert(sizeof(T) == 2, "two-byte elements");
  Run8 r;
#pragma unroll
  for (int v = 0; v < 8 / kVec; ++v) {
    const bool inside = !kCheck || v * kVec < valid;
    if constexpr (kVec == 1) {
      const uint32_t x =
          inside ? reinterpret_cast<const Bytes<2> *>(p)[v].half : 0u;
      r.w[v / 2] = v % 2 ? r.w[v / 2] | x << 16 : x;
    } else {
      using V = Bytes<2 * kVec>;
      const V x = inside ? reinterpret_cast<const V *>(p)[v] : V{};
#pragma unroll
      for (int i = 0; i < kVec / 2; ++i)
        r.w[v * (kVec / 2) + i] = x.words[i];
    }
  }
  return r;
}

/// Puts the run of 8 elements at p (the first `valid` inside the matrix)
/// into the ring at dst: one cp.async of 16 bytes (zero-filled outside; the
/// matrix base stands in as the mapped source address), or, for narrower
/// vectors, through registers. kL1: keep it in L1 (A, which every warp of
/// the block reads); B, read once, skips L1.
template <int kVec, bool kCheck, bool kL1, class T>
KGEN_DEVICE void copyRun(unsigned char *dst, const T *p, const T *base,
                         int valid) {
  if constexpr (kVec == 8) {
    const bool inside = !kCheck || valid > 0;
    sm80::cpAsync<16, kL1>(sm80::smemAddress(dst), inside ? p : base, inside);
  } else {
    *reinterpret_cast<Run8 *>(dst) = load8<kVec, kCheck>(p, valid);
  }
}

/// The low (high) halves of x and y as one word, x's first: two k rows of
/// one column (B 'N').
KGEN_DEVICE uint32_t lowHalves(uint32_t x, uint32_t y) {
  return (x & 0xffffu) | (y << 16);
}
KGEN_DEVICE uint32_t highHalves(uint32_t x, uint32_t y) {
  return (x >> 16) | (y & 0xffff0000u);
}

/// One warp's kRowTiles x (kBlockM / 8) mma tiles of C^T and their loads.
template <class Config> struct GemvWarp {
  using T = typename Config::TypeA;
  static constexpr int kRowTiles = Config::kRowTiles;
  static constexpr int kColTiles = Config::kBlockM / 8;
  static constexpr bool kBKMajor = Config::kTransB;
  /// 16-byte runs of B per chunk: two rows a row tile (B 'T'), or 8 k rows a
  /// group of four row tiles (B 'N'): two a row tile either way.
  static constexpr int kRunsB = 2 * kRowTiles;
  static constexpr bool kCheckA = Config::kCheckM || Config::kCheckK;
  static constexpr bool kCheckB = Config::kCheckN || Config::kCheckK;

  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value,
                "the gemv loop takes bf16 or f16");
  static_assert(KGEN_NVIDIA, "the gemv loop runs on mma.sync (NVIDIA)");
  static_assert(!Config::kTransA, "the gemv loop reads A K-major ('N')");
  static_assert(Config::kBlockM % 8 == 0 && Config::kBlockM <= 64,
                "kBlockM is 8, 16, ..., 64");
  static_assert(kBKMajor || kRowTiles % 4 == 0,
                "B 'N' pairs 64 columns at a time: kRowTiles % 4 == 0");
  static_assert(Config::kThreads == Config::kWarps * 32, "32 threads a warp");

  float acc[kRowTiles][kColTiles][4];

  /// The accumulators as one flat list (splitKFixup moves them as such).
  static constexpr int kAccum = kRowTiles * kColTiles * 4;
  KGEN_DEVICE float get(int e) const {
    return acc[e / (kColTiles * 4)][e / 4 % kColTiles][e % 4];
  }
  KGEN_DEVICE void set(int e, float x) {
    acc[e / (kColTiles * 4)][e / 4 % kColTiles][e % 4] = x;
  }

  KGEN_DEVICE GemvWarp() {
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[r][j][e] = 0.f;
  }

  /// Column of C that atom row g of row tile r stands for (row g + 8: the
  /// next column), relative to the warp's first column.
  static KGEN_DEVICE int nBase(int r, int g) {
    return kBKMajor ? 16 * r + 2 * g : 64 * (r / 4) + 8 * g + 2 * (r % 4);
  }

  /// 16-byte runs a lane copies per chunk: B's, then A's.
  static constexpr int kRuns = kRunsB + kColTiles;
  /// Bytes of one ring slot (one chunk of every lane of the block).
  static constexpr int kSlotBytes = kRuns * Config::kThreads * 16;

  /// Copies this lane's runs of chunk kc (its first k) of B and A into the
  /// ring slot whose own part starts at `slot` (run i at i * kThreads * 16).
  static KGEN_DEVICE void copy(unsigned char *slot, const T *pb, long long ldb,
                               const T *pa, long long lda, int n0, int m0,
                               int kc, int sizeM, int sizeN, int sizeK, int g,
                               int t) {
    constexpr int kStride = Config::kThreads * 16;
    const int k = kc + 8 * t;
    if constexpr (kBKMajor) {
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n = n0 + nBase(r, g) + h;
          copyRun<Config::kVecB, kCheckB, false>(slot + (2 * r + h) * kStride,
                                                 pb + (long long)n * ldb + k,
                                                 pb, n < sizeN ? sizeK - k : 0);
        }
    } else {
#pragma unroll
      for (int grp = 0; grp < kRowTiles / 4; ++grp)
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const int n = n0 + 64 * grp + 8 * g;
          copyRun<Config::kVecB, kCheckB, false>(
              slot + (8 * grp + q) * kStride, pb + (long long)(k + q) * ldb + n,
              pb, k + q < sizeK ? sizeN - n : 0);
        }
    }
#pragma unroll
    for (int j = 0; j < kColTiles; ++j) {
      const int m = m0 + 8 * j + g;
      copyRun<Config::kVecA, kCheckA, true>(slot + (kRunsB + j) * kStride,
                                            pa + (long long)m * lda + k, pa,
                                            m < sizeM ? sizeK - k : 0);
    }
  }

  /// This lane's runs of the chunk in `slot`, back from the ring.
  static KGEN_DEVICE void read(const unsigned char *slot, Run8 (&b)[kRunsB],
                               Run8 (&a)[kColTiles]) {
    constexpr int kStride = Config::kThreads * 16;
#pragma unroll
    for (int i = 0; i < kRunsB; ++i)
      b[i] = *reinterpret_cast<const Run8 *>(slot + i * kStride);
#pragma unroll
    for (int j = 0; j < kColTiles; ++j)
      a[j] = *reinterpret_cast<const Run8 *>(slot + (kRunsB + j) * kStride);
  }

  /// The two k16 steps of one chunk.
  KGEN_DEVICE void step(const Run8 (&b)[kRunsB], const Run8 (&a)[kColTiles]) {
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
        uint32_t fa[4];
        if constexpr (kBKMajor) {
          // Rows nBase (a0, a2) and nBase + 1 (a1, a3); words 2s, 2s + 1
          // hold the step's k 8t+4s .. 8t+4s+3.
          fa[0] = b[2 * r].w[2 * s];
          fa[1] = b[2 * r + 1].w[2 * s];
          fa[2] = b[2 * r].w[2 * s + 1];
          fa[3] = b[2 * r + 1].w[2 * s + 1];
        } else {
          // Word r%4 of k row q holds columns nBase, nBase + 1; the step's
          // k rows are q = 4s .. 4s+3.
          const Run8 *rows = b + 8 * (r / 4) + 4 * s;
          const int i = r % 4;
          fa[0] = lowHalves(rows[0].w[i], rows[1].w[i]);
          fa[1] = highHalves(rows[0].w[i], rows[1].w[i]);
          fa[2] = lowHalves(rows[2].w[i], rows[3].w[i]);
          fa[3] = highHalves(rows[2].w[i], rows[3].w[i]);
        }
#pragma unroll
        for (int j = 0; j < kColTiles; ++j) {
          const uint32_t fb[2] = {a[j].w[2 * s], a[j].w[2 * s + 1]};
          sm80::mma16816<T>(acc[r][j], fa, fb);
        }
      }
  }

  /// d0, d2 (d1, d3) are columns nBase, nBase + 1 of row 2t (2t + 1) of the
  /// atom's 8 rows of C.
  KGEN_DEVICE void store(const Params &p, int batch, int m0, int n0, int g,
                         int t) const {
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float pair[2] = {acc[r][j][h], acc[r][j][h + 2]};
          epilogue<Config, 2>(p, batch, m0 + 8 * j + 2 * t + h,
                              n0 + nBase(r, g), pair);
        }
  }
};

/// The kernel body; the generated kernel forwards its Params. Launch:
/// grid (ceil(N / kBlockN), ceil(M / kBlockM), batch * kSplitK), kThreads
/// threads, kSmemBytes of dynamic shared memory (the ring, then split-K's
/// arrival flag).
template <class Config> KGEN_DEVICE void runGemv(const Params &p) {
  using Warp = GemvWarp<Config>;
  using T = typename Config::TypeA;
  constexpr int kChunk = 32, kStages = Config::kStages;
  constexpr int kSplitK = Config::kSplitK;
  static_assert(kStages >= 1, "kStages >= 1");
  static_assert(kSplitK >= 1, "kSplitK >= 1");
  static_assert(Config::kBlockN == Config::kWarps * Config::kRowTiles * 16,
                "kBlockN = kWarps * kRowTiles * 16");
  static_assert(kStages * Warp::kSlotBytes + (kSplitK > 1 ? 16 : 0) ==
                    Config::kSmemBytes,
                "kSmemBytes disagrees with the template's ring");

  // Launched overlapping the kernel before it (sm_90a): nothing is read or
  // written before that one has completed (gemm_sm90.h says why).
  waitForPreviousGrid();
  const int size_m = Config::kM ? Config::kM : p.m;
  const int size_n = Config::kN ? Config::kN : p.n;
  const int size_k = Config::kK ? Config::kK : p.k;
  const int batch = int(blockIdx.z / unsigned(kSplitK));
  const int split = int(blockIdx.z % unsigned(kSplitK));
  const T *const a = static_cast<const T *>(p.a) + batch * p.strideA;
  const T *const b = static_cast<const T *>(p.b) + batch * p.strideB;
  // Without kCheckK, K is a multiple of the chunk.
  const int chunks =
      Config::kCheckK ? (size_k + kChunk - 1) / kChunk : size_k / kChunk;
  int cBegin = 0, count = chunks;
  if constexpr (kSplitK > 1) {
    const int per = (chunks + kSplitK - 1) / kSplitK;
    cBegin = split * per;
    count = chunks - cBegin < per ? chunks - cBegin : per;
    count = count > 0 ? count : 0;
  }

  const int lane = int(threadIdx.x % 32u), g = lane / 4, t = lane % 4;
  const int m0 = int(blockIdx.y) * Config::kBlockM;
  const int n0 = int(blockIdx.x) * Config::kBlockN +
                 int(threadIdx.x / 32u) * Config::kRowTiles * 16;
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  unsigned char *const ring = kgen_smem + threadIdx.x * 16u;

  // One commit group per chunk, committed even when empty, so "chunk c has
  // landed" is always wait_group<kStages - 1>.
  auto issue = [&](int c, int slot) {
    if (c < count)
      Warp::copy(ring + slot * Warp::kSlotBytes, b, p.ldb, a, p.lda, n0, m0,
                 (cBegin + c) * kChunk, size_m, size_n, size_k, g, t);
    sm80::cpAsyncCommit();
  };
  // Not unrolled: kStages copies of the addressing would spill at M = 64.
#pragma unroll 1
  for (int s = 0; s < kStages; ++s)
    issue(s, s);
  Warp warp;
  int slot = 0;
  for (int c = 0; c < count; ++c) {
    sm80::cpAsyncWait<kStages - 1>();
    Run8 rb[Warp::kRunsB], ra[Warp::kColTiles];
    Warp::read(ring + slot * Warp::kSlotBytes, rb, ra);
    // The MMAs consume the slot's registers before the copy below refills
    // it (a lane's own bytes: program order is enough).
    warp.step(rb, ra);
    issue(c + kStages, slot);
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }

  if constexpr (kSplitK > 1) {
    const int tile =
        (batch * int(gridDim.y) + int(blockIdx.y)) * int(gridDim.x) +
        int(blockIdx.x);
    if (!splitKFixup<Config>(
            p, warp, tile, split,
            reinterpret_cast<int *>(kgen_smem + kStages * Warp::kSlotBytes)))
      return;
  }
  warp.store(p, batch, m0, n0, g, t);
}

} // namespace kgen::gemm
