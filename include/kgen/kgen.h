//===- kgen.h - The C++ API: JIT kernels from a host program ----*- C++ -*-===//
//
//   kgen::Runtime rt;                              // opens the GPU, the cache
//   kgen::GemmProblem p{.m = 532, .n = 2048, .k = 2048, .transB = true};
//   rt.gemm(p, {.a = dA, .b = dB, .c = dC, .m = 532}, stream);
//
// Kernels are generated and compiled on first use, then come from the disk
// cache. Errors throw kgen::Error with a message that names the fix.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_KGEN_H
#define KGEN_KGEN_H

#include "kgen/Attention.h"
#include "kgen/Codegen/Emitter.h"
#include "kgen/Error.h"
#include "kgen/Mlstm.h"
#include "kgen/Problem.h"
#include "kgen/Runtime/Backend.h"
#include "kgen/Runtime/Bundle.h"
#include "kgen/Runtime/Cache.h"
#include "kgen/Runtime/Compiler.h"
#include "kgen/Runtime/TuningDB.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace kgen {

/// Device pointers and run-time values of one GEMM call. Leading dimensions
/// of 0 mean "packed" (the contiguous extent of the stored matrix).
struct GemmArgs {
  const void *a = nullptr;
  const void *b = nullptr;
  void *c = nullptr;
  int64_t m = -1; ///< run-time M; -1 takes the problem's m
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  /// The epilogue's operands (GemmProblem::bias, ::residual), C's dtype: a
  /// bias of M or N elements, a residual M x N with leading dimension ldr
  /// (0: packed).
  const void *bias = nullptr;
  const void *residual = nullptr;
  int64_t ldr = 0;
  /// Strided batches (GemmProblem::batch): the batch count (-1 takes the
  /// problem's) and each operand's distance between batches in elements;
  /// -1 means packed (one whole matrix or vector), 0 shares the operand
  /// across batches (not allowed for C).
  int64_t batch = -1;
  int64_t strideA = -1, strideB = -1, strideC = -1, strideBias = -1,
          strideResidual = -1;
  /// fp8 inputs (GemmProblem::ab e4m3 or e5m2): device pointers to one fp32
  /// each, the per-tensor scales that dequantize A and B: C = alpha *
  /// (*scaleA) * (*scaleB) * op(A) op(B) + ...; null means 1. Read by the
  /// kernel, so a captured graph follows new values. Other dtypes take none.
  const float *scaleA = nullptr, *scaleB = nullptr;
};

/// Device pointers and run-time values of one attention call
/// (Runtime::attention). Strides are in elements, {batch, seq, head}, head
/// dim contiguous; all zero = packed in the problem's layout (with varlen:
/// packed [total, heads, dim]). Pointers must be 16-byte aligned and the
/// strides multiples of 8 elements (the kernels copy 16 bytes at a time).
struct AttentionArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *o = nullptr;
  float *lse = nullptr; ///< [batch, headsQ, seqlenQ] (varlen: [headsQ, totalQ])
  const void *bias = nullptr;          ///< with problem.bias, the dtype's
  const float *alibiSlopes = nullptr;  ///< with problem.alibi: [headsQ]
  const int *cuSeqlensQ = nullptr, *cuSeqlensK = nullptr; ///< varlen: [batch+1]
  int64_t batch = -1;   ///< -1: the problem's
  int64_t seqlenQ = -1; ///< -1: the problem's; varlen: the longest sequence
  int64_t seqlenK = -1;
  int64_t totalQ = -1; ///< varlen with LSE: cuSeqlensQ[batch]
  int64_t strideQ[3] = {0, 0, 0}, strideK[3] = {0, 0, 0},
          strideV[3] = {0, 0, 0}, strideO[3] = {0, 0, 0};
  int64_t strideBias[3] = {0, 0, 0}; ///< {batch, head, row}; 0: packed
                                     ///< [batch, headsQ, seqlenQ, seqlenK]
  float scale = 0.f; ///< 0: 1 / sqrt(headDimQk); else positive and finite
  /// fp8 inputs: per-tensor descale factors, one fp32 each in device memory
  /// (read by the kernel, so a captured graph follows new values); null
  /// reads as 1. Scores are (Q K^T) * qDescale * kDescale * scale and O is
  /// softmax(...) (V * vDescale). Must be null for bf16 and f16.
  const float *qDescale = nullptr, *kDescale = nullptr, *vDescale = nullptr;
  /// Split-KV partials (attentionWorkspaceBytes); null: the runtime's own
  /// buffer, allocated on first need (never during graph capture).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
};

/// `p` at the sizes of the call `args` (its batch and sequence lengths,
/// where given); throws where the result is not a valid problem.
AttentionProblem sizedForCall(const AttentionProblem &p,
                              const AttentionArgs &args);

/// Device pointers and run-time extents of one mLSTM forward (layouts in
/// kgen/Mlstm.h). State pointers must be given exactly when the problem says
/// so; final states may alias the initial ones (updated in place).
struct MlstmArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  const void *i = nullptr, *f = nullptr;
  void *h = nullptr;
  const float *c0 = nullptr, *n0 = nullptr, *m0 = nullptr;
  float *cT = nullptr, *nT = nullptr, *mT = nullptr;
  int64_t b = -1, nh = -1, s = -1; ///< -1 takes the problem's
  /// Optional caller-owned workspace of at least Runtime::mlstmWorkspace
  /// bytes, zero-filled before its first use (the kernels leave its counters
  /// zero; a two-phase call writes chunk states after its B*NH counters, so
  /// zero the first 4*B*NH bytes again before a call with more heads).
  /// Without one the runtime keeps its own, grown on demand and
  /// shared by every call of this Runtime: such calls must then be ordered
  /// (one stream, or synchronized).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Forces a config (benchmarks, tuning); null: the dispatcher's choice.
  const MlstmConfig *config = nullptr;
};

/// `p` at the extents of the call `args` (b, nh, s, where given); throws
/// where the result is not a valid problem.
MlstmProblem sizedForCall(const MlstmProblem &p, const MlstmArgs &args);

/// A compiled kernel variant, ready to launch (or, with no GPU, just built).
/// Kernels of every family share this; `problem` and `config` are set for
/// GEMM kernels (isGemm) only.
struct Kernel {
  bool isGemm = false;
  GemmProblem problem;
  GemmConfig config;
  KernelSource source;
  std::string cacheKey;
  std::string binary;
  bool cacheHit = false;
  bool bundled = false; ///< read from an ahead-of-time bundle
  double compileMs = 0;
  Backend::Function function = nullptr; ///< null without a GPU
  /// source.prologue's kernel (a repack config's copy), launched first.
  Backend::Function prologueFunction = nullptr;
};

/// The kernels of one mLSTM variant (two for two-phase), built for a
/// problem; what Runtime::mlstm launches.
struct MlstmPlan {
  MlstmProblem problem;
  MlstmConfig config;
  std::vector<std::shared_ptr<Kernel>> kernels;
};

/// When kgen measures kernels (set here or with $KGEN_TUNE).
enum class TunePolicy {
  Off,     ///< never time: the tuning DB's winner, else the heuristic
  Offline, ///< as Off, and problems without a record are added to the DB's
           ///< misses for `kgen tune --misses` (the default)
  Online,  ///< a problem without a record is tuned on first use, then saved
};

/// $KGEN_TUNE: off | offline | online (unset: offline). Throws on others.
TunePolicy tunePolicyFromEnv();

struct RuntimeOptions {
  /// Target to compile for; empty = the GPU's, or compile-only when none.
  std::optional<Target> target;
  bool requireDevice = false; ///< throw when no GPU runtime/device is found
  /// The GPU's index on its vendor's runtime; empty: $KGEN_DEVICE, else 0.
  /// One Runtime drives one GPU; a program on several makes one for each.
  std::optional<int> device;
  CacheOptions cache = CacheOptions::fromEnv();
  TunePolicy tune = tunePolicyFromEnv();
  /// Ahead-of-time bundles read before any compiler is opened
  /// ($KGEN_BUNDLE), and what a problem missing from them does
  /// ($KGEN_BUNDLE_MISS=jit|error).
  BundleOptions bundles = BundleOptions::fromEnv();
};

class Runtime {
public:
  explicit Runtime(RuntimeOptions opts = {});
  ~Runtime();

  /// The GPU, or null in compile-only mode.
  Backend *backend() { return backend_.get(); }
  /// Without a GPU: what was tried and why none opened ("" with one).
  const std::string &whyNoDevice() const { return whyNoDevice_; }
  Target target() const { return target_; }
  DiskCache &cache() { return cache_; }
  /// The bundles of RuntimeOptions::bundles, opened (and checked) at
  /// construction.
  const BundleSet &bundles() const { return bundles_; }
  /// Compiler for a vendor (opened on first use); throws when missing.
  Compiler &compiler(Vendor v);
  /// The compiler's name and version for cache keys: remembered in
  /// <cache>/compilers.json while its library file is unchanged, so cache
  /// hits need no compiler; otherwise the compiler is opened.
  CompilerIdentity compilerIdentity(Vendor v);

  /// Build an explicit variant for `t` (default: this runtime's target);
  /// the cache is consulted first. Loads it when a GPU of `t` is present.
  std::shared_ptr<Kernel> compile(const GemmProblem &p, const GemmConfig &c,
                                  std::optional<Target> t = std::nullopt);

  /// The family-agnostic part of the pipeline: the kernel built from
  /// generated source for src.target, from a bundle, the memory map, the
  /// disk cache or the compiler, in that order; loaded when a GPU of that
  /// target is present. Refuses to compile while `captureStream` captures.
  std::shared_ptr<Kernel> compileSource(const KernelSource &src,
                                        void *captureStream = nullptr);

  /// C = alpha*op(A)*op(B) + beta*C on `stream` with the dispatcher's choice
  /// for this problem (lowered to the alignment the arguments allow).
  void gemm(const GemmProblem &p, const GemmArgs &args, void *stream = nullptr);

  /// The kernel `gemm` runs for this call: the dispatcher's choice for the
  /// resolved problem, built or loaded on first use, then remembered.
  std::shared_ptr<Kernel> select(const GemmProblem &p, const GemmArgs &args,
                                 void *stream = nullptr);

  /// Launch a compiled variant; checks the arguments against its problem.
  void launch(const Kernel &k, const GemmArgs &args, void *stream = nullptr);

  /// O = softmax(scale * Q K^T + bias) V on `stream` with the dispatcher's
  /// config for this problem (lib/Runtime/AttentionRuntime.cpp).
  void attention(const AttentionProblem &p, const AttentionArgs &args,
                 void *stream = nullptr);
  /// Build an explicit attention variant (cache first); loads it when a GPU
  /// of `t` is present.
  std::shared_ptr<Kernel> compile(const AttentionProblem &p,
                                  const AttentionConfig &c,
                                  std::optional<Target> t = std::nullopt);
  /// Launch an explicit attention variant built for `p` and `c`.
  void launchAttention(const AttentionProblem &p, const AttentionConfig &c,
                       const AttentionArgs &args, void *stream = nullptr);
  /// The config `attention` uses for this call's problem, remembered per
  /// problem like select(): the tuning DB's record (exact, then the
  /// seqlen bucket), else the heuristic, by RuntimeOptions::tune.
  AttentionConfig selectAttention(const AttentionProblem &p,
                                  const AttentionArgs &args);

  /// The mLSTM forward on `stream` with the dispatcher's choice for the
  /// call's (B, NH, S); see MlstmArgs for states and the workspace.
  void mlstm(const MlstmProblem &p, const MlstmArgs &args,
             void *stream = nullptr);
  /// The plan `mlstm` runs for this call, chosen (tuning DB record, exact
  /// or S bucket, else the heuristic, by RuntimeOptions::tune) and built on
  /// first use, then remembered per resolved problem.
  std::shared_ptr<const MlstmPlan> selectMlstm(const MlstmProblem &p,
                                               const MlstmArgs &args,
                                               void *stream = nullptr);
  /// Build an explicit mLSTM variant for `t` (default: this runtime's).
  std::shared_ptr<const MlstmPlan>
  compileMlstm(const MlstmProblem &p, const MlstmConfig &c,
               std::optional<Target> t = std::nullopt,
               void *captureStream = nullptr);
  /// Launch a built plan with the call's arguments.
  void launchMlstm(const MlstmPlan &plan, const MlstmArgs &args,
                   void *stream = nullptr);
  /// Workspace bytes a call of `plan` needs (per-head counters, and the
  /// per-chunk states of the two-phase variant).
  static size_t mlstmWorkspace(const MlstmPlan &plan, const MlstmArgs &args);

  /// Frees the workspace kept for `stream` (after waiting for its work):
  /// split-K partials and counters, and the persistent attention kernel's
  /// tile counters. Call it before destroying a stream that ran split-K
  /// GEMMs or persistent attention; the runtime frees the others when it is
  /// destroyed.
  void releaseWorkspace(void *stream);

  /// The problem a call will run: `p` with M from args and alignments
  /// lowered to what the pointers and leading dimensions allow. Throws on
  /// invalid arguments (strides smaller than a row, null pointers).
  static GemmProblem resolve(const GemmProblem &p, const GemmArgs &args);

private:
  RuntimeOptions opts_;
  std::unique_ptr<Backend> backend_;
  std::string whyNoDevice_;
  Target target_;
  DiskCache cache_;
  BundleSet bundles_;
  std::unique_ptr<Compiler> compilers_[2];
  std::optional<CompilerIdentity> identities_[2];
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Kernel>> loaded_; ///< by cache key
  std::map<std::string, std::shared_ptr<Kernel>>
      dispatch_; ///< by resolved problem
  /// The tuning DB ($KGEN_TUNING_DB or <cache>/tuning.json) and this GPU's
  /// key in it, loaded on the first dispatch.
  std::optional<TuningDB> tuning_;
  DeviceKey tuningKey_;
  std::string tuningPath_;

  GemmConfig chooseConfig(const GemmProblem &resolved);

  /// Opens the tuning DB and this GPU's key on first need (mu_ held).
  void openTuningDb();
  /// Attention and mLSTM (lib/Runtime/FamilyDispatch.cpp): the DB's
  /// exact or bucket record, else the heuristic after noting the miss
  /// (offline), or the tuner's winner, saved (online).
  AttentionConfig chooseAttentionConfig(const AttentionProblem &p,
                                        void *stream);
  MlstmConfig chooseMlstmConfig(const MlstmProblem &p, void *stream);

  /// Attention: per problem the chosen config, its kernel and (split-KV)
  /// its combine function; the runtime's split-KV workspace.
  struct AttentionChoice {
    AttentionConfig config;
    std::shared_ptr<Kernel> kernel;
    Backend::Function combine = nullptr;
  };
  std::map<std::string, AttentionChoice> attentionDispatch_;
  std::shared_ptr<void> attentionWorkspace_;
  size_t attentionWorkspaceBytes_ = 0;
  AttentionChoice attentionChoice(const AttentionProblem &p,
                                  const AttentionConfig *forced, void *stream);
  void launchAttention(const AttentionProblem &p, const AttentionChoice &ch,
                       const AttentionArgs &args, void *stream);

  /// mLSTM dispatch table and workspace (lib/Runtime/MlstmRuntime.cpp);
  /// declared after backend_, so it is released first.
  struct MlstmState;
  std::shared_ptr<MlstmState> mlstm_;

  /// The kernel of a bundle entry compiled from `src`, loaded on the GPU.
  std::shared_ptr<Kernel> loadBundled(const BundleEntry &e,
                                      const KernelSource &src);

  std::shared_ptr<Kernel> build(const GemmProblem &p, const GemmConfig &c,
                                Target t, void *captureStream);

  /// Split-K's scratch (GemmWorkspace), owned here: one per stream, since
  /// launches on one stream are ordered and may share it; grown on demand
  /// (never during graph capture), freed with the runtime. The counters
  /// are zeroed when allocated and every launch leaves them zero.
  struct Workspace {
    void *partials = nullptr;
    size_t partialBytes = 0;
    void *counters = nullptr;
    size_t counterBytes = 0;
    /// A repack config's padded copies of A and B (GemmWorkspace::
    /// repackBytes), rewritten by every launch before its main loop.
    void *repack = nullptr;
    size_t repackBytes = 0;
  };
  std::map<void *, Workspace> workspaces_;
  const Workspace &workspace(void *stream, const GemmWorkspace &need);
  /// `words` zeroed counters of the stream's workspace (kernels leave them
  /// zero), or null where they would have to be allocated while the stream
  /// is being captured.
  unsigned *streamCounters(void *stream, int words);
};

} // namespace kgen

#endif // KGEN_KGEN_H
