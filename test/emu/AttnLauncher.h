//===- AttnLauncher.h - A host launcher for one attention kernel -*- C++
//-*-===//
//
// Included by each generated wrapper (gen/aNNN.cpp) after the source that
// kgen::emitAttention wrote (gen/aNNN.hip, verbatim). KERNEL_emu(params,
// launch, combine) checks the launch geometry against the kernel's Config
// and runs the main kernel, or with `combine` the split-KV combine kernel.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_TEST_EMU_ATTNLAUNCHER_H
#define KGEN_TEST_EMU_ATTNLAUNCHER_H

#include "EmuRuntime.h"

#include <cstdio>

#define EMU_ATTN_BODY(KERNEL)                                                  \
  [](const void *ctx) {                                                        \
    KERNEL(*static_cast<const kgen::attention::Params *>(ctx));                \
  }

#define EMU_ATTN_CHECK()                                                       \
  if (!combine &&                                                              \
      (l.threads != Config::kThreads || l.smemBytes != Config::kSmemBytes ||   \
       l.waveSize != kgen::kWaveSize)) {                                       \
    std::snprintf(message, messageSize,                                        \
                  "launch geometry (%d threads of wave %d, %d B) disagrees "   \
                  "with Config (%d threads of wave %d, %d B)",                 \
                  l.threads, l.waveSize, l.smemBytes, Config::kThreads,        \
                  kgen::kWaveSize, Config::kSmemBytes);                        \
    return false;                                                              \
  }                                                                            \
  if (combine && l.threads != Config::kCombineThreads) {                       \
    std::snprintf(message, messageSize,                                        \
                  "combine launch of %d threads, not %d", l.threads,           \
                  Config::kCombineThreads);                                    \
    return false;                                                              \
  }

#define EMU_ATTN_LAUNCHER(KERNEL)                                              \
  extern "C" bool KERNEL##_emu(const kgen::attention::Params &p,               \
                               const emu::Launch &l, bool combine,             \
                               char *message, size_t messageSize) {            \
    EMU_ATTN_CHECK()                                                           \
    if (combine) {                                                             \
      std::snprintf(message, messageSize, "no combine kernel without splits"); \
      return false;                                                            \
    }                                                                          \
    return emu::launchRaw(l, EMU_ATTN_BODY(KERNEL), &p, message, messageSize); \
  }

#define EMU_ATTN_LAUNCHER_SPLIT(KERNEL)                                        \
  extern "C" bool KERNEL##_emu(const kgen::attention::Params &p,               \
                               const emu::Launch &l, bool combine,             \
                               char *message, size_t messageSize) {            \
    EMU_ATTN_CHECK()                                                           \
    return combine ? emu::launchRaw(l, EMU_ATTN_BODY(KERNEL##_combine), &p,    \
                                    message, messageSize)                      \
                   : emu::launchRaw(l, EMU_ATTN_BODY(KERNEL), &p, message,     \
                                    messageSize);                              \
  }

#endif
