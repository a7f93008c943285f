//===- mfma_cdna.h - AMD CDNA atoms: MFMA 32x32x8 ---------------*- C++ -*-===//
//
// One wave64 matrix instruction, v_mfma_f32_32x32x8{bf16_1k,f16} (gfx90a,
// gfx942): D(32x32, fp32) += A(32x8) * B(8x32). With lane l:
//   A: l holds A[l%32][4*(l/32) .. 4*(l/32)+3]   (4 x 16-bit, k contiguous)
//   B: l holds B[4*(l/32) .. 4*(l/32)+3][l%32]
//   D: l holds d[i] = D[8*(i/4) + 4*(l/32) + i%4][l%32], i = 0..15
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen::cdna {

typedef float f32x16 __attribute__((ext_vector_type(16)));
/// Four 16-bit operand values as raw bits, in k order.
typedef unsigned short u16x4 __attribute__((ext_vector_type(4)));

constexpr int kMfmaM = 32, kMfmaN = 32, kMfmaK = 8;

/// d + a * b for one 32x32x8 tile; T is bf16 or f16.
template <class T> KGEN_DEVICE f32x16 mfma32x32x8(u16x4 a, u16x4 b, f32x16 d) {
  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value,
                "MFMA 32x32x8 takes bf16 or f16");
#if KGEN_AMD
  if constexpr (IsSame<T, bf16>::value) {
    typedef short i16x4 __attribute__((ext_vector_type(4)));
    // The _1k variant takes 4 bf16 per lane (the pre-gfx90a one takes 2).
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(
        bitCast<i16x4>(a), bitCast<i16x4>(b), d, 0, 0, 0);
  } else {
    typedef _Float16 h16x4 __attribute__((ext_vector_type(4)));
    return __builtin_amdgcn_mfma_f32_32x32x8f16(bitCast<h16x4>(a),
                                                bitCast<h16x4>(b), d, 0, 0, 0);
  }
#else
  // NVIDIA builds include this header with the family templates and never
  // instantiate it; nvcc rejects the AMD builtins even uninstantiated (a
  // `kgen emit --inline` file built outside kgen), nvrtc lets them pass.
  static_assert(sizeof(T) == 0, "MFMA is an AMD (CDNA) instruction");
  return d;
#endif
}

} // namespace kgen::cdna
