//===- Tuner.cpp - Measure candidates, keep the fastest -------------------===//
//
// One thread (the caller's) drives the GPU: it checks and times candidates
// one at a time on its own stream. A pool of compile threads builds the
// candidates (Runtime::compile: nvrtc in parallel, hiprtc one at a time)
// in the order they were asked for, so the GPU times candidate i while
// candidate i+1, or the next problem's, is still compiling.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Tuner.h"
#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Templates.h"

// The mLSTM tests' host reference (fp64 recurrent form, fp32 naive forms,
// the error rule), shared with the tuner's mLSTM check; the runtime adds
// test/ to its private include path for it.
#include "MlstmHostReference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>

namespace kgen {

//===----------------------------------------------------------------------===//
// Keys and figures
//===----------------------------------------------------------------------===//

DeviceKey deviceKey(Runtime &rt) {
  Backend *b = rt.backend();
  if (!b)
    throw Error("no GPU: tuning records are keyed by the GPU they were "
                "measured on");
  CompilerIdentity cc = rt.compilerIdentity(targetInfo(rt.target()).vendor);
  return {b->deviceName(),       b->archName(), rt.target(), b->computeUnits(),
          std::string(kVersion), cc.name,       cc.version};
}

GemmProblem tuningProblem(const GemmProblem &p) {
  // Device allocations are aligned to 256 bytes at least; these addresses
  // stand for them, so only extents and leading dimensions lower alignment.
  GemmArgs a;
  a.a = reinterpret_cast<const void *>(uintptr_t(1) << 32);
  a.b = reinterpret_cast<const void *>(uintptr_t(2) << 32);
  a.c = reinterpret_cast<void *>(uintptr_t(3) << 32);
  a.bias = reinterpret_cast<const void *>(uintptr_t(4) << 32);
  a.residual = reinterpret_cast<const void *>(uintptr_t(5) << 32);
  a.m = p.m;
  return Runtime::resolve(p, a);
}

double gemmBytes(const GemmProblem &p) {
  double ab = sizeOf(p.ab), c = sizeOf(p.c);
  return double(p.m) * double(p.k) * ab + double(p.n) * double(p.k) * ab +
         double(p.m) * double(p.n) * c;
}

double gemmTflops(const GemmProblem &p, double us) {
  return us > 0 ? 2.0 * double(p.m) * double(p.n) * double(p.k) / (us * 1e6)
                : 0;
}

double gemmGbPerS(const GemmProblem &p, double us) {
  return us > 0 ? gemmBytes(p) / (us * 1e3) : 0;
}

double marginPercent(double winnerUs, double otherUs) {
  return winnerUs > 0 && otherUs > 0 ? (otherUs / winnerUs - 1) * 100 : 0;
}

//===----------------------------------------------------------------------===//
// Statistics
//===----------------------------------------------------------------------===//

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2)
    return v[h];
  double hi = v[h];
  return (*std::max_element(v.begin(), v.begin() + h) + hi) / 2;
}

namespace {
/// Runs a slow kernel gets before maxMs may stop it.
constexpr size_t kMinRunsPastMax = 10;
} // namespace

bool enoughRuns(size_t runs, double totalMs, const TunerOptions &o) {
  if (runs >= size_t(std::max(o.minRuns, 1)) && totalMs >= o.minMs)
    return true;
  return runs >= kMinRunsPastMax && totalMs >= o.maxMs;
}

size_t nextBatch(size_t runs, double totalMs, double perRunMs,
                 const TunerOptions &o, size_t cap) {
  perRunMs = std::max(perRunMs, 1e-6);
  auto runsFor = [&](double ms) {
    return ms > 0 ? size_t(std::ceil(ms / perRunMs)) : size_t(0);
  };
  size_t minRuns = size_t(std::max(o.minRuns, 1));
  size_t want =
      std::max(minRuns > runs ? minRuns - runs : 0, runsFor(o.minMs - totalMs));
  // A slow kernel stops at maxMs, after kMinRunsPastMax runs at least.
  size_t untilMax =
      std::max(runsFor(o.maxMs - totalMs),
               kMinRunsPastMax > runs ? kMinRunsPastMax - runs : size_t(1));
  return std::clamp<size_t>(std::min(want, untilMax), 1,
                            std::max<size_t>(cap, 1));
}

size_t rotationSets(size_t setBytes, size_t l2Bytes, const TunerOptions &o) {
  size_t target = std::max(o.rotateBytes, 2 * l2Bytes + 1);
  size_t sets = setBytes ? (target + setBytes - 1) / setBytes : 1;
  return std::clamp<size_t>(sets, 1, std::max<size_t>(o.maxSets, 1));
}

size_t graphLaunches(double us, size_t sets) {
  double want = us > 0 ? std::ceil(100.0 / us) : 1000;
  size_t n = size_t(std::clamp(want, 10.0, 1000.0));
  sets = std::max<size_t>(sets, 1);
  return (n + sets - 1) / sets * sets;
}

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

const char *toString(CandidateResult::Status s) {
  switch (s) {
  case CandidateResult::Status::Timed:
    return "timed";
  case CandidateResult::Status::CompileFailed:
    return "compile failed";
  case CandidateResult::Status::LaunchFailed:
    return "launch failed";
  case CandidateResult::Status::CheckFailed:
    return "check failed";
  }
  return "?";
}

void rankCandidates(std::vector<CandidateResult> &c) {
  auto firstExcluded = std::stable_partition(
      c.begin(), c.end(), [](const CandidateResult &r) { return r.ok(); });
  std::stable_sort(c.begin(), firstExcluded,
                   [](const CandidateResult &a, const CandidateResult &b) {
                     return a.us < b.us;
                   });
}

/// The winner's kernel and time in `m`, with the runner-up's and the
/// heuristic's (where they passed); `ranked` is sorted, its first passed.
static void setTimes(Measurement &m,
                     const std::vector<CandidateResult> &ranked) {
  m.kernel = ranked[0].kernel;
  m.timeUs = ranked[0].us;
  if (ranked.size() > 1 && ranked[1].ok())
    m.runnerUpUs = ranked[1].us;
  for (const CandidateResult &c : ranked)
    if (c.heuristic && c.ok())
      m.heuristicUs = c.us;
}

std::optional<TuningRecord>
winnerRecord(const GemmProblem &p, const std::vector<CandidateResult> &ranked) {
  if (ranked.empty() || !ranked[0].ok())
    return std::nullopt;
  const CandidateResult &w = ranked[0];
  TuningRecord r;
  setTimes(r, ranked);
  r.problem = p;
  r.config = w.config;
  r.tflops = gemmTflops(p, w.us);
  r.gbs = gemmGbPerS(p, w.us);
  return r;
}

const CandidateResult *TuneResult::winner() const {
  return !candidates.empty() && candidates[0].ok() ? &candidates[0] : nullptr;
}

const Measurement *TuneResult::measurement() const {
  if (record)
    return &*record;
  return familyRecord ? &*familyRecord : nullptr;
}

const CandidateResult *TuneResult::runnerUp() const {
  return candidates.size() > 1 && candidates[1].ok() ? &candidates[1] : nullptr;
}

const CandidateResult *TuneResult::heuristicResult() const {
  for (const CandidateResult &c : candidates)
    if (c.heuristic)
      return &c;
  return nullptr;
}

size_t TuneResult::failedCount() const {
  return size_t(
      std::count_if(candidates.begin(), candidates.end(),
                    [](const CandidateResult &c) { return !c.ok(); }));
}

//===----------------------------------------------------------------------===//
// Resume
//===----------------------------------------------------------------------===//

std::vector<size_t> pendingProblems(const TuningDB &db, const DeviceKey &key,
                                    const std::vector<GemmProblem> &problems,
                                    bool force) {
  std::vector<size_t> out;
  std::vector<GemmProblem> seen;
  for (size_t i = 0; i < problems.size(); ++i) {
    GemmProblem q = tuningProblem(mainLoopProblem(problems[i]));
    if (std::find(seen.begin(), seen.end(), q) != seen.end())
      continue;
    seen.push_back(q);
    if (force || db.lookup(key, q).kind != TuningDB::Match::Exact)
      out.push_back(i);
  }
  return out;
}

std::vector<size_t> pendingAnyProblems(const TuningDB &db, const DeviceKey &key,
                                       const std::vector<AnyProblem> &problems,
                                       bool force) {
  std::vector<size_t> out;
  std::vector<std::string> seen;
  for (size_t i = 0; i < problems.size(); ++i) {
    std::string id;
    bool exact = false;
    if (auto *g = std::get_if<GemmProblem>(&problems[i])) {
      GemmProblem q = tuningProblem(mainLoopProblem(*g));
      id = toJson(q).dump();
      exact = db.lookup(key, q).kind == TuningDB::Match::Exact;
    } else if (auto *a = std::get_if<AttentionProblem>(&problems[i])) {
      id = tuningProblemJson(*a).dump();
      exact = db.lookup(key, *a).kind == TuningDB::Match::Exact;
    } else {
      const auto &m = std::get<MlstmProblem>(problems[i]);
      id = tuningProblemJson(m).dump();
      exact = db.lookup(key, m).kind == TuningDB::Match::Exact;
    }
    if (std::find(seen.begin(), seen.end(), id) != seen.end())
      continue;
    seen.push_back(id);
    if (force || !exact)
      out.push_back(i);
  }
  return out;
}

void tuneAndRecord(
    const std::vector<size_t> &pending, TuningDB &db, const DeviceKey &key,
    const std::string &dbPath, const std::function<TuneResult(size_t)> &tuneOne,
    const std::function<void(size_t, const TuneResult &, bool)> &done) {
  for (size_t i : pending) {
    TuneResult r = tuneOne(i);
    bool stored = r.record         ? db.record(key, *r.record)
                  : r.familyRecord ? db.record(key, *r.familyRecord)
                                   : false;
    // Saved before the next problem starts: a kill loses only that one.
    db.mergeAndSave(dbPath);
    if (done)
      done(i, r, stored);
  }
}

//===----------------------------------------------------------------------===//
// The reference on the GPU
//===----------------------------------------------------------------------===//

GemmReference::GemmReference(Runtime &rt, const GemmProblem &p)
    : be_(rt.backend()), name_(gemmReferenceName(p)) {
  const Target t = rt.target();
  if (!be_ || be_->target() != t)
    throw Error("the reference " + name_ + " runs on a GPU of target " +
                std::string(toString(t)) + ", and there is none");
  KernelSource src = emitGemmReference(p, t);
  Compiler &cc = rt.compiler(targetInfo(t).vendor);
  CacheKeyInput in;
  in.source = src.source;
  for (const std::string &h : src.headers)
    in.headerTexts.push_back(std::string(templateText(h)));
  in.compiler = cc.name();
  in.compilerVersion = cc.version();
  in.options = cc.options(t);
  in.target = t;
  DiskCache::Result r = rt.cache().getOrCompile(
      t, cacheKey(in), src.name, [&] { return cc.compile(src); });
  Backend::Module m = be_->loadModule(r.binary);
  gemm_ = be_->getFunction(m, name_);
  fill_ = be_->getFunction(m, gemmReferenceFillName(p));
}

void GemmReference::run(const GemmProblem &call, const GemmArgs &args,
                        double *ref, void *naive, void *stream) const {
  if (gemmReferenceName(call) != name_)
    throw Error("reference " + name_ + " cannot run " +
                gemmReferenceName(call) + " (other dtypes or layout)");
  const int64_t M = args.m < 0 ? call.m : args.m;
  const void *a = args.a, *b = args.b, *c = args.c;
  int m = int(M), n = int(call.n), k = int(call.k);
  long long lda = args.lda ? args.lda : (call.transA ? M : call.k);
  long long ldb = args.ldb ? args.ldb : (call.transB ? call.k : call.n);
  long long ldc = args.ldc ? args.ldc : call.n;
  float alpha = args.alpha, beta = args.beta;
  const float *scaleA = args.scaleA, *scaleB = args.scaleB;
  void *params[] = {&a,   &b,     &c,    &m,   &n,     &k,      &lda,   &ldb,
                    &ldc, &alpha, &beta, &ref, &naive, &scaleA, &scaleB};
  be_->launch(gemm_, gemmReferenceLaunchDims(M, call.n), params, stream);
}

void GemmReference::fill(void *p, int64_t count, DType t, uint64_t seed,
                         bool poison, void *stream) const {
  long long n = count;
  int type = referenceTypeCode(t), poisonFlag = poison;
  unsigned long long s = seed;
  void *params[] = {&p, &n, &type, &s, &poisonFlag};
  be_->launch(fill_, referenceFillLaunchDims(count), params, stream);
}

//===----------------------------------------------------------------------===//
// The attention reference on the GPU
//===----------------------------------------------------------------------===//

namespace {

/// What the attention reference may ask for (sm_80's opt-in limit, below
/// sm_90's).
constexpr size_t kMaxSharedBytes = 163 * 1024;

/// The reference kernel's argument (same layout on host and device). `in`
/// is Q's, K's and V's type, `out` O's and the bias's (kgen::reference's
/// codes: referenceTypeCode); qd, kd, vd the descale factors (null: 1).
#define KGEN_ATTN_REF_ARGS                                                     \
  struct AttnRefArgs {                                                         \
    const void *q, *k, *v, *bias;                                              \
    const float *slopes, *qd, *kd, *vd;                                        \
    const int *cuQ, *cuK;                                                      \
    float *refO, *refLse;                                                      \
    void *naiveO;                                                              \
    int in, out, batch, hq, hkv, sq, sk, dqk, dv;                              \
    int causal, wl, wr, varlen, alibi, hasBias;                                \
    long long sQ[3], sK[3], sV[3];                                             \
    float scale;                                                               \
  };
KGEN_ATTN_REF_ARGS
#define KGEN_ATTN_STR2(...) #__VA_ARGS__
#define KGEN_ATTN_STR(...) KGEN_ATTN_STR2(__VA_ARGS__)

/// ref: the mask built explicitly from the problem's definition, scores and
/// softmax in fp32 from the exact (decoded, descaled) inputs, O and LSE in
/// fp32. naive: the same-dtype implementation, its error the tolerance's
/// basis:
///   16-bit inputs: scores rounded to the dtype, fp32 softmax, P rounded
///     to the dtype, fp32 P V rounded to the dtype;
///   fp8 inputs: scores (Q K^T * qDescale * kDescale, fp32 from the decoded
///     values) rounded to O's bf16, as an fp8 scaled matmul into bf16 gives
///     them; fp32 softmax with bias and masks as above; P rounded to the
///     inputs' fp8 type, as the kernel feeds it to an fp8 P V; P (V *
///     vDescale) summed in fp32 and rounded to bf16. P is rounded before
///     the division by the row sum, exp(s - max) in [0, 1] as the kernel
///     (and FlashAttention-3's fp8 forward) rounds it: a normalized P of a
///     long row (1/2048) lies below e4m3's smallest subnormal (2^-9) and
///     would round to 0, a naive O of 0 bounding nothing.
/// The conversions are the GEMM reference's (templates/gemm/reference.h),
/// none of the kernels'. One block of 128 threads per (row, head, batch);
/// dynamic shared memory 2 * sk + 128 floats.
const char *kAttnRefBody = R"(
using namespace kgen::reference;
__device__ bool isFp8(int type) { return type == kE4m3 || type == kE5m2; }
// x rounded to `type` and back; fp8 only for |x| < 2 (roundFp8's range: P).
__device__ float rt(float x, int type) {
  if (isFp8(type)) return decodeFp8(roundFp8(x, type), type);
  if (type == kBf16) return fromBits(u32(roundBf16(x)) << 16);
  return decodeF16(roundF16(x));
}
__device__ float blockMax(float x, float *red) {
  red[threadIdx.x] = x; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  float r = red[0]; __syncthreads(); return r;
}
__device__ float blockSum(float x, float *red) {
  red[threadIdx.x] = x; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  float r = red[0]; __syncthreads(); return r;
}
extern "C" __global__ void kgen_attn_reference(AttnRefArgs a) {
  extern __shared__ float sm[];
  float *s = sm, *sn = sm + a.sk, *red = sm + 2 * a.sk;
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  int sq = a.sq, sk = a.sk; long long oq = 0, ok = 0;
  if (a.varlen) { oq = a.cuQ[b]; ok = a.cuK[b]; sq = a.cuQ[b + 1] - oq; sk = a.cuK[b + 1] - ok; }
  if (i >= sq) return;
  const int hk = h / (a.hq / a.hkv);
  const long long bq = a.varlen ? 0 : b;
  const bool fp8 = isFp8(a.in);
  const float qk = (a.qd ? *a.qd : 1.f) * (a.kd ? *a.kd : 1.f);
  const float vs = a.vd ? *a.vd : 1.f;
  const long long q = bq * a.sQ[0] + (oq + i) * a.sQ[1] + h * a.sQ[2];
  const float ninf = __int_as_float(0xff800000);
  float mx = ninf, mxn = ninf;
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    const int off = sk - sq;
    bool vis = true;
    if (a.causal && j > i + off) vis = false;
    if (a.wr >= 0 && j > i + off + a.wr) vis = false;
    if (a.wl >= 0 && j < i + off - a.wl) vis = false;
    float x = ninf, xn = ninf;
    if (vis) {
      const long long k = bq * a.sK[0] + (ok + j) * a.sK[1] + hk * a.sK[2];
      float dot = 0.f;
      for (int d = 0; d < a.dqk; ++d) dot = fmaf(load(a.q, q + d, a.in), load(a.k, k + d, a.in), dot);
      dot *= qk; // exact for 16-bit inputs (qk = 1)
      float add = 0.f;
      if (a.alibi) add -= a.slopes[h] * fabsf(float(i + off - j));
      if (a.hasBias) add += load(a.bias, (((long long)b * a.hq + h) * a.sq + i) * a.sk + j, a.out);
      x = dot * a.scale + add;
      xn = rt(dot, a.out) * a.scale + add;
    }
    s[j] = x; sn[j] = xn;
    mx = fmaxf(mx, x); mxn = fmaxf(mxn, xn);
  }
  mx = blockMax(mx, red); mxn = blockMax(mxn, red);
  float l = 0.f, ln = 0.f;
  for (int j = threadIdx.x; j < sk; j += blockDim.x) {
    const float e = mx == ninf ? 0.f : expf(s[j] - mx);
    const float en = mxn == ninf ? 0.f : expf(sn[j] - mxn);
    s[j] = e; sn[j] = en; l += e; ln += en;
  }
  l = blockSum(l, red); ln = blockSum(ln, red);
  const long long row = ((long long)b * a.hq + h) * a.sq + i;
  for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
    float o = 0.f, on = 0.f;
    for (int j = 0; j < sk; ++j) {
      if (s[j] == 0.f && sn[j] == 0.f) continue;
      const float vv = load(a.v, bq * a.sV[0] + (ok + j) * a.sV[1] + hk * a.sV[2] + d, a.in) * vs;
      o = fmaf(s[j] / l, vv, o);
      on = fmaf(fp8 ? rt(sn[j], a.in) : rt(sn[j] / ln, a.in), vv, on);
    }
    a.refO[row * a.dv + d] = l > 0.f ? o : 0.f;
    store(a.naiveO, row * a.dv + d, a.out, ln > 0.f ? (fp8 ? on / ln : on) : 0.f);
  }
  if (threadIdx.x == 0) a.refLse[row] = l > 0.f ? mx + logf(l) : ninf;
}
)";

} // namespace

KernelSource attentionReferenceSource(Target t) {
  KernelSource ks;
  ks.name = "kgen_attn_reference";
  ks.target = t;
  ks.headers = {std::string(kHipRuntimeNvidia), "kgen/gemm/reference.h"};
  ks.source = std::string("#include <hip/hip_runtime.h>\n"
                          "#include \"kgen/gemm/reference.h\"\n") +
              KGEN_ATTN_STR(KGEN_ATTN_REF_ARGS) + "\n" + kAttnRefBody;
  return ks;
}

AttentionReference::AttentionReference(Runtime &rt) : be_(rt.backend()) {
  const Target t = rt.target();
  if (!be_ || be_->target() != t)
    throw Error("the attention reference runs on a GPU of target " +
                std::string(toString(t)) + ", and there is none");
  if (targetInfo(t).vendor != Vendor::NVIDIA)
    throw Error("the attention reference kernel is NVIDIA-only (its dtype "
                "conversions are inline PTX); tuning attention on " +
                std::string(toString(t)) + " needs an AMD port of it");
  fn_ = rt.compileSource(attentionReferenceSource(t))->function;
}

void AttentionReference::run(const AttentionProblem &p, const AttentionArgs &in,
                             float *refO, float *refLse, void *naiveO,
                             void *stream) const {
  const int64_t batch = in.batch < 0 ? p.batch : in.batch;
  const int64_t sq = in.seqlenQ < 0 ? p.seqlenQ : in.seqlenQ;
  const int64_t sk = in.seqlenK < 0 ? p.seqlenK : in.seqlenK;
  if (size_t(2 * sk + 128) * 4 > kMaxSharedBytes)
    throw Error("the attention reference holds a row's scores in shared "
                "memory: seqlen_k = " +
                std::to_string(sk) + " is more than it fits (" +
                std::to_string((kMaxSharedBytes / 4 - 128) / 2) + ")");
  AttnRefArgs a{};
  a.q = in.q;
  a.k = in.k;
  a.v = in.v;
  a.bias = in.bias;
  a.slopes = in.alibiSlopes;
  a.qd = in.qDescale;
  a.kd = in.kDescale;
  a.vd = in.vDescale;
  a.cuQ = in.cuSeqlensQ;
  a.cuK = in.cuSeqlensK;
  a.refO = refO;
  a.refLse = refLse;
  a.naiveO = naiveO;
  a.in = referenceTypeCode(p.dtype);
  a.out = referenceTypeCode(attentionOutputDType(p));
  a.batch = int(batch);
  a.hq = int(p.headsQ);
  a.hkv = int(p.headsKv);
  a.sq = int(sq);
  a.sk = int(sk);
  a.dqk = p.headDimQk;
  a.dv = p.headDimV;
  a.causal = p.causal;
  a.wl = p.windowLeft;
  a.wr = p.windowRight;
  a.varlen = p.varlen;
  a.alibi = p.alibi;
  a.hasBias = p.bias;
  for (int i = 0; i < 3; ++i) {
    a.sQ[i] = in.strideQ[i];
    a.sK[i] = in.strideK[i];
    a.sV[i] = in.strideV[i];
  }
  a.scale = in.scale != 0.f ? in.scale : 1.f / std::sqrt(float(p.headDimQk));
  LaunchDims d{};
  d.grid[0] = unsigned(sq);
  d.grid[1] = unsigned(p.headsQ);
  d.grid[2] = unsigned(batch);
  d.block[0] = 128;
  d.block[1] = d.block[2] = 1;
  d.smemBytes = unsigned((2 * sk + 128) * 4);
  void *params[] = {&a};
  be_->launch(fn_, d, params, stream);
}

//===----------------------------------------------------------------------===//
// The tuner
//===----------------------------------------------------------------------===//

namespace {

using Clock = std::chrono::steady_clock;

size_t roundUp256(size_t v) { return (v + 255) / 256 * 256; }

/// Event pairs one timing batch may use.
constexpr size_t kPairs = 128;

/// Runs `f`, dropping errors: for cleanup while unwinding, when after a
/// kernel fault every call fails.
template <class F> void quietly(F &&f) {
  try {
    f();
  } catch (...) {
  }
}

/// One problem's stream and timing events. The destructor runs `finish`
/// (the cleanup of what the runtime keeps for the stream), waits for the
/// stream and frees.
class Bench {
public:
  explicit Bench(Backend &be) : be_(be) {
    try {
      stream = be.createStream();
      for (size_t i = 0; i < 2 * kPairs; ++i)
        events.push_back(be.createEvent());
    } catch (...) {
      release();
      throw;
    }
  }
  ~Bench() { release(); }
  Bench(const Bench &) = delete;
  Bench &operator=(const Bench &) = delete;

  void *stream = nullptr;
  std::vector<Backend::Event> events;
  std::function<void()> finish;

private:
  Backend &be_;
  void release() {
    if (finish)
      quietly(finish);
    if (stream)
      quietly([&] { be_.synchronizeStream(stream); });
    for (Backend::Event e : events)
      quietly([&] { be_.destroyEvent(e); });
    events.clear();
    if (stream)
      quietly([&] { be_.destroyStream(stream); });
    stream = nullptr;
  }
};

/// Device buffers freed on scope exit (the Bench's stream is idle by then:
/// cases outlive the loop's Bench).
class Buffers {
public:
  explicit Buffers(Backend &be) : be_(be) {}
  ~Buffers() {
    for (void *p : ptrs_)
      quietly([&] { be_.free(p); });
  }
  Buffers(const Buffers &) = delete;
  Buffers &operator=(const Buffers &) = delete;
  void *alloc(size_t bytes) {
    ptrs_.push_back(nullptr);
    ptrs_.back() = be_.alloc(std::max<size_t>(bytes, 16));
    return ptrs_.back();
  }

private:
  Backend &be_;
  std::vector<void *> ptrs_;
};

/// Destroys an instantiated graph on scope exit.
struct GraphGuard {
  Backend &be;
  Backend::GraphExec g = nullptr;
  ~GraphGuard() {
    if (g)
      quietly([&] { be.destroyGraph(g); });
  }
};

/// A built candidate, whatever its family builds (a Kernel, an MlstmPlan).
using Built = std::shared_ptr<const void>;

/// Waits until its argument returns true (see Tuner::Case::prepare).
using Wait = std::function<void(const std::function<bool()> &)>;

template <class T> bool isReady(const std::shared_future<T> &f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

} // namespace

/// The family-specific half of tuning one problem; Tuner::Impl::run is the
/// other half, the one loop every family goes through (compile futures,
/// progress, the numeric check, timing, ranking).
class Tuner::Case {
public:
  virtual ~Case() = default;
  /// Candidates, best guess first: their result rows (config, kernel name,
  /// heuristic flag) and builds (futures of the compile pool).
  virtual std::vector<CandidateResult> candidates() const = 0;
  virtual std::vector<std::shared_future<Built>> builds() = 0;
  /// Allocates and fills the rotated input sets on `stream`, runs the
  /// reference; returns the number of sets. `wait(ready)` polls `ready`
  /// until it holds, keeping the progress bar alive and honouring stop
  /// requests (for a reference still compiling).
  virtual size_t prepare(Bench &b, const Wait &wait) = 0;
  /// The check of candidate `i` (built as `k`): poison() the output, run
  /// the check call once (the loop then synchronizes the stream), and
  /// compare() reads the result back against the reference.
  virtual void poison(void *stream) = 0;
  virtual void launchCheck(size_t i, const Built &k, void *stream) = 0;
  virtual ReferenceCheck compare() = 0;
  /// A timed call of candidate `i` on input set `set % sets`.
  virtual void launch(size_t i, const Built &k, size_t set, void *stream) = 0;
  virtual double tflops(double us) const = 0;
  virtual double gbs(double us) const = 0;
  /// The winner as the family's record (TuneResult::record or
  /// ::familyRecord).
  virtual void record(TuneResult &res) const = 0;
};

struct Tuner::Impl {
  Runtime &rt;
  TunerOptions o;
  Backend *be = nullptr;
  Target target;
  bool graphs = true; ///< false once capture failed: time launch by launch

  // The compile pool: jobs run first in, first out.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool quit = false;
  std::vector<std::thread> threads;
  // Only the tuning thread touches these: builds by kernel name (the names
  // of the three families never collide), references by name.
  std::map<std::string, std::shared_future<Built>> kernels;
  std::map<std::string, std::shared_future<std::shared_ptr<GemmReference>>>
      references;
  std::optional<std::shared_future<std::shared_ptr<AttentionReference>>>
      attentionReference;

  Impl(Runtime &rt, TunerOptions opts) : rt(rt), o(std::move(opts)) {}

  template <class T, class F> std::shared_future<T> submit(F f) {
    auto task = std::make_shared<std::packaged_task<T()>>(std::move(f));
    std::shared_future<T> fut = task->get_future().share();
    {
      std::lock_guard<std::mutex> lock(mu);
      jobs.push_back([task] { (*task)(); });
    }
    cv.notify_one();
    return fut;
  }

  /// The build of `name` (submitted once).
  template <class F>
  std::shared_future<Built> build(const std::string &name, F f) {
    auto it = kernels.find(name);
    if (it == kernels.end())
      it = kernels.emplace(name, submit<Built>([f] { return Built(f()); }))
               .first;
    return it->second;
  }

  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return quit || !jobs.empty(); });
        if (quit)
          return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job(); // a packaged_task: exceptions go to its future
    }
  }

  bool stopRequested() const { return o.stopRequested && o.stopRequested(); }

  /// Waits for `f`, reporting progress and honouring stop requests.
  template <class T>
  T wait(const std::shared_future<T> &f, const std::function<void()> &tick) {
    while (f.wait_for(std::chrono::milliseconds(100)) !=
           std::future_status::ready) {
      if (stopRequested())
        throw TuneInterrupted();
      tick();
    }
    return f.get();
  }

  TuneResult run(Case &tc, TuneResult res, Clock::time_point t0);
  void time(const std::function<void(size_t)> &launch, Bench &b, size_t sets,
            Case &tc, CandidateResult &cr, TuneResult &res);
  double sample(Bench &b, size_t n, const std::function<void()> &run,
                std::vector<double> &out, double scale);
};

Tuner::Tuner(Runtime &rt, TunerOptions opts)
    : impl_(std::make_unique<Impl>(rt, std::move(opts))) {
  Impl &I = *impl_;
  I.be = rt.backend();
  I.target = rt.target();
  if (!I.be)
    throw Error("tuning needs a GPU, and none was found");
  if (I.be->target() != I.target)
    throw Error("the runtime compiles for " + std::string(toString(I.target)) +
                " but its GPU is " + std::string(toString(I.be->target())) +
                ": tune for the GPU's own target");
  // Open the compiler here, on one thread: the pool then only reads it.
  rt.compiler(targetInfo(I.target).vendor);
  unsigned n = I.o.compileThreads ? I.o.compileThreads
                                  : std::thread::hardware_concurrency();
  for (unsigned i = 0; i < std::max(n, 1u); ++i)
    I.threads.emplace_back([&I] { I.work(); });
}

Tuner::~Tuner() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->quit = true;
    impl_->jobs.clear(); // their futures report broken promises; unread
  }
  impl_->cv.notify_all();
  for (std::thread &t : impl_->threads)
    t.join();
}

const TunerOptions &Tuner::options() const { return impl_->o; }

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

TuneResult Tuner::Impl::run(Case &tc, TuneResult res, Clock::time_point t0) {
  const std::vector<CandidateResult> rows = tc.candidates();
  const std::vector<std::shared_future<Built>> futures = tc.builds();
  TuneProgress prog;
  prog.candidates = rows.size();
  auto tick = [&] {
    prog.compiled =
        size_t(std::count_if(futures.begin(), futures.end(), [](const auto &f) {
          return f.wait_for(std::chrono::seconds(0)) ==
                 std::future_status::ready;
        }));
    if (o.progress)
      o.progress(prog);
  };
  tick();

  Bench bench(*be);
  // Split-K GEMMs and persistent attention get a runtime-owned workspace on
  // the stream; it is freed before the Bench destroys the stream.
  bench.finish = [&rt = rt, s = bench.stream] { rt.releaseWorkspace(s); };
  const size_t sets =
      tc.prepare(bench, [&](const std::function<bool()> &ready) {
        while (!ready()) {
          if (stopRequested())
            throw TuneInterrupted();
          tick();
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
  res.sets = sets;

  for (size_t i = 0; i < rows.size(); ++i) {
    if (stopRequested())
      throw TuneInterrupted();
    CandidateResult cr = rows[i];
    auto exclude = [&](CandidateResult::Status s, const std::string &why) {
      cr.status = s;
      cr.error = why;
      ++prog.failed;
      res.candidates.push_back(cr);
      tick();
    };

    Built k;
    try {
      k = wait(futures[i], tick);
    } catch (const TuneInterrupted &) {
      throw;
    } catch (const std::exception &e) {
      exclude(CandidateResult::Status::CompileFailed, e.what());
      continue;
    }

    // The check: one call on set 0 with the output poisoned, so an
    // unwritten element shows as NaN.
    tc.poison(bench.stream);
    try {
      tc.launchCheck(i, k, bench.stream);
    } catch (const Error &e) {
      exclude(CandidateResult::Status::LaunchFailed, e.what());
      continue;
    }
    try {
      be->synchronizeStream(bench.stream);
    } catch (const Error &e) {
      throw Error("candidate " + cr.kernel + " failed on the device (" +
                  e.what() +
                  "); the GPU context is unusable after a fault, so tuning "
                  "stops here. This is a kgen bug: please report it with "
                  "the problem");
    }
    cr.check = tc.compare();
    cr.checked = true;
    ++prog.checked;
    if (!cr.check.pass()) {
      exclude(CandidateResult::Status::CheckFailed,
              "wrong results: " + cr.check.describe());
      continue;
    }
    tick();

    try {
      time([&](size_t j) { tc.launch(i, k, j, bench.stream); }, bench, sets, tc,
           cr, res);
    } catch (const TuneInterrupted &) {
      throw;
    } catch (const Error &e) {
      try {
        be->synchronizeStream(bench.stream);
      } catch (const Error &dead) {
        throw Error("candidate " + cr.kernel + " failed on the device (" +
                    dead.what() +
                    ") while being timed; the GPU context is "
                    "unusable, so tuning stops here");
      }
      exclude(CandidateResult::Status::LaunchFailed, e.what());
      continue;
    }
    ++prog.timed;
    res.candidates.push_back(cr);
    tick();
  }

  rankCandidates(res.candidates);
  tc.record(res);
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

/// Runs `n` timed samples (`run` between an event pair each), appends each
/// one's milliseconds times `scale` to `out`, returns the measured total.
double Tuner::Impl::sample(Bench &b, size_t n, const std::function<void()> &run,
                           std::vector<double> &out, double scale) {
  n = std::min(n, kPairs);
  for (size_t i = 0; i < n; ++i) {
    be->recordEvent(b.events[2 * i], b.stream);
    run();
    be->recordEvent(b.events[2 * i + 1], b.stream);
  }
  be->synchronizeEvent(b.events[2 * n - 1]);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    double ms = be->elapsedMs(b.events[2 * i], b.events[2 * i + 1]);
    total += ms;
    out.push_back(ms * scale);
  }
  return total;
}

void Tuner::Impl::time(const std::function<void(size_t)> &launch, Bench &b,
                       size_t sets, Case &tc, CandidateResult &cr,
                       TuneResult &res) {
  size_t j = 0;
  auto launchNext = [&] { launch(j++); };

  // A first estimate from single launches, after a few untimed ones.
  for (int i = 0; i < 3; ++i)
    launchNext();
  std::vector<double> first;
  sample(b, 5, launchNext, first, 1.0);
  const double estMs = std::max(median(first), 1e-4);
  // Warm-up: clocks up, caches and TLBs in their steady state.
  size_t warm = size_t(std::clamp(std::ceil(o.warmupMs / estMs), 1.0, 5000.0));
  for (size_t i = 0; i < warm; ++i)
    launchNext();

  GraphGuard graph{*be};
  size_t perGraph = 1;
  if (graphs && estMs * 1000 < o.graphBelowUs) {
    perGraph = graphLaunches(estMs * 1000, sets);
    try {
      be->beginCapture(b.stream);
      try {
        for (size_t i = 0; i < perGraph; ++i)
          launchNext();
      } catch (...) {
        quietly([&] { be->destroyGraph(be->endCapture(b.stream)); });
        throw;
      }
      graph.g = be->endCapture(b.stream);
      be->launchGraph(graph.g, b.stream); // the replay's own warm-up
    } catch (const Error &e) {
      // Without graphs small kernels are timed launch by launch, which
      // overstates them by the launch overhead; say so once.
      graphs = false;
      if (graph.g)
        quietly([&] { be->destroyGraph(graph.g); });
      graph.g = nullptr;
      perGraph = 1;
      res.notes.push_back(std::string("graph replay failed (") + e.what() +
                          "); kernels under " +
                          std::to_string(int(o.graphBelowUs)) +
                          " us are timed launch by launch from here on");
    }
  }

  std::vector<double> samples;
  double totalMs = 0, perRunMs = estMs * double(perGraph);
  const double scale = 1.0 / double(perGraph);
  std::function<void()> run = launchNext;
  if (graph.g)
    run = [&] { be->launchGraph(graph.g, b.stream); };
  while (!enoughRuns(samples.size(), totalMs, o)) {
    if (stopRequested())
      throw TuneInterrupted();
    size_t n = nextBatch(samples.size(), totalMs, perRunMs, o, kPairs);
    totalMs += sample(b, n, run, samples, scale);
    perRunMs = totalMs / double(samples.size());
  }
  cr.us = median(samples) * 1000;
  cr.runs = samples.size();
  cr.timedMs = totalMs;
  cr.graph = graph.g != nullptr;
  cr.perGraph = graph.g ? perGraph : 0;
  cr.tflops = tc.tflops(cr.us);
  cr.gbs = tc.gbs(cr.us);
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

namespace {

/// A case's candidates in its configs' order: `fill` sets the config and
/// kernel name of each, the heuristic's is flagged.
template <class Config, class Fill>
std::vector<CandidateResult> candidateList(const std::vector<Config> &configs,
                                           const Config &heuristic, Fill fill) {
  std::vector<CandidateResult> out;
  for (const Config &c : configs) {
    CandidateResult cr;
    fill(cr, c);
    cr.heuristic = c == heuristic;
    out.push_back(std::move(cr));
  }
  return out;
}

class GemmCase : public Tuner::Case {
public:
  GemmCase(Runtime &rt, Backend &be, const TunerOptions &o, Target t,
           const GemmProblem &r,
           std::shared_future<std::shared_ptr<GemmReference>> ref,
           std::vector<std::shared_future<Built>> builds)
      : rt_(rt), be_(be), o_(o), t_(t), r_(r), ref_(std::move(ref)),
        builds_(std::move(builds)), bufs_(be) {
    configs_ = enumerateConfigs(r, t);
    heuristic_ = defaultConfig(r, t);
  }

  std::vector<CandidateResult> candidates() const override {
    return candidateList(configs_, heuristic_,
                         [&](CandidateResult &cr, const GemmConfig &c) {
                           cr.config = c;
                           cr.kernel = gemmKernelName(r_, c, t_);
                         });
  }
  std::vector<std::shared_future<Built>> builds() override { return builds_; }

  size_t prepare(Bench &b, const Wait &wait) override {
    aBytes_ = size_t(r_.m * r_.k * sizeOf(r_.ab));
    bBytes_ = size_t(r_.n * r_.k * sizeOf(r_.ab));
    cBytes_ = size_t(r_.m * r_.n * sizeOf(r_.c));
    offB_ = roundUp256(aBytes_);
    offC_ = offB_ + roundUp256(bBytes_);
    setBytes_ = offC_ + roundUp256(cBytes_);
    sets_ = rotationSets(setBytes_, be_.l2Bytes(), o_);
    pool_ = static_cast<char *>(bufs_.alloc(sets_ * setBytes_));
    double *ref = static_cast<double *>(bufs_.alloc(size_t(r_.m * r_.n) * 8));
    void *naive = bufs_.alloc(cBytes_);
    stream_ = b.stream;
    wait([&] { return isReady(ref_); });
    std::shared_ptr<GemmReference> reference = ref_.get();
    // Inputs: uniform in [-1, 1), a different stream of values per set. C
    // is never read (beta = 0); the check poisons it.
    for (size_t s = 0; s < sets_; ++s) {
      reference->fill(a(s), r_.m * r_.k, r_.ab, o_.seed + 2 * s + 1, false,
                      b.stream);
      reference->fill(bm(s), r_.n * r_.k, r_.ab, o_.seed + 2 * s + 2, false,
                      b.stream);
      be_.memsetAsync(c(s), 0, cBytes_, b.stream);
    }
    reference->run(r_, args(0), ref, naive, b.stream);
    be_.synchronizeStream(b.stream);
    refH_.resize(size_t(r_.m * r_.n));
    naiveH_.resize(cBytes_);
    ours_.resize(cBytes_);
    be_.copyToHost(refH_.data(), ref, refH_.size() * sizeof(double));
    be_.copyToHost(naiveH_.data(), naive, cBytes_);
    return sets_;
  }

  void poison(void *stream) override {
    be_.memsetAsync(c(0), 0xff, cBytes_, stream);
  }
  void launchCheck(size_t i, const Built &k, void *stream) override {
    launch(i, k, 0, stream);
  }
  void launch(size_t, const Built &k, size_t set, void *stream) override {
    rt_.launch(*static_cast<const Kernel *>(k.get()), args(set), stream);
  }
  ReferenceCheck compare() override {
    be_.copyToHost(ours_.data(), c(0), cBytes_);
    return checkAgainstReference(r_.c, r_.m, r_.n, ours_.data(), r_.n,
                                 refH_.data(), naiveH_.data());
  }
  double tflops(double us) const override { return gemmTflops(r_, us); }
  double gbs(double us) const override { return gemmGbPerS(r_, us); }
  void record(TuneResult &res) const override {
    res.record = winnerRecord(r_, res.candidates);
  }

private:
  Runtime &rt_;
  Backend &be_;
  const TunerOptions &o_;
  Target t_;
  GemmProblem r_;
  std::shared_future<std::shared_ptr<GemmReference>> ref_;
  std::vector<std::shared_future<Built>> builds_;
  std::vector<GemmConfig> configs_;
  GemmConfig heuristic_;
  Buffers bufs_;
  char *pool_ = nullptr;
  void *stream_ = nullptr;
  size_t aBytes_ = 0, bBytes_ = 0, cBytes_ = 0, offB_ = 0, offC_ = 0,
         setBytes_ = 0, sets_ = 1;
  std::vector<double> refH_;
  std::vector<char> naiveH_, ours_;

  char *a(size_t set) const { return pool_ + set * setBytes_; }
  char *bm(size_t set) const { return a(set) + offB_; }
  char *c(size_t set) const { return a(set) + offC_; }
  /// The timed call on input set `j % sets`: packed, beta = 0.
  GemmArgs args(size_t j) const {
    GemmArgs g;
    size_t s = j % sets_;
    g.a = a(s);
    g.b = bm(s);
    g.c = c(s);
    g.m = r_.m;
    return g;
  }
};

} // namespace

void Tuner::prefetch(const GemmProblem &p) {
  Impl &I = *impl_;
  GemmProblem r = tuningProblem(mainLoopProblem(p));
  if (checkProblemOnTarget(r, I.target))
    return; // tune() reports it
  // The reference first: tune() needs it before any candidate.
  std::string ref = gemmReferenceName(r);
  if (!I.references.count(ref))
    I.references[ref] = I.submit<std::shared_ptr<GemmReference>>(
        [&rt = I.rt, r] { return std::make_shared<GemmReference>(rt, r); });
  for (const GemmConfig &c : enumerateConfigs(r, I.target))
    I.build(gemmKernelName(r, c, I.target),
            [&rt = I.rt, r, c] { return rt.compile(r, c); });
}

TuneResult Tuner::tune(const GemmProblem &p) {
  Impl &I = *impl_;
  const auto t0 = Clock::now();
  TuneResult res;
  // The epilogue and the batch count leave the main loop, and so the best
  // tile config, as they are: the plain problem is measured (against the
  // plain reference) and recorded; the dispatcher falls back to it.
  res.problem = tuningProblem(mainLoopProblem(p));
  res.target = I.target;
  const GemmProblem &r = res.problem;
  if (auto e = checkProblemOnTarget(r, I.target))
    throw Error(*e);
  res.heuristic = defaultConfig(r, I.target);
  prefetch(r);
  std::vector<std::shared_future<Built>> builds;
  for (const GemmConfig &c : enumerateConfigs(r, I.target))
    builds.push_back(I.kernels.at(gemmKernelName(r, c, I.target)));
  GemmCase tc(I.rt, *I.be, I.o, I.target, r,
              I.references.at(gemmReferenceName(r)), std::move(builds));
  return I.run(tc, std::move(res), t0);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// The call each attention candidate is checked on: the problem's own, with
/// batch capped at 2 (a batch index changes no code path) and, past what
/// the reference holds in shared memory, seqlen_k capped at 16384 (and
/// seqlen_q with it, so a causal mask keeps its bottom-right shape).
AttentionProblem attentionCheckCall(const AttentionProblem &p) {
  AttentionProblem c = p;
  c.batch = std::min<int64_t>(p.batch, 2);
  if (c.seqlenK > 16384) {
    c.seqlenK = 16384;
    c.seqlenQ = std::min<int64_t>(c.seqlenQ, 16384);
  }
  return c;
}

/// Packed strides {batch, seq, head} of a tensor (AttentionArgs' order).
void packedStrides(const AttentionProblem &p, int64_t seqlen, int64_t heads,
                   int64_t dim, int64_t (&s)[3]) {
  if (p.varlen || p.layout == AttentionLayout::BSHD) {
    s[0] = p.varlen ? 0 : seqlen * heads * dim;
    s[1] = heads * dim;
    s[2] = dim;
  } else {
    s[0] = heads * seqlen * dim;
    s[1] = dim;
    s[2] = seqlen * dim;
  }
}

/// Uniform values in [lo, hi) rounded to `t` (nearest even), as stored
/// bytes.
std::vector<unsigned char> randomElements(DType t, size_t n, uint64_t seed,
                                          float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(lo, hi);
  std::vector<unsigned char> out(n * size_t(sizeOf(t)));
  for (size_t i = 0; i < n; ++i)
    encodeElement(t, uni(rng), out.data(), i);
  return out;
}

/// The winner of an attention or mLSTM tune as its DB record, with the
/// runner-up's and the heuristic's times; nothing when no candidate passed.
void recordWinner(TuneFamily family, nlohmann::json problem, TuneResult &res) {
  const std::vector<CandidateResult> &ranked = res.candidates;
  if (ranked.empty() || !ranked[0].ok())
    return;
  FamilyRecord r;
  setTimes(r, ranked);
  r.family = family;
  r.problem = std::move(problem);
  r.config = ranked[0].familyConfig;
  r.tflops = ranked[0].tflops;
  r.gbs = ranked[0].gbs;
  res.familyRecord = r;
}

class AttentionCase : public Tuner::Case {
public:
  AttentionCase(Runtime &rt, Backend &be, const TunerOptions &o, Target t,
                const AttentionProblem &p,
                std::shared_future<std::shared_ptr<AttentionReference>> ref,
                std::vector<std::shared_future<Built>> builds)
      : rt_(rt), be_(be), o_(o), t_(t), p_(p), ref_(std::move(ref)),
        builds_(std::move(builds)), bufs_(be) {
    configs_ = enumerateConfigs(p, t);
    heuristic_ = defaultConfig(p, t);
  }

  std::vector<CandidateResult> candidates() const override {
    return candidateList(configs_, heuristic_,
                         [&](CandidateResult &cr, const AttentionConfig &c) {
                           cr.familyConfig = toJson(c);
                           cr.kernel = attentionKernelName(p_, c, t_);
                         });
  }
  std::vector<std::shared_future<Built>> builds() override { return builds_; }

  size_t prepare(Bench &b, const Wait &wait) override {
    const int64_t B = p_.batch, hq = p_.headsQ, hkv = p_.headsKv;
    const int64_t sq = p_.seqlenQ, sk = p_.seqlenK;
    // Q, K, V in the problem's dtype; O and the bias in O's (bf16 for fp8).
    const size_t es = size_t(sizeOf(p_.dtype)), eo = size_t(sizeOf(outType_));
    // Varlen: every sequence of the batch the problem's lengths.
    const int64_t rowsQ = p_.varlen ? B * sq : sq,
                  rowsK = p_.varlen ? B * sk : sk;
    const int64_t outer = p_.varlen ? 1 : B;
    nQ_ = size_t(outer * rowsQ * hq * p_.headDimQk);
    nK_ = size_t(outer * rowsK * hkv * p_.headDimQk);
    nV_ = size_t(outer * rowsK * hkv * p_.headDimV);
    nO_ = size_t(outer * rowsQ * hq * p_.headDimV);
    nBias_ = p_.bias ? size_t(B * hq * sq * sk) : 0;
    lseRows_ = size_t(B * hq * sq);
    packedStrides(p_, rowsQ, hq, p_.headDimQk, sQ_);
    packedStrides(p_, rowsK, hkv, p_.headDimQk, sK_);
    packedStrides(p_, rowsK, hkv, p_.headDimV, sV_);
    packedStrides(p_, rowsQ, hq, p_.headDimV, sO_);
    offK_ = roundUp256(nQ_ * es);
    offV_ = offK_ + roundUp256(nK_ * es);
    offO_ = offV_ + roundUp256(nV_ * es);
    offBias_ = offO_ + roundUp256(nO_ * eo);
    offLse_ = offBias_ + roundUp256(nBias_ * eo);
    setBytes_ = offLse_ + roundUp256(p_.lse ? lseRows_ * 4 : 0);
    sets_ = rotationSets(setBytes_, be_.l2Bytes(), o_);
    pool_ = static_cast<char *>(bufs_.alloc(sets_ * setBytes_));
    std::vector<float> alibi(static_cast<size_t>(hq));
    for (size_t h = 0; h < alibi.size(); ++h)
      alibi[h] = std::exp2(-8.f * float(h + 1) / float(hq));
    slopes_ = bufs_.alloc(alibi.size() * 4);
    be_.copyToDevice(slopes_, alibi.data(), alibi.size() * 4);
    std::vector<int> cuQ, cuK;
    for (int64_t i = 0; i <= B; ++i) {
      cuQ.push_back(int(i * sq));
      cuK.push_back(int(i * sk));
    }
    cuQ_ = bufs_.alloc(cuQ.size() * 4);
    cuK_ = bufs_.alloc(cuK.size() * 4);
    be_.copyToDevice(cuQ_, cuQ.data(), cuQ.size() * 4);
    be_.copyToDevice(cuK_, cuK.data(), cuK.size() * 4);
    // Inputs uniform in [-1, 1): one draw, copied to every set (the sets
    // exist to keep the L2 cold, not to vary values). fp8 inputs are
    // checked and timed without descale factors (null: 1).
    const std::tuple<size_t, size_t, DType> tensors[] = {
        {0, nQ_, p_.dtype},
        {offK_, nK_, p_.dtype},
        {offV_, nV_, p_.dtype},
        {offBias_, nBias_, outType_}};
    uint64_t seed = o_.seed;
    for (auto [off, n, type] : tensors) {
      if (!n)
        continue;
      std::vector<unsigned char> h = randomElements(type, n, ++seed, -1.f, 1.f);
      for (size_t s = 0; s < sets_; ++s)
        be_.copyToDevice(pool_ + s * setBytes_ + off, h.data(), h.size());
    }
    // The reference on the check call.
    call_ = attentionCheckCall(p_);
    const size_t refRows = size_t(call_.batch * hq * call_.seqlenQ);
    float *refO = static_cast<float *>(bufs_.alloc(refRows * p_.headDimV * 4));
    float *refL = static_cast<float *>(bufs_.alloc(refRows * 4));
    void *naive = bufs_.alloc(refRows * size_t(p_.headDimV) * eo);
    wait([&] { return isReady(ref_); });
    std::shared_ptr<AttentionReference> reference = ref_.get();
    reference->run(p_, checkArgs(), refO, refL, naive, b.stream);
    be_.synchronizeStream(b.stream);
    std::vector<float> ref(refRows * size_t(p_.headDimV));
    be_.copyToHost(ref.data(), refO, ref.size() * 4);
    refH_.assign(ref.begin(), ref.end());
    naiveH_.resize(ref.size() * eo);
    be_.copyToHost(naiveH_.data(), naive, naiveH_.size());
    return sets_;
  }

  void poison(void *stream) override {
    be_.memsetAsync(pool_ + offO_, 0xff, nO_ * size_t(sizeOf(outType_)),
                    stream);
  }
  // Through the runtime's own launch path with the candidate's config
  // forced: the build warmed the kernel cache, so the first call only loads
  // it (and the combine kernel of a split-KV config, timed with it).
  void launchCheck(size_t i, const Built &, void *stream) override {
    rt_.launchAttention(call_, configs_.at(i), checkArgs(), stream);
  }
  void launch(size_t i, const Built &, size_t set, void *stream) override {
    rt_.launchAttention(p_, configs_.at(i), args(set % sets_), stream);
  }
  ReferenceCheck compare() override {
    // Ours is in the problem's layout; the reference's rows are (b, h, i).
    const size_t es = size_t(sizeOf(outType_));
    std::vector<unsigned char> out(nO_ * es), ours(naiveH_.size());
    be_.copyToHost(out.data(), pool_ + offO_, out.size());
    const int64_t hq = p_.headsQ, sq = call_.seqlenQ;
    for (int64_t b = 0; b < call_.batch; ++b)
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          const size_t row = size_t((b * hq + h) * sq + i);
          const int64_t oi = (p_.varlen ? 0 : b * sOcall_[0]) +
                             (p_.varlen ? b * sq + i : i) * sOcall_[1] +
                             h * sOcall_[2];
          std::memcpy(&ours[row * size_t(p_.headDimV) * es],
                      &out[size_t(oi) * es], size_t(p_.headDimV) * es);
        }
    return checkAgainstReference(outType_, int64_t(refH_.size()) / p_.headDimV,
                                 p_.headDimV, ours.data(), p_.headDimV,
                                 refH_.data(), naiveH_.data());
  }
  double tflops(double us) const override {
    return us > 0 ? attentionFlops() / (us * 1e6) : 0;
  }
  double gbs(double us) const override {
    const double bytes = double(nQ_ + nK_ + nV_) * sizeOf(p_.dtype) +
                         double(nO_ + nBias_) * sizeOf(outType_);
    return us > 0 ? bytes / (us * 1e3) : 0;
  }
  void record(TuneResult &res) const override {
    recordWinner(TuneFamily::Attention, tuningProblemJson(p_), res);
  }

private:
  Runtime &rt_;
  Backend &be_;
  const TunerOptions &o_;
  Target t_;
  AttentionProblem p_, call_;
  DType outType_ = attentionOutputDType(p_); ///< O's and the bias's
  std::shared_future<std::shared_ptr<AttentionReference>> ref_;
  std::vector<std::shared_future<Built>> builds_;
  std::vector<AttentionConfig> configs_;
  AttentionConfig heuristic_;
  Buffers bufs_;
  char *pool_ = nullptr;
  void *slopes_ = nullptr, *cuQ_ = nullptr, *cuK_ = nullptr;
  size_t nQ_ = 0, nK_ = 0, nV_ = 0, nO_ = 0, nBias_ = 0, lseRows_ = 0;
  size_t offK_ = 0, offV_ = 0, offO_ = 0, offBias_ = 0, offLse_ = 0;
  size_t setBytes_ = 0, sets_ = 1;
  int64_t sQ_[3] = {}, sK_[3] = {}, sV_[3] = {}, sO_[3] = {};
  int64_t sOcall_[3] = {};
  std::vector<double> refH_;
  std::vector<unsigned char> naiveH_;

  /// Useful FLOPs: 2 (Dqk + Dv) per visible (query, key) pair, the mask
  /// counted exactly (causal and window rows clipped).
  double attentionFlops() const {
    const int64_t sq = p_.seqlenQ, sk = p_.seqlenK, off = sk - sq;
    double pairs = 0;
    for (int64_t i = 0; i < sq; ++i) {
      int64_t hi = sk - 1, lo = 0;
      if (p_.causal)
        hi = std::min(hi, i + off);
      if (p_.windowRight >= 0)
        hi = std::min(hi, i + off + p_.windowRight);
      if (p_.windowLeft >= 0)
        lo = std::max<int64_t>(lo, i + off - p_.windowLeft);
      pairs += double(std::max<int64_t>(hi - lo + 1, 0));
    }
    return 2.0 * double(p_.headDimQk + p_.headDimV) * pairs *
           double(p_.batch * p_.headsQ);
  }

  AttentionArgs args(size_t set) const {
    char *base = pool_ + set * setBytes_;
    AttentionArgs a;
    a.q = base;
    a.k = base + offK_;
    a.v = base + offV_;
    a.o = base + offO_;
    a.bias = p_.bias ? base + offBias_ : nullptr;
    a.lse = p_.lse ? reinterpret_cast<float *>(base + offLse_) : nullptr;
    a.alibiSlopes = p_.alibi ? static_cast<const float *>(slopes_) : nullptr;
    a.cuSeqlensQ = p_.varlen ? static_cast<const int *>(cuQ_) : nullptr;
    a.cuSeqlensK = p_.varlen ? static_cast<const int *>(cuK_) : nullptr;
    a.batch = p_.batch;
    a.seqlenQ = p_.seqlenQ;
    a.seqlenK = p_.seqlenK;
    a.totalQ = p_.batch * p_.seqlenQ;
    for (int i = 0; i < 3; ++i) {
      a.strideQ[i] = sQ_[i];
      a.strideK[i] = sK_[i];
      a.strideV[i] = sV_[i];
      a.strideO[i] = sO_[i];
    }
    return a;
  }

  /// Set 0 viewed as the check call (fewer batches, maybe shorter rows:
  /// the same buffers, the strides of the full problem so the kernel and
  /// the reference read the same elements; a packed bias is laid out for
  /// the check call's sizes, which the reference assumes too).
  AttentionArgs checkArgs() {
    AttentionArgs a = args(0);
    a.batch = call_.batch;
    a.seqlenQ = call_.seqlenQ;
    a.seqlenK = call_.seqlenK;
    a.totalQ = call_.batch * call_.seqlenQ;
    if (p_.varlen) {
      // Every sequence keeps the problem's lengths in cu_seqlens; a capped
      // check call would not match them.
      a.seqlenQ = p_.seqlenQ;
      a.seqlenK = p_.seqlenK;
    }
    for (int i = 0; i < 3; ++i)
      sOcall_[i] = a.strideO[i];
    return a;
  }
};

} // namespace

void Tuner::prefetch(const AttentionProblem &p) {
  Impl &I = *impl_;
  if (checkProblemOnTarget(p, I.target))
    return; // tune() reports it
  if (!I.attentionReference)
    I.attentionReference = I.submit<std::shared_ptr<AttentionReference>>(
        [&rt = I.rt] { return std::make_shared<AttentionReference>(rt); });
  for (const AttentionConfig &c : enumerateConfigs(p, I.target))
    I.build(attentionKernelName(p, c, I.target),
            [&rt = I.rt, p, c] { return rt.compile(p, c); });
}

TuneResult Tuner::tune(const AttentionProblem &p) {
  Impl &I = *impl_;
  const auto t0 = Clock::now();
  if (auto e = checkProblemOnTarget(p, I.target))
    throw Error(*e);
  if (p.varlen && attentionCheckCall(p).seqlenK != p.seqlenK)
    throw Error("tuning a varlen attention problem checks it whole, and "
                "seqlen_k = " +
                std::to_string(p.seqlenK) +
                " is longer than the reference holds (16384)");
  TuneResult res;
  res.target = I.target;
  res.family = TuneFamily::Attention;
  res.familyProblem = tuningProblemJson(p);
  res.familyHeuristic = toJson(defaultConfig(p, I.target));
  prefetch(p);
  const std::vector<AttentionConfig> configs = enumerateConfigs(p, I.target);
  std::vector<std::shared_future<Built>> builds;
  for (const AttentionConfig &c : configs)
    builds.push_back(I.kernels.at(attentionKernelName(p, c, I.target)));
  AttentionCase tc(I.rt, *I.be, I.o, I.target, p, *I.attentionReference,
                   std::move(builds));
  return I.run(tc, std::move(res), t0);
}

//===----------------------------------------------------------------------===//
// mLSTM
//===----------------------------------------------------------------------===//

namespace {

/// The call each mLSTM candidate is checked on: B = 1, at most 2 heads and
/// 300 tokens (several chunks of every candidate chunk length, the last one
/// ragged), with the problem's head dims and state flags, so the kernels
/// checked are exactly the ones timed (B, NH and S are run-time values).
///
/// The reference is the tests' own (MlstmHostReference.h, which the
/// emulator and GPU tests hold every variant to): the recurrent form in
/// fp64 on the host from the exact inputs, and as the naive implementation
/// the same formulation as the candidate with h rounded to the dtype (the
/// fp32 recurrent loop for the recurrent variant, the same-dtype chunkwise
/// form with the candidate's chunk for the others). Not an fp32 reference:
/// against fp32 the naive fp32 loop would err by ~0 and leave the rule no
/// room; and not the full problem: the fp64 loop costs minutes on the host
/// at S = 8192, B*NH = 64, where the check call costs ~0.2 s.
MlstmProblem mlstmCheckCall(const MlstmProblem &p) {
  MlstmProblem c = p;
  c.b = 1;
  c.nh = std::min<int64_t>(p.nh, 2);
  c.s = std::min<int64_t>(p.s, 300);
  return c;
}

class MlstmCase : public Tuner::Case {
public:
  MlstmCase(Runtime &rt, Backend &be, const TunerOptions &o, Target t,
            const MlstmProblem &p,
            std::vector<std::shared_future<Built>> builds)
      : rt_(rt), be_(be), o_(o), t_(t), p_(p), builds_(std::move(builds)),
        bufs_(be) {
    configs_ = enumerateConfigs(p, t);
    heuristic_ = defaultConfig(p, t);
  }

  std::vector<CandidateResult> candidates() const override {
    return candidateList(
        configs_, heuristic_, [&](CandidateResult &cr, const MlstmConfig &c) {
          cr.familyConfig = toJson(c);
          cr.kernel = mlstmKernelName(p_, c, mlstmLeadKernel(c));
        });
  }
  std::vector<std::shared_future<Built>> builds() override { return builds_; }

  size_t prepare(Bench &b, const Wait &) override {
    const size_t es = size_t(sizeOf(p_.dtype));
    const size_t bh = size_t(p_.b * p_.nh), S = size_t(p_.s);
    // Timed calls: q, k, v, i, f, h per set; states shared.
    sizes_ = {bh * S * p_.dqk, bh * S * p_.dqk, bh * S * p_.dv,
              bh * S,          bh * S,          bh * S * p_.dv};
    size_t off = 0;
    for (size_t n : sizes_) {
      offs_.push_back(off);
      off += roundUp256(n * es);
    }
    setBytes_ = off;
    sets_ = rotationSets(setBytes_, be_.l2Bytes(), o_);
    pool_ = static_cast<char *>(bufs_.alloc(sets_ * setBytes_));
    const size_t cBytes = bh * p_.dqk * p_.dv * 4, nBytes = bh * p_.dqk * 4,
                 mBytes = bh * 4;
    stateBytes_[0] = cBytes;
    stateBytes_[1] = nBytes;
    stateBytes_[2] = mBytes;
    if (p_.initialState || p_.finalState) {
      states_[0] = bufs_.alloc(cBytes);
      states_[1] = bufs_.alloc(nBytes);
      states_[2] = bufs_.alloc(mBytes);
      be_.memsetAsync(states_[0], 0, cBytes, b.stream);
      be_.memsetAsync(states_[1], 0, nBytes, b.stream);
      be_.memsetAsync(states_[2], 0, mBytes, b.stream);
    }
    // Values as the tests draw them: q, k, v in [-1, 1), gates from soft
    // to saturated (f~ in [-5, 10), i~ in [-10, 15)).
    const float lo[] = {-1, -1, -1, -10, -5}, hi[] = {1, 1, 1, 15, 10};
    for (size_t t = 0; t < 5; ++t) {
      std::vector<unsigned char> h =
          randomElements(p_.dtype, sizes_[t], o_.seed + t, lo[t], hi[t]);
      for (size_t s = 0; s < sets_; ++s)
        be_.copyToDevice(pool_ + s * setBytes_ + offs_[t], h.data(), h.size());
    }

    // The check call's inputs and the host references.
    call_ = mlstmCheckCall(p_);
    const size_t cbh = size_t(call_.b * call_.nh), cS = size_t(call_.s);
    using mlstm_ref::HostTensor;
    std::mt19937 rng(unsigned(o_.seed));
    std::uniform_real_distribution<float> unit(-1.f, 1.f), fD(-5.f, 10.f),
        iD(-10.f, 15.f);
    auto tensor = [&](size_t n, auto &dist) {
      HostTensor h(p_.dtype, n);
      for (size_t e = 0; e < n; ++e)
        h.set(e, dist(rng));
      return h;
    };
    HostTensor q = tensor(cbh * cS * p_.dqk, unit),
               k = tensor(cbh * cS * p_.dqk, unit),
               v = tensor(cbh * cS * p_.dv, unit), ig = tensor(cbh * cS, iD),
               fg = tensor(cbh * cS, fD);
    const HostTensor *ins[] = {&q, &k, &v, &ig, &fg};
    for (const HostTensor *h : ins) {
      void *d = bufs_.alloc(h->bytes.size());
      be_.copyToDevice(d, h->bytes.data(), h->bytes.size());
      checkIn_.push_back(d);
    }
    hOut_ = cbh * cS * size_t(p_.dv);
    checkH_ = bufs_.alloc(hOut_ * es);
    mlstm_ref::MlstmInputs in{
        int64_t(cbh), int64_t(cS), p_.dqk,  p_.dv,   q,      k, v,
        ig,           fg,          nullptr, nullptr, nullptr};
    mlstm_ref::MlstmOutputs<double> ref;
    ref.init(in);
    mlstm_ref::MlstmOutputs<float> naive;
    naive.init(in);
    for (int64_t x = 0; x < int64_t(cbh); ++x) {
      mlstm_ref::recurrentHead<double>(in, x, double(p_.eps), ref);
      mlstm_ref::recurrentHead<float>(in, x, p_.eps, naive);
    }
    refH_ = ref.h;
    naiveRecurrent_ = rounded(naive.h);
    for (const MlstmConfig &c : configs_)
      if (c.variant != MlstmVariant::Recurrent &&
          !naiveChunkwise_.count(c.chunk)) {
        mlstm_ref::MlstmOutputs<float> cw;
        cw.init(in);
        for (int64_t x = 0; x < int64_t(cbh); ++x)
          mlstm_ref::chunkwiseHead(in, x, c.chunk, p_.eps, cw);
        naiveChunkwise_[c.chunk] = rounded(cw.h);
      }
    return sets_;
  }

  void poison(void *stream) override {
    be_.memsetAsync(checkH_, 0xff, hOut_ * size_t(sizeOf(p_.dtype)), stream);
    // Timed calls updated the states in place; the reference starts from
    // zeros.
    for (int s = 0; s < 3; ++s)
      if (states_[s])
        be_.memsetAsync(states_[s], 0, stateBytes_[s], stream);
  }
  void launchCheck(size_t i, const Built &k, void *stream) override {
    checked_ = i;
    MlstmArgs a = states();
    a.q = checkIn_[0];
    a.k = checkIn_[1];
    a.v = checkIn_[2];
    a.i = checkIn_[3];
    a.f = checkIn_[4];
    a.h = checkH_;
    a.b = call_.b;
    a.nh = call_.nh;
    a.s = call_.s;
    rt_.launchMlstm(plan(k), a, stream);
  }
  ReferenceCheck compare() override {
    const MlstmConfig &c = configs_.at(checked_);
    const std::vector<unsigned char> &naive =
        c.variant == MlstmVariant::Recurrent ? naiveRecurrent_
                                             : naiveChunkwise_.at(c.chunk);
    std::vector<unsigned char> ours(naive.size());
    be_.copyToHost(ours.data(), checkH_, ours.size());
    return checkAgainstReference(p_.dtype, int64_t(hOut_) / p_.dv, p_.dv,
                                 ours.data(), p_.dv, refH_.data(),
                                 naive.data());
  }
  void launch(size_t, const Built &k, size_t set, void *stream) override {
    char *base = pool_ + (set % sets_) * setBytes_;
    MlstmArgs a = states();
    a.q = base + offs_[0];
    a.k = base + offs_[1];
    a.v = base + offs_[2];
    a.i = base + offs_[3];
    a.f = base + offs_[4];
    a.h = base + offs_[5];
    a.b = p_.b;
    a.nh = p_.nh;
    a.s = p_.s;
    rt_.launchMlstm(plan(k), a, stream);
  }
  double tflops(double us) const override {
    // The chunkwise FLOPs with L = 64 for every variant, as bench/mlstm.py
    // counts them, so the numbers compare.
    return us > 0 ? mlstmFlops(p_, 64) / (us * 1e6) : 0;
  }
  double gbs(double us) const override {
    double bytes = 0;
    for (size_t n : sizes_)
      bytes += double(n) * sizeOf(p_.dtype);
    const double st = double(p_.b * p_.nh) * (p_.dqk * p_.dv + p_.dqk + 1) * 4;
    bytes += (p_.initialState ? st : 0) + (p_.finalState ? st : 0);
    return us > 0 ? bytes / (us * 1e3) : 0;
  }
  void record(TuneResult &res) const override {
    recordWinner(TuneFamily::Mlstm, tuningProblemJson(p_), res);
  }

private:
  Runtime &rt_;
  Backend &be_;
  const TunerOptions &o_;
  Target t_;
  MlstmProblem p_, call_;
  std::vector<std::shared_future<Built>> builds_;
  std::vector<MlstmConfig> configs_;
  MlstmConfig heuristic_;
  Buffers bufs_;
  char *pool_ = nullptr;
  std::vector<size_t> sizes_, offs_;
  size_t setBytes_ = 0, sets_ = 1, hOut_ = 0, checked_ = 0;
  void *states_[3] = {};
  size_t stateBytes_[3] = {};
  std::vector<void *> checkIn_;
  void *checkH_ = nullptr;
  std::vector<double> refH_;
  std::vector<unsigned char> naiveRecurrent_;
  std::map<int, std::vector<unsigned char>> naiveChunkwise_;

  static const MlstmPlan &plan(const Built &k) {
    return *static_cast<const MlstmPlan *>(k.get());
  }
  /// Zero initial states (the check call's fit in the timed call's
  /// buffers), final states written in place over them.
  MlstmArgs states() const {
    MlstmArgs a;
    auto *c = static_cast<float *>(states_[0]);
    auto *n = static_cast<float *>(states_[1]);
    auto *m = static_cast<float *>(states_[2]);
    if (p_.initialState) {
      a.c0 = c;
      a.n0 = n;
      a.m0 = m;
    }
    if (p_.finalState) {
      a.cT = c;
      a.nT = n;
      a.mT = m;
    }
    return a;
  }
  std::vector<unsigned char> rounded(const std::vector<float> &h) const {
    std::vector<unsigned char> out(h.size() * size_t(sizeOf(p_.dtype)));
    for (size_t e = 0; e < h.size(); ++e) {
      uint32_t bits = mlstm_ref::encode(p_.dtype, h[e]);
      std::memcpy(&out[e * size_t(sizeOf(p_.dtype))], &bits,
                  size_t(sizeOf(p_.dtype)));
    }
    return out;
  }
};

} // namespace

namespace {
/// The compile pool's key of an mLSTM candidate. A plan carries its problem
/// (the launch checks the state pointers and sizes the workspace from it),
/// so the key holds the whole problem: kernel names do not say whether the
/// problem has initial or final states, and two problems of one list that
/// differ only there must not share a plan.
std::string mlstmBuildKey(const MlstmProblem &p, const MlstmConfig &c) {
  return mlstmKernelName(p, c, mlstmLeadKernel(c)) + "|" + toJson(c).dump() +
         "|" + toJson(p).dump();
}
} // namespace

void Tuner::prefetch(const MlstmProblem &p) {
  Impl &I = *impl_;
  if (checkProblem(p))
    return; // tune() reports it
  for (const MlstmConfig &c : enumerateConfigs(p, I.target))
    I.build(mlstmBuildKey(p, c),
            [&rt = I.rt, p, c] { return rt.compileMlstm(p, c); });
}

TuneResult Tuner::tune(const MlstmProblem &p) {
  Impl &I = *impl_;
  const auto t0 = Clock::now();
  if (auto e = checkProblem(p))
    throw Error(*e);
  TuneResult res;
  res.target = I.target;
  res.family = TuneFamily::Mlstm;
  res.familyProblem = tuningProblemJson(p);
  res.familyHeuristic = toJson(defaultConfig(p, I.target));
  prefetch(p);
  std::vector<std::shared_future<Built>> builds;
  for (const MlstmConfig &c : enumerateConfigs(p, I.target))
    builds.push_back(I.kernels.at(mlstmBuildKey(p, c)));
  MlstmCase tc(I.rt, *I.be, I.o, I.target, p, std::move(builds));
  if (tc.candidates().empty())
    throw Error("mlstm: no candidate config for " + toJson(p).dump() + " on " +
                std::string(toString(I.target)));
  return I.run(tc, std::move(res), t0);
}

TuneResult Tuner::tune(const AnyProblem &p) {
  return std::visit([&](const auto &q) { return tune(q); }, p);
}

void Tuner::prefetch(const AnyProblem &p) {
  std::visit([&](const auto &q) { prefetch(q); }, p);
}

} // namespace kgen
