//===- GemmEmuDevice.h - The device-wide operations of GEMM split-K -------===//
//
// Included by each generated GEMM wrapper before the kernel source: the
// atomic counter and the fence of split-K's fix-up (templates/gemm/gemm.h,
// splitKFixup). Blocks run one after another here, so these only need to be
// atomic and ordered among the block's own threads.
//
//===----------------------------------------------------------------------===//

#pragma once

inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
