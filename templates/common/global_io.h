//===- global_io.h - The copy kernel's global loads and stores --*- C++ -*-===//
//
// The copy kernel of a repack config (templates/gemm/repack.h) reads the
// caller's A and B only through these loads (16 aligned bytes, or one
// 2-byte element) and writes its 16-byte chunks through the store. NVIDIA:
// ld.global.nc (the read-only data path; the copy never writes what it
// reads) and st.global.v4 (written out: nvcc and nvrtc split a 16-byte
// struct store into four 4-byte ones). AMD: plain accesses
// (global_load_dwordx4 / _ushort, global_store_dwordx4).
// They are a header of their own, as the MMA atoms are, so that the
// emulator test (test/emu) can check every address the copy reads against
// the source tensor's bytes: an aligned block reaching past the tensor is
// what compute-sanitizer flags on a GPU.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen {

/// Four 32-bit words: 16 bytes in registers (the words little-endian, as in
/// memory).
struct alignas(16) Words4 {
  uint32_t x, y, z, w;
};

/// The 16 bytes at p (16-byte aligned).
KGEN_DEVICE Words4 loadGlobal16(const void *p) {
  Words4 v;
#if KGEN_PTX
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
#else
  v = *static_cast<const Words4 *>(p);
#endif
  return v;
}

/// The 2-byte element at p (2-byte aligned).
KGEN_DEVICE uint16_t loadGlobal2(const void *p) {
#if KGEN_PTX
  uint16_t v;
  asm("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
#else
  return *static_cast<const uint16_t *>(p);
#endif
}

/// Writes v to the 16 bytes at p (16-byte aligned).
KGEN_DEVICE void storeGlobal16(void *p, Words4 v) {
#if KGEN_PTX
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#else
  *static_cast<Words4 *>(p) = v;
#endif
}

} // namespace kgen
