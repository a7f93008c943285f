//===- BundleTest.cpp - Ahead-of-time bundles, read with no compiler ------===//
//
// Bundles of real kernels are compiled with nvrtc (the tests that need it
// skip, visibly, without it) and then read through the Bundle API alone, as
// a host program without a compiler does: lookups return the exact bytes
// nvrtc produced; a flipped bit, a truncated file, another kgen version, a
// missing manifest or a path leaving the bundle are errors that name the
// file and the fix, and reading never changes the directory. Lookup rules,
// the writer's atomic publish and the miss messages use small fake binaries.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Bundle.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Runtime/Compiler.h"
#include "kgen/Runtime/Sha256.h"
#include "kgen/Runtime/TuningDB.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kgen;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const fs::path &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

/// A fresh directory under $KGEN_CACHE_DIR (set per test by CMake) or the
/// temp dir.
fs::path freshDir(const std::string &prefix) {
  const char *base = std::getenv("KGEN_CACHE_DIR");
  std::string parent = base && *base ? base : fs::temp_directory_path();
  fs::create_directories(parent);
  std::string tmpl = parent + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error("mkdtemp failed in " + parent);
  return tmpl;
}

/// Every path under `dir` with its type, mode and contents: equal snapshots
/// mean nothing was created, removed, rewritten or chmod'ed.
std::map<std::string, std::string> snapshot(const fs::path &dir) {
  std::map<std::string, std::string> out;
  for (const auto &e : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    ::lstat(e.path().c_str(), &st);
    std::string v = std::to_string(st.st_mode) + ":";
    if (e.is_regular_file())
      v += readFile(e.path());
    out[fs::relative(e.path(), dir).string()] = v;
  }
  return out;
}

/// y = x W^T with N and K baked in and M at run time (static with `staticM`).
GemmProblem linear(int64_t m, int64_t n = 256, int64_t k = 256,
                   bool staticM = false) {
  GemmProblem p{.m = m, .n = n, .k = k, .transB = true};
  p.staticM = staticM;
  return p;
}

/// Expects `fn` to throw kgen::Error whose message holds every `parts`.
template <typename Fn>
void expectError(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning " << *parts.begin();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (const std::string &p : parts)
      EXPECT_NE(msg.find(p), std::string::npos)
          << "'" << p << "' missing from: " << msg;
  }
}

/// An entry for BundleWriter::add with a fake binary: the Bundle API never
/// looks inside binaries, so lookup rules need no compiler.
BundleEntry fakeEntry(const GemmProblem &p, Target t,
                      GemmConfig c = GemmConfig{}) {
  BundleEntry e;
  e.target = t;
  e.problem = p;
  e.config = c;
  e.kernel = gemmKernelName(p, c, t);
  e.compiler = "nvrtc";
  e.compilerVersion = "12.8";
  e.sourceSha256 = sha256Hex("source of " + toJson(p).dump() + e.kernel);
  e.cacheKey = sha256Hex("key of " + toJson(p).dump() + e.kernel);
  return e;
}

std::string fakeBinary(const BundleEntry &e) {
  return "binary of " + toJson(e.problem).dump() + " " + e.kernel;
}

//===----------------------------------------------------------------------===//
// Bundles of real kernels (nvrtc)
//===----------------------------------------------------------------------===//

/// The kernels of the shared bundle: what was asked for and what nvrtc gave.
struct Compiled {
  GemmProblem problem;
  GemmConfig config;
  Target target;
  KernelSource source;
  std::string binary;
};

class BundleTest : public ::testing::Test {
protected:
  /// One bundle for the suite (compiles take seconds): a run-time-M and a
  /// static-M kernel for sm_90a and the run-time-M one for sm_80. Tests that
  /// damage it work on a copy.
  static void SetUpTestSuite() {
    std::string why;
    if (!openCompiler(Vendor::NVIDIA, &why)) {
      skipWhy_ = new std::string("nvrtc is not available: " + why);
      return;
    }
    RuntimeOptions opts;
    opts.target = Target::SM90A;
    Runtime rt(opts);
    dir_ = new fs::path(freshDir("bundletest") / "bundle");
    kernels_ = new std::vector<Compiled>;
    BundleWriter w(dir_->string());
    std::pair<GemmProblem, Target> jobs[] = {
        {linear(64), Target::SM90A},
        {linear(64, 128, 256, /*staticM=*/true), Target::SM90A},
        {linear(64), Target::SM80}};
    for (auto &[p, t] : jobs) {
      GemmProblem bp = bundledProblem(p);
      GemmConfig c = defaultConfig(bp, t);
      std::shared_ptr<Kernel> k = rt.compile(bp, c, t);
      BundleEntry e;
      e.target = t;
      e.problem = bp;
      e.config = c;
      e.kernel = k->source.name;
      e.compiler = rt.compiler(Vendor::NVIDIA).name();
      e.compilerVersion = rt.compiler(Vendor::NVIDIA).version();
      e.sourceSha256 = sourceDigest(k->source);
      e.cacheKey = k->cacheKey;
      w.add(e, k->binary);
      kernels_->push_back({bp, c, t, k->source, k->binary});
    }
    w.commit();
  }
  static void TearDownTestSuite() {
    if (dir_)
      fs::remove_all(dir_->parent_path());
    delete dir_;
    delete kernels_;
    delete skipWhy_;
    dir_ = nullptr;
    kernels_ = nullptr;
    skipWhy_ = nullptr;
  }
  void SetUp() override {
    if (skipWhy_)
      GTEST_SKIP() << *skipWhy_;
  }

  /// A copy of the shared bundle that a test may damage.
  fs::path copyOfBundle() {
    fs::path d = freshDir("bundlecopy") / "bundle";
    fs::copy(*dir_, d, fs::copy_options::recursive);
    copies_.push_back(d.parent_path());
    return d;
  }
  void TearDown() override {
    for (const fs::path &p : copies_)
      fs::remove_all(p);
  }

  static fs::path *dir_;
  static std::vector<Compiled> *kernels_;
  static std::string *skipWhy_;
  std::vector<fs::path> copies_;
};

fs::path *BundleTest::dir_ = nullptr;
std::vector<Compiled> *BundleTest::kernels_ = nullptr;
std::string *BundleTest::skipWhy_ = nullptr;

TEST_F(BundleTest, LookupsReturnTheExactBytesTheCompilerProduced) {
  auto before = snapshot(*dir_);
  Bundle b = Bundle::open(dir_->string());
  ASSERT_EQ(b.entries().size(), kernels_->size());
  for (const Compiled &k : *kernels_) {
    const BundleEntry *e = b.find(k.target, k.problem);
    ASSERT_NE(e, nullptr) << toJson(k.problem).dump();
    EXPECT_EQ(e->target, k.target);
    EXPECT_EQ(e->config, k.config);
    EXPECT_EQ(e->kernel, k.source.name);
    EXPECT_EQ(b.binary(*e), k.binary) << e->file;
    EXPECT_EQ(e->bytes, k.binary.size());
    EXPECT_EQ(e->file,
              std::string(toString(k.target)) + "/" + e->kernel + ".bin");
    // The same entry by config and by source (what the runtime uses).
    EXPECT_EQ(b.find(k.target, k.problem, &k.config), e);
    EXPECT_EQ(b.findSource(k.source, sourceDigest(k.source)), e);
    EXPECT_EQ(
        b.findSource(emitGemm(k.problem, k.config, k.target), e->sourceSha256),
        e);
  }
  json m = json::parse(readFile(*dir_ / "manifest.json"));
  EXPECT_EQ(m["schema"], kBundleSchema);
  EXPECT_EQ(m["kgen_version"], kVersion);
  EXPECT_EQ(m["entries"].size(), kernels_->size());
  EXPECT_FALSE(fs::exists(*dir_ / "tuning.json")); // no DB was given
  EXPECT_EQ(snapshot(*dir_), before) << "reading changed the bundle";
}

TEST_F(BundleTest, RunTimeMServesEveryMAndStaticMOnlyItsOwn) {
  Bundle b = Bundle::open(dir_->string());
  const Compiled &dyn = (*kernels_)[0];
  const Compiled &fixed = (*kernels_)[1];
  for (int64_t m : {1, 7, 64, 4096}) {
    GemmProblem p = dyn.problem;
    p.m = m;
    const BundleEntry *e = b.find(Target::SM90A, p);
    ASSERT_NE(e, nullptr) << "M = " << m;
    EXPECT_EQ(e->kernel, dyn.source.name);
  }
  GemmProblem p = fixed.problem;
  EXPECT_NE(b.find(Target::SM90A, p), nullptr);
  p.m = 65;
  EXPECT_EQ(b.find(Target::SM90A, p), nullptr) << "static M = 64 serves 65";
  // Same shape with M baked in is another kernel.
  GemmProblem baked = dyn.problem;
  baked.staticM = true;
  EXPECT_EQ(b.find(Target::SM90A, baked), nullptr);
}

TEST_F(BundleTest, TargetConfigAndAlignmentMustMatch) {
  Bundle b = Bundle::open(dir_->string());
  const Compiled &k = (*kernels_)[1]; // sm_90a only
  EXPECT_EQ(b.find(Target::SM80, k.problem), nullptr);
  EXPECT_EQ(b.find(Target::GFX90A, k.problem), nullptr);
  GemmConfig other = k.config;
  other.stages += 1;
  EXPECT_EQ(b.find(Target::SM90A, k.problem, &other), nullptr);
  // A call whose C allows only 2-element accesses cannot run the bundled
  // 8-wide kernel.
  GemmProblem unaligned = k.problem;
  unaligned.alignC = 2;
  EXPECT_EQ(b.find(Target::SM90A, unaligned), nullptr);
}

TEST_F(BundleTest, FlippedBitIsAnErrorAndNothingChanges) {
  fs::path d = copyOfBundle();
  Bundle b = Bundle::open(d.string());
  const BundleEntry &victim = b.entries()[0];
  std::string bytes = readFile(d / victim.file);
  bytes[bytes.size() / 2] ^= 0x10;
  writeFile(d / victim.file, bytes);
  auto before = snapshot(d);
  expectError([&] { b.binary(victim); },
              {(d / victim.file).string(), "corrupted", "SHA-256",
               victim.sha256, "kgen bundle"});
  // Reopening works (binaries are checked when read); the others still load.
  Bundle again = Bundle::open(d.string());
  expectError([&] { again.binary(again.entries()[0]); }, {"corrupted"});
  EXPECT_EQ(again.binary(again.entries()[1]), (*kernels_)[1].binary);
  EXPECT_EQ(snapshot(d), before) << "a reader modified the bundle";
}

TEST_F(BundleTest, TruncatedOrMissingBinaryIsAnError) {
  fs::path d = copyOfBundle();
  Bundle b = Bundle::open(d.string());
  const BundleEntry &e0 = b.entries()[0];
  std::string bytes = readFile(d / e0.file);
  writeFile(d / e0.file, bytes.substr(0, bytes.size() - 1));
  expectError([&] { b.binary(e0); },
              {e0.file, std::to_string(bytes.size() - 1),
               std::to_string(bytes.size()), "truncated"});
  const BundleEntry &e1 = b.entries()[1];
  fs::remove(d / e1.file);
  expectError([&] { b.binary(e1); }, {e1.file, "does not exist"});
}

TEST_F(BundleTest, LinkedBinaryIsRefused) {
  fs::path d = copyOfBundle();
  Bundle b = Bundle::open(d.string());
  const BundleEntry &e = b.entries()[0];
  fs::path real = d.parent_path() / "elsewhere.bin";
  fs::rename(d / e.file, real);
  fs::create_symlink(real, d / e.file);
  expectError([&] { b.binary(e); }, {e.file, "symbolic link"});
}

TEST_F(BundleTest, StaleVersionIsRefusedAndNothingChanges) {
  fs::path d = copyOfBundle();
  json m = json::parse(readFile(d / "manifest.json"));
  m["kgen_version"] = "0.0.1";
  writeFile(d / "manifest.json", m.dump(2));
  auto before = snapshot(d);
  expectError(
      [&] { Bundle::open(d.string()); },
      {d.string(), "stale", "0.0.1", std::string(kVersion), "kgen bundle"});
  BundleOptions opts;
  opts.dirs = {d.string()};
  expectError([&] { BundleSet set(opts); }, {"stale"});
  EXPECT_EQ(snapshot(d), before);
}

TEST_F(BundleTest, MissingManifestIsNotABundle) {
  fs::path d = copyOfBundle();
  fs::remove(d / "manifest.json");
  auto before = snapshot(d);
  expectError(
      [&] { Bundle::open(d.string()); },
      {d.string(), "not a kgen bundle", "manifest.json", "kgen bundle --out"});
  EXPECT_EQ(snapshot(d), before);
  expectError([&] { Bundle::open((d / "nonexistent").string()); },
              {"nonexistent", "KGEN_BUNDLE"});
  expectError([&] { Bundle::open((d / "sm_90a").string() + "/x.bin"); },
              {"x.bin"});
}

//===----------------------------------------------------------------------===//
// Manifests, lookup rules and the writer (fake binaries)
//===----------------------------------------------------------------------===//

class BundleFilesTest : public ::testing::Test {
protected:
  void SetUp() override { root_ = freshDir("bundlefiles"); }
  void TearDown() override { fs::remove_all(root_); }

  /// Writes a bundle of fake kernels at root/name.
  fs::path write(const std::string &name,
                 const std::vector<BundleEntry> &entries) {
    fs::path d = root_ / name;
    BundleWriter w(d.string());
    for (const BundleEntry &e : entries)
      w.add(e, fakeBinary(e));
    w.commit();
    return d;
  }
  /// Top-level names under root_, to see temp directories left behind.
  std::vector<std::string> rootNames() {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(root_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path root_;
};

TEST_F(BundleFilesTest, FindPrefersExactAlignmentThenTheWidest) {
  GemmProblem p8 = linear(64), p4 = p8, p2 = p8;
  p4.alignA = p4.alignB = p4.alignC = 4;
  p2.alignA = p2.alignB = p2.alignC = 2;
  fs::path d =
      write("b", {fakeEntry(p2, Target::SM90A), fakeEntry(p8, Target::SM90A),
                  fakeEntry(p4, Target::SM90A)});
  Bundle b = Bundle::open(d.string());
  auto alignsOf = [&](GemmProblem call) {
    const BundleEntry *e = b.find(Target::SM90A, call);
    return e ? std::to_string(e->problem.alignA) : std::string("none");
  };
  EXPECT_EQ(alignsOf(p8), "8");
  EXPECT_EQ(alignsOf(p4), "4");
  EXPECT_EQ(alignsOf(p2), "2");
  GemmProblem mixed = p8;
  mixed.alignB = 4; // (8, 4, 8): the 4-wide entry is the widest that serves
  EXPECT_EQ(alignsOf(mixed), "4");
  GemmProblem one = p8;
  one.alignC = 1;
  EXPECT_EQ(alignsOf(one), "none");
}

TEST(BundleServes, AlignmentsAtMostTheCallsAndMOnlyWhenBaked) {
  GemmProblem e = linear(64), call = e;
  EXPECT_TRUE(bundleServes(e, call));
  call.m = 1000;
  EXPECT_TRUE(bundleServes(e, call));
  call.alignA = 4;
  EXPECT_FALSE(bundleServes(e, call));
  e.alignA = 2;
  EXPECT_TRUE(bundleServes(e, call));
  call.n = 512;
  EXPECT_FALSE(bundleServes(e, call));
  GemmProblem s = linear(64, 256, 256, true), sc = s;
  sc.m = 65;
  EXPECT_FALSE(bundleServes(s, sc));
  GemmProblem f16 = linear(64);
  f16.ab = f16.c = DType::F16;
  EXPECT_FALSE(bundleServes(linear(64), f16));
}

TEST(BundledProblem, AlignmentsFollowTheBakedExtents) {
  // K = 4099 allows only 1-element accesses to A ('N': K contiguous) and B
  // ('T': K contiguous); C has N = 256 contiguous.
  GemmProblem p = bundledProblem(linear(127, 256, 4099));
  EXPECT_EQ(p.alignA, 1);
  EXPECT_EQ(p.alignB, 1);
  EXPECT_EQ(p.alignC, 8);
  EXPECT_EQ(p.m, 127);
  // A stored transposed has M contiguous: the M hint decides (532 = 4 * 133).
  GemmProblem t = linear(532);
  t.transA = true;
  EXPECT_EQ(bundledProblem(t).alignA, 4);
  // Aligned extents keep the promise; a lower promise is kept too.
  EXPECT_EQ(bundledProblem(linear(64)), linear(64));
  GemmProblem low = linear(64);
  low.alignC = 2;
  EXPECT_EQ(bundledProblem(low).alignC, 2);
  expectError([] { bundledProblem(linear(0)); }, {"m"});
}

TEST_F(BundleFilesTest, EqualBinariesShareAFileAndNameClashesAreRenamed) {
  GemmProblem p = linear(64);
  BundleEntry a = fakeEntry(p, Target::SM90A);
  // Another problem whose kernel has the same name and source: the same
  // binary, one file.
  BundleEntry b = a;
  b.problem.alignA = 4;
  BundleEntry c = fakeEntry(linear(64, 512), Target::SM90A);
  c.kernel = a.kernel; // a clash with different bytes
  fs::path d = root_ / "b";
  BundleWriter w(d.string());
  BundleEntry ea = w.add(a, "same bytes");
  BundleEntry eb = w.add(b, "same bytes");
  BundleEntry ec = w.add(c, "other bytes");
  EXPECT_EQ(w.add(a, "ignored").file, ea.file) << "a duplicate is not added";
  w.commit();
  EXPECT_EQ(ea.file, eb.file);
  EXPECT_NE(ec.file, ea.file);
  EXPECT_NE(ec.file.find(ec.sha256.substr(0, 16)), std::string::npos);
  Bundle bundle = Bundle::open(d.string());
  ASSERT_EQ(bundle.entries().size(), 3u);
  EXPECT_EQ(bundle.binary(bundle.entries()[1]), "same bytes");
  EXPECT_EQ(bundle.binary(bundle.entries()[2]), "other bytes");
  EXPECT_EQ(ea.path, (fs::absolute(d) / ea.file).lexically_normal().string());
}

TEST_F(BundleFilesTest, WriterRefusesADirectoryThatIsNotABundle) {
  fs::path d = root_ / "mine";
  fs::create_directories(d);
  writeFile(d / "notes.txt", "precious");
  auto before = snapshot(root_);
  expectError([&] { BundleWriter w(d.string()); },
              {d.string(), "not a kgen bundle", "refusing"});
  writeFile(root_ / "file", "x");
  expectError([&] { BundleWriter w((root_ / "file").string()); },
              {"not a directory"});
  fs::remove(root_ / "file");
  EXPECT_EQ(snapshot(root_), before);
  // An empty directory is fine.
  fs::create_directories(root_ / "empty");
  write("empty", {fakeEntry(linear(64), Target::SM90A)});
  EXPECT_EQ(Bundle::open((root_ / "empty").string()).entries().size(), 1u);
}

TEST_F(BundleFilesTest, RewriteReplacesTheBundleInOneStep) {
  fs::path d = write("b", {fakeEntry(linear(64), Target::SM90A)});
  // A stale bundle (another version) is replaced too: that is the fix.
  json m = json::parse(readFile(d / "manifest.json"));
  m["kgen_version"] = "0.0.1";
  writeFile(d / "manifest.json", m.dump());
  write("b", {fakeEntry(linear(64), Target::SM90A),
              fakeEntry(linear(64, 512), Target::SM80)});
  Bundle b = Bundle::open(d.string());
  EXPECT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(rootNames(), std::vector<std::string>{"b"})
      << "temp or old directories left behind";
}

TEST_F(BundleFilesTest, WriterWithoutCommitLeavesNoTrace) {
  fs::path d = write("b", {fakeEntry(linear(64), Target::SM90A)});
  auto before = snapshot(root_);
  {
    BundleWriter w(d.string());
    w.add(fakeEntry(linear(64, 512), Target::SM90A), "half");
    // A failed compile: the writer goes away uncommitted.
  }
  EXPECT_EQ(snapshot(root_), before);
  {
    BundleWriter w((root_ / "new").string());
    w.add(fakeEntry(linear(64), Target::SM90A), "x");
  }
  EXPECT_EQ(rootNames(), std::vector<std::string>{"b"});
}

TEST_F(BundleFilesTest, TuningRecordsAreShipped) {
  fs::path d = root_ / "b";
  BundleWriter w(d.string());
  w.add(fakeEntry(linear(64), Target::SM90A), "x");
  TuningDB db;
  DeviceKey key{.device = "NVIDIA H200",
                .arch = "sm_90",
                .target = Target::SM90A,
                .computeUnits = 132,
                .compiler = "nvrtc",
                .compilerVersion = "12.8"};
  TuningRecord r;
  r.problem = linear(64);
  r.kernel = "k";
  r.timeUs = 5;
  db.record(key, r);
  w.setTuning(db);
  w.commit();
  TuningDB shipped = TuningDB::load((d / "tuning.json").string());
  ASSERT_EQ(shipped.records(key).size(), 1u);
  EXPECT_EQ(shipped.records(key)[0].problem, linear(64));
}

TEST_F(BundleFilesTest, MalformedManifestsNameTheField) {
  fs::path d = write("b", {fakeEntry(linear(64), Target::SM90A)});
  json good = json::parse(readFile(d / "manifest.json"));
  struct Case {
    const char *what;
    std::function<void(json &)> edit;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"schema", [](json &m) { m["schema"] = "kgen-bundle/9"; },
       "kgen-bundle/9"},
      {"no schema", [](json &m) { m.erase("schema"); }, "schema"},
      {"unknown top field", [](json &m) { m["extra"] = 1; }, "extra"},
      {"escaping path",
       [](json &m) { m["entries"][0]["file"] = "../outside.bin"; },
       "entries[0]"},
      {"absolute path",
       [](json &m) { m["entries"][0]["file"] = "/etc/passwd"; }, "'file'"},
      {"bad sha", [](json &m) { m["entries"][0]["sha256"] = "abc"; },
       "'sha256'"},
      {"bad target", [](json &m) { m["entries"][0]["target"] = "sm_75"; },
       "sm_75"},
      {"bad problem", [](json &m) { m["entries"][0]["problem"]["n"] = 0; },
       "entries[0]"},
      {"unknown entry field", [](json &m) { m["entries"][0]["x"] = 1; }, "'x'"},
      {"duplicate", [](json &m) { m["entries"].push_back(m["entries"][0]); },
       "entries[1]"},
      {"negative bytes", [](json &m) { m["entries"][0]["bytes"] = -1; },
       "'bytes'"},
  };
  for (const Case &c : cases) {
    json m = good;
    c.edit(m);
    writeFile(d / "manifest.json", m.dump());
    SCOPED_TRACE(c.what);
    expectError([&] { Bundle::open(d.string()); }, {c.expect});
  }
  writeFile(d / "manifest.json", "{not json");
  expectError([&] { Bundle::open(d.string()); }, {"malformed JSON"});
}

TEST_F(BundleFilesTest, OptionsComeFromTheEnvironment) {
  ::setenv("KGEN_BUNDLE", "/a::/b/", 1);
  ::setenv("KGEN_BUNDLE_MISS", "error", 1);
  BundleOptions o = BundleOptions::fromEnv();
  EXPECT_EQ(o.dirs, (std::vector<std::string>{"/a", "/b/"}));
  EXPECT_EQ(o.miss, BundleMiss::Error);
  ::setenv("KGEN_BUNDLE_MISS", "jit", 1);
  EXPECT_EQ(BundleOptions::fromEnv().miss, BundleMiss::Jit);
  ::setenv("KGEN_BUNDLE_MISS", "eror", 1);
  expectError([] { BundleOptions::fromEnv(); },
              {"KGEN_BUNDLE_MISS", "eror", "jit", "error"});
  ::unsetenv("KGEN_BUNDLE");
  ::unsetenv("KGEN_BUNDLE_MISS");
  o = BundleOptions::fromEnv();
  EXPECT_TRUE(o.dirs.empty());
  EXPECT_EQ(o.miss, BundleMiss::Jit);
}

TEST_F(BundleFilesTest, SetSearchesInOrderAndExplainsMisses) {
  GemmProblem p = linear(64);
  fs::path d1 = write("one", {fakeEntry(p, Target::SM80)});
  fs::path d2 = write("two", {fakeEntry(p, Target::SM90A),
                              fakeEntry(linear(64, 512), Target::SM90A)});
  BundleOptions opts;
  opts.dirs = {d1.string(), d2.string()};
  opts.miss = BundleMiss::Error;
  BundleSet set(opts);
  EXPECT_EQ(set.missPolicy(), BundleMiss::Error);
  const BundleEntry *e = set.find(Target::SM90A, p);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->path.rfind(d2.string(), 0), 0u) << e->path;
  EXPECT_EQ(set.binary(*e), fakeBinary(*e));

  // Another shape: names the problem, target, both dirs and the fixes.
  GemmProblem other = linear(64, 1024);
  std::string msg = set.missError(Target::SM90A, other).what();
  for (const std::string &part :
       {std::string("\"n\":1024"), std::string("sm_90a"), d1.string(),
        d2.string(), std::string("KGEN_BUNDLE_MISS=jit"),
        std::string("kgen bundle")})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
  // Less aligned data than bundled: says which alignments.
  GemmProblem unaligned = p;
  unaligned.alignC = 2;
  msg = set.missError(Target::SM90A, unaligned).what();
  EXPECT_NE(msg.find("(8, 8, 8)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(8, 8, 2)"), std::string::npos) << msg;
  // Bundled for another target only.
  msg = set.missError(Target::GFX90A, p).what();
  EXPECT_NE(msg.find("sm_80, sm_90a only"), std::string::npos) << msg;
}

//===----------------------------------------------------------------------===//
// The CLI
//===----------------------------------------------------------------------===//

/// Runs the kgen binary; returns its exit code and output (stdout+stderr).
std::pair<int, std::string> kgenCli(const std::string &args) {
  std::string cmd =
      std::string(KGEN_BINARY_DIR) + "/bin/kgen " + args + " 2>&1";
  FILE *f = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), f))
    out.append(buf, n);
  int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class BundleCliTest : public BundleFilesTest {
protected:
  void SetUp() override {
    BundleFilesTest::SetUp();
    std::string why;
    if (!openCompiler(Vendor::NVIDIA, &why))
      GTEST_SKIP() << "nvrtc is not available: " << why;
    auto [rc, out] = kgenCli("bundle --help");
    if (rc != 0)
      GTEST_SKIP() << "this kgen has no bundle command: " << out;
  }
};

TEST_F(BundleCliTest, WritesABundleWithTheDbsConfig) {
  // A DB record for the problem (this kgen and nvrtc version; --device
  // names it, since a local GPU would otherwise pick its own records)
  // decides the config; the heuristic's is another one.
  std::string version = openCompiler(Vendor::NVIDIA, nullptr)->version();
  GemmProblem p = linear(64);
  std::vector<GemmConfig> all = enumerateConfigs(p, Target::SM90A);
  ASSERT_GE(all.size(), 2u);
  GemmConfig tuned = all.back();
  ASSERT_NE(tuned, defaultConfig(p, Target::SM90A));
  DeviceKey key{.device = "NVIDIA H200",
                .arch = "sm_90",
                .target = Target::SM90A,
                .computeUnits = 132,
                .compiler = "nvrtc",
                .compilerVersion = version};
  TuningDB db;
  TuningRecord r;
  r.problem = p;
  r.config = tuned;
  r.kernel = gemmKernelName(p, tuned, Target::SM90A);
  r.timeUs = 3;
  db.record(key, r);
  db.save((root_ / "db.json").string());

  std::string out = (root_ / "b").string();
  auto [rc, text] = kgenCli(
      "bundle --m 64 --n 256 --k 256 --layout nt --target sm_90a,sm_80 --db " +
      (root_ / "db.json").string() + " --device 'NVIDIA H200' --out " + out +
      " --json");
  ASSERT_EQ(rc, 0) << text;
  Bundle b = Bundle::open(out);
  ASSERT_EQ(b.entries().size(), 2u);
  const BundleEntry *e = b.find(Target::SM90A, p);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->config, tuned);
  EXPECT_NE(e->configFrom.find("tuning-db"), std::string::npos);
  const BundleEntry *e80 = b.find(Target::SM80, p);
  ASSERT_NE(e80, nullptr);
  EXPECT_EQ(e80->config, defaultConfig(p, Target::SM80));
  EXPECT_EQ(e80->configFrom, "heuristic");
  EXPECT_EQ(TuningDB::load(out + "/tuning.json").records(key).size(), 1u);
  for (const BundleEntry &x : b.entries())
    EXPECT_EQ(b.binary(x).size(), x.bytes);

  // A directory that is not a bundle is refused, and left alone.
  fs::create_directories(root_ / "mine");
  writeFile(root_ / "mine/notes.txt", "precious");
  auto [rc2, text2] = kgenCli("bundle --m 64 --n 256 --k 256 --target sm_90a "
                              "--out " +
                              (root_ / "mine").string());
  EXPECT_EQ(rc2, 1) << text2;
  EXPECT_NE(text2.find("not a kgen bundle"), std::string::npos) << text2;
  EXPECT_EQ(readFile(root_ / "mine/notes.txt"), "precious");
}

TEST_F(BundleCliTest, AFailedCompileWritesNothing) {
  // One stage is no pipeline: checkConfig refuses it.
  std::string out = (root_ / "b").string();
  auto [rc, text] = kgenCli("bundle --m 64 --n 256 --k 256 --target sm_90a "
                            "--stages 1 --out " +
                            out);
  EXPECT_EQ(rc, 1) << text;
  EXPECT_NE(text.find("nothing was written"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(rootNames(), std::vector<std::string>{});
}

} // namespace
