//===- mma_sm80.h - EMULATED NVIDIA sm_80 atoms (test only) -----*- C++ -*-===//
//
// Replaces templates/common/mma_sm80.h, and only it, in the emulator test:
// the same functions with the same signatures, each doing on the host what
// the PTX instruction does, as we read the PTX ISA (9.7.9.x, "Warp-level
// matrix instructions", and 9.7.8.25 cp.async):
//
//   smemAddress   byte offset of p in the block's shared buffer
//   prefetchL2    nothing (an L2 hint)
//   cpAsync       (.cg and .ca alike) a copy recorded into the thread's open
//                 group (or zero fill when !valid), landing when
//                 cp.async.wait_group covers it (lazy launches) or at once
//                 (eager launches); src and dst must be aligned to the copy
//                 size and src readable
//   ldmatrixX4    .x4 (.trans): lane 8i+r gives the address of row r of
//                 matrix i, 16-byte aligned; lane l receives in r[i] the
//                 elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of matrix i,
//                 low half first; with .trans the elements (2(l%4), l/4)
//                 and (2(l%4)+1, l/4), row and column of the stored matrix
//   mma16816      mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: with
//                 g = lane/4, t = lane%4, a[0..3] hold A(g, 2t..2t+1),
//                 A(g+8, 2t..), A(g, 2t+8..), A(g+8, 2t+8..); b[0..1] hold
//                 B(2t..2t+1, g), B(2t+8.., g); d[0..3] are D(g, 2t),
//                 D(g, 2t+1), D(g+8, 2t), D(g+8, 2t+1)
//   toTf32        cvt.rna.tf32.f32: the fp32 bits rounded to a 10-bit
//                 mantissa, to nearest, ties away from zero
//   mma1688Tf32   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32:
//                 a[0..3] hold A(g, t), A(g+8, t), A(g, t+4), A(g+8, t+4);
//                 b[0..1] hold B(t, g), B(t+4, g); d as above. The tensor
//                 core reads only the upper 19 bits of each operand (sign,
//                 exponent, 10 mantissa bits): the low 13 are dropped here,
//                 so a kernel that skipped cvt.rna would truncate, as on
//                 hardware, and fail the TF32 cases' bound
//
// The bf16/f16 cases feed integers (|x| <= 15), so every product and sum is
// exact and the hardware's accumulation order and rounding cannot matter. What
// is checked is our code against our reading of the ISA, not against hardware.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen::sm80 {

inline uint32_t smemAddress(const void *p) {
  const long long off = static_cast<const unsigned char *>(p) -
                        static_cast<const unsigned char *>(emu::smemBase());
  if (off < 0 || off > emu::smemBytes())
    emu::fail("smemAddress: pointer %p is outside shared memory", p);
  return static_cast<uint32_t>(off);
}

template <int kBytes, bool kL1 = false>
inline void cpAsync(uint32_t dst, const void *src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16,
                "cp.async copies 4, 8 or 16 bytes");
  emu::cpAsyncIssue(dst, src, kBytes, valid);
}

inline void cpAsyncCommit() { emu::cpAsyncCommit(); }

template <int kPending> inline void cpAsyncWait() {
  emu::cpAsyncWait(kPending);
}

/// prefetch.L2 is a cache hint: no effect on any value.
inline void prefetchL2(const void *) {}

template <bool kTrans> inline void ldmatrixX4(uint32_t (&r)[4], uint32_t addr) {
  if (addr % 16 != 0)
    emu::fail("ldmatrix: lane %d row address %u is not 16-byte aligned",
              emu::lane(), addr);
  const unsigned char *slots = emu::exchange(&addr, 4);
  const int l = emu::lane();
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int h = 0; h < 2; ++h) {
      const int row = kTrans ? 2 * (l % 4) + h : l / 4;
      const int col = kTrans ? l / 4 : 2 * (l % 4) + h;
      uint32_t rowAddr;
      __builtin_memcpy(&rowAddr, slots + (8 * i + row) * emu::kSlotBytes, 4);
      if (rowAddr % 16 != 0 || rowAddr + 16 > uint32_t(emu::smemBytes())) {
        emu::fail("ldmatrix: row address %u outside shared memory (%d B)",
                  rowAddr, emu::smemBytes());
        e[h] = 0xffff;
        continue;
      }
      __builtin_memcpy(&e[h], emu::smemBase() + rowAddr + 2 * col, 2);
    }
    r[i] = uint32_t(e[0]) | uint32_t(e[1]) << 16;
  }
}

template <class T>
inline void mma16816(float (&d)[4], const uint32_t (&a)[4],
                     const uint32_t (&b)[2]) {
  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value,
                "mma.sync m16n8k16 takes bf16 or f16");
  uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  const unsigned char *slots = emu::exchange(mine, sizeof(mine));
  auto value = [](uint32_t word, int half) {
    const uint16_t bits = uint16_t(word >> (16 * half));
    return IsSame<T, bf16>::value ? emu::decodeBf16(bits)
                                  : emu::decodeF16(bits);
  };
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    uint32_t w[6];
    __builtin_memcpy(w, slots + l * emu::kSlotBytes, sizeof(w));
    const int g = l / 4, t = l % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = value(w[0], h);
      A[g + 8][2 * t + h] = value(w[1], h);
      A[g][2 * t + 8 + h] = value(w[2], h);
      A[g + 8][2 * t + 8 + h] = value(w[3], h);
      B[2 * t + h][g] = value(w[4], h);
      B[2 * t + 8 + h][g] = value(w[5], h);
    }
  }
  const int g = emu::lane() / 4, t = emu::lane() % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float acc = d[e];
    for (int k = 0; k < 16; ++k)
      acc += A[row][k] * B[k][col];
    d[e] = acc;
  }
}

inline uint32_t toTf32(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return u; // inf, NaN
  return (u + 0x1000u) & 0xffffe000u;
}

inline void mma1688Tf32(float (&d)[4], const uint32_t (&a)[4],
                        const uint32_t (&b)[2]) {
  uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  const unsigned char *slots = emu::exchange(mine, sizeof(mine));
  auto value = [](uint32_t word) {
    const uint32_t kept = word & 0xffffe000u;
    float f;
    __builtin_memcpy(&f, &kept, 4);
    return f;
  };
  float A[16][8], B[8][8];
  for (int l = 0; l < 32; ++l) {
    uint32_t w[6];
    __builtin_memcpy(w, slots + l * emu::kSlotBytes, sizeof(w));
    const int g = l / 4, t = l % 4;
    A[g][t] = value(w[0]);
    A[g + 8][t] = value(w[1]);
    A[g][t + 4] = value(w[2]);
    A[g + 8][t + 4] = value(w[3]);
    B[t][g] = value(w[4]);
    B[t + 4][g] = value(w[5]);
  }
  const int g = emu::lane() / 4, t = emu::lane() % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float acc = d[e];
    for (int k = 0; k < 8; ++k)
      acc += A[row][k] * B[k][col];
    d[e] = acc;
  }
}

} // namespace kgen::sm80
