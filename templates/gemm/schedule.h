//===- schedule.h - k-iterations dealt out to persistent CTAs -*- C++ -*-===//
//
// The two schedules of the persistent wgmma loop (gemm_sm90.h) that split
// a tile's k-slices between CTAs: stream-K and split-K in lockstep.
//
// Stream-K: the
// tiles x slices k-iterations of the whole GEMM, tile after tile in the
// loop's tile order, are cut into `ctas` runs of equal length (to one
// iteration), one per persistent CTA. A CTA's run crosses tile boundaries;
// each piece of it inside one tile is a Segment. A tile whose k-slices all
// fall in one run is stored directly; the others are split between 2 or
// more consecutive CTAs, each writing its fp32 partial to a workspace slot,
// and the last to arrive adds the partials in k order (templates/gemm/
// fixup.h), so the result does not depend on arrival order.
//
// Only a CTA's first and last segments can be partial, so two workspace
// slots per CTA hold every partial: slot 2c for CTA c's first segment,
// 2c + 1 for its last. Whoever sums tile t finds contributor j's partial
// through slotOf() alone, without knowing which segment it was.
//
// Split-K in lockstep (SplitK): each tile's k-slices are dealt to `parts`
// units, unit (tile, part) taking slices part, part + parts, part +
// 2 parts, ...; the units go out part-major (u = part * tiles + tile) in
// the grid's stride. The CTAs running together thus walk the same few
// k-slices at the same time, as a data-parallel grid does. That matters
// more than the idle multiprocessors stream-K fills: the H100 ran the
// 128x128 data-parallel kernel of 532x2048x2048 in 13.4 us, and 23.1 us
// with each CTA's k loop merely rotated to start elsewhere (the same
// bytes and FLOPs); stream-K's runs start anywhere, and its CTAs walked
// their k-slices at less than half the data-parallel rate. At 532x2048x16384
// stream-K also missed in L2 (46% hits, 3.5x the DRAM reads). Each unit
// writes an fp32 partial to slot part * tiles + tile; the last of a tile's
// units to arrive adds them in part order (fixup.h).
//
// Plain C++ with no includes and every function constexpr, so that the
// host unit tests (test/unit/ScheduleTest.cpp) check the arithmetic the
// kernels run: every k-iteration covered exactly once, contributors and
// slots consistent between writers and the reader.
//
//===----------------------------------------------------------------------===//

#pragma once

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC_RTC__)
#define KGEN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KGEN_HOST_DEVICE inline
#endif

namespace kgen::gemm {

/// One CTA's k-slices [kBegin, kBegin + kCount) of one tile.
struct Segment {
  int tile;   ///< index in the loop's tile order
  int kBegin; ///< first k-slice
  int kCount; ///< k-slices, >= 1
  int part;   ///< its place among the tile's contributors, in k order
  int parts;  ///< CTAs contributing to the tile; 1: stored directly
  int slot;   ///< workspace slot of its partial (used when parts > 1)
  int kStride = 1; ///< its k-slices are kBegin, kBegin + kStride, ...
};

struct StreamK {
  long long total; ///< tiles * slices k-iterations
  int slices;      ///< k-slices per tile
  int ctas;        ///< CTAs with a run: 1 <= ctas <= max(total, 1)

  /// `grid` CTAs; those past the iterations (a run-time K below the one
  /// the grid was sized for) get empty runs and count as no contributor.
  KGEN_HOST_DEVICE constexpr StreamK(int tiles, int slices, int grid)
      : total((long long)tiles * slices), slices(slices),
        ctas(grid < total ? grid
             : total > 0  ? int(total)
                          : 1) {}

  /// First k-iteration of CTA c's run; total from c = ctas on.
  KGEN_HOST_DEVICE constexpr long long begin(int c) const {
    return c >= ctas ? total : (long long)c * total / ctas;
  }
  /// The CTA whose run holds iteration i: the largest c with begin(c) <= i,
  /// i.e. c * total < (i + 1) * ctas.
  KGEN_HOST_DEVICE constexpr int owner(long long i) const {
    return int(((i + 1) * ctas - 1) / total);
  }
  /// Workspace slot holding CTA c's partial of tile t (c contributes to t):
  /// its first segment's when its run starts inside t, else its last's.
  KGEN_HOST_DEVICE constexpr int slotOf(int c, int tile) const {
    return 2 * c + (begin(c) >= (long long)tile * slices ? 0 : 1);
  }
  /// The segment of CTA c that starts at iteration i, begin(c) <= i <
  /// begin(c + 1); the next one starts at i + kCount.
  KGEN_HOST_DEVICE constexpr Segment segment(int c, long long i) const {
    const int tile = int(i / slices);
    const long long tileBegin = (long long)tile * slices;
    const long long end = begin(c + 1);
    const long long tileEnd = tileBegin + slices;
    const int first = owner(tileBegin), last = owner(tileEnd - 1);
    Segment s{};
    s.tile = tile;
    s.kBegin = int(i - tileBegin);
    s.kCount = int((end < tileEnd ? end : tileEnd) - i);
    s.part = c - first;
    s.parts = last - first + 1;
    s.slot = slotOf(c, tile);
    return s;
  }
};

/// Where fixupPartials (fixup.h) finds the partials of a tile split by
/// stream-K: contributor j is CTA first + j (first = c - Segment::part), a
/// slot `tileFloats` (kBlockM * kBlockN) floats long.
struct StreamKSlots {
  float *workspace;
  StreamK sk;
  int first, tile;
  long long tileFloats;
  KGEN_HOST_DEVICE float *operator()(int j) const {
    return workspace + sk.slotOf(first + j, tile) * tileFloats;
  }
};

/// Split-K in lockstep: `parts` units a tile (at most one per k-slice),
/// dealt out part-major; a CTA takes units u, u + grid, u + 2 grid, ...
struct SplitK {
  int tiles, slices, parts;

  KGEN_HOST_DEVICE constexpr SplitK(int tiles, int slices, int splits)
      : tiles(tiles), slices(slices), parts(splits < slices ? splits
                                            : slices > 0    ? slices
                                                            : 1) {}

  KGEN_HOST_DEVICE constexpr long long units() const {
    return (long long)tiles * parts;
  }
  /// Unit u's segment: tile u % tiles, k-slices u / tiles + j * parts.
  KGEN_HOST_DEVICE constexpr Segment segment(long long u) const {
    const int part = int(u / tiles), tile = int(u % tiles);
    Segment s{};
    s.tile = tile;
    s.kBegin = part;
    s.kCount = (slices - part + parts - 1) / parts;
    s.part = part;
    s.parts = parts;
    s.slot = part * tiles + tile;
    s.kStride = parts;
    return s;
  }
};

/// Where fixupPartials finds a lockstep split's partials: contributor j of
/// `tile` in slot j * tiles + tile, `tileFloats` floats each.
struct SplitKSlots {
  float *workspace;
  int tiles, tile;
  long long tileFloats;
  KGEN_HOST_DEVICE float *operator()(int j) const {
    return workspace + ((long long)j * tiles + tile) * tileFloats;
  }
};

} // namespace kgen::gemm
