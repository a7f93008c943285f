//===- Backend.h - CUDA driver or HIP runtime, opened with dlopen -*- C++ -*-===//

#ifndef KGEN_RUNTIME_BACKEND_H
#define KGEN_RUNTIME_BACKEND_H

#include "kgen/Codegen/Emitter.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace kgen {

/// One GPU (device 0 of the vendor, $KGEN_DEVICE, or the device asked for)
/// of either vendor. The CUDA backend uses the device's primary context, so
/// it shares memory and streams with the CUDA runtime (PyTorch); each call
/// makes the device current and then the caller's again.
class Backend {
public:
  virtual ~Backend() = default;
  virtual Vendor vendor() const = 0;
  virtual std::string deviceName() const = 0;
  virtual std::string archName() const = 0; ///< "sm_90", "gfx942:sramecc+:xnack-"
  virtual Target target() const = 0;        ///< the kgen target to compile for
  virtual int computeUnits() const = 0;
  virtual std::string driverVersion() const = 0;
  virtual int deviceOrdinal() const = 0; ///< the vendor's device index

  using Module = void *;
  using Function = void *;
  virtual Module loadModule(const std::string &binary) = 0;
  virtual Function getFunction(Module m, const std::string &name) = 0;
  /// Launches on `stream` (CUstream / hipStream_t; null = default stream).
  /// Raises the dynamic shared memory limit of `f` when needed.
  virtual void launch(Function f, const LaunchDims &d, void **args,
                      void *stream) = 0;
  /// True when `stream` is being captured into a graph.
  virtual bool isCapturing(void *stream) = 0;

  /// How many clusters of `f` (compiled with clusters of its own size)
  /// launched with `d` can run at once; sizes persistent grids, since a
  /// cluster needs its CTAs' multiprocessors free together. 0 when the
  /// driver cannot say.
  virtual int residentClusters(Function f, const LaunchDims &d) = 0;

  /// The host image of a CUtensorMap (kgen::sm90::TensorMap in the
  /// templates): what encodeTensorMap writes and a kernel takes by value.
  struct alignas(64) TensorMap {
    unsigned long long words[16];
  };

  /// TMA (sm_90): writes the 128-byte tensor map (CUtensorMap) of a tensor
  /// of `rank` (1..5) dimensions of 2-byte elements (`t`): dims[0] is the
  /// contiguous one, strides[i] (elements, i >= 1; strides[0] is ignored)
  /// the distance between consecutive indices of dim i; read in boxes of
  /// box[0] x box[1] x ... with the 128-byte swizzle; reads past the tensor
  /// return zeros. Throws kgen::Error on a backend or driver without tensor
  /// maps, or when the driver refuses the arguments (alignment, box size).
  virtual void encodeTensorMap(void *out, const void *base, DType t, int rank,
                               const uint64_t *dims, const uint64_t *strides,
                               const uint32_t *box) = 0;
  /// The 2-D case: `rows` rows of `cols` elements, rows `ld` elements apart.
  void encodeTensorMap2d(void *out, const void *base, DType t, uint64_t cols,
                         uint64_t rows, uint64_t ld, uint32_t boxCols,
                         uint32_t boxRows) {
    const uint64_t dims[2] = {cols, rows}, strides[2] = {1, ld};
    const uint32_t box[2] = {boxCols, boxRows};
    encodeTensorMap(out, base, t, 2, dims, strides, box);
  }

  // Memory, for tests, examples and benchmarks.
  virtual void *alloc(size_t bytes) = 0;
  virtual void free(void *p) = 0;
  virtual void copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual void copyToHost(void *dst, const void *src, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // Streams, events, graphs and memset: what timing kernels needs (the
  // tuner). Handles are the vendor's (CUstream, CUevent, CUgraphExec /
  // hip*); every call throws kgen::Error naming the call on failure.

  /// Bytes of L2 cache; 0 when the driver does not say.
  virtual size_t l2Bytes() const = 0;

  /// A new stream that does not synchronize with the legacy default stream.
  virtual void *createStream() = 0;
  virtual void destroyStream(void *stream) = 0;
  /// Waits for the work queued on `stream`.
  virtual void synchronizeStream(void *stream) = 0;

  using Event = void *;
  /// An event that records time.
  virtual Event createEvent() = 0;
  virtual void recordEvent(Event e, void *stream) = 0;
  virtual void synchronizeEvent(Event e) = 0;
  /// Milliseconds from `start` to `end`, both recorded and completed.
  virtual float elapsedMs(Event start, Event end) = 0;
  virtual void destroyEvent(Event e) = 0;

  using GraphExec = void *;
  /// Starts capturing the work queued on `stream` into a graph. The mode is
  /// thread-local: other threads may keep loading modules meanwhile.
  virtual void beginCapture(void *stream) = 0;
  /// Ends the capture and instantiates what was captured; the graph itself
  /// is destroyed, the executable stays until destroyGraph. A capture that
  /// failed (an invalid call while capturing) still ends, then throws.
  virtual GraphExec endCapture(void *stream) = 0;
  /// Replays `g` on `stream`.
  virtual void launchGraph(GraphExec g, void *stream) = 0;
  virtual void destroyGraph(GraphExec g) = 0;

  /// Sets `bytes` bytes at `p` to `value`, ordered on `stream`.
  virtual void memsetAsync(void *p, unsigned char value, size_t bytes,
                           void *stream) = 0;
};

/// Opens the first GPU runtime that has a device: `prefer` first when given,
/// else $KGEN_BACKEND (cuda|hip), else CUDA then HIP; on it, device `device`
/// when given, else $KGEN_DEVICE, else 0. Returns null with `whyNot` saying
/// what was tried when there is none (a device past the vendor's count
/// included).
std::unique_ptr<Backend> openBackend(std::optional<Vendor> prefer,
                                     std::string *whyNot,
                                     std::optional<int> device = std::nullopt);

} // namespace kgen

#endif
