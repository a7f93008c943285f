//===- Backend.cpp - CUDA driver or HIP runtime, opened with dlopen -------===//
//
// Like the compilers, the GPU runtimes are opened at run time with their C
// entry points declared here, so kgen builds without CUDA or ROCm headers and
// runs on a machine with either GPU, or none. On a machine without a GPU
// driver openBackend returns at once: it looks for libcuda.so.1 and /dev/kfd
// before it initializes anything.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Backend.h"
#include "kgen/Error.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

using namespace kgen;

namespace {

const char *envOrNull(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

template <typename Fn>
void bindOrThrow(void *lib, const char *libName, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!fn)
    throw Error(std::string(libName) + " has no " + name +
                " (the GPU driver is older than kgen supports; update it)");
}

/// For entry points only timing needs: a driver without them still runs
/// kernels; the call that needs one reports it (see need()).
template <typename Fn> void bindOptional(void *lib, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
}

template <typename Fn> Fn need(Fn fn, const char *name) {
  if (!fn)
    throw Error(std::string("the GPU driver has no ") + name +
                ", which timing kernels (graph replay) needs; update the "
                "driver");
  return fn;
}

/// The device ordinal from $KGEN_DEVICE (default 0).
int deviceOrdinal() {
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

//===----------------------------------------------------------------------===//
// CUDA driver
//===----------------------------------------------------------------------===//

/// The CUDA driver API entry points kgen uses (stable since CUDA 11; the
/// _v2 names are the ones cuda.h maps the plain names to).
struct CudaApi {
  using Ctx = void *;
  using Mod = void *;
  using Fn = void *;
  using Ptr = unsigned long long;
  int (*init)(unsigned);
  int (*driverGetVersion)(int *);
  int (*deviceGetCount)(int *);
  int (*deviceGet)(int *, int);
  int (*deviceGetName)(char *, int, int);
  int (*deviceGetAttribute)(int *, int, int);
  int (*primaryCtxRetain)(Ctx *, int);
  int (*primaryCtxRelease)(int);
  int (*ctxSetCurrent)(Ctx);
  int (*ctxSynchronize)();
  int (*moduleLoadData)(Mod *, const void *);
  int (*moduleUnload)(Mod);
  int (*moduleGetFunction)(Fn *, Mod, const char *);
  int (*funcSetAttribute)(Fn, int, int);
  int (*launchKernel)(Fn, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, unsigned, void *, void **, void **);
  int (*launchKernelEx)(const void *, Fn, void **, void **); // CUDA 11.8+
  int (*streamIsCapturing)(void *, int *);
  int (*memAlloc)(Ptr *, size_t);
  int (*memFree)(Ptr);
  int (*memcpyHtoD)(Ptr, const void *, size_t);
  int (*memcpyDtoH)(void *, Ptr, size_t);
  int (*getErrorName)(int, const char **);
  int (*getErrorString)(int, const char **);
  // Timing.
  int (*streamCreate)(void **, unsigned);
  int (*streamDestroy)(void *);
  int (*streamSynchronize)(void *);
  int (*eventCreate)(void **, unsigned);
  int (*eventRecord)(void *, void *);
  int (*eventSynchronize)(void *);
  int (*eventElapsedTime)(float *, void *, void *);
  int (*eventDestroy)(void *);
  int (*memsetD8Async)(Ptr, unsigned char, size_t, void *);
  int (*streamBeginCapture)(void *, int);
  int (*streamEndCapture)(void *, void **);
  int (*graphInstantiate)(void **, void *, unsigned long long);
  int (*graphLaunch)(void *, void *);
  int (*graphExecDestroy)(void *);
  int (*graphDestroy)(void *);
  int (*occupancyMaxActiveClusters)(int *, void *, const void *);
  // TMA (CUDA 12+).
  int (*tensorMapEncodeTiled)(void *, int, unsigned, void *,
                              const unsigned long long *,
                              const unsigned long long *, const unsigned *,
                              const unsigned *, int, int, int, int);
};

// Values from cuda.h.
constexpr int kCudaErrorNoDevice = 100;
constexpr int kCudaErrorStreamCaptureImplicit = 906;
constexpr int kCuAttrMultiprocessorCount = 16;
constexpr int kCuAttrComputeCapabilityMajor = 75;
constexpr int kCuAttrComputeCapabilityMinor = 76;
constexpr int kCuAttrMaxSharedMemoryPerBlockOptin = 97;
constexpr int kCuAttrL2CacheSize = 38;
constexpr unsigned kCuStreamNonBlocking = 1;
constexpr int kCuStreamCaptureModeThreadLocal = 1;
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

class CudaBackend : public Backend {
public:
  CudaBackend(void *lib, int ordinal) : ordinal_(ordinal) {
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
    bindOrThrow(lib, L, "cuCtxSynchronize", api_.ctxSynchronize);
    bindOrThrow(lib, L, "cuModuleLoadData", api_.moduleLoadData);
    bindOrThrow(lib, L, "cuModuleUnload", api_.moduleUnload);
    bindOrThrow(lib, L, "cuModuleGetFunction", api_.moduleGetFunction);
    bindOrThrow(lib, L, "cuFuncSetAttribute", api_.funcSetAttribute);
    bindOrThrow(lib, L, "cuLaunchKernel", api_.launchKernel);
    bindOrThrow(lib, L, "cuStreamIsCapturing", api_.streamIsCapturing);
    bindOrThrow(lib, L, "cuMemAlloc_v2", api_.memAlloc);
    bindOrThrow(lib, L, "cuMemFree_v2", api_.memFree);
    bindOrThrow(lib, L, "cuMemcpyHtoD_v2", api_.memcpyHtoD);
    bindOrThrow(lib, L, "cuMemcpyDtoH_v2", api_.memcpyDtoH);
    bindOrThrow(lib, L, "cuStreamCreate", api_.streamCreate);
    bindOrThrow(lib, L, "cuStreamDestroy_v2", api_.streamDestroy);
    bindOrThrow(lib, L, "cuStreamSynchronize", api_.streamSynchronize);
    bindOrThrow(lib, L, "cuEventCreate", api_.eventCreate);
    bindOrThrow(lib, L, "cuEventRecord", api_.eventRecord);
    bindOrThrow(lib, L, "cuEventSynchronize", api_.eventSynchronize);
    bindOrThrow(lib, L, "cuEventDestroy_v2", api_.eventDestroy);
    bindOrThrow(lib, L, "cuMemsetD8Async", api_.memsetD8Async);
    // The plain name is in every driver; CUDA 12.8 headers map it to _v2,
    // which a future driver might keep alone.
    bindOptional(lib, "cuEventElapsedTime", api_.eventElapsedTime);
    if (!api_.eventElapsedTime)
      bindOrThrow(lib, L, "cuEventElapsedTime_v2", api_.eventElapsedTime);
    bindOptional(lib, "cuStreamBeginCapture_v2", api_.streamBeginCapture);
    bindOptional(lib, "cuStreamEndCapture", api_.streamEndCapture);
    bindOptional(lib, "cuGraphInstantiateWithFlags", api_.graphInstantiate);
    bindOptional(lib, "cuGraphLaunch", api_.graphLaunch);
    bindOptional(lib, "cuGraphExecDestroy", api_.graphExecDestroy);
    bindOptional(lib, "cuGraphDestroy", api_.graphDestroy);
    bindOptional(lib, "cuTensorMapEncodeTiled", api_.tensorMapEncodeTiled);
    bindOptional(lib, "cuOccupancyMaxActiveClusters",
                 api_.occupancyMaxActiveClusters);
    bindOptional(lib, "cuLaunchKernelEx", api_.launchKernelEx);

    check(api_.init(0), "cuInit", "initializing the CUDA driver");
    int count = 0;
    check(api_.deviceGetCount(&count), "cuDeviceGetCount", "counting devices");
    if (count == 0)
      throw Error("the CUDA driver sees no device");
    if (ordinal_ >= count)
      throw Error("KGEN_DEVICE=" + std::to_string(ordinal_) + " but CUDA has " +
                  std::to_string(count) + " device(s)");
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
    check(api_.deviceGetAttribute(&sms_, kCuAttrMultiprocessorCount, device_),
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
    // Errors are ignored: at process exit the driver may already be gone.
    if (api_.ctxSetCurrent(ctx_) == 0)
      for (void *m : modules_)
        api_.moduleUnload(m);
    api_.primaryCtxRelease(device_);
  }

  Vendor vendor() const override { return Vendor::NVIDIA; }
  std::string deviceName() const override { return name_; }
  std::string archName() const override { return arch_; }
  Target target() const override { return target_; }
  int computeUnits() const override { return sms_; }
  std::string driverVersion() const override { return driver_; }

  Module loadModule(const std::string &binary) override {
    bind();
    void *m = nullptr;
    check(api_.moduleLoadData(&m, binary.data()), "cuModuleLoadData",
          "loading a " + std::to_string(binary.size()) +
              "-byte module (built for another GPU, or a corrupted binary?)");
    std::lock_guard<std::mutex> g(mu_);
    modules_.push_back(m);
    return m;
  }

  Function getFunction(Module m, const std::string &name) override {
    bind();
    void *f = nullptr;
    check(api_.moduleGetFunction(&f, m, name.c_str()), "cuModuleGetFunction",
          "looking up kernel '" + name + "'");
    return f;
  }

  void launch(Function f, const LaunchDims &d, void **args,
              void *stream) override {
    bind();
    raiseSharedLimit(f, d.smemBytes);
    // Programmatic dependent launch exists from sm_90; without
    // cuLaunchKernelEx the kernel simply waits for the previous one.
    if (d.overlapsPrevious && target_ == Target::SM90A && api_.launchKernelEx) {
      CuLaunchAttribute attr{kCuLaunchAttributeProgrammaticStreamSerialization,
                             0,
                             {1}};
      const CuLaunchConfig config = launchConfig(d, stream, &attr, 1);
      check(api_.launchKernelEx(&config, f, args, nullptr), "cuLaunchKernelEx",
            "launching (overlapping the previous kernel) " +
                describeLaunch(d, stream));
      return;
    }
    check(api_.launchKernel(f, d.grid[0], d.grid[1], d.grid[2], d.block[0],
                            d.block[1], d.block[2], d.smemBytes, stream, args,
                            nullptr),
          "cuLaunchKernel", "launching " + describeLaunch(d, stream));
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
    bind();
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
    std::string shape, boxText;
    for (int i = 0; i < rank; ++i) {
      d[i] = dims[i];
      bx[i] = box[i];
      elementStrides[i] = 1;
      if (i > 0)
        byteStrides[i - 1] = strides[i] * sizeOf(t); // bytes, dims after
                                                     // the first
      shape += (i ? " x " : "") + std::to_string(dims[i]);
      boxText += (i ? " x " : "") + std::to_string(box[i]);
      if (i > 0)
        shape += " (stride " + std::to_string(strides[i]) + ")";
    }
    check(api_.tensorMapEncodeTiled(
              out, type, unsigned(rank), const_cast<void *>(base), d,
              byteStrides, bx, elementStrides,
              /*interleave none*/ 0, kSwizzle128B, kL2Promote256B,
              /*out-of-bounds fill: zeros*/ 0),
          "cuTensorMapEncodeTiled",
          "building a TMA tensor map of " + shape +
              " elements (innermost first, box " + boxText + ") at " +
              hex(base));
  }

  bool isCapturing(void *stream) override {
    bind();
    int status = 0;
    int rc = api_.streamIsCapturing(stream, &status);
    // The legacy default stream reports this while another stream captures
    // in global mode: work on it would break that capture, so it counts.
    if (rc == kCudaErrorStreamCaptureImplicit)
      return true;
    check(rc, "cuStreamIsCapturing", "stream " + hex(stream));
    return status != 0; // active or invalidated
  }

  void *alloc(size_t bytes) override {
    bind();
    CudaApi::Ptr p = 0;
    check(api_.memAlloc(&p, bytes), "cuMemAlloc",
          "allocating " + std::to_string(bytes) + " bytes");
    return reinterpret_cast<void *>(p);
  }
  void free(void *p) override {
    bind();
    check(api_.memFree(reinterpret_cast<CudaApi::Ptr>(p)), "cuMemFree",
          "freeing " + hex(p));
  }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    bind();
    check(api_.memcpyHtoD(reinterpret_cast<CudaApi::Ptr>(dst), src, bytes),
          "cuMemcpyHtoD", "copying " + std::to_string(bytes) + " bytes");
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    bind();
    check(api_.memcpyDtoH(dst, reinterpret_cast<CudaApi::Ptr>(src), bytes),
          "cuMemcpyDtoH", "copying " + std::to_string(bytes) + " bytes");
  }
  void synchronize() override {
    bind();
    check(api_.ctxSynchronize(), "cuCtxSynchronize",
          "waiting for the device (an earlier kernel may have failed)");
  }

  size_t l2Bytes() const override { return l2Bytes_; }

  void *createStream() override {
    bind();
    void *s = nullptr;
    check(api_.streamCreate(&s, kCuStreamNonBlocking), "cuStreamCreate",
          "creating a stream");
    return s;
  }
  void destroyStream(void *stream) override {
    bind();
    check(api_.streamDestroy(stream), "cuStreamDestroy",
          "destroying stream " + hex(stream));
  }
  void synchronizeStream(void *stream) override {
    bind();
    check(api_.streamSynchronize(stream), "cuStreamSynchronize",
          "waiting for stream " + hex(stream) +
              " (an earlier kernel may have failed)");
  }

  Event createEvent() override {
    bind();
    void *e = nullptr;
    check(api_.eventCreate(&e, 0), "cuEventCreate", "creating an event");
    return e;
  }
  void recordEvent(Event e, void *stream) override {
    bind();
    check(api_.eventRecord(e, stream), "cuEventRecord",
          "recording an event on stream " + hex(stream));
  }
  void synchronizeEvent(Event e) override {
    bind();
    check(api_.eventSynchronize(e), "cuEventSynchronize",
          "waiting for an event (an earlier kernel may have failed)");
  }
  float elapsedMs(Event start, Event end) override {
    bind();
    float ms = 0;
    check(api_.eventElapsedTime(&ms, start, end), "cuEventElapsedTime",
          "reading the time between two events");
    return ms;
  }
  void destroyEvent(Event e) override {
    bind();
    check(api_.eventDestroy(e), "cuEventDestroy", "destroying an event");
  }

  void beginCapture(void *stream) override {
    bind();
    check(need(api_.streamBeginCapture, "cuStreamBeginCapture_v2")(
              stream, kCuStreamCaptureModeThreadLocal),
          "cuStreamBeginCapture",
          "starting a capture on stream " + hex(stream));
  }
  GraphExec endCapture(void *stream) override {
    bind();
    // End the capture first: a stream left capturing breaks later calls.
    void *graph = nullptr;
    int rc = need(api_.streamEndCapture, "cuStreamEndCapture")(stream, &graph);
    auto instantiate =
        need(api_.graphInstantiate, "cuGraphInstantiateWithFlags");
    auto destroy = need(api_.graphDestroy, "cuGraphDestroy");
    if (rc != 0 && graph)
      destroy(graph);
    check(rc, "cuStreamEndCapture",
          "ending the capture on stream " + hex(stream));
    void *exec = nullptr;
    rc = instantiate(&exec, graph, 0);
    destroy(graph);
    check(rc, "cuGraphInstantiateWithFlags", "instantiating a captured graph");
    return exec;
  }
  void launchGraph(GraphExec g, void *stream) override {
    bind();
    check(need(api_.graphLaunch, "cuGraphLaunch")(g, stream), "cuGraphLaunch",
          "replaying a graph on stream " + hex(stream));
  }
  void destroyGraph(GraphExec g) override {
    bind();
    check(need(api_.graphExecDestroy, "cuGraphExecDestroy")(g),
          "cuGraphExecDestroy", "destroying a graph");
  }

  void memsetAsync(void *p, unsigned char value, size_t bytes,
                   void *stream) override {
    bind();
    check(api_.memsetD8Async(reinterpret_cast<CudaApi::Ptr>(p), value, bytes,
                             stream),
          "cuMemsetD8Async",
          "setting " + std::to_string(bytes) + " bytes at " + hex(p));
  }

private:
  /// The caller's thread may not have our context current (a new thread, or
  /// one PyTorch switched): make it current before every call.
  void bind() {
    check(api_.ctxSetCurrent(ctx_), "cuCtxSetCurrent",
          "making the primary context current");
  }

  void check(int rc, const char *call, const std::string &context) const {
    if (rc == 0)
      return;
    const char *name = nullptr, *text = nullptr;
    if (api_.getErrorName)
      api_.getErrorName(rc, &name);
    if (api_.getErrorString)
      api_.getErrorString(rc, &text);
    // The codes that mean "no usable driver" get a fix even when the library
    // cannot name them (the toolkit's stub libcuda names nothing).
    if (!name && rc == 34) {
      name = "CUDA_ERROR_STUB_LIBRARY";
      text = "libcuda.so.1 is the CUDA toolkit's stub, not the driver: "
             "install the NVIDIA driver or drop the stubs directory from "
             "LD_LIBRARY_PATH";
    } else if (!name && rc == 35) {
      name = "CUDA_ERROR_INSUFFICIENT_DRIVER";
      text = "the NVIDIA driver is older than this CUDA version: update it";
    }
    throw Error(std::string(call) + " failed: " +
                (name ? name : "CUDA error " + std::to_string(rc)) + " (" +
                (text ? text : "no description") + ") while " + context +
                (name_.empty() ? std::string()
                               : " on device " + std::to_string(ordinal_) +
                                     " (" + name_ + ")"));
  }

  CudaApi api_{};
  int ordinal_;
  int device_ = 0;
  void *ctx_ = nullptr;
  std::string name_, arch_, driver_;
  Target target_ = Target::SM80;
  int sms_ = 0, maxSmemOptin_ = 0;
  size_t l2Bytes_ = 0;
  std::mutex mu_;
  std::vector<void *> modules_;
  std::map<std::pair<Function, unsigned>, int> clusters_;
  std::unordered_map<void *, unsigned> smemLimit_;
};

std::unique_ptr<Backend> openCuda(std::string *why) {
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
    return std::make_unique<CudaBackend>(lib, deviceOrdinal());
  } catch (const Error &e) {
    *why = std::string("CUDA: ") + e.what();
    return nullptr;
  }
}

//===----------------------------------------------------------------------===//
// HIP runtime
//===----------------------------------------------------------------------===//

struct HipApi {
  int (*init)(unsigned);
  int (*getDeviceCount)(int *);
  int (*setDevice)(int);
  int (*deviceGetName)(char *, int, int);
  int (*deviceGetAttribute)(int *, int, int);
  int (*getDeviceProperties)(void *, int);
  int (*runtimeGetVersion)(int *);
  int (*moduleLoadData)(void **, const void *);
  int (*moduleUnload)(void *);
  int (*moduleGetFunction)(void **, void *, const char *);
  int (*moduleLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                            unsigned, unsigned, unsigned, void *, void **,
                            void **);
  int (*streamIsCapturing)(void *, int *);
  int (*malloc)(void **, size_t);
  int (*free)(void *);
  int (*memcpy)(void *, const void *, size_t, int);
  int (*deviceSynchronize)();
  const char *(*getErrorName)(int);
  const char *(*getErrorString)(int);
  // Timing.
  int (*streamCreateWithFlags)(void **, unsigned);
  int (*streamDestroy)(void *);
  int (*streamSynchronize)(void *);
  int (*eventCreate)(void **);
  int (*eventRecord)(void *, void *);
  int (*eventSynchronize)(void *);
  int (*eventElapsedTime)(float *, void *, void *);
  int (*eventDestroy)(void *);
  int (*memsetAsync)(void *, int, size_t, void *);
  int (*streamBeginCapture)(void *, int);
  int (*streamEndCapture)(void *, void **);
  int (*graphInstantiate)(void **, void *, void *, char *, size_t);
  int (*graphLaunch)(void *, void *);
  int (*graphExecDestroy)(void *);
  int (*graphDestroy)(void *);
};

// Values from hip_runtime_api.h; hipDeviceAttributeMultiprocessorCount is 63
// in ROCm 5.x and 6.x alike.
constexpr int kHipAttrMultiprocessorCount = 63;
constexpr int kHipAttrL2CacheSize = 19;
constexpr unsigned kHipStreamNonBlocking = 1;
constexpr int kHipStreamCaptureModeThreadLocal = 1;
constexpr int kHipErrorStreamCaptureImplicit = 906;
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

class HipBackend : public Backend {
public:
  HipBackend(void *lib, int ordinal) : ordinal_(ordinal) {
    const char *L = "libamdhip64";
    bindOrThrow(lib, L, "hipGetErrorName", api_.getErrorName);
    bindOrThrow(lib, L, "hipGetErrorString", api_.getErrorString);
    bindOrThrow(lib, L, "hipInit", api_.init);
    bindOrThrow(lib, L, "hipGetDeviceCount", api_.getDeviceCount);
    bindOrThrow(lib, L, "hipSetDevice", api_.setDevice);
    bindOrThrow(lib, L, "hipDeviceGetName", api_.deviceGetName);
    bindOrThrow(lib, L, "hipDeviceGetAttribute", api_.deviceGetAttribute);
    bindOrThrow(lib, L, "hipRuntimeGetVersion", api_.runtimeGetVersion);
    bindOrThrow(lib, L, "hipModuleLoadData", api_.moduleLoadData);
    bindOrThrow(lib, L, "hipModuleUnload", api_.moduleUnload);
    bindOrThrow(lib, L, "hipModuleGetFunction", api_.moduleGetFunction);
    bindOrThrow(lib, L, "hipModuleLaunchKernel", api_.moduleLaunchKernel);
    bindOrThrow(lib, L, "hipStreamIsCapturing", api_.streamIsCapturing);
    bindOrThrow(lib, L, "hipMalloc", api_.malloc);
    bindOrThrow(lib, L, "hipFree", api_.free);
    bindOrThrow(lib, L, "hipMemcpy", api_.memcpy);
    bindOrThrow(lib, L, "hipDeviceSynchronize", api_.deviceSynchronize);
    bindOrThrow(lib, L, "hipStreamCreateWithFlags", api_.streamCreateWithFlags);
    bindOrThrow(lib, L, "hipStreamDestroy", api_.streamDestroy);
    bindOrThrow(lib, L, "hipStreamSynchronize", api_.streamSynchronize);
    bindOrThrow(lib, L, "hipEventCreate", api_.eventCreate);
    bindOrThrow(lib, L, "hipEventRecord", api_.eventRecord);
    bindOrThrow(lib, L, "hipEventSynchronize", api_.eventSynchronize);
    bindOrThrow(lib, L, "hipEventElapsedTime", api_.eventElapsedTime);
    bindOrThrow(lib, L, "hipEventDestroy", api_.eventDestroy);
    bindOrThrow(lib, L, "hipMemsetAsync", api_.memsetAsync);
    bindOptional(lib, "hipStreamBeginCapture", api_.streamBeginCapture);
    bindOptional(lib, "hipStreamEndCapture", api_.streamEndCapture);
    bindOptional(lib, "hipGraphInstantiate", api_.graphInstantiate);
    bindOptional(lib, "hipGraphLaunch", api_.graphLaunch);
    bindOptional(lib, "hipGraphExecDestroy", api_.graphExecDestroy);
    bindOptional(lib, "hipGraphDestroy", api_.graphDestroy);
    // ROCm 6 exports the new layout under its own name; prefer it.
    api_.getDeviceProperties = reinterpret_cast<int (*)(void *, int)>(
        ::dlsym(lib, "hipGetDevicePropertiesR0600"));
    if (!api_.getDeviceProperties)
      bindOrThrow(lib, L, "hipGetDeviceProperties", api_.getDeviceProperties);

    check(api_.init(0), "hipInit", "initializing HIP");
    int count = 0;
    check(api_.getDeviceCount(&count), "hipGetDeviceCount", "counting devices");
    if (ordinal_ >= count)
      throw Error("KGEN_DEVICE=" + std::to_string(ordinal_) + " but HIP has " +
                  std::to_string(count) + " device(s)");
    bind();
    char name[256] = {};
    check(api_.deviceGetName(name, sizeof(name) - 1, ordinal_),
          "hipDeviceGetName", "device name");
    name_ = name;
    check(api_.deviceGetAttribute(&cus_, kHipAttrMultiprocessorCount, ordinal_),
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

  ~HipBackend() override {
    if (api_.setDevice(ordinal_) == 0)
      for (void *m : modules_)
        api_.moduleUnload(m);
  }

  Vendor vendor() const override { return Vendor::AMD; }
  std::string deviceName() const override { return name_; }
  std::string archName() const override { return arch_; }
  Target target() const override { return target_; }
  int computeUnits() const override { return cus_; }
  std::string driverVersion() const override { return driver_; }

  Module loadModule(const std::string &binary) override {
    bind();
    void *m = nullptr;
    check(api_.moduleLoadData(&m, binary.data()), "hipModuleLoadData",
          "loading a " + std::to_string(binary.size()) +
              "-byte code object (built for another GPU, or corrupted?)");
    std::lock_guard<std::mutex> g(mu_);
    modules_.push_back(m);
    return m;
  }

  Function getFunction(Module m, const std::string &name) override {
    bind();
    void *f = nullptr;
    check(api_.moduleGetFunction(&f, m, name.c_str()), "hipModuleGetFunction",
          "looking up kernel '" + name + "'");
    return f;
  }

  void launch(Function f, const LaunchDims &d, void **args,
              void *stream) override {
    // CDNA needs no opt-in for dynamic LDS up to the 64 KiB the limits allow.
    bind();
    check(api_.moduleLaunchKernel(f, d.grid[0], d.grid[1], d.grid[2],
                                  d.block[0], d.block[1], d.block[2],
                                  d.smemBytes, stream, args, nullptr),
          "hipModuleLaunchKernel", "launching " + describeLaunch(d, stream));
  }

  int residentClusters(Function, const LaunchDims &) override { return 0; }

  void encodeTensorMap(void *, const void *, DType, int, const uint64_t *,
                       const uint64_t *, const uint32_t *) override {
    throw Error("tensor maps (TMA) exist on NVIDIA sm_90 only; AMD GPUs run "
                "the kernels without TMA");
  }

  bool isCapturing(void *stream) override {
    bind();
    int status = 0;
    int rc = api_.streamIsCapturing(stream, &status);
    if (rc == kHipErrorStreamCaptureImplicit)
      return true;
    check(rc, "hipStreamIsCapturing", "stream " + hex(stream));
    return status != 0;
  }

  void *alloc(size_t bytes) override {
    bind();
    void *p = nullptr;
    check(api_.malloc(&p, bytes), "hipMalloc",
          "allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void *p) override {
    bind();
    check(api_.free(p), "hipFree", "freeing " + hex(p));
  }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    bind();
    check(api_.memcpy(dst, src, bytes, kHipMemcpyHostToDevice), "hipMemcpy",
          "copying " + std::to_string(bytes) + " bytes to the device");
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    bind();
    check(api_.memcpy(dst, src, bytes, kHipMemcpyDeviceToHost), "hipMemcpy",
          "copying " + std::to_string(bytes) + " bytes to the host");
  }
  void synchronize() override {
    bind();
    check(api_.deviceSynchronize(), "hipDeviceSynchronize",
          "waiting for the device (an earlier kernel may have failed)");
  }

  size_t l2Bytes() const override { return l2Bytes_; }

  void *createStream() override {
    bind();
    void *s = nullptr;
    check(api_.streamCreateWithFlags(&s, kHipStreamNonBlocking),
          "hipStreamCreateWithFlags", "creating a stream");
    return s;
  }
  void destroyStream(void *stream) override {
    bind();
    check(api_.streamDestroy(stream), "hipStreamDestroy",
          "destroying stream " + hex(stream));
  }
  void synchronizeStream(void *stream) override {
    bind();
    check(api_.streamSynchronize(stream), "hipStreamSynchronize",
          "waiting for stream " + hex(stream) +
              " (an earlier kernel may have failed)");
  }

  Event createEvent() override {
    bind();
    void *e = nullptr;
    check(api_.eventCreate(&e), "hipEventCreate", "creating an event");
    return e;
  }
  void recordEvent(Event e, void *stream) override {
    bind();
    check(api_.eventRecord(e, stream), "hipEventRecord",
          "recording an event on stream " + hex(stream));
  }
  void synchronizeEvent(Event e) override {
    bind();
    check(api_.eventSynchronize(e), "hipEventSynchronize",
          "waiting for an event (an earlier kernel may have failed)");
  }
  float elapsedMs(Event start, Event end) override {
    bind();
    float ms = 0;
    check(api_.eventElapsedTime(&ms, start, end), "hipEventElapsedTime",
          "reading the time between two events");
    return ms;
  }
  void destroyEvent(Event e) override {
    bind();
    check(api_.eventDestroy(e), "hipEventDestroy", "destroying an event");
  }

  void beginCapture(void *stream) override {
    bind();
    check(need(api_.streamBeginCapture, "hipStreamBeginCapture")(
              stream, kHipStreamCaptureModeThreadLocal),
          "hipStreamBeginCapture",
          "starting a capture on stream " + hex(stream));
  }
  GraphExec endCapture(void *stream) override {
    bind();
    // End the capture first: a stream left capturing breaks later calls.
    void *graph = nullptr;
    int rc = need(api_.streamEndCapture, "hipStreamEndCapture")(stream, &graph);
    auto instantiate = need(api_.graphInstantiate, "hipGraphInstantiate");
    auto destroy = need(api_.graphDestroy, "hipGraphDestroy");
    if (rc != 0 && graph)
      destroy(graph);
    check(rc, "hipStreamEndCapture",
          "ending the capture on stream " + hex(stream));
    void *exec = nullptr;
    rc = instantiate(&exec, graph, nullptr, nullptr, 0);
    destroy(graph);
    check(rc, "hipGraphInstantiate", "instantiating a captured graph");
    return exec;
  }
  void launchGraph(GraphExec g, void *stream) override {
    bind();
    check(need(api_.graphLaunch, "hipGraphLaunch")(g, stream), "hipGraphLaunch",
          "replaying a graph on stream " + hex(stream));
  }
  void destroyGraph(GraphExec g) override {
    bind();
    check(need(api_.graphExecDestroy, "hipGraphExecDestroy")(g),
          "hipGraphExecDestroy", "destroying a graph");
  }

  void memsetAsync(void *p, unsigned char value, size_t bytes,
                   void *stream) override {
    bind();
    check(api_.memsetAsync(p, value, bytes, stream), "hipMemsetAsync",
          "setting " + std::to_string(bytes) + " bytes at " + hex(p));
  }

private:
  /// HIP's current device is per thread: select ours before every call.
  void bind() {
    check(api_.setDevice(ordinal_), "hipSetDevice", "selecting the device");
  }

  void check(int rc, const char *call, const std::string &context) const {
    if (rc == 0)
      return;
    const char *name = api_.getErrorName ? api_.getErrorName(rc) : nullptr;
    const char *text = api_.getErrorString ? api_.getErrorString(rc) : nullptr;
    throw Error(std::string(call) + " failed: " +
                (name ? name : "HIP error " + std::to_string(rc)) + " (" +
                (text ? text : "no description") + ") while " + context +
                (name_.empty() ? std::string()
                               : " on device " + std::to_string(ordinal_) +
                                     " (" + name_ + ")"));
  }

  HipApi api_{};
  int ordinal_;
  std::string name_, arch_, driver_;
  Target target_ = Target::GFX90A;
  int cus_ = 0;
  size_t l2Bytes_ = 0;
  std::mutex mu_;
  std::vector<void *> modules_;
};

std::unique_ptr<Backend> openHip(std::string *why) {
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
    return std::make_unique<HipBackend>(lib, deviceOrdinal());
  } catch (const Error &e) {
    *why = std::string("HIP: ") + e.what();
    return nullptr;
  }
}

} // namespace

std::unique_ptr<Backend> kgen::openBackend(std::optional<Vendor> prefer,
                                           std::string *whyNot) {
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
        v == Vendor::NVIDIA ? openCuda(&why) : openHip(&why);
    if (b)
      return b;
    notes += (notes.empty() || notes.back() == ' ' ? "" : "; ") + why;
  }
  if (whyNot)
    *whyNot = "no GPU found: " + notes;
  return nullptr;
}
