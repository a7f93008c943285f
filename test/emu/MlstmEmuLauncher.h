//===- MlstmEmuLauncher.h - A host launcher for one mLSTM kernel -*- C++
//-*-===//
//
// KERNEL_emu(params, launch): checks the launch geometry the library
// computed (mlstmLaunchDims) against the kernel's Config, then runs the
// kernel on the emulated grid with the Params the test built.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_TEST_EMU_MLSTMEMULAUNCHER_H
#define KGEN_TEST_EMU_MLSTMEMULAUNCHER_H

#include "EmuRuntime.h"

#include <cstdio>

#define MLSTM_EMU_LAUNCHER(KERNEL, EMUNAME)                                    \
  namespace {                                                                  \
  kgen::mlstm::Params gParams;                                                 \
  }                                                                            \
  extern "C" bool EMUNAME##_emu(const kgen::mlstm::Params &p,                  \
                                const emu::Launch &l, char *message,           \
                                size_t messageSize) {                          \
    if (l.threads != Config::kThreads || l.smemBytes != Config::kSmemBytes ||  \
        l.waveSize != kgen::kWaveSize) {                                       \
      std::snprintf(message, messageSize,                                      \
                    "launch geometry (%d threads of wave %d, %d B) disagrees " \
                    "with Config (%d threads of wave %d, %d B)",               \
                    l.threads, l.waveSize, l.smemBytes, Config::kThreads,      \
                    kgen::kWaveSize, Config::kSmemBytes);                      \
      return false;                                                            \
    }                                                                          \
    gParams = p;                                                               \
    emu::Args unused{};                                                        \
    return emu::launch(                                                        \
        l, [](const emu::Args &) { KERNEL(gParams); }, unused, message,        \
        messageSize);                                                          \
  }

#endif
