//===- CompilerTest.cpp - nvrtc, hiprtc and the backends without a GPU ----===//
//
// Compiling needs only the compiler libraries, not a GPU: each test skips
// (visibly) when its library is missing and says what was tried.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Compiler.h"
#include "kgen/Codegen/Templates.h"
#include "kgen/Error.h"
#include "kgen/Problem.h"
#include "kgen/Runtime/Backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

using namespace kgen;

namespace {

/// A kernel in the subset of HIP both compilers accept without headers.
KernelSource tinyKernel(Target t, const std::string &name = "kgen_test_scale") {
  KernelSource s;
  s.name = name;
  s.target = t;
  s.threads = 128;
  s.source = "extern \"C\" __global__ void __launch_bounds__(128)\n" + name +
             "(float *x, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "  if (i < n)\n"
             "    x[i] = 2.0f * x[i];\n"
             "}\n";
  return s;
}

KernelSource brokenKernel(Target t) {
  KernelSource s = tinyKernel(t, "kgen_test_broken");
  s.source = "extern \"C\" __global__ void kgen_test_broken(float *x) {\n"
             "  x[0] = 1.0f  // missing semicolon\n"
             "}\n";
  return s;
}

std::unique_ptr<Compiler> open(Vendor v, std::string *why) {
  return openCompiler(v, why);
}

/// Checks a compile error: names the kernel and target, carries the log,
/// and points at a saved copy of the source that exists.
void expectCompileError(Compiler &c, Target t) {
  KernelSource src = brokenKernel(t);
  try {
    c.compile(src);
    FAIL() << "a syntax error compiled";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("kgen_test_broken"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(toString(t))), std::string::npos) << msg;
    EXPECT_NE(msg.find("compiler log:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error"), std::string::npos) << "no log in: " << msg;
    EXPECT_NE(msg.find("fix:"), std::string::npos) << msg;
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(msg, m, std::regex("source saved to: (\\S+)")))
        << msg;
    std::string path = m[1];
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    std::ifstream in(path);
    std::string saved((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(saved.find(src.source), std::string::npos) << saved;
    std::filesystem::remove(path);
  }
}

bool isElf(const std::string &b) {
  return b.rfind("\x7f"
                 "ELF",
                 0) == 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// nvrtc
//===----------------------------------------------------------------------===//

class NvrtcTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    nvrtc_ = open(Vendor::NVIDIA, &why);
    if (!nvrtc_)
      GTEST_SKIP() << "nvrtc not available: " << why;
  }
  std::unique_ptr<Compiler> nvrtc_;
};

TEST_F(NvrtcTest, DescribesItself) {
  EXPECT_EQ(nvrtc_->vendor(), Vendor::NVIDIA);
  EXPECT_EQ(nvrtc_->name(), "nvrtc");
  EXPECT_TRUE(std::regex_match(nvrtc_->version(), std::regex("\\d+\\.\\d+")))
      << nvrtc_->version();
  EXPECT_EQ(nvrtc_->options(Target::SM90A),
            (std::vector<std::string>{"--gpu-architecture=sm_90a", "-std=c++17",
                                      "-default-device", "-lineinfo"}));
}

TEST_F(NvrtcTest, CompilesCubinForSm80AndSm90a) {
  for (Target t : {Target::SM80, Target::SM90A}) {
    std::string cubin = nvrtc_->compile(tinyKernel(t));
    EXPECT_TRUE(isElf(cubin)) << toString(t);
    // The kernel symbol is in the cubin under its unmangled name.
    EXPECT_NE(cubin.find("kgen_test_scale"), std::string::npos);
  }
}

TEST_F(NvrtcTest, HipHeaderMapsOntoCuda) {
  if (templateText("kgen/common/hip_runtime_nvidia.h").empty())
    GTEST_SKIP() << "templates/common/hip_runtime_nvidia.h is not embedded";
  KernelSource s = tinyKernel(Target::SM80);
  s.source = "#include <hip/hip_runtime.h>\n" + s.source;
  EXPECT_TRUE(isElf(nvrtc_->compile(s)));
}

TEST_F(NvrtcTest, SyntaxErrorCarriesLogAndSavedSource) {
  expectCompileError(*nvrtc_, Target::SM80);
}

TEST_F(NvrtcTest, RefusesAnAmdTarget) {
  EXPECT_THROW(nvrtc_->compile(tinyKernel(Target::GFX90A)), Error);
}

TEST_F(NvrtcTest, CompilesFromSeveralThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      std::string cubin = nvrtc_->compile(
          tinyKernel(Target::SM80, "kgen_test_t" + std::to_string(i)));
      ok += isElf(cubin);
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(ok.load(), 4);
}

//===----------------------------------------------------------------------===//
// hiprtc
//===----------------------------------------------------------------------===//

class HiprtcTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    hiprtc_ = open(Vendor::AMD, &why);
    if (!hiprtc_)
      GTEST_SKIP() << "hiprtc not available: " << why;
  }
  std::unique_ptr<Compiler> hiprtc_;
};

TEST_F(HiprtcTest, DescribesItself) {
  EXPECT_EQ(hiprtc_->vendor(), Vendor::AMD);
  EXPECT_EQ(hiprtc_->name(), "hiprtc");
  EXPECT_TRUE(
      std::regex_match(hiprtc_->version(), std::regex("\\d+\\.\\d+(\\.\\d+)?")))
      << hiprtc_->version();
  EXPECT_EQ(
      hiprtc_->options(Target::GFX90A),
      (std::vector<std::string>{"--offload-arch=gfx90a", "-O3", "-std=c++17"}));
}

TEST_F(HiprtcTest, CompilesCodeObjectForGfx90a) {
  std::string code = hiprtc_->compile(tinyKernel(Target::GFX90A));
  EXPECT_FALSE(code.empty());
  EXPECT_NE(code.find("kgen_test_scale"), std::string::npos);
}

TEST_F(HiprtcTest, SyntaxErrorCarriesLogAndSavedSource) {
  expectCompileError(*hiprtc_, Target::GFX90A);
}

TEST_F(HiprtcTest, RefusesAnNvidiaTarget) {
  EXPECT_THROW(hiprtc_->compile(tinyKernel(Target::SM80)), Error);
}

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// The remembered compiler identity (cache hits without opening a compiler)
//===----------------------------------------------------------------------===//

TEST_F(HiprtcTest, IdentityIsRememberedUntilTheLibraryOrEnvironmentChanges) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("kgen-memo-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string memo = (dir / "compilers.json").string();

  EXPECT_FALSE(recallCompilerIdentity(memo, Vendor::AMD)) << "no memo yet";
  rememberCompilerIdentity(memo, *hiprtc_);
  std::optional<CompilerIdentity> id = recallCompilerIdentity(memo, Vendor::AMD);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->name, hiprtc_->name());
  EXPECT_EQ(id->version, hiprtc_->version());
  EXPECT_FALSE(recallCompilerIdentity(memo, Vendor::NVIDIA))
      << "one vendor's record never answers for the other";

  // Another library search path may pick another library: not trusted.
  const char *old = std::getenv("LD_LIBRARY_PATH");
  std::string saved = old ? old : "";
  ::setenv("LD_LIBRARY_PATH", (saved + ":/opt/other-rocm/lib").c_str(), 1);
  EXPECT_FALSE(recallCompilerIdentity(memo, Vendor::AMD));
  if (old)
    ::setenv("LD_LIBRARY_PATH", saved.c_str(), 1);
  else
    ::unsetenv("LD_LIBRARY_PATH");
  EXPECT_TRUE(recallCompilerIdentity(memo, Vendor::AMD));

  // A library file that changed (here: the recorded size) is not trusted.
  std::string text;
  {
    std::ifstream in(memo);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string changed = std::regex_replace(
      text, std::regex("\"size\": (\\d+)"), "\"size\": 1");
  ASSERT_NE(changed, text);
  std::ofstream(memo, std::ios::trunc) << changed;
  EXPECT_FALSE(recallCompilerIdentity(memo, Vendor::AMD));

  // A malformed memo is a miss, and remembering again repairs it.
  std::ofstream(memo, std::ios::trunc) << "{\"amd\": {\"name\": ";
  EXPECT_FALSE(recallCompilerIdentity(memo, Vendor::AMD));
  rememberCompilerIdentity(memo, *hiprtc_);
  EXPECT_TRUE(recallCompilerIdentity(memo, Vendor::AMD));
  fs::remove_all(dir);
}

TEST(Backend, NoGpuGivesNullAndAReasonQuickly) {
  std::string why;
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Backend> b = openBackend(std::nullopt, &why);
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (b) {
    // Not a skip: with a GPU this test runs the backend end to end instead.
    std::cout << "[   INFO   ] GPU present (" << b->deviceName()
              << "): checking the backend instead\n";
    return;
  }
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  EXPECT_NE(why.find("HIP"), std::string::npos) << why;
  EXPECT_LT(s, 2.0) << "looking for a GPU must be fast when there is none";

  std::string whyAmd;
  EXPECT_EQ(openBackend(Vendor::AMD, &whyAmd), nullptr);
  EXPECT_LT(whyAmd.find("HIP"), whyAmd.find("CUDA")) << "AMD is tried first";
  EXPECT_EQ(openBackend(Vendor::NVIDIA, nullptr), nullptr);
}

TEST(Backend, RunsATinyKernelWhenAGpuIsPresent) {
  std::string why;
  std::unique_ptr<Backend> b = openBackend(std::nullopt, &why);
  if (!b) {
    // Covered by NoGpuGivesNullAndAReasonQuickly; nothing to run here.
    std::cout << "[   INFO   ] no GPU: " << why << "\n";
    return;
  }
  EXPECT_FALSE(b->deviceName().empty());
  EXPECT_FALSE(b->archName().empty());
  EXPECT_FALSE(b->driverVersion().empty());
  EXPECT_GT(b->computeUnits(), 0);
  EXPECT_EQ(targetInfo(b->target()).vendor, b->vendor());
  EXPECT_FALSE(b->isCapturing(nullptr));

  std::unique_ptr<Compiler> cc = openCompiler(b->vendor(), &why);
  ASSERT_TRUE(cc) << why;
  Backend::Module m = b->loadModule(cc->compile(tinyKernel(b->target())));
  Backend::Function f = b->getFunction(m, "kgen_test_scale");
  EXPECT_THROW(b->getFunction(m, "no_such_kernel"), Error);

  int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i)
    host[i] = float(i);
  void *dev = b->alloc(n * sizeof(float));
  b->copyToDevice(dev, host.data(), n * sizeof(float));
  void *args[] = {&dev, &n};
  LaunchDims d{{unsigned(n + 127) / 128, 1, 1}, {128, 1, 1}, 0};
  b->launch(f, d, args, nullptr);
  b->synchronize();
  std::vector<float> out(n);
  b->copyToHost(out.data(), dev, n * sizeof(float));
  b->free(dev);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 2.0f * float(i)) << "element " << i;
}
