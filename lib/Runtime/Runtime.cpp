//===- Runtime.cpp - The JIT pipeline behind kgen::Runtime ----------------===//
//
// problem + config -> limits -> emitter -> cache (or compiler) -> module ->
// launch on the caller's stream. The CLI, the C API and the tests all come
// through here.
//
//===----------------------------------------------------------------------===//

#include "DispatchKey.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Codegen/Templates.h"
#include "kgen/Runtime/Tuner.h"
#include "kgen/gemm/params.h"
#include "kgen/kgen.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kgen {

TunePolicy tunePolicyFromEnv() {
  const char *v = std::getenv("KGEN_TUNE");
  std::string s = v ? v : "";
  if (s.empty() || s == "offline")
    return TunePolicy::Offline;
  if (s == "off")
    return TunePolicy::Off;
  if (s == "online")
    return TunePolicy::Online;
  throw Error("KGEN_TUNE='" + s + "' is not one of off, offline, online");
}

Runtime::Runtime(RuntimeOptions opts)
    : opts_(std::move(opts)), cache_(opts_.cache), bundles_(opts_.bundles) {
  // openBackend says why only when it opens none.
  backend_ = openBackend(std::nullopt, &whyNoDevice_, opts_.device);
  if (!backend_ && opts_.requireDevice)
    throw Error(whyNoDevice_); // "no GPU found: " and what was tried
  // Without a GPU and without an explicit target, kgen compiles for the
  // NVIDIA flagship target; launching then reports that there is no GPU.
  target_ = opts_.target ? *opts_.target
                         : (backend_ ? backend_->target() : Target::SM90A);
}

Runtime::~Runtime() {
  if (!backend_)
    return;
  for (auto &[stream, w] : workspaces_) {
    try {
      backend_->synchronizeStream(stream);
      if (w.partials)
        backend_->free(w.partials);
      if (w.counters)
        backend_->free(w.counters);
      if (w.repack)
        backend_->free(w.repack);
    } catch (const Error &) {
      // A destructor cannot report; the memory goes with the context.
    }
  }
}

void Runtime::releaseWorkspace(void *stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workspaces_.find(stream);
  if (it == workspaces_.end() || !backend_)
    return;
  backend_->synchronizeStream(stream);
  if (it->second.partials)
    backend_->free(it->second.partials);
  if (it->second.counters)
    backend_->free(it->second.counters);
  if (it->second.repack)
    backend_->free(it->second.repack);
  workspaces_.erase(it);
}

const Runtime::Workspace &Runtime::workspace(void *stream,
                                             const GemmWorkspace &need) {
  std::lock_guard<std::mutex> lock(mu_);
  Workspace &w = workspaces_[stream];
  const size_t partials = size_t(need.partialBytes);
  const size_t counters = size_t(need.counters) * 4;
  const size_t repack = size_t(need.repackBytes);
  if (w.partialBytes >= partials && w.counterBytes >= counters &&
      w.repackBytes >= repack)
    return w;
  if (backend_->isCapturing(stream))
    throw Error("gemm: the split-K/repack workspace must grow to " +
                std::to_string(partials + counters + repack) +
                " bytes while the stream is being captured into a graph; "
                "run the call once before capture");
  // Kernels queued on this stream may still use the old buffers.
  backend_->synchronizeStream(stream);
  // One buffer grown to `want` bytes (its contents are not kept).
  auto grow = [&](void *&buf, size_t &have, size_t want) {
    if (have >= want)
      return false;
    if (buf)
      backend_->free(buf);
    buf = nullptr;
    have = 0;
    buf = backend_->alloc(want);
    have = want;
    return true;
  };
  grow(w.partials, w.partialBytes, partials);
  if (grow(w.counters, w.counterBytes, counters))
    backend_->memsetAsync(w.counters, 0, counters, stream);
  grow(w.repack, w.repackBytes, repack);
  return w;
}

unsigned *Runtime::streamCounters(void *stream, int words) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = workspaces_.find(stream);
    if (it != workspaces_.end() && it->second.counterBytes >= size_t(words) * 4)
      return static_cast<unsigned *>(it->second.counters);
    if (backend_->isCapturing(stream))
      return nullptr;
  }
  GemmWorkspace need;
  need.counters = words;
  return static_cast<unsigned *>(workspace(stream, need).counters);
}

Compiler &Runtime::compiler(Vendor v) {
  std::unique_ptr<Compiler> &slot = compilers_[v == Vendor::AMD ? 0 : 1];
  if (!slot) {
    std::string why;
    slot = openCompiler(v, &why);
    if (!slot)
      throw Error(std::string("cannot compile for ") +
                  (v == Vendor::AMD ? "AMD (hiprtc)" : "NVIDIA (nvrtc)") +
                  ": " + why);
  }
  return *slot;
}

CompilerIdentity Runtime::compilerIdentity(Vendor v) {
  std::optional<CompilerIdentity> &slot = identities_[v == Vendor::AMD ? 0 : 1];
  if (slot)
    return *slot;
  // Remembered next to the cache: a process whose kernels are all cached
  // then never opens nvrtc/hiprtc.
  std::string memo =
      cache_.memoryOnly() ? std::string() : cache_.root() + "/compilers.json";
  if (!memo.empty())
    slot = recallCompilerIdentity(memo, v);
  if (!slot) {
    Compiler &cc = compiler(v);
    slot = CompilerIdentity{cc.name(), cc.version()};
    if (!memo.empty())
      rememberCompilerIdentity(memo, cc);
  }
  return *slot;
}

std::shared_ptr<Kernel> Runtime::compile(const GemmProblem &p,
                                         const GemmConfig &c,
                                         std::optional<Target> t) {
  return build(p, c, t.value_or(target_), nullptr);
}

std::shared_ptr<Kernel> Runtime::build(const GemmProblem &p,
                                       const GemmConfig &c, Target t,
                                       void *captureStream) {
  if (auto e = checkConfig(p, c, t))
    throw Error(*e);
  KernelSource src = emitGemm(p, c, t);
  if (!bundles_.empty() && !bundles_.findSource(src) &&
      bundles_.missPolicy() == BundleMiss::Error)
    throw bundles_.missError(t, p, &c);
  std::shared_ptr<Kernel> k = compileSource(src, captureStream);
  // Kernels are shared by cache key; the first GEMM build names its problem.
  std::lock_guard<std::mutex> lock(mu_);
  if (!k->isGemm) {
    k->problem = p;
    k->config = c;
    k->isGemm = true;
  }
  return k;
}

std::shared_ptr<Kernel> Runtime::compileSource(const KernelSource &src,
                                               void *captureStream) {
  Target t = src.target;
  // Bundles come before the compiler: with one, a program runs without
  // nvrtc/hiprtc. Only a binary of exactly this source is taken.
  if (!bundles_.empty()) {
    if (const BundleEntry *e = bundles_.findSource(src))
      return loadBundled(*e, src);
    if (bundles_.missPolicy() == BundleMiss::Error)
      throw Error("kernel " + src.name + " for " + std::string(toString(t)) +
                  " is not in KGEN_BUNDLE, and KGEN_BUNDLE_MISS=error "
                  "forbids compiling it; add its problem to the bundle "
                  "(kgen bundle) or set KGEN_BUNDLE_MISS=jit");
  }
  // The lock guards the compiler slots and the loaded map only: compiles of
  // different kernels proceed in parallel (the cache serializes equal keys).
  std::unique_lock<std::mutex> lock(mu_);
  const Vendor vendor = targetInfo(t).vendor;
  const CompilerIdentity id = compilerIdentity(vendor);

  CacheKeyInput in;
  in.source = src.source;
  for (const std::string &h : src.headers)
    in.headerTexts.push_back(std::string(templateText(h)));
  in.compiler = id.name;
  in.compilerVersion = id.version;
  in.options = compilerOptions(vendor, t);
  in.target = t;
  std::string key = cacheKey(in);
  if (auto it = loaded_.find(key); it != loaded_.end())
    return it->second;
  lock.unlock();

  auto k = std::make_shared<Kernel>();
  k->source = src;
  k->cacheKey = key;
  DiskCache::Result r =
      cache_.getOrCompile(t, key, src.name, [&]() -> std::string {
        // Compiling inside stream capture would stall the capture and the
        // driver may reject module loads there: refuse instead.
        if (captureStream && backend_ && backend_->isCapturing(captureStream))
          throw Error("kernel " + src.name +
                      " is not compiled yet and the stream is being "
                      "captured into a graph; run the call once before "
                      "capture, or load an ahead-of-time bundle "
                      "(kgen bundle, KGEN_BUNDLE)");
        Compiler *cc;
        {
          std::lock_guard<std::mutex> g(mu_);
          cc = &compiler(vendor);
        }
        return cc->compile(src);
      });
  k->binary = std::move(r.binary);
  k->cacheHit = r.hit;
  k->compileMs = r.compileMs;
  if (backend_ && backend_->target() == t) {
    Backend::Module mod = backend_->loadModule(k->binary);
    k->function = backend_->getFunction(mod, src.name);
    if (!src.prologue.empty())
      k->prologueFunction = backend_->getFunction(mod, src.prologue);
  }
  lock.lock();
  return loaded_.emplace(key, k).first->second;
}

std::shared_ptr<Kernel> Runtime::loadBundled(const BundleEntry &e,
                                             const KernelSource &src) {
  Target t = src.target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = loaded_.find(e.cacheKey); it != loaded_.end())
      return it->second;
  }
  auto k = std::make_shared<Kernel>();
  k->source = src;
  k->cacheKey = e.cacheKey;
  k->binary = bundles_.binary(e); // size and SHA-256 checked
  k->cacheHit = true;
  k->bundled = true;
  if (backend_ && backend_->target() == t) {
    Backend::Module mod = backend_->loadModule(k->binary);
    k->function = backend_->getFunction(mod, src.name);
    if (!src.prologue.empty())
      k->prologueFunction = backend_->getFunction(mod, src.prologue);
  }
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_.emplace(e.cacheKey, k).first->second;
}

namespace {

/// A stored operand: its extent and strides and its name, for messages.
struct Operand {
  const char *name;
  const void *ptr;
  int64_t ld;
  int64_t extent; ///< elements in a stored row
  int64_t rows;   ///< stored rows (for the packed batch stride)
  int64_t stride; ///< elements between batches; -1 packed, 0 shared
  int elem;       ///< bytes per element
  int align;      ///< promised by the problem
  const char *extentName;
  const char *ldName;
};

/// Lower `align` to what the pointer, leading dimension, extent and batch
/// stride allow.
int feasibleAlign(const Operand &o) {
  int v = o.align;
  auto ok = [&](int v) {
    return reinterpret_cast<uintptr_t>(o.ptr) % (uintptr_t(v) * o.elem) == 0 &&
           o.ld % v == 0 && o.extent % v == 0 && o.stride % v == 0;
  };
  while (v > 1 && !ok(v))
    v /= 2;
  return v;
}

/// The operands of a call, ld and stride resolved (0 and -1 replaced):
/// A, B, C, then the bias and the residual when the problem has them.
std::vector<Operand> operands(const GemmProblem &p, const GemmProblem &r,
                              const GemmArgs &args) {
  auto ldOr = [](int64_t ld, int64_t extent) { return ld ? ld : extent; };
  std::vector<Operand> ops = {
      {"A", args.a, ldOr(args.lda, p.transA ? r.m : r.k), p.transA ? r.m : r.k,
       p.transA ? r.k : r.m, args.strideA, sizeOf(p.ab), p.alignA,
       p.transA ? "M" : "K", "lda"},
      {"B", args.b, ldOr(args.ldb, p.transB ? r.k : r.n), p.transB ? r.k : r.n,
       p.transB ? r.n : r.k, args.strideB, sizeOf(p.ab), p.alignB,
       p.transB ? "K" : "N", "ldb"},
      {"C", args.c, ldOr(args.ldc, r.n), r.n, r.m, args.strideC, sizeOf(p.c),
       p.alignC, "N", "ldc"}};
  if (p.bias != BiasKind::None) {
    const int64_t len = p.bias == BiasKind::AlongM ? r.m : r.n;
    // A bias along N is read in C's pairs; one along M one value a row.
    ops.push_back({"bias", args.bias, len, len, 1, args.strideBias, sizeOf(p.c),
                   p.bias == BiasKind::AlongN ? p.alignC : 1,
                   p.bias == BiasKind::AlongM ? "M" : "N", "ld of bias"});
  }
  if (p.residual)
    ops.push_back({"residual", args.residual, ldOr(args.ldr, r.n), r.n, r.m,
                   args.strideResidual, sizeOf(p.c), p.alignC, "N", "ldr"});
  for (Operand &o : ops)
    if (o.stride < 0)
      o.stride = (o.rows - 1) * o.ld + o.extent;
  return ops;
}

} // namespace

GemmProblem Runtime::resolve(const GemmProblem &p, const GemmArgs &args) {
  GemmProblem r = p;
  int64_t m = args.m < 0 ? p.m : args.m;
  if (p.staticM && m != p.m)
    throw Error("gemm: the problem bakes M = " + std::to_string(p.m) +
                " but the call passes m = " + std::to_string(m) +
                "; use a problem with M at run time (static without \"m\")");
  r.m = m;
  r.batch = args.batch < 0 ? p.batch : args.batch;
  if (auto e = checkProblem(r))
    throw Error(*e);
  if (!args.a || !args.b || !args.c)
    throw Error(std::string("gemm: null device pointer for ") + (!args.a ? "A"
                                                                 : !args.b
                                                                     ? "B"
                                                                     : "C"));
  if (p.bias != BiasKind::None && !args.bias)
    throw Error("gemm: the problem has a bias along " +
                std::string(toString(p.bias)) +
                " but the call's bias pointer is null");
  if ((args.scaleA || args.scaleB) && !isFp8(p.ab))
    throw Error("gemm: scaleA/scaleB are the per-tensor scales of fp8 inputs; "
                "a " +
                std::string(toString(p.ab)) +
                " problem takes none (fold a scale into alpha)");
  if (p.residual && !args.residual)
    throw Error("gemm: the problem has a residual but the call's residual "
                "pointer is null");
  if (r.batch > 1 && args.strideC == 0)
    throw Error("gemm: strideC = 0 with batch = " + std::to_string(r.batch) +
                " makes every batch write the same C; pass -1 (packed) or a "
                "stride >= one C matrix");
  std::vector<Operand> ops = operands(p, r, args);
  for (Operand &o : ops) {
    if (o.ld < o.extent)
      throw Error(std::string("gemm: ") + o.ldName + " = " +
                  std::to_string(o.ld) + " is smaller than a stored row of " +
                  o.name + " (" + o.extentName + " = " +
                  std::to_string(o.extent) + " elements); pass ld >= " +
                  std::to_string(o.extent) + " or 0 for packed");
    if (reinterpret_cast<uintptr_t>(o.ptr) % o.elem != 0)
      throw Error(std::string("gemm: pointer ") + o.name +
                  " is not aligned to its " + std::to_string(o.elem) +
                  "-byte element type");
  }
  r.alignA = feasibleAlign(ops[0]);
  r.alignB = feasibleAlign(ops[1]);
  // C's vector width also serves the bias (along N) and the residual.
  r.alignC = feasibleAlign(ops[2]);
  for (size_t i = 3; i < ops.size(); ++i)
    if (ops[i].align > 1)
      r.alignC = std::min(r.alignC, feasibleAlign(ops[i]));
  return r;
}

namespace {

/// The fields of a resolved problem that pick a kernel; the key of the
/// per-call dispatch table.
std::string dispatchKey(const GemmProblem &r) {
  std::string k;
  return appendKey(k,
                   {r.m, r.n, r.k, int64_t(r.ab), int64_t(r.c),
                    int64_t(r.transA), int64_t(r.transB), int64_t(r.staticM),
                    int64_t(r.staticN), int64_t(r.staticK), int64_t(r.alignA),
                    int64_t(r.alignB), int64_t(r.alignC), int64_t(r.bias),
                    int64_t(r.act), int64_t(r.residual), r.batch});
}

} // namespace

std::shared_ptr<Kernel> Runtime::select(const GemmProblem &p,
                                        const GemmArgs &args, void *stream) {
  GemmProblem r = resolve(p, args);
  std::string key = dispatchKey(r);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = dispatch_.find(key); it != dispatch_.end())
      return it->second;
  }
  // Loading a module (let alone compiling) inside graph capture is not
  // allowed: the first call must happen before capture.
  if (stream && backend_ && backend_->isCapturing(stream))
    throw Error("gemm: no kernel is loaded yet for this problem and the "
                "stream is being captured into a graph; run the call once "
                "before capture (a cached or bundled kernel is then loaded "
                "without compiling)");
  // Kernels with M at run time are shared across M: key them on the
  // problem's M hint, not the call's, so one variant serves every M.
  GemmProblem keyed = r;
  if (!p.staticM)
    keyed.m = p.m;
  std::shared_ptr<Kernel> k;
  if (const BundleEntry *e = bundles_.find(target_, r)) {
    // The bundle's variant (its config, its alignments: at most the call's).
    GemmProblem bp = e->problem;
    if (!p.staticM)
      bp.m = p.m;
    k = build(bp, e->config, target_, stream);
  } else if (!bundles_.empty() && bundles_.missPolicy() == BundleMiss::Error) {
    throw bundles_.missError(target_, r);
  } else {
    k = build(keyed, chooseConfig(r), target_, stream);
  }
  std::lock_guard<std::mutex> lock(mu_);
  return dispatch_.emplace(key, k).first->second;
}

void Runtime::openTuningDb() {
  if (tuning_)
    return;
  tuningKey_ = deviceKey(*this);
  tuningPath_ = defaultTuningDbPath(opts_.cache);
  try {
    tuning_ = tuningPath_.empty() ? TuningDB() : TuningDB::load(tuningPath_);
  } catch (const Error &e) {
    // A broken DB must not stop the program: use the heuristic, say why.
    std::fprintf(stderr, "kgen: tuning DB ignored: %s\n", e.what());
    tuning_ = TuningDB();
  }
}

GemmConfig Runtime::chooseConfig(const GemmProblem &r) {
  if (!backend_) // no GPU, no measurements: the heuristic
    return defaultConfig(r, target_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    openTuningDb();
    // Measured winners first: the exact problem, then the nearest M bucket.
    // A record whose config does not fit this call (another alignment) is
    // passed over.
    TuningDB::Match match = tuning_->lookup(tuningKey_, r);
    if (!match.record && !(mainLoopProblem(r) == r))
      match = tuning_->lookup(tuningKey_, mainLoopProblem(r));
    if (match.record && !checkConfig(r, match.record->config, target_))
      return match.record->config;
    if (opts_.tune != TunePolicy::Online) {
      if (opts_.tune == TunePolicy::Offline &&
          tuning_->noteMiss(tuningKey_, r) && !tuningPath_.empty()) {
        // Persist the miss so `kgen tune --misses` can tune it later; the
        // DB file is shared with other processes, hence merge under its
        // lock.
        try {
          TuningDB miss;
          miss.noteMiss(tuningKey_, r);
          miss.mergeAndSave(tuningPath_);
        } catch (const Error &e) {
          std::fprintf(stderr, "kgen: tuning DB miss not saved: %s\n",
                       e.what());
        }
      }
      return defaultConfig(r, target_);
    }
  }
  // Online: measure this problem now (the tuner compiles through this
  // runtime, so the lock is not held), keep and persist the winner.
  TuneResult result = Tuner(*this).tune(r);
  if (!result.record)
    throw Error("tuning " +
                gemmKernelName(r, defaultConfig(r, target_), target_) +
                ": no candidate passed the numeric check; see kgen tune");
  std::lock_guard<std::mutex> lock(mu_);
  tuning_->record(tuningKey_, *result.record);
  if (!tuningPath_.empty()) {
    try {
      TuningDB one;
      one.record(tuningKey_, *result.record);
      one.mergeAndSave(tuningPath_);
    } catch (const Error &e) {
      std::fprintf(stderr, "kgen: tuning result not saved: %s\n", e.what());
    }
  }
  return result.record->config;
}

void Runtime::gemm(const GemmProblem &p, const GemmArgs &args, void *stream) {
  if (!backend_)
    throw Error("gemm: no GPU runtime with a device was found, so nothing "
                "can run (kernels can still be compiled: kgen compile)");
  launch(*select(p, args, stream), args, stream);
}

void Runtime::launch(const Kernel &k, const GemmArgs &args, void *stream) {
  if (!backend_ || !k.function)
    throw Error("launch: kernel " + k.source.name +
                " is not loaded on a GPU (compiled for " +
                std::string(toString(k.source.target)) + ")");
  GemmProblem r = resolve(k.problem, args);
  const GemmProblem &kp = k.problem;
  // The kernel needs its vector widths, which may be below the problem's
  // promise (a ragged baked extent lowers them).
  GemmTraits tr = gemmTraits(kp, k.config, k.source.target);
  if (k.config.repack) // the copies are aligned; those left out are too
    tr.vecA = tr.vecB = 1;
  if (r.alignA < tr.vecA || r.alignB < tr.vecB || r.alignC < tr.vecC)
    throw Error("launch: kernel " + k.source.name + " needs alignments (" +
                std::to_string(tr.vecA) + ", " + std::to_string(tr.vecB) +
                ", " + std::to_string(tr.vecC) +
                ") elements for A, B, C but the arguments allow only (" +
                std::to_string(r.alignA) + ", " + std::to_string(r.alignB) +
                ", " + std::to_string(r.alignC) +
                "); compile a variant with lower align or use Runtime::gemm");
  int slots = backend_->computeUnits();
  if (k.config.cluster > 1) {
    // A persistent grid of pairs must fit at once: as many pairs as the
    // GPU's clusters can hold, not half its multiprocessors.
    LaunchDims probe = gemmLaunchDims(kp, k.config, k.source.target, r.m);
    if (int resident = backend_->residentClusters(k.function, probe))
      slots = std::min(slots, resident * k.config.cluster);
  }
  LaunchDims d =
      gemmLaunchDims(kp, k.config, k.source.target, r.m, slots, r.batch);
  if (d.grid[1] > 65535)
    throw Error("launch: M = " + std::to_string(r.m) + " needs " +
                std::to_string(d.grid[1]) +
                " row blocks, over the grid limit 65535; use a larger blockM");
  std::vector<Operand> ops = operands(kp, r, args);
  gemm::Params prm{};
  prm.a = args.a;
  prm.b = args.b;
  prm.c = args.c;
  prm.bias = args.bias;
  prm.residual = args.residual;
  prm.lda = ops[0].ld;
  prm.ldb = ops[1].ld;
  prm.ldc = ops[2].ld;
  prm.strideA = ops[0].stride;
  prm.strideB = ops[1].stride;
  prm.strideC = ops[2].stride;
  for (size_t i = 3; i < ops.size(); ++i) {
    if (std::string_view(ops[i].name) == "bias") {
      prm.strideBias = ops[i].stride;
    } else {
      prm.ldr = ops[i].ld;
      prm.strideResidual = ops[i].stride;
    }
  }
  prm.m = int(r.m);
  prm.n = int(r.n);
  prm.k = int(r.k);
  prm.batch = int(r.batch);
  prm.alpha = args.alpha;
  prm.beta = args.beta;
  prm.scaleA = args.scaleA;
  prm.scaleB = args.scaleB;
  const GemmWorkspace need =
      gemmWorkspace(kp, k.config, r.m, r.batch, d.grid[0]);
  if (need.bytes()) {
    const Workspace &w = workspace(stream, need);
    prm.workspace = w.partials;
    prm.counters = static_cast<unsigned *>(w.counters);
    if (k.config.repack) {
      // Copy the operands the main loop cannot read with 16-byte vectors
      // (all of them when K is not a multiple of 8) into padded rows, on
      // the same stream, then point the main loop at the copies.
      if (!k.prologueFunction)
        throw Error("launch: kernel " + k.source.name +
                    " has no copy kernel loaded (" + k.source.prologue + ")");
      gemm::RepackParams rp;
      gemm::planRepack(prm, rp, kp.transA, kp.transB, r.alignA < 8,
                       r.alignB < 8, w.repack);
      LaunchDims cd{};
      cd.block[0] = unsigned(gemm::kRepackThreads);
      cd.block[1] = cd.block[2] = 1;
      cd.smemBytes = 0;
      void *copyParams[] = {&rp};
      // Nothing to copy (aligned operands, K a multiple of 8): no launch.
      if (gemm::repackGrid(rp,
                           int64_t(backend_->computeUnits()) *
                               gemm::kRepackBlocksPerUnit,
                           cd.grid)) {
        backend_->launch(k.prologueFunction, cd, copyParams, stream);
      }
    }
  }
  if (k.config.loop == GemmLoop::Wgmma) {
    // TMA reads A and B through tensor maps of this call's pointers and
    // extents (rows past M, N or K read as zeros); boxes are one 128-byte
    // swizzle row wide.
    Backend::TensorMap mapA, mapB;
    const GemmConfig &cf = k.config;
    // A pair loads half the rows of the slice it shares each.
    const unsigned splitA = cf.pairSharesA() ? cf.cluster : 1;
    const unsigned splitB = cf.pairSharesA() ? 1 : cf.cluster;
    const unsigned row = 128 / unsigned(sizeOf(kp.ab)); // 128-byte rows
    backend_->encodeTensorMap2d(&mapA, prm.a, kp.ab, uint64_t(prm.k),
                                uint64_t(prm.m), uint64_t(prm.lda), row,
                                unsigned(cf.blockM) / splitA);
    if (kp.transB) // N x K, K contiguous
      backend_->encodeTensorMap2d(&mapB, prm.b, kp.ab, uint64_t(prm.k),
                                  uint64_t(prm.n), uint64_t(prm.ldb), row,
                                  unsigned(cf.blockN) / splitB);
    else // K x N, N contiguous: 64-column boxes of blockK rows
      backend_->encodeTensorMap2d(&mapB, prm.b, kp.ab, uint64_t(prm.n),
                                  uint64_t(prm.k), uint64_t(prm.ldb), row,
                                  unsigned(cf.blockK));
    void *params[] = {&mapA, &mapB, &prm};
    backend_->launch(k.function, d, params, stream);
    return;
  }
  void *params[] = {&prm};
  backend_->launch(k.function, d, params, stream);
}

} // namespace kgen
