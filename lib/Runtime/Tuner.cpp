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
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Templates.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

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

std::optional<TuningRecord>
winnerRecord(const GemmProblem &p, const std::vector<CandidateResult> &ranked) {
  if (ranked.empty() || !ranked[0].ok())
    return std::nullopt;
  const CandidateResult &w = ranked[0];
  TuningRecord r;
  r.problem = p;
  r.config = w.config;
  r.kernel = w.kernel;
  r.timeUs = w.us;
  r.tflops = gemmTflops(p, w.us);
  r.gbs = gemmGbPerS(p, w.us);
  if (ranked.size() > 1 && ranked[1].ok())
    r.runnerUpUs = ranked[1].us;
  for (const CandidateResult &c : ranked)
    if (c.heuristic && c.ok())
      r.heuristicUs = c.us;
  return r;
}

const CandidateResult *TuneResult::winner() const {
  return !candidates.empty() && candidates[0].ok() ? &candidates[0] : nullptr;
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

void tuneAndRecord(
    const std::vector<size_t> &pending, TuningDB &db, const DeviceKey &key,
    const std::string &dbPath, const std::function<TuneResult(size_t)> &tuneOne,
    const std::function<void(size_t, const TuneResult &, bool)> &done) {
  for (size_t i : pending) {
    TuneResult r = tuneOne(i);
    bool stored = r.record && db.record(key, *r.record);
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
  void *params[] = {&a,   &b,   &c,     &m,    &n,   &k,    &lda,
                    &ldb, &ldc, &alpha, &beta, &ref, &naive};
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
// The tuner
//===----------------------------------------------------------------------===//

namespace {

using Clock = std::chrono::steady_clock;

size_t roundUp256(size_t v) { return (v + 255) / 256 * 256; }

/// Event pairs one timing batch may use.
constexpr size_t kPairs = 128;

/// One problem's device state: rotated input sets (A, B, C each), the
/// reference's outputs, a stream and timing events. Freed on scope exit.
class Workspace {
public:
  Workspace(Backend &be, const GemmProblem &p, const TunerOptions &o)
      : be_(be), p_(p) {
    aBytes = size_t(p.m * p.k * sizeOf(p.ab));
    bBytes = size_t(p.n * p.k * sizeOf(p.ab));
    cBytes = size_t(p.m * p.n * sizeOf(p.c));
    offB = roundUp256(aBytes);
    offC = offB + roundUp256(bBytes);
    setBytes = offC + roundUp256(cBytes);
    sets = rotationSets(setBytes, be.l2Bytes(), o);
    try {
      stream = be.createStream();
      pool = static_cast<char *>(be.alloc(sets * setBytes));
      ref = static_cast<double *>(be.alloc(size_t(p.m * p.n) * 8));
      naive = be.alloc(cBytes);
      for (size_t i = 0; i < 2 * kPairs; ++i)
        events.push_back(be.createEvent());
    } catch (...) {
      release();
      throw;
    }
  }
  ~Workspace() { release(); }
  Workspace(const Workspace &) = delete;
  Workspace &operator=(const Workspace &) = delete;

  char *a(size_t set) const { return pool + set * setBytes; }
  char *b(size_t set) const { return a(set) + offB; }
  char *c(size_t set) const { return a(set) + offC; }

  /// The timed call on input set `j % sets`: packed, beta = 0.
  GemmArgs args(size_t j) const {
    GemmArgs g;
    size_t s = j % sets;
    g.a = a(s);
    g.b = b(s);
    g.c = c(s);
    g.m = p_.m;
    return g;
  }

  void *stream = nullptr;
  char *pool = nullptr;
  double *ref = nullptr;
  void *naive = nullptr;
  std::vector<Backend::Event> events;
  size_t aBytes = 0, bBytes = 0, cBytes = 0, offB = 0, offC = 0, setBytes = 0,
         sets = 1;

private:
  Backend &be_;
  GemmProblem p_;

  /// Errors are dropped: this runs while unwinding, and after a kernel
  /// fault every call fails.
  void release() {
    auto quietly = [](auto &&f) {
      try {
        f();
      } catch (...) {
      }
    };
    if (stream)
      quietly([&] { be_.synchronizeStream(stream); });
    for (Backend::Event e : events)
      quietly([&] { be_.destroyEvent(e); });
    events.clear();
    for (void *p : {static_cast<void *>(pool), static_cast<void *>(ref), naive})
      if (p)
        quietly([&] { be_.free(p); });
    pool = nullptr;
    ref = nullptr;
    naive = nullptr;
    if (stream)
      quietly([&] { be_.destroyStream(stream); });
    stream = nullptr;
  }
};

/// Destroys an instantiated graph on scope exit.
struct GraphGuard {
  Backend &be;
  Backend::GraphExec g = nullptr;
  ~GraphGuard() {
    if (g)
      try {
        be.destroyGraph(g);
      } catch (...) {
      }
  }
};

} // namespace

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
  // Only the tuning thread touches these.
  std::map<std::string, std::shared_future<std::shared_ptr<Kernel>>> kernels;
  std::map<std::string, std::shared_future<std::shared_ptr<GemmReference>>>
      references;

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

  void time(const Kernel &k, Workspace &ws, CandidateResult &cr,
            TuneResult &res);
  double sample(Workspace &ws, size_t n, const std::function<void()> &run,
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
  for (const GemmConfig &c : enumerateConfigs(r, I.target)) {
    std::string name = gemmKernelName(r, c, I.target);
    if (!I.kernels.count(name))
      I.kernels[name] = I.submit<std::shared_ptr<Kernel>>(
          [&rt = I.rt, r, c] { return rt.compile(r, c); });
  }
}

TuneResult Tuner::tune(const GemmProblem &p) {
  Impl &I = *impl_;
  Backend &be = *I.be;
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
  const std::vector<GemmConfig> configs = enumerateConfigs(r, I.target);

  TuneProgress prog;
  prog.candidates = configs.size();
  std::vector<std::shared_future<std::shared_ptr<Kernel>>> futures;
  for (const GemmConfig &c : configs)
    futures.push_back(I.kernels.at(gemmKernelName(r, c, I.target)));
  auto tick = [&] {
    prog.compiled =
        size_t(std::count_if(futures.begin(), futures.end(), [](const auto &f) {
          return f.wait_for(std::chrono::seconds(0)) ==
                 std::future_status::ready;
        }));
    if (I.o.progress)
      I.o.progress(prog);
  };
  tick();

  Workspace ws(be, r, I.o);
  // Split-K candidates get a runtime-owned workspace on ws.stream; free it
  // before ws destroys the stream.
  struct ReleaseSplitK {
    Runtime &rt;
    void *stream;
    ~ReleaseSplitK() {
      try {
        rt.releaseWorkspace(stream);
      } catch (...) {
      }
    }
  } releaseSplitK{I.rt, ws.stream};
  res.sets = ws.sets;
  std::shared_ptr<GemmReference> ref =
      I.wait(I.references.at(gemmReferenceName(r)), tick);

  // Inputs: uniform in [-1, 1), a different stream of values per set. C
  // is never read (beta = 0); the check poisons it.
  for (size_t s = 0; s < ws.sets; ++s) {
    ref->fill(ws.a(s), r.m * r.k, r.ab, I.o.seed + 2 * s + 1, false, ws.stream);
    ref->fill(ws.b(s), r.n * r.k, r.ab, I.o.seed + 2 * s + 2, false, ws.stream);
    be.memsetAsync(ws.c(s), 0, ws.cBytes, ws.stream);
  }
  ref->run(r, ws.args(0), ws.ref, ws.naive, ws.stream);
  be.synchronizeStream(ws.stream);
  std::vector<double> refH(size_t(r.m * r.n));
  std::vector<char> naiveH(ws.cBytes), ours(ws.cBytes);
  be.copyToHost(refH.data(), ws.ref, refH.size() * sizeof(double));
  be.copyToHost(naiveH.data(), ws.naive, ws.cBytes);

  for (size_t i = 0; i < configs.size(); ++i) {
    if (I.stopRequested())
      throw TuneInterrupted();
    CandidateResult cr;
    cr.config = configs[i];
    cr.kernel = gemmKernelName(r, cr.config, I.target);
    cr.heuristic = cr.config == res.heuristic;
    auto exclude = [&](CandidateResult::Status s, const std::string &why) {
      cr.status = s;
      cr.error = why;
      ++prog.failed;
      res.candidates.push_back(cr);
      tick();
    };

    std::shared_ptr<Kernel> k;
    try {
      k = I.wait(futures[i], tick);
    } catch (const TuneInterrupted &) {
      throw;
    } catch (const std::exception &e) {
      exclude(CandidateResult::Status::CompileFailed, e.what());
      continue;
    }

    // The check: one call on set 0 with C poisoned, so an unwritten
    // element shows as NaN.
    be.memsetAsync(ws.c(0), 0xff, ws.cBytes, ws.stream);
    try {
      I.rt.launch(*k, ws.args(0), ws.stream);
    } catch (const Error &e) {
      exclude(CandidateResult::Status::LaunchFailed, e.what());
      continue;
    }
    try {
      be.synchronizeStream(ws.stream);
    } catch (const Error &e) {
      throw Error("candidate " + cr.kernel + " failed on the device (" +
                  e.what() +
                  "); the GPU context is unusable after a fault, so tuning "
                  "stops here. This is a kgen bug: please report it with "
                  "the problem");
    }
    be.copyToHost(ours.data(), ws.c(0), ws.cBytes);
    cr.check = checkAgainstReference(r.c, r.m, r.n, ours.data(), r.n,
                                     refH.data(), naiveH.data());
    cr.checked = true;
    ++prog.checked;
    if (!cr.check.pass()) {
      exclude(CandidateResult::Status::CheckFailed,
              "wrong results: " + cr.check.describe());
      continue;
    }
    tick();

    try {
      I.time(*k, ws, cr, res);
    } catch (const TuneInterrupted &) {
      throw;
    } catch (const Error &e) {
      try {
        be.synchronizeStream(ws.stream);
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
  res.record = winnerRecord(r, res.candidates);
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

/// Runs `n` timed samples (`run` between an event pair each), appends each
/// one's milliseconds times `scale` to `out`, returns the measured total.
double Tuner::Impl::sample(Workspace &ws, size_t n,
                           const std::function<void()> &run,
                           std::vector<double> &out, double scale) {
  n = std::min(n, kPairs);
  for (size_t i = 0; i < n; ++i) {
    be->recordEvent(ws.events[2 * i], ws.stream);
    run();
    be->recordEvent(ws.events[2 * i + 1], ws.stream);
  }
  be->synchronizeEvent(ws.events[2 * n - 1]);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    double ms = be->elapsedMs(ws.events[2 * i], ws.events[2 * i + 1]);
    total += ms;
    out.push_back(ms * scale);
  }
  return total;
}

void Tuner::Impl::time(const Kernel &k, Workspace &ws, CandidateResult &cr,
                       TuneResult &res) {
  size_t j = 0;
  auto launchNext = [&] { rt.launch(k, ws.args(j++), ws.stream); };

  // A first estimate from single launches, after a few untimed ones.
  for (int i = 0; i < 3; ++i)
    launchNext();
  std::vector<double> first;
  sample(ws, 5, launchNext, first, 1.0);
  const double estMs = std::max(median(first), 1e-4);
  // Warm-up: clocks up, caches and TLBs in their steady state.
  size_t warm = size_t(std::clamp(std::ceil(o.warmupMs / estMs), 1.0, 5000.0));
  for (size_t i = 0; i < warm; ++i)
    launchNext();

  GraphGuard graph{*be};
  size_t perGraph = 1;
  if (graphs && estMs * 1000 < o.graphBelowUs) {
    perGraph = graphLaunches(estMs * 1000, ws.sets);
    try {
      be->beginCapture(ws.stream);
      try {
        for (size_t i = 0; i < perGraph; ++i)
          launchNext();
      } catch (...) {
        try {
          be->destroyGraph(be->endCapture(ws.stream));
        } catch (...) {
        }
        throw;
      }
      graph.g = be->endCapture(ws.stream);
      be->launchGraph(graph.g, ws.stream); // the replay's own warm-up
    } catch (const Error &e) {
      // Without graphs small kernels are timed launch by launch, which
      // overstates them by the launch overhead; say so once.
      graphs = false;
      if (graph.g)
        try {
          be->destroyGraph(graph.g);
        } catch (...) {
        }
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
    run = [&] { be->launchGraph(graph.g, ws.stream); };
  while (!enoughRuns(samples.size(), totalMs, o)) {
    if (stopRequested())
      throw TuneInterrupted();
    size_t n = nextBatch(samples.size(), totalMs, perRunMs, o, kPairs);
    totalMs += sample(ws, n, run, samples, scale);
    perRunMs = totalMs / double(samples.size());
  }
  cr.us = median(samples) * 1000;
  cr.runs = samples.size();
  cr.timedMs = totalMs;
  cr.graph = graph.g != nullptr;
  cr.perGraph = graph.g ? perGraph : 0;
  cr.tflops = gemmTflops(res.problem, cr.us);
  cr.gbs = gemmGbPerS(res.problem, cr.us);
}

} // namespace kgen
