//===- Cache.cpp - The on-disk kernel cache -------------------------------===//
//
// Entry file format (little-endian):
//   "KGENBIN\0"  8 bytes magic
//   u32          format version (kFormatVersion)
//   u32          kernel name length
//   u64          payload size
//   u8[32]       SHA-256 of the payload
//   name bytes, then payload bytes
//
// Writers never expose a partial entry: they write a temp file in the
// entry's directory, fsync it and hard-link (or rename) it into place. A
// reader that finds a short or corrupted file treats it as a miss, reports
// it once, deletes it and compiles again. One compile per key across
// processes comes from flock() on "<key>.lock" next to the entry.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Cache.h"
#include "Posix.h"
#include "kgen/Error.h"
#include "kgen/Runtime/Sha256.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kgen;
using namespace kgen::posix;

namespace {

constexpr char kMagic[8] = {'K', 'G', 'E', 'N', 'B', 'I', 'N', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 32;
constexpr uint32_t kMaxNameBytes = 4096;
/// Larger files are not kernels; refusing them bounds what a load reads.
constexpr uint64_t kMaxPayloadBytes = 1ull << 30;
/// Temp files older than this belong to a writer that died.
constexpr int64_t kStaleTempSeconds = 3600;

std::atomic<uint64_t> gCompiledKernels{0};

void logLine(const std::string &msg) {
  // One write per line so lines of concurrent processes do not interleave.
  std::string line = "kgen: cache: " + msg + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void checkKey(const std::string &key) {
  // Keys become path components: anything else could name a file outside
  // the cache.
  if (!isSha256Hex(key))
    throw Error("kgen cache: invalid key '" + key +
                "': expected 64 lowercase hex digits (use kgen::cacheKey)");
}

void putU32(std::string &s, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    s += char(v >> (8 * i));
}
void putU64(std::string &s, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s += char(v >> (8 * i));
}
uint64_t getLE(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

int64_t nanos(const struct timespec &t) {
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// mkdir -p with mode 0700 for every directory it creates (XDG asks for
/// private cache directories; kernels and their names are the user's).
bool makeDirs(const std::string &path, std::string *err) {
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty())
      continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create " + prefix + ": " + errnoText();
      return false;
    }
  }
  return true;
}

/// A directory of the writable cache must be a real directory owned by us:
/// another user's directory could hold entries we would run.
bool checkOwnedDir(const std::string &path, bool followLink, std::string *err) {
  struct stat st;
  int rc = followLink ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (rc != 0) {
    *err = "cannot stat " + path + ": " + errnoText();
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *err = path + " is not a directory";
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    *err = path + " is owned by uid " + std::to_string(st.st_uid) +
           ", not by the current user (uid " + std::to_string(::geteuid()) +
           ")";
    return false;
  }
  return true;
}

/// Creates (0700) and checks "<root>/v1/<target>/<ab>".
bool ensureEntryDir(const std::string &root, Target t, const std::string &key,
                    std::string *dir, std::string *err) {
  std::string targetDir = root + "/v1/" + std::string(toString(t));
  *dir = targetDir + "/" + key.substr(0, 2);
  for (const std::string &d : {targetDir, *dir}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create " + d + ": " + errnoText();
      return false;
    }
    if (!checkOwnedDir(d, /*followLink=*/false, err))
      return false;
  }
  return true;
}

std::string entryDir(const std::string &root, Target t,
                     const std::string &key) {
  return root + "/v1/" + std::string(toString(t)) + "/" + key.substr(0, 2);
}

std::string encodeEntry(const std::string &name, const std::string &payload) {
  std::string s(kMagic, sizeof(kMagic));
  putU32(s, kFormatVersion);
  putU32(s, uint32_t(std::min<size_t>(name.size(), kMaxNameBytes)));
  putU64(s, payload.size());
  Sha256 h;
  h.update(payload);
  auto d = h.digest();
  s.append(reinterpret_cast<const char *>(d.data()), d.size());
  s.append(name, 0, kMaxNameBytes);
  s += payload;
  return s;
}

enum class EntryState { Missing, Ok, Bad, Refused };

/// What reading one entry file found.
struct Inspected {
  EntryState state = EntryState::Missing;
  CacheEntry entry;
  std::string payload; ///< when read with `full`
  int64_t lastUseNs = 0;
  dev_t dev = 0; ///< identity of the file read, so that a bad entry is only
  ino_t ino = 0; ///< deleted when no writer has replaced it meanwhile
};

/// Reads the entry at `path`. Only the header unless `full`; with `full` the
/// payload is checked against its SHA-256. Refused: a file that is not ours
/// (writable cache) or not ours/root's or writable by others (read-only
/// dirs, which may be installed by root for all users).
Inspected inspect(const std::string &path, bool readOnly, bool full,
                  bool touch) {
  Inspected r;
  r.entry.path = path;
  r.entry.readOnly = readOnly;
  auto bad = [&](EntryState s, std::string why) {
    r.state = s;
    r.entry.problem = std::move(why);
    return r;
  };
  // O_NOFOLLOW: a symlink planted in the cache must not redirect the load;
  // O_NONBLOCK: a FIFO must not hang it; O_NOATIME: only a use (touch) moves
  // the LRU clock, not `kgen cache list` (it needs the file to be ours, so
  // retry without it).
  int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  Fd fd(::open(path.c_str(), flags | O_NOATIME));
  if (fd.fd < 0 && errno == EPERM)
    fd.fd = ::open(path.c_str(), flags);
  if (fd.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return r;
    if (errno == ELOOP)
      return bad(EntryState::Refused, "is a symbolic link");
    return bad(EntryState::Bad, "cannot open: " + errnoText());
  }
  struct stat st;
  if (::fstat(fd.fd, &st) != 0)
    return bad(EntryState::Bad, "cannot stat: " + errnoText());
  r.entry.bytes = uint64_t(st.st_size);
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  r.lastUseNs = std::max(nanos(st.st_atim), nanos(st.st_mtim));
  r.entry.lastUse = r.lastUseNs / 1000000000;
  if (!S_ISREG(st.st_mode))
    return bad(EntryState::Refused, "is not a regular file");
  uid_t me = ::geteuid();
  if (readOnly ? !(st.st_uid == me || (st.st_uid == 0 && !(st.st_mode & 022)))
               : st.st_uid != me)
    return bad(EntryState::Refused,
               "is owned by uid " + std::to_string(st.st_uid) +
                   ", not by the current user (uid " + std::to_string(me) +
                   ")" + (readOnly ? " or a root-owned read-only file" : ""));

  char header[kHeaderBytes];
  if (uint64_t(st.st_size) < kHeaderBytes ||
      !readAll(fd.fd, header, kHeaderBytes))
    return bad(EntryState::Bad, "truncated: " + std::to_string(st.st_size) +
                                    " bytes, shorter than the entry header");
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0)
    return bad(EntryState::Bad, "not a kgen cache entry (bad magic)");
  uint32_t version = uint32_t(getLE(header + 8, 4));
  if (version != kFormatVersion)
    return bad(EntryState::Bad, "entry format " + std::to_string(version) +
                                    ", this kgen reads format " +
                                    std::to_string(kFormatVersion));
  uint64_t nameLen = getLE(header + 12, 4);
  uint64_t payloadLen = getLE(header + 16, 8);
  if (nameLen > kMaxNameBytes || payloadLen > kMaxPayloadBytes)
    return bad(EntryState::Bad, "corrupted header (name or payload size)");
  uint64_t expect = kHeaderBytes + nameLen + payloadLen;
  if (uint64_t(st.st_size) != expect)
    return bad(EntryState::Bad,
               "truncated or padded: " + std::to_string(st.st_size) +
                   " bytes, the header says " + std::to_string(expect));
  r.entry.name.resize(nameLen);
  if (!readAll(fd.fd, r.entry.name.data(), nameLen))
    return bad(EntryState::Bad, "short read");
  if (full) {
    r.payload.resize(payloadLen);
    if (!readAll(fd.fd, r.payload.data(), payloadLen))
      return bad(EntryState::Bad, "short read");
    Sha256 h;
    h.update(r.payload);
    auto d = h.digest();
    if (std::memcmp(d.data(), header + 24, 32) != 0)
      return bad(EntryState::Bad, "checksum mismatch (corrupted payload)");
  }
  if (touch && !readOnly) {
    // The last use is the atime, set explicitly: mounts with noatime or
    // relatime would not record it.
    struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    ::futimens(fd.fd, times);
    r.lastUseNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  }
  r.state = EntryState::Ok;
  return r;
}

/// Calls `fn(targetName, dirPath, fileName)` for every file under
/// <root>/v1/<target>/<ab>/.
template <typename Fn> void walk(const std::string &root, Fn fn) {
  std::string v1 = root + "/v1";
  auto each = [](const std::string &dir, auto &&body) {
    DIR *d = ::opendir(dir.c_str());
    if (!d)
      return;
    while (struct dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..")
        body(n);
    }
    ::closedir(d);
  };
  each(v1, [&](const std::string &target) {
    if (!parseTarget(target))
      return;
    std::string td = v1 + "/" + target;
    each(td, [&](const std::string &ab) {
      std::string ad = td + "/" + ab;
      each(ad, [&](const std::string &file) { fn(target, ad, file); });
    });
  });
}

bool isTempName(const std::string &n) {
  return n.size() > 64 && isSha256Hex(n.substr(0, 64)) &&
         n.compare(64, 5, ".tmp.") == 0;
}
bool isLockName(const std::string &n) {
  return n.size() == 69 && isSha256Hex(n.substr(0, 64)) &&
         n.compare(64, 5, ".lock") == 0;
}

/// An exclusive flock on "<dir>/<key>.lock", released on destruction.
class KeyLock {
public:
  KeyLock(const std::string &dir, const std::string &key, std::string *err) {
    std::string path = dir + "/" + key + ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      *err = "cannot open " + path + ": " + errnoText();
      return;
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR)
        continue;
      *err = "cannot lock " + path + ": " + errnoText();
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  ~KeyLock() {
    if (fd_ >= 0)
      ::close(fd_); // closing the last descriptor releases the flock
  }
  bool held() const { return fd_ >= 0; }

private:
  int fd_ = -1;
};

uint64_t parseBytes(const char *s, uint64_t fallback) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || end == s) {
    logLine(std::string("ignoring KGEN_CACHE_MAX_BYTES='") + s +
            "': expected a byte count such as 4294967296 or 4G");
    return fallback;
  }
  std::string unit(end);
  uint64_t scale = unit.empty() || unit == "B"    ? 1
                   : unit == "K" || unit == "KiB" ? 1ull << 10
                   : unit == "M" || unit == "MiB" ? 1ull << 20
                   : unit == "G" || unit == "GiB" ? 1ull << 30
                   : unit == "T" || unit == "TiB" ? 1ull << 40
                                                  : 0;
  if (!scale) {
    logLine(std::string("ignoring KGEN_CACHE_MAX_BYTES='") + s +
            "': unknown unit (use K, M, G or T)");
    return fallback;
  }
  return uint64_t(v) * scale;
}

} // namespace

//===----------------------------------------------------------------------===//
// Keys and options
//===----------------------------------------------------------------------===//

std::string kgen::cacheKey(const CacheKeyInput &in) {
  // Every field is length-prefixed (and lists count-prefixed) so that moving
  // bytes from one field to the next always changes the key.
  Sha256 h;
  auto field = [&](std::string_view s) {
    std::string len;
    putU64(len, s.size());
    h.update(len);
    h.update(s);
  };
  auto count = [&](size_t n) {
    std::string c;
    putU64(c, n);
    h.update(c);
  };
  field("kgen-cache-key-v1");
  field(in.source);
  count(in.headerTexts.size());
  for (const std::string &t : in.headerTexts)
    field(t);
  field(in.compiler);
  field(in.compilerVersion);
  count(in.options.size());
  for (const std::string &o : in.options)
    field(o);
  field(toString(in.target));
  field(in.kgenVersion);
  return h.hexDigest();
}

std::vector<std::string> kgen::splitDirList(const std::string &s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos)
      end = s.size();
    if (end > start)
      out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

CacheOptions CacheOptions::fromEnv() {
  CacheOptions o;
  if (const char *ro = envOrNull("KGEN_CACHE_READONLY"))
    o.readOnlyDirs = splitDirList(ro);
  if (const char *max = envOrNull("KGEN_CACHE_MAX_BYTES"))
    o.maxBytes = parseBytes(max, o.maxBytes);
  if (const char *log = envOrNull("KGEN_LOG")) {
    std::string v = log;
    o.log =
        !(v == "0" || v == "off" || v == "false" || v == "no" || v == "none");
  }
  return o;
}

std::string CacheOptions::resolvedDir() const {
  std::string d;
  if (!dir.empty())
    d = dir;
  else if (const char *env = envOrNull("KGEN_CACHE_DIR"))
    d = env;
  else if (const char *xdg = envOrNull("XDG_CACHE_HOME"))
    d = std::string(xdg) + "/kgen";
  else if (const char *home = envOrNull("HOME"))
    d = std::string(home) + "/.cache/kgen";
  else
    return "";
  // Absolute, so a later chdir does not move the cache.
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(d, ec);
  std::string s = ec ? d : p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

//===----------------------------------------------------------------------===//
// DiskCache
//===----------------------------------------------------------------------===//

DiskCache::DiskCache(CacheOptions opts) : opts_(std::move(opts)) {
  std::string root = opts_.resolvedDir();
  std::string err;
  if (root.empty()) {
    err = "no cache directory (set KGEN_CACHE_DIR, XDG_CACHE_HOME or HOME)";
  } else if (makeDirs(root + "/v1", &err) &&
             checkOwnedDir(root, /*followLink=*/true, &err) &&
             checkOwnedDir(root + "/v1", /*followLink=*/false, &err)) {
    // Permission bits do not tell (root ignores them, read-only mounts do
    // not show in them): try to create a file.
    std::string probe = root + "/v1/.probe.XXXXXX";
    int fd = ::mkstemp(probe.data());
    if (fd < 0) {
      err = "cannot write in " + root + "/v1: " + errnoText();
    } else {
      ::close(fd);
      ::unlink(probe.c_str());
      root_ = root;
    }
  }
  if (root_.empty()) {
    memoryOnly_ = true;
    whyMemoryOnly_ = err;
    if (opts_.log)
      logLine(err + "; kernels are cached in memory only (set KGEN_CACHE_DIR "
                    "to a writable directory)");
  }
}

void DiskCache::warnOnce(const std::string &what,
                         const std::string &message) const {
  if (!opts_.log)
    return;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!logged_.insert(what).second)
      return;
  }
  logLine(message);
}

std::optional<std::string> DiskCache::loadFromDisk(Target t,
                                                   const std::string &key) {
  auto tryDir = [&](const std::string &root,
                    bool readOnly) -> std::optional<std::string> {
    std::string path = entryDir(root, t, key) + "/" + key;
    Inspected r = inspect(path, readOnly, /*full=*/true, /*touch=*/true);
    switch (r.state) {
    case EntryState::Missing:
      return std::nullopt;
    case EntryState::Ok:
      return std::move(r.payload);
    case EntryState::Refused:
      warnOnce(path, "refusing " + path + ": " + *r.entry.problem +
                         "; treating it as a miss");
      return std::nullopt;
    case EntryState::Bad:
      warnOnce(path, "bad entry " + path + ": " + *r.entry.problem +
                         (readOnly ? "; skipping it"
                                   : "; deleting it and compiling again"));
      if (!readOnly) {
        struct stat st;
        if (::lstat(path.c_str(), &st) == 0 && st.st_dev == r.dev &&
            st.st_ino == r.ino)
          ::unlink(path.c_str());
      }
      return std::nullopt;
    }
    return std::nullopt;
  };
  if (!memoryOnly_)
    if (auto b = tryDir(root_, false))
      return b;
  for (const std::string &ro : opts_.readOnlyDirs)
    if (auto b = tryDir(ro, true))
      return b;
  return std::nullopt;
}

std::optional<std::string> DiskCache::load(Target t, const std::string &key) {
  checkKey(key);
  std::string mk = std::string(toString(t)) + "/" + key;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = memory_.find(mk);
    if (it != memory_.end())
      return it->second;
  }
  auto b = loadFromDisk(t, key);
  if (b) {
    std::lock_guard<std::mutex> g(mu_);
    memory_.emplace(mk, *b);
  }
  return b;
}

void DiskCache::publish(Target t, const std::string &key,
                        const std::string &name, const std::string &binary) {
  std::string dir, err;
  if (!ensureEntryDir(root_, t, key, &dir, &err)) {
    warnOnce("store:" + dir, "cannot store entries: " + err);
    return;
  }
  std::string final = dir + "/" + key;
  std::string tmp = final + ".tmp.XXXXXX";
  Fd fd(::mkstemp(tmp.data()));
  if (fd.fd < 0) {
    warnOnce("store:" + dir,
             "cannot create a temp file in " + dir + ": " + errnoText());
    return;
  }
  std::string bytes = encodeEntry(name, binary);
  if (!writeAll(fd.fd, bytes.data(), bytes.size()) || ::fsync(fd.fd) != 0) {
    warnOnce("store:" + dir, "cannot write " + tmp + ": " + errnoText());
    ::unlink(tmp.c_str());
    return;
  }
  ::close(fd.fd);
  fd.fd = -1;

  // link() publishes without replacing: when another writer got there first
  // its entry wins and ours is dropped. A bad or foreign entry in our place
  // is replaced; filesystems without hard links fall back to rename().
  if (::link(tmp.c_str(), final.c_str()) == 0) {
    ::unlink(tmp.c_str());
  } else if (errno == EEXIST && inspect(final, false, /*full=*/true,
                                        /*touch=*/false)
                                        .state == EntryState::Ok) {
    ::unlink(tmp.c_str());
  } else if (::rename(tmp.c_str(), final.c_str()) != 0) {
    warnOnce("store:" + dir, "cannot publish " + final + ": " + errnoText());
    ::unlink(tmp.c_str());
    return;
  }
  // The new name must survive a crash too, not only the file's data.
  syncDir(dir);
}

void DiskCache::store(Target t, const std::string &key, const std::string &name,
                      const std::string &binary) {
  checkKey(key);
  {
    std::lock_guard<std::mutex> g(mu_);
    memory_[std::string(toString(t)) + "/" + key] = binary;
  }
  if (memoryOnly_)
    return;
  publish(t, key, name, binary);
  if (totalBytes() > opts_.maxBytes)
    evictToCap();
}

DiskCache::Result
DiskCache::getOrCompile(Target t, const std::string &key,
                        const std::string &name,
                        const std::function<std::string()> &compile) {
  if (auto b = load(t, key))
    return {std::move(*b), true, 0};

  std::string mk = std::string(toString(t)) + "/" + key;
  std::shared_ptr<std::mutex> keyMu;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto &m = inFlight_[mk];
    if (!m)
      m = std::make_shared<std::mutex>();
    keyMu = m;
  }
  std::lock_guard<std::mutex> keyGuard(*keyMu);
  // Erasing the in-flight mutex is safe once the binary is in memory_: later
  // callers find it there before they need a mutex.
  struct Done {
    DiskCache *c;
    const std::string &mk;
    ~Done() {
      std::lock_guard<std::mutex> g(c->mu_);
      c->inFlight_.erase(mk);
    }
  } done{this, mk};
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = memory_.find(mk);
    if (it != memory_.end())
      return {it->second, true, 0};
  }

  std::optional<KeyLock> lock;
  if (!memoryOnly_) {
    std::string dir, err;
    if (ensureEntryDir(root_, t, key, &dir, &err))
      lock.emplace(dir, key, &err);
    if (!lock || !lock->held())
      warnOnce("lock:" + dir,
               "compiling without the cross-process lock: " + err);
    // Whoever held the lock before us may have published this key.
    if (auto b = loadFromDisk(t, key)) {
      std::lock_guard<std::mutex> g(mu_);
      memory_.emplace(mk, *b);
      return {std::move(*b), true, 0};
    }
  }

  auto start = std::chrono::steady_clock::now();
  std::string binary = compile();
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  gCompiledKernels.fetch_add(1, std::memory_order_relaxed);
  store(t, key, name, binary);
  if (opts_.log) {
    char msStr[32];
    std::snprintf(msStr, sizeof(msStr), "%.0f", ms);
    logLine("miss: compiled " + name + " for " + std::string(toString(t)) +
            " in " + msStr + " ms" + (memoryOnly_ ? " (memory only)" : ""));
  }
  return {std::move(binary), false, ms};
}

//===----------------------------------------------------------------------===//
// Maintenance: list, verify, size, clear, evict
//===----------------------------------------------------------------------===//

namespace {

std::vector<Inspected> inspectAll(const std::string &root, bool readOnly,
                                  bool full) {
  std::vector<Inspected> out;
  walk(root, [&](const std::string &target, const std::string &dir,
                 const std::string &file) {
    if (!isSha256Hex(file))
      return;
    Inspected r = inspect(dir + "/" + file, readOnly, full, /*touch=*/false);
    if (r.state == EntryState::Missing) // deleted while we walked
      return;
    r.entry.target = target;
    r.entry.key = file;
    if (!r.entry.problem && dir.substr(dir.size() - 2) != file.substr(0, 2))
      r.entry.problem = "in the wrong directory for its key";
    out.push_back(std::move(r));
  });
  return out;
}

} // namespace

/// Every entry of the writable root and the read-only dirs; `full` also
/// checks each payload's checksum.
std::vector<CacheEntry> DiskCache::entries(bool full) const {
  std::vector<CacheEntry> out;
  auto add = [&](const std::string &root, bool ro) {
    for (Inspected &r : inspectAll(root, ro, full))
      out.push_back(std::move(r.entry));
  };
  if (!memoryOnly_)
    add(root_, false);
  for (const std::string &ro : opts_.readOnlyDirs)
    add(ro, true);
  return out;
}

std::vector<CacheEntry> DiskCache::list() const { return entries(false); }

std::vector<CacheEntry> DiskCache::verify() const { return entries(true); }

uint64_t DiskCache::totalBytes() const {
  if (memoryOnly_)
    return 0;
  uint64_t total = 0;
  walk(root_, [&](const std::string &, const std::string &dir,
                  const std::string &file) {
    struct stat st;
    if (isSha256Hex(file) && ::lstat((dir + "/" + file).c_str(), &st) == 0)
      total += uint64_t(st.st_size);
  });
  return total;
}

void DiskCache::clear() {
  {
    std::lock_guard<std::mutex> g(mu_);
    memory_.clear();
  }
  if (memoryOnly_)
    return;
  std::set<std::string> dirs;
  walk(root_, [&](const std::string &, const std::string &dir,
                  const std::string &file) {
    // Only names the cache writes: a stray file of the user's is left alone.
    if (isSha256Hex(file) || isLockName(file) || isTempName(file))
      ::unlink((dir + "/" + file).c_str());
    dirs.insert(dir);
  });
  // Deepest first; rmdir fails harmlessly on directories still in use.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    ::rmdir(it->c_str());
    ::rmdir(it->substr(0, it->rfind('/')).c_str());
  }
}

void DiskCache::evictToCap() {
  if (memoryOnly_)
    return;
  std::vector<Inspected> all = inspectAll(root_, false, /*full=*/false);
  uint64_t total = 0;
  for (const Inspected &r : all)
    total += r.entry.bytes;

  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  walk(root_, [&](const std::string &, const std::string &dir,
                  const std::string &file) {
    struct stat st;
    std::string p = dir + "/" + file;
    if (isTempName(file) && ::lstat(p.c_str(), &st) == 0 &&
        now - st.st_mtim.tv_sec > kStaleTempSeconds)
      ::unlink(p.c_str());
  });
  if (total <= opts_.maxBytes)
    return;

  // Least recently used first; broken entries go before all of them.
  std::sort(all.begin(), all.end(), [](const Inspected &a, const Inspected &b) {
    bool aBad = a.state != EntryState::Ok, bBad = b.state != EntryState::Ok;
    if (aBad != bBad)
      return aBad;
    return a.lastUseNs < b.lastUseNs;
  });
  for (const Inspected &r : all) {
    if (total <= opts_.maxBytes)
      break;
    if (r.state == EntryState::Refused) // not ours to delete
      continue;
    if (::unlink(r.entry.path.c_str()) != 0)
      continue;
    total -= r.entry.bytes;
    // Drop the lock file too, unless a compile of this key holds it right
    // now (losing that race costs at most one duplicate compile).
    std::string lockPath = r.entry.path + ".lock";
    Fd l(::open(lockPath.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (l.fd >= 0 && ::flock(l.fd, LOCK_EX | LOCK_NB) == 0)
      ::unlink(lockPath.c_str());
  }
}

uint64_t kgen::compiledKernelCount() {
  return gCompiledKernels.load(std::memory_order_relaxed);
}
