//===- CApiTest.cpp - The C API, through the shared library ---------------===//
//
// Loads build/lib/libkgen.so with dlopen, as ctypes does, so these tests
// also check that the library exports every kgen_* entry point. No GPU
// needed: with one, the test of kgen_gemm's no-device error is skipped.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Emitter.h"
#include "kgen/kgen_c.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include <dlfcn.h>

namespace {

/// The C API as loaded from libkgen.so.
struct Api {
  std::string error; ///< why loading failed, empty when it worked
#define KGEN_FN(name) decltype(&::name) name = nullptr;
  KGEN_FN(kgen_version)
  KGEN_FN(kgen_compiled_kernels)
  KGEN_FN(kgen_last_error)
  KGEN_FN(kgen_status_name)
  KGEN_FN(kgen_runtime_create)
  KGEN_FN(kgen_runtime_create_on)
  KGEN_FN(kgen_runtime_destroy)
  KGEN_FN(kgen_has_device)
  KGEN_FN(kgen_runtime_device)
  KGEN_FN(kgen_runtime_target)
  KGEN_FN(kgen_gemm)
  KGEN_FN(kgen_gemm_args_init)
  KGEN_FN(kgen_gemm_select)
  KGEN_FN(kgen_emit)
  KGEN_FN(kgen_compile)
  KGEN_FN(kgen_free)
  KGEN_FN(kgen_attention)
#undef KGEN_FN
};

const Api &api() {
  static const Api a = [] {
    Api a;
    const char *env = std::getenv("KGEN_LIB");
    std::string path =
        env && *env ? env : std::string(KGEN_BINARY_DIR) + "/lib/libkgen.so";
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      a.error =
          "cannot load " + path + " (build the kgen_c target): " + dlerror();
      return a;
    }
#define KGEN_FN(name)                                                          \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(h, #name));                \
  if (!a.name)                                                                 \
    a.error += std::string(" ") + #name;
    KGEN_FN(kgen_version)
    KGEN_FN(kgen_compiled_kernels)
    KGEN_FN(kgen_last_error)
    KGEN_FN(kgen_status_name)
    KGEN_FN(kgen_runtime_create)
    KGEN_FN(kgen_runtime_create_on)
    KGEN_FN(kgen_runtime_destroy)
    KGEN_FN(kgen_has_device)
    KGEN_FN(kgen_runtime_device)
    KGEN_FN(kgen_runtime_target)
    KGEN_FN(kgen_gemm)
    KGEN_FN(kgen_gemm_args_init)
    KGEN_FN(kgen_gemm_select)
    KGEN_FN(kgen_emit)
    KGEN_FN(kgen_compile)
    KGEN_FN(kgen_free)
    KGEN_FN(kgen_attention)
#undef KGEN_FN
    if (!a.error.empty())
      a.error = path + " does not export:" + a.error;
    return a;
  }();
  return a;
}

/// Sets an environment variable for a scope, then restores it.
struct ScopedEnv {
  std::string name, saved;
  bool had;
  ScopedEnv(const char *n, const std::string &value)
      : name(n), saved(std::getenv(n) ? std::getenv(n) : ""),
        had(std::getenv(n) != nullptr) {
    setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), saved.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

const char *kProblem = R"({"m":532,"n":2048,"k":2048,"ab":"bf16","c":"bf16",
                            "layout":"nt","static":["n","k"],"align":[8,8,8]})";

class CApi : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(api().error, "") << api().error; }
  const Api &c = api();

  /// Emits and returns the source, or fails with the error.
  std::string emit(const char *problem, const char *config, const char *target,
                   int inlined = 0) {
    char *src = nullptr;
    kgen_status_t s = c.kgen_emit(problem, config, target, inlined, &src);
    EXPECT_EQ(s, KGEN_OK) << c.kgen_last_error();
    std::string out = src ? src : "";
    c.kgen_free(src);
    return out;
  }

  /// Expects `s` to be `want` with a message that contains `needle`.
  void expectError(kgen_status_t s, kgen_status_t want, const char *needle) {
    EXPECT_EQ(s, want) << c.kgen_status_name(s) << ": " << c.kgen_last_error();
    std::string msg = c.kgen_last_error();
    EXPECT_NE(msg.find(needle), std::string::npos)
        << "message lacks '" << needle << "': " << msg;
  }
};

} // namespace

TEST_F(CApi, Version) {
  EXPECT_EQ(std::string(c.kgen_version()), std::string(kgen::kVersion));
  EXPECT_STREQ(c.kgen_status_name(KGEN_ERROR_NO_DEVICE),
               "KGEN_ERROR_NO_DEVICE");
}

TEST_F(CApi, EmitNamesTheKernel) {
  kgen::GemmProblem p{.m = 532, .n = 2048, .k = 2048, .transB = true};
  std::string want = kgen::gemmKernelName(
      p, kgen::defaultConfig(p, kgen::Target::SM90A), kgen::Target::SM90A);
  std::string src = emit(kProblem, nullptr, "sm_90a");
  EXPECT_NE(src.find("__global__"), std::string::npos) << src;
  EXPECT_NE(src.find(want), std::string::npos) << "no " << want << " in\n"
                                               << src;
  EXPECT_STREQ(c.kgen_last_error(), "");

  // An explicit config shows in the name; --inline pastes the templates.
  const char *config = R"({"block":[64,64,32],"warps":[2,2],"stages":2})";
  src = emit(kProblem, config, "sm_90a");
  EXPECT_NE(src.find("_b64x64x32_w2x2_s2_"), std::string::npos) << src;
  EXPECT_NE(src.find("#include \"kgen/gemm/gemm.h\""), std::string::npos);
  std::string inlined = emit(kProblem, config, "sm_90a", 1);
  EXPECT_EQ(inlined.find("#include \"kgen/"), std::string::npos);
  EXPECT_GT(inlined.size(), src.size());
}

TEST_F(CApi, BadInputsAreErrorsWithMessages) {
  char *src = reinterpret_cast<char *>(0x1); // must be reset to NULL
  expectError(c.kgen_emit("{\"m\": 5,", nullptr, "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "not valid JSON");
  EXPECT_EQ(src, nullptr);
  expectError(c.kgen_emit(R"({"m":1,"n":2,"k":3,"colour":"red"})", nullptr,
                          "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "colour");
  expectError(c.kgen_emit(R"({"m":1,"n":2})", nullptr, "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "'k'");
  expectError(c.kgen_emit(R"({"m":0,"n":2,"k":3})", nullptr, "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "m = 0");
  expectError(c.kgen_emit(R"({"m":1,"n":2,"k":3,"ab":"f32"})", nullptr,
                          "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "f32");
  expectError(
      c.kgen_emit(kProblem, R"({"block":[48,64,32]})", "sm_90a", 0, &src),
      KGEN_ERROR_INVALID_ARGUMENT, "blockM = 48");
  expectError(c.kgen_emit(kProblem, nullptr, "sm_70", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "sm_70");
  expectError(c.kgen_emit(kProblem, nullptr, nullptr, 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "target");
  expectError(c.kgen_emit(nullptr, nullptr, "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "problem_json is NULL");
  expectError(c.kgen_emit(kProblem, nullptr, "sm_90a", 0, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT, "source_out");
  // A success clears the message.
  emit(kProblem, nullptr, "sm_90a");
  EXPECT_STREQ(c.kgen_last_error(), "");
}

TEST_F(CApi, PartialConfigsPickOrSpell) {
  // Strategy fields alone: the dispatcher's choice among the configs with
  // them (kgen/Codegen/PartialConfig.h).
  const char *small = R"({"m":64,"n":4096,"k":4096,"layout":"nt",
                          "static":["n","k"],"align":[8,8,8]})";
  EXPECT_NE(emit(small, R"({"loop":"gemv"})", "sm_90a").find("_gemv_"),
            std::string::npos);
  EXPECT_NE(emit(kProblem, R"({"swap_ab":true})", "sm_90a").find("_swap"),
            std::string::npos);
  // An empty object: the default config.
  kgen::GemmProblem p{.m = 532, .n = 2048, .k = 2048, .transB = true};
  EXPECT_NE(emit(kProblem, "{}", "sm_90a")
                .find(kgen::gemmKernelName(
                    p, kgen::defaultConfig(p, kgen::Target::SM90A),
                    kgen::Target::SM90A)),
            std::string::npos);
  // A tile field spells the config; an invalid one says how to pick.
  EXPECT_NE(emit(kProblem, R"({"stages":6})", "sm_90a").find("_s6_"),
            std::string::npos);
  char *src = nullptr;
  expectError(
      c.kgen_emit(kProblem, R"({"block":[48,64,32]})", "sm_90a", 0, &src),
      KGEN_ERROR_INVALID_ARGUMENT, "strategy fields alone, such as");
  // No candidate has the strategy: the config as spelled, and its fault.
  expectError(c.kgen_emit(kProblem, R"({"loop":"gemv"})", "sm_90a", 0, &src),
              KGEN_ERROR_INVALID_ARGUMENT, "with loop = gemv must be");
}

TEST_F(CApi, LastErrorIsPerThread) {
  char *src = nullptr;
  EXPECT_NE(c.kgen_emit("[", nullptr, "sm_90a", 0, &src), KGEN_OK);
  std::string other = "unset";
  std::thread([&] { other = c.kgen_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(c.kgen_last_error()), "");
}

TEST_F(CApi, RuntimeWorksWithoutAGpu) {
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create(nullptr, &rt), KGEN_OK)
      << c.kgen_last_error();
  ASSERT_NE(rt, nullptr);
  std::string target = c.kgen_runtime_target(rt);
  EXPECT_TRUE(target == "sm_80" || target == "sm_90a" || target == "gfx90a" ||
              target == "gfx942")
      << target;
  if (!c.kgen_has_device(rt)) {
    EXPECT_EQ(target, "sm_90a"); // the default without a GPU
  }
  c.kgen_runtime_destroy(rt);

  ASSERT_EQ(c.kgen_runtime_create("gfx942", &rt), KGEN_OK)
      << c.kgen_last_error();
  EXPECT_STREQ(c.kgen_runtime_target(rt), "gfx942");
  c.kgen_runtime_destroy(rt);

  rt = reinterpret_cast<kgen_runtime_t *>(0x1);
  expectError(c.kgen_runtime_create("sm_99", &rt), KGEN_ERROR_INVALID_ARGUMENT,
              "sm_99");
  EXPECT_EQ(rt, nullptr);
  expectError(c.kgen_runtime_create(nullptr, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT, "out is NULL");
  c.kgen_runtime_destroy(nullptr); // a no-op
  EXPECT_EQ(c.kgen_has_device(nullptr), 0);
}

TEST_F(CApi, RuntimeOnADeviceByIndex) {
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create(nullptr, &rt), KGEN_OK)
      << c.kgen_last_error();
  const bool gpu = c.kgen_has_device(rt);
  const char *env = std::getenv("KGEN_DEVICE");
  EXPECT_EQ(c.kgen_runtime_device(rt), gpu ? (env ? std::atoi(env) : 0) : -1);
  c.kgen_runtime_destroy(rt);
  EXPECT_EQ(c.kgen_runtime_device(nullptr), -1);

  // -1: as kgen_runtime_create.
  ASSERT_EQ(c.kgen_runtime_create_on(nullptr, -1, &rt), KGEN_OK)
      << c.kgen_last_error();
  EXPECT_EQ(c.kgen_has_device(rt), gpu ? 1 : 0);
  c.kgen_runtime_destroy(rt);
  expectError(c.kgen_runtime_create_on(nullptr, -2, &rt),
              KGEN_ERROR_INVALID_ARGUMENT, "device -2");
  // A device asked for by index exists, or the call says which is missing.
  expectError(c.kgen_runtime_create_on(nullptr, 1000, &rt),
              KGEN_ERROR_NO_DEVICE, "device 1000");
  EXPECT_EQ(rt, nullptr);
  if (!gpu) {
    expectError(c.kgen_runtime_create_on("sm_90a", 0, &rt),
                KGEN_ERROR_NO_DEVICE, "device 0");
    return;
  }
  ASSERT_EQ(c.kgen_runtime_create_on(nullptr, 0, &rt), KGEN_OK)
      << c.kgen_last_error();
  EXPECT_EQ(c.kgen_runtime_device(rt), 0);
  c.kgen_runtime_destroy(rt);
}

/// A kgen call makes its device current and then the caller's again: the
/// caller's context (PyTorch's current device, another GPU's) must not
/// move. One GPU suffices to see it: the caller's context here is one of
/// its own on device 0, or none at all.
TEST_F(CApi, CallsGiveTheCallersContextBack) {
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create(nullptr, &rt), KGEN_OK)
      << c.kgen_last_error();
  if (!c.kgen_has_device(rt) || c.kgen_runtime_device(rt) != 0 ||
      std::string(c.kgen_runtime_target(rt)).rfind("sm_", 0) != 0) {
    c.kgen_runtime_destroy(rt);
    GTEST_SKIP() << "needs CUDA device 0";
  }
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(cuda, nullptr);
  using CtxCreate = int (*)(void **, unsigned, int);
  using CtxGet = int (*)(void **);
  using CtxSet = int (*)(void *);
  using CtxDestroy = int (*)(void *);
  using DeviceGet = int (*)(int *, int);
  auto ctxCreate = reinterpret_cast<CtxCreate>(dlsym(cuda, "cuCtxCreate_v2"));
  auto ctxGet = reinterpret_cast<CtxGet>(dlsym(cuda, "cuCtxGetCurrent"));
  auto ctxSet = reinterpret_cast<CtxSet>(dlsym(cuda, "cuCtxSetCurrent"));
  auto ctxDestroy =
      reinterpret_cast<CtxDestroy>(dlsym(cuda, "cuCtxDestroy_v2"));
  auto deviceGet = reinterpret_cast<DeviceGet>(dlsym(cuda, "cuDeviceGet"));
  ASSERT_TRUE(ctxCreate && ctxGet && ctxSet && ctxDestroy && deviceGet);
  int dev = 0;
  ASSERT_EQ(deviceGet(&dev, 0), 0);
  void *mine = nullptr;
  ASSERT_EQ(ctxCreate(&mine, 0, dev), 0); // current from here on
  kgen_kernel_info_t info{};
  ASSERT_EQ(c.kgen_compile(rt, kProblem, nullptr, nullptr, &info), KGEN_OK)
      << c.kgen_last_error(); // loads the module: a call on the device
  void *now = nullptr;
  ASSERT_EQ(ctxGet(&now), 0);
  EXPECT_EQ(now, mine) << "kgen left its own context current";
  ASSERT_EQ(ctxSet(nullptr), 0); // no context current at all
  const char *other = R"({"m":64,"n":1024,"k":1024,"ab":"bf16","c":"bf16"})";
  ASSERT_EQ(c.kgen_compile(rt, other, nullptr, nullptr, &info), KGEN_OK)
      << c.kgen_last_error(); // another kernel: another load
  ASSERT_EQ(ctxGet(&now), 0);
  EXPECT_EQ(now, nullptr) << "kgen left a context current";
  ASSERT_EQ(ctxSet(mine), 0);
  c.kgen_runtime_destroy(rt); // unloads its modules in its own context
  ASSERT_EQ(ctxGet(&now), 0);
  EXPECT_EQ(now, mine) << "closing the runtime left its context current";
  ASSERT_EQ(ctxSet(nullptr), 0);
  ctxDestroy(mine);
}

TEST_F(CApi, GemmWithoutADeviceIsACleanError) {
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create(nullptr, &rt), KGEN_OK)
      << c.kgen_last_error();
  if (c.kgen_has_device(rt)) {
    c.kgen_runtime_destroy(rt);
    GTEST_SKIP() << "a GPU is present; the GPU tests cover kgen_gemm";
  }
  // Pointers that would crash if anything touched them.
  void *fake = reinterpret_cast<void *>(0x1000);
  // Twice each: the second call finds the text remembered (a good one) or
  // meets its checks again (a bad one is not remembered).
  for (int i = 0; i < 2; ++i) {
    expectError(c.kgen_gemm(rt, kProblem, fake, fake, fake, 532, 0, 0, 0, 1.0f,
                            0.0f, nullptr),
                KGEN_ERROR_NO_DEVICE, "no GPU");
    // Argument errors come first when the problem itself is bad.
    expectError(c.kgen_gemm(rt, "{", fake, fake, fake, 532, 0, 0, 0, 1.0f, 0.0f,
                            nullptr),
                KGEN_ERROR_INVALID_ARGUMENT, "not valid JSON");
    expectError(c.kgen_gemm(rt, R"({"m": 0, "n": 8, "k": 8})", fake, fake, fake,
                            0, 0, 0, 0, 1.0f, 0.0f, nullptr),
                KGEN_ERROR_INVALID_ARGUMENT, "m = 0 must be >= 1");
  }
  expectError(c.kgen_gemm(nullptr, kProblem, fake, fake, fake, 532, 0, 0, 0,
                          1.0f, 0.0f, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT, "runtime is NULL");
  c.kgen_runtime_destroy(rt);
}

TEST_F(CApi, AttentionArgumentErrorsComeFirst) {
  // Pointers that would crash if anything touched them; no kernel is built.
  void *fake = reinterpret_cast<void *>(0x1000);
  kgen_attention_args_t args{};
  args.q = args.k = args.v = args.o = fake;
  args.batch = args.seqlen_q = args.seqlen_k = -1;
  const char *fp8 = R"({"family": "attention", "heads": [8, 2],
                        "seqlen": 256, "head_dim": 128, "dtype": "e4m3"})";
  const char *bf16 = R"({"family": "attention", "heads": [8, 2],
                         "seqlen": 256, "head_dim": 128, "dtype": "bf16"})";
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create("sm_80", &rt), KGEN_OK)
      << c.kgen_last_error();
  // Twice: a problem that fails its checks is not remembered
  // (kgen_runtime::attentionProblems), so every call meets them.
  for (int i = 0; i < 2; ++i)
    expectError(c.kgen_attention(rt, fp8, nullptr, &args, nullptr),
                KGEN_ERROR_INVALID_ARGUMENT,
                "attention: dtype e4m3 needs sm_90a (fp8 wgmma), not sm_80");
  c.kgen_runtime_destroy(rt);
  ASSERT_EQ(c.kgen_runtime_create("sm_90a", &rt), KGEN_OK)
      << c.kgen_last_error();
  args.k_descale = reinterpret_cast<const float *>(fake);
  expectError(c.kgen_attention(rt, bf16, nullptr, &args, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT,
              "are the per-tensor factors of fp8 inputs");
  args.k_descale = nullptr;
  // A config's faults too, before anything runs.
  expectError(c.kgen_attention(rt, bf16, R"({"stages": 9})", &args, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT,
              "stages = 9 must be 2, 3 or 4 on sm_90a");
  expectError(c.kgen_attention(rt, bf16, R"({"colour": 1})", &args, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT, "colour");
  // A config is chosen for the call's sizes, which are checked first.
  // The problem's text is remembered after its first call; each call's
  // sizes are still checked.
  args.seqlen_k = 0;
  for (int i = 0; i < 2; ++i)
    expectError(
        c.kgen_attention(rt, bf16, R"({"pack_gqa": true})", &args, nullptr),
        KGEN_ERROR_INVALID_ARGUMENT, "seqlen");
  args.seqlen_k = -1;
  c.kgen_runtime_destroy(rt);
}

TEST_F(CApi, CompileGoesThroughTheCache) {
  // A private cache directory, so the first build is a miss.
  char dir[] = "/tmp/kgen-capi-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  struct RestoreEnv {
    std::string dir, saved;
    bool had;
    ~RestoreEnv() {
      if (had)
        setenv("KGEN_CACHE_DIR", saved.c_str(), 1);
      else
        unsetenv("KGEN_CACHE_DIR");
      std::system(("rm -rf '" + dir + "'").c_str());
    }
  } restore{dir,
            std::getenv("KGEN_CACHE_DIR") ? std::getenv("KGEN_CACHE_DIR") : "",
            std::getenv("KGEN_CACHE_DIR") != nullptr};
  setenv("KGEN_CACHE_DIR", dir, 1);

  const char *config = R"({"block":[64,64,32],"warps":[2,2],"stages":2})";
  kgen_kernel_info_t info[2];
  uint64_t compiled[3] = {c.kgen_compiled_kernels(), 0, 0};
  for (kgen_kernel_info_t &i : info) {
    kgen_runtime_t *rt = nullptr;
    ASSERT_EQ(c.kgen_runtime_create(nullptr, &rt), KGEN_OK)
        << c.kgen_last_error();
    kgen_status_t s = c.kgen_compile(rt, kProblem, config, "sm_90a", &i);
    std::string msg = c.kgen_last_error();
    c.kgen_runtime_destroy(rt);
    if (s != KGEN_OK && msg.find("nvrtc not found") != std::string::npos)
      GTEST_SKIP() << "no nvrtc on this machine: " << msg;
    ASSERT_EQ(s, KGEN_OK) << msg;
    compiled[&i - info + 1] = c.kgen_compiled_kernels();
  }
  // The process-wide count: the miss compiled once, the hit not at all.
  EXPECT_EQ(compiled[1], compiled[0] + 1);
  EXPECT_EQ(compiled[2], compiled[1]);
  kgen::GemmProblem p{.m = 532, .n = 2048, .k = 2048, .transB = true};
  kgen::GemmConfig cfg{.blockM = 64, .blockN = 64, .blockK = 32, .stages = 2};
  EXPECT_EQ(std::string(info[0].name),
            kgen::gemmKernelName(p, cfg, kgen::Target::SM90A));
  EXPECT_STREQ(info[0].target, "sm_90a");
  EXPECT_EQ(std::string(info[0].cache_key).size(), 64u);
  EXPECT_STREQ(info[0].cache_key, info[1].cache_key);
  EXPECT_EQ(info[0].cache_hit, 0);
  EXPECT_GT(info[0].compile_ms, 0);
  EXPECT_EQ(info[1].cache_hit, 1);
  EXPECT_GT(info[0].binary_bytes, 0);
  EXPECT_EQ(info[0].binary_bytes, info[1].binary_bytes);
  EXPECT_NE(std::string(info[0].config_json).find("\"block\":[64,64,32]"),
            std::string::npos)
      << info[0].config_json;

  // Errors name what is wrong.
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create(nullptr, &rt), KGEN_OK);
  expectError(
      c.kgen_compile(rt, kProblem, R"({"stages":1})", "sm_90a", &info[0]),
      KGEN_ERROR_INVALID_ARGUMENT, "stages = 1");
  expectError(c.kgen_compile(rt, kProblem, nullptr, "sm_90a", nullptr),
              KGEN_ERROR_INVALID_ARGUMENT, "info_out");
  c.kgen_runtime_destroy(rt);
}

TEST_F(CApi, SelectNamesTheKernelACallRuns) {
  // A private cache and an empty tuning DB: the dispatcher's pick is the
  // heuristic's.
  char dir[] = "/tmp/kgen-capi-select-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  struct Remove {
    std::string dir;
    ~Remove() { std::system(("rm -rf '" + dir + "'").c_str()); }
  } remove{dir};
  ScopedEnv cache("KGEN_CACHE_DIR", dir),
      db("KGEN_TUNING_DB", std::string(dir) + "/tuning.json"),
      tune("KGEN_TUNE", "off");
  kgen_runtime_t *rt = nullptr;
  ASSERT_EQ(c.kgen_runtime_create("sm_90a", &rt), KGEN_OK)
      << c.kgen_last_error();
  struct Destroy {
    const Api &c;
    kgen_runtime_t *rt;
    ~Destroy() { c.kgen_runtime_destroy(rt); }
  } destroy{c, rt};

  // Only the pointers' alignment matters: nothing is read or launched.
  kgen_gemm_args_t args;
  c.kgen_gemm_args_init(&args);
  args.a = args.b = args.c = reinterpret_cast<void *>(0x100000);
  kgen_kernel_info_t info;
  kgen_status_t s = c.kgen_gemm_select(rt, kProblem, &args, &info);
  std::string msg = c.kgen_last_error();
  if (s != KGEN_OK && msg.find("nvrtc not found") != std::string::npos)
    GTEST_SKIP() << "no nvrtc on this machine: " << msg;
  ASSERT_EQ(s, KGEN_OK) << msg;
  kgen::GemmProblem p{.m = 532, .n = 2048, .k = 2048, .transB = true};
  EXPECT_EQ(std::string(info.name),
            kgen::gemmKernelName(p, kgen::defaultConfig(p, kgen::Target::SM90A),
                                 kgen::Target::SM90A));
  EXPECT_STREQ(info.target, "sm_90a");
  EXPECT_EQ(std::string(info.cache_key).size(), 64u);
  EXPECT_NE(std::string(info.config_json).find("\"block\""), std::string::npos)
      << info.config_json;

  // Rows of A that are not 16-byte aligned: the call runs another kernel
  // (lowered alignment, or a repack of A), and select names that one.
  args.lda = 2049;
  kgen_kernel_info_t other;
  ASSERT_EQ(c.kgen_gemm_select(rt, kProblem, &args, &other), KGEN_OK)
      << c.kgen_last_error();
  EXPECT_STRNE(other.name, info.name);

  expectError(c.kgen_gemm_select(rt, kProblem, &args, nullptr),
              KGEN_ERROR_INVALID_ARGUMENT, "info_out");
  expectError(c.kgen_gemm_select(rt, kProblem, nullptr, &other),
              KGEN_ERROR_INVALID_ARGUMENT, "args is NULL");
  args.lda = 100; // < K
  expectError(c.kgen_gemm_select(rt, kProblem, &args, &other),
              KGEN_ERROR_INVALID_ARGUMENT, "lda");
}
