//===- mlstm_sm90.h - mLSTM fused chunkwise forward on sm_90a (wgmma) -*- C++
//-*-===//
//
// The fused chunkwise kernel of mlstm.h (one block per head and DV slice,
// walking the chunks with the state on chip) with its four products on
// wgmma: chunk 64, a slice of 128 DV columns, 12 warps in three
// warpgroups with their own roles. Warpgroups 0 and 1 hold the state and
// run its update (stateStep); warpgroup 2 computes h (outputStep). Each
// chunk's update then overlaps the same chunk's outputs, which a block of
// two warpgroups sharing every product ran one after the other (clock64
// traces and times in bench/results, 2026-11-24).
//
//   S = Q K^T   the output warpgroup, 64 x 64 (m64n72, Q and K K-major
//               from shared memory; K's 8 extra rows hold n's two 16-bit
//               parts, so q_t . n comes out in columns 64 and 65); the
//               decay and mask on the accumulators, then P stays in
//               registers as P V's A operand (wgmma's accumulator layout is
//               its A-register layout once rounded to 16 bits, as in
//               FlashAttention-3).
//   num = Q C + P V
//               the output warpgroup, the slice's 128 columns (m64n128): Q
//               times the 16-bit copy of C^{k-1} (Cp, N-major), the rows
//               scaled by exp(b_t + m^{k-1} - m^comb_t) s, then P V (V
//               N-major); h = num / denominator from the registers, out
//               through shared memory by stmatrix and a TMA store.
//   C = decay C + K^T diag(w) V
//               C's fp32 slice lives in the state warpgroups' accumulators
//               of this product across the chunks: warpgroup w owns C's
//               64-row tiles w, w + 2 (m64n128); A = K^T is K's rows read
//               M-major (wgmma's transposed A), B = diag(w) V (Wp,
//               N-major). After it, the tiles are rounded into Cp for the
//               next chunk.
//   n = decay n + K^T w
//               beside it, K^T times w's three 16-bit parts (m64n8, all 24
//               bits of w) into fresh accumulators; the row's lane adds the
//               increment to n in fp32 (shared memory), as a naive loop
//               does, and writes n's parts into K's extra rows.
//
// Registers (setmaxnreg): the block is launched with 168 a thread; the state
// warpgroups take 184 (C's tiles are 128), the output warpgroup 136.
//
// A chunk's handoffs, on named barriers (Barrier): the output warpgroup
// arrives at kCpFree once its scores and Q Cp have read K's n rows, Q and
// Cp; the state warpgroups then load the next chunk's K, write n's rows
// (kNReady: the next scores may start) and Cp (kCpReady: the next Q Cp may
// start), so Cp's rewrite overlaps the next scores.
//
// Few heads split their sequence (Params::segments, walkWgmma): the same
// walk without its outputs gives every segment's own state, combine (mlstm.h)
// the state entering each, and the walks of all segments then run at once.
//
// Every chunk's per-token terms (the decays, weights and floors, from its
// gates and m) come from the gate pre-pass (gateSums and gateTerms in
// mlstm.h, to the workspace): the first warp copies chunk k + 1's by cp.async
// during chunk k's update; Terms are triple-buffered. Finished in the walk,
// their fp64 chain cost the state warpgroups ~1.2K cycles a chunk on their
// critical path (bench/results).
//
// Tokens arrive by TMA (3-D maps: dims, tokens, heads; 64 x 64 boxes with
// the 128-byte swizzle), each part on its mbarrier (Full) and loaded as soon
// as its previous readers are done: V (double-buffered) a chunk ahead by the
// output warpgroup's leader, Q after its Q Cp, K by the state warpgroups'
// leaders after kCpFree.
//
// Shared memory, from a 1024-byte boundary (the period of the 128-byte
// swizzle): Q [DQK / 64][64 tokens][64 dims], K [DQK / 64][72 rows][64
// dims], V [2][2][64 tokens][64 columns], Wp [2][64 tokens][64 columns], Cp
// [DQK / 64][2][64 rows][64 columns], h's staging [2][64 tokens][64
// columns], w's parts [8][64 tokens], in 128-byte rows whose 16-byte chunks
// are swizzled (chunk c of row r at c ^ (r % 8)); then Chunk's fp32 front
// (n; the four mbarriers and three Terms in its P region, sized to them:
// wgmmaScratchFloats). 211376 bytes at DQK 256: past the
// 196 KiB carve-out, which the two-warpgroup walk kept under for its
// register spills; this one spills 24 bytes a thread (ptxas; 21 spill
// instructions in its SASS).
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/wgmma_sm90.h"
#include "kgen/mlstm/mlstm.h"

namespace kgen::mlstm {

/// Two fp32, one 8-byte access (a pair of C's columns).
struct alignas(8) F2 {
  float x, y;
};

/// kOutputs: false for a segment's states alone (segmentStatesWgmma): no
/// Q, no scores, no h; the update and n's increment only.
template <class Config, bool kOutputs = true>
struct ChunkWgmma : Chunk<Config, wgmmaScratchFloats(Config::kChunk)> {
  using Base = Chunk<Config, wgmmaScratchFloats(Config::kChunk)>;
  using T = typename Config::Type;
  static constexpr int kL = Config::kChunk, kDQK = Config::kDQK,
                       kVB = Config::kBlockDV, kThreads = Config::kThreads;
  static_assert(kL == 64 && kVB == 128 && kThreads == 384,
                "the wgmma kernel runs chunk 64, 128 columns, 12 warps");
  static_assert(kDQK % 64 == 0 && kDQK <= 256,
                "C's 64-row tiles: at most two per state warpgroup");
  static_assert(!IsSame<T, float>::value, "wgmma takes 16-bit inputs");
  /// Warpgroups 0 and 1 hold the state; warpgroup 2 computes h.
  static constexpr int kStateThreads = 256, kOutputWg = 2;
  /// Their registers a thread (setmaxnreg): 2 x 184 + 136 = 504, the 168
  /// a thread the block was launched with (65536 / 384, rounded down to a
  /// multiple of 8); setmaxnreg.inc waits for registers the block has.
  static constexpr int kStateRegs = 184, kOutputRegs = 136;
  /// One 64 x 64 block of 16-bit elements: 64 rows of 128 bytes.
  static constexpr int kBlock = 64 * 128;
  /// K's 64-dim blocks carry 8 rows more: n's 16-bit rounding and the
  /// rest of it, rounded (writeN), then zeros. The scores' product then
  /// gives q . n in its columns 64 and 65.
  static constexpr int kKRows = kL + 8, kKBlock = kKRows * 128;
  static constexpr int kQBytes = kL * kDQK * 2, kKBytes = kDQK / 64 * kKBlock,
                       kVBytes = kL * kVB * 2, kCBytes = kDQK * kVB * 2;
  /// w's three 16-bit parts over the chunk's tokens: n's increment K^T w
  /// is the update's m64n8 product (8 rows of 128 bytes, rows 3 .. 7 zero).
  static constexpr int kWnBytes = 8 * 128;
  /// V twice (chunk k's in V[k % 2]: the next chunk's lands while this
  /// one's is read), Wp, Cp, h's staging (64 x 128), w's parts.
  static constexpr int kOperands =
      kQBytes + kKBytes + 3 * kVBytes + kCBytes + 2 * kBlock + kWnBytes;
  static constexpr int kFront = (4 * Base::kFloats + 15) / 16 * 16;
  /// The operands start at the first 1024-byte boundary: up to 1008 bytes
  /// of slack ahead of them.
  static constexpr int kBytes = 1024 + kOperands + kFront;
  static_assert(kBytes == Config::kSmemBytes,
                "kSmemBytes disagrees with ChunkWgmma's smem layout");
  static constexpr int kTiles = kDQK / 64, kOwn = (kTiles + 1) / 2;
  /// A chunk's per-token terms, as the pre-pass wrote them.
  using Terms = ChunkTerms<kL>;
  /// Chunk's P region (wgmmaScratchFloats; P itself stays in registers):
  /// the tokens' mbarriers at kFullAt (Q, K, V[2]), three Terms at kTermsAt
  /// (chunk k's at k % 3: the first warp copies chunk k + 1's during chunk
  /// k's update while the output warpgroup may still read chunk k - 1's, see
  /// stateStep).
  static constexpr int kFullAt = 0;
  static constexpr int kTermsAt = kFullAt + 8;
  /// The sum of the walked chunks' g (fp64; segmentStatesWgmma's).
  static constexpr int kSumAt = kTermsAt + 3 * int(sizeof(Terms)) / 4;
  static_assert(kTermsAt % 4 == 0 && sizeof(Terms) % 16 == 0 &&
                    kSumAt % 2 == 0 && kSumAt + 2 == Base::kPFloats,
                "the mbarriers, three Terms (16-byte aligned) and the g sum "
                "(8-byte aligned) fill P, as wgmmaScratchFloats (params.h) "
                "counts them");
  /// The tokens' mbarriers: Q (the output warpgroup's leader arrives), K
  /// (the state warpgroups' leaders, each with its blocks), V[2] (the
  /// output leader).
  enum Full { kFullQ = 0, kFullK = 1, kFullV = 2 };
  /// Named barriers (0 is __syncthreads'). kCpFree: the output warpgroup
  /// arrives once chunk k's scores and Q Cp have read K's n rows, Q and
  /// Cp; the state warpgroups wait there before rewriting them. Then the
  /// state warpgroups arrive at kNReady with chunk k + 1's n rows
  /// published (the output warpgroup waits there before its scores) and at
  /// kCpReady with its Cp (before its Q Cp): Cp's rewrite overlaps the
  /// next scores. kStates: the state warpgroups alone (Wp complete). kOut:
  /// the output warpgroup alone (h's staging).
  enum Barrier {
    kCpFree = 1,
    kNReady = 2,
    kStates = 3,
    kOut = 4,
    kCpReady = 5
  };

  // The atoms come with the kernel's file (MlstmEmitter).
  using MmaS = sm90::Wgmma<T, kKRows, false>;   // Q [K; n]^T
  using MmaQC = sm90::Wgmma<T, 128, true>;      // Q Cp
  using MmaPV = sm90::WgmmaRs<T, 128, true>;    // P V, P from registers
  using MmaU = sm90::Wgmma<T, 128, true, true>; // K^T Wp
  using MmaN = sm90::Wgmma<T, 8, false, true>;  // K^T w, m64n8

  /// Eight 16-bit elements, one 16-byte shared-memory access.
  using T8 = Vec<T, 8>;

  unsigned char *sQ, *sK, *sV, *sW, *sC, *sH, *sWn;
  Terms *terms;            // [3], in P (kTermsAt)
  double *gTotal;          // in P, see kSumAt
  uint64_t *full;          // [4] the tokens landed (TMA), see Full
  /// (dim, token, head): q, k, v read, h written.
  const sm90::TensorMap *mapQ, *mapK, *mapV, *mapH;
  int wg, warp, lane; // warp within the warpgroup
  /// C's owned tiles (state warpgroups): m64n128 accumulators (tile wg +
  /// 2 r).
  mutable float c[kOwn][64];

  static KGEN_DEVICE unsigned char *operands(unsigned char *smem) {
    return smem + ((1024 - (sm90::smemAddress(smem) & 1023)) & 1023);
  }

  KGEN_DEVICE ChunkWgmma(unsigned char *smem, const sm90::TensorMap *q,
                         const sm90::TensorMap *k, const sm90::TensorMap *v,
                         const sm90::TensorMap *h)
      : Base(operands(smem) + kOperands), mapQ(q), mapK(k), mapV(v), mapH(h),
        wg(int(threadIdx.x) / 128), warp(int(threadIdx.x) / kWaveSize % 4),
        lane(int(threadIdx.x) % kWaveSize) {
    sQ = operands(smem);
    sK = sQ + kQBytes;
    sV = sK + kKBytes;
    sW = sV + 2 * kVBytes;
    sC = sW + kVBytes;
    sH = sC + kCBytes;
    sWn = sH + 2 * kBlock;
    terms = reinterpret_cast<Terms *>(this->P + kTermsAt);
    full = reinterpret_cast<uint64_t *>(this->P + kFullAt);
    gTotal = reinterpret_cast<double *>(this->P + kSumAt);
  }

  /// Whether this thread is in a state warpgroup (0 or 1).
  KGEN_DEVICE bool holdsState() const { return wg < kOutputWg; }

  /// Byte offset of element (row, col) in a run of 64 x 64 swizzled
  /// blocks, block col / 64 of them after the first, `stride` bytes apart
  /// (K's: kKBlock).
  static KGEN_DEVICE int swizzled(int row, int col, int stride = kBlock) {
    return (col >> 6) * stride + row * 128 +
           ((((col & 63) >> 3) ^ (row & 7)) << 4) + (col & 7) * 2;
  }
  /// The row and column of accumulator x of an m64nN wgmma in this thread.
  KGEN_DEVICE int accRow(int x) const {
    return 16 * warp + lane / 4 + 8 * ((x >> 1) & 1);
  }
  KGEN_DEVICE int accCol(int x) const {
    return 8 * (x >> 2) + 2 * (lane & 3) + (x & 1);
  }
  /// Whether this state warpgroup has an r-th tile. With an even count
  /// every state warpgroup owns kOwn: then no test, so that ptxas sees no
  /// divergent path around the update's wgmmas (it would serialize them).
  /// The output warpgroup owns none: callers test holdsState.
  KGEN_DEVICE bool owns(int r) const {
    return kTiles % 2 == 0 || wg + 2 * r < kTiles;
  }
  /// Owned tile r's first row of C.
  KGEN_DEVICE int tileRow(int r) const { return 64 * (wg + 2 * r); }

  /// Rounds this warp's rows of m64nN accumulators, those of its row h
  /// times scale[h] (h = 0: row lane / 4, 1: 8 rows below), into a run of
  /// 64 x 64 swizzled blocks by stmatrix: 16 rows of 16 columns at a time,
  /// four 8x8 matrices (rows 0-7 and 8-15 of columns 16 q .. 16 q + 7,
  /// then of the next 8 columns), lane l addressing row l % 8 (+ 8 for odd
  /// l / 8).
  template <int kN>
  KGEN_DEVICE void storeRows(unsigned char *blocks, const float *acc,
                             const float (&scale)[2]) const {
    const int m = lane / 8;
    const int row = 16 * warp + lane % 8 + 8 * (m % 2);
    const uint32_t base = sm90::smemAddress(blocks);
#pragma unroll
    for (int q = 0; q < kN / 16; ++q) {
      const int x = 8 * q; // accumulators of columns 16 q .. 16 q + 15
      sm90::stmatrixX4(
          base + swizzled(row, 16 * q + 8 * (m / 2)),
          sm80::pack2<T>(acc[x] * scale[0], acc[x + 1] * scale[0]),
          sm80::pack2<T>(acc[x + 2] * scale[1], acc[x + 3] * scale[1]),
          sm80::pack2<T>(acc[x + 4] * scale[0], acc[x + 5] * scale[0]),
          sm80::pack2<T>(acc[x + 6] * scale[1], acc[x + 7] * scale[1]));
    }
  }

  /// Rounds the owned tiles into Cp ([DQK / 64][2][64][64] swizzled).
  /// State warpgroups only.
  KGEN_DEVICE void writeCp() const {
    const float one[2] = {1.f, 1.f};
#pragma unroll
    for (int r = 0; r < kOwn; ++r)
      if (owns(r))
        storeRows<128>(sC + tileRow(r) / 64 * 2 * kBlock, c[r], one);
  }

  /// C (fp32, rows of cStride, the slice at column j0) into the owned
  /// tiles and Cp, n into shared memory; zeros where null. Every thread
  /// (the output warpgroup's tiles stay zero). m is the walk's (mState).
  KGEN_DEVICE void loadState(const float *cs, long long cStride, int j0,
                             const float *nn) const {
#pragma unroll
    for (int r = 0; r < kOwn; ++r) {
      const int i0 = tileRow(r);
#pragma unroll
      for (int x = 0; x < 64; x += 2) {
        F2 v{0.f, 0.f};
        if (cs && holdsState() && owns(r))
          v = *reinterpret_cast<const F2 *>(cs + (i0 + accRow(x)) * cStride +
                                            j0 + accCol(x));
        c[r][x] = v.x;
        c[r][x + 1] = v.y;
      }
    }
    if (holdsState())
      writeCp();
    for (int i = this->tid; i < kDQK; i += kThreads) {
      this->n[i] = nn ? nn[i] : 0.f;
      writeN(i, this->n[i]);
    }
    // w's rows 3 .. 7 stay zero (the increment's columns 3 .. 7).
    for (int e = this->tid; e < 5 * 8; e += kThreads)
      *reinterpret_cast<F4 *>(sWn + 3 * 128 + e * 16) =
          F4{{0.f, 0.f, 0.f, 0.f}};
    // K's rows 66 .. 71 stay zero (the scores' columns 66 .. 71).
    for (int e = this->tid; e < kTiles * 6 * 8; e += kThreads)
      *reinterpret_cast<F4 *>(sK + e / 48 * kKBlock + (kL + 2) * 128 +
                              e % 48 * 16) = F4{{0.f, 0.f, 0.f, 0.f}};
    fenceForWgmma(); // Cp and n's rows, for the first chunk's wgmmas
  }

  /// v's next 16-bit part: v rounded to T, which v then loses (v - part
  /// is exact: Sterbenz).
  static KGEN_DEVICE T takePart(float &v) {
    const T part = Convert<T>::fromFloat(v);
    v -= Convert<T>::toFloat(part);
    return part;
  }

  /// n's entry i into K's rows 64 (its 16-bit rounding) and 65 (the rest,
  /// rounded) for the next scores' q . n: 16 bits and 8 more of n's 24.
  KGEN_DEVICE void writeN(int i, float v) const {
    const T hi = takePart(v), lo = takePart(v);
    unsigned char *b = sK + i / 64 * kKBlock;
    *reinterpret_cast<T *>(b + swizzled(kL, i % 64)) = hi;
    *reinterpret_cast<T *>(b + swizzled(kL + 1, i % 64)) = lo;
  }

  /// The owned tiles to C (as loadState reads it). State warpgroups only:
  /// the output warpgroup's path never touches c, so that its registers are
  /// free there.
  KGEN_DEVICE void storeC(float *cs, long long cStride, int j0) const {
#pragma unroll
    for (int r = 0; r < kOwn; ++r) {
      const int i0 = tileRow(r);
#pragma unroll
      for (int x = 0; x < 64; x += 2)
        if (owns(r))
          *reinterpret_cast<F2 *>(cs + (i0 + accRow(x)) * cStride + j0 +
                                  accCol(x)) = F2{c[r][x], c[r][x + 1]};
    }
  }

  /// Whether this thread is its warpgroup's leader, which issues the TMA
  /// loads of the warpgroup's share of the tokens.
  KGEN_DEVICE bool leader() const { return int(threadIdx.x) % 128 == 0; }

  /// The tokens of the chunk at token t0 of head bh by TMA, each part on
  /// its mbarrier (Full) and issued by the leader of a warpgroup that knows
  /// the part's previous readers are done. Rows past the head's sequence
  /// arrive as zeros. Q: the output warpgroup's leader, after the chunk
  /// before's Q Cp.
  KGEN_DEVICE void loadQ(int t0, int bh) const {
    sm90::barrierArriveExpectTx(full + kFullQ, kQBytes);
#pragma unroll
    for (int b = 0; b < kTiles; ++b)
      sm90::tmaLoad3d(sQ + b * kBlock, mapQ, full + kFullQ, 64 * b, t0, bh);
  }
  /// K's blocks wg, wg + 2, ...: state warpgroup wg's leader, after its
  /// update and the scores of the chunk before (kCpFree).
  KGEN_DEVICE void loadK(int t0, int bh) const {
    sm90::barrierArriveExpectTx(full + kFullK, (kTiles - wg + 1) / 2 * kBlock);
#pragma unroll
    for (int b = wg; b < kTiles; b += 2)
      sm90::tmaLoad3d(sK + b * kKBlock, mapK, full + kFullK, 64 * b, t0, bh);
  }
  /// The slice's V into V[buf]: the output warpgroup's leader, after the
  /// last chunk in that buffer was read by its P V and Wp.
  KGEN_DEVICE void loadV(int buf, int t0, int bh, int j0) const {
    uint64_t *bar = full + kFullV + buf;
    sm90::barrierArriveExpectTx(bar, kVBytes);
#pragma unroll
    for (int b = 0; b < 2; ++b)
      sm90::tmaLoad3d(sV + buf * kVBytes + b * kBlock, mapV, bar, j0 + 64 * b,
                      t0, bh);
  }
  /// Waits for walked chunk i's part (Full): its buffer's phase.
  KGEN_DEVICE void landed(int part, int i) const {
    if (part == kFullV)
      sm90::barrierWait(full + kFullV + i % 2, uint32_t((i / 2) & 1));
    else
      sm90::barrierWait(full + part, uint32_t(i & 1));
  }

  /// The warp that copies the Terms: the first.
  static constexpr int kTermsWarp = 0;
  KGEN_DEVICE bool termsWarp() const {
    return int(threadIdx.x) / kWaveSize == kTermsWarp;
  }

  /// Copies chunk k's Terms (from the pre-pass, in the workspace) to
  /// terms[k % 3] by cp.async, the first warp, one group per call (empty
  /// where k is past the last chunk); the warp waits for it (cpAsyncWait)
  /// before a barrier that publishes it.
  KGEN_DEVICE void copyTerms(const Params &p, int bh, int k) const {
    if (!termsWarp())
      return;
    if (k < p.chunks) {
      const unsigned char *src = reinterpret_cast<const unsigned char *>(
          reinterpret_cast<const Terms *>(p.wsGates) +
          (long long)bh * p.chunks + k);
      for (int e = lane; e < int(sizeof(Terms)) / 16; e += kWaveSize)
        sm80::cpAsync<16>(sm90::smemAddress(terms + k % 3) + 16 * e,
                          src + 16 * e, true);
    }
    sm80::cpAsyncCommit();
  }

  /// Makes this thread's shared-memory writes (stores, landed cp.async)
  /// visible to the wgmmas (the async proxy) that read them after the
  /// next barrier.
  static KGEN_DEVICE void fenceForWgmma() { sm90::fenceProxyAsync(); }

  // Each product takes its operands' start descriptors, made just before
  // it (held across the step they cost registers, which spill); a step
  // moves them (sm90::descriptorAt).

  /// The state warpgroups' chunk k (the walk's i-th; tokens t0 .. t0 +
  /// len): Wp = diag(w) V, C = decay C + K^T Wp and n's increment on the
  /// tensor cores, then, once the output warpgroup's scores and Q Cp are
  /// done with them (kCpFree), the next chunk's K loaded (first token t1,
  /// none where negative), n's rows rewritten (kNReady), then Cp
  /// (kCpReady).
  KGEN_DEVICE void stateStep(const Params &p, int k, int i, int len, int bh,
                             int t1) const {
    const Terms &tm = terms[k % 3];
    if (this->tid == 0) { // read after the walk (storeState, wsGM)
      *this->mState = tm.m;
      if constexpr (!kOutputs)
        *gTotal += tm.g;
    }
    // Wp = diag(w) V, 16 bytes a step (the swizzle stays within a row):
    // Wp's last readers, the update of the chunk before, are done
    // (kCpFree).
    landed(kFullV, i);
    const unsigned char *v = sV + (i % 2) * kVBytes;
    static_assert(kVBytes / 16 % kStateThreads == 0, "whole steps a thread");
#pragma unroll
    for (int r = 0; r < kVBytes / 16 / kStateThreads; ++r) {
      const int e = this->tid + r * kStateThreads;
      const int t = (e * 16 % kBlock) / 128;
      const float w = t < len ? tm.wa[t] : 0.f;
      const T8 vv = *reinterpret_cast<const T8 *>(v + 16 * e);
      T8 o;
#pragma unroll
      for (int u = 0; u < 8; ++u)
        o.x[u] = Convert<T>::fromFloat(w * Convert<T>::toFloat(vv.x[u]));
      *reinterpret_cast<T8 *>(sW + 16 * e) = o;
    }
    // w's three 16-bit parts (24 bits: all of fp32's) in sWn's rows 0 .. 2:
    // the update's m64n8 product sums K^T w from them in fp32.
    if (this->tid < kL) {
      const int t = this->tid;
      float w = t < len ? tm.wa[t] : 0.f;
#pragma unroll
      for (int part = 0; part < 3; ++part)
        *reinterpret_cast<T *>(sWn + swizzled(part, t)) = takePart(w);
    }
    fenceForWgmma(); // Wp and w, read by both state warpgroups' updates
    sm90::namedBarrierSync<kStateThreads>(kStates);

    // C = decay C + K^T Wp on the owned tiles: A = K^T is K's block of
    // the tile's 64 dims read M-major, k16 steps 16 tokens (2048 bytes)
    // apart; Wp's two 64-column blocks one block apart. And n's increment
    // K^T w beside it: m64n8 from w's parts, K-major, k16 steps 32 bytes
    // apart, into dn (zeroed by the first step).
    const float decay = tm.decay;
    float dn[kOwn][4] = {};
#pragma unroll
    for (int r = 0; r < kOwn; ++r) {
#pragma unroll
      for (int x = 0; x < 64; ++x)
        c[r][x] *= decay;
      // Here, not sunk between the tiles' wgmmas (ptxas would then wait for
      // the first tile's before the second's).
      sm90::fenceAccumulators(c[r]);
    }
    landed(kFullK, i);
    const uint64_t dKt = sm90::matrixDescriptor(sK, kKBlock, 1024);
    sm90::wgmmaFence();
#pragma unroll
    for (int r = 0; r < kOwn; ++r) {
      if (!owns(r))
        continue;
      const int i0 = tileRow(r);
#pragma unroll
      for (int kc = 0; kc < kL / 16; ++kc)
        MmaU::run(c[r],
                  sm90::descriptorAt(dKt, (i0 / 64) * kKBlock + kc * 2048),
                  sm90::descriptorAt(sm90::matrixDescriptor(sW, kBlock, 1024),
                                     kc * 2048),
                  1);
#pragma unroll
      for (int kc = 0; kc < kL / 16; ++kc)
        MmaN::run(
            dn[r], sm90::descriptorAt(dKt, (i0 / 64) * kKBlock + kc * 2048),
            sm90::descriptorAt(sm90::matrixDescriptor(sWn, 16, 1024), kc * 32),
            kc > 0);
    }
    sm90::wgmmaCommit();
    sm90::wgmmaWait<0>();
#pragma unroll
    for (int r = 0; r < kOwn; ++r) {
      sm90::fenceAccumulators(c[r]);
      sm90::fenceAccumulators(dn[r]);
    }
    // n = decay n + K^T w in fp32 (n in shared memory, each entry read and
    // written by its row's lane 4q alone): the row's increment is its
    // columns 0 .. 2 (w's parts), lanes 4q and 4q + 1 of the quad.
    float nNext[kOwn][2];
#pragma unroll
    for (int r = 0; r < kOwn; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float inc = dn[r][2 * h] + dn[r][2 * h + 1];
        inc += shuffleXor(inc, 1);
        inc += shuffleXor(inc, 2);
        const int row = tileRow(r) + accRow(2 * h);
        nNext[r][h] = 0.f;
        if (owns(r) && (lane & 3) == 0) {
          nNext[r][h] = decay * this->n[row] + inc;
          this->n[row] = nNext[r][h];
        }
      }
    // Chunk k + 1's Terms (copyTerms at the chunk's start) have landed:
    // kCpFree publishes them to the state warpgroups, kNReady to the output
    // one.
    if (termsWarp())
      sm80::cpAsyncWait<0>();
    // The output warpgroup's scores have read K (and n's rows) and its
    // Q Cp has read Cp; both state warpgroups' updates have read Wp and K.
    sm90::namedBarrierSync<kThreads>(kCpFree);
    if (t1 < 0)
      return;
    if (leader())
      loadK(t1, bh);
    if constexpr (kOutputs) {
      // n into K's rows for the next chunk's q . n, then C into Cp.
#pragma unroll
      for (int r = 0; r < kOwn; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (owns(r) && (lane & 3) == 0)
            writeN(tileRow(r) + accRow(2 * h), nNext[r][h]);
      fenceForWgmma(); // n's rows, for the next chunk's scores
      sm90::namedBarrierArrive<kThreads>(kNReady);
      writeCp();
      fenceForWgmma(); // Cp, for the next chunk's Q Cp
      sm90::namedBarrierArrive<kThreads>(kCpReady);
    } else {
      sm90::namedBarrierArrive<kThreads>(kNReady);
    }
  }

  /// The output warpgroup's chunk k (the walk's i-th; tokens t0 .. t0 +
  /// len), after the state warpgroups published its n rows (kNReady; the
  /// first chunk's is a block barrier): V of chunk k + 1
  /// loaded, S = Q [K; n]^T, P, num = Q Cp (after kCpReady; then kCpFree
  /// and the next chunk's Q) + P V, h.
  /// Segment states (!kOutputs) load V and pass kCpFree.
  KGEN_DEVICE void outputStep(const Params &p, int j0, int k, int i, int t0,
                              int len, int bh, int t1) const {
    if (t1 >= 0 && leader())
      loadV((i + 1) % 2, t1, bh, j0); // chunk k - 1's readers are done
    if constexpr (!kOutputs) {
      sm90::namedBarrierArrive<kThreads>(kCpFree);
    } else {
      const float scale = 1.f / sqrtf(float(kDQK));
      const Terms &tm = terms[k % 3];
      // S = Q [K; n]^T over DQK: 4 k16 steps per 64-dim block, 32 bytes
      // apart; its columns 64 and 65 are q . n's two parts.
      float s[kKRows / 2], o[64], rowSum[2] = {0.f, 0.f}, qn[2];
      uint32_t a[4][4];
      const uint64_t dQ = sm90::matrixDescriptor(sQ, 16, 1024);
      landed(kFullQ, i);
      landed(kFullK, i);
      {
        const uint64_t dK = sm90::matrixDescriptor(sK, 16, 1024);
        sm90::wgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kDQK / 16; ++kk)
          MmaS::run(s,
                    sm90::descriptorAt(dQ, (kk / 4) * kBlock + (kk % 4) * 32),
                    sm90::descriptorAt(dK, (kk / 4) * kKBlock + (kk % 4) * 32),
                    kk > 0);
        sm90::wgmmaCommit();
      }
      // P: the decayed, masked scores, and their row sums (two rows a
      // thread, each spread over the 4 lanes of a quad).
      sm90::wgmmaWait<0>();
      sm90::fenceAccumulators(s);
      // q_t . n^{k-1}: its two parts in columns 64 and 65, lane 4q's; the
      // other lanes of the quad hold zeros (columns 66 .. 71).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        qn[h] = s[kL / 2 + 2 * h] + s[kL / 2 + 2 * h + 1];
        qn[h] += shuffleXor(qn[h], 1);
        qn[h] += shuffleXor(qn[h], 2);
      }
      // log2 D_ts - log2 m^comb_t from the row and column terms, each
      // column's loaded once for the thread's two rows. The terms reach
      // hundreds (b_s sums up to 64 log-gates) where their sum, the exponent
      // that matters, is small: rounded to fp32 alone each would carry an
      // error of ~3e-5 into every decay, which the normalizer's cancellation
      // (z_t = q-bar . n + sum_s P_ts near 0, h_t large) amplified past the
      // tests' bound. As pairs: hi + hi is exact where the sum is small
      // (Sterbenz), lo + lo restores the rest.
      const float rowTerm[2] = {tm.row[accRow(0)], tm.row[accRow(2)]},
                  rowLo[2] = {tm.rowLo[accRow(0)], tm.rowLo[accRow(2)]};
#pragma unroll
    for (int x = 0; x < 32; x += 4)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int sc = accCol(x + u);
        const float colTerm = tm.col[sc], colLo = tm.colLo[sc];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // A select, not a branch: ptxas serializes the wgmmas when their
          // accumulators are touched on a divergent path.
          const int e = x + 2 * h + u, t = accRow(e);
          float decay; // s exp(log D_ts - m^comb_t)
          asm("ex2.approx.ftz.f32 %0, %1;"
              : "=f"(decay)
              : "f"((rowTerm[h] + colTerm) + (rowLo[h] + colLo)));
          const float y = t < len && sc <= t ? s[e] * decay : 0.f;
          s[e] = y;
          rowSum[h] += y;
        }
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rowSum[h] += shuffleXor(rowSum[h], 1);
      rowSum[h] += shuffleXor(rowSum[h], 2);
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        a[kc][e] = sm80::pack2<T>(s[8 * kc + 2 * e], s[8 * kc + 2 * e + 1]);
    if (i > 0) // the state warpgroups have rewritten Cp
      sm90::namedBarrierSync<kThreads>(kCpReady);
    // num = Q Cp on the slice's 128 columns, after P (the scores' registers
    // free then: the output warpgroup has 136): Cp's k16 steps are 16 rows
    // (2048 bytes) apart, its two 64-column blocks one block apart, its
    // 64-row blocks two.
    {
      const uint64_t dC = sm90::matrixDescriptor(sC, kBlock, 1024);
      sm90::wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kDQK / 16; ++kk)
        MmaQC::run(
            o, sm90::descriptorAt(dQ, (kk / 4) * kBlock + (kk % 4) * 32),
            sm90::descriptorAt(dC, (kk / 4) * 2 * kBlock + (kk % 4) * 2048),
            kk > 0);
      sm90::wgmmaCommit();
    }
    sm90::wgmmaWait<0>();
    sm90::fenceAccumulators(o);
    // h's denominators, with no wgmma in flight: the division's slow path
    // is a call, across which ptxas serializes the wgmmas (C7510).
    float zden[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = accRow(2 * h);
      zden[h] = 1.f / (fmaxf(fabsf(tm.qfac[t] * scale * qn[h] + rowSum[h]),
                             tm.floor[t]) +
                       p.eps);
    }
    // The scores and Q Cp are done with K's n rows, Q and Cp.
    sm90::namedBarrierArrive<kThreads>(kCpFree);
    if (t1 >= 0 && leader())
      loadQ(t1, bh);
    const float qs[2] = {tm.qfac[accRow(0)] * scale,
                         tm.qfac[accRow(2)] * scale};
#pragma unroll
    for (int x = 0; x < 64; ++x)
      o[x] *= qs[(x >> 1) & 1];
    landed(kFullV, i);
    sm90::wgmmaFence();
#pragma unroll
    for (int kc = 0; kc < 4; ++kc)
      MmaPV::run(o, a[kc],
                 sm90::descriptorAt(sm90::matrixDescriptor(sV, kBlock, 1024),
                                    (i % 2) * kVBytes + kc * 2048),
                 1);
    sm90::wgmmaCommit();
    // h's staging block was read by the chunk before's TMA store.
    if (leader())
      sm90::bulkWaitRead<0>();
    sm90::wgmmaWait<0>();
    sm90::fenceAccumulators(o);
    sm90::namedBarrierSync<128>(kOut);
    // h through the staging blocks (stmatrix) and a TMA store of each 64
    // columns; rows past the head's sequence are not written.
    storeRows<128>(sH, o, zden);
    fenceForWgmma(); // the stores, for the TMA store (async proxy)
    sm90::namedBarrierSync<128>(kOut);
    if (leader()) {
#pragma unroll
      for (int b = 0; b < 2; ++b)
        sm90::tmaStore3d(mapH, sH + b * kBlock, j0 + 64 * b, t0, bh);
      sm90::bulkCommit();
    }
    } // kOutputs
  }
};

/// The chunks a block of the wgmma kernels walks: all of its head's, or,
/// with the sequence split in p.segments parts, segment blockIdx.z's
/// (p.segmentChunks each; the last may be shorter or empty). From the
/// parameters alone, so that ptxas can rematerialize them instead of
/// holding them through the walk (two held registers spilled 76 bytes
/// more at DQK 256).
struct ChunkRange {
  int k0, k1;
};
KGEN_DEVICE ChunkRange segmentChunks(const Params &p) {
  const int k0 = min(p.chunks, int(blockIdx.z) * p.segmentChunks);
  return {k0, min(p.chunks, k0 + p.segmentChunks)};
}

/// Walks the chunks of one head and slice (and segment) on wgmma, after
/// the gate pre-pass (gateSums, gateTerms); grid (DV / 128, B * NH, segments),
/// 384 threads. q, k and v come and h goes through the tensor maps (dim, token,
/// head), 64 x 64 boxes with the 128-byte swizzle.
///   kOutputs, one segment: the whole walk from the initial state, h and
///     the final states (walkChunks' order).
///   kOutputs, segments: from the state entering the segment, which
///     combine left in the workspace; h only (combine wrote the final
///     states).
///   !kOutputs (segmentStatesWgmma): the segment's own contribution from a
///     zero state, as chunkStates does for one chunk: C_loc, n_loc to the
///     workspace in the place of the state entering the segment, (sum of
///     g, m_loc) to wsGM; combine turns them into the states entering the
///     segments. Its stabilizer is the whole sequence's m (the pre-pass's
///     Terms): m_loc is then the m leaving the segment, which is at least g
///     plus the m entering it, so combine's m is m_loc and its weight of
///     C_loc exp(m_loc - m) is 1: the same sums as one walk's.
template <class Config, bool kOutputs>
KGEN_DEVICE void walkWgmma(const sm90::TensorMap *mapQ,
                           const sm90::TensorMap *mapK,
                           const sm90::TensorMap *mapV,
                           const sm90::TensorMap *mapH, const Params &p) {
  using Ch = ChunkWgmma<Config, kOutputs>;
  extern __shared__ __align__(1024) unsigned char kgen_smem_wgmma[];
  const Ch ch(kgen_smem_wgmma, mapQ, mapK, mapV, mapH);
  const BlockIndex<Config> at;
  constexpr int dqk = Config::kDQK, dv = Config::kDV, kL = Config::kChunk;
  const long long bh = at.bh;
  const bool segmented = p.segments > 1;
  const ChunkRange range = segmentChunks(p);
  const long long ws = bh * p.segments + blockIdx.z; // (head, segment)
  if (kOutputs && segmented)
    waitForPreviousGrid(); // combine's states (C and n, below)
  if (threadIdx.x == 0) {
    sm90::barrierInit(ch.full + Ch::kFullQ, 1); // the output leader
    sm90::barrierInit(ch.full + Ch::kFullK, 2); // the state leaders
    sm90::barrierInit(ch.full + Ch::kFullV, 1); // the output leader
    sm90::barrierInit(ch.full + Ch::kFullV + 1, 1);
    sm90::fenceBarrierInit();
    *ch.gTotal = 0.0;
    // Each walked chunk's Terms carry the m leaving it (stateStep); an
    // empty segment's m_loc is none.
    *ch.mState = kNoState;
  }
  __syncthreads(); // the mbarriers
  // The first chunk's tokens and Terms, then the state.
  if (range.k0 < range.k1) {
    const int t0 = range.k0 * kL;
    if (ch.leader()) {
      if (ch.holdsState()) {
        ch.loadK(t0, int(bh));
      } else {
        if (kOutputs)
          ch.loadQ(t0, int(bh));
        ch.loadV(0, t0, int(bh), at.j0);
      }
    }
    waitForPreviousGrid(); // the Terms
    ch.copyTerms(p, int(bh), range.k0);
    ch.copyTerms(p, int(bh), range.k0 + 1);
    if (ch.termsWarp())
      sm80::cpAsyncWait<1>(); // the first chunk's
  }
  if (!kOutputs)
    ch.loadState(nullptr, dv, at.j0, nullptr);
  else if (segmented)
    ch.loadState(p.wsC + ws * dqk * dv, dv, at.j0, p.wsN + ws * dqk);
  else
    ch.loadState(p.c0 ? p.c0 + bh * dqk * dv : nullptr, dv, at.j0,
                 p.n0 ? p.n0 + bh * dqk : nullptr);
  // The first chunk's Terms, Cp and n's rows (and, counted, the reads of
  // the initial n; the pre-pass read the initial m).
  const bool writesFinal = kOutputs && !segmented && (p.nT || p.mT);
  const HeadCounter counted =
      writesFinal ? syncCountHead(p, bh, BlockIndex<Config>::kSlices)
                  : HeadCounter{};
  if (!writesFinal)
    __syncthreads();
  // The roles walk apart, each loop holding only its own registers: the
  // state warpgroups C's tiles (128 at DQK 256) and the update's, the output
  // warpgroup S, Q Cp + P V and P (~120).
  if (ch.holdsState()) {
    sm90::setMaxRegsInc<Ch::kStateRegs>();
    for (int k = range.k0; k < range.k1; ++k) {
      const int t0 = k * kL, len = chunkLength<Config>(p, t0);
      if (k > range.k0)
        ch.copyTerms(p, int(bh), k + 1);
      if (t0 + len < p.seq)
        ch.template prefetch<kOutputs>(p, bh * p.seq + t0 + len, at.j0,
                                       chunkLength<Config>(p, t0 + len),
                                       Ch::kStateThreads);
      ch.stateStep(p, k, k - range.k0, len, int(bh),
                   k + 1 < range.k1 ? t0 + kL : -1);
    }
    // C in the updates' tile layout.
    if (!kOutputs)
      ch.storeC(p.wsC + ws * dqk * dv, dv, at.j0);
    else if (!segmented && p.cT)
      ch.storeC(p.cT + bh * dqk * dv, dv, at.j0);
  } else {
    sm90::setMaxRegsDec<Ch::kOutputRegs>();
    for (int k = range.k0; k < range.k1; ++k) {
      const int t0 = k * kL;
      if (k > range.k0) {
        // The state warpgroups have published this chunk's n rows and
        // Terms (stateStep).
        sm90::namedBarrierSync<Config::kThreads>(Ch::kNReady);
      }
      ch.outputStep(p, at.j0, k, k - range.k0, t0, chunkLength<Config>(p, t0),
                    int(bh), k + 1 < range.k1 ? t0 + kL : -1);
    }
    if (kOutputs && ch.leader())
      sm90::bulkWaitRead<0>(); // the last h store has read its staging
  }
  __syncthreads(); // n and m in shared memory
  if (!kOutputs) {
    const bool first = at.slice == 0;
    ch.Base::storeState(nullptr, dv, at.j0, first ? p.wsN + ws * dqk : nullptr,
                        nullptr);
    if (first && threadIdx.x == 0) {
      p.wsGM[2 * ws] = *ch.gTotal;
      p.wsGM[2 * ws + 1] = *ch.mState;
    }
  } else if (!segmented) {
    const bool last = writesFinal && counted.last(p);
    ch.Base::storeState(nullptr, dv, at.j0,
                        p.nT && last ? p.nT + bh * dqk : nullptr,
                        p.mT && last ? p.mT + bh : nullptr);
  }
}

/// The fused kernel on wgmma: h (and the final states), per head, slice
/// and segment (walkWgmma).
template <class Config>
KGEN_DEVICE void fusedWgmma(const sm90::TensorMap *mapQ,
                            const sm90::TensorMap *mapK,
                            const sm90::TensorMap *mapV,
                            const sm90::TensorMap *mapH, const Params &p) {
  walkWgmma<Config, true>(mapQ, mapK, mapV, mapH, p);
}

/// The split sequence's first phase: every segment's own state (walkWgmma),
/// all segments in parallel; then combine, then fusedWgmma per segment.
template <class Config>
KGEN_DEVICE void
segmentStatesWgmma(const sm90::TensorMap *mapQ, const sm90::TensorMap *mapK,
                   const sm90::TensorMap *mapV, const sm90::TensorMap *mapH,
                   const Params &p) {
  walkWgmma<Config, false>(mapQ, mapK, mapV, mapH, p);
}

} // namespace kgen::mlstm
