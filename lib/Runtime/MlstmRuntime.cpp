//===- MlstmRuntime.cpp - kgen::Runtime's mLSTM entry points --------------===//
//
// problem + args -> resolved problem (B, NH, S of the call) -> plan
// (heuristic config, remembered per resolved problem) -> kernels built
// through Runtime::compileSource -> launches with one Params by value.
//
// The workspace holds one counter per head (zero between launches; the
// kernels' HeadCounter uses it so states can be updated in place) and, for
// the two-phase and chunk-parallel variants, the state entering every chunk
// (mlstmWorkspaceLayout). The runtime keeps
// one, grown on demand, unless the call brings its own.
//
//===----------------------------------------------------------------------===//

#include "DispatchKey.h"
#include "kgen/kgen.h"

#include "mlstm/params.h" // templates/mlstm/params.h: the kernels' argument

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace kgen {

struct Runtime::MlstmState {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const MlstmPlan>> dispatch;
  Backend *backend = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Leading bytes of the workspace known to be zero. The counters sit at
  /// the start and return to zero after each launch, but a two-phase call
  /// writes chunk states right after its own (smaller) counter region, so a
  /// later call with more heads must zero its counters first.
  size_t zeroBytes = 0;
  ~MlstmState() {
    if (workspace && backend)
      backend->free(workspace);
  }
};

MlstmProblem sizedForCall(const MlstmProblem &p, const MlstmArgs &args) {
  MlstmProblem r = p;
  if (args.b >= 0)
    r.b = args.b;
  if (args.nh >= 0)
    r.nh = args.nh;
  if (args.s >= 0)
    r.s = args.s;
  if (auto e = checkProblem(r))
    throw Error(*e);
  return r;
}

namespace {

/// The call's extents in the problem, and its pointers checked.
MlstmProblem resolveMlstm(const MlstmProblem &p, const MlstmArgs &a) {
  const MlstmProblem r = sizedForCall(p, a);
  const char *missing = !a.q   ? "q"
                        : !a.k ? "k"
                        : !a.v ? "v"
                        : !a.i ? "i"
                        : !a.f ? "f"
                        : !a.h ? "h"
                               : nullptr;
  if (missing)
    throw Error(std::string("mlstm: null device pointer for ") + missing);
  auto states = [](bool want, const void *c, const void *n, const void *m,
                   const char *which) {
    const int given = (c != nullptr) + (n != nullptr) + (m != nullptr);
    if (want && given != 3)
      throw Error(std::string("mlstm: the problem has ") + which +
                  " states but C, n or m is null; pass all three");
    if (!want && given != 0)
      throw Error(std::string("mlstm: ") + which +
                  " state pointers given but the problem has none; set " +
                  (which[0] == 'i' ? "initial" : "final") +
                  " in the problem, or pass null");
  };
  states(p.initialState, a.c0, a.n0, a.m0, "initial");
  states(p.finalState, a.cT, a.nT, a.mT, "final");
  return r;
}

/// The fields that pick an mLSTM plan, as the GEMM and attention tables
/// key theirs (DispatchKey.h); eps by its bits.
std::string dispatchKey(const MlstmProblem &r) {
  uint32_t eps;
  std::memcpy(&eps, &r.eps, sizeof(eps));
  std::string k;
  return appendKey(k, {r.b, r.nh, r.s, int64_t(r.dqk), int64_t(r.dv),
                       int64_t(r.dtype), int64_t(r.initialState),
                       int64_t(r.finalState), int64_t(eps)});
}

constexpr size_t kCounterAlign = 256;

size_t counterBytes(int64_t bh) {
  return (size_t(bh) * sizeof(unsigned) + kCounterAlign - 1) / kCounterAlign *
         kCounterAlign;
}

} // namespace

size_t Runtime::mlstmWorkspace(const MlstmPlan &plan, const MlstmArgs &args) {
  MlstmProblem r = resolveMlstm(plan.problem, args);
  return counterBytes(r.b * r.nh) +
         mlstmWorkspaceBytes(r, plan.config, r.b, r.nh, r.s);
}

std::shared_ptr<const MlstmPlan>
Runtime::compileMlstm(const MlstmProblem &p, const MlstmConfig &c,
                      std::optional<Target> target, void *captureStream) {
  const Target t = target.value_or(target_);
  if (auto e = checkConfig(p, c, t))
    throw Error(*e);
  auto plan = std::make_shared<MlstmPlan>();
  plan->problem = p;
  plan->config = c;
  for (MlstmKernel k : mlstmKernels(c))
    plan->kernels.push_back(
        compileSource(emitMlstm(p, c, k, t), captureStream));
  return plan;
}

std::shared_ptr<const MlstmPlan> Runtime::selectMlstm(const MlstmProblem &p,
                                                      const MlstmArgs &args,
                                                      void *stream) {
  MlstmProblem r = resolveMlstm(p, args);
  std::string key = dispatchKey(r);
  if (args.config)
    key += "|" + toJson(*args.config).dump();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!mlstm_) {
      mlstm_ = std::make_shared<MlstmState>();
      mlstm_->backend = backend_.get();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mlstm_->mu);
    if (auto it = mlstm_->dispatch.find(key); it != mlstm_->dispatch.end())
      return it->second;
  }
  if (stream && backend_ && backend_->isCapturing(stream))
    throw Error("mlstm: no kernel is loaded yet for this problem and the "
                "stream is being captured into a graph; run the call once "
                "before capture");
  // The tuning DB's winner (by policy), else the heuristic (the seed's
  // batch-aware choice).
  std::shared_ptr<const MlstmPlan> plan =
      compileMlstm(r, args.config ? *args.config : chooseMlstmConfig(r, stream),
                   target_, stream);
  std::lock_guard<std::mutex> lock(mlstm_->mu);
  return mlstm_->dispatch.emplace(key, plan).first->second;
}

void Runtime::mlstm(const MlstmProblem &p, const MlstmArgs &args,
                    void *stream) {
  if (!backend_)
    throw Error("mlstm: no GPU runtime with a device was found, so nothing "
                "can run (kernels can still be compiled: kgen compile)");
  launchMlstm(*selectMlstm(p, args, stream), args, stream);
}

void Runtime::launchMlstm(const MlstmPlan &plan, const MlstmArgs &args,
                          void *stream) {
  for (const auto &k : plan.kernels)
    if (!backend_ || !k->function)
      throw Error("launch: kernel " + k->source.name +
                  " is not loaded on a GPU (compiled for " +
                  std::string(toString(k->source.target)) + ")");
  const MlstmProblem &kp = plan.problem;
  MlstmProblem r = resolveMlstm(kp, args);
  if (r.dqk != kp.dqk || r.dv != kp.dv || r.dtype != kp.dtype)
    throw Error("mlstm: the call's problem differs from the plan's");
  if (plan.config.wgmma)
    for (const auto &[name, ptr] :
         {std::pair<const char *, const void *>{"q", args.q},
          {"k", args.k},
          {"v", args.v},
          {"h", args.h}})
      if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
        throw Error(std::string("mlstm: ") + name +
                    " is not 16-byte aligned, which the wgmma fused "
                    "kernel's TMA loads and stores need; pass aligned "
                    "tensors or force a config without wgmma");
  const int64_t bh = r.b * r.nh;
  const size_t need = mlstmWorkspace(plan, args);

  unsigned char *ws = static_cast<unsigned char *>(args.workspace);
  if (ws) {
    if (args.workspaceBytes < need)
      throw Error("mlstm: the workspace of " +
                  std::to_string(args.workspaceBytes) +
                  " B is smaller than "
                  "the " +
                  std::to_string(need) +
                  " B this call needs "
                  "(Runtime::mlstmWorkspace)");
  } else {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!mlstm_) {
        mlstm_ = std::make_shared<MlstmState>();
        mlstm_->backend = backend_.get();
      }
    }
    std::lock_guard<std::mutex> lock(mlstm_->mu);
    if (mlstm_->workspaceBytes < need) {
      // A launch on some stream may still use the old one.
      if (mlstm_->workspace) {
        backend_->synchronize();
        backend_->free(mlstm_->workspace);
        mlstm_->workspace = nullptr;
        mlstm_->workspaceBytes = 0;
      }
      size_t bytes = std::max(need, size_t(1) << 20);
      mlstm_->workspace = backend_->alloc(bytes);
      backend_->memsetAsync(mlstm_->workspace, 0, bytes, stream);
      mlstm_->workspaceBytes = bytes;
      mlstm_->zeroBytes = bytes;
    }
    ws = static_cast<unsigned char *>(mlstm_->workspace);
    const size_t counters = counterBytes(bh);
    if (mlstm_->zeroBytes < counters) {
      backend_->memsetAsync(ws, 0, counters, stream);
      mlstm_->zeroBytes = counters;
    }
    if (mlstmWorkspaceBytes(r, plan.config, r.b, r.nh, r.s) > 0)
      mlstm_->zeroBytes = std::min(mlstm_->zeroBytes, counters);
  }

  mlstm::Params prm{};
  prm.q = args.q;
  prm.k = args.k;
  prm.v = args.v;
  prm.i = args.i;
  prm.f = args.f;
  prm.h = args.h;
  prm.c0 = args.c0;
  prm.n0 = args.n0;
  prm.m0 = args.m0;
  prm.cT = args.cT;
  prm.nT = args.nT;
  prm.mT = args.mT;
  prm.batch = int(r.b);
  prm.heads = int(r.nh);
  prm.seq = int(r.s);
  const int chunk = plan.config.chunk > 0 ? plan.config.chunk : 1;
  prm.chunks = int((r.s + chunk - 1) / chunk);
  prm.eps = kp.eps;
  const int segments = mlstmSegments(r, plan.config, r.b, r.nh, r.s);
  prm.segments = segments;
  prm.segmentChunks = (prm.chunks + segments - 1) / segments;
  prm.counters = reinterpret_cast<unsigned *>(ws);
  const MlstmWorkspaceLayout wl =
      mlstmWorkspaceLayout(r, plan.config, r.b, r.nh, r.s);
  if (wl.bytes > 0) {
    unsigned char *states = ws + counterBytes(bh);
    if (plan.config.variant == MlstmVariant::ChunkPar || segments > 1)
      prm.wsGM = reinterpret_cast<double *>(states + wl.gm);
    if (plan.config.wgmma)
      prm.wsGates = reinterpret_cast<double *>(states + wl.gates);
    prm.wsC = reinterpret_cast<float *>(states + wl.c);
    prm.wsN = reinterpret_cast<float *>(states + wl.n);
    prm.wsM = reinterpret_cast<float *>(states + wl.m);
  }
  void *params[] = {&prm};
  // plan.kernels follow mlstmKernels(config), in launch order.
  const std::vector<MlstmKernel> kinds = mlstmKernels(plan.config);
  // The wgmma fused kernel reads q, k and v and writes h by TMA as (dim,
  // token, head), in boxes of 64 dims (one 128-byte swizzle row) by a chunk
  // of tokens; rows past a head's sequence read as zeros and are not
  // written.
  Backend::TensorMap maps[4];
  if (plan.config.wgmma) {
    auto encode = [&](Backend::TensorMap &m, const void *base, int dim) {
      const uint64_t dims[3] = {uint64_t(dim), uint64_t(r.s), uint64_t(bh)};
      const uint64_t str[3] = {1, uint64_t(dim), uint64_t(r.s) * dim};
      const uint32_t box[3] = {64, uint32_t(plan.config.chunk), 1};
      backend_->encodeTensorMap(&m, base, kp.dtype, 3, dims, str, box);
    };
    encode(maps[0], args.q, kp.dqk);
    encode(maps[1], args.k, kp.dqk);
    encode(maps[2], args.v, kp.dv);
    encode(maps[3], args.h, kp.dv);
  }
  // A wgmma call with its sequence split (mlstmSegments): combine runs over
  // the segments (its units) and returns the final states; the split
  // fused walk writes h only (walkWgmma). Unsplit, neither segment kernel
  // runs.
  mlstm::Params overSegments = prm;
  overSegments.chunks = segments;
  void *combineParams[] = {&overSegments};
  void *wgmmaParams[] = {&maps[0], &maps[1], &maps[2], &maps[3], &prm};
  for (size_t n = 0; n < plan.kernels.size(); ++n) {
    const Kernel &k = *plan.kernels[n];
    const MlstmKernel kind = kinds[n];
    void **use = params;
    if (plan.config.wgmma) {
      if (segments == 1 &&
          (kind == MlstmKernel::SegmentStates || kind == MlstmKernel::Combine))
        continue;
      use = kind == MlstmKernel::Combine ? combineParams
            : isGatePrePass(kind)        ? params
                                         : wgmmaParams;
    }
    LaunchDims d =
        mlstmLaunchDims(kp, plan.config, kind, k.source.target, r.b, r.nh, r.s);
    backend_->launch(k.function, d, use, stream);
  }
}

} // namespace kgen
