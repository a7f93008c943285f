//===- MlstmEmuDevice.h - What the mLSTM kernels need beyond GEMM's -------===//
//
// Included by each generated mLSTM wrapper before the kernel source: the
// math functions nvrtc and hiprtc provide as builtins (here glibc's, fp32),
// and the two device-wide operations of HeadCounter. The emulator runs one
// block at a time and only thread 0 touches the counter, so a plain
// read-modify-write is exact.
//
//===----------------------------------------------------------------------===//

#pragma once

#include <math.h>

inline unsigned atomicAdd(unsigned *address, unsigned value) {
  const unsigned old = *address;
  *address = old + value;
  return old;
}

inline void __threadfence() {}
