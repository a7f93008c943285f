//===- shuffle.h - EMULATED lane exchange (test only) -----------*- C++ -*-===//
//
// Replaces templates/common/shuffle.h in the emulator test: shuffleXor
// returns the value of lane (lane ^ mask) of the calling warp, as
// shfl.sync.bfly (NVIDIA) and __shfl_xor (AMD) do; every lane of the warp
// must call it, as on the GPU.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen {

template <class V> inline V shuffleXorAny(V v, int mask) {
  const unsigned char *slots = emu::exchange(&v, sizeof(v));
  const int from = emu::lane() ^ mask;
  if (from >= emu::waveSize())
    emu::fail("shuffleXor: lane %d ^ %d is outside the warp", emu::lane(),
              mask);
  V r;
  __builtin_memcpy(&r, slots + (from % emu::waveSize()) * emu::kSlotBytes,
                   sizeof(r));
  return r;
}

inline float shuffleXor(float v, int mask) { return shuffleXorAny(v, mask); }
inline double shuffleXor(double v, int mask) { return shuffleXorAny(v, mask); }

/// Whether `v` holds on any lane of the calling warp, as __any_sync.
inline bool anyLane(bool v) {
  const unsigned char *slots = emu::exchange(&v, sizeof(v));
  bool any = false;
  for (int l = 0; l < emu::waveSize(); ++l)
    any = any || slots[l * emu::kSlotBytes] != 0;
  return any;
}

/// A barrier over the calling warp's lanes, as __syncwarp.
inline void syncWave() { emu::syncWarp(); }

} // namespace kgen
