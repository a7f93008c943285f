//===- global_io.h - EMULATED global loads and stores (test only) -*- C++
//-*-===//
//
// Replaces templates/common/global_io.h in the emulator test: the same
// accesses, after checking that they are aligned and that the loads lie
// inside the launch's inputs (emu::Launch::buffers: the source tensors,
// first element to last), which is where compute-sanitizer draws the line
// on a GPU. The loads are counted too, so that a test can tell the 16-byte
// path from the 2-byte one. (The destination is checked by its contents.)
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

#include <atomic>
#include <cstdint>
#include <cstring>

namespace emu {
/// Loads made through the atoms below since the program started.
inline std::atomic<long long> globalLoads16{0}, globalLoads2{0};
} // namespace emu

namespace kgen {

struct alignas(16) Words4 {
  uint32_t x, y, z, w;
};

inline Words4 loadGlobal16(const void *p) {
  Words4 v{};
  emu::globalLoads16.fetch_add(1, std::memory_order_relaxed);
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    emu::fail("16-byte load from %p: misaligned", p);
  else if (!emu::inputReadable(p, 16))
    emu::fail("16-byte load from %p: outside the inputs", p);
  else
    std::memcpy(&v, p, 16);
  return v;
}

inline uint16_t loadGlobal2(const void *p) {
  uint16_t v = 0;
  emu::globalLoads2.fetch_add(1, std::memory_order_relaxed);
  if (reinterpret_cast<std::uintptr_t>(p) % 2 != 0)
    emu::fail("2-byte load from %p: misaligned", p);
  else if (!emu::inputReadable(p, 2))
    emu::fail("2-byte load from %p: outside the inputs", p);
  else
    std::memcpy(&v, p, 2);
  return v;
}

inline void storeGlobal16(void *p, Words4 v) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    emu::fail("16-byte store to %p: misaligned", p);
  else
    std::memcpy(p, &v, 16);
}

} // namespace kgen
