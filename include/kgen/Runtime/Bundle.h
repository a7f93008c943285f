//===- Bundle.h - Ahead-of-time kernel bundles ------------------*- C++ -*-===//
//
// A bundle is a directory of compiled kernels that a host program loads
// read-only, with no compiler present and nothing compiled at run time.
// `kgen bundle` writes one (BundleWriter); kgen::Runtime reads the bundles
// named by $KGEN_BUNDLE (BundleSet) before it would open a compiler.
//
//   <dir>/manifest.json  {"schema": "kgen-bundle/1", "kgen_version": "0.1.0",
//                         "created": "2025-01-31T12:00:00Z",
//                         "entries": [{"target": "sm_90a",
//                                      "name": "llama3-8b.o_proj",
//                                      "kernel": "kgen_gemm_...",
//                                      "file": "sm_90a/kgen_gemm_....bin",
//                                      "bytes": 52480, "sha256": "...",
//                                      "problem": {...}, "config": {...},
//                                      "config_from": "heuristic",
//                                      "compiler": "nvrtc",
//                                      "compiler_version": "12.8",
//                                      "source_sha256": "...",
//                                      "cache_key": "..."}]}
//   <dir>/tuning.json    the tuning-DB records the configs came from, if any
//   <dir>/<target>/<kernel>.bin
//
// A bundle is tied to the kgen version that wrote it: the kernels of
// another version were generated from other templates, so opening one is an
// error that says it is stale. Each binary's size and SHA-256 are checked
// when it is read; a bad file is an error naming it, and nothing in the
// directory is ever modified by a reader.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_BUNDLE_H
#define KGEN_RUNTIME_BUNDLE_H

#include "kgen/Codegen/Emitter.h"
#include "kgen/Error.h"
#include "kgen/Problem.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kgen {

class TuningDB;

inline constexpr std::string_view kBundleSchema = "kgen-bundle/1";

/// One compiled kernel of a bundle.
struct BundleEntry {
  Target target = Target::SM90A;
  GemmProblem problem; ///< as the runtime resolves it (see bundledProblem)
  GemmConfig config;
  std::string kernel; ///< function name in the binary
  std::string file;   ///< relative to the bundle, "sm_90a/<kernel>.bin"
  uint64_t bytes = 0;
  std::string sha256;   ///< of the binary
  std::string compiler; ///< "nvrtc" or "hiprtc"
  std::string compilerVersion;
  std::string sourceSha256; ///< sourceDigest() of what was compiled
  std::string cacheKey;     ///< the kernel cache key it was compiled under
  std::string name;         ///< the problem's label (optional)
  std::string configFrom; ///< "heuristic", "given", "tuning-db ..." (optional)
  std::string path;       ///< absolute path once opened; not stored
  /// Attention and mLSTM kernels: "attention" or "mlstm", with the problem
  /// and config as that family's canonical JSON (stored as "family",
  /// "problem", "config"; `problem` and `config` above are then unused). An
  /// mLSTM plan of two kernels is two entries of one problem and config.
  /// Empty for GEMM.
  std::string family;
  nlohmann::json familyProblem, familyConfig;

  bool operator==(const BundleEntry &) const = default;
};

/// The manifest form of an entry (without `path`), fields in reading order.
nlohmann::ordered_json toJson(const BundleEntry &e);

/// SHA-256 over a generated kernel's source and the text of every template
/// header it includes: equal digests compile to equal binaries under the
/// same compiler, options and target. Lets a runtime without a compiler tell
/// that a bundled binary is the one it would have built.
std::string sourceDigest(const KernelSource &src);

/// The problem kgen::Runtime looks a call up by when the call's pointers and
/// leading dimensions are well aligned and packed and M is `p.m`: `p` with
/// each alignment lowered to what the baked extents allow (a K of 4099
/// allows 1). `kgen bundle` stores problems in this form so that aligned
/// calls find them; a call with less aligned data resolves to lower
/// alignments and misses (then KGEN_BUNDLE_MISS decides). Throws kgen::Error
/// for an invalid problem.
GemmProblem bundledProblem(const GemmProblem &p);

/// Whether `e`, built for `entry`, can run the call resolved to `call`
/// (same target is the caller's business): every field equal except M when
/// M is a run-time dimension (one such kernel serves every M), and each
/// alignment of the entry at most the call's (a kernel using narrower
/// accesses is correct on wider-aligned data, not the other way round).
bool bundleServes(const GemmProblem &entry, const GemmProblem &call);

/// A bundle opened read-only.
class Bundle {
public:
  using Entry = BundleEntry;

  /// Reads and checks <dir>/manifest.json: the schema, the kgen version
  /// (another version's bundle is refused as stale), every entry's fields
  /// and file name (relative, inside the bundle). Binaries are checked when
  /// read (binary()). Throws kgen::Error naming the directory and the fix.
  static Bundle open(const std::string &dir);

  const std::string &dir() const { return dir_; }
  const std::string &created() const { return created_; }
  const std::vector<Entry> &entries() const { return entries_; }

  /// The entry of target `t` that serves the call resolved to `p` (see
  /// bundleServes): one with exactly p's alignments first, else the one with
  /// the widest. With `c`, only entries of that config. Null when none.
  const Entry *find(Target t, const GemmProblem &p,
                    const GemmConfig *c = nullptr) const;
  /// The entry compiled from exactly this source (target, kernel name and
  /// sourceDigest equal); null when none.
  const Entry *findSource(const KernelSource &src,
                          const std::string &digest) const;
  /// An attention or mLSTM entry of target `t` for exactly `problem` (the
  /// family's canonical JSON, its "family" field naming the family): the
  /// config the bundle was built with. Null when none.
  const Entry *findFamily(Target t, const nlohmann::json &problem) const;

  /// The entry's binary, after checking that the file is a regular file (not
  /// a link), not writable by other users unless it is ours, and has the
  /// manifest's size and SHA-256. Throws kgen::Error naming the file.
  std::string binary(const Entry &e) const;

private:
  std::string dir_, created_;
  std::vector<Entry> entries_;
  std::unordered_multimap<std::string, size_t> bySource_; ///< digest -> entry
};

/// What to do when a problem is not in any bundle.
enum class BundleMiss {
  Jit,   ///< compile it (needs the compiler), as without bundles
  Error, ///< throw kgen::Error naming the problem and the bundles
};

struct BundleOptions {
  std::vector<std::string> dirs;     ///< $KGEN_BUNDLE (':'-separated)
  BundleMiss miss = BundleMiss::Jit; ///< $KGEN_BUNDLE_MISS=jit|error
  /// Throws kgen::Error for a KGEN_BUNDLE_MISS that is neither jit nor error
  /// (a typo must not silently turn "never compile" into "compile").
  static BundleOptions fromEnv();
};

/// The bundles a runtime reads, in order (the first that has a kernel wins),
/// and the miss policy. Immutable once opened, so lookups need no lock.
class BundleSet {
public:
  BundleSet() = default;
  /// Opens every directory (Bundle::open); throws on the first bad one.
  explicit BundleSet(const BundleOptions &opts);

  bool empty() const { return bundles_.empty(); }
  const std::vector<Bundle> &bundles() const { return bundles_; }
  BundleMiss missPolicy() const { return miss_; }

  /// Bundle::find over the bundles in order.
  const BundleEntry *find(Target t, const GemmProblem &p,
                          const GemmConfig *c = nullptr) const;
  /// Bundle::findSource over the bundles in order (the digest is computed
  /// once here).
  const BundleEntry *findSource(const KernelSource &src) const;
  /// Bundle::findFamily over the bundles in order.
  const BundleEntry *findFamily(Target t, const nlohmann::json &problem) const;
  /// The verified binary of an entry of one of these bundles.
  std::string binary(const BundleEntry &e) const;

  /// The error for a miss: names the problem (JSON), target, config when
  /// given, the bundle directories, and why near entries do not serve it
  /// (lower alignments allowed by the call, another target, kernels built
  /// from other sources), with the fix.
  Error missError(Target t, const GemmProblem &p,
                  const GemmConfig *c = nullptr) const;

private:
  std::vector<Bundle> bundles_;
  BundleMiss miss_ = BundleMiss::Jit;
};

/// Writes a bundle: entries go to a temp directory next to `dir`, commit()
/// publishes it with one rename (replacing an older bundle at `dir` in
/// place), and a writer destroyed without commit() removes its temp
/// directory, so a failed `kgen bundle` leaves `dir` as it was.
class BundleWriter {
public:
  /// Refuses (kgen::Error) a `dir` that exists and is neither an empty
  /// directory nor a kgen bundle (any version), so a typo cannot replace a
  /// user's directory. Creates missing parents.
  explicit BundleWriter(std::string dir);
  ~BundleWriter();
  BundleWriter(const BundleWriter &) = delete;
  BundleWriter &operator=(const BundleWriter &) = delete;

  /// Adds a kernel: writes `binary` and returns `e` with `file`, `bytes`,
  /// `sha256` and `path` filled in; every other field is the caller's. A
  /// second entry of the same target, problem and config is not added (the
  /// first one is returned). Kernels with equal binaries share one file.
  BundleEntry add(BundleEntry e, const std::string &binary);
  /// Ships these tuning-DB records as tuning.json.
  void setTuning(const TuningDB &db);
  const std::vector<BundleEntry> &entries() const { return entries_; }

  /// Writes manifest.json, syncs, and publishes the directory at `dir`.
  void commit();

private:
  std::string dir_, tmp_;
  std::vector<BundleEntry> entries_;
  std::optional<nlohmann::json> tuning_;
  bool committed_ = false;
};

} // namespace kgen

#endif // KGEN_RUNTIME_BUNDLE_H
