//===- gemm.h - Tiled GEMM, C = epilogue(op(A)*op(B)) ----------*- C++ -*-===//
//
// One thread block computes a kBlockM x kBlockN tile of C; its warps
// (wavefronts on AMD) form a kWarpsM x kWarpsN grid, each owning a
// kWarpM x kWarpN sub-tile of fp32 accumulators in registers. K is walked in
// kBlockK slices through kStages shared-memory buffers:
//
//   NVIDIA (sm_80, sm_90a)             AMD (gfx90a, gfx942)
//   cp.async global -> smem,           global -> registers -> LDS, the next
//   kStages - 1 slices in flight       slice in flight during the MFMAs
//   ldmatrix (.trans for the tiles     LDS reads of 4 k-values per lane
//   not k-major) -> mma.sync m16n8k16  -> MFMA 32x32x8, wave64
//   (f32 through TF32: 32-bit shared
//   loads -> mma.sync m16n8k8 .tf32)
//
// Each operand tile keeps its global contiguous dimension contiguous in
// shared memory, so every layout copies rows as they are; the fragment loads
// absorb the layout (.trans on NVIDIA, strided reads on AMD). The generated
// source fixes everything through Config (see the contract in the emitter);
// the accumulators leave through the fused epilogue (epilogue.h), batch z
// of a strided batch being blockIdx.z.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"
#if KGEN_NVIDIA
#include "kgen/common/mma_sm80.h"
#else
#include "kgen/common/mfma_cdna.h"
#endif
#include "kgen/gemm/epilogue.h"
#include "kgen/gemm/fixup.h"
#include "kgen/gemm/params.h"

namespace kgen::gemm {

/// The block's tiling, derived from Config once.
template <class Config> struct Shape {
  using T = typename Config::TypeA;
  static constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN,
                       kBlockK = Config::kBlockK, kStages = Config::kStages;
  static constexpr int kWarpM = kBlockM / Config::kWarpsM;
  static constexpr int kWarpN = kBlockN / Config::kWarpsN;
  static constexpr int kThreads = Config::kThreads;
  // A 'N' and B 'T' keep K contiguous; A 'T' and B 'N' keep M or N contiguous.
  static constexpr bool kAKMajor = !Config::kTransA;
  static constexpr bool kBKMajor = Config::kTransB;

  static_assert(IsSame<T, typename Config::TypeB>::value,
                "A and B share one element type");
  /// f32 inputs run through TF32 (the problem's explicit tf32 flag).
  static constexpr bool kTf32 = IsSame<T, float>::value;
  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value || kTf32,
                "A and B are bf16 or f16, or f32 through TF32");
  static_assert(!kTf32 || (KGEN_NVIDIA && !Config::kSwizzle),
                "TF32 runs on NVIDIA (mma.sync .tf32) with padded shared "
                "memory (the swizzle moves chunks of 2-byte elements)");
  static_assert(kThreads == Config::kWarpsM * Config::kWarpsN * kWaveSize,
                "kThreads = kWarpsM * kWarpsN * wave size");
  static_assert(kStages >= 2, "the pipeline needs two buffers at least");
  static_assert(kBlockK % 16 == 0, "kBlockK is a multiple of 16");
#if KGEN_NVIDIA
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0,
                "warp tiles are multiples of 16 (mma 16x8, ldmatrix x4 of B)");
#else
  static_assert(kWarpM % 32 == 0 && kWarpN % 32 == 0,
                "wave tiles are multiples of 32 (MFMA 32x32)");
#endif
};

/// One stage of one operand tile in shared memory: kRows x kCols elements of
/// 2 bytes, kCols being the operand's contiguous dimension in global memory.
/// A row is 16-byte aligned (cp.async 16 B, ldmatrix rows). Bank conflicts
/// are avoided either by padding rows by kPad elements or by XOR-swizzling
/// the 16-byte chunks of a row; the swizzle key changes every
/// kRowsPerLine rows, the rows that share one 128-byte bank line, so that
/// the 8 rows an ldmatrix reads land in 8 distinct 16-byte bank groups
/// whatever the row length.
template <int kRows_, int kCols_, int kPad, bool kSwizzle> struct SmemTile {
  static constexpr int kRows = kRows_, kCols = kCols_;
  static constexpr int kStride = kCols + kPad;
  static constexpr int kElems = kRows * kStride;
  static constexpr int kChunks = kCols / 8;
  static constexpr int kRowsPerLine = kChunks >= 8 ? 1 : 8 / kChunks;
  static constexpr int kLineShift = kRowsPerLine == 1   ? 0
                                    : kRowsPerLine == 2 ? 1
                                    : kRowsPerLine == 4 ? 2
                                                        : 3;

  static_assert(kCols % 8 == 0 && kPad % 8 == 0,
                "shared-memory rows must be a whole number of 16-byte chunks");
  static_assert(!kSwizzle || (kPad == 0 && kChunks >= 2 &&
                              (kChunks & (kChunks - 1)) == 0),
                "swizzle needs unpadded rows of a power-of-two >= 2 chunks");

  /// Element offset of (row, col). Whole chunks move, so an aligned vector
  /// of up to 8 elements stays contiguous.
  static KGEN_DEVICE int offset(int row, int col) {
    if constexpr (kSwizzle) {
      // Shifts and masks rather than / and %: the compiler then sees that a
      // constant row step that is a multiple of the key period leaves the
      // key unchanged, and folds it into an immediate offset.
      const int chunk = (col >> 3) ^ ((row >> kLineShift) & (kChunks - 1));
      return row * kCols + (chunk << 3) + (col & 7);
    } else {
      return row * kStride + col;
    }
  }
};

/// Moves the k-slices of one operand from global to shared memory. The
/// operand is kOuter (kBlockM for A, kBlockN for B) by kBlockK per slice,
/// stored k-major (K contiguous) or not; kVec elements per access, each thread
/// taking kIters vectors, consecutive threads consecutive vectors of a row.
/// Out-of-bounds vectors read as zero: the contract puts every vector wholly
/// inside or outside the matrix, so its first element decides.
template <class Config, bool kKMajor, int kOuter, int kVec, bool kCheckOuter>
struct OperandLoader {
  using T = typename Config::TypeA;
  static constexpr int kBlockK = Config::kBlockK;
  using Tile = SmemTile<kKMajor ? kOuter : kBlockK, kKMajor ? kBlockK : kOuter,
                        Config::kSmemPad, Config::kSwizzle>;
  static constexpr bool kCheckRows = kKMajor ? kCheckOuter : Config::kCheckK;
  static constexpr bool kCheckCols = kKMajor ? Config::kCheckK : kCheckOuter;
  static constexpr int kVecsPerRow = Tile::kCols / kVec;
  static constexpr int kVecs = Tile::kRows * kVecsPerRow;
  static constexpr int kIters =
      (kVecs + Config::kThreads - 1) / Config::kThreads;
  // The limits make kVecs a multiple of kThreads; when not, the last
  // iteration leaves some threads idle.
  static constexpr bool kRagged = kVecs % Config::kThreads != 0;
  using Vec = Bytes<int(sizeof(T)) * kVec>;

  static_assert(kVec == 1 || kVec == 2 || kVec == 4 || kVec == 8,
                "vector widths are 1, 2, 4 or 8 elements");
  static_assert(sizeof(Vec) <= 16, "vectors are at most 16 bytes");

  // Vector i of a thread sits at (row0, col0) + position(i) in the tile, the
  // offsets being compile-time constants whenever kThreads and kVecsPerRow
  // divide one another (the usual powers of two); the address is then one
  // per-thread pointer plus constants and multiples of ld, which keeps the
  // register count low when a thread moves many narrow vectors.
  static constexpr bool kRowsPerPass = Config::kThreads % kVecsPerRow == 0;
  static constexpr bool kPassesPerRow = kVecsPerRow % Config::kThreads == 0;

  const T *matrix;
  long long ld;
  const T *base; // this thread's first vector in slice 0
  int row0, col0;
  int rowsLeft, colsLeft; // matrix extent beyond the origin of slice 0

  /// outer0: the block's first row of A (m) or column of B (n).
  KGEN_DEVICE OperandLoader(const T *matrix, long long ld, int outer0,
                            int outerSize, int size_k)
      : matrix(matrix), ld(ld) {
    if constexpr (kRowsPerPass) {
      row0 = int(threadIdx.x / unsigned(kVecsPerRow));
      col0 = int(threadIdx.x % unsigned(kVecsPerRow)) * kVec;
    } else {
      row0 = 0;
      col0 = int(threadIdx.x) * kVec;
    }
    rowsLeft = kKMajor ? outerSize - outer0 : size_k;
    colsLeft = kKMajor ? size_k : outerSize - outer0;
    base = matrix +
           (kKMajor ? (outer0 + row0) * ld + col0 : row0 * ld + outer0 + col0);
  }

  /// Tile coordinates of this thread's i-th vector relative to (row0, col0);
  /// false when the thread has no i-th vector.
  static KGEN_DEVICE bool position(int i, int &row, int &col) {
    if constexpr (kRowsPerPass) {
      row = i * (Config::kThreads / kVecsPerRow);
      col = 0;
    } else if constexpr (kPassesPerRow) {
      constexpr int kPasses = kVecsPerRow / Config::kThreads;
      row = i / kPasses;
      col = i % kPasses * Config::kThreads * kVec;
    } else { // general case: from the flat index, relative to col0
      const int v = i * Config::kThreads + int(threadIdx.x);
      row = v / kVecsPerRow;
      col = v % kVecsPerRow * kVec - int(threadIdx.x) * kVec;
      return v < kVecs;
    }
    return !kRagged || i * Config::kThreads + int(threadIdx.x) < kVecs;
  }

  /// Address of this thread's vector at (row0 + row, col0 + col) of slice
  /// kt, and whether it lies inside the matrix.
  KGEN_DEVICE const T *element(int kt, int row, int col, bool &inside) const {
    const int k0 = kt * kBlockK;
    const int r = row0 + row, c = col0 + col;
    inside = true;
    if constexpr (kCheckRows)
      inside = inside && r < rowsLeft - (kKMajor ? 0 : k0);
    if constexpr (kCheckCols)
      inside = inside && c < colsLeft - (kKMajor ? k0 : 0);
    return base + (kKMajor ? k0 : k0 * ld) + row * ld + col;
  }

#if KGEN_NVIDIA
  /// Issues the copies of slice kt into the stage at smem (no commit).
  /// 2-byte vectors have no cp.async form; they are copied synchronously,
  /// which the pipeline tolerates (the barrier before use orders them).
  KGEN_DEVICE void copyAsync(T *smem, int kt) const {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int row, col;
      if (!position(i, row, col))
        continue;
      bool inside;
      const T *src = element(kt, row, col, inside);
      T *dst = smem + Tile::offset(row0 + row, col0 + col);
      if constexpr (sizeof(Vec) >= 4) {
        sm80::cpAsync<int(sizeof(Vec))>(sm80::smemAddress(dst),
                                        inside ? src : matrix, inside);
      } else {
        *reinterpret_cast<Vec *>(dst) =
            inside ? *reinterpret_cast<const Vec *>(src) : Vec{};
      }
    }
  }
#else
  Vec staged[kIters];

  /// Loads slice kt into registers; store() later puts it in LDS, so the
  /// global latency overlaps the MFMAs in between.
  KGEN_DEVICE void fetch(int kt) {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int row, col;
      if (!position(i, row, col))
        continue;
      bool inside;
      const T *src = element(kt, row, col, inside);
      staged[i] = inside ? *reinterpret_cast<const Vec *>(src) : Vec{};
    }
  }

  KGEN_DEVICE void store(T *smem) const {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      int row, col;
      if (!position(i, row, col))
        continue;
      *reinterpret_cast<Vec *>(smem + Tile::offset(row0 + row, col0 + col)) =
          staged[i];
    }
  }
#endif
};

#if KGEN_NVIDIA
/// A warp's kWarpM x kWarpN accumulators as (kWarpM/16) x (kWarpN/8) mma
/// tiles of 16x8, fed by ldmatrix.x4: one per 16x16 block of A, one per
/// 16x16 block of B (two n8 tiles).
template <class Config, class TileA, class TileB> struct WarpMma {
  using Tile = Shape<Config>;
  using T = typename Tile::T;
  static constexpr int kFragsM = Tile::kWarpM / 16;
  static constexpr int kFragsN = Tile::kWarpN / 8;

  /// mma.sync adds into its accumulator with truncation, an error that grows
  /// with K. With a bf16/f16 output the final rounding hides it; with an fp32
  /// output it is the result's largest error (2-4x a plain fp32 loop at
  /// K = 2048-4096 on an H200). There each mma starts from zero and its
  /// 16-term sum is added with a round-to-nearest FADD, as DeepGEMM promotes.
  static constexpr bool kPromote = IsSame<typename Config::TypeC, float>::value;

  float acc[kFragsM][kFragsN][4];

  /// The accumulators as one flat list (split-K moves them as such).
  static constexpr int kAccum = kFragsM * kFragsN * 4;
  KGEN_DEVICE float get(int e) const {
    return acc[e / (kFragsN * 4)][e / 4 % kFragsN][e % 4];
  }
  KGEN_DEVICE void set(int e, float x) {
    acc[e / (kFragsN * 4)][e / 4 % kFragsN][e % 4] = x;
  }

  KGEN_DEVICE WarpMma() {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[i][j][e] = 0.f;
  }

  /// Shared address this lane gives ldmatrix.x4 for the 16 (outer) x 16 (k)
  /// block at (o0, k0). Lane 8*i + r addresses row r of matrix i; matrix i
  /// covers outer half oHalf and k half kHalf. The A fragment wants
  /// (o,k) halves in the order (0,0) (1,0) (0,1) (1,1) (a0..a3); two B
  /// fragments want (0,0) (0,1) (1,0) (1,1) (b0, b1 of n8 tile 0, then 1).
  /// k-major tiles hold outer rows (plain ldmatrix); the others hold k rows,
  /// which ldmatrix.trans turns into the same fragments.
  template <class SmemTileT, bool kKMajor, bool kOuterFirst>
  static KGEN_DEVICE uint32_t fragAddress(uint32_t tile, int o0, int k0,
                                          int lane) {
    const int i = lane / 8, r = lane % 8;
    const int o = o0 + 8 * (kOuterFirst ? i % 2 : i / 2);
    const int k = k0 + 8 * (kOuterFirst ? i / 2 : i % 2);
    const int off =
        kKMajor ? SmemTileT::offset(o + r, k) : SmemTileT::offset(k + r, o);
    return tile + uint32_t(off) * uint32_t(sizeof(T));
  }

  /// Accumulates one kBlockK slice from the stage at shared addresses sA, sB.
  KGEN_DEVICE void step(uint32_t sA, uint32_t sB, int warpM0, int warpN0,
                        int lane) {
#pragma unroll
    for (int k0 = 0; k0 < Tile::kBlockK; k0 += 16) {
      uint32_t a[kFragsM][4], b[kFragsN][2];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
        sm80::ldmatrixX4<!Tile::kAKMajor>(
            a[i], fragAddress<TileA, Tile::kAKMajor, true>(sA, warpM0 + 16 * i,
                                                           k0, lane));
#pragma unroll
      for (int j = 0; j < kFragsN; j += 2) {
        uint32_t r[4];
        sm80::ldmatrixX4<!Tile::kBKMajor>(
            r, fragAddress<TileB, Tile::kBKMajor, false>(sB, warpN0 + 8 * j, k0,
                                                         lane));
        b[j][0] = r[0];
        b[j][1] = r[1];
        b[j + 1][0] = r[2];
        b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < kFragsN; ++j) {
          if constexpr (kPromote) {
            float part[4] = {0.f, 0.f, 0.f, 0.f};
            sm80::mma16816<T>(part, a[i], b[j]);
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[i][j][e] += part[e];
          } else {
            sm80::mma16816<T>(acc[i][j], a[i], b[j]);
          }
        }
    }
  }

  /// TF32 (T = float): m16n8k8 atoms whose operands come from shared
  /// memory in 32-bit loads (ldmatrix moves 16-bit elements: its .trans
  /// cannot transpose 32-bit ones), rounded to TF32 on the way.
  KGEN_DEVICE void step(const T *sA, const T *sB, int warpM0, int warpN0,
                        int lane) {
    static_assert(Tile::kTf32, "the shared-load step is TF32's");
    const int g = lane / 4, t = lane % 4;
    auto at = [](const T *tile, auto tileType, bool kMajor, int o, int k) {
      using TileT = decltype(tileType);
      return sm80::toTf32(
          tile[kMajor ? TileT::offset(o, k) : TileT::offset(k, o)]);
    };
#pragma unroll
    for (int k0 = 0; k0 < Tile::kBlockK; k0 += 8) {
      uint32_t a[kFragsM][4], b[kFragsN][2];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        const int m = warpM0 + 16 * i + g;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          a[i][e] = at(sA, TileA{}, Tile::kAKMajor, m + 8 * (e % 2),
                       k0 + t + 4 * (e / 2));
      }
#pragma unroll
      for (int j = 0; j < kFragsN; ++j) {
        const int n = warpN0 + 8 * j + g;
        b[j][0] = at(sB, TileB{}, Tile::kBKMajor, n, k0 + t);
        b[j][1] = at(sB, TileB{}, Tile::kBKMajor, n, k0 + t + 4);
      }
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < kFragsN; ++j) {
          if constexpr (kPromote) {
            float part[4] = {0.f, 0.f, 0.f, 0.f};
            sm80::mma1688Tf32(part, a[i], b[j]);
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[i][j][e] += part[e];
          } else {
            sm80::mma1688Tf32(acc[i][j], a[i], b[j]);
          }
        }
    }
  }

  /// Lane (g, t) = (lane/4, lane%4) holds rows g and g+8, columns 2t, 2t+1
  /// of each 16x8 tile: pairs for the epilogue.
  KGEN_DEVICE void store(const Params &p, int batch, int row0, int col0,
                         int lane) const {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          epilogue<Config, 2>(p, batch, row0 + 16 * i + 8 * h + g,
                              col0 + 8 * j + 2 * t, &acc[i][j][2 * h]);
  }
};
#else
/// A wavefront's kWarpM x kWarpN accumulators as (kWarpM/32) x (kWarpN/32)
/// MFMA 32x32 tiles; each step of 8 k reads 4 k-values per lane and operand.
template <class Config, class TileA, class TileB> struct WarpMma {
  using Tile = Shape<Config>;
  using T = typename Tile::T;
  static constexpr int kFragsM = Tile::kWarpM / cdna::kMfmaM;
  static constexpr int kFragsN = Tile::kWarpN / cdna::kMfmaN;

  cdna::f32x16 acc[kFragsM][kFragsN];

  /// The accumulators as one flat list (split-K moves them as such).
  static constexpr int kAccum = kFragsM * kFragsN * 16;
  KGEN_DEVICE float get(int e) const {
    return acc[e / (kFragsN * 16)][e / 16 % kFragsN][e % 16];
  }
  KGEN_DEVICE void set(int e, float x) {
    acc[e / (kFragsN * 16)][e / 16 % kFragsN][e % 16] = x;
  }

  KGEN_DEVICE WarpMma() {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
        acc[i][j] = cdna::f32x16{};
  }

  /// Operand values (o, k .. k+3): one 8-byte read when k is contiguous
  /// (k is a multiple of 4, so it stays inside one 16-byte chunk), four
  /// 2-byte reads otherwise.
  template <class SmemTileT, bool kKMajor>
  static KGEN_DEVICE cdna::u16x4 fragment(const T *tile, int o, int k) {
    if constexpr (kKMajor) {
      return *reinterpret_cast<const cdna::u16x4 *>(tile +
                                                    SmemTileT::offset(o, k));
    } else {
      const uint16_t *s = reinterpret_cast<const uint16_t *>(tile);
      return cdna::u16x4{
          s[SmemTileT::offset(k, o)], s[SmemTileT::offset(k + 1, o)],
          s[SmemTileT::offset(k + 2, o)], s[SmemTileT::offset(k + 3, o)]};
    }
  }

  KGEN_DEVICE void step(const T *sA, const T *sB, int warpM0, int warpN0,
                        int lane) {
#pragma unroll
    for (int k0 = 0; k0 < Tile::kBlockK; k0 += cdna::kMfmaK) {
      const int k = k0 + 4 * (lane / 32);
      cdna::u16x4 a[kFragsM], b[kFragsN];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
        a[i] =
            fragment<TileA, Tile::kAKMajor>(sA, warpM0 + 32 * i + lane % 32, k);
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
        b[j] =
            fragment<TileB, Tile::kBKMajor>(sB, warpN0 + 32 * j + lane % 32, k);
#pragma unroll
      for (int i = 0; i < kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < kFragsN; ++j)
          acc[i][j] = cdna::mfma32x32x8<T>(a[i], b[j], acc[i][j]);
    }
  }

  /// Lane l holds acc[v] = D[8*(v/4) + 4*(l/32) + v%4][l%32] of each tile;
  /// a wavefront's store covers 32 consecutive columns of two rows, so the
  /// epilogue gets single elements.
  KGEN_DEVICE void store(const Params &p, int batch, int row0, int col0,
                         int lane) const {
#pragma unroll
    for (int i = 0; i < kFragsM; ++i)
#pragma unroll
      for (int j = 0; j < kFragsN; ++j)
#pragma unroll
        for (int v = 0; v < 16; ++v) {
          const float x = acc[i][j][v];
          epilogue<Config, 1>(
              p, batch, row0 + 32 * i + 8 * (v / 4) + 4 * (lane / 32) + v % 4,
              col0 + 32 * j + lane % 32, &x);
        }
  }
};
#endif

/// Split-K's fix-up (fixup.h): the kSplitK blocks of one output tile each
/// publish their fp32 partial sums to the tile's kSplitK workspace slots;
/// the last to arrive adds them in split order and returns true: it alone
/// runs the epilogue.
template <class Config, class Mma>
KGEN_DEVICE bool splitKFixup(const Params &p, Mma &mma, int tile, int split,
                             int *flag) {
  constexpr int kSplitK = Config::kSplitK, kThreads = Config::kThreads;
  struct Slots {
    float *tileSlots;
    KGEN_DEVICE float *operator()(int s) const {
      return tileSlots + (long long)s * Mma::kAccum * kThreads;
    }
  };
  struct BlockSync {
    KGEN_DEVICE void operator()() const { __syncthreads(); }
  };
  const Slots slots{static_cast<float *>(p.workspace) +
                    (long long)tile * kSplitK * Mma::kAccum * kThreads};
  return fixupPartials<kThreads>(p, mma, tile, split, kSplitK, slots,
                                 int(threadIdx.x), flag, BlockSync{});
}

/// The kernel body; the generated kernel forwards its Params. Launch:
/// grid (ceil(N / kBlockN), ceil(M / kBlockM), batch * kSplitK), kThreads
/// threads, kSmemBytes of dynamic shared memory. With kSplitK > 1 the
/// kSplitK blocks of a tile (consecutive z) share its k-slices, and
/// splitKFixup adds their sums before the epilogue.
template <class Config> KGEN_DEVICE void run(const Params &p) {
  using Tile = Shape<Config>;
  using T = typename Tile::T;
  constexpr int kStages = Tile::kStages;
  using LoaderA = OperandLoader<Config, Tile::kAKMajor, Tile::kBlockM,
                                Config::kVecA, Config::kCheckM>;
  using LoaderB = OperandLoader<Config, Tile::kBKMajor, Tile::kBlockN,
                                Config::kVecB, Config::kCheckN>;
  using TileA = typename LoaderA::Tile;
  using TileB = typename LoaderB::Tile;
  static_assert(kStages * (TileA::kElems + TileB::kElems) * int(sizeof(T)) ==
                    Config::kSmemBytes,
                "kSmemBytes disagrees with the template's smem layout");

  // Launched overlapping the kernel before it (sm_90a): nothing is read or
  // written before that one has completed (gemm_sm90.h says why).
  waitForPreviousGrid();
  // Baked dimensions are constants; the others come from the arguments.
  const int size_m = Config::kM ? Config::kM : p.m;
  const int size_n = Config::kN ? Config::kN : p.n;
  const int size_k = Config::kK ? Config::kK : p.k;
  constexpr int kSplitK = Config::kSplitK;
  static_assert(kSplitK >= 1, "kSplitK >= 1");
  const int batch = int(blockIdx.z / unsigned(kSplitK));
  const int split = int(blockIdx.z % unsigned(kSplitK));
  const T *const a = static_cast<const T *>(p.a) + batch * p.strideA;
  const T *const b = static_cast<const T *>(p.b) + batch * p.strideB;
  // The number of k-slices; without kCheckK, kBlockK divides K.
  const int slices = Config::kCheckK
                         ? (size_k + Tile::kBlockK - 1) / Tile::kBlockK
                         : size_k / Tile::kBlockK;
  // This block's run of slices [kBegin, kBegin + count): all of them, or
  // one of kSplitK near-equal runs (the last ones may be short or empty).
  int kBegin = 0, count = slices;
  if constexpr (kSplitK > 1) {
    const int per = (slices + kSplitK - 1) / kSplitK;
    kBegin = split * per;
    count = slices - kBegin < per ? slices - kBegin : per;
    count = count > 0 ? count : 0;
  }

  const int m0 = int(blockIdx.y) * Tile::kBlockM;
  const int n0 = int(blockIdx.x) * Tile::kBlockN;
  // Unsigned division so the compiler knows these are shifts and masks.
  const unsigned warp = threadIdx.x / unsigned(kWaveSize);
  const int lane = int(threadIdx.x % unsigned(kWaveSize));
  const int warpM0 = int(warp / unsigned(Config::kWarpsN)) * Tile::kWarpM;
  const int warpN0 = int(warp % unsigned(Config::kWarpsN)) * Tile::kWarpN;

  // kStages A tiles, then kStages B tiles.
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  T *const sA = reinterpret_cast<T *>(kgen_smem);
  T *const sB = sA + kStages * TileA::kElems;

  LoaderA loadA(a, p.lda, m0, size_m, size_k);
  LoaderB loadB(b, p.ldb, n0, size_n, size_k);
  WarpMma<Config, TileA, TileB> mma;

#if KGEN_NVIDIA
  // kStages - 1 slices in flight. One commit group per slice, committed even
  // when empty, so "slice kt has landed" is always wait_group<kStages - 2>.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < count) {
      loadA.copyAsync(sA + s * TileA::kElems, kBegin + s);
      loadB.copyAsync(sB + s * TileB::kElems, kBegin + s);
    }
    sm80::cpAsyncCommit();
  }
  const uint32_t sAddrA = sm80::smemAddress(sA);
  const uint32_t sAddrB = sm80::smemAddress(sB);
  for (int kt = 0; kt < count; ++kt) {
    sm80::cpAsyncWait<kStages - 2>();
    // Makes slice kt visible to all warps, and tells that every warp is done
    // with slice kt - 1, whose stage the copy below overwrites.
    __syncthreads();
    const int next = kt + kStages - 1;
    if (next < count) {
      loadA.copyAsync(sA + next % kStages * TileA::kElems, kBegin + next);
      loadB.copyAsync(sB + next % kStages * TileB::kElems, kBegin + next);
    }
    sm80::cpAsyncCommit();
    const int stage = kt % kStages;
    if constexpr (Tile::kTf32)
      mma.step(sA + stage * TileA::kElems, sB + stage * TileB::kElems, warpM0,
               warpN0, lane);
    else
      mma.step(sAddrA + uint32_t(stage * TileA::kElems * int(sizeof(T))),
               sAddrB + uint32_t(stage * TileB::kElems * int(sizeof(T))),
               warpM0, warpN0, lane);
  }
#else
  // Slices 0 .. kStages-2 go to LDS up front; afterwards slice kt + kStages-1
  // is fetched before the MFMAs of slice kt and stored after them, into the
  // stage of slice kt - 1, which every wave left at the previous barrier.
  for (int s = 0; s < kStages - 1 && s < count; ++s) {
    loadA.fetch(kBegin + s);
    loadB.fetch(kBegin + s);
    loadA.store(sA + s * TileA::kElems);
    loadB.store(sB + s * TileB::kElems);
  }
  __syncthreads();
  for (int kt = 0; kt < count; ++kt) {
    const int next = kt + kStages - 1;
    if (next < count) {
      loadA.fetch(kBegin + next);
      loadB.fetch(kBegin + next);
    }
    const int stage = kt % kStages;
    mma.step(sA + stage * TileA::kElems, sB + stage * TileB::kElems, warpM0,
             warpN0, lane);
    if (next < count) {
      loadA.store(sA + next % kStages * TileA::kElems);
      loadB.store(sB + next % kStages * TileB::kElems);
    }
    __syncthreads();
  }
#endif

  if constexpr (kSplitK > 1) {
    // Shared memory is free once every warp is past its last step; its
    // first word carries the arrival verdict to the whole block.
    __syncthreads();
    const int tile =
        (batch * int(gridDim.y) + int(blockIdx.y)) * int(gridDim.x) +
        int(blockIdx.x);
    if (!splitKFixup<Config>(p, mma, tile, split,
                             reinterpret_cast<int *>(kgen_smem)))
      return;
  }
  mma.store(p, batch, m0 + warpM0, n0 + warpN0, lane);
}

} // namespace kgen::gemm
