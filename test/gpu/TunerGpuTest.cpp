//===- TunerGpuTest.cpp - Tuning on the GPU, end to end -------------------===//
//
// The backend's timing primitives (streams, events, memset, graph capture
// and replay), then one small problem tuned for real: every candidate
// checked and timed, the winner recorded in a DB at $KGEN_TUNING_DB, and a
// fresh Runtime's dispatcher choosing the winner's config from it and
// computing the right answer with it; and fp8 attention problems tuned
// (sm_90a). Without a GPU every test is skipped.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Reference.h"
#include "kgen/Runtime/Tuner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

using namespace kgen;
namespace fs = std::filesystem;

namespace {

/// A device buffer freed on scope exit.
struct Buffer {
  Backend *be;
  char *p;
  size_t bytes;
  Buffer(Backend *be, size_t bytes)
      : be(be), p(static_cast<char *>(be->alloc(bytes))), bytes(bytes) {}
  ~Buffer() {
    try {
      be->free(p);
    } catch (...) {
    }
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  std::vector<char> download() const {
    std::vector<char> h(bytes);
    be->copyToHost(h.data(), p, bytes);
    return h;
  }
};

class TunerGpu : public ::testing::Test {
protected:
  /// The dispatcher reads $KGEN_TUNING_DB once, on its first call: it must
  /// name the test's file before any Runtime dispatches.
  static void SetUpTestSuite() {
    const char *base = std::getenv("KGEN_CACHE_DIR");
    std::string parent = base && *base ? base : fs::temp_directory_path();
    fs::create_directories(parent);
    dbPath() =
        parent + "/tuner-gpu-test-" + std::to_string(::getpid()) + ".json";
    fs::remove(dbPath());
    ::setenv("KGEN_TUNING_DB", dbPath().c_str(), 1);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove(dbPath(), ec);
    fs::remove(dbPath() + ".lock", ec);
  }
  static std::string &dbPath() {
    static std::string p;
    return p;
  }

  void SetUp() override {
    rt = std::make_unique<Runtime>();
    if (!rt->backend()) {
      std::string why;
      openBackend(std::nullopt, &why);
      GTEST_SKIP() << "no GPU: " << why;
    }
    be = rt->backend();
  }

  std::unique_ptr<Runtime> rt;
  Backend *be = nullptr;
};

TEST_F(TunerGpu, StreamsEventsMemsetAndGraphReplay) {
  const size_t bytes = 1 << 20;
  Buffer buf(be, bytes);
  void *s = be->createStream();
  Backend::Event e0 = be->createEvent(), e1 = be->createEvent();

  be->recordEvent(e0, s);
  be->memsetAsync(buf.p, 0xab, bytes, s);
  be->recordEvent(e1, s);
  be->synchronizeEvent(e1);
  EXPECT_GE(be->elapsedMs(e0, e1), 0.0f);
  for (char c : buf.download())
    ASSERT_EQ(uint8_t(c), 0xab);

  // A graph of a memset and a kernel (the reference's fill), replayed on
  // zeroed memory, gives what the direct calls give.
  GemmProblem p;
  GemmReference ref(*rt, p);
  Buffer direct(be, bytes);
  ref.fill(direct.p, bytes / 2, DType::BF16, 7, false, s);
  be->beginCapture(s);
  EXPECT_TRUE(be->isCapturing(s));
  be->memsetAsync(buf.p, 0x11, bytes, s);
  ref.fill(buf.p, bytes / 4, DType::BF16, 7, false, s);
  Backend::GraphExec g = be->endCapture(s);
  EXPECT_FALSE(be->isCapturing(s));
  be->memsetAsync(buf.p, 0, bytes, s);
  be->synchronizeStream(s);
  be->launchGraph(g, s);
  be->launchGraph(g, s);
  be->synchronizeStream(s);
  std::vector<char> got = buf.download(), want = direct.download();
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + bytes / 2, want.begin()))
      << "the replayed fill differs from the direct one";
  for (size_t i = bytes / 2; i < bytes; ++i)
    ASSERT_EQ(uint8_t(got[i]), 0x11) << "byte " << i;

  be->destroyGraph(g);
  be->destroyEvent(e0);
  be->destroyEvent(e1);
  be->destroyStream(s);
  EXPECT_GT(be->l2Bytes(), 0u) << "the driver did not report the L2 size";
}

TEST_F(TunerGpu, TunesAProblemAndTheDispatcherUsesTheWinner) {
  GemmProblem p;
  p.m = 256;
  p.n = 512;
  p.k = 512;
  p.transB = true;
  TunerOptions o;
  o.minRuns = 10; // the statistics are unit-tested; keep the GPU time short
  o.minMs = 2;
  o.warmupMs = 2;
  std::vector<TuneProgress> progress;
  o.progress = [&](const TuneProgress &x) { progress.push_back(x); };

  TuneResult r;
  {
    Tuner tuner(*rt, o);
    r = tuner.tune(p);
  }
  const Target t = rt->target();
  ASSERT_EQ(r.problem, tuningProblem(p));
  ASSERT_EQ(r.candidates.size(), enumerateConfigs(r.problem, t).size());
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().timed + progress.back().failed,
            r.candidates.size());
  for (const CandidateResult &c : r.candidates) {
    std::printf("[ candidate] %-70s %-14s %8.2f us %5zu runs%s %s\n",
                c.kernel.c_str(), toString(c.status), c.us, c.runs,
                c.graph ? " (graph)" : "", c.error.c_str());
    EXPECT_TRUE(c.ok()) << c.kernel << ": " << c.error;
    if (!c.ok())
      continue;
    EXPECT_TRUE(c.checked && c.check.pass()) << c.check.describe();
    EXPECT_GT(c.us, 0);
    EXPECT_GE(c.runs, size_t(o.minRuns));
    EXPECT_GE(c.timedMs, o.minMs);
  }
  for (const std::string &n : r.notes)
    std::printf("[ note     ] %s\n", n.c_str());
  ASSERT_TRUE(r.record) << "no candidate passed";
  const TuningRecord &w = *r.record;
  EXPECT_EQ(w.timeUs, r.candidates[0].us);
  for (const CandidateResult &c : r.candidates)
    EXPECT_LE(w.timeUs, c.ok() ? c.us : w.timeUs);
  EXPECT_EQ(w.kernel, gemmKernelName(r.problem, w.config, t));
  const CandidateResult *h = r.heuristicResult();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->config, defaultConfig(r.problem, t));
  EXPECT_EQ(w.heuristicUs, h->us);
  std::printf("[ winner   ] %s: %.2f us, %.1f TFLOP/s, %.1f GB/s; runner-up "
              "+%.1f%%, heuristic +%.1f%%\n",
              w.kernel.c_str(), w.timeUs, w.tflops, w.gbs,
              marginPercent(w.timeUs, w.runnerUpUs),
              marginPercent(w.timeUs, w.heuristicUs));

  // Record, then a fresh Runtime finds it and runs the winner.
  const DeviceKey key = deviceKey(*rt);
  TuningDB db = TuningDB::load(dbPath());
  ASSERT_TRUE(db.record(key, w));
  db.mergeAndSave(dbPath());
  EXPECT_TRUE(
      pendingProblems(TuningDB::load(dbPath()), key, {p}, false).empty());

  Runtime fresh;
  ASSERT_NE(fresh.backend(), nullptr);
  Backend *fb = fresh.backend();
  Buffer A(fb, p.m * p.k * 2), B(fb, p.n * p.k * 2), C(fb, p.m * p.n * 2);
  Buffer ref(fb, p.m * p.n * 8), naive(fb, p.m * p.n * 2);
  GemmArgs args;
  args.a = A.p;
  args.b = B.p;
  args.c = C.p;
  args.m = p.m;
  std::shared_ptr<Kernel> k = fresh.select(p, args);
  EXPECT_EQ(k->config, w.config) << "the dispatcher ran " << k->source.name
                                 << " instead of the winner " << w.kernel;
  EXPECT_EQ(k->source.name, w.kernel);

  GemmReference reference(fresh, p);
  reference.fill(A.p, p.m * p.k, DType::BF16, 1, false);
  reference.fill(B.p, p.n * p.k, DType::BF16, 2, false);
  reference.fill(C.p, p.m * p.n, DType::BF16, 0, true);
  reference.run(p, args, reinterpret_cast<double *>(ref.p), naive.p);
  fresh.gemm(p, args);
  fb->synchronize();
  std::vector<char> ours = C.download(), refH = ref.download(),
                    naiveH = naive.download();
  ReferenceCheck v = checkAgainstReference(
      p.c, p.m, p.n, ours.data(), p.n,
      reinterpret_cast<const double *>(refH.data()), naiveH.data());
  EXPECT_TRUE(v.pass()) << v.describe();
}

} // namespace

TEST_F(TunerGpu, OnlinePolicyTunesOnFirstUseAndSaves) {
  GemmProblem p;
  p.m = 96;
  p.n = 384;
  p.k = 320;
  p.transB = true;
  RuntimeOptions o;
  o.tune = TunePolicy::Online;
  Runtime online(o);
  Backend *b = online.backend();
  Buffer A(b, p.m * p.k * 2), B(b, p.n * p.k * 2), C(b, p.m * p.n * 2);
  GemmArgs args;
  args.a = A.p;
  args.b = B.p;
  args.c = C.p;
  std::shared_ptr<Kernel> k = online.select(p, args);
  // The first use measured every candidate and saved the winner; its
  // config is what the dispatcher chose.
  TuningDB db = TuningDB::load(dbPath());
  GemmProblem resolved = Runtime::resolve(p, args);
  TuningDB::Match m = db.lookup(deviceKey(online), resolved);
  ASSERT_EQ(m.kind, TuningDB::Match::Exact);
  EXPECT_EQ(m.record->config, k->config);
  std::printf("[ online   ] %s: %.2f us\n", m.record->kernel.c_str(),
              m.record->timeUs);
  // A second process-like Runtime (off) uses the record without timing.
  RuntimeOptions off;
  off.tune = TunePolicy::Off;
  Runtime again(off);
  EXPECT_EQ(again.select(p, args)->config, k->config);
}

namespace {

/// Shared checks of an attention or mLSTM tune: every candidate passed and
/// was timed, the winner is the fastest and is recorded with its margins.
void expectFamilyTune(const TuneResult &r, const TunerOptions &o,
                      size_t candidates) {
  ASSERT_TRUE(r.family.has_value());
  ASSERT_EQ(r.candidates.size(), candidates);
  for (const CandidateResult &c : r.candidates) {
    std::printf("[ candidate] %-70s %-14s %8.2f us %5zu runs%s %s\n",
                c.kernel.c_str(), toString(c.status), c.us, c.runs,
                c.graph ? " (graph)" : "", c.error.c_str());
    EXPECT_TRUE(c.ok()) << c.kernel << ": " << c.error;
    if (!c.ok())
      continue;
    EXPECT_TRUE(c.checked && c.check.pass()) << c.check.describe();
    EXPECT_GE(c.runs, size_t(o.minRuns));
    EXPECT_GT(c.us, 0);
  }
  ASSERT_TRUE(r.familyRecord) << "no candidate passed";
  const FamilyRecord &w = *r.familyRecord;
  EXPECT_EQ(w.timeUs, r.candidates[0].us);
  EXPECT_EQ(w.config, r.candidates[0].familyConfig);
  const CandidateResult *h = r.heuristicResult();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->familyConfig, r.familyHeuristic);
  EXPECT_EQ(w.heuristicUs, h->us);
  std::printf("[ winner   ] %s %s: %.2f us, %.1f TFLOP/s, %.1f GB/s; "
              "runner-up +%.1f%%, heuristic +%.1f%%\n",
              w.kernel.c_str(), w.config.dump().c_str(), w.timeUs, w.tflops,
              w.gbs, marginPercent(w.timeUs, w.runnerUpUs),
              marginPercent(w.timeUs, w.heuristicUs));
}

TunerOptions shortTiming() {
  TunerOptions o;
  o.minRuns = 10; // the statistics are unit-tested; keep the GPU time short
  o.minMs = 2;
  o.warmupMs = 2;
  return o;
}

} // namespace

TEST_F(TunerGpu, TunesAnAttentionProblemAndTheDispatcherUsesTheWinner) {
  if (targetInfo(rt->target()).vendor != Vendor::NVIDIA)
    GTEST_SKIP() << "the attention reference kernel is NVIDIA-only";
  AttentionProblem p; // causal GQA 4:1 prefill
  p.batch = 2;
  p.headsQ = 8;
  p.headsKv = 2;
  p.seqlenQ = p.seqlenK = 256;
  p.headDimQk = p.headDimV = 64;
  p.causal = true;
  TunerOptions o = shortTiming();
  TuneResult r;
  {
    Tuner tuner(*rt, o);
    r = tuner.tune(p);
  }
  expectFamilyTune(r, o, enumerateConfigs(p, rt->target()).size());
  ASSERT_TRUE(r.familyRecord);
  const DeviceKey key = deviceKey(*rt);
  TuningDB db = TuningDB::load(dbPath());
  db.record(key, *r.familyRecord);
  db.mergeAndSave(dbPath());

  // A fresh runtime (policy off) takes the winner from the DB, for this
  // problem and, through the bucket, for a ragged length below it.
  RuntimeOptions off;
  off.tune = TunePolicy::Off;
  Runtime fresh(off);
  AttentionArgs none;
  EXPECT_EQ(toJson(fresh.selectAttention(p, none)), r.familyRecord->config);
  AttentionProblem ragged = p;
  ragged.seqlenQ = ragged.seqlenK = 250;
  TuningDB::FamilyMatch m = TuningDB::load(dbPath()).lookup(key, ragged);
  ASSERT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(m.bucketProblem, tuningProblemJson(p));
  EXPECT_EQ(toJson(fresh.selectAttention(ragged, none)),
            r.familyRecord->config);
}

/// fp8 inputs (sm_90a): every candidate of a causal GQA prefill with a
/// bias (e4m3, the bias bf16) and of a decode (e5m2, split-KV candidates)
/// checked against the reference with a bf16 O and timed.
TEST_F(TunerGpu, TunesFp8AttentionProblems) {
  if (rt->target() != Target::SM90A)
    GTEST_SKIP() << "fp8 attention runs on sm_90a only; the GPU is "
                 << toString(rt->target());
  AttentionProblem prefill;
  prefill.batch = 2;
  prefill.headsQ = 8;
  prefill.headsKv = 2;
  prefill.seqlenQ = prefill.seqlenK = 300;
  prefill.dtype = DType::E4M3;
  prefill.causal = prefill.bias = prefill.lse = true;
  AttentionProblem decode;
  decode.batch = 2;
  decode.headsQ = 32;
  decode.headsKv = 8;
  decode.seqlenQ = 1;
  decode.seqlenK = 2048;
  decode.dtype = DType::E5M2;
  const TunerOptions o = shortTiming();
  Tuner tuner(*rt, o);
  for (const AttentionProblem &p : {prefill, decode}) {
    const TuneResult r = tuner.tune(p);
    expectFamilyTune(r, o, enumerateConfigs(p, rt->target()).size());
  }
}

TEST_F(TunerGpu, TunesAnMlstmProblemAndTheDispatcherUsesTheWinner) {
  MlstmProblem p;
  p.b = 2;
  p.nh = 4;
  p.s = 256;
  p.dqk = p.dv = 64;
  TunerOptions o = shortTiming();
  TuneResult r;
  {
    Tuner tuner(*rt, o);
    r = tuner.tune(p);
  }
  expectFamilyTune(r, o, enumerateConfigs(p, rt->target()).size());
  ASSERT_TRUE(r.familyRecord);
  const DeviceKey key = deviceKey(*rt);
  TuningDB db = TuningDB::load(dbPath());
  db.record(key, *r.familyRecord);
  db.mergeAndSave(dbPath());

  // A fresh runtime (policy off) takes the winner for S = 256 and, through
  // the S bucket, for S = 200; another B gets no record.
  RuntimeOptions off;
  off.tune = TunePolicy::Off;
  Runtime fresh(off);
  Buffer buf(fresh.backend(), 1 << 20); // selectMlstm only builds
  MlstmArgs a;
  a.q = a.k = a.v = a.i = a.f = buf.p;
  a.h = buf.p;
  EXPECT_EQ(toJson(fresh.selectMlstm(p, a)->config), r.familyRecord->config);
  a.s = 200;
  EXPECT_EQ(toJson(fresh.selectMlstm(p, a)->config), r.familyRecord->config);
  MlstmProblem other = p;
  other.b = 3;
  EXPECT_EQ(TuningDB::load(dbPath()).lookup(key, other).kind,
            TuningDB::Match::None);
}

// One tuner, two problems of one shape, the second with initial and final
// states (the decoding step): every candidate of the second must launch with
// its own plan. Kernel names do not say whether a problem has states, and
// the compile pool once keyed plans by name and config only, so the second
// problem got the first one's plans and every shared candidate failed
// ("initial state pointers given but the problem has none").
TEST_F(TunerGpu, MlstmProblemsDifferingOnlyInStatesGetTheirOwnPlans) {
  MlstmProblem plain;
  plain.b = 1;
  plain.nh = 2;
  plain.s = 64;
  plain.dqk = plain.dv = 64;
  MlstmProblem step = plain;
  step.s = 1;
  step.initialState = step.finalState = true;
  MlstmProblem withStates = plain;
  withStates.initialState = withStates.finalState = true;
  TunerOptions o = shortTiming();
  Tuner tuner(*rt, o);
  for (const MlstmProblem &p : {plain, withStates, step}) {
    SCOPED_TRACE(toJson(p).dump());
    expectFamilyTune(tuner.tune(p), o,
                     enumerateConfigs(p, rt->target()).size());
  }
}
