//===- MockCudaDriver.cpp - A libcuda.so.1 for BackendTest, no GPU --------===//
//
// The CUDA driver entry points kgen's CudaBackend binds, each logging its
// name and returning 0 or the code a test asked for (kgenMockFail); as the
// driver, those that need a context fail (201) on a thread without one. Memory
// is host memory, so copies round-trip; the device is an H100-like sm_90
// with 132 SMs. Only cuEventElapsedTime_v2 is exported, not the plain name,
// so the backend's fallback binding runs. BackendTest loads this library by
// its path before kgen dlopens "libcuda.so.1", which then finds it by its
// soname.
//
//===----------------------------------------------------------------------===//

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

struct State {
  std::string calls;               // "name,name,..." since the last reset
  std::map<std::string, int> fail; // entry point -> code, for every call
  int devices = 1;
  int capturing = 0;
  void *current = nullptr; // the thread's current context (one thread)
};

State &state() {
  static State s;
  return s;
}

/// The entry points that need no current context; the driver fails every
/// other one on a thread without one, with CUDA_ERROR_INVALID_CONTEXT.
bool contextFree(const char *name) {
  static const char *const kFree[] = {"cuInit",
                                      "cuDriverGetVersion",
                                      "cuDeviceGetCount",
                                      "cuDeviceGet",
                                      "cuDeviceGetName",
                                      "cuDeviceGetAttribute",
                                      "cuDevicePrimaryCtxRetain",
                                      "cuDevicePrimaryCtxRelease_v2"};
  for (const char *f : kFree)
    if (std::strcmp(f, name) == 0)
      return true;
  return false;
}

int hit(const char *name) {
  State &s = state();
  s.calls += s.calls.empty() ? name : std::string(",") + name;
  auto it = s.fail.find(name);
  if (it != s.fail.end())
    return it->second;
  return s.current || contextFree(name) ? 0 : 201;
}

// Distinct non-null handles.
char gModule, gFunction, gContext, gStream, gEvent, gGraph, gExec;

} // namespace

extern "C" {

// Control, for the test.
void kgenMockReset(int devices) {
  state() = State();
  state().devices = devices;
}
void kgenMockFail(const char *name, int rc) { state().fail[name] = rc; }
const char *kgenMockCalls() { return state().calls.c_str(); }
/// The current context, which a test sets as its caller's before a call.
void *kgenMockCurrent() { return state().current; }
void kgenMockSetCurrent(void *ctx) { state().current = ctx; }

int cuGetErrorName(int rc, const char **name) {
  if (rc == 1) {
    *name = "CUDA_ERROR_INVALID_VALUE";
    return 0;
  }
  return 1; // the toolkit's stub names nothing: nor does this for others
}
int cuGetErrorString(int rc, const char **text) {
  if (rc == 1) {
    *text = "invalid argument";
    return 0;
  }
  return 1;
}
int cuInit(unsigned) { return hit("cuInit"); }
int cuDriverGetVersion(int *v) {
  *v = 13000;
  return hit("cuDriverGetVersion");
}
int cuDeviceGetCount(int *n) {
  *n = state().devices;
  return hit("cuDeviceGetCount");
}
int cuDeviceGet(int *d, int ordinal) {
  *d = ordinal;
  return hit("cuDeviceGet");
}
int cuDeviceGetName(char *name, int len, int) {
  std::strncpy(name, "kgen mock GPU", size_t(len));
  return hit("cuDeviceGetName");
}
int cuDeviceGetAttribute(int *v, int attr, int) {
  // Compute capability 9.0 (75, 76), 132 SMs (16), 232448 B of opt-in
  // shared memory a block (97), 50 MiB of L2 (38).
  *v = attr == 75   ? 9
       : attr == 16 ? 132
       : attr == 97 ? 232448
       : attr == 38 ? 50 << 20
                    : 0;
  return hit("cuDeviceGetAttribute");
}
int cuDevicePrimaryCtxRetain(void **ctx, int) {
  *ctx = &gContext;
  return hit("cuDevicePrimaryCtxRetain");
}
int cuDevicePrimaryCtxRelease_v2(int) {
  return hit("cuDevicePrimaryCtxRelease_v2");
}
int cuCtxSetCurrent(void *ctx) { // every call: not logged
  state().current = ctx;
  return 0;
}
int cuCtxGetCurrent(void **ctx) {
  *ctx = state().current;
  return 0;
}
int cuCtxSynchronize() { return hit("cuCtxSynchronize"); }
int cuModuleLoadData(void **m, const void *) {
  *m = &gModule;
  return hit("cuModuleLoadData");
}
int cuModuleUnload(void *) { return hit("cuModuleUnload"); }
int cuModuleGetFunction(void **f, void *, const char *) {
  *f = &gFunction;
  return hit("cuModuleGetFunction");
}
int cuFuncSetAttribute(void *, int, int) { return hit("cuFuncSetAttribute"); }
int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                   unsigned, unsigned, void *, void **, void **) {
  return hit("cuLaunchKernel");
}
int cuLaunchKernelEx(const void *, void *, void **, void **) {
  return hit("cuLaunchKernelEx");
}
int cuOccupancyMaxActiveClusters(int *n, void *, const void *) {
  *n = 66;
  return hit("cuOccupancyMaxActiveClusters");
}
int cuTensorMapEncodeTiled(void *, int, unsigned, void *,
                           const unsigned long long *,
                           const unsigned long long *, const unsigned *,
                           const unsigned *, int, int, int, int) {
  return hit("cuTensorMapEncodeTiled");
}
int cuStreamIsCapturing(void *, int *status) {
  *status = state().capturing;
  return hit("cuStreamIsCapturing");
}
int cuMemAlloc_v2(unsigned long long *p, size_t bytes) {
  *p = reinterpret_cast<unsigned long long>(std::malloc(bytes));
  return hit("cuMemAlloc_v2");
}
int cuMemFree_v2(unsigned long long p) {
  std::free(reinterpret_cast<void *>(p));
  return hit("cuMemFree_v2");
}
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes) {
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return hit("cuMemcpyHtoD_v2");
}
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return hit("cuMemcpyDtoH_v2");
}
int cuMemsetD8Async(unsigned long long p, unsigned char v, size_t bytes,
                    void *) {
  std::memset(reinterpret_cast<void *>(p), v, bytes);
  return hit("cuMemsetD8Async");
}
int cuStreamCreate(void **s, unsigned) {
  *s = &gStream;
  return hit("cuStreamCreate");
}
int cuStreamDestroy_v2(void *) { return hit("cuStreamDestroy_v2"); }
int cuStreamSynchronize(void *) { return hit("cuStreamSynchronize"); }
int cuEventCreate(void **e, unsigned) {
  *e = &gEvent;
  return hit("cuEventCreate");
}
int cuEventRecord(void *, void *) { return hit("cuEventRecord"); }
int cuEventSynchronize(void *) { return hit("cuEventSynchronize"); }
int cuEventElapsedTime_v2(float *ms, void *, void *) {
  *ms = 1.25f;
  return hit("cuEventElapsedTime_v2");
}
int cuEventDestroy_v2(void *) { return hit("cuEventDestroy_v2"); }
int cuStreamBeginCapture_v2(void *, int) {
  state().capturing = 1;
  return hit("cuStreamBeginCapture_v2");
}
int cuStreamEndCapture(void *, void **graph) {
  state().capturing = 0;
  *graph = &gGraph; // a failed capture still hands back what it captured
  return hit("cuStreamEndCapture");
}
int cuGraphInstantiateWithFlags(void **exec, void *, unsigned long long) {
  *exec = &gExec;
  return hit("cuGraphInstantiateWithFlags");
}
int cuGraphLaunch(void *, void *) { return hit("cuGraphLaunch"); }
int cuGraphExecDestroy(void *) { return hit("cuGraphExecDestroy"); }
int cuGraphDestroy(void *) { return hit("cuGraphDestroy"); }

} // extern "C"
