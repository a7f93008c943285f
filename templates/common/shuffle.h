//===- shuffle.h - Lane exchange within a warp / wavefront ------*- C++ -*-===//
//
// The cross-lane atoms the attention softmax needs: the value of the lane
// whose index is this lane's XOR `mask` (row max and row sum reductions over
// the lanes that hold one row; NVIDIA: shfl.sync over the full warp, AMD:
// HIP's __shfl_xor (ds_bpermute) over the wavefront), and anyLane, a vote
// over the warp. And syncWave, the warp's barrier for shared memory one
// lane writes and another reads.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen {

KGEN_DEVICE float shuffleXor(float v, int mask) {
#if KGEN_NVIDIA
  return __shfl_xor_sync(0xffffffffu, v, mask);
#else
  return __shfl_xor(v, mask);
#endif
}

/// The same for fp64 (the mLSTM gate scan keeps its prefix sums in fp64).
KGEN_DEVICE double shuffleXor(double v, int mask) {
#if KGEN_NVIDIA
  return __shfl_xor_sync(0xffffffffu, v, mask);
#else
  return __shfl_xor(v, mask);
#endif
}

/// Whether `v` holds on any lane of the calling warp (wavefront): a
/// warp-uniform answer, so a branch on it does not diverge.
KGEN_DEVICE bool anyLane(bool v) {
#if KGEN_NVIDIA
  return __any_sync(0xffffffffu, v);
#else
  return __any(v);
#endif
}

/// A barrier over the calling warp (wavefront) that orders its lanes'
/// shared-memory accesses: __syncwarp on NVIDIA; on AMD the wavefront runs
/// in lockstep, so a wavefront-scope fence and the compiler barrier.
KGEN_DEVICE void syncWave() {
#if KGEN_NVIDIA
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "wavefront");
  __builtin_amdgcn_wave_barrier();
#endif
}

} // namespace kgen
