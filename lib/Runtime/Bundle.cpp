//===- Bundle.cpp - Ahead-of-time kernel bundles --------------------------===//
//
// Reading never writes: a bad bundle is an error, not something to repair,
// since the process that reads it usually cannot rebuild it (no compiler).
// Writing builds the whole directory aside and publishes it with one rename
// (an exchange when an older bundle is in the way), so readers see the old
// bundle or the new one, never a mix.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Bundle.h"
#include "Posix.h"
#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Codegen/Templates.h"
#include "kgen/Mlstm.h"
#include "kgen/Runtime/Sha256.h"
#include "kgen/Runtime/TuningDB.h"
#include "kgen/kgen.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kgen;
using namespace kgen::posix;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// Larger files are not kernels; refusing them bounds what a load reads.
constexpr uint64_t kMaxBinaryBytes = 1ull << 30;
constexpr const char *kRebuildFix =
    "rebuild the bundle with this kgen (kgen bundle --out DIR ...)";

/// A file name the manifest may use: relative, made of plain components,
/// so no entry can name a file outside the bundle.
bool isSafeRelativePath(const std::string &p) {
  if (p.empty() || p.front() == '/' || p.back() == '/')
    return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos)
      end = p.size();
    std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return false;
    for (char c : part)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
            c == '-' || c == '.'))
        return false;
    start = end + 1;
  }
  return true;
}

std::string absoluteDir(const std::string &dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  std::string s = ec ? dir : p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

std::string nowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Reads a file of the bundle: a regular file (O_NOFOLLOW: not a link), not
/// writable by other users unless it is ours (they could swap the kernel),
/// at most `maxBytes`. Returns false with the reason in `why`; errno-like
/// absence is reported as "does not exist".
bool readBundleFile(const std::string &path, uint64_t maxBytes,
                    std::string *out, std::string *why, bool *missing) {
  *missing = false;
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0) {
    *missing = errno == ENOENT;
    *why = errno == ELOOP ? std::string("is a symbolic link (bundle files "
                                        "must be regular files)")
           : *missing     ? std::string("does not exist")
                          : "cannot be opened: " + errnoText();
    return false;
  }
  struct stat st;
  if (::fstat(fd.fd, &st) != 0) {
    *why = "cannot be read: " + errnoText();
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "is not a regular file";
    return false;
  }
  if ((st.st_mode & 022) && st.st_uid != ::geteuid()) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", unsigned(st.st_mode & 07777));
    *why = std::string("is writable by users other than its owner (mode ") +
           mode + ", owner uid " + std::to_string(st.st_uid) +
           "): another user could replace the kernel; run chmod go-w on it";
    return false;
  }
  if (uint64_t(st.st_size) > maxBytes) {
    *why = "has " + std::to_string(st.st_size) + " bytes, more than the " +
           std::to_string(maxBytes) + " expected";
    return false;
  }
  out->resize(size_t(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t r = ::read(fd.fd, out->data() + done, out->size() - done);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      *why = "short read: " + (r < 0 ? errnoText() : "file shrank");
      return false;
    }
    done += size_t(r);
  }
  return true;
}

/// Creates `path` exclusively, writes `data`, fsyncs; throws on failure.
void writeNewFile(const std::string &path, const std::string &data) {
  Fd fd(::open(path.c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.fd < 0)
    throw Error("kgen bundle: cannot create " + path + ": " + errnoText());
  if (!writeAll(fd.fd, data.data(), data.size()))
    throw Error("kgen bundle: cannot write " + path + ": " + errnoText());
  if (::fsync(fd.fd) != 0)
    throw Error("kgen bundle: cannot sync " + path + ": " + errnoText());
}

//===----------------------------------------------------------------------===//
// Manifest entries
//===----------------------------------------------------------------------===//

[[noreturn]] void fail(const std::string &where, const std::string &what) {
  throw Error(where + ": " + what);
}

const json &field(const json &j, const std::string &where, const char *key) {
  if (!j.contains(key))
    fail(where, std::string("missing field '") + key + "'");
  return j.at(key);
}

std::string str(const json &j, const std::string &where, const char *key,
                bool required = true) {
  if (!required && !j.contains(key))
    return "";
  const json &v = field(j, where, key);
  if (!v.is_string())
    fail(where, std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

BundleEntry entryFromJson(const json &j, const std::string &where) {
  if (!j.is_object())
    fail(where, "must be a JSON object, got " + j.dump());
  static const std::set<std::string> known = {
      "target",        "problem",   "config",      "kernel", "file",
      "bytes",         "sha256",    "compiler",    "name",   "compiler_version",
      "source_sha256", "cache_key", "config_from", "family"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      fail(where, "unknown field '" + it.key() + "'");
  BundleEntry e;
  std::string t = str(j, where, "target");
  if (auto pt = parseTarget(t))
    e.target = *pt;
  else
    fail(where, "unknown target '" + t + "'");
  e.family = str(j, where, "family", /*required=*/false);
  try {
    if (e.family.empty()) {
      e.problem = gemmProblemFromJson(field(j, where, "problem"));
      e.config = gemmConfigFromJson(field(j, where, "config"));
    } else if (e.family == "attention") {
      AttentionProblem p = attentionProblemFromJson(field(j, where, "problem"));
      if (auto why = checkProblem(p))
        fail(where + ".problem", *why);
      e.familyProblem = toJson(p);
      e.familyConfig =
          toJson(attentionConfigFromJson(field(j, where, "config")));
    } else if (e.family == "mlstm") {
      MlstmProblem p = mlstmProblemFromJson(field(j, where, "problem"));
      if (auto why = checkProblem(p))
        fail(where + ".problem", *why);
      e.familyProblem = toJson(p);
      e.familyConfig = toJson(mlstmConfigFromJson(field(j, where, "config")));
    } else {
      fail(where, "'family' = \"" + e.family +
                      "\" is not a bundled family (attention, mlstm; GEMM "
                      "entries have no 'family')");
    }
  } catch (const Error &err) {
    fail(where, err.what());
  }
  if (auto why = checkProblem(e.problem))
    fail(where + ".problem", *why);
  e.kernel = str(j, where, "kernel");
  if (e.kernel.empty())
    fail(where, "'kernel' is empty");
  e.file = str(j, where, "file");
  if (!isSafeRelativePath(e.file))
    fail(where, "'file' = \"" + e.file +
                    "\" must be a relative path inside the bundle (plain "
                    "names, no '..')");
  const json &b = field(j, where, "bytes");
  if (!b.is_number_unsigned() || b.get<uint64_t>() > kMaxBinaryBytes)
    fail(where, "'bytes' must be an integer from 0 to " +
                    std::to_string(kMaxBinaryBytes) + ", got " + b.dump());
  e.bytes = b.get<uint64_t>();
  e.sha256 = str(j, where, "sha256");
  e.sourceSha256 = str(j, where, "source_sha256");
  e.cacheKey = str(j, where, "cache_key");
  for (auto [name, v] :
       {std::pair<const char *, const std::string *>{"sha256", &e.sha256},
        {"source_sha256", &e.sourceSha256},
        {"cache_key", &e.cacheKey}})
    if (!isSha256Hex(*v))
      fail(where, std::string("'") + name +
                      "' must be 64 lowercase hex digits, got \"" + *v + "\"");
  e.compiler = str(j, where, "compiler");
  e.compilerVersion = str(j, where, "compiler_version");
  e.name = str(j, where, "name", /*required=*/false);
  e.configFrom = str(j, where, "config_from", /*required=*/false);
  return e;
}

bool sameKernelSlot(const BundleEntry &a, const BundleEntry &b) {
  if (!a.family.empty() || !b.family.empty())
    return a.target == b.target && a.family == b.family &&
           a.familyProblem == b.familyProblem &&
           a.familyConfig == b.familyConfig && a.kernel == b.kernel;
  return a.target == b.target && a.problem == b.problem && a.config == b.config;
}

int alignSum(const GemmProblem &p) { return p.alignA + p.alignB + p.alignC; }

std::string alignText(const GemmProblem &p) {
  return "(" + std::to_string(p.alignA) + ", " + std::to_string(p.alignB) +
         ", " + std::to_string(p.alignC) + ")";
}

/// Reads and checks an entry's binary; the message names the file.
std::string readEntry(const BundleEntry &e) {
  std::string data, why;
  bool missing = false;
  auto die = [&](const std::string &what) {
    throw Error("bundle file " + e.path + " " + what + "; " + kRebuildFix +
                " or restore the file");
  };
  if (!readBundleFile(e.path, kMaxBinaryBytes, &data, &why, &missing))
    die(why);
  if (data.size() != e.bytes)
    die("has " + std::to_string(data.size()) + " bytes, the manifest says " +
        std::to_string(e.bytes) + " (truncated or replaced)");
  std::string sha = sha256Hex(data);
  if (sha != e.sha256)
    die("is corrupted: its SHA-256 is " + sha + ", the manifest says " +
        e.sha256);
  return data;
}

/// What is at a bundle's destination.
enum class Destination { Absent, EmptyDir, Bundle };

Destination inspectDestination(const std::string &dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return Destination::Absent;
    throw Error("kgen bundle: cannot inspect " + dir + ": " + errnoText());
  }
  auto refuse = [&](const std::string &what) {
    return Error("kgen bundle: " + dir + " " + what +
                 "; refusing to replace it (choose another --out, or remove "
                 "it yourself)");
  };
  if (S_ISLNK(st.st_mode))
    throw refuse("is a symbolic link");
  if (!S_ISDIR(st.st_mode))
    throw refuse("exists and is not a directory");
  bool empty = true;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (struct dirent *e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        empty = false;
    ::closedir(d);
  } else {
    throw Error("kgen bundle: cannot list " + dir + ": " + errnoText());
  }
  if (empty)
    return Destination::EmptyDir;
  // Any version of a bundle may be replaced (that is how a stale one is
  // rebuilt); anything else is somebody's directory.
  std::string text, why;
  bool missing = false;
  if (readBundleFile(dir + "/manifest.json", 64ull << 20, &text, &why,
                     &missing)) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("schema") && j["schema"].is_string() &&
        j["schema"].get<std::string>() == kBundleSchema)
      return Destination::Bundle;
  }
  throw refuse("exists and is not a kgen bundle (no manifest.json with "
               "schema " +
               std::string(kBundleSchema) + ")");
}

} // namespace

//===----------------------------------------------------------------------===//
// Free functions
//===----------------------------------------------------------------------===//

nlohmann::ordered_json kgen::toJson(const BundleEntry &e) {
  // In reading order: what it is, where it is, what it was built from.
  nlohmann::ordered_json j;
  j["target"] = toString(e.target);
  if (!e.name.empty())
    j["name"] = e.name;
  j["kernel"] = e.kernel;
  j["file"] = e.file;
  j["bytes"] = e.bytes;
  j["sha256"] = e.sha256;
  if (!e.family.empty()) {
    j["family"] = e.family;
    j["problem"] = e.familyProblem;
    j["config"] = e.familyConfig;
  } else {
    j["problem"] = toJson(e.problem);
    j["config"] = toJson(e.config);
  }
  if (!e.configFrom.empty())
    j["config_from"] = e.configFrom;
  j["compiler"] = e.compiler;
  j["compiler_version"] = e.compilerVersion;
  j["source_sha256"] = e.sourceSha256;
  j["cache_key"] = e.cacheKey;
  return j;
}

std::string kgen::sourceDigest(const KernelSource &src) {
  // Length-prefixed fields, as in cacheKey: moving bytes from one field to
  // the next changes the digest.
  Sha256 h;
  auto put = [&](std::string_view s) {
    std::string len;
    for (int i = 0; i < 8; ++i)
      len += char(uint64_t(s.size()) >> (8 * i));
    h.update(len);
    h.update(s);
  };
  put("kgen-source-v1");
  put(toString(src.target));
  put(src.source);
  for (const std::string &name : src.headers) {
    put(name);
    put(templateText(name));
  }
  return h.hexDigest();
}

GemmProblem kgen::bundledProblem(const GemmProblem &p) {
  // Stand-in pointers aligned far beyond any element size: what is left to
  // lower the alignments is the extents, exactly as for a real aligned call.
  GemmArgs args;
  args.a = reinterpret_cast<const void *>(uintptr_t(1) << 20);
  args.b = reinterpret_cast<const void *>(uintptr_t(2) << 20);
  args.c = reinterpret_cast<void *>(uintptr_t(3) << 20);
  args.bias = reinterpret_cast<const void *>(uintptr_t(4) << 20);
  args.residual = reinterpret_cast<const void *>(uintptr_t(5) << 20);
  return Runtime::resolve(p, args);
}

bool kgen::bundleServes(const GemmProblem &entry, const GemmProblem &call) {
  if (entry.alignA > call.alignA || entry.alignB > call.alignB ||
      entry.alignC > call.alignC)
    return false;
  GemmProblem e = entry;
  if (!e.staticM && !call.staticM)
    e.m = call.m;
  e.alignA = call.alignA;
  e.alignB = call.alignB;
  e.alignC = call.alignC;
  return e == call;
}

//===----------------------------------------------------------------------===//
// Bundle
//===----------------------------------------------------------------------===//

Bundle Bundle::open(const std::string &dirArg) {
  Bundle b;
  b.dir_ = absoluteDir(dirArg);
  const std::string &dir = b.dir_;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw Error("bundle " + dir + ": " + errnoText() +
                " (KGEN_BUNDLE names directories written by kgen bundle)");
  if (!S_ISDIR(st.st_mode))
    throw Error("bundle " + dir +
                " is not a directory (KGEN_BUNDLE names directories written "
                "by kgen bundle)");
  std::string mpath = dir + "/manifest.json", text, why;
  bool missing = false;
  if (!readBundleFile(mpath, 64ull << 20, &text, &why, &missing)) {
    if (missing)
      throw Error("bundle " + dir +
                  " is not a kgen bundle: it has no manifest.json (write one "
                  "with kgen bundle --out " +
                  dir + ")");
    throw Error("bundle manifest " + mpath + " " + why);
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    throw Error("bundle manifest " + mpath + ": malformed JSON: " + e.what() +
                "; " + kRebuildFix);
  }
  try {
    if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string())
      fail(mpath, "not a kgen bundle manifest (no \"schema\")");
    std::string schema = j["schema"].get<std::string>();
    if (schema != kBundleSchema)
      fail(mpath, "schema \"" + schema + "\", this kgen reads \"" +
                      std::string(kBundleSchema) + "\"; " + kRebuildFix);
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "schema" && it.key() != "kgen_version" &&
          it.key() != "created" && it.key() != "entries")
        fail(mpath, "unknown field '" + it.key() + "'");
    std::string version = str(j, mpath, "kgen_version");
    if (version != kVersion)
      throw Error("bundle " + dir + " is stale: it was built by kgen " +
                  version + " and this is kgen " + std::string(kVersion) +
                  ", whose kernels come from other templates; " + kRebuildFix);
    b.created_ = str(j, mpath, "created");
    const json &entries = field(j, mpath, "entries");
    if (!entries.is_array())
      fail(mpath, "'entries' must be an array");
    for (size_t i = 0; i < entries.size(); ++i) {
      std::string where = mpath + ": entries[" + std::to_string(i) + "]";
      BundleEntry e = entryFromJson(entries[i], where);
      for (const BundleEntry &prev : b.entries_)
        if (sameKernelSlot(prev, e))
          fail(where, "duplicates the entry of kernel " + prev.kernel);
      e.path = dir + "/" + e.file;
      b.bySource_.emplace(e.sourceSha256, b.entries_.size());
      b.entries_.push_back(std::move(e));
    }
  } catch (const json::exception &e) {
    throw Error("bundle manifest " + mpath + ": " + e.what());
  }
  return b;
}

const BundleEntry *Bundle::find(Target t, const GemmProblem &p,
                                const GemmConfig *c) const {
  const BundleEntry *best = nullptr;
  for (const BundleEntry &e : entries_) {
    if (!e.family.empty() || e.target != t || (c && !(e.config == *c)) ||
        !bundleServes(e.problem, p))
      continue;
    if (alignSum(e.problem) == alignSum(p)) // serves and equal: exact
      return &e;
    if (!best || alignSum(e.problem) > alignSum(best->problem))
      best = &e;
  }
  return best;
}

const BundleEntry *Bundle::findSource(const KernelSource &src,
                                      const std::string &digest) const {
  auto [lo, hi] = bySource_.equal_range(digest);
  for (auto it = lo; it != hi; ++it) {
    const BundleEntry &e = entries_[it->second];
    if (e.target == src.target && e.kernel == src.name)
      return &e;
  }
  return nullptr;
}

const BundleEntry *Bundle::findFamily(Target t, const json &problem) const {
  for (const BundleEntry &e : entries_)
    if (!e.family.empty() && e.target == t && e.familyProblem == problem)
      return &e;
  return nullptr;
}

std::string Bundle::binary(const Entry &e) const { return readEntry(e); }

//===----------------------------------------------------------------------===//
// BundleSet
//===----------------------------------------------------------------------===//

BundleOptions BundleOptions::fromEnv() {
  BundleOptions o;
  if (const char *dirs = envOrNull("KGEN_BUNDLE"))
    o.dirs = splitDirList(dirs);
  if (const char *miss = envOrNull("KGEN_BUNDLE_MISS")) {
    std::string v = miss;
    if (v == "jit")
      o.miss = BundleMiss::Jit;
    else if (v == "error")
      o.miss = BundleMiss::Error;
    else
      throw Error("KGEN_BUNDLE_MISS='" + v +
                  "' is not a policy: use jit (compile problems missing from "
                  "the bundles) or error (never compile)");
  }
  return o;
}

BundleSet::BundleSet(const BundleOptions &opts) : miss_(opts.miss) {
  for (const std::string &d : opts.dirs)
    bundles_.push_back(Bundle::open(d));
}

const BundleEntry *BundleSet::find(Target t, const GemmProblem &p,
                                   const GemmConfig *c) const {
  for (const Bundle &b : bundles_)
    if (const BundleEntry *e = b.find(t, p, c))
      return e;
  return nullptr;
}

const BundleEntry *BundleSet::findSource(const KernelSource &src) const {
  if (bundles_.empty())
    return nullptr;
  std::string digest = sourceDigest(src);
  for (const Bundle &b : bundles_)
    if (const BundleEntry *e = b.findSource(src, digest))
      return e;
  return nullptr;
}

const BundleEntry *BundleSet::findFamily(Target t, const json &problem) const {
  for (const Bundle &b : bundles_)
    if (const BundleEntry *e = b.findFamily(t, problem))
      return e;
  return nullptr;
}

std::string BundleSet::binary(const BundleEntry &e) const {
  return readEntry(e);
}

Error BundleSet::missError(Target t, const GemmProblem &p,
                           const GemmConfig *c) const {
  std::string dirs;
  for (const Bundle &b : bundles_)
    dirs += (dirs.empty() ? "" : ", ") + b.dir();
  std::string msg = "no bundled kernel for gemm " + toJson(p).dump() + " on " +
                    std::string(toString(t));
  if (c)
    msg += " with config " + toJson(*c).dump();
  msg += " in KGEN_BUNDLE (" + (dirs.empty() ? "none" : dirs) +
         "), and KGEN_BUNDLE_MISS=error forbids compiling it";
  // Say why the nearest entries do not serve the call.
  std::set<std::string> otherTargets, hints;
  for (const Bundle &b : bundles_)
    for (const BundleEntry &e : b.entries()) {
      if (!e.family.empty())
        continue;
      GemmProblem q = e.problem;
      q.alignA = p.alignA;
      q.alignB = p.alignB;
      q.alignC = p.alignC;
      if (!bundleServes(q, p))
        continue; // another shape
      if (e.target != t) {
        otherTargets.insert(std::string(toString(e.target)));
      } else if (!bundleServes(e.problem, p)) {
        hints.insert("the bundle has this shape for alignments " +
                     alignText(e.problem) +
                     " (elements) but the call's pointers, leading "
                     "dimensions and extents allow only " +
                     alignText(p) +
                     "; align the data, or bundle the problem with --align " +
                     std::to_string(p.alignA) + "," + std::to_string(p.alignB) +
                     "," + std::to_string(p.alignC));
      } else if (c && !(e.config == *c)) {
        hints.insert("the bundle has this problem with config " +
                     toJson(e.config).dump());
      } else if (c && !checkConfig(p, *c, t)) {
        KernelSource src = emitGemm(p, *c, t);
        if (sourceDigest(src) != e.sourceSha256)
          hints.insert("the bundled kernel " + e.kernel +
                       " was generated from other sources than this kgen "
                       "generates (templates changed without a version "
                       "change); " +
                       kRebuildFix);
      }
    }
  if (!otherTargets.empty()) {
    std::string ts;
    for (const std::string &o : otherTargets)
      ts += (ts.empty() ? "" : ", ") + o;
    hints.insert("the bundle has this problem for " + ts + " only");
  }
  for (const std::string &h : hints)
    msg += "; " + h;
  msg += "; fix: add the problem to the bundle (kgen bundle --problem FILE "
         "--target " +
         std::string(toString(t)) +
         " --out DIR), or set KGEN_BUNDLE_MISS=jit to compile misses";
  return Error(msg);
}

//===----------------------------------------------------------------------===//
// BundleWriter
//===----------------------------------------------------------------------===//

BundleWriter::BundleWriter(std::string dir) : dir_(absoluteDir(dir)) {
  if (dir_ == "/")
    throw Error("kgen bundle: refusing to write a bundle at /");
  inspectDestination(dir_); // refuses before any compile is spent
  fs::path target(dir_);
  std::string parent = target.parent_path().string();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec)
    throw Error("kgen bundle: cannot create " + parent + ": " + ec.message());
  // mkdir (not mkdtemp) so the bundle gets the umask's mode like any
  // directory the user creates; the name only has to be unused.
  std::string base = parent + "/." + target.filename().string() + ".tmp." +
                     std::to_string(::getpid()) + ".";
  for (int i = 0; tmp_.empty(); ++i) {
    std::string cand = base + std::to_string(std::rand() % 1000000 + i);
    if (::mkdir(cand.c_str(), 0777) == 0)
      tmp_ = cand;
    else if (errno != EEXIST || i > 100)
      throw Error("kgen bundle: cannot create a temp directory in " + parent +
                  ": " + errnoText());
  }
}

BundleWriter::~BundleWriter() {
  if (!committed_ && !tmp_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

BundleEntry BundleWriter::add(BundleEntry e, const std::string &binary) {
  if (committed_)
    throw Error("kgen bundle: add() after commit()");
  for (const BundleEntry &prev : entries_)
    if (sameKernelSlot(prev, e))
      return prev;
  if (binary.size() > kMaxBinaryBytes)
    throw Error("kgen bundle: kernel " + e.kernel + " has " +
                std::to_string(binary.size()) + " bytes, over the limit of " +
                std::to_string(kMaxBinaryBytes));
  e.bytes = binary.size();
  e.sha256 = sha256Hex(binary);
  std::string stem = e.kernel;
  for (char &ch : stem)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ||
          ch == '-'))
      ch = '_';
  std::string sub = std::string(toString(e.target));
  // One file per distinct binary: kernels of equal source share it; a name
  // taken by another binary gets the checksum appended.
  auto holder = [&](const std::string &file) -> const BundleEntry * {
    for (const BundleEntry &prev : entries_)
      if (prev.file == file)
        return &prev;
    return nullptr;
  };
  e.file = sub + "/" + stem + ".bin";
  if (const BundleEntry *h = holder(e.file); h && h->sha256 != e.sha256)
    e.file = sub + "/" + stem + "-" + e.sha256.substr(0, 16) + ".bin";
  bool write = holder(e.file) == nullptr;
  if (write) {
    std::string subDir = tmp_ + "/" + sub;
    if (::mkdir(subDir.c_str(), 0777) != 0 && errno != EEXIST)
      throw Error("kgen bundle: cannot create " + subDir + ": " + errnoText());
    writeNewFile(tmp_ + "/" + e.file, binary);
  }
  e.path = dir_ + "/" + e.file;
  entries_.push_back(e);
  return e;
}

void BundleWriter::setTuning(const TuningDB &db) { tuning_ = db.toJson(); }

void BundleWriter::commit() {
  if (committed_)
    return;
  if (tuning_)
    writeNewFile(tmp_ + "/tuning.json", tuning_->dump(2) + "\n");
  nlohmann::ordered_json manifest;
  manifest["schema"] = kBundleSchema;
  manifest["kgen_version"] = kVersion;
  manifest["created"] = nowUtc();
  manifest["entries"] = nlohmann::ordered_json::array();
  for (const BundleEntry &e : entries_)
    manifest["entries"].push_back(toJson(e));
  writeNewFile(tmp_ + "/manifest.json", manifest.dump(2) + "\n");
  for (Target t : kAllTargets)
    syncDir(tmp_ + "/" + std::string(toString(t)));
  syncDir(tmp_);

  // Checked again: the compiles took a while and the directory may have
  // changed meanwhile.
  Destination dest = inspectDestination(dir_);
  auto fail = [&](const std::string &what) {
    throw Error("kgen bundle: cannot publish " + tmp_ + " as " + dir_ + ": " +
                what + ": " + errnoText());
  };
  if (dest == Destination::EmptyDir && ::rmdir(dir_.c_str()) != 0)
    fail("cannot remove the empty directory");
  if (dest != Destination::Bundle) {
    if (::rename(tmp_.c_str(), dir_.c_str()) != 0)
      fail("rename");
  } else if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, dir_.c_str(),
                         RENAME_EXCHANGE) == 0) {
    // One step: readers see the old bundle or the new one. The old one is
    // now at tmp_.
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
    // No exchange on this filesystem: move the old bundle aside first, so
    // there is a short window with no bundle, but never a mixed one.
    std::string old = tmp_ + ".old";
    if (::rename(dir_.c_str(), old.c_str()) != 0)
      fail("cannot move the old bundle aside");
    if (::rename(tmp_.c_str(), dir_.c_str()) != 0) {
      int saved = errno;
      ::rename(old.c_str(), dir_.c_str());
      errno = saved;
      fail("rename");
    }
    std::error_code ec;
    fs::remove_all(old, ec);
  } else {
    fail("rename (exchange)");
  }
  committed_ = true;
  syncDir(fs::path(dir_).parent_path().string());
}
