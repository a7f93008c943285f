//===- EmuRuntime.h - Host threads standing in for a GPU block --*- C++ -*-===//
//
// The machinery under the emulated kernel language (include/hip/
// hip_runtime.h) and the emulated atoms (include/kgen/common/*.h): every GPU
// thread of a block is a host thread, a block barrier is a std::barrier over
// them, and a warp (wavefront) exchanges operands through per-warp slots
// behind a barrier over its lanes. Shared memory is one static buffer,
// refilled with NaN before every block. Nothing here knows the kgen
// templates; this header stays light because every kernel TU includes it.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_TEST_EMU_EMURUNTIME_H
#define KGEN_TEST_EMU_EMURUNTIME_H

#include "kgen/gemm/params.h"

#include <cstddef>
#include <cstdint>

namespace emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

/// The shared-memory buffer the kernels' `extern __shared__ kgen_smem[]`
/// resolves to (defined in EmuRuntime.cpp as kgen::gemm::kgen_smem), its
/// capacity, and the bytes the current launch asked for. Accesses past the
/// launch's size are errors: under ASan the rest of the buffer is poisoned,
/// and a canary behind it is checked after every block.
unsigned char *smemBase();
int smemBytes();

/// __syncthreads(): a barrier over the block's threads.
void syncThreads();
/// __syncthreads_or(p): the barrier, returning whether any thread's p was
/// nonzero.
int syncThreadsOr(int predicate);
/// __syncwarp(): a barrier over the calling warp's lanes.
void syncWarp();

/// This thread's lane in its warp (wavefront), its warp, the warp size.
int lane();
int warp();
int waveSize();

/// All-gather within the calling warp: lane l copies `bytes` (<= kSlotBytes)
/// from `mine` into its slot; after a barrier over the warp, the returned
/// pointer holds every lane's slot, lane l at offset l * kSlotBytes. The
/// data stay valid until the caller's next exchange (slots alternate between
/// two buffers, so one barrier per exchange suffices).
constexpr int kSlotBytes = 32;
const unsigned char *exchange(const void *mine, int bytes);

/// Records a failure of the running launch (the first few messages are
/// kept); the kernel goes on, the launch reports it.
void fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Whether [p, p + bytes) lies inside one of the launch's inputs (GEMM: A
/// or B; the elements from the first to the last, without the guards).
bool inputReadable(const void *p, size_t bytes);

/// cp.async bookkeeping (PTX: cp.async, cp.async.commit_group,
/// cp.async.wait_group), per thread. A copy is recorded into the thread's
/// open group; commit closes it; wait_group N completes the oldest committed
/// groups until at most N remain. Launches run either lazily (a copy lands
/// only when a wait covers it: the latest moment the ISA allows) or eagerly
/// (at issue: the earliest).
void cpAsyncIssue(uint32_t smemOffset, const void *src, int bytes, bool valid);
void cpAsyncCommit();
void cpAsyncWait(int pending);

/// 16-bit float decoding for the emulated matrix units, written out here
/// (not the prelude's, which is code under test).
float decodeBf16(uint16_t bits);
float decodeF16(uint16_t bits);

//===----------------------------------------------------------------------===//
// Launching (used by the per-kernel launchers and the test driver)
//===----------------------------------------------------------------------===//

/// A global buffer the kernel may read (and, for C, write).
struct Buffer {
  const void *base = nullptr;
  size_t bytes = 0;
};

struct Launch {
  unsigned grid[3] = {1, 1, 1}; ///< blocks along x, y (GEMM: N, M) and z
  int threads = 0;              ///< per block
  int waveSize = 0;             ///< 32 (NVIDIA) or 64 (AMD)
  int smemBytes = 0;            ///< dynamic shared memory
  bool eagerCopies = false;     ///< cp.async lands at issue instead of at wait
  Buffer buffers[3];            ///< A, B, C (attention: Q, K, V)
  int inputs = 2;               ///< buffers[0, inputs) are what cp.async reads
};

/// The kernel's argument, as the runtime passes it: the plain struct of
/// templates/gemm/params.h.
using Args = kgen::gemm::Params;

/// Largest dynamic shared memory a launch may ask for.
constexpr int kSmemCapacity = 256 * 1024;

/// Runs body(args) as every thread of every block of the grid (blocks one
/// after another, the threads of a block concurrently). Returns false and
/// fills `message` (if given) when anything failed.
bool launch(const Launch &l, void (*body)(const Args &), const Args &args,
            char *message, size_t messageSize);

/// The same for any kernel: body(ctx) runs as every thread of every block.
bool launchRaw(const Launch &l, void (*body)(const void *), const void *ctx,
               char *message, size_t messageSize);

} // namespace emu

#endif
