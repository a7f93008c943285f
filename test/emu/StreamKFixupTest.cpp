//===- StreamKFixupTest.cpp - Stream-K's fix-up, run on the host ----------===//
//
// The wgmma loop itself cannot run here (the emulator has no wgmma, TMA or
// mbarrier), but what it does with a tile split between CTAs can: the real
// fixupPartials (templates/gemm/fixup.h, which the emulated split-K kernels
// run too) with the real stream-K slots (templates/gemm/schedule.h), for
// every segment of a schedule, the contributors arriving in shuffled
// orders. One thread per "CTA" (the barrier is then trivially satisfied);
// what is checked is the protocol: exactly one contributor per split tile
// stores, it is the last to arrive, its sum is the k-ordered sum of the
// partials bit for bit whatever the arrival order, no slot is overwritten
// before it is read, and every counter is zero again afterwards.
//
//===----------------------------------------------------------------------===//

#define EMU_NVIDIA 1
#include "GemmEmuDevice.h"

#include "kgen/gemm/fixup.h"
#include "kgen/gemm/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using kgen::gemm::Segment;
using kgen::gemm::StreamK;
using kgen::gemm::StreamKSlots;

constexpr int kAccum = 8; ///< accumulators of the one thread

struct Acc {
  static constexpr int kAccum = ::kAccum;
  float v[kAccum];
  float get(int e) const { return v[e]; }
  void set(int e, float x) { v[e] = x; }
};

struct NoSync {
  void operator()() const {}
};

/// k-slice k's contribution to element e of a tile: values whose sums round
/// differently in different orders.
float slice(int tile, int k, int e) {
  return std::sin(float(tile * 131 + k * 17 + e * 7)) * float(1 + k % 5) * 1e3f;
}

struct Contribution {
  int cta;
  Segment seg;
  Acc partial;
};

void runSchedule(int tiles, int slices, int ctas, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << tiles << " tiles x " << slices << " slices on " << ctas
               << " CTAs, seed " << seed);
  const StreamK sk(tiles, slices, ctas);
  std::vector<Contribution> all;
  for (int c = 0; c < ctas; ++c)
    for (long long i = sk.begin(c); i < sk.begin(c + 1);) {
      Contribution x{c, sk.segment(c, i), {}};
      for (int e = 0; e < kAccum; ++e) {
        float sum = 0.f;
        for (int k = x.seg.kBegin; k < x.seg.kBegin + x.seg.kCount; ++k)
          sum += slice(x.seg.tile, k, e);
        x.partial.v[e] = sum;
      }
      all.push_back(x);
      i += x.seg.kCount;
    }
  // The expected tile: the partials added in k order from zero.
  std::vector<Acc> expected(tiles);
  for (Acc &a : expected)
    std::fill(a.v, a.v + kAccum, 0.f);
  std::vector<int> parts(tiles, 0), arrived(tiles, 0), stored(tiles, 0);
  std::vector<Contribution> inK = all;
  std::stable_sort(inK.begin(), inK.end(), [](auto &a, auto &b) {
    return a.seg.tile != b.seg.tile ? a.seg.tile < b.seg.tile
                                    : a.seg.kBegin < b.seg.kBegin;
  });
  for (const Contribution &x : inK) {
    for (int e = 0; e < kAccum; ++e)
      expected[x.seg.tile].v[e] += x.partial.v[e];
    parts[x.seg.tile] = x.seg.parts;
  }

  std::vector<float> workspace(size_t(2) * ctas * kAccum,
                               std::nanf("")); // unwritten slots read NaN
  std::vector<unsigned> counters(tiles, 0u);
  kgen::gemm::Params p{};
  p.workspace = workspace.data();
  p.counters = counters.data();
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  int flag = -1;
  for (Contribution &x : all) {
    const int t = x.seg.tile;
    ++arrived[t];
    bool last = true;
    if (x.seg.parts > 1) {
      const StreamKSlots slots{static_cast<float *>(p.workspace), sk,
                               x.cta - x.seg.part, t, kAccum};
      last = kgen::gemm::fixupPartials<1>(
          p, x.partial, t, x.seg.part, x.seg.parts, slots, 0, &flag, NoSync{});
    }
    ASSERT_EQ(last, arrived[t] == parts[t]) << "tile " << t;
    if (!last)
      continue;
    ++stored[t];
    for (int e = 0; e < kAccum; ++e)
      ASSERT_EQ(std::memcmp(&x.partial.v[e], &expected[t].v[e], 4), 0)
          << "tile " << t << " element " << e << ": " << x.partial.v[e]
          << " vs " << expected[t].v[e];
  }
  for (int t = 0; t < tiles; ++t) {
    ASSERT_EQ(stored[t], 1) << "tile " << t;
    ASSERT_EQ(counters[t], 0u) << "tile " << t;
  }
}

TEST(StreamKFixup, LastArrivalStoresTheKOrderedSum) {
  const int shapes[][3] = {{33, 16, 132}, {80, 32, 132}, {4, 16, 64},
                           {1, 4, 4},     {3, 3, 9},     {7, 17, 5},
                           {131, 2, 132}, {2, 256, 132}};
  for (auto &s : shapes)
    for (unsigned seed : {1u, 2u, 3u})
      runSchedule(s[0], s[1], s[2], seed);
}

} // namespace
