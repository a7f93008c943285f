//===- attention.h - Flash attention forward (FlashAttention-2) -*- C++ -*-===//
//
// One block computes kBlockM query rows of one (batch, query head) against
// the keys of its range (all of them, or a split's share); its warps own
// kBlockM / kWarps rows each. The key range is walked kBlockN keys at a time:
//
//   Q tile        global -> smem once, then fragments in registers
//   K, V tiles    global -> smem through kStages buffers (cp.async on
//                 NVIDIA, registers -> LDS on AMD), the next tile in flight
//                 during this one's math; with kPreloadV V lands with K,
//                 otherwise V is waited for after the softmax
//   S = Q K^T     mma.sync m16n8k16 (NVIDIA) | MFMA 32x32x8 as S^T = K Q^T
//   (AMD) softmax       online, fp32, in the log2 domain: scale * log2(e) is
//   folded
//                 into one multiply and exp2 does the rest; bias and ALiBi
//                 are scaled by log2(e) too; a row whose running max is still
//                 -inf uses 0 as its reference, so (-inf) - (-inf) never
//                 happens and an empty row ends with sum 0 -> O = 0,
//                 LSE = -inf
//   O += P V      P rounded to the input type; O^T = V^T P^T on AMD
//
// Masks (causal bottom-right, sliding window, key padding) are evaluated
// only on tiles that cross a boundary. With kSplits > 1 the block writes
// fp32 partials (O normalized by its own sum, and its LSE) and combine()
// merges the splits; an empty split has LSE -inf and weight 0.
//
// With Config::kPackGqa a block serves every query head of one KV head:
// packed row R of the tile is query row R / g of query head hk * g + R % g
// (g = headsQ / headsKv), so K and V are read once per KV head, and a decode
// step (Sq = 1) fills g rows of the tile instead of one. Masks, bias and the
// output use each row's own query position and head.
//
// The generated source fixes everything through Config (see emitAttention).
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/attention/params.h"
#include "kgen/common/prelude.h"
#include "kgen/common/shuffle.h"
#if KGEN_NVIDIA
#include "kgen/common/mma_sm80.h"
#else
#include "kgen/common/mfma_cdna.h"
#endif

namespace kgen::attention {

KGEN_DEVICE float negInf() {
#if KGEN_PTX
  return __int_as_float(0xff800000);
#else
  return bitCast<float>(0xff800000u);
#endif
}

KGEN_DEVICE float exp2Of(float x) { // exp2(-inf) = 0
#if KGEN_PTX
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return __builtin_exp2f(x);
#endif
}

KGEN_DEVICE float log2Of(float x) {
#if KGEN_PTX
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return __builtin_log2f(x);
#endif
}

KGEN_DEVICE float fmaOf(float a, float b, float c) { // a * b + c, rounded once
#if KGEN_PTX
  float y;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(y) : "f"(a), "f"(b), "f"(c));
  return y;
#else
  return __builtin_fmaf(a, b, c);
#endif
}

KGEN_DEVICE float maxOf(float a, float b) {
#if KGEN_PTX
  float y; // one instruction, where a compare and a select are two
  asm("max.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
#else
  return a > b ? a : b;
#endif
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
/// Shared-memory rows are padded by 16 bytes: the 8 rows one ldmatrix (or
/// one LDS read phase) touches then fall in distinct bank groups.
constexpr int kPad = 8;

template <class Config> struct Shape {
  using T = typename Config::T;
  static constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN;
  static constexpr int kDqk = Config::kHeadDimQk, kDv = Config::kHeadDimV;
  static constexpr int kWarpM = kBlockM / Config::kWarps;
  static constexpr int kStrideQk = kDqk + kPad, kStrideV = kDv + kPad;
  static constexpr int kQElems = kBlockM * kStrideQk;
  static constexpr int kKElems = kBlockN * kStrideQk;
  static constexpr int kVElems = kBlockN * kStrideV;
  static constexpr int kSmemBytes =
      (kQElems + Config::kStages * (kKElems + kVElems)) * int(sizeof(T));

  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value ||
                    (Config::kWgmma &&
                     (IsSame<T, e4m3>::value || IsSame<T, e5m2>::value)),
                "attention inputs are bf16 or f16 (e4m3, e5m2: the wgmma "
                "loop)");
  // The wgmma loop (attention_sm90.h) adds a producer warpgroup and lays
  // shared memory out its own way; it checks its own layout.
  static_assert(Config::kThreads ==
                    (Config::kWarps + (Config::kWgmma ? 4 : 0)) * kWaveSize,
                "kThreads = kWarps * wave size (+ the producer warpgroup)");
  static_assert(Config::kWgmma || kSmemBytes == Config::kSmemBytes,
                "kSmemBytes disagrees with the template's smem layout");
#if KGEN_NVIDIA
  static_assert(Config::kStages >= 2, "the cp.async pipeline needs 2 buffers");
#else
  static_assert(Config::kStages >= 1, "K/V need a buffer");
#endif
  static_assert(kDqk % 32 == 0 && kDv % 32 == 0,
                "head dims are multiples of 32");
#if KGEN_NVIDIA
  static_assert(
      kWarpM % 16 == 0 && kBlockN % 16 == 0,
      "warp rows and kBlockN are multiples of 16 (mma m16, ldmatrix)");
#else
  static_assert(kWarpM % 32 == 0 && kBlockN % 32 == 0,
                "wave rows and kBlockN are multiples of 32 (MFMA 32x32)");
#endif
};

/// Copies rows [0, kRows) x [0, kCols) of a global tile into a padded
/// shared tile, 16 bytes per access; row r starts at rowAt(r). Rows at or
/// past rowsValid are zero-filled and read nothing (rowAt(0), the tile's
/// first row, is then the harmless address the copy names; rowsValid >= 1
/// whenever rowAt(0) is formed). NVIDIA issues cp.async (the caller
/// commits); AMD copies synchronously through registers.
template <class Config, int kRows, int kCols, class RowAt>
KGEN_DEVICE void loadRows(typename Config::T *smem, const RowAt &rowAt,
                          int rowsValid) {
  using T = typename Config::T;
  constexpr int kVecsPerRow = kCols / 8, kVecs = kRows * kVecsPerRow;
  constexpr int kIters = (kVecs + Config::kThreads - 1) / Config::kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int v = it * Config::kThreads + int(threadIdx.x);
    if (kVecs % Config::kThreads != 0 && v >= kVecs)
      break;
    const int r = v / kVecsPerRow, c = v % kVecsPerRow * 8;
    const bool valid = r < rowsValid;
    const T *src = valid ? rowAt(r) + c : rowAt(0);
    T *dst = smem + r * (kCols + kPad) + c;
#if KGEN_NVIDIA
    sm80::cpAsync<16>(sm80::smemAddress(dst), src, valid);
#else
    *reinterpret_cast<Bytes<16> *>(dst) =
        valid ? *reinterpret_cast<const Bytes<16> *>(src) : Bytes<16>{};
#endif
  }
}

/// loadRows for a tile whose rows are rowStride elements apart from g.
template <class Config, int kRows, int kCols>
KGEN_DEVICE void loadTile(typename Config::T *smem, const typename Config::T *g,
                          long long rowStride, int rowsValid) {
  loadRows<Config, kRows, kCols>(
      smem, [&](int r) { return g + r * rowStride; }, rowsValid);
}

/// Where this block's rows and keys are: the (batch, head) origin of each
/// tensor, the sequence lengths of this batch entry, and the masks. Rows
/// are the tile's (packed) rows; queryOf / headOf map one to its query
/// position and query head.
template <class Config> struct Block {
  using T = typename Config::T;
  using TO = typename Config::TO; ///< O and the bias: T, or bf16 for fp8
  const T *q, *k, *v;
  TO *o;
  long long strideQ, strideK, strideV, strideO; // between rows
  long long headQ, headO;                       // between query heads
  int b, h, seqQ, seqK, rowQ0;
  int group;  // query heads per row block: g with kPackGqa, else 1
  int rows;   // packed rows of this batch entry: seqQ * group
  int offset; // seqK - seqQ: the diagonal's shift (bottom-right alignment)

  KGEN_DEVICE int queryOf(int r) const {
    return Config::kPackGqa ? r / group : r;
  }
  KGEN_DEVICE int headOf(int r) const {
    return Config::kPackGqa ? h + r % group : h;
  }
  /// Element offsets of packed row r in Q and O from q and o.
  KGEN_DEVICE long long qRow(int r) const {
    return Config::kPackGqa ? (r / group) * strideQ + (r % group) * headQ
                            : r * strideQ;
  }
  KGEN_DEVICE long long oRow(int r) const {
    return Config::kPackGqa ? (r / group) * strideO + (r % group) * headO
                            : r * strideO;
  }

  KGEN_DEVICE bool init(const Params &p) {
    return init(p, int(blockIdx.x), int(blockIdx.y), int(blockIdx.z));
  }

  /// The block of row block bx, head (times splits) by and batch entry bz:
  /// the grid's own coordinates, or a persistent grid's work tile.
  KGEN_DEVICE bool init(const Params &p, int bx, int by, int bz) {
    b = bz;
    const int g = p.headsQ / p.headsKv; // GQA / MQA
    int hk;
    if constexpr (Config::kPackGqa) {
      hk = by / Config::kSplits;
      h = hk * g;
      group = g;
    } else {
      h = by / Config::kSplits;
      hk = h / g;
      group = 1;
    }
    long long offQ = 0, offK = 0;
    if constexpr (Config::kVarlen) {
      offQ = p.cuSeqlensQ[b];
      offK = p.cuSeqlensK[b];
      seqQ = p.cuSeqlensQ[b + 1] - int(offQ);
      seqK = p.cuSeqlensK[b + 1] - int(offK);
    } else {
      seqQ = p.seqlenQ;
      seqK = p.seqlenK;
    }
    rowQ0 = int(offQ);
    offset = seqK - seqQ;
    rows = seqQ * group;
    // Unused blocks of a varlen grid (sized for the longest sequence) leave
    // before any address of theirs is formed.
    if (bx * Config::kBlockM >= rows)
      return false;
    const long long bq = Config::kVarlen ? 0 : b, bk = Config::kVarlen ? 0 : b;
    q = static_cast<const T *>(p.q) + bq * p.strideQ[0] + offQ * p.strideQ[1] +
        h * p.strideQ[2];
    k = static_cast<const T *>(p.k) + bk * p.strideK[0] + offK * p.strideK[1] +
        hk * p.strideK[2];
    v = static_cast<const T *>(p.v) + bk * p.strideV[0] + offK * p.strideV[1] +
        hk * p.strideV[2];
    o = static_cast<TO *>(p.o) + bq * p.strideO[0] + offQ * p.strideO[1] +
        h * p.strideO[2];
    strideQ = p.strideQ[1];
    strideK = p.strideK[1];
    strideV = p.strideV[1];
    strideO = p.strideO[1];
    headQ = p.strideQ[2];
    headO = p.strideO[2];
    return true;
  }

  /// The keys [lo, hi) visible to query i (inside its sequence), counted
  /// from key `from`: every mask is one interval of keys per query. The
  /// softmax takes it once per row from the lane's first column, so a
  /// masked element costs a compare against a compile-time column offset
  /// and a select, where testing each key anew cost its column arithmetic
  /// as well.
  KGEN_DEVICE void visibleKeys(const Params &p, int i, int from, int &lo,
                               int &hi) const {
    lo = 0;
    hi = seqK;
    if constexpr (Config::kCausal) {
      if (i + offset + 1 < hi)
        hi = i + offset + 1;
    }
    if constexpr (Config::kWindow) {
      if (p.windowRight >= 0 && i + offset + p.windowRight + 1 < hi)
        hi = i + offset + p.windowRight + 1;
      if (p.windowLeft >= 0 && i + offset - p.windowLeft > lo)
        lo = i + offset - p.windowLeft;
    }
    lo -= from;
    hi -= from;
  }

  /// Is key j (>= 0) outside [lo, hi), both relative to the same column?
  /// Only a window moves lo off key 0.
  static KGEN_DEVICE bool hidden(int j, int lo, int hi) {
    return j >= hi || (Config::kWindow && j < lo);
  }

  /// The additive term of S (log2 domain) for query i of head hq, key j,
  /// both inside.
  KGEN_DEVICE float bias(const Params &p, int hq, int i, int j) const {
    float x = 0.f;
    if constexpr (Config::kAlibi) {
      const int d = i + offset - j;
      x -= p.alibiSlopes[hq] * float(d < 0 ? -d : d);
    }
    if constexpr (Config::kBias) {
      const TO *bp = static_cast<const TO *>(p.bias) + b * p.strideBias[0] +
                     hq * p.strideBias[1] + i * p.strideBias[2] + j;
      x += Convert<TO>::toFloat(*bp);
    }
    return x * kLog2e;
  }

  /// Keys [lo, hi) that some row of [r0, r0 + kBlockM) may see. A row's
  /// interval only moves right with its query, so the first row's start
  /// and the last row's end bound them.
  KGEN_DEVICE void keyRange(const Params &p, int r0, int &lo, int &hi) const {
    const int rLast = (r0 + Config::kBlockM < rows ? r0 + Config::kBlockM
                                                   : rows) -
                      1;
    int unused;
    visibleKeys(p, queryOf(r0), 0, lo, unused);
    visibleKeys(p, queryOf(rLast), 0, unused, hi);
  }

  /// The key tiles [tile0, tile0 + tiles) of kBlockN keys that the block of
  /// rows [r0, r0 + kBlockM) walks: those some row may see, and with
  /// split-KV this block's (blockIdx.y % kSplits) share of them.
  KGEN_DEVICE void keyTiles(const Params &p, int r0, int &tile0,
                            int &tiles) const {
    int lo, hi;
    keyRange(p, r0, lo, hi);
    tile0 = 0;
    tiles = 0;
    if (hi > lo) {
      tile0 = lo / Config::kBlockN;
      tiles = (hi + Config::kBlockN - 1) / Config::kBlockN - tile0;
    }
    if constexpr (Config::kSplits > 1) {
      const int split = int(blockIdx.y) % Config::kSplits;
      const int per = (tiles + Config::kSplits - 1) / Config::kSplits;
      const int first = split * per;
      tile0 += first;
      tiles = tiles - first < per ? tiles - first : per;
      if (tiles < 0)
        tiles = 0;
    }
  }

  /// Does the tile of keys [n0, n0 + kBlockN) need the element mask for the
  /// rows [r0, r0 + kBlockM)? Yes unless every row sees all of it: the
  /// first row's interval ends earliest, the last row's starts latest.
  KGEN_DEVICE bool tileMasked(const Params &p, int r0, int n0) const {
    int lo, hi, unused;
    visibleKeys(p, queryOf(r0), 0, unused, hi);
    visibleKeys(p, queryOf(r0 + Config::kBlockM - 1), 0, lo, unused);
    return n0 + Config::kBlockN > hi || n0 < lo;
  }
};

/// The row statistics' final step, shared by both vendors: O's scale and
/// the natural-log LSE of a row from its running max (log2 domain) and sum.
KGEN_DEVICE void finishRow(float m, float l, float &inv, float &lse) {
  if (l > 0.f) {
    inv = 1.f / l;
    lse = (m + log2Of(l)) * kLn2;
  } else { // no visible key
    inv = 0.f;
    lse = negInf();
  }
}

template <class T> struct alignas(2 * sizeof(T)) Pair { T x, y; };

/// Writes output rows' values (or, split, their fp32 partials) and LSE.
template <class Config> struct RowWriter {
  using T = typename Config::TO;
  const Params &p;
  const Block<Config> &blk;
  float *partO = nullptr, *partLse = nullptr;

  KGEN_DEVICE RowWriter(const Params &p, const Block<Config> &blk)
      : p(p), blk(blk) {
    if constexpr (Config::kSplits > 1) {
      const int split = int(blockIdx.y) % Config::kSplits;
      const long long row0 =
          ((long long)(split * p.batch + blk.b) * p.headsQ + blk.h) * p.seqlenQ;
      partO = p.partialO + row0 * Config::kHeadDimV;
      partLse = p.partialLse + row0;
    }
  }

  /// Where one (packed) row goes; found once per row, then written by
  /// column.
  struct Row {
    const RowWriter &w;
    long long at; // split: the partial row; else the element offset in O
    int head, query;

    /// Two adjacent values at column d (even), as one access: the row
    /// strides are multiples of 8 elements, so the pair is aligned.
    KGEN_DEVICE void pair(int d, float x, float y) const {
      if constexpr (Config::kSplits > 1) {
        *reinterpret_cast<Pair<float> *>(w.partO + at * Config::kHeadDimV + d) =
            Pair<float>{x, y};
      } else {
        *reinterpret_cast<Pair<T> *>(w.blk.o + at + d) =
            Pair<T>{Convert<T>::fromFloat(x), Convert<T>::fromFloat(y)};
      }
    }

    KGEN_DEVICE void one(int d, float x) const {
      if constexpr (Config::kSplits > 1)
        w.partO[at * Config::kHeadDimV + d] = x;
      else
        w.blk.o[at + d] = Convert<T>::fromFloat(x);
    }

    KGEN_DEVICE void lse(float x) const {
      if constexpr (Config::kSplits > 1) {
        w.partLse[at] = x;
      } else if constexpr (Config::kLse) {
        const long long bOff = Config::kVarlen ? 0 : w.blk.b * w.p.lseStride[0];
        w.p.lse[bOff + head * w.p.lseStride[1] + w.blk.rowQ0 + query] = x;
      }
    }
  };

  /// Packed row r: partial rows are [head][seqlenQ] from the block's first
  /// head, O's rows are blk.oRow(r) from blk.o.
  KGEN_DEVICE Row row(int r) const {
    const int query = blk.queryOf(r), head = blk.headOf(r);
    long long at;
    if constexpr (Config::kSplits > 1)
      at = (long long)(head - blk.h) * p.seqlenQ + query;
    else
      at = blk.oRow(r);
    return Row{*this, at, head, query};
  }
};

#if KGEN_NVIDIA
/// A warp's rows as kFragsM mma tiles of 16; lane (g, t) = (lane/4, lane%4)
/// holds rows g and g + 8 of each, columns 2t, 2t + 1 of every 8-wide tile.
template <class Config> struct WarpAttention {
  using S = Shape<Config>;
  using T = typename S::T;
  static constexpr int kFragsM = S::kWarpM / 16;
  static constexpr int kFragsN = S::kBlockN / 8;
  static constexpr int kFragsD = S::kDv / 8;
  static constexpr int kStepsQk = S::kDqk / 16;
  /// Q's fragments stay in registers up to 128 dims; past that they are
  /// re-read from shared memory each step (registers go to O).
  static constexpr bool kQInRegs = S::kDqk <= 128;

  uint32_t qf[kQInRegs ? kFragsM : 1][kQInRegs ? kStepsQk : 1][4];
  float o[kFragsM][kFragsD][4];
  float m[kFragsM][2], l[kFragsM][2];
  uint32_t sQ;
  int lane, row0; // row0: the warp's first row in the block
  /// fp8 inputs (the wgmma loop): the descale factors, set by the caller
  /// after init. S is scaled by scoreScale (Q's times K's) with the softmax
  /// scale, O by oScale (V's) with 1 / rowsum.
  static constexpr bool kDescaled = sizeof(T) == 1;
  float scoreScale = 1.f, oScale = 1.f;

  KGEN_DEVICE void init(uint32_t sQAddr, int warp, int laneId) {
    sQ = sQAddr;
    lane = laneId;
    row0 = warp * S::kWarpM;
#pragma unroll
    for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
      for (int d = 0; d < kFragsD; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[i][d][e] = 0.f;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m[i][r] = negInf();
        l[i][r] = 0.f;
      }
    }
  }

  /// The ldmatrix.x4 address for the A fragment of rows (r0 .. r0+15),
  /// columns (k0 .. k0+15) of Q: matrices (row half, k half) in the order
  /// (0,0) (1,0) (0,1) (1,1).
  KGEN_DEVICE uint32_t qAddress(int r0, int k0) const {
    const int i = lane / 8, r = lane % 8;
    const int row = r0 + 8 * (i % 2) + r, col = k0 + 8 * (i / 2);
    return sQ + uint32_t(row * S::kStrideQk + col) * uint32_t(sizeof(T));
  }

  KGEN_DEVICE void loadQ() {
    if constexpr (kQInRegs) {
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
#pragma unroll
        for (int kk = 0; kk < kStepsQk; ++kk)
          sm80::ldmatrixX4<false>(qf[i][kk], qAddress(row0 + 16 * i, 16 * kk));
    }
  }

  /// S = Q K^T for the tile at sK ([kBlockN keys][kDqk], padded rows).
  KGEN_DEVICE void scores(uint32_t sK, float (&s)[kFragsM][kFragsN][4]) const {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[i][j][e] = 0.f;
    const int mi = lane / 8, r = lane % 8;
#pragma unroll
    for (int kk = 0; kk < kStepsQk; ++kk) {
      uint32_t a[kFragsM][4];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        if constexpr (kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            a[i][e] = qf[i][kk][e];
        } else {
          sm80::ldmatrixX4<false>(a[i], qAddress(row0 + 16 * i, 16 * kk));
        }
      }
#pragma unroll
      for (int j = 0; j < kFragsN; j += 2) {
        // K rows are keys (n) with d contiguous: matrices (key half, d half)
        // in the order (0,0) (0,1) (1,0) (1,1) give b of key tiles j, j+1.
        const int key = 8 * j + 8 * (mi / 2) + r, col = 16 * kk + 8 * (mi % 2);
        uint32_t bk[4];
        sm80::ldmatrixX4<false>(bk, sK + uint32_t(key * S::kStrideQk + col) *
                                             uint32_t(sizeof(T)));
        const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
#pragma unroll
        for (int i = 0; i < kFragsM; ++i) {
          sm80::mma16816<T>(s[i][j], a[i], b0);
          sm80::mma16816<T>(s[i][j + 1], a[i], b1);
        }
      }
    }
  }

  /// x in the low half, y in the high half, each rounded to nearest even.
  static KGEN_DEVICE uint32_t pack(float x, float y) {
#if KGEN_PTX
    return sm80::pack2<T>(x, y);
#else
    return uint32_t(Convert<T>::fromFloat(x).bits) |
           uint32_t(Convert<T>::fromFloat(y).bits) << 16;
#endif
  }

  /// Scales S into the log2 domain, adds bias, masks, updates the running
  /// max and sum, and rescales O.
  KGEN_DEVICE void softmax(const Params &p, const Block<Config> &blk, int m0,
                           int n0, bool masked,
                           float (&s)[kFragsM][kFragsN][4]) {
    float alpha[kFragsM][2];
    if (probabilities(p, blk, m0, n0, masked, s, alpha))
      rescale(alpha);
  }

  /// O *= alpha, row by row.
  KGEN_DEVICE void rescale(const float (&alpha)[kFragsM][2]) {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int d = 0; d < kFragsD; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[i][d][e] *= alpha[i][e / 2];
  }

  /// softmax without touching O: S becomes P, and alpha receives the factor
  /// O must be scaled by (the wgmma loop applies it once the previous tile's
  /// P V, still running, has completed). Returns whether O needs it (the
  /// same answer on every lane of the warp).
  ///
  /// With kConditionalRescale, a row's reference (m, what its exponentials
  /// subtract) moves only when its maximum exceeds it by more than
  /// kRescaleSlack (log2 units); otherwise P and l stay relative to the old
  /// reference, P <= 2^kRescaleSlack, alpha is 1, and when no row of the
  /// warp moved, O is not rescaled at all (FlashAttention-4's conditional
  /// rescaling). The result does not depend on the reference (O / l and LSE
  /// = m + log2 l cancel it), 16-bit P rounds as finely at 256 as at 1, and
  /// fp32 l and O have room. What it saves on almost every key tile after
  /// the first few is the rescale of O (32 to 128 multiplies a thread); H100,
  /// 2026-11-24: S 4096 and 16384 at D 128 and the seed's D 256 4% faster,
  /// but causal D 64 at S 512 and 1024 on the persistent grid 2% slower, so
  /// only the one-block-per-row-block grid (long sequences) takes it. fp8's
  /// P never does: with a 2- or 3-bit mantissa the row's largest term is
  /// exact only at the exact reference (e5m2 decode went from 0.4-0.8x the
  /// naive error to 1.5-2.3x).
  ///
  /// The mask is a template argument of the body: evaluated under a run-time
  /// flag, every element of every tile paid its compare, column arithmetic
  /// and select (predicated, not skipped; seen in the wgmma loop's SASS).
  KGEN_DEVICE bool probabilities(const Params &p, const Block<Config> &blk,
                                 int m0, int n0, bool masked,
                                 float (&s)[kFragsM][kFragsN][4],
                                 float (&alpha)[kFragsM][2]) {
    if (masked)
      return probabilitiesOf<true>(p, blk, m0, n0, s, alpha);
    return probabilitiesOf<false>(p, blk, m0, n0, s, alpha);
  }

  static constexpr bool kConditionalRescale =
      !kDescaled && !Config::kPersistent;
  static constexpr float kRescaleSlack = 8.f;

  template <bool kMasked>
  KGEN_DEVICE bool
  probabilitiesOf(const Params &p, const Block<Config> &blk, int m0, int n0,
                  float (&s)[kFragsM][kFragsN][4], float (&alpha)[kFragsM][2]) {
    const int g = lane / 4, t = lane % 4;
    // Without bias terms the scale is folded into the exponent's FMA:
    // max(scale * s) = scale * max(s) for the positive scale the runtime
    // requires, so S stays raw until exp2(s * scale - m).
    constexpr bool kFold = !Config::kAlibi && !Config::kBias;
    const float scaleLog2 = kDescaled ? p.scaleLog2 * scoreScale : p.scaleLog2;
    const float expScale = kFold ? scaleLog2 : 1.f;
    bool moved = false; // kConditionalRescale: some row's reference moved
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = m0 + row0 + 16 * i + 8 * r + g;
        const int query = blk.queryOf(row);
        // The visible keys relative to this lane's first column, n0 + 2t.
        int lo = 0, hi = 0;
        if constexpr (kMasked)
          blk.visibleKeys(p, query, n0 + 2 * t, lo, hi);
        float mx = negInf();
#pragma unroll
        for (int j = 0; j < kFragsN; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int col = n0 + 8 * j + 2 * t + c;
            float x = s[i][j][2 * r + c];
            if constexpr (!kFold) {
              x *= scaleLog2;
              if (row < blk.rows && col < blk.seqK)
                x += blk.bias(p, blk.headOf(row), query, col);
            }
            if (kMasked && blk.hidden(8 * j + c, lo, hi))
              x = negInf();
            s[i][j][2 * r + c] = x;
            mx = maxOf(mx, x);
          }
        mx = maxOf(mx, shuffleXor(mx, 1));
        mx = maxOf(mx, shuffleXor(mx, 2));
        if constexpr (kFold)
          mx *= scaleLog2; // -inf stays -inf
        if constexpr (kConditionalRescale) {
          // Past the slack only (-inf + slack: any max).
          alpha[i][r] = 1.f;
          if (mx > m[i][r] + kRescaleSlack) {
            alpha[i][r] = exp2Of(m[i][r] - mx);
            m[i][r] = mx;
            moved = true;
          }
        } else { // exact (the slack-0 form computes the same, in other code)
          const float mNew = maxOf(m[i][r], mx);
          alpha[i][r] = exp2Of(m[i][r] - (mNew == negInf() ? 0.f : mNew));
          m[i][r] = mNew;
        }
        const float ref = m[i][r] == negInf() ? 0.f : m[i][r];
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kFragsN; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            // -inf (masked) gives -inf, exp2 0.
            const float e = exp2Of(fmaOf(s[i][j][2 * r + c], expScale, -ref));
            s[i][j][2 * r + c] = e;
            sum += e;
          }
        l[i][r] = l[i][r] * alpha[i][r] + sum; // this lane's part of the row
      }
    if constexpr (kConditionalRescale)
      return anyLane(moved);
    return true;
  }

  KGEN_DEVICE void pv(uint32_t sV, const float (&s)[kFragsM][kFragsN][4]) {
    const int mi = lane / 8, r = lane % 8;
#pragma unroll
    for (int kk = 0; kk < kFragsN / 2; ++kk) {
      // P's 16x16 A fragment over keys 16kk.. from two S tiles.
      uint32_t a[kFragsM][4];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        a[i][0] = pack(s[i][2 * kk][0], s[i][2 * kk][1]);
        a[i][1] = pack(s[i][2 * kk][2], s[i][2 * kk][3]);
        a[i][2] = pack(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]);
        a[i][3] = pack(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
      }
#pragma unroll
      for (int d = 0; d < kFragsD; d += 2) {
        // V rows are keys (k) with d contiguous: .trans, matrices (d half,
        // key half) in the order (0,0) (0,1) (1,0) (1,1).
        const int key = 16 * kk + 8 * (mi % 2) + r, col = 8 * d + 8 * (mi / 2);
        uint32_t bv[4];
        sm80::ldmatrixX4<true>(bv, sV + uint32_t(key * S::kStrideV + col) *
                                            uint32_t(sizeof(T)));
        const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
#pragma unroll
        for (int i = 0; i < kFragsM; ++i) {
          sm80::mma16816<T>(o[i][d], a[i], b0);
          sm80::mma16816<T>(o[i][d + 1], a[i], b1);
        }
      }
    }
  }

  /// Row r (0: g, 1: g + 8) of tile i: its sum over the lane quad, then
  /// O's scale and the LSE (finishRow).
  KGEN_DEVICE void finishRow(int i, int r, float &inv, float &lse) const {
    float sum = l[i][r];
    sum += shuffleXor(sum, 1);
    sum += shuffleXor(sum, 2);
    attention::finishRow(m[i][r], sum, inv, lse);
    if constexpr (kDescaled)
      inv *= oScale;
  }

  KGEN_DEVICE void store(const RowWriter<Config> &w, const Block<Config> &blk,
                         int m0) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float inv, lse;
        finishRow(i, r, inv, lse);
        const int row = m0 + row0 + 16 * i + 8 * r + g;
        if (row >= blk.rows)
          continue;
        const auto out = w.row(row);
#pragma unroll
        for (int d = 0; d < kFragsD; ++d)
          out.pair(8 * d + 2 * t, o[i][d][2 * r] * inv,
                   o[i][d][2 * r + 1] * inv);
        if (t == 0)
          out.lse(lse);
      }
  }
};
#else
/// A wavefront's rows as kFragsM MFMA tiles of 32, computed transposed:
/// S^T = K Q^T leaves lane l with query l % 32 and, per 32-key tile, keys
/// 8*(v/4) + 4*(l/32) + v%4 (v = 0..15) -- exactly P^T's B operand for
/// O^T = V^T P^T, whose result again gives lane l the row of query l % 32.
/// Row statistics are then per lane, reduced over the lane pair l, l ^ 32.
template <class Config> struct WarpAttention {
  using S = Shape<Config>;
  using T = typename S::T;
  static constexpr int kFragsM = S::kWarpM / 32;
  static constexpr int kFragsN = S::kBlockN / 32;
  static constexpr int kFragsD = S::kDv / 32;
  static constexpr int kStepsQk = S::kDqk / 8;

  cdna::u16x4 qf[kFragsM][kStepsQk];
  cdna::f32x16 o[kFragsM][kFragsD];
  float m[kFragsM], l[kFragsM];
  const T *sQ;
  int lane, row0;

  KGEN_DEVICE void init(const T *sQPtr, int warp, int laneId) {
    sQ = sQPtr;
    lane = laneId;
    row0 = warp * S::kWarpM;
#pragma unroll
    for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
      for (int d = 0; d < kFragsD; ++d)
        o[i][d] = cdna::f32x16{};
      m[i] = negInf();
      l[i] = 0.f;
    }
  }

  KGEN_DEVICE void loadQ() {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int kk = 0; kk < kStepsQk; ++kk)
        qf[i][kk] = *reinterpret_cast<const cdna::u16x4 *>(
            sQ + (row0 + 32 * i + lane % 32) * S::kStrideQk + 8 * kk +
            4 * (lane / 32));
  }

  KGEN_DEVICE void scores(const T *sK,
                          cdna::f32x16 (&s)[kFragsM][kFragsN]) const {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
        s[i][j] = cdna::f32x16{};
#pragma unroll
    for (int kk = 0; kk < kStepsQk; ++kk)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j) {
        const cdna::u16x4 a = *reinterpret_cast<const cdna::u16x4 *>(
            sK + (32 * j + lane % 32) * S::kStrideQk + 8 * kk +
            4 * (lane / 32));
#pragma unroll
        for (int i = 0; i < kFragsM; ++i)
          s[i][j] = cdna::mfma32x32x8<T>(a, qf[i][kk], s[i][j]);
      }
  }

  /// The mask is a template argument of the body, as in the NVIDIA
  /// probabilities(): under a run-time flag every element pays for it.
  KGEN_DEVICE void softmax(const Params &p, const Block<Config> &blk, int m0,
                           int n0, bool masked,
                           cdna::f32x16 (&s)[kFragsM][kFragsN]) {
    if (masked)
      softmaxOf<true>(p, blk, m0, n0, s);
    else
      softmaxOf<false>(p, blk, m0, n0, s);
  }

  template <bool kMasked>
  KGEN_DEVICE void softmaxOf(const Params &p, const Block<Config> &blk, int m0,
                             int n0, cdna::f32x16 (&s)[kFragsM][kFragsN]) {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i) {
      const int row = m0 + row0 + 32 * i + lane % 32;
      const int query = blk.queryOf(row);
      // The visible keys relative to this lane's first column.
      int lo = 0, hi = 0;
      if constexpr (kMasked)
        blk.visibleKeys(p, query, n0 + 4 * (lane / 32), lo, hi);
      float mx = negInf();
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          const int rel = 32 * j + 8 * (e / 4) + e % 4;
          const int col = n0 + 4 * (lane / 32) + rel;
          float x = s[i][j][e] * p.scaleLog2;
          if constexpr (Config::kAlibi || Config::kBias) {
            if (row < blk.rows && col < blk.seqK)
              x += blk.bias(p, blk.headOf(row), query, col);
          }
          if (kMasked && blk.hidden(rel, lo, hi))
            x = negInf();
          s[i][j][e] = x;
          mx = maxOf(mx, x);
        }
      mx = maxOf(mx, shuffleXor(mx, 32));
      const float mNew = maxOf(m[i], mx);
      const float ref = mNew == negInf() ? 0.f : mNew;
      const float alpha = exp2Of(m[i] - ref);
      m[i] = mNew;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          const float x = exp2Of(s[i][j][e] - ref);
          s[i][j][e] = x;
          sum += x;
        }
      l[i] = l[i] * alpha + sum;
#pragma unroll
      for (int d = 0; d < kFragsD; ++d)
#pragma unroll
        for (int e = 0; e < 16; ++e)
          o[i][d][e] *= alpha;
    }
  }

  KGEN_DEVICE void pv(const T *sV, const cdna::f32x16 (&s)[kFragsM][kFragsN]) {
    const uint16_t *v16 = reinterpret_cast<const uint16_t *>(sV);
#pragma unroll
    for (int j = 0; j < kFragsN; ++j)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int key = 32 * j + 8 * kk + 4 * (lane / 32);
        cdna::u16x4 b[kFragsM];
#pragma unroll
        for (int i = 0; i < kFragsM; ++i)
          b[i] = cdna::u16x4{Convert<T>::fromFloat(s[i][j][4 * kk]).bits,
                             Convert<T>::fromFloat(s[i][j][4 * kk + 1]).bits,
                             Convert<T>::fromFloat(s[i][j][4 * kk + 2]).bits,
                             Convert<T>::fromFloat(s[i][j][4 * kk + 3]).bits};
#pragma unroll
        for (int d = 0; d < kFragsD; ++d) {
          const int col = 32 * d + lane % 32;
          const cdna::u16x4 a{v16[key * S::kStrideV + col],
                              v16[(key + 1) * S::kStrideV + col],
                              v16[(key + 2) * S::kStrideV + col],
                              v16[(key + 3) * S::kStrideV + col]};
#pragma unroll
          for (int i = 0; i < kFragsM; ++i)
            o[i][d] = cdna::mfma32x32x8<T>(a, b[i], o[i][d]);
        }
      }
  }

  KGEN_DEVICE void store(const RowWriter<Config> &w, const Block<Config> &blk,
                         int m0) {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i) {
      float sum = l[i];
      sum += shuffleXor(sum, 32);
      float inv, lse;
      finishRow(m[i], sum, inv, lse);
      const int row = m0 + row0 + 32 * i + lane % 32;
      if (row >= blk.rows)
        continue;
      const auto out = w.row(row);
#pragma unroll
      for (int d = 0; d < kFragsD; ++d)
#pragma unroll
        for (int e = 0; e < 16; ++e)
          out.one(32 * d + 8 * (e / 4) + 4 * (lane / 32) + e % 4,
                  o[i][d][e] * inv);
      if (lane < 32)
        out.lse(lse);
    }
  }
};
#endif

/// The main kernel's body. Launch: grid (ceil(seqlenQ / kBlockM), headsQ *
/// kSplits, batch), with kPackGqa (ceil(seqlenQ * g / kBlockM), headsKv *
/// kSplits, batch); kThreads threads, kSmemBytes of dynamic shared memory.
template <class Config> KGEN_DEVICE void run(const Params &p) {
  using S = Shape<Config>;
  using T = typename S::T;
  constexpr int kStages = Config::kStages;
  waitForPreviousGrid(); // launched overlapping the kernel before it
  if constexpr (Config::kSplits > 1) // the combine kernel may launch
    allowNextGrid();

  Block<Config> blk;
  if (!blk.init(p))
    return;
  const int m0 = int(blockIdx.x) * Config::kBlockM;
  const unsigned warp = threadIdx.x / unsigned(kWaveSize);
  const int lane = int(threadIdx.x % unsigned(kWaveSize));

  int tile0, tiles;
  blk.keyTiles(p, m0, tile0, tiles);

  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  T *const sQ = reinterpret_cast<T *>(kgen_smem);
  T *const sK = sQ + S::kQElems;
  T *const sV = sK + kStages * S::kKElems;

  const int rowsQ = blk.rows - m0;
  auto loadQ = [&] {
    loadRows<Config, Config::kBlockM, S::kDqk>(
        sQ, [&](int r) { return blk.q + blk.qRow(m0 + r); }, rowsQ);
  };
  auto loadKV = [&](int tile, bool withV) {
    const int n0 = (tile0 + tile) * Config::kBlockN;
    const int stage = tile % kStages;
    loadTile<Config, Config::kBlockN, S::kDqk>(sK + stage * S::kKElems,
                                               blk.k + n0 * blk.strideK,
                                               blk.strideK, blk.seqK - n0);
    if (withV)
      loadTile<Config, Config::kBlockN, S::kDv>(sV + stage * S::kVElems,
                                                blk.v + n0 * blk.strideV,
                                                blk.strideV, blk.seqK - n0);
  };
  auto loadV = [&](int tile) {
    const int n0 = (tile0 + tile) * Config::kBlockN;
    loadTile<Config, Config::kBlockN, S::kDv>(sV + tile % kStages * S::kVElems,
                                              blk.v + n0 * blk.strideV,
                                              blk.strideV, blk.seqK - n0);
  };

  WarpAttention<Config> wa;
#if KGEN_NVIDIA
  wa.init(sm80::smemAddress(sQ), int(warp), lane);
  // Commit groups: Q, then per tile K+V (kPreloadV) or K, V. Every group is
  // committed even when empty, so the waits below count groups exactly.
  loadQ();
  sm80::cpAsyncCommit();
  constexpr int kGroupsPerTile = Config::kPreloadV ? 1 : 2;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < tiles)
      loadKV(st, Config::kPreloadV);
    sm80::cpAsyncCommit();
    if constexpr (!Config::kPreloadV) {
      if (st < tiles)
        loadV(st);
      sm80::cpAsyncCommit();
    }
  }
  // Q has landed once the groups of the first tile alone may be pending.
  sm80::cpAsyncWait<(kStages - 1) * kGroupsPerTile>();
  __syncthreads();
  wa.loadQ();
  const uint32_t aK = sm80::smemAddress(sK), aV = sm80::smemAddress(sV);
  for (int it = 0; it < tiles; ++it) {
    // Tile it's K (and V with kPreloadV) has landed when the groups of the
    // later tiles in flight (and, without it, V's own group) remain.
    sm80::cpAsyncWait<(kStages - 2) * kGroupsPerTile + kGroupsPerTile - 1>();
    // Visible to every warp; and every warp is done with tile it - 1, whose
    // stage the copies below refill.
    __syncthreads();
    const int next = it + kStages - 1;
    if (next < tiles)
      loadKV(next, Config::kPreloadV);
    sm80::cpAsyncCommit();
    if constexpr (!Config::kPreloadV) {
      if (next < tiles)
        loadV(next);
      sm80::cpAsyncCommit();
    }
    const int stage = it % kStages;
    const int n0 = (tile0 + it) * Config::kBlockN;
    float s[WarpAttention<Config>::kFragsM][WarpAttention<Config>::kFragsN][4];
    wa.scores(aK + uint32_t(stage * S::kKElems * int(sizeof(T))), s);
    wa.softmax(p, blk, m0, n0, blk.tileMasked(p, m0, n0), s);
    if constexpr (!Config::kPreloadV) {
      sm80::cpAsyncWait<(kStages - 1) * kGroupsPerTile>();
      __syncthreads();
    }
    wa.pv(aV + uint32_t(stage * S::kVElems * int(sizeof(T))), s);
  }
  sm80::cpAsyncWait<0>();
#else
  wa.init(sQ, int(warp), lane);
  loadQ();
  for (int st = 0; st < kStages - 1 && st < tiles; ++st)
    loadKV(st, true);
  __syncthreads();
  wa.loadQ();
  for (int it = 0; it < tiles; ++it) {
    if constexpr (kStages == 1) {
      // One buffer (D = 256 in 64 KiB of LDS): every wave is done with the
      // previous tile before it is overwritten, and the new one is complete
      // before anyone reads it.
      if (it > 0)
        __syncthreads();
      loadKV(it, true);
      __syncthreads();
    }
    const int stage = it % kStages;
    const int n0 = (tile0 + it) * Config::kBlockN;
    cdna::f32x16 s[WarpAttention<Config>::kFragsM]
                  [WarpAttention<Config>::kFragsN];
    wa.scores(sK + stage * S::kKElems, s);
    wa.softmax(p, blk, m0, n0, blk.tileMasked(p, m0, n0), s);
    wa.pv(sV + stage * S::kVElems, s);
    // The next tile goes into the stage every wave left at the last barrier.
    if constexpr (kStages > 1) {
      const int next = it + kStages - 1;
      if (next < tiles)
        loadKV(next, true);
      __syncthreads();
    }
  }
#endif
  wa.store(RowWriter<Config>(p, blk), blk, m0);
}

/// Merges the split-KV partials of one row: block (row, head, batch),
/// threads over headDimV. Empty splits (LSE -inf) get weight 0; a row no
/// split saw ends as O = 0, LSE = -inf.
///
/// The splits' LSEs go through shared memory (kSplits fp32, the launch's
/// dynamic shared memory: attentionCombineLaunchDims), read by all threads
/// at once, and the partial O loads of the weighted sum do not depend on
/// each other: a thread's loads are all in flight together. (The loop it
/// replaces read LSE then O split by split behind a branch, two dependent
/// L2 round trips per split: 21 us of a 25 us decode call on an H200 at
/// 32 splits.)
template <class Config> KGEN_DEVICE void combine(const Params &p) {
  using T = typename Config::TO;
  constexpr int kSplits = Config::kSplits, kThreads = Config::kCombineThreads;
  const int i = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  int seqQ = p.seqlenQ, rowQ0 = 0;
  if constexpr (Config::kVarlen) {
    rowQ0 = p.cuSeqlensQ[b];
    seqQ = p.cuSeqlensQ[b + 1] - rowQ0;
  }
  if (i >= seqQ) // the whole block: i is blockIdx.x
    return;
  // Once every block of this one has started (the trigger's condition),
  // the next kernel on the stream may start its blocks' set-up beside
  // them; it waits for this one before it reads memory. Its launch then
  // hides behind this one. B1 decode on an H100, with the main kernel's
  // set-up before its wait (attention_sm90.h run): 10.7-10.8 -> 10.1 us at
  // H32/8 Sk4096, 8.5-8.6 -> 7.8 at H32/4.
  allowNextGrid();
  // Launched to overlap the main kernel (attentionCombineLaunchDims): the
  // partials are its.
  waitForPreviousGrid();
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  float *const weight = reinterpret_cast<float *>(kgen_smem);
  const long long stride = (long long)p.batch * p.headsQ * p.seqlenQ;
  const long long row = ((long long)b * p.headsQ + h) * p.seqlenQ + i;
  for (int s = int(threadIdx.x); s < kSplits; s += kThreads)
    weight[s] = p.partialLse[s * stride + row];
  __syncthreads();
  float mx = negInf();
  for (int s = 0; s < kSplits; ++s)
    mx = maxOf(mx, weight[s]);
  __syncthreads(); // every thread has read the LSEs before they turn weights
  // An empty split (or an empty row, mx -inf too) weighs 0.
  for (int s = int(threadIdx.x); s < kSplits; s += kThreads) {
    const float lse = weight[s];
    weight[s] = lse == negInf() ? 0.f : exp2Of((lse - mx) * kLog2e);
  }
  __syncthreads();
  constexpr int kPerThread = (Config::kHeadDimV + kThreads - 1) / kThreads;
  float total = 0.f, acc[kPerThread] = {};
#pragma unroll 16
  for (int s = 0; s < kSplits; ++s) {
    const float w = weight[s];
    total += w;
    const float *po = p.partialO + (s * stride + row) * Config::kHeadDimV;
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) {
      const int d = int(threadIdx.x) + e * kThreads;
      // An empty split's partial need not be finite: select, not scale.
      if (d < Config::kHeadDimV) {
        const float x = po[d];
        acc[e] += w > 0.f ? w * x : 0.f;
      }
    }
  }
  const float inv = total > 0.f ? 1.f / total : 0.f;
  const long long bq = Config::kVarlen ? 0 : b;
  T *o = static_cast<T *>(p.o) + bq * p.strideO[0] +
         (rowQ0 + i) * p.strideO[1] + h * p.strideO[2];
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const int d = int(threadIdx.x) + e * kThreads;
    if (d < Config::kHeadDimV)
      o[d] = Convert<T>::fromFloat(acc[e] * inv);
  }
  if constexpr (Config::kLse) {
    if (threadIdx.x == 0) {
      const long long bOff = Config::kVarlen ? 0 : b * p.lseStride[0];
      p.lse[bOff + h * p.lseStride[1] + rowQ0 + i] =
          total > 0.f ? mx + log2Of(total) * kLn2 : negInf();
    }
  }
}

} // namespace kgen::attention
