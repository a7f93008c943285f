//===- CacheTest.cpp - The on-disk kernel cache ---------------------------===//
//
// Every test works in its own directory under $KGEN_CACHE_DIR (set per test
// by CMake) or the temp dir. Some tests depend on being root (chown) or not
// (chmod stops writes only for other users) and pick their method at run
// time.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Cache.h"
#include "kgen/Error.h"
#include "kgen/Runtime/Sha256.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kgen;
namespace fs = std::filesystem;

namespace {

std::string keyOf(const std::string &s) { return sha256Hex("key:" + s); }

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

class CacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *base = std::getenv("KGEN_CACHE_DIR");
    std::string parent = base && *base ? base : fs::temp_directory_path();
    fs::create_directories(parent);
    std::string tmpl = parent + "/cachetest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    // Undo chmods so the tree can be removed.
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir_, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec))
        ::chmod(it->path().c_str(), 0700);
    ::chmod(dir_.c_str(), 0700);
    fs::remove_all(dir_, ec);
  }

  CacheOptions opts(const std::string &sub = "c", bool log = false) {
    CacheOptions o;
    o.dir = dir_ + "/" + sub;
    o.log = log;
    return o;
  }
  std::string entryPath(const std::string &sub, Target t,
                        const std::string &key) {
    return dir_ + "/" + sub + "/v1/" + std::string(toString(t)) + "/" +
           key.substr(0, 2) + "/" + key;
  }

  std::string dir_;
};

constexpr Target kT = Target::SM80;

} // namespace

//===----------------------------------------------------------------------===//
// Keys
//===----------------------------------------------------------------------===//

TEST(CacheKey, CoversEveryField) {
  CacheKeyInput base;
  base.source = "extern \"C\" __global__ void k() {}";
  base.headerTexts = {"// header 1", "// header 2"};
  base.compiler = "nvrtc";
  base.compilerVersion = "13.0";
  base.options = {"--gpu-architecture=sm_80", "-std=c++17"};
  base.target = Target::SM80;

  std::string k = cacheKey(base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, cacheKey(base)) << "the key must be deterministic";

  std::vector<std::pair<const char *, CacheKeyInput>> changed;
  auto with = [&](const char *what, auto edit) {
    CacheKeyInput in = base;
    edit(in);
    changed.emplace_back(what, in);
  };
  with("source", [](CacheKeyInput &in) { in.source += " "; });
  with("header text", [](CacheKeyInput &in) { in.headerTexts[1] += "x"; });
  with("header added", [](CacheKeyInput &in) { in.headerTexts.push_back(""); });
  with("compiler", [](CacheKeyInput &in) { in.compiler = "hiprtc"; });
  with("compiler version",
       [](CacheKeyInput &in) { in.compilerVersion = "12.9"; });
  with("option", [](CacheKeyInput &in) { in.options[1] = "-std=c++20"; });
  with("option added", [](CacheKeyInput &in) { in.options.push_back("-G"); });
  with("target", [](CacheKeyInput &in) { in.target = Target::SM90A; });
  with("kgen version", [](CacheKeyInput &in) { in.kgenVersion = "0.1.1"; });
  // Bytes moved across a field boundary must not collide.
  with("boundary",
       [](CacheKeyInput &in) { in.headerTexts = {"// header 1// header 2"}; });
  with("boundary2", [](CacheKeyInput &in) {
    in.options = {"--gpu-architecture=sm_80-std=c++17"};
  });

  std::set<std::string> keys = {k};
  for (auto &[what, in] : changed) {
    std::string k2 = cacheKey(in);
    EXPECT_NE(k2, k) << what;
    keys.insert(k2);
  }
  EXPECT_EQ(keys.size(), changed.size() + 1) << "two edits gave one key";
}

TEST(CacheKey, InvalidKeyIsRejected) {
  CacheOptions o;
  o.dir = "/dev/null/none"; // memory-only: the check happens before any I/O
  o.log = false;
  DiskCache c(o);
  EXPECT_THROW(c.load(kT, "../../etc/passwd"), Error);
  EXPECT_THROW(c.store(kT, "ABC", "n", "b"), Error);
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

TEST(CacheOptions, FromEnvAndRootPrecedence) {
  struct Env {
    std::string name;
    std::optional<std::string> old;
    Env(const char *n, const char *v) : name(n) {
      if (const char *o = std::getenv(n))
        old = o;
      v ? ::setenv(n, v, 1) : ::unsetenv(n);
    }
    ~Env() {
      old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str());
    }
  };
  Env ro("KGEN_CACHE_READONLY", "/a::/b/");
  Env max("KGEN_CACHE_MAX_BYTES", "2G");
  Env log("KGEN_LOG", "0");
  CacheOptions o = CacheOptions::fromEnv();
  EXPECT_EQ(o.readOnlyDirs, (std::vector<std::string>{"/a", "/b/"}));
  EXPECT_EQ(o.maxBytes, 2ull << 30);
  EXPECT_FALSE(o.log);

  Env dir("KGEN_CACHE_DIR", "/x/kc");
  Env xdg("XDG_CACHE_HOME", "/x/xdg");
  Env home("HOME", "/x/home");
  EXPECT_EQ(o.resolvedDir(), "/x/kc");
  o.dir = "/x/explicit/";
  EXPECT_EQ(o.resolvedDir(), "/x/explicit");
  o.dir.clear();
  {
    Env unset("KGEN_CACHE_DIR", nullptr);
    EXPECT_EQ(o.resolvedDir(), "/x/xdg/kgen");
    Env unsetXdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(o.resolvedDir(), "/x/home/.cache/kgen");
  }
  Env bytes("KGEN_CACHE_MAX_BYTES", "12345");
  EXPECT_EQ(CacheOptions::fromEnv().maxBytes, 12345u);
}

//===----------------------------------------------------------------------===//
// Hits, misses, layout
//===----------------------------------------------------------------------===//

TEST_F(CacheTest, MissThenHitFromMemoryThenFromDisk) {
  std::string key = keyOf("a");
  int compiles = 0;
  auto compile = [&] {
    ++compiles;
    return std::string("cubin-bytes\0with-nul", 20);
  };
  {
    DiskCache c(opts());
    ASSERT_FALSE(c.memoryOnly()) << c.whyMemoryOnly();
    EXPECT_FALSE(c.load(kT, key));
    DiskCache::Result r = c.getOrCompile(kT, key, "kgen_k", compile);
    EXPECT_FALSE(r.hit);
    EXPECT_EQ(r.binary, std::string("cubin-bytes\0with-nul", 20));
    DiskCache::Result r2 = c.getOrCompile(kT, key, "kgen_k", compile);
    EXPECT_TRUE(r2.hit);
    EXPECT_EQ(r2.binary, r.binary);
  }
  DiskCache fresh(opts());
  DiskCache::Result r3 = fresh.getOrCompile(kT, key, "kgen_k", compile);
  EXPECT_TRUE(r3.hit);
  EXPECT_EQ(r3.binary, std::string("cubin-bytes\0with-nul", 20));
  EXPECT_EQ(compiles, 1);

  // The same key for another target is another entry.
  EXPECT_FALSE(fresh.load(Target::SM90A, key));
}

TEST_F(CacheTest, LayoutAndPermissions) {
  std::string key = keyOf("layout");
  DiskCache c(opts());
  c.store(kT, key, "kgen_layout", "payload");
  std::string path = entryPath("c", kT, key);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_mode & 0077, 0u) << "entries are private";
  for (std::string d : {dir_ + "/c", dir_ + "/c/v1", dir_ + "/c/v1/sm_80",
                        dir_ + "/c/v1/sm_80/" + key.substr(0, 2)}) {
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  std::string bytes = readFile(path);
  EXPECT_EQ(bytes.substr(0, 7), "KGENBIN");
  EXPECT_NE(bytes.find("kgen_layout"), std::string::npos);
  EXPECT_EQ(bytes.substr(bytes.size() - 7), "payload");

  std::vector<CacheEntry> l = c.list();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].target, "sm_80");
  EXPECT_EQ(l[0].key, key);
  EXPECT_EQ(l[0].name, "kgen_layout");
  EXPECT_EQ(l[0].path, path);
  EXPECT_EQ(l[0].bytes, bytes.size());
  EXPECT_FALSE(l[0].readOnly);
  EXPECT_FALSE(l[0].problem);
  EXPECT_GT(l[0].lastUse, 0);
  EXPECT_EQ(c.totalBytes(), bytes.size());
}

TEST_F(CacheTest, CompileErrorStoresNothingAndReleasesTheLock) {
  std::string key = keyOf("err");
  DiskCache c(opts());
  EXPECT_THROW(c.getOrCompile(kT, key, "k",
                              []() -> std::string { throw Error("boom"); }),
               Error);
  EXPECT_TRUE(c.list().empty());
  // A second attempt must not wait on a lock left behind.
  DiskCache::Result r = c.getOrCompile(kT, key, "k", [] { return "ok"; });
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(r.binary, "ok");
}

//===----------------------------------------------------------------------===//
// Atomic publish and races
//===----------------------------------------------------------------------===//

TEST_F(CacheTest, PublishLeavesNoTempFilesAndTheFirstWriterWins) {
  std::string key = keyOf("race");
  DiskCache first(opts()), second(opts());
  first.store(kT, key, "k", "winner");
  second.store(kT, key, "k", "loser");
  DiskCache reader(opts());
  EXPECT_EQ(reader.load(kT, key).value_or(""), "winner");
  std::string dir = fs::path(entryPath("c", kT, key)).parent_path();
  for (auto &e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos)
        << e.path();
}

TEST_F(CacheTest, HalfWrittenTempFileIsNeverLoaded) {
  // What a writer that died mid-write leaves: a temp file, never the entry.
  std::string key = keyOf("tmp");
  DiskCache c(opts());
  std::string path = entryPath("c", kT, key);
  fs::create_directories(fs::path(path).parent_path());
  writeFile(path + ".tmp.Ab12Cd", std::string("KGENBIN\0 half", 13));
  EXPECT_FALSE(c.load(kT, key));
  EXPECT_TRUE(c.list().empty());
  EXPECT_EQ(c.totalBytes(), 0u);
}

TEST_F(CacheTest, ProcessesRacingOnOneKeyCompileOnce) {
  std::string key = keyOf("procs");
  std::string counter = dir_ + "/compiles";
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  constexpr int kProcs = 6;
  std::vector<pid_t> kids;
  for (int i = 0; i < kProcs; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      (void)!::read(gate[0], &c, 1); // wait until every child exists
      bool ok = false;
      try {
        DiskCache cache(opts());
        DiskCache::Result r = cache.getOrCompile(kT, key, "k", [&] {
          int fd = ::open(counter.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
          (void)!::write(fd, "x", 1);
          ::close(fd);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          return std::string("the binary");
        });
        ok = r.binary == "the binary";
      } catch (...) {
      }
      ::_exit(ok ? 0 : 1);
    }
    kids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]); // EOF releases them all at once
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(readFile(counter), "x") << "expected exactly one compile";
  DiskCache c(opts());
  EXPECT_EQ(c.load(kT, key).value_or(""), "the binary");
}

TEST_F(CacheTest, ThreadsRacingOnOneKeyCompileOnce) {
  for (bool memoryOnly : {false, true}) {
    CacheOptions o = opts(memoryOnly ? "mem" : "threads");
    if (memoryOnly) {
      writeFile(dir_ + "/file", "");
      o.dir = dir_ + "/file/cache";
    }
    DiskCache c(o);
    ASSERT_EQ(c.memoryOnly(), memoryOnly);
    std::atomic<int> compiles{0};
    std::vector<std::thread> threads;
    std::atomic<int> bad{0};
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&] {
        auto r = c.getOrCompile(kT, keyOf("threads"), "k", [&] {
          ++compiles;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          return std::string("bin");
        });
        bad += r.binary != "bin";
      });
    for (auto &t : threads)
      t.join();
    EXPECT_EQ(compiles.load(), 1) << (memoryOnly ? "memory-only" : "disk");
    EXPECT_EQ(bad.load(), 0);
  }
}

//===----------------------------------------------------------------------===//
// Bad entries
//===----------------------------------------------------------------------===//

TEST_F(CacheTest, TruncatedEntryIsAMissAndIsRebuilt) {
  std::string key = keyOf("trunc");
  std::string path = entryPath("c", kT, key);
  DiskCache(opts()).store(kT, key, "k", std::string(1000, 'p'));
  ASSERT_EQ(::truncate(path.c_str(), 500), 0);

  DiskCache c(opts("c", /*log=*/true));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(c.load(kT, key));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("bad entry"), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(path)) << "a bad entry is deleted";

  int compiles = 0;
  testing::internal::CaptureStderr();
  auto r = c.getOrCompile(kT, key, "k", [&] {
    ++compiles;
    return std::string(1000, 'p');
  });
  testing::internal::GetCapturedStderr();
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(compiles, 1);
  DiskCache again(opts());
  EXPECT_EQ(again.load(kT, key).value_or(""), std::string(1000, 'p'));
}

TEST_F(CacheTest, CorruptedEntryIsAMissLoggedOnceAndRebuilt) {
  std::string key = keyOf("flip");
  std::string path = entryPath("c", kT, key);
  DiskCache(opts()).store(kT, key, "k", std::string(1000, 'p'));
  auto flip = [&] {
    std::string bytes = readFile(path);
    bytes[bytes.size() - 10] ^= 0x04; // one bit of the payload
    writeFile(path, bytes);
  };
  flip();

  DiskCache c(opts("c", /*log=*/true));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(c.load(kT, key));
  // The same bad file again (a second corruption of this key) is not
  // reported twice by this process.
  DiskCache(opts()).store(kT, key, "k", std::string(1000, 'p'));
  flip();
  EXPECT_FALSE(c.load(kT, key));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
  EXPECT_EQ(err.find("bad entry"), err.rfind("bad entry")) << err;

  int compiles = 0;
  auto r = DiskCache(opts()).getOrCompile(kT, key, "k", [&] {
    ++compiles;
    return std::string(1000, 'p');
  });
  EXPECT_FALSE(r.hit);
  EXPECT_EQ(compiles, 1);
  EXPECT_TRUE(DiskCache(opts()).load(kT, key));
}

TEST_F(CacheTest, VerifyFlagsBadEntries) {
  DiskCache c(opts());
  c.store(kT, keyOf("good"), "good", std::string(300, 'g'));
  c.store(Target::SM90A, keyOf("bad"), "bad", std::string(300, 'b'));
  std::string path = entryPath("c", Target::SM90A, keyOf("bad"));
  std::string bytes = readFile(path);
  bytes.back() ^= 1;
  writeFile(path, bytes);

  std::vector<CacheEntry> v = c.verify();
  ASSERT_EQ(v.size(), 2u);
  int bad = 0;
  for (const CacheEntry &e : v) {
    if (e.key == keyOf("bad")) {
      ASSERT_TRUE(e.problem);
      EXPECT_NE(e.problem->find("checksum"), std::string::npos) << *e.problem;
      EXPECT_EQ(e.target, "sm_90a");
      ++bad;
    } else {
      EXPECT_FALSE(e.problem) << *e.problem;
    }
  }
  EXPECT_EQ(bad, 1);
  // list() reads headers only: the payload corruption is not its business.
  EXPECT_EQ(c.list().size(), 2u);
}

//===----------------------------------------------------------------------===//
// Unwritable and foreign directories
//===----------------------------------------------------------------------===//

TEST_F(CacheTest, UnwritableRootFallsBackToMemory) {
  std::vector<std::string> roots;
  // A path under a regular file can never be created, even by root.
  writeFile(dir_ + "/plainfile", "");
  roots.push_back(dir_ + "/plainfile/cache");
  if (::geteuid() != 0) {
    // chmod stops writes only for a user that is not root.
    fs::create_directories(dir_ + "/ro");
    ::chmod((dir_ + "/ro").c_str(), 0500);
    roots.push_back(dir_ + "/ro/cache");
  }
  for (const std::string &root : roots) {
    CacheOptions o;
    o.dir = root;
    o.log = false;
    DiskCache c(o);
    EXPECT_TRUE(c.memoryOnly()) << root;
    EXPECT_EQ(c.root(), "");
    EXPECT_NE(c.whyMemoryOnly().find("cannot"), std::string::npos)
        << c.whyMemoryOnly();
    int compiles = 0;
    auto compile = [&] {
      ++compiles;
      return std::string("bin");
    };
    EXPECT_FALSE(c.getOrCompile(kT, keyOf("m"), "k", compile).hit);
    EXPECT_TRUE(c.getOrCompile(kT, keyOf("m"), "k", compile).hit);
    EXPECT_EQ(compiles, 1);
    EXPECT_TRUE(c.list().empty());
    EXPECT_EQ(c.totalBytes(), 0u);
    c.evictToCap();
    c.clear();
  }
}

TEST_F(CacheTest, ForeignEntryIsRefusedAndReplaced) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to chown an entry to another user";
  std::string key = keyOf("foreign");
  std::string path = entryPath("c", kT, key);
  DiskCache(opts()).store(kT, key, "k", "planted");
  ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);

  DiskCache c(opts("c", /*log=*/true));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(c.load(kT, key));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("refusing"), std::string::npos) << err;
  EXPECT_NE(err.find("uid 12345"), std::string::npos) << err;

  int compiles = 0;
  testing::internal::CaptureStderr();
  auto r = c.getOrCompile(kT, key, "k", [&] {
    ++compiles;
    return std::string("ours");
  });
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.binary, "ours");
  EXPECT_EQ(compiles, 1);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid()) << "the rebuilt entry replaces it";
  EXPECT_EQ(DiskCache(opts()).load(kT, key).value_or(""), "ours");
}

TEST_F(CacheTest, ForeignRootIsRefused) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to chown a directory to another user";
  fs::create_directories(dir_ + "/theirs");
  ASSERT_EQ(::chown((dir_ + "/theirs").c_str(), 12345, 12345), 0);
  DiskCache c(opts("theirs"));
  EXPECT_TRUE(c.memoryOnly());
  EXPECT_NE(c.whyMemoryOnly().find("owned by uid 12345"), std::string::npos)
      << c.whyMemoryOnly();
}

//===----------------------------------------------------------------------===//
// Size cap, read-only dirs, clear
//===----------------------------------------------------------------------===//

TEST_F(CacheTest, LruEvictionUnderASmallCap) {
  std::vector<std::string> keys;
  {
    DiskCache c(opts());
    for (const char *k : {"A", "B", "C", "D"}) {
      keys.push_back(keyOf(k));
      c.store(kT, keys.back(), k, std::string(1000, k[0]));
    }
  }
  // Last use A < B < C < D, all in the past.
  time_t t0 = ::time(nullptr) - 1000;
  for (int i = 0; i < 4; ++i) {
    struct timespec ts[2] = {{t0 + i, 0}, {t0 + i, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, entryPath("c", kT, keys[i]).c_str(), ts, 0),
              0);
  }
  // A load is a use: A becomes the most recent.
  ASSERT_TRUE(DiskCache(opts()).load(kT, keys[0]));

  uint64_t entryBytes = DiskCache(opts()).totalBytes() / 4;
  CacheOptions o = opts();
  o.maxBytes = 2 * entryBytes + entryBytes / 2;
  DiskCache c(o);
  c.evictToCap();
  auto present = [&] {
    std::set<std::string> names;
    for (const CacheEntry &e : c.list())
      names.insert(e.name);
    return names;
  };
  EXPECT_EQ(present(), (std::set<std::string>{"A", "D"}));
  EXPECT_LE(c.totalBytes(), o.maxBytes);

  // A store over the cap evicts on its own: D is now the oldest.
  c.store(kT, keyOf("E"), "E", std::string(1000, 'E'));
  EXPECT_EQ(present(), (std::set<std::string>{"A", "E"}));
}

TEST_F(CacheTest, ReadOnlyDirServesEntries) {
  std::string key = keyOf("bundle");
  DiskCache(opts("bundle")).store(kT, key, "shipped", "bundled binary");

  CacheOptions o = opts("user");
  o.readOnlyDirs = {dir_ + "/missing", dir_ + "/bundle"};
  DiskCache c(o);
  int compiles = 0;
  auto r = c.getOrCompile(kT, key, "shipped", [&] {
    ++compiles;
    return std::string("rebuilt");
  });
  EXPECT_TRUE(r.hit);
  EXPECT_EQ(r.binary, "bundled binary");
  EXPECT_EQ(compiles, 0);

  std::vector<CacheEntry> l = c.list();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(l[0].readOnly);
  EXPECT_EQ(l[0].name, "shipped");
  EXPECT_EQ(c.totalBytes(), 0u) << "read-only entries are not ours to count";

  c.clear();
  EXPECT_TRUE(fs::exists(entryPath("bundle", kT, key)));

  // A bad read-only entry is skipped, never deleted.
  std::string path = entryPath("bundle", kT, key);
  std::string bytes = readFile(path);
  bytes.back() ^= 1;
  writeFile(path, bytes);
  EXPECT_FALSE(DiskCache(o).load(kT, key));
  EXPECT_TRUE(fs::exists(path));

  // Memory-only caches still read bundles.
  DiskCache(opts("bundle")).store(kT, keyOf("b2"), "b2", "second");
  writeFile(dir_ + "/plain", "");
  CacheOptions m;
  m.dir = dir_ + "/plain/x";
  m.log = false;
  m.readOnlyDirs = {dir_ + "/bundle"};
  DiskCache mem(m);
  ASSERT_TRUE(mem.memoryOnly());
  EXPECT_EQ(mem.load(kT, keyOf("b2")).value_or(""), "second");
}

TEST_F(CacheTest, ClearRemovesEntriesLocksAndMemory) {
  DiskCache c(opts());
  for (const char *k : {"x", "y", "z"})
    c.getOrCompile(kT, keyOf(k), k, [] { return std::string("bin"); });
  ASSERT_EQ(c.list().size(), 3u);
  c.clear();
  EXPECT_TRUE(c.list().empty());
  EXPECT_EQ(c.totalBytes(), 0u);
  EXPECT_FALSE(c.load(kT, keyOf("x"))) << "memory layer cleared too";
  size_t files = 0;
  for (auto &e : fs::recursive_directory_iterator(dir_ + "/c"))
    files += e.is_regular_file();
  EXPECT_EQ(files, 0u) << "no entries, locks or temp files remain";
}
