//===- TuningDB.h - Tuned GEMM configs per device and problem ---*- C++ -*-===//
//
// What `kgen tune` measured, so the dispatcher can run the winner instead of
// the heuristic's guess. One JSON file (schema "kgen-tuning-db/1"):
//
//   {"schema": "kgen-tuning-db/1",
//    "devices": [{"device": {"name": "NVIDIA H200", "arch": "sm_90",
//                            "target": "sm_90a", "compute_units": 132,
//                            "kgen_version": "0.1.0", "compiler": "nvrtc",
//                            "compiler_version": "12.4"},
//                 "records": [{"problem": {...}, "config": {...},
//                              "kernel": "kgen_gemm_...", "time_us": 8.1,
//                              "tflops": 2.1, "gb_s": 2079.4,
//                              "runner_up_us": 8.4, "heuristic_us": 9.0,
//                              "tuned_at": "2025-01-31T12:00:00Z"}],
//                 "misses": [{problem}, ...]}]}
//
// Records are usable only under the exact device key they were measured
// with: a new kgen or compiler version changes the generated code, another
// GPU (or the same GPU with fewer SMs/CUs enabled) changes what is fastest.
// Records of other keys are kept in the file (other GPUs may share it) but
// never returned. Problem and config use the JSON of kgen/Codegen/Json.h.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_TUNINGDB_H
#define KGEN_RUNTIME_TUNINGDB_H

#include "kgen/Attention.h"
#include "kgen/Mlstm.h"
#include "kgen/Problem.h"
#include "kgen/Runtime/Cache.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace kgen {

inline constexpr std::string_view kTuningDbSchema = "kgen-tuning-db/1";

/// Everything a tuning result depends on besides the problem. Two keys
/// match only when every field is equal.
struct DeviceKey {
  std::string device;           ///< Backend::deviceName(), "NVIDIA H200"
  std::string arch;             ///< Backend::archName(), "sm_90"
  Target target = Target::SM80; ///< the kgen target the kernels were built for
  int computeUnits = 0;         ///< SMs / CUs (a MIG slice has fewer)
  std::string kgenVersion = std::string(kVersion);
  std::string compiler;        ///< Compiler::name(), "nvrtc" or "hiprtc"
  std::string compilerVersion; ///< Compiler::version()

  bool operator==(const DeviceKey &) const = default;
};

/// What a tune measured, in every record (GEMM's and the families'): the
/// winner's kernel, its time and rates, and the runner-up's and the
/// heuristic's times.
struct Measurement {
  std::string kernel;     ///< the winner's (main) kernel name
  double timeUs = 0;      ///< median time a call of the winner, > 0
  double tflops = 0;      ///< of the winner
  double gbs = 0;         ///< GB/s of the winner
  double runnerUpUs = 0;  ///< second-best candidate; 0: there was none
  double heuristicUs = 0; ///< the heuristic's config; 0: not measured
  std::string tunedAt;    ///< UTC, "2025-01-31T12:00:00Z"

  bool operator==(const Measurement &) const = default;
};

/// One tuned GEMM problem: the winning config and what was measured
/// (kernel: gemmKernelName(problem, config, target)).
struct TuningRecord : Measurement {
  GemmProblem problem;
  GemmConfig config;

  bool operator==(const TuningRecord &) const = default;
};

/// The families tuned besides GEMM. Their records live next to GEMM's in
/// the same device entry, under "family_records" / "family_misses" (left
/// out of the file while empty, so a GEMM-only DB reads and writes as
/// before).
enum class TuneFamily { Attention, Mlstm };
std::string_view toString(TuneFamily f); ///< "attention", "mlstm"
std::optional<TuneFamily> parseTuneFamily(std::string_view s);

/// One tuned attention or mLSTM problem. Problem and config are kept as
/// their canonical JSON (kgen/Codegen/AttentionJson.h, kgen/Mlstm.h: what
/// toJson of the parsed struct gives), so a field added to a config later
/// needs no change here; records compare by family, then problem text.
/// Its kernel is the main one, its time the whole call's (every kernel).
///
///   {"family": "attention", "problem": {...}, "config": {...},
///    "kernel": "kgen_attn_...", "time_us": 41.2, "tflops": 380.1,
///    "gb_s": 812.0, "runner_up_us": 43.0, "heuristic_us": 45.9,
///    "tuned_at": "2025-01-31T12:00:00Z"}
struct FamilyRecord : Measurement {
  TuneFamily family = TuneFamily::Attention;
  nlohmann::json problem; ///< canonical, with its "family" field
  nlohmann::json config;

  bool operator==(const FamilyRecord &) const = default;
};

/// The record forms of a problem: canonical JSON (what lookups compare).
nlohmann::json tuningProblemJson(const AttentionProblem &p);
nlohmann::json tuningProblemJson(const MlstmProblem &p);

/// The problems a lookup tries after the exact one, best first.
/// Attention: seqlen_q and seqlen_k each rounded up as mBuckets rounds M
/// (16, 32, 64, 128, then a power of two), the query length varying
/// slowest (the exact query length with every key bucket first: a decode
/// step keeps Sq = 1 and moves Sk); batch, heads, head dims and features
/// exact. mLSTM: S rounded up the same way; B, NH and the head dims exact
/// (B x NH decides whether the fused variant fills the GPU, so a record of
/// another B could name the wrong variant).
std::vector<AttentionProblem> attentionBuckets(const AttentionProblem &p);
std::vector<MlstmProblem> mlstmBuckets(const MlstmProblem &p);

/// JSON forms; the parsers throw kgen::Error naming the bad field (unknown
/// fields are errors too, as in Json.h).
nlohmann::json toJson(const DeviceKey &k);
nlohmann::json toJson(const TuningRecord &r);
DeviceKey deviceKeyFromJson(const nlohmann::json &j);
TuningRecord tuningRecordFromJson(const nlohmann::json &j);

/// The M values a lookup tries after the exact problem, best first: M
/// rounded up to a multiple of 16, 32, 64 and 128, then M rounded up to a
/// power of two; duplicates and M itself are left out. Upward, and finest
/// first, because rounding M up to a multiple of q keeps the number of row
/// tiles of every block M that q divides: the bucket's kernel was timed on
/// the grid this call launches. So 100 gives {112, 128}, 300 gives {304,
/// 320, 384, 512}, and 128 (its own bucket under every rounding) gives {}.
std::vector<int64_t> mBuckets(int64_t m);

/// Where the tuning DB lives: $KGEN_TUNING_DB, else <cache root>/tuning.json
/// (the root of `opts`, see CacheOptions::resolvedDir); "" when neither is
/// set. Not created.
std::string
defaultTuningDbPath(const CacheOptions &opts = CacheOptions::fromEnv());

/// The tuning DB in memory. Not synchronized: a caller sharing one between
/// threads guards it with its own mutex.
class TuningDB {
public:
  /// Reads `path`. A missing file is an empty DB (nothing tuned yet). A file
  /// that is not valid JSON or not this schema throws kgen::Error naming the
  /// file and the field; the file is never modified, so a hand edit gone
  /// wrong can be repaired instead of being silently replaced.
  static TuningDB load(const std::string &path);
  /// Parses a DB; errors name the field's JSON path ("devices[0].records[2].
  /// time_us") but no file.
  static TuningDB fromJson(const nlohmann::json &j);
  /// Deterministic: devices, records and misses are sorted, so two DBs with
  /// the same contents give the same text whatever order they were built in.
  nlohmann::json toJson() const;

  /// Writes the DB atomically (temp file in the same directory, fsync,
  /// rename), creating missing parent directories with mode 0700; the file
  /// is 0600. Replaces what is there: to keep records another process wrote
  /// meanwhile, use mergeAndSave.
  void save(const std::string &path) const;
  /// Merges the file at `path` into this DB and writes the union back, under
  /// an exclusive lock on "<path>.lock", so concurrent tuning runs and
  /// runtimes noting misses lose nothing. Afterwards this DB equals the file.
  /// Throws, leaving the file untouched, when it is malformed.
  void mergeAndSave(const std::string &path);

  /// Stores `r` under `key` unless a record of the same key and problem is
  /// at least as good; returns whether `r` was stored. Better means faster,
  /// and on equal time the later `tunedAt`: with the key fixed, the same
  /// config builds the same binary, so a slower re-measurement is noise (or
  /// a throttled GPU), and one rule for record and merge makes merging
  /// independent of order. An empty `tunedAt` is set to now. Removes the
  /// problem from the key's misses. Throws kgen::Error for a record load
  /// would refuse (invalid problem, time not > 0, negative figures).
  bool record(const DeviceKey &key, TuningRecord r);
  /// Adds every record and miss of `other`, by the same rule as record.
  void merge(const TuningDB &other);

  struct Match {
    enum Kind { Exact, Bucket, None };
    const TuningRecord *record = nullptr; ///< null for None
    Kind kind = None;
    GemmProblem bucketProblem; ///< the problem `record` was tuned for
  };
  /// The record for `p` under `key`: the exact problem first, then the same
  /// problem with M replaced by each of mBuckets(p.m) in order; None when
  /// neither exists (the caller falls back to the heuristic, and should call
  /// noteMiss). Records under any other key are never returned. The pointer
  /// stays valid until this DB is next modified.
  Match lookup(const DeviceKey &key, const GemmProblem &p) const;

  /// Remembers that `p` had no record under `key`, so `kgen tune` can tune
  /// it later. Returns true when this is news (the caller logs it then);
  /// false when already noted, when `p` has an exact record, or when the
  /// key already holds kMaxMisses misses (a server with an M per request
  /// would otherwise grow the file without bound).
  bool noteMiss(const DeviceKey &key, const GemmProblem &p);
  std::vector<GemmProblem> misses(const DeviceKey &key) const;
  static constexpr size_t kMaxMisses = 1024;

  /// Records lookup ignores under `key`: those measured with another kgen
  /// or compiler version, or on another device.
  size_t staleCount(const DeviceKey &key) const;
  /// Records under `key`, sorted by problem (N, K, dtypes, layout, ..., M).
  std::vector<TuningRecord> records(const DeviceKey &key) const;
  size_t size() const; ///< records under every key

  /// Writes the records under `key` as CSV in the shape of the seeds'
  /// tuned-GEMM tables: header "M,N,K,kernel,time_us,tflops,gb_s", one row
  /// per record in records() order, time with 3 decimals, the rates with 2.
  /// One device per file, since the rows carry no device column; dtypes and
  /// layout are in the kernel name.
  void exportCsv(std::ostream &os, const DeviceKey &key) const;

  //===--------------------------------------------------------------------===//
  // Attention and mLSTM: the same rules as GEMM's records (record keeps the
  // faster, merge is order-independent, other keys are stale, misses are
  // capped at kMaxMisses per key).
  //===--------------------------------------------------------------------===//

  /// Throws kgen::Error for a record load would refuse (problem or config
  /// not parsing as its family's, a family field that disagrees, time not
  /// > 0, negative figures). The problem and config are canonicalized.
  bool record(const DeviceKey &key, FamilyRecord r);

  struct FamilyMatch {
    const FamilyRecord *record = nullptr; ///< null for None
    Match::Kind kind = Match::None;
    nlohmann::json bucketProblem; ///< the problem `record` was tuned for
  };
  /// Exact problem, then attentionBuckets / mlstmBuckets in order.
  FamilyMatch lookup(const DeviceKey &key, const AttentionProblem &p) const;
  FamilyMatch lookup(const DeviceKey &key, const MlstmProblem &p) const;

  bool noteMiss(const DeviceKey &key, const AttentionProblem &p);
  bool noteMiss(const DeviceKey &key, const MlstmProblem &p);
  /// The family's misses under `key`, as canonical problem JSON.
  std::vector<nlohmann::json> familyMisses(const DeviceKey &key,
                                           TuneFamily f) const;
  /// The family's records under `key`, sorted by problem text.
  std::vector<FamilyRecord> familyRecords(const DeviceKey &key,
                                          TuneFamily f) const;

  /// CSV of the family's records under `key`, one row per record:
  ///   attention: batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim_qk,
  ///              head_dim_v,kernel,time_us,tflops,gb_s
  ///   mlstm:     B,NH,S,DQK,DV,kernel,time_us,tflops,gb_s
  /// (the GEMM table's shape: the problem's sizes, then the kernel, whose
  /// name carries dtype and features, then time and rates).
  void exportCsv(std::ostream &os, const DeviceKey &key, TuneFamily f) const;

  bool operator==(const TuningDB &) const = default;

private:
  struct Device {
    DeviceKey key;
    std::vector<TuningRecord> records; ///< sorted by problem, unique
    std::vector<GemmProblem> misses;   ///< sorted, unique, no exact record
    /// Sorted by (family, problem text), unique.
    std::vector<FamilyRecord> familyRecords;
    /// Canonical problem JSON (with "family"), sorted by text, unique.
    std::vector<nlohmann::json> familyMisses;
    bool operator==(const Device &) const = default;
  };
  std::vector<Device> devices_; ///< sorted by key, unique

  const Device *find(const DeviceKey &key) const;
  Device &findOrAdd(const DeviceKey &key);
  static bool insertRecord(Device &d, TuningRecord r);
  static bool insertMiss(Device &d, const GemmProblem &p);
  static bool insertRecord(Device &d, FamilyRecord r);
  static bool insertMiss(Device &d, const nlohmann::json &p);
  FamilyMatch lookupFamily(const DeviceKey &key,
                           const std::vector<nlohmann::json> &tries) const;
};

} // namespace kgen

#endif // KGEN_RUNTIME_TUNINGDB_H
