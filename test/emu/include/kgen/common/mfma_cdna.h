//===- mfma_cdna.h - EMULATED AMD CDNA atoms (test only) --------*- C++ -*-===//
//
// Replaces templates/common/mfma_cdna.h, and only it, in the emulator test:
// the same names and signatures, doing on the host what the instruction
// does, as we read the CDNA3 ISA (7.1, "Matrix fused multiply-add", and the
// AMD matrix instruction calculator) for v_mfma_f32_32x32x8bf16_1k and
// v_mfma_f32_32x32x8f16, one wave64, D(32x32) = A(32x8) * B(8x32) + C:
//
//   A: lane l holds A(l%32, 4(l/32) + e), e = 0..3 (a.v[e])
//   B: lane l holds B(4(l/32) + e, l%32)
//   D: lane l holds d[i] = D(8(i/4) + 4(l/32) + i%4, l%32), i = 0..15
//
// f32x16 and u16x4 are clang vector types on the GPU; here they are small
// structs with the operations the template uses ({} and {x, y, z, w}
// construction, [] indexing, an 8-byte alignment for u16x4 like the
// vector's). LDS needs no emulation: the template reads and writes it
// through plain pointers, into the block's shared buffer.
//
// The test feeds integers (|x| <= 15), so every product and sum is exact
// and the hardware's accumulation order and rounding cannot matter. What is
// checked is our code against our reading of the ISA, not against hardware.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen::cdna {

struct f32x16 {
  float v[16];
  float &operator[](int i) { return v[i]; }
  const float &operator[](int i) const { return v[i]; }
};
struct alignas(8) u16x4 {
  uint16_t v[4];
};

constexpr int kMfmaM = 32, kMfmaN = 32, kMfmaK = 8;

template <class T> inline f32x16 mfma32x32x8(u16x4 a, u16x4 b, f32x16 d) {
  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value,
                "MFMA 32x32x8 takes bf16 or f16");
  const u16x4 mine[2] = {a, b};
  const unsigned char *slots = emu::exchange(mine, sizeof(mine));
  auto value = [](uint16_t bits) {
    return IsSame<T, bf16>::value ? emu::decodeBf16(bits)
                                  : emu::decodeF16(bits);
  };
  float A[32][8], B[8][32];
  for (int l = 0; l < 64; ++l) {
    u16x4 ab[2];
    __builtin_memcpy(ab, slots + l * emu::kSlotBytes, sizeof(ab));
    for (int e = 0; e < 4; ++e) {
      A[l % 32][4 * (l / 32) + e] = value(ab[0].v[e]);
      B[4 * (l / 32) + e][l % 32] = value(ab[1].v[e]);
    }
  }
  const int l = emu::lane();
  for (int i = 0; i < 16; ++i) {
    const int row = 8 * (i / 4) + 4 * (l / 32) + i % 4, col = l % 32;
    float acc = d[i];
    for (int k = 0; k < 8; ++k)
      acc += A[row][k] * B[k][col];
    d[i] = acc;
  }
  return d;
}

} // namespace kgen::cdna
