//===- Cache.h - The on-disk kernel cache -----------------------*- C++ -*-===//
//
// Layout: <root>/v1/<target>/<key[0:2]>/<key>. Entries are published
// atomically (temp file in the same directory, fsync, rename), verified on
// load (size + SHA-256; a bad entry is a logged miss), compiled once per key
// across processes (a file lock), kept in 0700 directories, refused when not
// owned by the user, capped in size with LRU eviction. Extra read-only
// directories serve shipped bundles. When nothing is writable the cache is
// memory-only.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_CACHE_H
#define KGEN_RUNTIME_CACHE_H

#include "kgen/Problem.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kgen {

/// Everything the cache key covers. No absolute paths, no timestamps.
struct CacheKeyInput {
  std::string source;                   ///< generated source
  std::vector<std::string> headerTexts; ///< every template header included
  std::string compiler, compilerVersion;
  std::vector<std::string> options;
  Target target;
  std::string kgenVersion = std::string(kVersion);
};

std::string cacheKey(const CacheKeyInput &in); ///< 64 hex chars

/// The non-empty parts of a ':'-separated list of directories (as in
/// KGEN_CACHE_READONLY and KGEN_BUNDLE).
std::vector<std::string> splitDirList(const std::string &list);

struct CacheOptions {
  std::string dir; ///< empty: $KGEN_CACHE_DIR, XDG, ~/.cache/kgen
  std::vector<std::string>
      readOnlyDirs;               ///< $KGEN_CACHE_READONLY (':'-separated)
  uint64_t maxBytes = 4ull << 30; ///< $KGEN_CACHE_MAX_BYTES
  bool log = true; ///< log misses/bad entries to stderr ($KGEN_LOG)
  static CacheOptions fromEnv();
  /// The writable root these options name: `dir`, else $KGEN_CACHE_DIR, else
  /// $XDG_CACHE_HOME/kgen, else $HOME/.cache/kgen; "" when none is set. Not
  /// created. The compilers save failing sources under <root>/failed/.
  std::string resolvedDir() const;
};

struct CacheEntry {
  std::string target, key, path, name; ///< name: the kernel name stored with it
  uint64_t bytes = 0;
  int64_t lastUse = 0; ///< seconds since epoch (atime/mtime used for LRU)
  bool readOnly = false;
  std::optional<std::string> problem; ///< set by verify(): what is wrong
};

/// Kernels compiled by this process so far (every DiskCache's misses that
/// ran the compiler): what a benchmark run with a full cache and tuning DB
/// must leave at 0.
uint64_t compiledKernelCount();

class DiskCache {
public:
  explicit DiskCache(CacheOptions opts = CacheOptions::fromEnv());

  struct Result {
    std::string binary;
    bool hit = false;     ///< came from disk (or memory) without compiling
    double compileMs = 0; ///< time spent compiling on a miss
  };

  /// Load `key`, or compile it once across processes (file lock), publish it
  /// and return it. `name` is stored as metadata for `kgen cache list`.
  Result getOrCompile(Target t, const std::string &key, const std::string &name,
                      const std::function<std::string()> &compile);

  std::optional<std::string> load(Target t, const std::string &key);
  void store(Target t, const std::string &key, const std::string &name,
             const std::string &binary);

  bool memoryOnly() const { return memoryOnly_; }
  const std::string &root() const { return root_; } ///< writable root, or ""
  std::string whyMemoryOnly() const { return whyMemoryOnly_; }

  std::vector<CacheEntry> list() const;   ///< writable and read-only entries
  std::vector<CacheEntry> verify() const; ///< entries with problem set if bad
  uint64_t totalBytes() const;
  void clear();      ///< writable root only
  void evictToCap(); ///< LRU down to maxBytes

private:
  std::vector<CacheEntry> entries(bool full) const;
  CacheOptions opts_;
  std::string root_;
  bool memoryOnly_ = false;
  std::string whyMemoryOnly_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> memory_; ///< "<target>/<key>" -> binary
  /// One mutex per key being compiled, so threads of this process wait for
  /// one compile even when there is no lock file (memory-only).
  std::map<std::string, std::shared_ptr<std::mutex>> inFlight_;
  mutable std::set<std::string> logged_; ///< bad entries already reported

  std::optional<std::string> loadFromDisk(Target t, const std::string &key);
  void publish(Target t, const std::string &key, const std::string &name,
               const std::string &binary);
  void warnOnce(const std::string &what, const std::string &message) const;
};

} // namespace kgen

#endif
