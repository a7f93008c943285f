//===- epilogue.h - The fused GEMM epilogue ---------------------*- C++ -*-===//
//
// What every GEMM main loop does with its fp32 accumulators, written once.
//
// The contract (every main loop, sm_80 mma.sync, sm_90a wgmma, AMD MFMA):
//
//   kgen::gemm::epilogue<Config, kWidth>(params, batch, row, col, acc)
//
//   computes, for e in [0, kWidth) (kWidth is 1, 2, 4 or 8),
//
//     v = alpha * acc[e] + beta * C[row][col + e]   (C read only if beta != 0)
//     v = v + bias[row] or bias[col + e]            (Config::kBias)
//     v = act(v)                                    (Config::kActivation)
//     v = v + R[row][col + e]                       (Config::kResidual)
//     C[row][col + e] = cast to TypeC (round to nearest even)
//
//   in batch `batch` (every pointer advanced by batch * its stride), and
//   skips what lies outside C: row >= M when Config::kCheckM, col + e >= N
//   when Config::kCheckN (baked, divisible extents carry no checks).
//   A thread calls it with pairs (row, col), (row, col + 1) where its
//   accumulators hold adjacent columns (mma.sync and wgmma: col even), and
//   with single elements otherwise (MFMA: one column per lane), and with
//   runs of 8 (col a multiple of 8) where a loop first gathers a row's
//   columns (the wgmma loop, through shared memory). Elements move as
//   vectors of min(kWidth, Config::kVecC) (at most 16 bytes) to and from C,
//   the bias and the residual: the runtime lowered kVecC to what C's, the
//   bias's and the residual's pointers, leading dimensions and N allow, so
//   a vector is aligned and wholly inside or outside.
//
// Config supplies TypeC, kM/kN (0: run time), kCheckM, kCheckN, kVecC and
// the features: kBias (kBiasNone, kBiasM, kBiasN), kActivation (the
// Activation values below) and kResidual. The bias and the residual have
// C's dtype. Features are compile-time: a kernel without them has none of
// their code.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"
#include "kgen/gemm/params.h"

namespace kgen::gemm {

enum BiasKind { kBiasNone = 0, kBiasM = 1, kBiasN = 2 };
enum Activation {
  kActNone = 0,
  kActReLU = 1,
  kActGeluTanh = 2,
  kActGeluErf = 3,
  kActSiLU = 4
};

template <int kAct> KGEN_DEVICE float activate(float x) {
  if constexpr (kAct == kActReLU) {
    return x > 0.f ? x : 0.f;
  } else if constexpr (kAct == kActGeluTanh) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as PyTorch's
    // approximate="tanh".
    const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanhf(inner));
  } else if constexpr (kAct == kActGeluErf) {
    return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
  } else if constexpr (kAct == kActSiLU) {
    return x / (1.f + expf(-x));
  } else {
    return x;
  }
}

template <class Config, int kWidth>
KGEN_DEVICE void epilogue(const Params &p, int batch, int row, int col,
                          const float *acc) {
  using TC = typename Config::TypeC;
  static_assert(kWidth == 1 || kWidth == 2 || kWidth == 4 || kWidth == 8,
                "1, 2, 4 or 8 adjacent elements");
  // Elements move kV at a time: as many as C's vector width allows (so a
  // vector is aligned and wholly inside or outside C), at most 16 bytes.
  constexpr int kV0 = kWidth < Config::kVecC ? kWidth : Config::kVecC;
  constexpr int kV = kV0 * int(sizeof(TC)) > 16 ? 16 / int(sizeof(TC)) : kV0;
  using V = Vec<TC, kV>;
  if constexpr (Config::kCheckM) {
    if (row >= (Config::kM ? Config::kM : p.m))
      return;
  }
  const int sizeN = Config::kN ? Config::kN : p.n;
  // Whether the vector starting at element g lies inside C.
  auto inside = [&](int g) { return !Config::kCheckN || col + g < sizeN; };
  TC *c = static_cast<TC *>(p.c) + batch * p.strideC + row * p.ldc + col;

  float v[kWidth];
#pragma unroll
  for (int e = 0; e < kWidth; ++e)
    v[e] = p.alpha * acc[e];
  // v += scale * src[0, kWidth), vector by vector.
  auto add = [&](const TC *src, float scale) {
#pragma unroll
    for (int g = 0; g < kWidth; g += kV)
      if (inside(g)) {
        const V x = *reinterpret_cast<const V *>(src + g);
#pragma unroll
        for (int e = 0; e < kV; ++e)
          v[g + e] += scale * Convert<TC>::toFloat(x.x[e]);
      }
  };
  if (p.beta != 0.f)
    add(c, p.beta);
  if constexpr (Config::kBias == kBiasM) {
    const float b = Convert<TC>::toFloat(
        static_cast<const TC *>(p.bias)[batch * p.strideBias + row]);
#pragma unroll
    for (int e = 0; e < kWidth; ++e)
      v[e] += b;
  } else if constexpr (Config::kBias == kBiasN) {
    add(static_cast<const TC *>(p.bias) + batch * p.strideBias + col, 1.f);
  }
#pragma unroll
  for (int e = 0; e < kWidth; ++e)
    v[e] = activate<Config::kActivation>(v[e]);
  if constexpr (Config::kResidual)
    add(static_cast<const TC *>(p.residual) + batch * p.strideResidual +
            row * p.ldr + col,
        1.f);

#pragma unroll
  for (int g = 0; g < kWidth; g += kV)
    if (inside(g)) {
      V x;
#pragma unroll
      for (int e = 0; e < kV; ++e)
        x.x[e] = Convert<TC>::fromFloat(v[g + e]);
      *reinterpret_cast<V *>(c + g) = x;
    }
}

} // namespace kgen::gemm
