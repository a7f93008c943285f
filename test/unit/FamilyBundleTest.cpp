//===- FamilyBundleTest.cpp - Attention and mLSTM bundles, no compiler ----===//
//
// A bundle holding an attention kernel and a two-phase mLSTM plan (written
// with nvrtc; skipped, visibly, without it), each with a config other than
// the heuristic's, read back by a Runtime that can open no compiler: the
// dispatcher takes the bundled config for the exact problem and for a
// shorter sequence of its bucket, loads the bundled binaries and compiles
// nothing; a problem the bundle lacks fails under KGEN_BUNDLE_MISS=error.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Runtime/Bundle.h"
#include "kgen/Runtime/Compiler.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

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

AttentionProblem decode() {
  AttentionProblem p;
  p.batch = 4;
  p.headsQ = 32;
  p.headsKv = 8;
  p.seqlenQ = 1;
  p.seqlenK = 4096;
  return p;
}

MlstmProblem layer() {
  MlstmProblem p;
  p.b = 1;
  p.nh = 8;
  p.s = 2048;
  p.dqk = 64;
  p.dv = 64;
  return p;
}

/// The first candidate that is not the heuristic's, so that a dispatcher
/// choosing it can only have read it from the bundle.
template <class P, class C> C notTheHeuristic(const P &p, Target t) {
  C h = defaultConfig(p, t);
  for (const C &c : enumerateConfigs(p, t))
    if (!(c == h))
      return c;
  return h;
}

class FamilyBundleTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!openCompiler(Vendor::NVIDIA, &why))
      GTEST_SKIP() << "nvrtc is not available to write the bundle: " << why;
    root_ = freshDir("familybundle");
    bundle_ = (root_ / "bundle").string();
  }
  void TearDown() override {
    if (!root_.empty())
      fs::remove_all(root_);
  }

  /// Writes the bundle as `kgen bundle` does: one entry per kernel.
  void write() {
    RuntimeOptions opts;
    opts.target = t_;
    opts.bundles = {};
    Runtime rt(opts);
    Compiler &cc = rt.compiler(Vendor::NVIDIA);
    BundleWriter w(bundle_);
    auto add = [&](const std::string &family, const json &problem,
                   const json &config, const Kernel &k) {
      BundleEntry e;
      e.target = t_;
      e.family = family;
      e.familyProblem = problem;
      e.familyConfig = config;
      e.kernel = k.source.name;
      e.compiler = cc.name();
      e.compilerVersion = cc.version();
      e.sourceSha256 = sourceDigest(k.source);
      e.cacheKey = k.cacheKey;
      e.configFrom = "given";
      e = w.add(e, k.binary);
      binaries_[e.kernel] = k.binary;
    };
    attnConfig_ =
        notTheHeuristic<AttentionProblem, AttentionConfig>(decode(), t_);
    add("attention", tuningProblemJson(decode()), toJson(attnConfig_),
        *rt.compile(decode(), attnConfig_, t_));
    // A two-phase plan: two kernels, two entries of one problem and config.
    mlstmConfig_ = defaultConfig(layer(), t_);
    for (const MlstmConfig &c : enumerateConfigs(layer(), t_))
      if (c.variant == MlstmVariant::TwoPhase && !(c == mlstmConfig_)) {
        mlstmConfig_ = c;
        break;
      }
    ASSERT_EQ(mlstmConfig_.variant, MlstmVariant::TwoPhase);
    auto plan = rt.compileMlstm(layer(), mlstmConfig_, t_);
    ASSERT_EQ(plan->kernels.size(), 2u);
    for (const auto &k : plan->kernels)
      add("mlstm", tuningProblemJson(layer()), toJson(mlstmConfig_), *k);
    w.commit();
  }

  Target t_ = Target::SM90A;
  fs::path root_;
  std::string bundle_;
  AttentionConfig attnConfig_;
  MlstmConfig mlstmConfig_;
  std::map<std::string, std::string> binaries_;
};

} // namespace

TEST_F(FamilyBundleTest, ManifestRoundTrip) {
  write();
  Bundle b = Bundle::open(bundle_);
  ASSERT_EQ(b.entries().size(), 3u);
  const BundleEntry *a = b.findFamily(t_, tuningProblemJson(decode()));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->family, "attention");
  EXPECT_EQ(attentionConfigFromJson(a->familyConfig), attnConfig_);
  EXPECT_EQ(b.binary(*a), binaries_.at(a->kernel));
  const BundleEntry *m = b.findFamily(t_, tuningProblemJson(layer()));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(mlstmConfigFromJson(m->familyConfig), mlstmConfig_);
  // Family entries never answer a GEMM lookup.
  EXPECT_EQ(b.find(t_, GemmProblem{}), nullptr);
  EXPECT_EQ(b.findFamily(Target::SM80, tuningProblemJson(layer())), nullptr);
}

TEST_F(FamilyBundleTest, RuntimeServesTheBundleWithoutACompiler) {
  write();
  std::string cache = freshDir("familybundle-cache").string();
  ScopedEnv nvrtc("KGEN_NVRTC", "/nonexistent/libnvrtc.so"),
      hiprtc("KGEN_HIPRTC", "/nonexistent/libhiprtc.so"),
      dirs("KGEN_BUNDLE", bundle_), policy("KGEN_BUNDLE_MISS", "error"),
      cacheDir("KGEN_CACHE_DIR", cache);
  Runtime rt(RuntimeOptions{.target = t_});
  ASSERT_FALSE(rt.bundles().empty());
  EXPECT_THROW(rt.compiler(Vendor::NVIDIA), Error);

  // Attention: the bundled config for the problem and for a decode step of
  // its bucket (Sk 4000 rounds up to 4096), not the heuristic's.
  AttentionArgs none;
  EXPECT_EQ(rt.selectAttention(decode(), none), attnConfig_);
  AttentionProblem step = decode();
  step.seqlenK = 4000;
  EXPECT_EQ(rt.selectAttention(step, none), attnConfig_);
  std::shared_ptr<Kernel> k = rt.compile(decode(), attnConfig_, t_);
  EXPECT_TRUE(k->bundled);
  EXPECT_EQ(k->binary, binaries_.at(k->source.name));

  // mLSTM: both kernels of the two-phase plan from the bundle, also for a
  // shorter sequence of the S bucket (2000 -> 2048).
  char fake[64];
  MlstmArgs a;
  a.q = a.k = a.v = a.i = a.f = fake;
  a.h = fake;
  for (int64_t s : {2048, 2000}) {
    a.s = s;
    std::shared_ptr<const MlstmPlan> plan = rt.selectMlstm(layer(), a);
    EXPECT_EQ(plan->config, mlstmConfig_);
    ASSERT_EQ(plan->kernels.size(), 2u);
    for (const auto &pk : plan->kernels) {
      EXPECT_TRUE(pk->bundled);
      EXPECT_EQ(pk->binary, binaries_.at(pk->source.name));
    }
  }
  EXPECT_TRUE(rt.cache().list().empty()); // nothing compiled

  // A problem the bundle lacks: an error naming the kernel and the policy.
  MlstmProblem other = layer();
  other.dv = 128;
  try {
    rt.selectMlstm(other, a);
    ADD_FAILURE() << "a miss compiled without a compiler";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("KGEN_BUNDLE_MISS"), std::string::npos)
        << e.what();
  }
}
