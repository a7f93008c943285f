//===- EmuLauncher.h - A host launcher for one generated kernel -*- C++ -*-===//
//
// Included by each generated wrapper (gen/kNNN.cpp) after the kernel source
// that kgen::emitGemm wrote (gen/kNNN.hip, included verbatim). It defines
// KERNEL_emu(args, launch): checks that the launch geometry the library
// computed (gemmLaunchDims) matches the kernel's Config, then runs the
// kernel on the emulated grid.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_TEST_EMU_EMULAUNCHER_H
#define KGEN_TEST_EMU_EMULAUNCHER_H

#include "EmuRuntime.h"

#include <cstdio>

#define EMU_LAUNCHER(KERNEL)                                                   \
  extern "C" bool KERNEL##_emu(const emu::Args &args, const emu::Launch &l,    \
                               char *message, size_t messageSize) {            \
    if (l.threads != Config::kThreads || l.smemBytes != Config::kSmemBytes ||  \
        l.waveSize != kgen::kWaveSize) {                                       \
      std::snprintf(message, messageSize,                                      \
                    "launch geometry (%d threads of wave %d, %d B) disagrees " \
                    "with Config (%d threads of wave %d, %d B)",               \
                    l.threads, l.waveSize, l.smemBytes, Config::kThreads,      \
                    kgen::kWaveSize, Config::kSmemBytes);                      \
      return false;                                                            \
    }                                                                          \
    return emu::launch(                                                        \
        l, [](const emu::Args &g) { KERNEL(g); }, args, message, messageSize); \
  }

/// A repack kernel's copy kernel (templates/gemm/repack.h): no Config
/// geometry to check, kgen::gemm::kRepackThreads threads a block.
#define EMU_REPACK_LAUNCHER(KERNEL)                                            \
  extern "C" bool KERNEL##_emu(const kgen::gemm::RepackParams &p,              \
                               const emu::Launch &l, char *message,            \
                               size_t messageSize) {                           \
    return emu::launchRaw(                                                     \
        l,                                                                     \
        [](const void *ctx) {                                                  \
          KERNEL(*static_cast<const kgen::gemm::RepackParams *>(ctx));         \
        },                                                                     \
        &p, message, messageSize);                                             \
  }

#endif
