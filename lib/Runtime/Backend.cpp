//===- Backend.cpp - CUDA driver or HIP runtime, opened with dlopen -------===//
//
// Like the compilers, the GPU runtimes are opened at run time with their C
// entry points declared here, so kgen builds without CUDA or ROCm headers and
// runs on a machine with either GPU, or none. On a machine without a GPU
// driver openBackend returns at once: it looks for libcuda.so.1 and /dev/kfd
// before it initializes anything. What the two runtimes do alike (modules,
// streams, events, graph capture, error text) is DriverBackend's, once;
// CudaBackend and HipBackend bind their entry points and add the rest.
// test/unit/BackendTest.cpp runs the CUDA one on a mock driver.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Backend.h"
#include "Posix.h"
#include "kgen/Error.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

using namespace kgen;
using namespace kgen::posix;

namespace {

template <typename Fn>
void bindOrThrow(void *lib, const char *libName, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!fn)
    throw Error(std::string(libName) + " has no " + name +
                " (the GPU driver is older than kgen supports; update it)");
}

/// For entry points only some GPUs or drivers have (TMA, clusters,
/// programmatic launch): the caller checks for null.
template <typename Fn> void bindOptional(void *lib, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
}

/// The device ordinal from $KGEN_DEVICE (default 0).
int ordinalFromEnv() {
  const char *s = envOrNull("KGEN_DEVICE");
  if (!s)
    return 0;
  char *end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end || v < 0 || v > 1024)
    throw Error(std::string("KGEN_DEVICE='") + s +
                "' is not a device ordinal: set it to 0, 1, ... or unset it");
  return int(v);
}

std::string hex(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

std::string describeLaunch(const LaunchDims &d, void *stream) {
  return "grid (" + std::to_string(d.grid[0]) + "," +
         std::to_string(d.grid[1]) + "," + std::to_string(d.grid[2]) +
         ") block (" + std::to_string(d.block[0]) + "," +
         std::to_string(d.block[1]) + "," + std::to_string(d.block[2]) +
         ") with " + std::to_string(d.smemBytes) +
         " bytes of dynamic shared memory on stream " + hex(stream);
}

/// An entry point of the GPU runtime and the name it was bound under, which
/// its errors give.
template <typename Fn> struct Entry {
  Fn fn = nullptr;
  const char *name = "";
};

/// Binds `e` to the runtime's `name`. A required entry point that is missing
/// throws; an optional one (only timing needs it) stays null, and the call
/// that needs it says so (DriverBackend::present).
template <typename Fn>
void bindEntry(void *lib, const char *libName, const char *name, Entry<Fn> &e,
               bool required = true) {
  e.name = name;
  if (required)
    bindOrThrow(lib, libName, name, e.fn);
  else
    bindOptional(lib, name, e.fn);
}

// Values cuda.h and hip_runtime_api.h share.
constexpr unsigned kStreamNonBlocking = 1;
constexpr int kStreamCaptureModeThreadLocal = 1;
constexpr int kErrorStreamCaptureImplicit = 906;

/// What the CUDA driver and the HIP runtime do alike, through entry points of
/// the same signatures: modules, streams, events and graphs, and the device's
/// description. A backend binds `calls_` and the rest of its API, fills in
/// the description, makes its device current on the calling thread for each
/// call and gives back what was current before (enter, leave: Current), and
/// names its error codes (describeError).
class DriverBackend : public Backend {
public:
  std::string deviceName() const override { return name_; }
  std::string archName() const override { return arch_; }
  Target target() const override { return target_; }
  int computeUnits() const override { return units_; }
  std::string driverVersion() const override { return driver_; }
  int deviceOrdinal() const override { return ordinal_; }
  size_t l2Bytes() const override { return l2Bytes_; }

  Module loadModule(const std::string &binary) override {
    const Current current(*this);
    void *m = nullptr;
    call(calls_.moduleLoadData,
         "loading a " + std::to_string(binary.size()) +
             "-byte module (built for another GPU, or corrupted?)",
         &m, binary.data());
    std::lock_guard<std::mutex> g(mu_);
    modules_.push_back(m);
    return m;
  }

  Function getFunction(Module m, const std::string &name) override {
    const Current current(*this);
    void *f = nullptr;
    call(calls_.moduleGetFunction, "looking up kernel '" + name + "'", &f, m,
         name.c_str());
    return f;
  }

  bool isCapturing(void *stream) override {
    const Current current(*this);
    int status = 0;
    const int rc = calls_.streamIsCapturing.fn(stream, &status);
    // The legacy default stream reports this while another stream captures
    // in global mode: work on it would break that capture, so it counts.
    if (rc == kErrorStreamCaptureImplicit)
      return true;
    check(rc, calls_.streamIsCapturing.name, "stream " + hex(stream));
    return status != 0; // active or invalidated
  }

  void *createStream() override {
    const Current current(*this);
    void *s = nullptr;
    call(calls_.streamCreate, "creating a stream", &s, kStreamNonBlocking);
    return s;
  }
  void destroyStream(void *stream) override {
    const Current current(*this);
    call(calls_.streamDestroy, "destroying stream " + hex(stream), stream);
  }
  void synchronizeStream(void *stream) override {
    const Current current(*this);
    call(calls_.streamSynchronize,
         "waiting for stream " + hex(stream) +
             " (an earlier kernel may have failed)",
         stream);
  }

  void recordEvent(Event e, void *stream) override {
    const Current current(*this);
    call(calls_.eventRecord, "recording an event on stream " + hex(stream), e,
         stream);
  }
  void synchronizeEvent(Event e) override {
    const Current current(*this);
    call(calls_.eventSynchronize,
         "waiting for an event (an earlier kernel may have failed)", e);
  }
  float elapsedMs(Event start, Event end) override {
    const Current current(*this);
    float ms = 0;
    call(calls_.eventElapsedTime, "reading the time between two events", &ms,
         start, end);
    return ms;
  }
  void destroyEvent(Event e) override {
    const Current current(*this);
    call(calls_.eventDestroy, "destroying an event", e);
  }

  void beginCapture(void *stream) override {
    const Current current(*this);
    call(calls_.streamBeginCapture,
         "starting a capture on stream " + hex(stream), stream,
         kStreamCaptureModeThreadLocal);
  }
  GraphExec endCapture(void *stream) override {
    const Current current(*this);
    // End the capture first: a stream left capturing breaks later calls.
    void *graph = nullptr;
    const auto &end = present(calls_.streamEndCapture);
    const auto &destroy = present(calls_.graphDestroy);
    const int rc = end.fn(stream, &graph);
    if (rc != 0 && graph)
      destroy.fn(graph);
    check(rc, end.name, "ending the capture on stream " + hex(stream));
    void *exec = nullptr;
    try {
      instantiate(&exec, graph);
    } catch (...) {
      destroy.fn(graph);
      throw;
    }
    destroy.fn(graph);
    return exec;
  }
  void launchGraph(GraphExec g, void *stream) override {
    const Current current(*this);
    call(calls_.graphLaunch, "replaying a graph on stream " + hex(stream), g,
         stream);
  }
  void destroyGraph(GraphExec g) override {
    const Current current(*this);
    call(calls_.graphExecDestroy, "destroying a graph", g);
  }

protected:
  /// The entry points of the same signature in both runtimes (graph
  /// instantiation differs: instantiate()).
  struct Calls {
    Entry<int (*)(void **, const void *)> moduleLoadData;
    Entry<int (*)(void *)> moduleUnload;
    Entry<int (*)(void **, void *, const char *)> moduleGetFunction;
    Entry<int (*)(void *, int *)> streamIsCapturing;
    Entry<int (*)(void **, unsigned)> streamCreate;
    Entry<int (*)(void *)> streamDestroy, streamSynchronize;
    Entry<int (*)(void *, void *)> eventRecord;
    Entry<int (*)(void *)> eventSynchronize, eventDestroy;
    Entry<int (*)(float *, void *, void *)> eventElapsedTime;
    // Optional (timing only): a driver without them still runs kernels.
    Entry<int (*)(void *, int)> streamBeginCapture;
    Entry<int (*)(void *, void **)> streamEndCapture;
    Entry<int (*)(void *, void *)> graphLaunch;
    Entry<int (*)(void *)> graphExecDestroy, graphDestroy;
  };

  explicit DriverBackend(int ordinal) : ordinal_(ordinal) {}

  /// Throws unless the runtime (`vendor`, with `count` devices) has ours.
  void requireOrdinal(int count, const char *vendor) const {
    if (ordinal_ >= count)
      throw Error("device " + std::to_string(ordinal_) +
                  " was asked for (KGEN_DEVICE or the runtime's device) but " +
                  vendor + " has " + std::to_string(count) + " device(s)");
  }

  /// This backend's device current on the calling thread for a scope; then
  /// the thread's own again. The caller's current device is PyTorch's (or
  /// the host program's): a kgen call on another GPU must not move it, or
  /// the caller's next allocation or launch would land on kgen's device.
  class Current {
  public:
    explicit Current(DriverBackend &b) : b_(b), previous_(b.enter()) {}
    ~Current() { b_.leave(previous_); }
    Current(const Current &) = delete;
    Current &operator=(const Current &) = delete;

  private:
    DriverBackend &b_;
    intptr_t previous_;
  };
  /// Makes this backend's device current; returns what leave() restores
  /// (kNothingToRestore when it already was current).
  virtual intptr_t enter() = 0;
  virtual void leave(intptr_t previous) noexcept = 0;
  static constexpr intptr_t kNothingToRestore = -1;
  /// The runtime's name and description of an error code (null if none).
  virtual void describeError(int rc, const char **name,
                             const char **text) const = 0;
  /// Instantiates a captured graph into `*exec`, or throws.
  virtual void instantiate(void **exec, void *graph) = 0;

  /// Throws an Error naming the call, the code and what was being done:
  /// `context` is a string or, where building it costs (a launch's, a
  /// tensor map's: every call's host time), a callable returning one, run
  /// only on failure.
  template <class Context>
  void check(int rc, const char *callName, const Context &context) const {
    if (rc == 0)
      return;
    if constexpr (std::is_invocable_v<const Context &>)
      fail(rc, callName, context());
    else
      fail(rc, callName, std::string(context));
  }
  [[noreturn]] void fail(int rc, const char *callName,
                         const std::string &context) const {
    const char *name = nullptr, *text = nullptr;
    describeError(rc, &name, &text);
    throw Error(
        std::string(callName) + " failed: " +
        (name ? name
              : std::string(vendor() == Vendor::NVIDIA ? "CUDA" : "HIP") +
                    " error " + std::to_string(rc)) +
        " (" + (text ? text : "no description") + ") while " + context +
        (name_.empty()
             ? std::string()
             : " on device " + std::to_string(ordinal_) + " (" + name_ + ")"));
  }

  /// `e` itself, once it is known to be bound: an optional entry point the
  /// driver lacks throws here, naming it.
  template <typename Fn> static const Entry<Fn> &present(const Entry<Fn> &e) {
    if (!e.fn)
      throw Error(std::string("the GPU driver has no ") + e.name +
                  ", which timing kernels (graph replay) needs; update the "
                  "driver");
    return e;
  }

  /// Calls `e` with `args` and checks its result.
  template <typename Fn, class Context, typename... Args>
  void call(const Entry<Fn> &e, const Context &context, Args... args) {
    check(present(e).fn(args...), e.name, context);
  }

  /// For the destructors: the modules unloaded under the device, the
  /// caller's context current again after, as after every call; errors
  /// ignored, since at process exit the driver may already be gone (a
  /// device that cannot be made current keeps its modules).
  void unloadModulesQuietly() noexcept {
    try {
      const Current current(*this);
      for (void *m : modules_)
        calls_.moduleUnload.fn(m);
    } catch (...) { // nothing may leave a destructor
    }
  }

  Calls calls_;
  int ordinal_;
  std::string name_, arch_, driver_;
  Target target_ = Target::SM80;
  int units_ = 0;
  size_t l2Bytes_ = 0;
  std::mutex mu_;
  std::vector<void *> modules_;
};

//===----------------------------------------------------------------------===//
// CUDA driver
//===----------------------------------------------------------------------===//

/// The CUDA driver API entry points kgen uses besides DriverBackend's
/// (stable since CUDA 11; the _v2 names are the ones cuda.h maps the plain
/// names to).
struct CudaApi {
  using Ptr = unsigned long long;
  int (*init)(unsigned);
  int (*driverGetVersion)(int *);
  int (*deviceGetCount)(int *);
  int (*deviceGet)(int *, int);
  int (*deviceGetName)(char *, int, int);
  int (*deviceGetAttribute)(int *, int, int);
  int (*primaryCtxRetain)(void **, int);
  int (*primaryCtxRelease)(int);
  int (*ctxSetCurrent)(void *);
  int (*ctxGetCurrent)(void **);
  int (*ctxSynchronize)();
  int (*funcSetAttribute)(void *, int, int);
  int (*launchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, unsigned, void *, void **, void **);
  int (*launchKernelEx)(const void *, void *, void **, void **); // 11.8+
  int (*memAlloc)(Ptr *, size_t);
  int (*memFree)(Ptr);
  int (*memcpyHtoD)(Ptr, const void *, size_t);
  int (*memcpyDtoH)(void *, Ptr, size_t);
  int (*getErrorName)(int, const char **);
  int (*getErrorString)(int, const char **);
  int (*eventCreate)(void **, unsigned);
  int (*memsetD8Async)(Ptr, unsigned char, size_t, void *);
  Entry<int (*)(void **, void *, unsigned long long)> graphInstantiate;
  int (*occupancyMaxActiveClusters)(int *, void *, const void *);
  // TMA (CUDA 12+).
  int (*tensorMapEncodeTiled)(void *, int, unsigned, void *,
                              const unsigned long long *,
                              const unsigned long long *, const unsigned *,
                              const unsigned *, int, int, int, int);
};

// Values from cuda.h.
constexpr int kCudaErrorNoDevice = 100;
constexpr int kCuAttrMultiprocessorCount = 16;
constexpr int kCuAttrComputeCapabilityMajor = 75;
constexpr int kCuAttrComputeCapabilityMinor = 76;
constexpr int kCuAttrMaxSharedMemoryPerBlockOptin = 97;
constexpr int kCuAttrL2CacheSize = 38;
constexpr int kCuFuncAttrMaxDynamicSharedSizeBytes = 8;
constexpr unsigned kDefaultSharedLimit = 48 * 1024;

/// CUlaunchAttribute (cuda.h): an id padded to 8 bytes and a 64-byte value
/// union, here its int members (programmaticStreamSerializationAllowed).
struct alignas(8) CuLaunchAttribute {
  int id;
  int pad;
  int value[16];
};
constexpr int kCuLaunchAttributeProgrammaticStreamSerialization = 6;

/// CUlaunchConfig (cuda.h): grid, block, dynamic shared memory, stream and
/// the attributes.
struct CuLaunchConfig {
  unsigned grid[3], block[3], smem;
  void *stream;
  CuLaunchAttribute *attrs;
  unsigned numAttrs;
};

CuLaunchConfig launchConfig(const LaunchDims &d, void *stream,
                            CuLaunchAttribute *attrs, unsigned numAttrs) {
  return CuLaunchConfig{{d.grid[0], d.grid[1], d.grid[2]},
                        {d.block[0], d.block[1], d.block[2]},
                        d.smemBytes,
                        stream,
                        attrs,
                        numAttrs};
}

class CudaBackend : public DriverBackend {
public:
  CudaBackend(void *lib, int ordinal) : DriverBackend(ordinal) {
    const char *L = "libcuda.so.1";
    bindOrThrow(lib, L, "cuGetErrorName", api_.getErrorName);
    bindOrThrow(lib, L, "cuGetErrorString", api_.getErrorString);
    bindOrThrow(lib, L, "cuInit", api_.init);
    bindOrThrow(lib, L, "cuDriverGetVersion", api_.driverGetVersion);
    bindOrThrow(lib, L, "cuDeviceGetCount", api_.deviceGetCount);
    bindOrThrow(lib, L, "cuDeviceGet", api_.deviceGet);
    bindOrThrow(lib, L, "cuDeviceGetName", api_.deviceGetName);
    bindOrThrow(lib, L, "cuDeviceGetAttribute", api_.deviceGetAttribute);
    bindOrThrow(lib, L, "cuDevicePrimaryCtxRetain", api_.primaryCtxRetain);
    bindOrThrow(lib, L, "cuDevicePrimaryCtxRelease_v2", api_.primaryCtxRelease);
    bindOrThrow(lib, L, "cuCtxSetCurrent", api_.ctxSetCurrent);
    bindOrThrow(lib, L, "cuCtxGetCurrent", api_.ctxGetCurrent);
    bindOrThrow(lib, L, "cuCtxSynchronize", api_.ctxSynchronize);
    bindOrThrow(lib, L, "cuFuncSetAttribute", api_.funcSetAttribute);
    bindOrThrow(lib, L, "cuLaunchKernel", api_.launchKernel);
    bindOrThrow(lib, L, "cuMemAlloc_v2", api_.memAlloc);
    bindOrThrow(lib, L, "cuMemFree_v2", api_.memFree);
    bindOrThrow(lib, L, "cuMemcpyHtoD_v2", api_.memcpyHtoD);
    bindOrThrow(lib, L, "cuMemcpyDtoH_v2", api_.memcpyDtoH);
    bindOrThrow(lib, L, "cuEventCreate", api_.eventCreate);
    bindOrThrow(lib, L, "cuMemsetD8Async", api_.memsetD8Async);
    bindEntry(lib, L, "cuModuleLoadData", calls_.moduleLoadData);
    bindEntry(lib, L, "cuModuleUnload", calls_.moduleUnload);
    bindEntry(lib, L, "cuModuleGetFunction", calls_.moduleGetFunction);
    bindEntry(lib, L, "cuStreamIsCapturing", calls_.streamIsCapturing);
    bindEntry(lib, L, "cuStreamCreate", calls_.streamCreate);
    bindEntry(lib, L, "cuStreamDestroy_v2", calls_.streamDestroy);
    bindEntry(lib, L, "cuStreamSynchronize", calls_.streamSynchronize);
    bindEntry(lib, L, "cuEventRecord", calls_.eventRecord);
    bindEntry(lib, L, "cuEventSynchronize", calls_.eventSynchronize);
    bindEntry(lib, L, "cuEventDestroy_v2", calls_.eventDestroy);
    // The plain name is in every driver; CUDA 12.8 headers map it to _v2,
    // which a future driver might keep alone.
    bindEntry(lib, L, "cuEventElapsedTime", calls_.eventElapsedTime, false);
    if (!calls_.eventElapsedTime.fn)
      bindEntry(lib, L, "cuEventElapsedTime_v2", calls_.eventElapsedTime);
    bindEntry(lib, L, "cuStreamBeginCapture_v2", calls_.streamBeginCapture,
              false);
    bindEntry(lib, L, "cuStreamEndCapture", calls_.streamEndCapture, false);
    bindEntry(lib, L, "cuGraphInstantiateWithFlags", api_.graphInstantiate,
              false);
    bindEntry(lib, L, "cuGraphLaunch", calls_.graphLaunch, false);
    bindEntry(lib, L, "cuGraphExecDestroy", calls_.graphExecDestroy, false);
    bindEntry(lib, L, "cuGraphDestroy", calls_.graphDestroy, false);
    bindOptional(lib, "cuTensorMapEncodeTiled", api_.tensorMapEncodeTiled);
    bindOptional(lib, "cuOccupancyMaxActiveClusters",
                 api_.occupancyMaxActiveClusters);
    bindOptional(lib, "cuLaunchKernelEx", api_.launchKernelEx);

    check(api_.init(0), "cuInit", "initializing the CUDA driver");
    int count = 0;
    check(api_.deviceGetCount(&count), "cuDeviceGetCount", "counting devices");
    if (count == 0)
      throw Error("the CUDA driver sees no device");
    requireOrdinal(count, "CUDA");
    check(api_.deviceGet(&device_, ordinal_), "cuDeviceGet", "device lookup");
    char name[256] = {};
    check(api_.deviceGetName(name, sizeof(name) - 1, device_),
          "cuDeviceGetName", "device name");
    name_ = name;
    int major = 0, minor = 0;
    check(
        api_.deviceGetAttribute(&major, kCuAttrComputeCapabilityMajor, device_),
        "cuDeviceGetAttribute", "compute capability");
    check(
        api_.deviceGetAttribute(&minor, kCuAttrComputeCapabilityMinor, device_),
        "cuDeviceGetAttribute", "compute capability");
    check(api_.deviceGetAttribute(&units_, kCuAttrMultiprocessorCount, device_),
          "cuDeviceGetAttribute", "multiprocessor count");
    check(api_.deviceGetAttribute(&maxSmemOptin_,
                                  kCuAttrMaxSharedMemoryPerBlockOptin, device_),
          "cuDeviceGetAttribute", "shared memory opt-in limit");
    int l2 = 0;
    if (api_.deviceGetAttribute(&l2, kCuAttrL2CacheSize, device_) == 0 &&
        l2 > 0)
      l2Bytes_ = size_t(l2);
    int v = 0;
    check(api_.driverGetVersion(&v), "cuDriverGetVersion", "driver version");
    driver_ = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    arch_ = "sm_" + std::to_string(major) + std::to_string(minor);
    // sm_90a code runs only on 9.0; sm_80 code runs on every 8.x.
    if (major == 9 && minor == 0)
      target_ = Target::SM90A;
    else if (major == 8)
      target_ = Target::SM80;
    else
      throw Error("device " + std::to_string(ordinal_) + " (" + name_ +
                  ") has compute capability " + std::to_string(major) + "." +
                  std::to_string(minor) + " (" + arch_ +
                  "); kgen generates code for 8.x (sm_80) and 9.0 (sm_90a) "
                  "only: use one of those GPUs, or compile ahead of time "
                  "with --target");
    // The primary context is the one the CUDA runtime (and PyTorch) use, so
    // pointers and streams pass freely between them and kgen.
    check(api_.primaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain",
          "retaining the primary context");
  }

  ~CudaBackend() override {
    unloadModulesQuietly();
    api_.primaryCtxRelease(device_);
  }

  Vendor vendor() const override { return Vendor::NVIDIA; }

  void launch(Function f, const LaunchDims &d, void **args,
              void *stream) override {
    const Current current(*this);
    raiseSharedLimit(f, d.smemBytes);
    // Programmatic dependent launch exists from sm_90; without
    // cuLaunchKernelEx the kernel simply waits for the previous one.
    if (d.overlapsPrevious && target_ == Target::SM90A && api_.launchKernelEx) {
      CuLaunchAttribute attr{
          kCuLaunchAttributeProgrammaticStreamSerialization, 0, {1}};
      const CuLaunchConfig config = launchConfig(d, stream, &attr, 1);
      check(api_.launchKernelEx(&config, f, args, nullptr), "cuLaunchKernelEx",
            [&] {
              return "launching (overlapping the previous kernel) " +
                     describeLaunch(d, stream);
            });
      return;
    }
    check(api_.launchKernel(f, d.grid[0], d.grid[1], d.grid[2], d.block[0],
                            d.block[1], d.block[2], d.smemBytes, stream, args,
                            nullptr),
          "cuLaunchKernel",
          [&] { return "launching " + describeLaunch(d, stream); });
  }

  /// Above 48 KiB each function must opt in; once per function and size.
  void raiseSharedLimit(Function f, unsigned bytes) {
    if (bytes <= kDefaultSharedLimit)
      return;
    if (bytes > unsigned(maxSmemOptin_))
      throw Error("the kernel needs " + std::to_string(bytes) +
                  " bytes of shared memory, device " + name_ + " allows " +
                  std::to_string(maxSmemOptin_) +
                  " per block: pick a config with fewer stages or smaller "
                  "tiles");
    std::lock_guard<std::mutex> g(mu_);
    unsigned &set = smemLimit_[f];
    if (set < bytes) {
      check(api_.funcSetAttribute(f, kCuFuncAttrMaxDynamicSharedSizeBytes,
                                  int(bytes)),
            "cuFuncSetAttribute",
            "raising the dynamic shared memory limit to " +
                std::to_string(bytes) + " bytes");
      set = bytes;
    }
  }

  int residentClusters(Function f, const LaunchDims &d) override {
    if (!api_.occupancyMaxActiveClusters)
      return 0;
    const Current current(*this);
    raiseSharedLimit(f, d.smemBytes);
    {
      std::lock_guard<std::mutex> g(mu_);
      if (auto it = clusters_.find({f, d.smemBytes}); it != clusters_.end())
        return it->second;
    }
    // No attributes: the kernel's own cluster dimensions apply.
    const CuLaunchConfig config = launchConfig(d, nullptr, nullptr, 0);
    int n = 0;
    if (api_.occupancyMaxActiveClusters(&n, f, &config) != 0)
      n = 0;
    std::lock_guard<std::mutex> g(mu_);
    clusters_[{f, d.smemBytes}] = n;
    return n;
  }

  void encodeTensorMap(void *out, const void *base, DType t, int rank,
                       const uint64_t *dims, const uint64_t *strides,
                       const uint32_t *box) override {
    // The encoder wants a current context (CUDA_ERROR_INVALID_CONTEXT on a
    // thread that has none, as a plain C++ host's between kgen calls).
    const Current current(*this);
    if (!api_.tensorMapEncodeTiled)
      throw Error("the CUDA driver has no cuTensorMapEncodeTiled, which the "
                  "sm_90a wgmma kernels (TMA) need; update the driver or use "
                  "a config of the sm_80 loop");
    if (rank < 1 || rank > 5)
      throw Error("a TMA tensor map has 1 to 5 dimensions, not " +
                  std::to_string(rank));
    // CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion values
    // from cuda.h.
    constexpr int kUint8 = 0, kFloat16 = 6, kBfloat16 = 9, kSwizzle128B = 3,
                  kL2Promote256B = 3;
    const int type = t == DType::BF16  ? kBfloat16
                     : t == DType::F16 ? kFloat16
                     : isFp8(t)        ? kUint8 // TMA only moves the bytes
                                       : -1;
    if (type < 0)
      throw Error("a TMA tensor map of " + std::string(toString(t)) +
                  " elements: kgen builds them for bf16, f16 and fp8 only");
    unsigned long long d[5], byteStrides[4];
    unsigned bx[5], elementStrides[5];
    for (int i = 0; i < rank; ++i) {
      d[i] = dims[i];
      bx[i] = box[i];
      elementStrides[i] = 1;
      if (i > 0)
        byteStrides[i - 1] = strides[i] * sizeOf(t); // bytes, dims after
                                                     // the first
    }
    check(api_.tensorMapEncodeTiled(
              out, type, unsigned(rank), const_cast<void *>(base), d,
              byteStrides, bx, elementStrides,
              /*interleave none*/ 0, kSwizzle128B, kL2Promote256B,
              /*out-of-bounds fill: zeros*/ 0),
          "cuTensorMapEncodeTiled", [&] {
            std::string shape, boxText;
            for (int i = 0; i < rank; ++i) {
              shape += (i ? " x " : "") + std::to_string(dims[i]);
              boxText += (i ? " x " : "") + std::to_string(box[i]);
              if (i > 0)
                shape += " (stride " + std::to_string(strides[i]) + ")";
            }
            return "building a TMA tensor map of " + shape +
                   " elements (innermost first, box " + boxText + ") at " +
                   hex(base);
          });
  }

  void *alloc(size_t bytes) override {
    const Current current(*this);
    CudaApi::Ptr p = 0;
    check(api_.memAlloc(&p, bytes), "cuMemAlloc",
          "allocating " + std::to_string(bytes) + " bytes");
    return reinterpret_cast<void *>(p);
  }
  void free(void *p) override {
    const Current current(*this);
    check(api_.memFree(reinterpret_cast<CudaApi::Ptr>(p)), "cuMemFree",
          "freeing " + hex(p));
  }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    const Current current(*this);
    check(api_.memcpyHtoD(reinterpret_cast<CudaApi::Ptr>(dst), src, bytes),
          "cuMemcpyHtoD", "copying " + std::to_string(bytes) + " bytes");
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    const Current current(*this);
    check(api_.memcpyDtoH(dst, reinterpret_cast<CudaApi::Ptr>(src), bytes),
          "cuMemcpyDtoH", "copying " + std::to_string(bytes) + " bytes");
  }
  void synchronize() override {
    const Current current(*this);
    check(api_.ctxSynchronize(), "cuCtxSynchronize",
          "waiting for the device (an earlier kernel may have failed)");
  }

  Event createEvent() override {
    const Current current(*this);
    void *e = nullptr;
    check(api_.eventCreate(&e, 0), "cuEventCreate", "creating an event");
    return e;
  }

  void memsetAsync(void *p, unsigned char value, size_t bytes,
                   void *stream) override {
    const Current current(*this);
    check(api_.memsetD8Async(reinterpret_cast<CudaApi::Ptr>(p), value, bytes,
                             stream),
          "cuMemsetD8Async",
          "setting " + std::to_string(bytes) + " bytes at " + hex(p));
  }

private:
  /// The caller's thread may not have our context current (a new thread, or
  /// one PyTorch switched to another GPU): make it current for the call, and
  /// the caller's (possibly none) current again after it.
  intptr_t enter() override {
    void *previous = nullptr;
    check(api_.ctxGetCurrent(&previous), "cuCtxGetCurrent",
          "reading the thread's current context");
    if (previous == ctx_)
      return kNothingToRestore;
    check(api_.ctxSetCurrent(ctx_), "cuCtxSetCurrent",
          "making the primary context current");
    return reinterpret_cast<intptr_t>(previous);
  }
  void leave(intptr_t previous) noexcept override {
    if (previous != kNothingToRestore)
      api_.ctxSetCurrent(reinterpret_cast<void *>(previous));
  }

  void describeError(int rc, const char **name,
                     const char **text) const override {
    if (api_.getErrorName)
      api_.getErrorName(rc, name);
    if (api_.getErrorString)
      api_.getErrorString(rc, text);
    // The codes that mean "no usable driver" get a fix even when the library
    // cannot name them (the toolkit's stub libcuda names nothing).
    if (!*name && rc == 34) {
      *name = "CUDA_ERROR_STUB_LIBRARY";
      *text = "libcuda.so.1 is the CUDA toolkit's stub, not the driver: "
              "install the NVIDIA driver or drop the stubs directory from "
              "LD_LIBRARY_PATH";
    } else if (!*name && rc == 35) {
      *name = "CUDA_ERROR_INSUFFICIENT_DRIVER";
      *text = "the NVIDIA driver is older than this CUDA version: update it";
    }
  }

  void instantiate(void **exec, void *graph) override {
    call(api_.graphInstantiate, "instantiating a captured graph", exec, graph,
         0ull);
  }

  CudaApi api_{};
  int device_ = 0;
  void *ctx_ = nullptr;
  int maxSmemOptin_ = 0;
  std::map<std::pair<Function, unsigned>, int> clusters_;
  std::unordered_map<void *, unsigned> smemLimit_;
};

std::unique_ptr<Backend> openCuda(std::string *why, int ordinal) {
  dlerror();
  // libcuda.so.1 is the driver's own name; without it there is no NVIDIA
  // driver and nothing to initialize.
  void *lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    *why = std::string("CUDA: no NVIDIA driver (") + (e ? e : "libcuda.so.1") +
           ")";
    return nullptr;
  }
  int (*init)(unsigned) = nullptr;
  int (*count)(int *) = nullptr;
  init = reinterpret_cast<decltype(init)>(::dlsym(lib, "cuInit"));
  count = reinterpret_cast<decltype(count)>(::dlsym(lib, "cuDeviceGetCount"));
  int n = 0;
  // A driver without a device is the common "no GPU" case, not an error.
  if (init && count &&
      (init(0) == kCudaErrorNoDevice || (count(&n) == 0 && n == 0))) {
    *why = "CUDA: the driver is installed but sees no device";
    return nullptr;
  }
  try {
    return std::make_unique<CudaBackend>(lib, ordinal);
  } catch (const Error &e) {
    *why = std::string("CUDA: ") + e.what();
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// HIP runtime
//===----------------------------------------------------------------------===//

/// The HIP runtime entry points kgen uses besides DriverBackend's.
struct HipApi {
  int (*init)(unsigned);
  int (*getDeviceCount)(int *);
  int (*setDevice)(int);
  int (*getDevice)(int *);
  int (*deviceGetName)(char *, int, int);
  int (*deviceGetAttribute)(int *, int, int);
  int (*getDeviceProperties)(void *, int);
  int (*runtimeGetVersion)(int *);
  int (*moduleLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                            unsigned, unsigned, unsigned, void *, void **,
                            void **);
  int (*malloc)(void **, size_t);
  int (*free)(void *);
  int (*memcpy)(void *, const void *, size_t, int);
  int (*deviceSynchronize)();
  const char *(*getErrorName)(int);
  const char *(*getErrorString)(int);
  int (*eventCreate)(void **);
  int (*memsetAsync)(void *, int, size_t, void *);
  Entry<int (*)(void **, void *, void *, char *, size_t)> graphInstantiate;
};

// Values from hip_runtime_api.h; hipDeviceAttributeMultiprocessorCount is 63
// in ROCm 5.x and 6.x alike.
constexpr int kHipAttrMultiprocessorCount = 63;
constexpr int kHipAttrL2CacheSize = 19;
constexpr int kHipMemcpyHostToDevice = 1;
constexpr int kHipMemcpyDeviceToHost = 2;

/// The gcnArchName ("gfx90a:sramecc+:xnack-") of a hipDeviceProp_t.
///
/// The struct's layout differs between ROCm 5 and 6 (hipGetDeviceProperties
/// vs hipGetDevicePropertiesR0600), and no hipDeviceGetAttribute value gives
/// the arch name. So the struct is filled into a buffer far larger than
/// either layout and searched for the NUL-terminated field that starts with
/// "gfx": `name` comes first and holds a marketing name, gcnArchName comes
/// later; one with target features (':') wins.
std::string findGcnArchName(const char *buf, size_t size) {
  std::string best;
  for (size_t i = 0; i + 4 < size; ++i) {
    if ((i != 0 && buf[i - 1] != '\0') || std::strncmp(buf + i, "gfx", 3) != 0)
      continue;
    size_t n = ::strnlen(buf + i, std::min<size_t>(256, size - i));
    std::string s(buf + i, n);
    bool plausible = n > 3 && n < 256;
    for (char c : s)
      plausible &= (std::isalnum(static_cast<unsigned char>(c)) || c == ':' ||
                    c == '+' || c == '-' || c == '_');
    if (plausible && (best.empty() || s.find(':') != std::string::npos))
      best = s;
  }
  return best;
}

class HipBackend : public DriverBackend {
public:
  HipBackend(void *lib, int ordinal) : DriverBackend(ordinal) {
    const char *L = "libamdhip64";
    bindOrThrow(lib, L, "hipGetErrorName", api_.getErrorName);
    bindOrThrow(lib, L, "hipGetErrorString", api_.getErrorString);
    bindOrThrow(lib, L, "hipInit", api_.init);
    bindOrThrow(lib, L, "hipGetDeviceCount", api_.getDeviceCount);
    bindOrThrow(lib, L, "hipSetDevice", api_.setDevice);
    bindOrThrow(lib, L, "hipGetDevice", api_.getDevice);
    bindOrThrow(lib, L, "hipDeviceGetName", api_.deviceGetName);
    bindOrThrow(lib, L, "hipDeviceGetAttribute", api_.deviceGetAttribute);
    bindOrThrow(lib, L, "hipRuntimeGetVersion", api_.runtimeGetVersion);
    bindOrThrow(lib, L, "hipModuleLaunchKernel", api_.moduleLaunchKernel);
    bindOrThrow(lib, L, "hipMalloc", api_.malloc);
    bindOrThrow(lib, L, "hipFree", api_.free);
    bindOrThrow(lib, L, "hipMemcpy", api_.memcpy);
    bindOrThrow(lib, L, "hipDeviceSynchronize", api_.deviceSynchronize);
    bindOrThrow(lib, L, "hipEventCreate", api_.eventCreate);
    bindOrThrow(lib, L, "hipMemsetAsync", api_.memsetAsync);
    bindEntry(lib, L, "hipModuleLoadData", calls_.moduleLoadData);
    bindEntry(lib, L, "hipModuleUnload", calls_.moduleUnload);
    bindEntry(lib, L, "hipModuleGetFunction", calls_.moduleGetFunction);
    bindEntry(lib, L, "hipStreamIsCapturing", calls_.streamIsCapturing);
    bindEntry(lib, L, "hipStreamCreateWithFlags", calls_.streamCreate);
    bindEntry(lib, L, "hipStreamDestroy", calls_.streamDestroy);
    bindEntry(lib, L, "hipStreamSynchronize", calls_.streamSynchronize);
    bindEntry(lib, L, "hipEventRecord", calls_.eventRecord);
    bindEntry(lib, L, "hipEventSynchronize", calls_.eventSynchronize);
    bindEntry(lib, L, "hipEventElapsedTime", calls_.eventElapsedTime);
    bindEntry(lib, L, "hipEventDestroy", calls_.eventDestroy);
    bindEntry(lib, L, "hipStreamBeginCapture", calls_.streamBeginCapture,
              false);
    bindEntry(lib, L, "hipStreamEndCapture", calls_.streamEndCapture, false);
    bindEntry(lib, L, "hipGraphInstantiate", api_.graphInstantiate, false);
    bindEntry(lib, L, "hipGraphLaunch", calls_.graphLaunch, false);
    bindEntry(lib, L, "hipGraphExecDestroy", calls_.graphExecDestroy, false);
    bindEntry(lib, L, "hipGraphDestroy", calls_.graphDestroy, false);
    // ROCm 6 exports the new layout under its own name; prefer it.
    api_.getDeviceProperties = reinterpret_cast<int (*)(void *, int)>(
        ::dlsym(lib, "hipGetDevicePropertiesR0600"));
    if (!api_.getDeviceProperties)
      bindOrThrow(lib, L, "hipGetDeviceProperties", api_.getDeviceProperties);

    check(api_.init(0), "hipInit", "initializing HIP");
    int count = 0;
    check(api_.getDeviceCount(&count), "hipGetDeviceCount", "counting devices");
    requireOrdinal(count, "HIP");
    const Current current(*this);
    char name[256] = {};
    check(api_.deviceGetName(name, sizeof(name) - 1, ordinal_),
          "hipDeviceGetName", "device name");
    name_ = name;
    check(
        api_.deviceGetAttribute(&units_, kHipAttrMultiprocessorCount, ordinal_),
        "hipDeviceGetAttribute", "compute unit count");
    int l2 = 0;
    if (api_.deviceGetAttribute(&l2, kHipAttrL2CacheSize, ordinal_) == 0 &&
        l2 > 0)
      l2Bytes_ = size_t(l2);
    std::vector<char> props(16384, '\0');
    check(api_.getDeviceProperties(props.data(), ordinal_),
          "hipGetDeviceProperties", "device properties");
    arch_ = findGcnArchName(props.data(), props.size());
    int v = 0;
    check(api_.runtimeGetVersion(&v), "hipRuntimeGetVersion", "HIP version");
    driver_ = std::to_string(v / 10000000) + "." +
              std::to_string(v / 100000 % 100) + "." +
              std::to_string(v % 100000);
    std::string base = arch_.substr(0, arch_.find(':'));
    if (base == "gfx90a")
      target_ = Target::GFX90A;
    else if (base == "gfx942")
      target_ = Target::GFX942;
    else
      throw Error("device " + std::to_string(ordinal_) + " (" + name_ +
                  ") is " + (arch_.empty() ? "of an unknown arch" : arch_) +
                  "; kgen generates code for gfx90a (MI200) and gfx942 "
                  "(MI300) only: use one of those GPUs, or compile ahead of "
                  "time with --target");
  }

  ~HipBackend() override { unloadModulesQuietly(); }

  Vendor vendor() const override { return Vendor::AMD; }

  void launch(Function f, const LaunchDims &d, void **args,
              void *stream) override {
    // CDNA needs no opt-in for dynamic LDS up to the 64 KiB the limits allow.
    const Current current(*this);
    check(api_.moduleLaunchKernel(f, d.grid[0], d.grid[1], d.grid[2],
                                  d.block[0], d.block[1], d.block[2],
                                  d.smemBytes, stream, args, nullptr),
          "hipModuleLaunchKernel",
          [&] { return "launching " + describeLaunch(d, stream); });
  }

  int residentClusters(Function, const LaunchDims &) override { return 0; }

  void encodeTensorMap(void *, const void *, DType, int, const uint64_t *,
                       const uint64_t *, const uint32_t *) override {
    throw Error("tensor maps (TMA) exist on NVIDIA sm_90 only; AMD GPUs run "
                "the kernels without TMA");
  }

  void *alloc(size_t bytes) override {
    const Current current(*this);
    void *p = nullptr;
    check(api_.malloc(&p, bytes), "hipMalloc",
          "allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void *p) override {
    const Current current(*this);
    check(api_.free(p), "hipFree", "freeing " + hex(p));
  }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    const Current current(*this);
    check(api_.memcpy(dst, src, bytes, kHipMemcpyHostToDevice), "hipMemcpy",
          "copying " + std::to_string(bytes) + " bytes to the device");
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    const Current current(*this);
    check(api_.memcpy(dst, src, bytes, kHipMemcpyDeviceToHost), "hipMemcpy",
          "copying " + std::to_string(bytes) + " bytes to the host");
  }
  void synchronize() override {
    const Current current(*this);
    check(api_.deviceSynchronize(), "hipDeviceSynchronize",
          "waiting for the device (an earlier kernel may have failed)");
  }

  Event createEvent() override {
    const Current current(*this);
    void *e = nullptr;
    check(api_.eventCreate(&e), "hipEventCreate", "creating an event");
    return e;
  }

  void memsetAsync(void *p, unsigned char value, size_t bytes,
                   void *stream) override {
    const Current current(*this);
    check(api_.memsetAsync(p, value, bytes, stream), "hipMemsetAsync",
          "setting " + std::to_string(bytes) + " bytes at " + hex(p));
  }

private:
  /// HIP's current device is per thread: ours for the call, the caller's
  /// again after it.
  intptr_t enter() override {
    int previous = -1;
    check(api_.getDevice(&previous), "hipGetDevice",
          "reading the thread's current device");
    if (previous == ordinal_)
      return kNothingToRestore;
    check(api_.setDevice(ordinal_), "hipSetDevice", "selecting the device");
    return previous;
  }
  void leave(intptr_t previous) noexcept override {
    if (previous != kNothingToRestore)
      api_.setDevice(int(previous));
  }

  void describeError(int rc, const char **name,
                     const char **text) const override {
    *name = api_.getErrorName ? api_.getErrorName(rc) : nullptr;
    *text = api_.getErrorString ? api_.getErrorString(rc) : nullptr;
  }

  void instantiate(void **exec, void *graph) override {
    call(api_.graphInstantiate, "instantiating a captured graph", exec, graph,
         nullptr, nullptr, size_t(0));
  }

  HipApi api_{};
};

std::unique_ptr<Backend> openHip(std::string *why, int ordinal) {
  // ROCm reaches AMD GPUs through the KFD device; without it there is no GPU
  // to find, and loading the 15 MB runtime would only cost time.
  if (::access("/dev/kfd", F_OK) != 0) {
    *why = "HIP: no AMD GPU driver (/dev/kfd is absent)";
    return nullptr;
  }
  std::string tried;
  void *lib = nullptr;
  for (const char *n :
       {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}) {
    dlerror();
    if ((lib = ::dlopen(n, RTLD_NOW | RTLD_LOCAL)))
      break;
    const char *e = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (e ? e : n);
  }
  if (!lib) {
    *why = "HIP: libamdhip64 not found (" + tried + ")";
    return nullptr;
  }
  int (*init)(unsigned) =
      reinterpret_cast<int (*)(unsigned)>(::dlsym(lib, "hipInit"));
  int (*count)(int *) =
      reinterpret_cast<int (*)(int *)>(::dlsym(lib, "hipGetDeviceCount"));
  const char *(*errName)(int) =
      reinterpret_cast<const char *(*)(int)>(::dlsym(lib, "hipGetErrorName"));
  int n = 0, rc = 0;
  if (init && count &&
      ((rc = init(0)) != 0 || (rc = count(&n)) != 0 || n == 0)) {
    *why = "HIP: the runtime sees no device";
    if (rc && errName)
      *why += std::string(" (") + errName(rc) + ")";
    return nullptr;
  }
  try {
    return std::make_unique<HipBackend>(lib, ordinal);
  } catch (const Error &e) {
    *why = std::string("HIP: ") + e.what();
    return nullptr;
  }
}

} // namespace

std::unique_ptr<Backend> kgen::openBackend(std::optional<Vendor> prefer,
                                           std::string *whyNot,
                                           std::optional<int> device) {
  if (device && (*device < 0 || *device > 1024))
    throw Error("device " + std::to_string(*device) +
                " is not a device index: 0, 1, ...");
  const int ordinal = device ? *device : ordinalFromEnv();
  std::vector<Vendor> order = {Vendor::NVIDIA, Vendor::AMD};
  std::string notes;
  if (!prefer) {
    if (const char *b = envOrNull("KGEN_BACKEND")) {
      std::string s = b;
      if (s == "cuda" || s == "nvidia")
        prefer = Vendor::NVIDIA;
      else if (s == "hip" || s == "amd" || s == "rocm")
        prefer = Vendor::AMD;
      else if (s == "none") {
        if (whyNot)
          *whyNot = "KGEN_BACKEND=none: GPU runtimes not opened";
        return nullptr;
      } else
        notes = "KGEN_BACKEND='" + s + "' ignored (use cuda, hip or none); ";
    }
  }
  if (prefer == Vendor::AMD)
    order = {Vendor::AMD, Vendor::NVIDIA};
  for (Vendor v : order) {
    std::string why;
    std::unique_ptr<Backend> b =
        v == Vendor::NVIDIA ? openCuda(&why, ordinal) : openHip(&why, ordinal);
    if (b)
      return b;
    notes += (notes.empty() || notes.back() == ' ' ? "" : "; ") + why;
  }
  if (whyNot)
    *whyNot = "no GPU found: " + notes;
  return nullptr;
}
