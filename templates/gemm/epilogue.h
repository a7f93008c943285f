//===- epilogue.h - The fused GEMM epilogue ---------------------*- C++ -*-===//
//
// What every GEMM main loop does with its fp32 accumulators, written once.
//
// The contract (every main loop, sm_80 mma.sync, sm_90a wgmma, AMD MFMA):
//
//   kgen::gemm::epilogue<Config, kWidth>(params, batch, row, col, acc)
//
//   computes, for e in [0, kWidth) (kWidth is 1 or 2),
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
//   with single elements otherwise (MFMA: one column per lane). When
//   Config::kVecC >= 2 a pair is one access to C, the bias and the residual:
//   N is then even, col is even, and the runtime lowered kVecC to what C's,
//   the bias's and the residual's pointers and leading dimensions allow, so
//   a pair is aligned and wholly inside or outside.
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

/// Two adjacent elements moved as one access.
template <class T> struct alignas(2 * sizeof(T)) Pair { T x, y; };

template <class Config, int kWidth>
KGEN_DEVICE void epilogue(const Params &p, int batch, int row, int col,
                          const float *acc) {
  using TC = typename Config::TypeC;
  static_assert(kWidth == 1 || kWidth == 2, "an element or a pair");
  constexpr bool kPair = kWidth == 2 && Config::kVecC >= 2;
  if constexpr (Config::kCheckM) {
    if (row >= (Config::kM ? Config::kM : p.m))
      return;
  }
  const int sizeN = Config::kN ? Config::kN : p.n;
  TC *c = static_cast<TC *>(p.c) + batch * p.strideC + row * p.ldc + col;

  float v[kWidth];
#pragma unroll
  for (int e = 0; e < kWidth; ++e)
    v[e] = p.alpha * acc[e];
  if (p.beta != 0.f) {
    if constexpr (kPair) {
      if (!Config::kCheckN || col < sizeN) {
        const Pair<TC> old = *reinterpret_cast<const Pair<TC> *>(c);
        v[0] += p.beta * Convert<TC>::toFloat(old.x);
        v[1] += p.beta * Convert<TC>::toFloat(old.y);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kWidth; ++e)
        if (!Config::kCheckN || col + e < sizeN)
          v[e] += p.beta * Convert<TC>::toFloat(c[e]);
    }
  }
  if constexpr (Config::kBias == kBiasM) {
    const float b = Convert<TC>::toFloat(
        static_cast<const TC *>(p.bias)[batch * p.strideBias + row]);
#pragma unroll
    for (int e = 0; e < kWidth; ++e)
      v[e] += b;
  } else if constexpr (Config::kBias == kBiasN) {
    const TC *b = static_cast<const TC *>(p.bias) + batch * p.strideBias + col;
    if constexpr (kPair) {
      if (!Config::kCheckN || col < sizeN) {
        const Pair<TC> bb = *reinterpret_cast<const Pair<TC> *>(b);
        v[0] += Convert<TC>::toFloat(bb.x);
        v[1] += Convert<TC>::toFloat(bb.y);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kWidth; ++e)
        if (!Config::kCheckN || col + e < sizeN)
          v[e] += Convert<TC>::toFloat(b[e]);
    }
  }
#pragma unroll
  for (int e = 0; e < kWidth; ++e)
    v[e] = activate<Config::kActivation>(v[e]);
  if constexpr (Config::kResidual) {
    const TC *r = static_cast<const TC *>(p.residual) +
                  batch * p.strideResidual + row * p.ldr + col;
    if constexpr (kPair) {
      if (!Config::kCheckN || col < sizeN) {
        const Pair<TC> rr = *reinterpret_cast<const Pair<TC> *>(r);
        v[0] += Convert<TC>::toFloat(rr.x);
        v[1] += Convert<TC>::toFloat(rr.y);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kWidth; ++e)
        if (!Config::kCheckN || col + e < sizeN)
          v[e] += Convert<TC>::toFloat(r[e]);
    }
  }

  if constexpr (kPair) {
    if (!Config::kCheckN || col < sizeN)
      *reinterpret_cast<Pair<TC> *>(c) =
          Pair<TC>{Convert<TC>::fromFloat(v[0]), Convert<TC>::fromFloat(v[1])};
  } else {
#pragma unroll
    for (int e = 0; e < kWidth; ++e)
      if (!Config::kCheckN || col + e < sizeN)
        c[e] = Convert<TC>::fromFloat(v[e]);
  }
}

} // namespace kgen::gemm
