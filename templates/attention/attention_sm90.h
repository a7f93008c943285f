//===- attention_sm90.h - Flash attention forward on sm_90a (wgmma) -*- C++
//-*-===//
//
// The FlashAttention-3 structure on Hopper: one block computes kBlockM query
// rows of one (batch, query head), warp-specialized:
//
//   warpgroup 0         the producer: one thread loads the Q tile once and
//                       then K and V tiles of kBlockN keys through TMA into
//                       a ring of kStages stages; K and V have their own
//                       barriers, so QK^T starts before V has landed;
//   warpgroups 1..kC    the consumers (1 to 3), 64 rows each: S = Q K^T with
//   wgmma
//                       (Q and K from shared memory, K-major), the online
//                       softmax on S's accumulators in registers, then
//                       O += P V with wgmma taking P from registers (its
//                       accumulator layout is wgmma's A-register layout once
//                       rounded to 16 bits) and V from shared memory
//                       (N-major), K and V stages released as soon as their
//                       wgmmas have completed.
//
// Q, K and V are read through 4-d tensor maps (dim, head, sequence, batch)
// built on the host from the call's strides, so BSHD and BHSD are again
// stride choices; boxes are 64 dims (one 128-byte swizzle row) wide, and a
// head dim of 128 is two boxes side by side. Rows past the sequence arrive as
// zeros. Masks, bias, ALiBi, the softmax, split-KV partials, the stores and
// LSE are attention.h's: wgmma's m64nN accumulators give each warp 16 rows
// in exactly the fragment layout of mma.sync m16n8, so WarpAttention's
// softmax and store run unchanged on them.
//
// Persistent grid (Config::kPersistent): min(work tiles, SMs) blocks, each
// walking work tiles of the order workTile gives (below): blockIdx.x first,
// then the next tile no block has claimed yet (an atomic counter,
// Params::tileCounter), or without the counter the static blockIdx.x +
// gridDim.x, ... . The producer goes on to the next work tile's K,
// Q and V as soon as their buffers free up, so those loads overlap the
// consumers' last P V and their epilogue (normalize, store O and LSE from
// registers); Q has its own "empty" barrier, released once a work tile's
// last S = Q K^T has completed.
//
// fp8 inputs (e4m3, e5m2; Config::T one byte, O bf16): a 128-byte row holds
// 128 dims, S = Q K^T runs wgmma m64nNk32 on the same swizzled rows, and P
// enters P V in the inputs' fp8 type, as FlashAttention-3's fp8 forward.
// fp8 wgmma reads its B operand K-major only, so P V reads V transposed:
// V's tile lands by TMA in a raw buffer of its stage, and warps 1..3 of
// the producer warpgroup (idle otherwise) transpose it in shared memory
// into V^T, a row of keys per head dim, with each 16-key group's keys
// permuted so that the fp32 S accumulators pack into wgmma's k32 A
// registers without a shuffle (transposeV, packP8 below), as
// FlashAttention-3 does. The descale factors scale the scores with the
// softmax scale and O with 1 / rowsum (WarpAttention::scoreScale, oScale).
//
// GQA packing (Config::kPackGqa, not persistent): a block's rows are the g
// = headsQ / headsKv query heads of one KV head, row r being query r / g of
// head hk * g + r % g (Block::queryOf, headOf); Q's box is then (dims, g
// heads, kBlockM / g queries), which lands in exactly that order, and each
// K/V tile serves all g heads (decode: one row per head).
//
// Not here (the dispatcher uses the tiled kernel for it): varlen. Not
// persistent: split-KV, GQA packing.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/attention/attention.h"
#include "kgen/common/wgmma_sm90.h"

namespace kgen::attention_sm90 {

using attention::Block;
using attention::Params;
using attention::RowWriter;
using attention::WarpAttention;
using sm90::TensorMap;

template <class Config> struct Shape {
  using T = typename Config::T;
  static constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN;
  static constexpr int kDqk = Config::kHeadDimQk, kDv = Config::kHeadDimV;
  static constexpr int kStages = Config::kStages;
  static constexpr int kConsumers = kBlockM / 64;
  static constexpr bool kFp8 = sizeof(T) == 1;
  static constexpr int kRowBytes = 128; ///< one swizzled row
  static constexpr int kRowElems = kRowBytes / int(sizeof(T)); ///< 64 or 128
  /// A tile of R rows and D dims is D / kRowElems column blocks of R
  /// swizzled rows. fp8's V tile is V^T: kDv rows of kBlockN (128) keys,
  /// and the stage holds V as loaded (kBlockN rows of kDv dims) after it.
  static constexpr int kQBytes = kBlockM * kDqk * int(sizeof(T));
  static constexpr int kKBytes = kBlockN * kDqk * int(sizeof(T));
  static constexpr int kVBytes = kBlockN * kDv * int(sizeof(T));
  static constexpr int kRawVBytes = kFp8 ? kVBytes : 0;
  /// wgmma k-steps: 32 bytes of K each (k16 of 16-bit types, k32 of fp8).
  static constexpr int kStepsS = kDqk * int(sizeof(T)) / 32;
  static constexpr int kStepsPv = kBlockN * int(sizeof(T)) / 32;
  static constexpr int kStageBytes = kKBytes + kVBytes + kRawVBytes;
  /// fp8: the producer warps that transpose V (transposeV).
  static constexpr int kTransposeWarps = 3;
  /// Q full, K full, V full, K empty, V empty (one per stage each); with
  /// the persistent grid Q empty and one word of two int slots (the work
  /// tile's index, Barriers::tileSlot); with fp8 raw V full (one per
  /// stage) and a stop flag per stage (Barriers::stop).
  static constexpr int kBarriers = 1 + 4 * kStages +
                                   (Config::kPersistent ? 2 : 0) +
                                   (kFp8 ? kStages + (kStages + 1) / 2 : 0);
  /// With Config::kStageO (no split-KV, and room left in shared memory),
  /// each consumer warp's slab of 16 rows of 64 values for the stores of O
  /// (storeStaged), after the barriers.
  static constexpr int kSlabOffset =
      kQBytes + kStages * kStageBytes + (8 * kBarriers + 15) / 16 * 16;
  static constexpr int kSlabBytes =
      Config::kStageO ? kConsumers * 4 * 16 * 64 * 2 : 0;
  /// 1024 bytes of slack to align the tiles to the swizzle's period.
  static constexpr int kSmemBytes = 1024 + kSlabOffset + kSlabBytes;
  static constexpr int kAccumS = kBlockN / 2, kAccumO = kDv / 2;

  static_assert(Config::kWgmma, "the wgmma loop's Config");
  static_assert(kBlockM % 64 == 0 && kConsumers >= 1 && kConsumers <= 3,
                "one to three consumer warpgroups of 64 rows");
  /// setmaxnreg: the producer keeps what its thread needs without spilling
  /// (the persistent grid's work-tile walk spilled 40-52 bytes at 24), the
  /// consumers share the rest of what the launch allocated, 168 a thread
  /// (64K over 384 threads, in multiples of 8) for two consumers, 128 for
  /// three: the producer 40 and each consumer 232 beside one or two
  /// consumers, 32 and 160 beside three. (A setmaxnreg.inc past the pool
  /// waits forever.)
  static constexpr int kProducerRegs = kConsumers == 3 ? 32 : 40;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 232;
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <=
                    (kConsumers + 1) *
                        (65536 / (128 * (kConsumers + 1)) / 8 * 8),
                "the register file holds the warpgroups' registers");
  static_assert(Config::kWarps == kConsumers * 4, "kWarps: consumer warps");
  static_assert(Config::kThreads == 128 * (kConsumers + 1),
                "consumers plus the producer warpgroup");
  static_assert(kSmemBytes == Config::kSmemBytes,
                "kSmemBytes disagrees with the template's smem layout");
  static_assert(kDqk % kRowElems == 0 && kDv % 64 == 0,
                "head dims are whole 128-byte swizzle rows");
  static_assert(!kFp8 || (kBlockN == kRowElems && kDv == 128),
                "fp8: V^T rows of 128 keys, 128 of them (attention.cpp)");
  static_assert(kBlockN % 64 == 0 && kBlockN <= 256 && kDv <= 256,
                "wgmma N (kBlockN for S, kDv for O) is 64..256");
  static_assert(!Config::kPersistent || !Config::kPackGqa,
                "GQA packing takes the one-block-per-row-block grid");
  static_assert(!Config::kVarlen && !Config::kPreloadV,
                "varlen, GQA packing and preloaded V are the tiled loop's");
  static_assert(!Config::kPersistent || Config::kSplits == 1,
                "split-KV keeps one block per (row block, head, split)");
  static_assert(!Config::kStageO || Config::kSplits == 1,
                "split-KV writes fp32 partials, not O");
};

/// The mbarriers, in shared memory after the tiles.
template <class Config> struct Barriers {
  using S = Shape<Config>;
  uint64_t *qFull, *kFull, *vFull, *kEmpty, *vEmpty, *qEmpty, *rawVFull;
  /// Persistent grid: the work tile's index for the consumers, two slots
  /// (work tiles w and w + 1 may be in flight together). The producer
  /// writes slot w % 2 before its arrival on qFull for tile w, which the
  /// consumers wait for before they read it; -1 ends the walk. (Derived,
  /// not stored: one more pointer live across the consumers' loop made
  /// ptxas spill.)
  KGEN_DEVICE int *tileSlot() const {
    return reinterpret_cast<int *>(qEmpty + 1);
  }
  /// fp8: one int flag per stage, zero until the producer sets the one of
  /// its last ring position before its arrival on that stage's rawVFull
  /// (stopTransposing): the transposing warps read it after that barrier
  /// (as the consumers read tileSlot), so no read races the write.
  KGEN_DEVICE int *stop() const {
    return reinterpret_cast<int *>(rawVFull + S::kStages);
  }
  KGEN_DEVICE explicit Barriers(uint64_t *bars)
      : qFull(bars), kFull(bars + 1), vFull(kFull + S::kStages),
        kEmpty(vFull + S::kStages), vEmpty(kEmpty + S::kStages),
        qEmpty(vEmpty + S::kStages),
        rawVFull(qEmpty + (Config::kPersistent ? 2 : 0)) {}
};

/// Where a block's work stands in the barriers' phases. Every mbarrier
/// wait names the parity of the phase it waits for, and a phase can only
/// be told from the one two phases later by counting, so both sides count
/// across work tiles instead of restarting at zero per tile (a per-tile
/// restart would, on the second tile, wait for parity 0 of a stage whose
/// phase 0 completed long ago and read a stale tile):
///   ring  key tiles this block has moved through the K/V stages before
///         this work tile; key tile it of the work tile uses stage
///         (ring + it) % kStages in phase ((ring + it) / kStages) & 1,
///   work  work tiles this block did before this one; Q's full barrier
///         completes phase `work` for this tile (parity work & 1), and its
///         empty barrier (persistent only) completes phase `work` when the
///         consumers have issued and finished their last S of the tile.
/// The producer and the consumers walk the same work tiles and derive the
/// same key-tile counts from them, so their counters agree.
struct Progress {
  int ring = 0;
  int work = 0;
};

/// The producer's single thread for one work tile: Q (its box from query
/// q0 of head h), then K and V of every key tile (KV head hk). With the
/// persistent grid Q waits for the previous work tile's consumers to release
/// it, and goes after the first K: at a work tile's boundary that K stage frees
/// first (once S of key tile n - kStages is done), Q next (once the last S is
/// done), V last (once its P V is done).
template <class Config>
KGEN_DEVICE void produce(unsigned char *smem, const Barriers<Config> &bar,
                         const TensorMap &mapQ, const TensorMap &mapK,
                         const TensorMap &mapV, int q0, int h, int hk, int b,
                         int tile0, int tiles, const Progress &at) {
  using S = Shape<Config>;
  unsigned char *sQ = smem, *sKV = smem + S::kQBytes;
  auto loadQ = [&] {
    if constexpr (Config::kPersistent) // the phase of the previous work tile
      sm90::barrierWait(bar.qEmpty, uint32_t(at.work & 1) ^ 1u);
    sm90::barrierArriveExpectTx(bar.qFull, S::kQBytes);
#pragma unroll
    for (int c = 0; c < S::kDqk / S::kRowElems; ++c)
      sm90::tmaLoad4d(sQ + c * S::kBlockM * S::kRowBytes, &mapQ, bar.qFull,
                      c * S::kRowElems, h, q0, b);
  };
  if (!Config::kPersistent || tiles == 0)
    loadQ();
  int stage = at.ring % S::kStages;
  uint32_t phase = uint32_t(at.ring / S::kStages) & 1u;
  for (int it = 0; it < tiles; ++it) {
    const int n0 = (tile0 + it) * S::kBlockN;
    unsigned char *sK = sKV + stage * S::kStageBytes, *sV = sK + S::kKBytes;
    // A stage's empty barrier completes its phase k when the consumers
    // release its k-th use; the (k+1)-th load (phase bit `phase` of the
    // full barrier) waits for that, parity phase ^ 1 (the first loads pass
    // at once: a fresh barrier counts as having completed parity 1).
    sm90::barrierWait(&bar.kEmpty[stage], phase ^ 1);
    sm90::barrierArriveExpectTx(&bar.kFull[stage], S::kKBytes);
#pragma unroll
    for (int c = 0; c < S::kDqk / S::kRowElems; ++c)
      sm90::tmaLoad4d(sK + c * S::kBlockN * S::kRowBytes, &mapK,
                      &bar.kFull[stage], c * S::kRowElems, hk, n0, b);
    if (Config::kPersistent && it == 0)
      loadQ();
    sm90::barrierWait(&bar.vEmpty[stage], phase ^ 1);
    if constexpr (S::kFp8) { // into the raw buffer, one box (transposeV)
      sm90::barrierArriveExpectTx(&bar.rawVFull[stage], S::kVBytes);
      sm90::tmaLoad4d(sV + S::kVBytes, &mapV, &bar.rawVFull[stage], 0, hk, n0,
                      b);
    } else {
      sm90::barrierArriveExpectTx(&bar.vFull[stage], S::kVBytes);
#pragma unroll
      for (int c = 0; c < S::kDv / 64; ++c)
        sm90::tmaLoad4d(sV + c * S::kBlockN * S::kRowBytes, &mapV,
                        &bar.vFull[stage], c * 64, hk, n0, b);
    }
    if (++stage == S::kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
}

/// WarpAttention::store through the warp's shared-memory slab of 16 rows
/// of 64 values (2 KB). Stored from the fragments, a warp store writes 4
/// bytes of each of 8 rows; gathered in the slab (16-byte chunks
/// XOR-swizzled by row, so neither side conflicts on a bank), a warp store
/// writes 128 contiguous bytes of each of 4 rows. O's rows are 16-byte
/// aligned (the runtime checks the pointer and the strides).
template <class Config>
KGEN_DEVICE void
storeStaged(const WarpAttention<Config> &wa, const RowWriter<Config> &w,
            const Block<Config> &blk, int m0, typename Config::TO *slab) {
  using S = Shape<Config>;
  using T = typename Config::TO;
  const int lane = wa.lane, g = lane / 4, t = lane % 4;
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float lse;
    wa.finishRow(0, r, inv[r], lse);
    const int row = m0 + wa.row0 + 8 * r + g;
    if (t == 0 && row < blk.rows)
      w.row(row).lse(lse);
  }
  // The rows this lane writes to O: 4 apart, 16-byte chunk lane % 8.
  long long at[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = m0 + wa.row0 + 4 * i + lane / 8;
    at[i] = row < blk.rows ? blk.oRow(row) : -1;
  }
#pragma unroll
  for (int c0 = 0; c0 < S::kDv; c0 += 64) {
    __syncwarp(); // the last block's reads are done
#pragma unroll
    for (int d = 0; d < 8; ++d)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<uint32_t *>(slab + (g + 8 * r) * 64 + (d ^ g) * 8 +
                                      2 * t) =
            sm80::pack2<T>(wa.o[0][c0 / 8 + d][2 * r] * inv[r],
                           wa.o[0][c0 / 8 + d][2 * r + 1] * inv[r]);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int rr = 4 * i + lane / 8, c = lane % 8;
      const Bytes<16> v = *reinterpret_cast<const Bytes<16> *>(
          slab + rr * 64 + (c ^ (rr % 8)) * 8);
      if (at[i] >= 0)
        *reinterpret_cast<Bytes<16> *>(blk.o + at[i] + c0 + c * 8) = v;
    }
  }
}

/// V^T's key order: wgmma's k32 A registers give thread t of a quad the
/// positions 4t..4t+3 (and 16 + 4t..) of a 32-key slice, and its S
/// accumulators hold keys 2t, 2t + 1 of each 8-key block, so position
/// 4t + e of each 16-key group holds key 2t + (e & 1) + 8 (e >> 1): P packs
/// from S in place (packP8) and transposeV moves V's keys to match.
///
/// P (S's m64n128 accumulators after the softmax) as P V's k32 fp8 A
/// registers: slice j's registers are (row g, positions 4t..), (row g + 8,
/// 4t..), (g, 16 + 4t..), (g + 8, 16 + 4t..) -- 8-key blocks 4j..4j+3 of S,
/// whose accumulators are (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
template <class T, int kAccum, int kSteps>
KGEN_DEVICE void packP8(const float (&s)[kAccum], uint32_t (&a)[kSteps][4]) {
  static_assert(kAccum == 16 * kSteps, "32 keys a k32 step");
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const float *x = s + 16 * j;
    a[j][0] = sm90::packFp8x4<T>(x[0], x[1], x[4], x[5]);
    a[j][1] = sm90::packFp8x4<T>(x[2], x[3], x[6], x[7]);
    a[j][2] = sm90::packFp8x4<T>(x[8], x[9], x[12], x[13]);
    a[j][3] = sm90::packFp8x4<T>(x[10], x[11], x[14], x[15]);
  }
}

/// fp8: warps 1..3 of the producer warpgroup turn each V tile, as it
/// lands in its stage's raw buffer ([key][dim] rows), into V^T ([dim][key]
/// rows, each 16-key group's keys in the order above), then arrive on the
/// stage's V full barrier (one arrival per warp), until a stage says stop.
/// A unit is 16 keys by 32 dims: ldmatrix .trans gives lane (g, t) =
/// (lane / 4, lane % 4) the dims 2g, 2g + 1 of keys 2t, 2t + 1 (r0; r1 the
/// keys 8 further; r2, r3 the next 16 dims), two byte permutes make the
/// words of dim 2g and 2g + 1 holding keys 2t, 2t + 1, 2t + 8, 2t + 9 --
/// positions 4t .. 4t + 3 of the group -- and stmatrix writes them as rows
/// of V^T. Lanes 16..31 put the odd dim's word in the first matrix, so that
/// each matrix's 8 rows (dims) meet the 128-byte swizzle in 8 different
/// 16-byte chunks: neither side conflicts on a bank.
template <class Config>
KGEN_DEVICE void transposeV(unsigned char *smem, const Barriers<Config> &bar) {
  using S = Shape<Config>;
  static_assert(S::kFp8 && S::kBlockN == 128 && S::kDv == 128,
                "fp8: 128 keys of 128 dims a tile");
  const int warp = int(threadIdx.x / 32u) - 1, lane = int(threadIdx.x % 32u);
  const int i = lane / 8, j = lane % 8; // the row of a matrix this lane names
  const int ldKey = 8 * (i & 1) + j, ldChunk = i >> 1;
  const int stDim = 16 * (i >> 1) + 2 * j + ((i & 1) ^ (j >> 2));
  const bool odd = lane >= 16;
  const uint32_t sel0 = odd ? 0x7531u : 0x6420u, sel1 = odd ? 0x6420u : 0x7531u;
  const uint32_t tiles = sm90::smemAddress(smem + S::kQBytes);
  int stage = 0;
  uint32_t phase = 0;
  for (;;) {
    sm90::barrierWait(&bar.rawVFull[stage], phase);
    if (*static_cast<volatile int *>(&bar.stop()[stage]))
      break;
    const uint32_t vt = tiles + stage * S::kStageBytes + S::kKBytes,
                   raw = vt + S::kVBytes;
    for (int u = warp; u < 32; u += S::kTransposeWarps) {
      const int group = u % 8, pair = u / 8; // keys 16 group.., dims 32 pair..
      const int key = 16 * group + ldKey, chunk = 2 * pair + ldChunk;
      uint32_t r[4];
      sm80::ldmatrixX4<true>(r, raw + key * 128 + ((chunk ^ (key & 7)) << 4));
      const int dim = 32 * pair + stDim;
      sm90::stmatrixX4(
          vt + dim * 128 + ((group ^ (dim & 7)) << 4),
          __byte_perm(r[0], r[1], sel0), __byte_perm(r[0], r[1], sel1),
          __byte_perm(r[2], r[3], sel0), __byte_perm(r[2], r[3], sel1));
    }
    sm90::fenceProxyAsync(); // V^T, for the consumers' wgmmas
    __syncwarp();
    if (lane == 0)
      sm90::barrierArrive(&bar.vFull[stage]);
    if (++stage == S::kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
}

/// fp8: the producer's end, after its last loads, at ring position `ring`:
/// once that position's stage is free (as a load waits for it), its stop
/// flag says so and its raw V barrier completes the phase without a load.
template <class Config>
KGEN_DEVICE void stopTransposing(const Barriers<Config> &bar, int ring) {
  using S = Shape<Config>;
  if constexpr (S::kFp8) {
    const int stage = ring % S::kStages;
    sm90::barrierWait(&bar.vEmpty[stage],
                      (uint32_t(ring / S::kStages) & 1u) ^ 1u);
    bar.stop()[stage] = 1;
    sm90::barrierArrive(&bar.rawVFull[stage]);
  }
}

/// One consumer warpgroup: its 64 rows against every key tile, with the
/// softmax of tile j overlapping the tensor cores' P V of tile j - 1
/// (FlashAttention-3's intra-warpgroup pipelining): per step, S_j = Q K_j^T
/// and O += P_{j-1} V_{j-1} are issued together, S_j is waited for and
/// turned into P_j while P V still runs, and once P V is done O is rescaled
/// and P_j packed into the A registers P V read. Between warpgroups, the
/// issues take turns (ping-pong, below).
template <class Config>
KGEN_DEVICE void consume(unsigned char *smem, const Barriers<Config> &bar,
                         const Params &p, const Block<Config> &blk, int m0,
                         int tile0, int tiles, const Progress &at) {
  using S = Shape<Config>;
  using T = typename S::T;
  using W = WarpAttention<Config>;
  uint64_t *kFull = bar.kFull, *vFull = bar.vFull, *kEmpty = bar.kEmpty,
           *vEmpty = bar.vEmpty;
  // Lane 0's consumer index: warp-uniform to the compiler, so Q's address
  // and descriptors live in uniform registers, which wgmma reads.
  const int consumer = __shfl_sync(0xffffffffu, int(threadIdx.x / 128u) - 1, 0);
  const int warp = int(threadIdx.x / 32u) - 4, lane = int(threadIdx.x % 32u);
  const bool warpLeader = lane == 0;
  const unsigned char *sQ = smem + consumer * 64 * S::kRowBytes;
  const unsigned char *sKV = smem + S::kQBytes;

  // WarpAttention's row statistics, O (16 rows per warp: kFragsM = 1) and
  // its softmax/store; S and O are the wgmma accumulators themselves.
  static_assert(W::kFragsM == 1 && W::kFragsN * 4 == S::kAccumS &&
                    W::kFragsD * 4 == S::kAccumO,
                "wgmma's m64nN accumulators are WarpAttention's fragments");
  W wa;
  wa.init(0, warp, lane);
  float(&o)[S::kAccumO] = reinterpret_cast<float(&)[S::kAccumO]>(wa.o);
  using MmaS = sm90::Wgmma<T, S::kBlockN, false>;
  // fp8 wgmma reads B K-major only: V^T (transposeV).
  using MmaO = sm90::WgmmaRs<T, S::kDv, !S::kFp8>;
  if constexpr (S::kFp8) {
    if (p.qDescale)
      wa.scoreScale = *p.qDescale;
    if (p.kDescale)
      wa.scoreScale *= *p.kDescale;
    if (p.vDescale)
      wa.oScale = *p.vDescale;
  }

  float s[S::kAccumS];
  // P of the previous tile, as P V's A registers: 16-key slices packed in
  // pairs exactly as W::pv packs them for mma.sync (fp8: 32-key slices,
  // packP8).
  uint32_t a[S::kStepsPv][4];
  // S = Q K^T: 4 k-steps per 128-byte column block.
  // Each k-step's descriptors are the tile's moved (descriptorAt).
  const uint64_t dQ = sm90::matrixDescriptor(sQ, 16, 1024);
  auto issueScores = [&](const unsigned char *sK) {
    const uint64_t dK = sm90::matrixDescriptor(sK, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < S::kStepsS; ++kk) {
      const int c = kk / 4, step = kk % 4;
      MmaS::run(
          s, sm90::descriptorAt(dQ, c * S::kBlockM * S::kRowBytes + step * 32),
          sm90::descriptorAt(dK, c * S::kBlockN * S::kRowBytes + step * 32),
          kk > 0);
    }
    sm90::wgmmaCommit();
  };
  // O += P V: V's k16 steps are 16 swizzled rows (2048 bytes) apart, its
  // 64-dim column blocks kBlockN rows apart (the descriptor's leading
  // offset).
  // fp8: V^T's kDv rows of 128 keys, K-major as K is for S (32 bytes a
  // k-step).
  auto issuePv = [&](const unsigned char *sV) {
    const uint64_t dV = sm90::matrixDescriptor(
        sV, S::kFp8 ? 16 : S::kBlockN * S::kRowBytes, 1024);
#pragma unroll
    for (int kc = 0; kc < S::kStepsPv; ++kc)
      MmaO::run(o, a[kc], sm90::descriptorAt(dV, kc * (S::kFp8 ? 32 : 2048)),
                1);
    sm90::wgmmaCommit();
  };
  // S -> P (log2 domain, masks, running max and sum); O's rescale factors
  // go to alpha, and whether O needs them (warp-uniform) is returned.
  auto toProbabilities = [&](int it, float (&alpha)[1][2]) {
    const int n0 = (tile0 + it) * S::kBlockN;
    return wa.probabilities(p, blk, m0, n0, blk.tileMasked(p, m0, n0),
                            reinterpret_cast<float(&)[1][W::kFragsN][4]>(s),
                            alpha);
  };
  // P into P V's A registers. wgmma reads them asynchronously: never while
  // a P V that uses them is still running.
  auto packP = [&] {
    if constexpr (S::kFp8)
      packP8<T>(s, a);
    else
#pragma unroll
      for (int kc = 0; kc < S::kStepsPv; ++kc)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          a[kc][e] = W::pack(s[8 * kc + 2 * e], s[8 * kc + 2 * e + 1]);
  };
  // Ping-pong between the consumer warpgroups (FlashAttention-3): each
  // issues its wgmmas only after the previous one (cyclically) has issued
  // its own, so one warpgroup's softmax runs while the other's matrix work
  // has the tensor cores. Barrier 1 + c is consumer c's turn; the last
  // consumer opens the first turn, and skips its final hand-over so every
  // barrier sees as many arrivals as syncs. The persistent grid keeps one
  // chain of turns across its work tiles (every consumer takes as many
  // turns in each), opened and closed by runPersistent: per tile, the
  // next tile's first turn would wait for the last consumer's epilogue.
  const int steps = tiles > 0 ? tiles + 1 : 0; // S_0, then one per tile
  int step = 0;
  auto turnBegin = [&] {
    if constexpr (S::kConsumers > 1)
      sm90::namedBarrierSync<256>(1 + consumer);
  };
  auto turnEnd = [&] {
    if constexpr (S::kConsumers > 1) {
      ++step;
      if (Config::kPersistent ||
          !(consumer == S::kConsumers - 1 && step == steps))
        sm90::namedBarrierArrive<256>(1 + (consumer + 1) % S::kConsumers);
    }
  };
  if constexpr (S::kConsumers > 1 && !Config::kPersistent) {
    if (consumer == S::kConsumers - 1 && steps > 0)
      sm90::namedBarrierArrive<256>(1);
  }
  auto stageOf = [&](int it) { return (at.ring + it) % S::kStages; };
  auto phaseOf = [&](int it) {
    return uint32_t((at.ring + it) / S::kStages) & 1u;
  };
  auto kTile = [&](int it) { return sKV + stageOf(it) * S::kStageBytes; };
  // Persistent: Q may be overwritten by the next work tile once this
  // warp's last S (the only reader of Q) has completed; one arrival per
  // consumer warp, as for the K/V stages.
  auto releaseQ = [&] {
    if constexpr (Config::kPersistent)
      if (warpLeader)
        sm90::barrierArrive(bar.qEmpty);
  };

  sm90::barrierWait(bar.qFull, uint32_t(at.work & 1));
  if (tiles == 0)
    releaseQ();
  if (tiles > 0) {
    // Tile 0: S alone.
    sm90::barrierWait(&kFull[stageOf(0)], phaseOf(0));
    turnBegin();
    sm90::wgmmaFence();
    issueScores(kTile(0));
    turnEnd();
    sm90::wgmmaWait<0>();
    sm90::fenceAccumulators(s);
    if (warpLeader)
      sm90::barrierArrive(&kEmpty[stageOf(0)]);
    if (tiles == 1)
      releaseQ();
    float alpha[1][2];
    toProbabilities(0, alpha); // O is still zero: no rescale
    packP();
  }
  for (int it = 1; it < tiles; ++it) {
    const int prev = it - 1;
    sm90::barrierWait(&kFull[stageOf(it)], phaseOf(it));
    sm90::barrierWait(&vFull[stageOf(prev)], phaseOf(prev));
    sm90::fenceAccumulators(o);
    turnBegin();
    sm90::wgmmaFence();
    issueScores(kTile(it));
    issuePv(kTile(prev) + S::kKBytes);
    turnEnd();
    sm90::wgmmaWait<1>(); // S_it has landed; P V of prev still runs
    sm90::fenceAccumulators(s);
    if (warpLeader)
      sm90::barrierArrive(&kEmpty[stageOf(it)]);
    if (it == tiles - 1)
      releaseQ();
    float alpha[1][2];
    const bool rescale = toProbabilities(it, alpha);
    sm90::wgmmaWait<0>();
    sm90::fenceAccumulators(o);
    if (warpLeader)
      sm90::barrierArrive(&vEmpty[stageOf(prev)]);
    if (rescale)
      wa.rescale(alpha);
    packP();
  }
  if (tiles > 0) {
    const int last = tiles - 1;
    sm90::barrierWait(&vFull[stageOf(last)], phaseOf(last));
    sm90::fenceAccumulators(o);
    turnBegin();
    sm90::wgmmaFence();
    issuePv(kTile(last) + S::kKBytes);
    turnEnd();
    sm90::wgmmaWait<0>();
    sm90::fenceAccumulators(o);
    if (warpLeader)
      sm90::barrierArrive(&vEmpty[stageOf(last)]);
  }
  if constexpr (Config::kStageO)
    storeStaged<Config>(
        wa, RowWriter<Config>(p, blk), blk, m0,
        reinterpret_cast<typename Config::TO *>(smem + S::kSlabOffset) +
            warp * 16 * 64);
  else
    wa.store(RowWriter<Config>(p, blk), blk, m0);
}

/// Both kernels' set-up: the aligned shared memory (into smem) and the
/// initialized barriers (returned).
template <class Config> KGEN_DEVICE uint64_t *setUp(unsigned char *&smem) {
  using S = Shape<Config>;
  // Tiles start on a 1024-byte boundary, the period of the 128-byte
  // swizzle, so TMA and wgmma agree on the pattern.
  extern __shared__ __align__(1024) unsigned char smemRaw[];
  smem = smemRaw + ((1024 - (sm90::smemAddress(smemRaw) & 1023)) & 1023);
  uint64_t *bars = reinterpret_cast<uint64_t *>(smem + S::kQBytes +
                                                S::kStages * S::kStageBytes);
  if (threadIdx.x == 0) {
    const Barriers<Config> bar(bars);
    sm90::barrierInit(bar.qFull, 1);
    for (int s = 0; s < S::kStages; ++s) {
      sm90::barrierInit(&bar.kFull[s], 1);
      // fp8: one arrival per transposing warp (transposeV).
      sm90::barrierInit(&bar.vFull[s], S::kFp8 ? S::kTransposeWarps : 1);
      sm90::barrierInit(&bar.kEmpty[s], S::kConsumers * 4); // one per warp
      sm90::barrierInit(&bar.vEmpty[s], S::kConsumers * 4);
    }
    if constexpr (Config::kPersistent)
      sm90::barrierInit(bar.qEmpty, S::kConsumers * 4);
    if constexpr (S::kFp8)
      for (int s = 0; s < S::kStages; ++s) {
        sm90::barrierInit(&bar.rawVFull[s], 1);
        bar.stop()[s] = 0;
      }
    sm90::fenceBarrierInit();
  }
  __syncthreads();
  return bars;
}

/// The main kernel's body. Launch: grid (ceil(seqlenQ / kBlockM), headsQ *
/// kSplits, batch), kThreads threads, kSmemBytes of dynamic shared memory.
template <class Config>
KGEN_DEVICE void run(const TensorMap &mapQ, const TensorMap &mapK,
                     const TensorMap &mapV, const Params &p) {
  static_assert(!Config::kPersistent, "the persistent grid's is runPersistent");
  // Launched overlapping the kernel before it: the block's set-up (its
  // rows, key tiles and barriers) reads nothing that kernel writes, so it
  // runs before the wait -- but with varlen, Block::init reads the
  // sequence offsets (and so does the combine kernel before its own wait:
  // it may start only once this one has waited).
  if constexpr (Config::kVarlen)
    waitForPreviousGrid();
  if constexpr (Config::kSplits > 1) // the combine kernel may launch
    allowNextGrid();
  // Blocks start in the order of blockIdx.x; causal row blocks see more
  // keys the later they are, so they go from the last to the first (the
  // longest first: the grid's tail is then the short ones).
  const int mBlock = Config::kCausal ? int(gridDim.x - 1 - blockIdx.x)
                                     : int(blockIdx.x);
  Block<Config> blk;
  if (!blk.init(p, mBlock, int(blockIdx.y), int(blockIdx.z)))
    return;
  const int m0 = mBlock * Config::kBlockM;
  int tile0, tiles;
  blk.keyTiles(p, m0, tile0, tiles);

  unsigned char *smem;
  const Barriers<Config> bar(setUp<Config>(smem));
  if constexpr (!Config::kVarlen)
    waitForPreviousGrid();
  const Progress start;
  if (threadIdx.x < 128) {
    sm90::setMaxRegsDec<Shape<Config>::kProducerRegs>();
    if (threadIdx.x == 0) {
      const int g = p.headsQ / p.headsKv;
      // Q's box starts at query m0, or with GQA packing (rows of the g
      // heads of KV head h / g, kBlockM a multiple of g) at query m0 / g.
      produce<Config>(smem, bar, mapQ, mapK, mapV,
                      Config::kPackGqa ? m0 / g : m0, blk.h, blk.h / g, blk.b,
                      tile0, tiles, start);
      stopTransposing(bar, tiles);
    } else if constexpr (Shape<Config>::kFp8) {
      if (threadIdx.x >= 32) // warps 1..3
        transposeV<Config>(smem, bar);
    }
  } else {
    sm90::setMaxRegsInc<Shape<Config>::kConsumerRegs>();
    consume<Config>(smem, bar, p, blk, m0, tile0, tiles, start);
  }
}

/// Work tile t of the persistent grid's static schedule: batch entries one
/// after another, and within one, the row blocks from the one with the
/// most work to the one with the least (causal: the last row block sees
/// the most keys, so they run in reverse), every query head of a row block
/// next to each other. A batch entry's K and V (all its heads) stay in L2
/// while its tiles run, GQA's heads of one KV head run side by side, and
/// since the grid is not a multiple of a batch entry's tiles in general,
/// block i's tiles i, i + grid, ... drift through the row blocks instead of
/// always drawing the longest or the shortest causal ones.
struct WorkTile {
  int mBlock, h, b;
};

template <class Config> KGEN_DEVICE WorkTile workTile(const Params &p, int t) {
  const int mBlocks = (p.seqlenQ + Config::kBlockM - 1) / Config::kBlockM;
  const int perBatch = mBlocks * p.headsQ;
  WorkTile w;
  w.b = t / perBatch;
  const int r = t - w.b * perBatch;
  const int m = r / p.headsQ;
  w.h = r - m * p.headsQ;
  w.mBlock = Config::kCausal ? mBlocks - 1 - m : m;
  return w;
}

/// The persistent kernel's body. Launch: grid min(p.tiles, SMs), kThreads
/// threads, kSmemBytes of dynamic shared memory.
template <class Config>
KGEN_DEVICE void runPersistent(const TensorMap &mapQ, const TensorMap &mapK,
                               const TensorMap &mapV, const Params &p) {
  static_assert(Config::kPersistent, "the one-block-per-tile grid's is run");
  unsigned char *smem;
  const Barriers<Config> bar(setUp<Config>(smem));
  waitForPreviousGrid(); // launched overlapping the kernel before it
  const bool dynamic = p.tileCounter != nullptr;
  // One work tile: its row block, key tiles and barrier progress.
  auto step = [&](int t, Progress &at, auto &&work) {
    const WorkTile w = workTile<Config>(p, t);
    Block<Config> blk;
    blk.init(p, w.mBlock, w.h, w.b); // every scheduled row block exists
    const int m0 = w.mBlock * Config::kBlockM;
    int tile0, tiles;
    blk.keyTiles(p, m0, tile0, tiles);
    work(blk, m0, tile0, tiles, at);
    at.ring += tiles;
    ++at.work;
  };
  if (threadIdx.x < 128) {
    sm90::setMaxRegsDec<Shape<Config>::kProducerRegs>();
    if (threadIdx.x == 0) {
      const int g = p.headsQ / p.headsKv;
      auto work = [&](const Block<Config> &blk, int m0, int tile0, int tiles,
                      const Progress &at) {
        produce<Config>(smem, bar, mapQ, mapK, mapV, m0, blk.h, blk.h / g,
                        blk.b, tile0, tiles, at);
      };
      // Dynamic schedule: the first round is blockIdx.x; after it a block
      // takes the next unclaimed work tile when it starts one (claimed a
      // tile ahead, so the atomic's round trip hides behind this tile's
      // loads). The static round-robin left the longest causal tiles piled
      // on some blocks (a model of the tile costs: 71% balance at 16 x 16
      // heads of S 1024 in 128x128 tiles). One call site of step: each
      // inlines the whole loop body.
      Progress at;
      int t = int(blockIdx.x); // < p.tiles: the grid is min(tiles, SMs)
      while (t < p.tiles) {
        const int next =
            dynamic ? int(gridDim.x) + int(atomicAdd(p.tileCounter, 1u))
                    : t + int(gridDim.x);
        if (dynamic)
          bar.tileSlot()[at.work & 1] = t;
        step(t, at, work);
        t = next;
      }
      stopTransposing(bar, at.ring);
      if (dynamic) {
        // The end: once Q's previous use is released (as loadQ waits), the
        // slot says so and Q's full barrier completes without a load.
        sm90::barrierWait(bar.qEmpty, uint32_t(at.work & 1) ^ 1u);
        bar.tileSlot()[at.work & 1] = -1;
        sm90::barrierArrive(bar.qFull);
        // The last block to stop claiming puts both counters back to zero
        // for the next launch; every claim of the others came before their
        // count (the fence).
        __threadfence();
        if (atomicAdd(p.tileCounter + 1, 1u) == gridDim.x - 1u) {
          p.tileCounter[0] = 0u;
          p.tileCounter[1] = 0u;
        }
      }
    } else if constexpr (Shape<Config>::kFp8) {
      if (threadIdx.x >= 32) // warps 1..3
        transposeV<Config>(smem, bar);
    }
  } else {
    using S = Shape<Config>;
    sm90::setMaxRegsInc<S::kConsumerRegs>();
    // The chain of ping-pong turns over all work tiles: the last consumer
    // opens consumer 0's first turn, every turn hands over, and consumer
    // 0 takes the last consumer's final hand-over once it is done, so each
    // named barrier sees as many arrivals as syncs (also with no turn at
    // all: a block without work tiles, or tiles without keys).
    const int consumer = int(threadIdx.x / 128u) - 1;
    if constexpr (S::kConsumers > 1)
      if (consumer == S::kConsumers - 1)
        sm90::namedBarrierArrive<256>(1);
    auto work = [&](const Block<Config> &blk, int m0, int tile0, int tiles,
                    const Progress &at) {
      consume<Config>(smem, bar, p, blk, m0, tile0, tiles, at);
    };
    Progress at;
    for (int t = int(blockIdx.x);; t += int(gridDim.x)) {
      if (dynamic) {
        // The producer's choice. consume() waits for this phase again: it
        // has completed, so that returns at once.
        sm90::barrierWait(bar.qFull, uint32_t(at.work & 1));
        // Each warp's leader reads the slot and hands it to its lanes: the
        // producer may write this slot again (two work tiles on) once the
        // leaders have released Q, so the reader is the thread whose
        // arrival orders the read. (Every lane reading, then __syncwarp
        // before the leader's arrival, left racecheck reporting the reads
        // against the rewrite with one consumer warpgroup, 2026-12-07.)
        int slot = 0;
        if ((threadIdx.x & 31u) == 0u)
          slot = *static_cast<volatile int *>(&bar.tileSlot()[at.work & 1]);
        t = __shfl_sync(0xffffffffu, slot, 0);
        if (t < 0)
          break;
      } else if (t >= p.tiles) {
        break;
      }
      step(t, at, work);
    }
    if constexpr (S::kConsumers > 1)
      if (consumer == 0)
        sm90::namedBarrierSync<256>(1);
  }
}

} // namespace kgen::attention_sm90
