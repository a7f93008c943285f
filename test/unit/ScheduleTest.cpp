//===- ScheduleTest.cpp - Split tiles' schedule arithmetic, on the host ---===//
//
// templates/gemm/schedule.h is the arithmetic the wgmma loop's producer and
// consumers run to find their segments, and the fix-up runs to find the
// other contributors' partials. The kernel cannot run here (no wgmma in the
// emulator), so these tests walk every CTA's run exactly as the kernel does
// and check what the kernel relies on.
//
//===----------------------------------------------------------------------===//

#include "gemm/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

using kgen::gemm::Segment;
using kgen::gemm::SplitK;
using kgen::gemm::StreamK;

namespace {

// The schedule is constexpr: the kernel's arithmetic is the host's.
// 33 tiles of 16 k-slices (127x4099x1023 at 128x128x64) on 132 CTAs: four
// CTAs a tile, four slices each.
static_assert(StreamK(33, 16, 132).segment(0, 0).kCount == 4);
static_assert(StreamK(33, 16, 132).segment(5, 20).part == 1);
static_assert(StreamK(33, 16, 132).segment(5, 20).parts == 4);

struct Seen {
  int cta;
  Segment seg;
};

/// Walks every CTA's run as gemm_sm90.h's Work does and checks it.
void checkSchedule(int tiles, int slices, int ctas) {
  SCOPED_TRACE(::testing::Message() << tiles << " tiles x " << slices
                                    << " slices on " << ctas << " CTAs");
  const StreamK sk(tiles, slices, ctas);
  ASSERT_EQ(sk.begin(0), 0);
  ASSERT_EQ(sk.begin(ctas), sk.total);
  std::vector<int> covered(size_t(tiles) * slices, 0);
  std::map<int, std::vector<Seen>> byTile;
  std::set<int> partialSlots;
  for (int c = 0; c < ctas; ++c) {
    const long long b = sk.begin(c), e = sk.begin(c + 1);
    ASSERT_LE(b, e);
    // Equal runs to one iteration.
    ASSERT_LE(e - b, (sk.total + ctas - 1) / ctas);
    ASSERT_GE(e - b, sk.total / ctas);
    int partials = 0;
    for (long long i = b; i < e;) {
      const Segment s = sk.segment(c, i);
      ASSERT_GE(s.kCount, 1);
      ASSERT_GE(s.kBegin, 0);
      ASSERT_LE(s.kBegin + s.kCount, slices);
      ASSERT_EQ((long long)s.tile * slices + s.kBegin, i);
      ASSERT_EQ(sk.owner(i), c);
      for (int k = s.kBegin; k < s.kBegin + s.kCount; ++k)
        ++covered[size_t(s.tile) * slices + k];
      if (s.parts > 1) {
        ++partials;
        // Only a run's first and last segments are partial.
        ASSERT_TRUE(i == b || i + s.kCount == e);
        ASSERT_GE(s.slot, 2 * c);
        ASSERT_LT(s.slot, 2 * c + 2);
        ASSERT_TRUE(partialSlots.insert(s.slot).second)
            << "slot " << s.slot << " written twice";
      } else {
        ASSERT_EQ(s.kBegin, 0);
        ASSERT_EQ(s.kCount, slices);
      }
      byTile[s.tile].push_back({c, s});
      i += s.kCount;
    }
    ASSERT_LE(partials, 2);
  }
  // Every k-iteration of every tile exactly once.
  for (size_t i = 0; i < covered.size(); ++i)
    ASSERT_EQ(covered[i], 1)
        << "tile " << i / slices << " slice " << i % slices;
  // Each tile's contributors: consecutive CTAs in k order, all agreeing on
  // their count, and the reader finds each one's partial where it wrote it.
  ASSERT_EQ(int(byTile.size()), tiles);
  for (auto &[tile, seen] : byTile) {
    std::sort(seen.begin(), seen.end(), [](const Seen &a, const Seen &b) {
      return a.seg.kBegin < b.seg.kBegin;
    });
    const int first = seen.front().cta;
    for (size_t j = 0; j < seen.size(); ++j) {
      const Segment &s = seen[j].seg;
      ASSERT_EQ(s.parts, int(seen.size()));
      ASSERT_EQ(s.part, int(j));
      ASSERT_EQ(seen[j].cta, first + int(j));
      ASSERT_EQ(seen[j].cta - s.part, first);
      if (s.parts > 1)
        ASSERT_EQ(sk.slotOf(first + int(j), tile), s.slot);
    }
  }
}

TEST(StreamKSchedule, EveryIterationOnceAndSlotsAgree) {
  const int tilesList[] = {1, 2, 3, 7, 17, 33, 64, 80, 128, 131, 132, 133};
  const int slicesList[] = {1, 2, 3, 16, 17, 32, 256};
  const int ctasList[] = {1, 2, 7, 66, 132, 133, 1000};
  for (int tiles : tilesList)
    for (int slices : slicesList)
      for (int ctas : ctasList)
        checkSchedule(tiles, slices, ctas);
}

TEST(StreamKSchedule, TheTargetShapes) {
  // The mid-size shapes stream-K is for, on an H100/H200's 132 SMs: tiles
  // of 128x128 (and 128x256) with 64-element k-slices.
  checkSchedule(5 * 16, 32, 132);  // 532x2048x2048
  checkSchedule(7 * 16, 32, 132);  // 788x2048x2048
  checkSchedule(5 * 16, 256, 132); // 532x2048x16384
  checkSchedule(33, 16, 132);      // 127x4099x1023
  checkSchedule(8 * 8, 16, 132);   // 1024^3
  checkSchedule(16 * 8, 32, 132);  // 2048^3 at 128x256
  // The grid the runtime launches never exceeds the iterations, but a
  // dynamic K smaller than the hint would: those CTAs' runs are empty.
  const StreamK sk(1, 2, 5);
  int nonEmpty = 0;
  for (int c = 0; c < 5; ++c)
    nonEmpty += sk.begin(c + 1) > sk.begin(c);
  EXPECT_EQ(nonEmpty, 2);
}

TEST(StreamKSchedule, OneCtaPerTileNeedsNoFixup) {
  // As many CTAs as tiles: every tile whole in one run, nothing to add up.
  const StreamK sk(80, 32, 80);
  for (int c = 0; c < 80; ++c) {
    const Segment s = sk.segment(c, sk.begin(c));
    EXPECT_EQ(s.tile, c);
    EXPECT_EQ(s.kCount, 32);
    EXPECT_EQ(s.parts, 1);
  }
}

/// Split-K in lockstep as the wgmma loop walks it: every CTA takes units
/// cta, cta + grid, ...; checks that every (tile, k-slice) is computed
/// exactly once, that each tile's parts all exist and name the slots the
/// fix-up reads (SplitKSlots), and that each part starts at its own index
/// (so every unit of a wave starts within the first `parts` slices).
void checkSplit(int tiles, int slices, int splits, int grid) {
  SCOPED_TRACE(::testing::Message()
               << tiles << " tiles x " << slices << " slices in " << splits
               << " parts, " << grid << " CTAs");
  const SplitK split(tiles, slices, splits);
  ASSERT_GE(split.parts, 1);
  ASSERT_LE(split.parts, std::min(splits, std::max(slices, 1)));
  std::vector<int> seen(size_t(tiles) * slices, 0);
  std::map<int, std::set<int>> partsOfTile;
  std::set<long long> slots;
  float base = 0;
  for (int cta = 0; cta < grid; ++cta)
    for (long long u = cta; u < split.units(); u += grid) {
      const Segment s = split.segment(u);
      ASSERT_GE(s.kCount, 1);
      EXPECT_EQ(s.parts, split.parts);
      EXPECT_EQ(s.kStride, split.parts);
      EXPECT_EQ(s.part, s.kBegin);
      for (int j = 0; j < s.kCount; ++j) {
        const int slice = s.kBegin + j * s.kStride;
        ASSERT_LT(slice, slices);
        ++seen[size_t(s.tile) * slices + slice];
      }
      partsOfTile[s.tile].insert(s.part);
      EXPECT_TRUE(slots.insert(s.slot).second) << "slot " << s.slot;
      const kgen::gemm::SplitKSlots mine{&base, tiles, s.tile, 1};
      EXPECT_EQ(mine(s.part) - &base, s.slot);
    }
  for (int v : seen)
    ASSERT_EQ(v, 1);
  ASSERT_EQ(partsOfTile.size(), size_t(tiles));
  for (auto &[tile, parts] : partsOfTile)
    EXPECT_EQ(parts.size(), size_t(split.parts)) << "tile " << tile;
}

TEST(SplitKSchedule, EverySliceOnceAndSlotsAgree) {
  for (int tiles : {1, 2, 5, 40, 80, 131, 133})
    for (int slices : {1, 2, 3, 16, 17, 32, 256})
      for (int splits : {1, 2, 3, 5, 8, 16})
        for (int grid : {1, 7, 132})
          checkSplit(tiles, slices, splits, grid);
}

TEST(SplitKSchedule, TheTargetShapes) {
  // 532x2048x16384 at 128x256 in 3 parts: 120 units on 132 SMs, slices
  // 0, 3, ... (86), 1, 4, ... (85), 2, 5, ... (85).
  const SplitK split(5 * 8, 256, 3);
  EXPECT_EQ(split.units(), 120);
  EXPECT_EQ(split.segment(0).kCount, 86);
  EXPECT_EQ(split.segment(40).kCount, 85);
  EXPECT_EQ(split.segment(119).kCount, 85);
  EXPECT_EQ(split.segment(119).tile, 39);
  EXPECT_EQ(split.segment(119).kBegin, 2);
  checkSplit(5 * 8, 256, 3, 132);
  // More parts than slices: one slice a part.
  const SplitK clamped(4, 3, 5);
  EXPECT_EQ(clamped.parts, 3);
  checkSplit(4, 3, 5, 132);
}

} // namespace
