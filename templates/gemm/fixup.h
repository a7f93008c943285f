//===- fixup.h - Adding a tile's partial sums in k order ----*- C++ -*-===//
//
// When several blocks (split-K, gemm.h) or persistent CTAs (stream-K,
// gemm_sm90.h) each compute part of one output tile's k-slices, each
// publishes its fp32 partial to a workspace slot, and the last to arrive
// (an atomic counter per tile) adds all the partials in k order (so the
// result does not depend on which arrived last), resets the counter for the
// next launch, and alone runs the epilogue. Nobody waits for anybody, so a
// persistent grid cannot deadlock on it.
//
// Why it is race-free (the threadFenceReduction pattern of the CUDA
// samples):
//   1. Each thread writes its partial, then __threadfence(): its writes are
//      ordered before anything it does afterwards, device-wide.
//   2. The barrier over the participating threads (sync) puts every
//      thread's fence before thread 0's atomicAdd, so the counter value a
//      later block reads implies this block's partials are visible.
//   3. The block that reads parts - 1 is the last: every other partial is
//      published. It passes the verdict through shared memory behind a
//      second barrier, fences, and reads the partials with volatile loads,
//      which go to L2 instead of a possibly stale L1 line.
//   4. The counter is reset by the last arriver, after every other
//      contributor has counted; the next launch on the stream (the
//      workspace is per stream) starts after this one ends.
//   5. `flag` is rewritten by thread 0 only after the first barrier of a
//      later call, which every thread reaches after reading it here.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"
#include "kgen/gemm/params.h"

namespace kgen::gemm {

/// kThreads threads (thread index t) each hold Acc::kAccum accumulators of
/// the tile, read and written through acc.get(e) / acc.set(e, x). A slot
/// keeps element e of thread t at e * kThreads + t, so the layout follows
/// whatever the MMA atom's fragments are. slots(j) is contributor j's slot
/// (j = part is this one's), sync() a barrier over exactly the kThreads
/// threads, flag one shared int. Returns true in the last contributor, its
/// accumulators then holding the tile's whole sum.
template <int kThreads, class Acc, class Slots, class Sync>
KGEN_DEVICE bool fixupPartials(const Params &p, Acc &acc, int tile, int part,
                               int parts, const Slots &slots, int t, int *flag,
                               Sync sync) {
  constexpr int kAccum = Acc::kAccum;
  float *const own = slots(part);
#pragma unroll
  for (int e = 0; e < kAccum; ++e)
    own[e * kThreads + t] = acc.get(e);
  __threadfence(); // the partials are visible before the arrival counts
  sync();
  if (t == 0) {
    const unsigned arrived = atomicAdd(p.counters + tile, 1u);
    *flag = arrived == unsigned(parts - 1);
    if (*flag)
      p.counters[tile] = 0u; // every other contributor is done with it
  }
  sync();
  if (!*flag)
    return false;
  __threadfence();
  // Contributor by contributor in k order, this one's partial read back
  // like the others: the same sum whoever comes last, and no second set of
  // accumulators in registers.
  for (int j = 0; j < parts; ++j) {
    const volatile float *partial = slots(j);
#pragma unroll
    for (int e = 0; e < kAccum; ++e)
      acc.set(e, (j == 0 ? 0.f : acc.get(e)) + partial[e * kThreads + t]);
  }
  return true;
}

} // namespace kgen::gemm
