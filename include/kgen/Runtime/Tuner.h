//===- Tuner.h - Measure candidates, keep the fastest -----------*- C++ -*-===//
//
// What `kgen tune` does for one GEMM problem, on the runtime's GPU:
//
//   1. candidates: enumerateConfigs for the problem as the runtime resolves
//      it for packed buffers (tuningProblem), compiled in parallel on every
//      core through the disk cache, while the GPU works on earlier ones;
//   2. check: each candidate runs once on random inputs with C poisoned
//      (NaN) and is compared with the plain reference under the tolerance
//      rule of kgen/Codegen/Reference.h; a failing one is reported with its
//      error and excluded;
//   3. timing, serial on one stream: warm-up, inputs rotated over sets that
//      together exceed twice the L2 (and 64 MB) so no run finds its inputs
//      cached, median of per-run times over >= 50 runs and >= 30 ms, and
//      graph replay for kernels under 20 us, where launch overhead would
//      otherwise be measured;
//   4. the winner as a TuningRecord, with the runner-up's time and the time
//      of the dispatcher's heuristic default (measured like the others).
//
// Also here, as plain functions the unit tests cover without a GPU: the
// device key the dispatcher looks records up under, the resume planning and
// the save-after-every-problem loop of `kgen tune`, the ranking, and the
// timing statistics.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_TUNER_H
#define KGEN_RUNTIME_TUNER_H

#include "kgen/Codegen/Reference.h"
#include "kgen/kgen.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kgen {

/// A problem of any tuned family: what `kgen tune` lists and the tuner
/// takes.
using AnyProblem = std::variant<GemmProblem, AttentionProblem, MlstmProblem>;

//===----------------------------------------------------------------------===//
// Keys and figures
//===----------------------------------------------------------------------===//

/// The key `rt`'s dispatcher looks tuning records up under (as
/// Runtime::chooseConfig builds it): its GPU, its target, kgen's and the
/// compiler's versions. Throws kgen::Error without a GPU.
DeviceKey deviceKey(Runtime &rt);

/// `p` as Runtime::gemm resolves it for packed buffers at device-allocation
/// addresses (M = p.m; alignments lowered to what the extents allow, e.g.
/// to 1 for K = 1023): the problem tune() measures and records, and so the
/// one the dispatcher finds for such calls.
GemmProblem tuningProblem(const GemmProblem &p);

/// Bytes one call moves at least: A and B read once, C written once.
double gemmBytes(const GemmProblem &p);
/// TFLOP/s (2*M*N*K) and GB/s (gemmBytes) of a call taking `us`.
double gemmTflops(const GemmProblem &p, double us);
double gemmGbPerS(const GemmProblem &p, double us);

/// How much slower `otherUs` is than `winnerUs`, in percent (12.5 means
/// 1.125x the winner's time); 0 when either is not measured (<= 0).
double marginPercent(double winnerUs, double otherUs);

//===----------------------------------------------------------------------===//
// Options, statistics
//===----------------------------------------------------------------------===//

struct TuneProgress {
  size_t candidates = 0; ///< of the problem being tuned
  size_t compiled = 0;   ///< built or failed to build
  size_t checked = 0;    ///< ran against the reference
  size_t timed = 0;      ///< timed after passing
  size_t failed = 0;     ///< excluded: build, launch or check failed
};

struct TunerOptions {
  int minRuns = 50;     ///< timed runs per candidate, at least...
  double minMs = 30;    ///< ...and this much measured time
  double maxMs = 2000;  ///< stop a slow candidate here after 10 runs
  double warmupMs = 10; ///< untimed runs before measuring
  /// Replay a graph of back-to-back launches for kernels faster than this.
  /// Kernels run back to back in a model and in bench/gemm.py; an event
  /// pair around each launch adds the launch gap and keeps a programmatic
  /// dependent launch from overlapping the previous kernel (H100: 128x128
  /// and 128x256 tiles tied at 2048^3 when timed one by one, 29.4 and 29.8
  /// us, and ran 32.6 and 25.4 back to back).
  double graphBelowUs = 5000;
  /// Rotated input sets total at least this many bytes, and more than
  /// twice the device's L2.
  size_t rotateBytes = size_t(64) << 20;
  size_t maxSets = 256;        ///< at most this many input sets
  unsigned compileThreads = 0; ///< 0: std::thread::hardware_concurrency()
  uint64_t seed = 0x6b67656e;  ///< inputs are a pure function of the seed
  /// Polled while waiting and timing; when it returns true, tune() stops
  /// and throws TuneInterrupted.
  std::function<bool()> stopRequested;
  /// Called on tune()'s thread as candidates advance.
  std::function<void(const TuneProgress &)> progress;
};

/// Thrown by Tuner::tune when TunerOptions::stopRequested said so.
class TuneInterrupted : public Error {
public:
  TuneInterrupted() : Error("tuning interrupted") {}
};

/// The median (the mean of the middle two for an even count); 0 if empty.
double median(std::vector<double> v);
/// The run-count rule: enough when at least `minRuns` runs took at least
/// `minMs` together, or when a slow kernel ran 10 times past `maxMs`.
bool enoughRuns(size_t runs, double totalMs, const TunerOptions &o);
/// How many more runs to queue before looking again, given the time per
/// run so far (`perRunMs`, > 0): what the rule still needs, in [1, cap].
size_t nextBatch(size_t runs, double totalMs, double perRunMs,
                 const TunerOptions &o, size_t cap);
/// Input sets of `setBytes` each that rotate past an L2 of `l2Bytes`
/// (0: unknown): enough to exceed max(rotateBytes, 2 * l2Bytes), at least
/// 1, at most maxSets.
size_t rotationSets(size_t setBytes, size_t l2Bytes, const TunerOptions &o);
/// Kernel launches per replayed graph for a kernel of `us`: about 100 us
/// of work and at least 10 launches, a multiple of `sets` so every replay
/// walks all sets.
size_t graphLaunches(double us, size_t sets);

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

struct CandidateResult {
  enum class Status { Timed, CompileFailed, LaunchFailed, CheckFailed };
  GemmConfig config;
  std::string kernel;
  Status status = Status::Timed;
  std::string error;      ///< why it was excluded
  bool heuristic = false; ///< defaultConfig's choice
  bool checked = false;   ///< `check` holds the numbers
  ReferenceCheck check;
  double us = 0; ///< median per call (Timed)
  double tflops = 0, gbs = 0;
  size_t runs = 0;     ///< timed samples (graph replays when `graph`)
  double timedMs = 0;  ///< measured time in total
  bool graph = false;  ///< timed by graph replay
  size_t perGraph = 0; ///< kernel launches per replay when `graph`
  /// Attention and mLSTM: the candidate's config as JSON (`config` is
  /// unused); null for GEMM.
  nlohmann::json familyConfig;
  bool ok() const { return status == Status::Timed; }
};

const char *toString(CandidateResult::Status s);

/// Sorts passing candidates by time (ties keep their order) ahead of the
/// excluded ones (in their order).
void rankCandidates(std::vector<CandidateResult> &c);

/// The winner of ranked candidates as a record for `p` (its kernel name,
/// time, rates, the runner-up's time and the heuristic's time, 0 where not
/// measured); none when no candidate passed.
std::optional<TuningRecord>
winnerRecord(const GemmProblem &p, const std::vector<CandidateResult> &ranked);

struct TuneResult {
  GemmProblem problem; ///< as tuned and recorded (tuningProblem)
  Target target = Target::SM90A;
  GemmConfig heuristic; ///< defaultConfig(problem, target)
  /// Passing candidates fastest first, then the excluded ones.
  std::vector<CandidateResult> candidates;
  std::optional<TuningRecord> record; ///< the winner; none if none passed
  size_t sets = 0;                    ///< rotated input sets
  double seconds = 0;                 ///< wall time of tune()
  /// Things the user should know (e.g. graph replay unavailable: small
  /// kernels were timed launch by launch).
  std::vector<std::string> notes;
  /// Attention and mLSTM: the family, the problem as tuned and recorded and
  /// the heuristic's config (JSON), and the winner as a FamilyRecord;
  /// `problem`, `heuristic` and `record` are then unused. Unset for GEMM.
  std::optional<TuneFamily> family;
  nlohmann::json familyProblem, familyHeuristic;
  std::optional<FamilyRecord> familyRecord;
  /// Timing covers the whole call: every kernel of a two-phase mLSTM plan,
  /// the main and combine kernels of a split-KV attention.

  const CandidateResult *winner() const;
  /// The winner's record's measurement (record or familyRecord); null
  /// when none passed.
  const Measurement *measurement() const;
  const CandidateResult *runnerUp() const;
  const CandidateResult *heuristicResult() const;
  size_t failedCount() const;
};

//===----------------------------------------------------------------------===//
// Resume
//===----------------------------------------------------------------------===//

/// Indices of `problems` still to tune under `key`: those without an exact
/// record in `db` (every one with `force`), each distinct problem once, in
/// order. Compare problems as tuningProblem gives them.
std::vector<size_t> pendingProblems(const TuningDB &db, const DeviceKey &key,
                                    const std::vector<GemmProblem> &problems,
                                    bool force);

/// The same for a list mixing families; attention and mLSTM problems are
/// compared as given (their records are keyed by the whole problem).
std::vector<size_t> pendingAnyProblems(const TuningDB &db, const DeviceKey &key,
                                       const std::vector<AnyProblem> &problems,
                                       bool force);

/// Runs `tuneOne(i)` for each i of `pending`, in order; after each, records
/// the winner under `key` and writes the DB at `dbPath`
/// (TuningDB::mergeAndSave) before the next starts, so an interrupted run
/// loses at most the problem in progress and a rerun's pendingProblems
/// skips what is done. `done(i, result, stored)` follows each save
/// (`stored`: the DB kept this winner; false when none passed or the DB
/// holds a faster record). An exception from tuneOne (TuneInterrupted, a
/// dead GPU) ends the loop and propagates; what was saved stays.
void tuneAndRecord(
    const std::vector<size_t> &pending, TuningDB &db, const DeviceKey &key,
    const std::string &dbPath, const std::function<TuneResult(size_t)> &tuneOne,
    const std::function<void(size_t, const TuneResult &, bool)> &done);

//===----------------------------------------------------------------------===//
// The reference on the GPU
//===----------------------------------------------------------------------===//

/// The plain reference of kgen/Codegen/Reference.h for `p`'s dtypes and
/// layout, built through the runtime's compiler and disk cache and loaded on
/// its GPU. Safe to construct from several threads once `rt`'s compiler is
/// open (any Runtime::compile or deviceKey opens it).
class GemmReference {
public:
  GemmReference(Runtime &rt, const GemmProblem &p);

  const std::string &name() const { return name_; }
  /// ref (double) and naive (C's dtype), both M x N packed, for the call
  /// `args` of `call`: M = args.m (or call's), N and K from `call`, leading
  /// dimensions 0 = packed. One reference kernel serves every problem of
  /// its dtypes and layout, so the shape always comes from the call.
  void run(const GemmProblem &call, const GemmArgs &args, double *ref,
           void *naive, void *stream = nullptr) const;
  /// p[0, count) = uniform values in [-1, 1) of `t` from (seed, index), or
  /// NaN with `poison`.
  void fill(void *p, int64_t count, DType t, uint64_t seed, bool poison,
            void *stream = nullptr) const;

private:
  Backend *be_;
  std::string name_;
  Backend::Function gemm_ = nullptr, fill_ = nullptr;
};

/// The plain attention reference, one block per query row: `ref` with the
/// mask built explicitly from the problem's definition, scores, softmax, O
/// and LSE in fp32 from the exact inputs (fp8 ones decoded and descaled);
/// `naive` the same-dtype implementation: for 16-bit inputs scores and P
/// rounded to the dtype; for fp8 inputs scores rounded to O's bf16 and P
/// (before the division by the row sum, as the kernel) to the inputs' fp8
/// type, P (V * vDescale) summed in fp32 and rounded to bf16 (Tuner.cpp has
/// the whole definition). Built through Runtime::compileSource; NVIDIA
/// only. Holds a row's scores in shared memory: seqlen_k up to 16384 or so.
class AttentionReference {
public:
  explicit AttentionReference(Runtime &rt);
  /// For the call `in` of `p` (sizes from `in` where set, strides as given:
  /// none may be 0; the bias packed; the descale factors read from
  /// in.qDescale, kDescale, vDescale, null as 1): refO [batch, headsQ,
  /// seqlenQ, headDimV] fp32, refLse [batch, headsQ, seqlenQ] fp32 (-inf for
  /// a row with no visible key), naiveO like refO in O's dtype
  /// (attentionOutputDType: bf16 for fp8 inputs).
  void run(const AttentionProblem &p, const AttentionArgs &in, float *refO,
           float *refLse, void *naiveO, void *stream = nullptr) const;

private:
  Backend *be_;
  Backend::Function fn_ = nullptr;
};

/// AttentionReference's module for `t` (an NVIDIA target): the kernel
/// kgen_attn_reference, on the GEMM reference's conversions
/// (kgen/gemm/reference.h). Needs no GPU: the unit tests compile it.
KernelSource attentionReferenceSource(Target t);

//===----------------------------------------------------------------------===//
// The tuner
//===----------------------------------------------------------------------===//

/// Call tune and prefetch from one thread (the one that drives the GPU);
/// the tuner's compile threads use `rt` meanwhile.
class Tuner {
public:
  /// Needs `rt` with a GPU of its target (throws kgen::Error otherwise).
  /// Starts the compile threads (TunerOptions::compileThreads); the
  /// destructor drops queued compiles and waits for those in flight.
  explicit Tuner(Runtime &rt, TunerOptions opts = {});
  ~Tuner();
  Tuner(const Tuner &) = delete;
  Tuner &operator=(const Tuner &) = delete;

  /// Checks and times every candidate of `p` (M at run time: `p.m`).
  /// Throws TuneInterrupted when asked to stop, kgen::Error when the GPU
  /// fails (a kernel fault leaves the context unusable).
  TuneResult tune(const GemmProblem &p);
  /// Starts building `p`'s candidates and reference in the background, so
  /// they are ready when tune(p) comes (call it for the next problem before
  /// tuning the current one).
  void prefetch(const GemmProblem &p);

  /// Attention: every candidate of enumerateConfigs, checked against the
  /// plain fp32 reference kernel with an explicit mask (AttentionReference)
  /// and timed as GEMM's are; a split-KV candidate is timed with its
  /// combine kernel.
  TuneResult tune(const AttentionProblem &p);
  void prefetch(const AttentionProblem &p);
  /// mLSTM: every candidate plan, checked on the host against the fp64
  /// recurrent form (Tuner.cpp says on which call and why), timed as one
  /// call (both kernels of a two-phase plan).
  TuneResult tune(const MlstmProblem &p);
  void prefetch(const MlstmProblem &p);
  TuneResult tune(const AnyProblem &p);
  void prefetch(const AnyProblem &p);

  const TunerOptions &options() const;

  /// The family-specific half of tuning one problem (Tuner.cpp).
  class Case;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace kgen

#endif // KGEN_RUNTIME_TUNER_H
