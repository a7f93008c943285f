//===- BundleRuntimeTest.cpp - kgen::Runtime with a bundle, no compiler ---===//
//
// A bundle is written with nvrtc (skipped, visibly, without it); then the
// compilers are made unreachable (KGEN_NVRTC and KGEN_HIPRTC name files that
// do not exist) and a fresh Runtime must serve the bundled kernels from
// KGEN_BUNDLE alone: the exact bytes, no compile, no cache. A problem that
// is not bundled fails by policy (KGEN_BUNDLE_MISS): jit tries the compiler
// (absent here, so its error), error names the problem and the bundle. With
// a GPU, a GEMM runs from the bundle and gives the right answer.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Runtime/Bundle.h"
#include "kgen/Runtime/Compiler.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <unistd.h>

using namespace kgen;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path freshDir(const std::string &prefix) {
  const char *base = std::getenv("KGEN_CACHE_DIR");
  std::string parent = base && *base ? base : fs::temp_directory_path();
  fs::create_directories(parent);
  std::string tmpl = parent + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error("mkdtemp failed in " + parent);
  return tmpl;
}

GemmProblem linear(int64_t m, int64_t n = 256, int64_t k = 256) {
  return {.m = m, .n = n, .k = k, .transB = true};
}

/// Sets an environment variable for a scope, restoring the old value.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::optional<std::string> &value)
      : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

/// The environment of a host program that has no compiler: neither nvrtc
/// nor hiprtc can be opened, the bundle is at `bundle`, the cache is empty.
struct NoCompiler {
  NoCompiler(const std::string &bundle, const std::string &cache,
             std::optional<std::string> miss)
      : nvrtc("KGEN_NVRTC", "/nonexistent/libnvrtc.so"),
        hiprtc("KGEN_HIPRTC", "/nonexistent/libhiprtc.so"),
        dirs("KGEN_BUNDLE", bundle), policy("KGEN_BUNDLE_MISS", miss),
        cacheDir("KGEN_CACHE_DIR", cache) {}
  ScopedEnv nvrtc, hiprtc, dirs, policy, cacheDir;
};

class BundleRuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!openCompiler(Vendor::NVIDIA, &why))
      GTEST_SKIP() << "nvrtc is not available to write the bundle: " << why;
    root_ = freshDir("bundleruntime");
  }
  void TearDown() override {
    if (!root_.empty())
      fs::remove_all(root_);
  }

  /// Bundles `p` (as the runtime resolves it) with the heuristic's config
  /// for `t`; returns the entry written.
  BundleEntry bundle(const GemmProblem &p, Target t) {
    RuntimeOptions opts;
    opts.target = t;
    opts.bundles = {}; // the writer compiles
    Runtime rt(opts);
    GemmProblem bp = bundledProblem(p);
    GemmConfig c = defaultConfig(bp, t);
    std::shared_ptr<Kernel> k = rt.compile(bp, c, t);
    EXPECT_FALSE(k->bundled);
    BundleWriter w((root_ / "bundle").string());
    BundleEntry e;
    e.target = t;
    e.problem = bp;
    e.config = c;
    e.kernel = k->source.name;
    e.compiler = rt.compiler(Vendor::NVIDIA).name();
    e.compilerVersion = rt.compiler(Vendor::NVIDIA).version();
    e.sourceSha256 = sourceDigest(k->source);
    e.cacheKey = k->cacheKey;
    e = w.add(e, k->binary);
    w.commit();
    return e;
  }
  std::string bundleDir() const { return (root_ / "bundle").string(); }
  std::string emptyCache() { return freshDir("bundleruntime-cache").string(); }

  fs::path root_;
};

TEST_F(BundleRuntimeTest, CompileServesTheBundleWithoutACompiler) {
  GemmProblem p = linear(64);
  BundleEntry e = bundle(p, Target::SM90A);
  std::string bytes = Bundle::open(bundleDir()).binary(e);

  std::string cache = emptyCache();
  NoCompiler env(bundleDir(), cache, std::nullopt);
  RuntimeOptions opts;
  opts.target = Target::SM90A;
  Runtime rt(opts);
  ASSERT_FALSE(rt.bundles().empty());
  // Proof that no compiler is reachable in this process.
  EXPECT_THROW(rt.compiler(Vendor::NVIDIA), Error);
  EXPECT_THROW(rt.compiler(Vendor::AMD), Error);

  std::shared_ptr<Kernel> k = rt.compile(e.problem, e.config, Target::SM90A);
  EXPECT_TRUE(k->bundled);
  EXPECT_TRUE(k->cacheHit);
  EXPECT_EQ(k->compileMs, 0);
  EXPECT_EQ(k->binary, bytes);
  EXPECT_EQ(k->source.name, e.kernel);
  EXPECT_EQ(k->cacheKey, e.cacheKey);
  // A run-time-M kernel serves another M hint: the source is the same.
  GemmProblem other = e.problem;
  other.m = 4096;
  EXPECT_EQ(rt.compile(other, e.config, Target::SM90A)->binary, bytes);
  // Nothing was compiled into the cache.
  EXPECT_TRUE(rt.cache().list().empty());
}

TEST_F(BundleRuntimeTest, MissesFollowThePolicy) {
  bundle(linear(64), Target::SM90A);
  GemmProblem missing = bundledProblem(linear(64, 512));
  GemmConfig c = defaultConfig(missing, Target::SM90A);
  std::string cache = emptyCache();
  {
    // jit (the default): the compiler is tried, and it is absent here.
    NoCompiler env(bundleDir(), cache, std::nullopt);
    Runtime rt(RuntimeOptions{.target = Target::SM90A});
    EXPECT_EQ(rt.bundles().missPolicy(), BundleMiss::Jit);
    try {
      rt.compile(missing, c, Target::SM90A);
      ADD_FAILURE() << "compiled without a compiler";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("nvrtc"), std::string::npos)
          << e.what();
    }
  }
  {
    NoCompiler env(bundleDir(), cache, "error");
    Runtime rt(RuntimeOptions{.target = Target::SM90A});
    try {
      rt.compile(missing, c, Target::SM90A);
      ADD_FAILURE() << "a miss did not throw under KGEN_BUNDLE_MISS=error";
    } catch (const Error &e) {
      std::string msg = e.what();
      for (const std::string &part :
           {std::string("\"n\":512"), std::string("sm_90a"), bundleDir(),
            std::string("KGEN_BUNDLE_MISS")})
        EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
    }
    // The bundled one still loads.
    EXPECT_TRUE(
        rt.compile(bundledProblem(linear(64)),
                   defaultConfig(bundledProblem(linear(64)), Target::SM90A),
                   Target::SM90A)
            ->bundled);
  }
}

TEST_F(BundleRuntimeTest, AStaleOrBrokenBundleStopsTheRuntime) {
  bundle(linear(64), Target::SM90A);
  json m;
  {
    std::ifstream in(bundleDir() + "/manifest.json");
    in >> m;
  }
  m["kgen_version"] = "0.0.1";
  std::ofstream(bundleDir() + "/manifest.json") << m.dump();
  NoCompiler env(bundleDir(), emptyCache(), std::nullopt);
  try {
    Runtime rt(RuntimeOptions{.target = Target::SM90A});
    ADD_FAILURE() << "a stale bundle was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("stale"), std::string::npos)
        << e.what();
  }
  ScopedEnv typo("KGEN_BUNDLE_MISS", "eror");
  EXPECT_THROW(Runtime rt(RuntimeOptions{.target = Target::SM90A}), Error);
}

/// bf16 bits of a float that bf16 holds exactly.
uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

TEST_F(BundleRuntimeTest, GemmRunsFromTheBundleWithoutACompiler) {
  std::string why;
  std::unique_ptr<Backend> gpu = openBackend(std::nullopt, &why);
  if (!gpu)
    GTEST_SKIP() << "no GPU: " << why;
  Target t = gpu->target();
  gpu.reset();
  if (targetInfo(t).vendor != Vendor::NVIDIA)
    GTEST_SKIP() << "the bundle is written with nvrtc; the GPU is "
                 << toString(t);
  GemmProblem p = linear(64);
  BundleEntry e = bundle(p, t);

  NoCompiler env(bundleDir(), emptyCache(), "error");
  Runtime rt;
  ASSERT_NE(rt.backend(), nullptr);
  Backend &b = *rt.backend();
  // A (M x K) = 1, B (N x K) = 1: every element of C is K = 256, exact in
  // bf16, for each M the run-time-M kernel serves.
  const int64_t n = 256, k = 256, maxM = 100;
  std::vector<uint16_t> ones(size_t(std::max(maxM, n) * k), bf16(1.0f));
  void *dA = b.alloc(ones.size() * 2), *dB = b.alloc(ones.size() * 2);
  void *dC = b.alloc(size_t(maxM * n) * 2);
  b.copyToDevice(dA, ones.data(), ones.size() * 2);
  b.copyToDevice(dB, ones.data(), ones.size() * 2);
  for (int64_t m : {int64_t(1), int64_t(64), maxM}) {
    GemmArgs args{.a = dA, .b = dB, .c = dC, .m = m};
    std::shared_ptr<Kernel> kk = rt.select(p, args);
    EXPECT_TRUE(kk->bundled);
    EXPECT_EQ(kk->source.name, e.kernel);
    rt.gemm(p, args);
    b.synchronize();
    std::vector<uint16_t> c(size_t(m * n));
    b.copyToHost(c.data(), dC, c.size() * 2);
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_EQ(c[i], bf16(float(k))) << "M = " << m << ", element " << i;
  }
  // Unaligned C (an odd ldc): not bundled, and the policy forbids compiling.
  GemmArgs odd{.a = dA, .b = dB, .c = dC, .m = 8, .ldc = n + 1};
  EXPECT_THROW(rt.gemm(p, odd), Error);
  b.free(dA);
  b.free(dB);
  b.free(dC);
}

} // namespace
