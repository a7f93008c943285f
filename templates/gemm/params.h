//===- params.h - The GEMM kernels' one argument ----------------*- C++ -*-===//
//
// Every GEMM kernel takes one Params by value. The struct is plain C++ with
// no includes, so the same header serves the kernel templates (nvrtc,
// hiprtc, the host emulator) and the host runtime that fills it
// (kgen::Runtime::launch): the layout the host writes is the layout the
// kernel reads, on x86-64, NVPTX and AMDGCN alike (8-byte pointers and
// long longs, 4-byte ints and floats, natural alignment).
//
// Operand b of batch z starts at b + z * strideB (elements), likewise for
// A, C, the bias and the residual; a stride of 0 shares the operand across
// batches (a weight matrix, a bias). Leading dimensions are in elements and
// already resolved (never 0 here).
//
//===----------------------------------------------------------------------===//

#pragma once

namespace kgen::gemm {

struct Params {
  const void *a; ///< A and B: the problem's input dtype
  const void *b;
  void *c;              ///< C: the output dtype
  const void *bias;     ///< C's dtype; length M or N; null without a bias
  const void *residual; ///< C's dtype, M x N; null without a residual
  long long lda, ldb, ldc, ldr;
  long long strideA, strideB, strideC, strideBias, strideResidual;
  /// Split-K only (Config::kSplitK > 1): fp32 partial tiles and one arrival
  /// counter per output tile, zero between launches (the last block of a
  /// tile resets its counter). Owned by the runtime, one per stream.
  void *workspace;
  unsigned *counters;
  int m, n, k; ///< the run-time extents (baked ones are ignored)
  int batch;   ///< the grid's z extent
  float alpha, beta;
};

} // namespace kgen::gemm
