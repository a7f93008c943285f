//===- mma_sm80.h - NVIDIA sm_80 atoms: cp.async, ldmatrix, mma -*- C++ -*-===//
//
// Warp-level tensor-core atoms as inline PTX (valid on sm_80 and sm_90a):
//   cp.async      global -> shared copies that bypass registers, with
//                 zero-fill for out-of-bounds (src-size 0);
//   ldmatrix      four 8x8 b16 matrices from shared memory into the mma
//                 fragment layout, .trans for tiles stored k-major;
//   mma.sync      m16n8k16, bf16/f16 inputs, fp32 accumulators; m16n8k8
//                 .tf32 for f32 inputs rounded by cvt.rna.tf32.f32;
//   prefetch.L2   a hint that brings a global line into L2 ahead of use.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen::sm80 {

/// The 32-bit shared-state-space address PTX shared-memory operands take.
KGEN_DEVICE uint32_t smemAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies kBytes (4, 8 or 16) from global to shared memory asynchronously.
/// When !valid no byte is read and the destination is zero-filled; src must
/// still be a mapped address, so callers pass the matrix base then. kL1:
/// cache the line in L1 too (.ca) for data other warps of the block read.
template <int kBytes, bool kL1 = false>
KGEN_DEVICE void cpAsync(uint32_t dst, const void *src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16,
                "cp.async copies 4, 8 or 16 bytes");
  const int srcBytes = valid ? kBytes : 0;
  if constexpr (kBytes == 16 && !kL1) // .cg: through L2, skip L1 (16 B only)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(src), "r"(srcBytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst),
                 "l"(src), "n"(kBytes), "r"(srcBytes)
                 : "memory");
}

/// Closes the group of cp.async issued since the last commit.
KGEN_DEVICE void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits until at most kPending committed groups are still in flight.
template <int kPending> KGEN_DEVICE void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

/// Asks for the 128-byte line holding p (generic address of global memory)
/// to be brought into L2: a hint, nothing written, nothing to wait for.
KGEN_DEVICE void prefetchL2(const void *p) {
  asm volatile("prefetch.L2 [%0];\n" ::"l"(p));
}

/// x in the low half, y in the high half, each rounded to nearest even to
/// T (bf16 or f16) by one conversion of the pair: a 16-bit mma operand
/// register from two fp32 values.
template <class T> KGEN_DEVICE uint32_t pack2(float x, float y) {
  uint32_t d;
  if constexpr (IsSame<T, bf16>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x));
  return d;
}

/// Loads four 8x8 b16 matrices. Lane 8*i + r gives the 16-byte-aligned
/// address of row r of matrix i; r[i] receives matrix i with lane l holding
/// row l/4, columns 2*(l%4) and 2*(l%4)+1 (low half first). With kTrans the
/// lane holds rows 2*(l%4), 2*(l%4)+1 of column l/4 instead. The "memory"
/// clobber keeps the compiler from moving the read above a barrier.
template <bool kTrans>
KGEN_DEVICE void ldmatrixX4(uint32_t (&r)[4], uint32_t addr) {
  if constexpr (kTrans)
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(addr)
        : "memory");
  else
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(addr)
        : "memory");
}

/// d += a * b for a 16x8x16 tile. With g = lane/4, t = lane%4:
///   a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..]  a[2] = A[g][2t+8..]
///   a[3] = A[g+8][2t+8..]    b[0] = B[2t..2t+1][g] b[1] = B[2t+8..][g]
///   d[0..1] = D[g][2t..2t+1] d[2..3] = D[g+8][2t..2t+1]
template <class T>
KGEN_DEVICE void mma16816(float (&d)[4], const uint32_t (&a)[4],
                          const uint32_t (&b)[2]) {
  static_assert(IsSame<T, bf16>::value || IsSame<T, f16>::value,
                "mma.sync m16n8k16 takes bf16 or f16");
  if constexpr (IsSame<T, bf16>::value)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]));
}

/// An fp32 value rounded to TF32 (10-bit mantissa, to nearest, ties away
/// from zero), as the 32-bit register mma .tf32 reads. Without it the
/// tensor core would drop the low 13 mantissa bits (truncate).
KGEN_DEVICE uint32_t toTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/// d += a * b for a 16x8x8 tile of TF32 values. With g = lane/4, t = lane%4:
///   a[0] = A[g][t]   a[1] = A[g+8][t]   a[2] = A[g][t+4]   a[3] = A[g+8][t+4]
///   b[0] = B[t][g]   b[1] = B[t+4][g]   d as mma16816.
KGEN_DEVICE void mma1688Tf32(float (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}

} // namespace kgen::sm80
