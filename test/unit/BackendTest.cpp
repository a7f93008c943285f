//===- BackendTest.cpp - The CUDA backend against a mock driver -----------===//
//
// Runs kgen's CUDA backend (lib/Runtime/Backend.cpp) on the mock libcuda.so.1
// of test/unit/mock, with no GPU: it opens the device and describes it,
// loads modules and launches (the shared-memory opt-in once per size, the
// overlapping launch through cuLaunchKernelEx on sm_90), moves memory,
// drives streams, events and graph capture, and turns failed calls into
// errors that name the entry point, the code, what was being done and the
// device. Each test names the driver calls it expects, in order.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Backend.h"
#include "kgen/Error.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <string>

using namespace kgen;

namespace {

/// The mock driver, loaded by its path before the backend asks for
/// "libcuda.so.1" (which then resolves to it by its soname).
struct Mock {
  void (*reset)(int devices) = nullptr;
  void (*fail)(const char *name, int rc) = nullptr;
  const char *(*calls)() = nullptr;
  void *(*current)() = nullptr;
  void (*setCurrent)(void *) = nullptr;

  static Mock &get() {
    static Mock m = [] {
      Mock m;
      void *lib = ::dlopen(KGEN_MOCK_CUDA, RTLD_NOW | RTLD_GLOBAL);
      if (!lib)
        return m;
      m.reset = reinterpret_cast<void (*)(int)>(::dlsym(lib, "kgenMockReset"));
      m.fail = reinterpret_cast<void (*)(const char *, int)>(
          ::dlsym(lib, "kgenMockFail"));
      m.calls =
          reinterpret_cast<const char *(*)()>(::dlsym(lib, "kgenMockCalls"));
      m.current =
          reinterpret_cast<void *(*)()>(::dlsym(lib, "kgenMockCurrent"));
      m.setCurrent = reinterpret_cast<void (*)(void *)>(
          ::dlsym(lib, "kgenMockSetCurrent"));
      return m;
    }();
    return m;
  }
};

class BackendMock : public ::testing::Test {
protected:
  void SetUp() override {
    Mock &m = Mock::get();
    ASSERT_TRUE(m.reset && m.fail && m.calls && m.current && m.setCurrent)
        << "cannot load the mock driver " << KGEN_MOCK_CUDA << ": "
        << ::dlerror();
    m.reset(1);
    std::string why;
    b = openBackend(Vendor::NVIDIA, &why);
    ASSERT_TRUE(b) << why;
    ASSERT_EQ(b->deviceName(), "kgen mock GPU")
        << "the backend opened another libcuda.so.1 than the mock";
    m.reset(1); // the calls of the opening are checked in Opens
  }
  /// The driver calls since the last reset, and a new reset.
  std::string calls() {
    std::string c = Mock::get().calls();
    Mock::get().reset(1);
    return c;
  }
  std::unique_ptr<Backend> b;
};

TEST_F(BackendMock, OpensAndDescribesTheDevice) {
  EXPECT_EQ(b->vendor(), Vendor::NVIDIA);
  EXPECT_EQ(b->archName(), "sm_90");
  EXPECT_EQ(b->target(), Target::SM90A);
  EXPECT_EQ(b->computeUnits(), 132);
  EXPECT_EQ(b->driverVersion(), "13.0");
  EXPECT_EQ(b->l2Bytes(), size_t(50) << 20);
  // No device: no backend, and why.
  b.reset();
  Mock::get().reset(0);
  std::string why;
  EXPECT_FALSE(openBackend(Vendor::NVIDIA, &why));
  EXPECT_NE(why.find("CUDA: the driver is installed but sees no device"),
            std::string::npos)
      << why;
}

TEST_F(BackendMock, LoadsModulesAndLaunches) {
  void *m = b->loadModule("cubin");
  void *f = b->getFunction(m, "kgen_gemm");
  LaunchDims d;
  d.grid[0] = 132;
  d.block[0] = 384;
  d.smemBytes = 200 * 1024;
  d.overlapsPrevious = true;
  b->launch(f, d, nullptr, nullptr);
  b->launch(f, d, nullptr, nullptr); // the opt-in is done once
  d.overlapsPrevious = false;
  b->launch(f, d, nullptr, nullptr);
  EXPECT_EQ(calls(), "cuModuleLoadData,cuModuleGetFunction,cuFuncSetAttribute,"
                     "cuLaunchKernelEx,cuLaunchKernelEx,cuLaunchKernel");
  EXPECT_EQ(b->residentClusters(f, d), 66);
  d.smemBytes = 240 * 1024; // past the device's 232448 B
  try {
    b->launch(f, d, nullptr, nullptr);
    ADD_FAILURE() << "a launch past the shared memory limit ran";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("245760 bytes of shared memory, "
                                         "device kgen mock GPU allows 232448"),
              std::string::npos)
        << e.what();
  }
  // The modules go with the backend, and so does the context.
  calls();
  b.reset();
  EXPECT_EQ(calls(), "cuModuleUnload,cuDevicePrimaryCtxRelease_v2");
}

TEST_F(BackendMock, MovesMemory) {
  const char text[] = "kgen";
  char back[sizeof(text)] = {};
  void *p = b->alloc(sizeof(text));
  b->copyToDevice(p, text, sizeof(text));
  b->memsetAsync(p, 'K', 1, nullptr);
  b->copyToHost(back, p, sizeof(text));
  b->synchronize();
  b->free(p);
  EXPECT_STREQ(back, "Kgen");
  EXPECT_EQ(calls(), "cuMemAlloc_v2,cuMemcpyHtoD_v2,cuMemsetD8Async,"
                     "cuMemcpyDtoH_v2,cuCtxSynchronize,cuMemFree_v2");
}

/// Each call makes the device's context current and the caller's again
/// after it (PyTorch's, another GPU's, or none): kgen never moves the
/// caller's current device.
TEST_F(BackendMock, CallsGiveTheCallersContextBack) {
  Mock &m = Mock::get();
  int callers = 0; // a context handle of the caller's, not the backend's
  for (void *theirs :
       {static_cast<void *>(&callers), static_cast<void *>(nullptr)}) {
    m.setCurrent(theirs);
    void *p = b->alloc(16);
    EXPECT_EQ(m.current(), theirs);
    Backend::Module mod = b->loadModule("binary");
    Backend::Function f = b->getFunction(mod, "k");
    LaunchDims d{{1, 1, 1}, {32, 1, 1}, 0};
    b->launch(f, d, nullptr, nullptr);
    b->synchronize();
    // The tensor map encoder needs a current context (the mock's, like the
    // driver, refuses none): the backend makes its own current for it.
    Backend::TensorMap map;
    b->encodeTensorMap2d(&map, p, DType::BF16, 64, 8, 64, 64, 8);
    b->free(p);
    EXPECT_EQ(m.current(), theirs);
  }
  m.setCurrent(&callers); // a failing call gives it back too
  Mock::get().fail("cuCtxSynchronize", 1);
  EXPECT_THROW(b->synchronize(), Error);
  EXPECT_EQ(m.current(), static_cast<void *>(&callers));
  b.reset(); // and so does closing the backend (its modules unloaded)
  EXPECT_EQ(m.current(), static_cast<void *>(&callers));
}

TEST_F(BackendMock, StreamsEventsAndGraphs) {
  void *s = b->createStream();
  EXPECT_FALSE(b->isCapturing(s));
  b->beginCapture(s);
  EXPECT_TRUE(b->isCapturing(s));
  Backend::GraphExec g = b->endCapture(s);
  EXPECT_NE(g, nullptr);
  b->launchGraph(g, s);
  b->destroyGraph(g);
  Backend::Event e0 = b->createEvent(), e1 = b->createEvent();
  b->recordEvent(e0, s);
  b->recordEvent(e1, s);
  b->synchronizeEvent(e1);
  EXPECT_EQ(b->elapsedMs(e0, e1), 1.25f); // cuEventElapsedTime_v2's
  b->destroyEvent(e0);
  b->destroyEvent(e1);
  b->synchronizeStream(s);
  b->destroyStream(s);
  EXPECT_EQ(calls(),
            "cuStreamCreate,cuStreamIsCapturing,cuStreamBeginCapture_v2,"
            "cuStreamIsCapturing,cuStreamEndCapture,"
            "cuGraphInstantiateWithFlags,cuGraphDestroy,cuGraphLaunch,"
            "cuGraphExecDestroy,cuEventCreate,cuEventCreate,cuEventRecord,"
            "cuEventRecord,cuEventSynchronize,cuEventElapsedTime_v2,"
            "cuEventDestroy_v2,cuEventDestroy_v2,cuStreamSynchronize,"
            "cuStreamDestroy_v2");
  // The legacy stream while another captures globally: capturing.
  Mock::get().fail("cuStreamIsCapturing", 906);
  EXPECT_TRUE(b->isCapturing(nullptr));
}

/// The message of the Error `fn` throws, or "" if it throws none.
template <class Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST_F(BackendMock, FailedCallsNameTheCallTheCodeAndTheDevice) {
  Mock::get().fail("cuStreamDestroy_v2", 1);
  int x = 0;
  const std::string e = errorOf([&] { b->destroyStream(&x); });
  EXPECT_EQ(e.rfind("cuStreamDestroy_v2 failed: CUDA_ERROR_INVALID_VALUE "
                    "(invalid argument) while destroying stream 0x",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find(" on device 0 (kgen mock GPU)"), std::string::npos) << e;
  // A code the driver cannot name: the stub library's gets its fix.
  Mock::get().fail("cuModuleLoadData", 34);
  EXPECT_NE(errorOf([&] { b->loadModule("x"); })
                .find("cuModuleLoadData failed: CUDA_ERROR_STUB_LIBRARY "
                      "(libcuda.so.1 is the CUDA toolkit's stub"),
            std::string::npos);
  Mock::get().fail("cuModuleGetFunction", 500);
  EXPECT_NE(errorOf([&] { b->getFunction(&x, "k"); })
                .find("cuModuleGetFunction failed: CUDA error 500 (no "
                      "description) while looking up kernel 'k'"),
            std::string::npos);
  // The launch's and the tensor map's descriptions, built only on failure
  // (every call's host time otherwise).
  Mock::get().fail("cuLaunchKernel", 1);
  LaunchDims d{{132, 1, 1}, {128, 1, 1}, 0};
  const std::string launch =
      errorOf([&] { b->launch(&x, d, nullptr, nullptr); });
  EXPECT_NE(launch.find("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE "
                        "(invalid argument) while launching grid (132,1,1)"),
            std::string::npos)
      << launch;
  Mock::get().fail("cuTensorMapEncodeTiled", 1);
  const uint64_t dims[2] = {64, 32}, strides[2] = {1, 64};
  const uint32_t box[2] = {64, 16};
  const std::string map = errorOf([&] {
    alignas(64) unsigned char m[128];
    b->encodeTensorMap(m, &x, DType::BF16, 2, dims, strides, box);
  });
  EXPECT_NE(map.find("while building a TMA tensor map of 64 x 32 (stride 64) "
                     "elements (innermost first, box 64 x 16) at 0x"),
            std::string::npos)
      << map;
}

TEST_F(BackendMock, AFailedCaptureStillEndsAndFreesItsGraph) {
  void *s = b->createStream();
  b->beginCapture(s);
  calls();
  Mock::get().fail("cuStreamEndCapture", 1);
  EXPECT_NE(errorOf([&] {
              b->endCapture(s);
            }).find("cuStreamEndCapture failed: CUDA_ERROR_INVALID_VALUE"),
            std::string::npos);
  EXPECT_EQ(calls(), "cuStreamEndCapture,cuGraphDestroy");
  EXPECT_FALSE(b->isCapturing(s));
  // Instantiation fails: the graph is destroyed all the same.
  b->beginCapture(s);
  calls();
  Mock::get().fail("cuGraphInstantiateWithFlags", 1);
  EXPECT_NE(errorOf([&] { b->endCapture(s); })
                .find("cuGraphInstantiateWithFlags failed: "
                      "CUDA_ERROR_INVALID_VALUE (invalid argument) while "
                      "instantiating a captured graph"),
            std::string::npos);
  EXPECT_EQ(calls(),
            "cuStreamEndCapture,cuGraphInstantiateWithFlags,cuGraphDestroy");
}

} // namespace
