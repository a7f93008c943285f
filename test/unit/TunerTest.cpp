//===- TunerTest.cpp - The tuner's logic, without a GPU -------------------===//
//
// What `kgen tune` decides without measuring: which problems a run still
// has to tune (resume, --force), the save-after-every-problem loop and what
// an interruption (an exception, or the process killed) leaves in the DB,
// ranking and the winner record (a candidate failing its check never wins),
// the tolerance rule and the host's element conversions, the timing
// statistics, and the references' source (compiled through nvrtc/hiprtc
// when they are installed).
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Tuner.h"
#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kgen;
namespace fs = std::filesystem;

namespace {

DeviceKey fakeGpu() {
  return {.device = "Fake GPU",
          .arch = "sm_90",
          .target = Target::SM90A,
          .computeUnits = 132,
          .kgenVersion = std::string(kVersion),
          .compiler = "nvrtc",
          .compilerVersion = "12.8"};
}

GemmProblem gemm(int64_t m, int64_t n, int64_t k) {
  return {.m = m, .n = n, .k = k, .transB = true};
}

CandidateResult timed(int blockM, double us, bool heuristic = false) {
  CandidateResult c;
  c.config.blockM = blockM;
  c.kernel = "k" + std::to_string(blockM);
  c.us = us;
  c.heuristic = heuristic;
  return c;
}

CandidateResult excluded(int blockM, CandidateResult::Status s,
                         bool heuristic = false) {
  CandidateResult c = timed(blockM, 0, heuristic);
  c.status = s;
  c.error = "bad";
  return c;
}

/// What tune() would return for `p`: one candidate taking `us`.
TuneResult fakeResult(const GemmProblem &p, double us) {
  TuneResult r;
  r.problem = tuningProblem(p);
  CandidateResult c = timed(128, us, true);
  c.kernel = gemmKernelName(r.problem, c.config, Target::SM90A);
  r.candidates = {c};
  r.record = winnerRecord(r.problem, r.candidates);
  return r;
}

class TunerTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *base = std::getenv("KGEN_CACHE_DIR");
    std::string parent = base && *base ? base : fs::temp_directory_path();
    fs::create_directories(parent);
    std::string tmpl = parent + "/tunertest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    db_ = dir_ + "/tuning.json";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_, db_;
};

//===----------------------------------------------------------------------===//
// Resume
//===----------------------------------------------------------------------===//

TEST_F(TunerTest, PendingSkipsExactRecordsAndDuplicates) {
  std::vector<GemmProblem> list = {gemm(1, 4096, 4096), gemm(16, 4096, 4096),
                                   gemm(532, 2048, 2048), gemm(1, 4096, 4096),
                                   gemm(127, 4099, 1023)};
  TuningDB db;
  ASSERT_TRUE(db.record(fakeGpu(), *fakeResult(list[0], 5).record));
  ASSERT_TRUE(db.record(fakeGpu(), *fakeResult(list[4], 9).record));
  // Index 3 repeats index 0; 127x4099x1023 is found although the list has
  // it with alignment 8, which its extents lower to 1 (tuningProblem).
  EXPECT_EQ(pendingProblems(db, fakeGpu(), list, false),
            (std::vector<size_t>{1, 2}));
  // --force retunes every distinct problem once.
  EXPECT_EQ(pendingProblems(db, fakeGpu(), list, true),
            (std::vector<size_t>{0, 1, 2, 4}));
}

TEST_F(TunerTest, PendingIgnoresOtherKeysAndBuckets) {
  TuningDB db;
  DeviceKey other = fakeGpu();
  other.compilerVersion = "13.0"; // a new compiler builds other code
  ASSERT_TRUE(db.record(other, *fakeResult(gemm(64, 4096, 4096), 5).record));
  // A record for M = 128 serves M = 100 at dispatch (its bucket), but M = 100
  // has not been measured: tuning it is still pending.
  ASSERT_TRUE(
      db.record(fakeGpu(), *fakeResult(gemm(128, 4096, 4096), 6).record));
  std::vector<GemmProblem> list = {gemm(64, 4096, 4096), gemm(100, 4096, 4096),
                                   gemm(128, 4096, 4096)};
  EXPECT_EQ(pendingProblems(db, fakeGpu(), list, false),
            (std::vector<size_t>{0, 1}));
}

TEST_F(TunerTest, TuningProblemIsWhatTheDispatcherResolves) {
  GemmProblem ragged = tuningProblem(gemm(127, 4099, 1023));
  EXPECT_EQ(ragged.alignA, 1);
  EXPECT_EQ(ragged.alignB, 1);
  EXPECT_EQ(ragged.alignC, 1);
  EXPECT_EQ(ragged.m, 127);
  GemmProblem even = tuningProblem(gemm(532, 2048, 2048));
  EXPECT_EQ(even, gemm(532, 2048, 2048));
  EXPECT_EQ(tuningProblem(ragged), ragged);
}

/// The loop saves after every problem: an exception in the third leaves the
/// first two in the file, and the rerun tunes only what is left.
TEST_F(TunerTest, ResumeAfterInterruption) {
  std::vector<GemmProblem> list;
  for (int64_t m : {1, 16, 32, 64, 128})
    list.push_back(gemm(m, 4096, 4096));
  TuningDB db = TuningDB::load(db_);
  std::vector<size_t> pending = pendingProblems(db, fakeGpu(), list, false);
  ASSERT_EQ(pending.size(), 5u);

  std::vector<size_t> tuned, done;
  auto tuneOne = [&](size_t i) {
    if (tuned.size() == 2)
      throw TuneInterrupted();
    tuned.push_back(i);
    return fakeResult(list[i], 10.0 + double(i));
  };
  auto onDone = [&](size_t i, const TuneResult &r, bool stored) {
    EXPECT_TRUE(stored);
    EXPECT_TRUE(r.record.has_value());
    done.push_back(i);
  };
  EXPECT_THROW(tuneAndRecord(pending, db, fakeGpu(), db_, tuneOne, onDone),
               TuneInterrupted);
  EXPECT_EQ(done, (std::vector<size_t>{0, 1}));

  // What a new process sees.
  TuningDB saved = TuningDB::load(db_);
  EXPECT_EQ(saved.records(fakeGpu()).size(), 2u);
  for (size_t i : {0, 1})
    EXPECT_EQ(saved.lookup(fakeGpu(), tuningProblem(list[i])).kind,
              TuningDB::Match::Exact);
  std::vector<size_t> rest = pendingProblems(saved, fakeGpu(), list, false);
  EXPECT_EQ(rest, (std::vector<size_t>{2, 3, 4}));

  tuned.clear();
  done.clear();
  auto all = [&](size_t i) {
    tuned.push_back(i);
    return fakeResult(list[i], 10.0 + double(i));
  };
  tuneAndRecord(rest, saved, fakeGpu(), db_, all, onDone);
  EXPECT_EQ(tuned, (std::vector<size_t>{2, 3, 4}));
  TuningDB final = TuningDB::load(db_);
  EXPECT_EQ(final.records(fakeGpu()).size(), 5u);
  EXPECT_TRUE(pendingProblems(final, fakeGpu(), list, false).empty());
  EXPECT_EQ(pendingProblems(final, fakeGpu(), list, true).size(), 5u);
}

/// What tune() would return for an attention or mLSTM problem: one
/// candidate taking `us`, recorded as the family's winner.
template <class P>
TuneResult fakeFamilyResult(const P &p, const nlohmann::json &config,
                            double us) {
  TuneResult r;
  constexpr bool attention = std::is_same_v<P, AttentionProblem>;
  r.family = attention ? TuneFamily::Attention : TuneFamily::Mlstm;
  r.familyProblem = tuningProblemJson(p);
  CandidateResult c;
  c.familyConfig = config;
  c.kernel = attention ? "kgen_attn_fake" : "kgen_mlstm_fake";
  c.us = us;
  c.heuristic = true;
  r.candidates = {c};
  FamilyRecord rec;
  rec.family = *r.family;
  rec.problem = r.familyProblem;
  rec.config = config;
  rec.kernel = c.kernel;
  rec.timeUs = us;
  r.familyRecord = rec;
  return r;
}

TEST_F(TunerTest, ResumeOfAMixedFamilyList) {
  AttentionProblem prefill;
  prefill.batch = 4;
  prefill.headsQ = prefill.headsKv = 16;
  prefill.seqlenQ = prefill.seqlenK = 4096;
  prefill.causal = true;
  AttentionProblem decode = prefill;
  decode.seqlenQ = 1;
  MlstmProblem layer;
  layer.b = 8;
  layer.nh = 8;
  layer.s = 8192;
  layer.dqk = 256;
  layer.dv = 512;
  const std::vector<AnyProblem> list = {
      gemm(532, 2048, 2048), prefill, layer, decode, prefill, // duplicate
      gemm(16, 4096, 4096)};
  TuningDB db = TuningDB::load(db_);
  std::vector<size_t> pending = pendingAnyProblems(db, fakeGpu(), list, false);
  ASSERT_EQ(pending, (std::vector<size_t>{0, 1, 2, 3, 5}));

  const nlohmann::json attnConfig = toJson(AttentionConfig{});
  const nlohmann::json mlstmConfig = toJson(MlstmConfig{});
  auto result = [&](size_t i) {
    if (auto *g = std::get_if<GemmProblem>(&list[i]))
      return fakeResult(*g, 10.0 + double(i));
    if (auto *a = std::get_if<AttentionProblem>(&list[i]))
      return fakeFamilyResult(*a, attnConfig, 10.0 + double(i));
    return fakeFamilyResult(std::get<MlstmProblem>(list[i]), mlstmConfig,
                            10.0 + double(i));
  };
  std::vector<size_t> tuned;
  auto stopAfterThree = [&](size_t i) {
    if (tuned.size() == 3)
      throw TuneInterrupted();
    tuned.push_back(i);
    return result(i);
  };
  size_t stored = 0;
  auto onDone = [&](size_t, const TuneResult &, bool kept) { stored += kept; };
  EXPECT_THROW(
      tuneAndRecord(pending, db, fakeGpu(), db_, stopAfterThree, onDone),
      TuneInterrupted);
  EXPECT_EQ(stored, 3u);

  // A new process: one record of each family saved, the rest pending.
  TuningDB saved = TuningDB::load(db_);
  EXPECT_EQ(saved.records(fakeGpu()).size(), 1u);
  EXPECT_EQ(saved.familyRecords(fakeGpu(), TuneFamily::Attention).size(), 1u);
  EXPECT_EQ(saved.familyRecords(fakeGpu(), TuneFamily::Mlstm).size(), 1u);
  EXPECT_EQ(saved.lookup(fakeGpu(), layer).kind, TuningDB::Match::Exact);
  std::vector<size_t> rest = pendingAnyProblems(saved, fakeGpu(), list, false);
  EXPECT_EQ(rest, (std::vector<size_t>{3, 5}));

  tuned.clear();
  tuneAndRecord(
      rest, saved, fakeGpu(), db_,
      [&](size_t i) {
        tuned.push_back(i);
        return result(i);
      },
      onDone);
  EXPECT_EQ(tuned, (std::vector<size_t>{3, 5}));
  TuningDB final = TuningDB::load(db_);
  EXPECT_TRUE(pendingAnyProblems(final, fakeGpu(), list, false).empty());
  EXPECT_EQ(pendingAnyProblems(final, fakeGpu(), list, true).size(), 5u);
  EXPECT_EQ(final.lookup(fakeGpu(), decode).kind, TuningDB::Match::Exact);
  EXPECT_EQ(final.size(), 5u);
}

/// A kill (no exception, no handler) in the middle of the third problem:
/// the file holds the first two, whole.
TEST_F(TunerTest, ResumeAfterKill) {
  std::vector<GemmProblem> list;
  for (int64_t m : {1, 16, 32, 64})
    list.push_back(gemm(m, 8192, 8192));
  std::fflush(nullptr);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TuningDB db;
    int calls = 0;
    auto tuneOne = [&](size_t i) {
      if (++calls == 3)
        ::kill(::getpid(), SIGKILL);
      return fakeResult(list[i], 20.0);
    };
    tuneAndRecord({0, 1, 2, 3}, db, fakeGpu(), db_, tuneOne, nullptr);
    ::_exit(0); // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "status " << status;
  TuningDB saved = TuningDB::load(db_);
  EXPECT_EQ(saved.records(fakeGpu()).size(), 2u);
  EXPECT_EQ(pendingProblems(saved, fakeGpu(), list, false),
            (std::vector<size_t>{2, 3}));
}

TEST_F(TunerTest, NoWinnerIsSavedAsNothingAndStaysPending) {
  std::vector<GemmProblem> list = {gemm(1, 1024, 1024), gemm(2, 1024, 1024)};
  TuningDB db;
  std::vector<bool> stored;
  tuneAndRecord(
      {0, 1}, db, fakeGpu(), db_,
      [&](size_t i) {
        TuneResult r = fakeResult(list[i], 3);
        if (i == 1) { // every candidate failed its check
          r.candidates[0].status = CandidateResult::Status::CheckFailed;
          r.record = winnerRecord(r.problem, r.candidates);
        }
        return r;
      },
      [&](size_t, const TuneResult &, bool s) { stored.push_back(s); });
  EXPECT_EQ(stored, (std::vector<bool>{true, false}));
  EXPECT_EQ(pendingProblems(TuningDB::load(db_), fakeGpu(), list, false),
            (std::vector<size_t>{1}));
}

TEST_F(TunerTest, ForcedRetuneKeepsTheFasterRecord) {
  std::vector<GemmProblem> list = {gemm(64, 2048, 2048)};
  TuningDB db;
  std::vector<bool> stored;
  auto record = [&](double us) {
    tuneAndRecord(
        pendingProblems(db, fakeGpu(), list, true), db, fakeGpu(), db_,
        [&](size_t i) { return fakeResult(list[i], us); },
        [&](size_t, const TuneResult &, bool s) { stored.push_back(s); });
  };
  record(10);
  record(12); // slower: noise, kept out
  record(8);
  EXPECT_EQ(stored, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(TuningDB::load(db_).records(fakeGpu()).at(0).timeUs, 8);
}

//===----------------------------------------------------------------------===//
// Ranking and the winner
//===----------------------------------------------------------------------===//

TEST_F(TunerTest, FailedCandidatesNeverWin) {
  using S = CandidateResult::Status;
  std::vector<CandidateResult> c = {timed(16, 5.0, /*heuristic=*/true),
                                    excluded(32, S::CheckFailed),
                                    timed(64, 3.0),
                                    excluded(128, S::CompileFailed),
                                    timed(256, 4.0),
                                    excluded(512, S::LaunchFailed)};
  c[1].us = 1.0; // fast and wrong: must not win
  rankCandidates(c);
  std::vector<int> order;
  for (const CandidateResult &r : c)
    order.push_back(r.config.blockM);
  EXPECT_EQ(order, (std::vector<int>{64, 256, 16, 32, 128, 512}));

  GemmProblem p = gemm(1024, 1024, 1024);
  std::optional<TuningRecord> w = winnerRecord(p, c);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->config.blockM, 64);
  EXPECT_EQ(w->kernel, "k64");
  EXPECT_EQ(w->timeUs, 3.0);
  EXPECT_EQ(w->runnerUpUs, 4.0);
  EXPECT_EQ(w->heuristicUs, 5.0);
  EXPECT_NEAR(w->tflops, 2.0 * 1024 * 1024 * 1024 / 3.0e6, 1e-9);
  EXPECT_NEAR(w->gbs, 3.0 * 1024 * 1024 * 2 / 3.0e3, 1e-9);

  TuneResult r;
  r.candidates = c;
  EXPECT_EQ(r.winner()->config.blockM, 64);
  EXPECT_EQ(r.runnerUp()->config.blockM, 256);
  EXPECT_EQ(r.heuristicResult()->config.blockM, 16);
  EXPECT_EQ(r.failedCount(), 3u);
  EXPECT_NEAR(marginPercent(3.0, 4.0), 33.333, 1e-3);
  EXPECT_EQ(marginPercent(3.0, 0.0), 0.0);
}

TEST_F(TunerTest, HeuristicThatFailedIsNotMeasured) {
  using S = CandidateResult::Status;
  std::vector<CandidateResult> c = {excluded(16, S::CheckFailed, true),
                                    timed(64, 3.0)};
  rankCandidates(c);
  std::optional<TuningRecord> w = winnerRecord(gemm(64, 64, 64), c);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->heuristicUs, 0.0);
  EXPECT_EQ(w->runnerUpUs, 0.0);
}

TEST_F(TunerTest, NothingPassedMeansNoRecord) {
  using S = CandidateResult::Status;
  std::vector<CandidateResult> c = {excluded(16, S::CheckFailed),
                                    excluded(64, S::CompileFailed)};
  rankCandidates(c);
  EXPECT_FALSE(winnerRecord(gemm(64, 64, 64), c));
  EXPECT_FALSE(winnerRecord(gemm(64, 64, 64), {}));
}

//===----------------------------------------------------------------------===//
// The tolerance rule
//===----------------------------------------------------------------------===//

std::vector<uint16_t> bf16s(const std::vector<float> &v) {
  std::vector<uint16_t> out;
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    out.push_back(uint16_t(u >> 16)); // the values below are exact in bf16
  }
  return out;
}

TEST_F(TunerTest, ToleranceIsTwiceTheNaiveErrorWithAHalfUlpFloor) {
  // 1 x 4, ldc 4. The naive result is off by 2^-7 at one element.
  std::vector<double> ref = {1.0, 2.0, -0.5, 0.25};
  std::vector<uint16_t> naive = bf16s({1.0f + 0.0078125f, 2.0f, -0.5f, 0.25f});
  auto check = [&](std::vector<float> ours) {
    std::vector<uint16_t> o = bf16s(ours);
    return checkAgainstReference(DType::BF16, 1, 4, o.data(), 4, ref.data(),
                                 naive.data());
  };
  ReferenceCheck same = check({1.0f, 2.0f, -0.5f, 0.25f});
  EXPECT_TRUE(same.pass());
  EXPECT_EQ(same.errNaive, 0.0078125);
  EXPECT_EQ(same.bound(), 2 * 0.0078125);
  // Exactly twice the naive error passes; more fails.
  EXPECT_TRUE(check({1.0f, 2.0f, -0.5f + 0.015625f, 0.25f}).pass());
  ReferenceCheck off = check({1.0f, 2.0f, -0.5f, 0.25f + 0.03125f});
  EXPECT_FALSE(off.pass());
  EXPECT_EQ(off.worst, 3);
  EXPECT_NE(off.describe().find("> bound"), std::string::npos)
      << off.describe();
  // NaN (an unwritten element) fails whatever the error.
  ReferenceCheck nan =
      check({1.0f, std::numeric_limits<float>::quiet_NaN(), -0.5f, 0.25f});
  EXPECT_FALSE(nan.pass());
  EXPECT_EQ(nan.nonFinite, 1);
  EXPECT_EQ(nan.firstBad, 1);
}

TEST_F(TunerTest, HalfUlpFloorWhenTheNaiveLoopIsExact) {
  // The naive loop is exact here (error 0): the bound is the floor, half
  // of bf16's spacing 2^-7 at 1.5.
  std::vector<double> ref = {1.5};
  std::vector<uint16_t> naive = bf16s({1.5f});
  EXPECT_EQ(halfUlp(DType::BF16, 1.5), std::ldexp(1.0, -8));
  EXPECT_EQ(halfUlp(DType::F16, 1.5), std::ldexp(1.0, -11));
  EXPECT_EQ(halfUlp(DType::F32, 1.5), std::ldexp(1.0, -24));
  EXPECT_EQ(halfUlp(DType::F16, 1e-9), std::ldexp(1.0, -25)); // subnormal
  // One bf16 step away (2^-7) exceeds the floor; the same value passes.
  std::vector<uint16_t> ours = bf16s({1.5f + 0.0078125f});
  EXPECT_FALSE(checkAgainstReference(DType::BF16, 1, 1, ours.data(), 1,
                                     ref.data(), naive.data())
                   .pass());
  EXPECT_TRUE(checkAgainstReference(DType::BF16, 1, 1, naive.data(), 1,
                                    ref.data(), naive.data())
                  .pass());
}

TEST_F(TunerTest, DecodeElementIsExact) {
  uint16_t h[] = {0x3c00, 0x0001, 0xfc00, 0x7e00}; // f16: 1, 2^-24, -inf, NaN
  EXPECT_EQ(decodeElement(DType::F16, h, 0), 1.0);
  EXPECT_EQ(decodeElement(DType::F16, h, 1), std::ldexp(1.0, -24));
  EXPECT_EQ(decodeElement(DType::F16, h, 2), -INFINITY);
  EXPECT_TRUE(std::isnan(decodeElement(DType::F16, h, 3)));
  uint16_t b[] = {0x3f80, 0xc040}; // bf16: 1, -3
  EXPECT_EQ(decodeElement(DType::BF16, b, 0), 1.0);
  EXPECT_EQ(decodeElement(DType::BF16, b, 1), -3.0);
  float f[] = {0.1f};
  EXPECT_EQ(decodeElement(DType::F32, f, 0), double(0.1f));
}

TEST_F(TunerTest, EncodeElementRoundsToNearestEven) {
  auto fp8 = [](DType t, double v) {
    unsigned char b = 0;
    encodeElement(t, v, &b, 0);
    return unsigned(b);
  };
  auto half = [](DType t, double v) {
    uint16_t h = 0;
    encodeElement(t, v, &h, 0);
    return unsigned(h);
  };
  // e4m3: 448 the largest (464 a tie, to the even 448; past it NaN, no
  // infinity), subnormals down to 2^-9 (2^-10 a tie, to the even 0).
  EXPECT_EQ(fp8(DType::E4M3, 1.0), 0x38u);
  EXPECT_EQ(fp8(DType::E4M3, -1.0625), 0xb8u); // a tie, to even
  EXPECT_EQ(fp8(DType::E4M3, 1.1875), 0x3au);  // a tie, up to even
  EXPECT_EQ(fp8(DType::E4M3, 448), 0x7eu);
  EXPECT_EQ(fp8(DType::E4M3, 464), 0x7eu);
  EXPECT_EQ(fp8(DType::E4M3, 470), 0x7fu);
  EXPECT_EQ(fp8(DType::E4M3, -1e9), 0xffu);
  EXPECT_EQ(fp8(DType::E4M3, INFINITY), 0x7fu);
  EXPECT_EQ(fp8(DType::E4M3, std::ldexp(1.0, -9)), 0x01u);
  EXPECT_EQ(fp8(DType::E4M3, std::ldexp(1.0, -10)), 0x00u);
  EXPECT_EQ(fp8(DType::E4M3, -std::ldexp(1.5, -10)), 0x81u);
  EXPECT_EQ(fp8(DType::E4M3, std::ldexp(0.96875, -6)), 0x08u); // up to normal
  // e5m2: IEEE-like, 57344 the largest, 61440 a tie up to infinity.
  EXPECT_EQ(fp8(DType::E5M2, 1.0), 0x3cu);
  EXPECT_EQ(fp8(DType::E5M2, 57344), 0x7bu);
  EXPECT_EQ(fp8(DType::E5M2, 61440), 0x7cu);
  EXPECT_EQ(fp8(DType::E5M2, -INFINITY), 0xfcu);
  const unsigned char nan = static_cast<unsigned char>(fp8(DType::E5M2, NAN));
  EXPECT_TRUE(std::isnan(decodeElement(DType::E5M2, &nan, 0)));
  EXPECT_EQ(fp8(DType::E5M2, std::ldexp(1.0, -16)), 0x01u);
  // Every finite fp8 value encodes to itself.
  for (DType t : {DType::E4M3, DType::E5M2})
    for (unsigned b = 0; b < 256; ++b) {
      const unsigned char x = static_cast<unsigned char>(b);
      const double v = decodeElement(t, &x, 0);
      if (std::isfinite(v))
        EXPECT_EQ(fp8(t, v), b) << toString(t) << " " << b;
    }
  // bf16 and f16 as the hardware's round-to-nearest-even conversions.
  EXPECT_EQ(half(DType::BF16, 1 + std::ldexp(1.0, -8)), 0x3f80u);
  EXPECT_EQ(half(DType::BF16, 1 + std::ldexp(3.0, -8)), 0x3f82u);
  EXPECT_EQ(half(DType::BF16, -3.0), 0xc040u);
  EXPECT_EQ(half(DType::F16, 65504), 0x7bffu);
  EXPECT_EQ(half(DType::F16, 65520), 0x7c00u);
  EXPECT_EQ(half(DType::F16, std::ldexp(1.0, -25)), 0x0000u);
  EXPECT_EQ(half(DType::F16, std::ldexp(3.0, -26)), 0x0001u);
  EXPECT_EQ(half(DType::F16, NAN), 0x7e00u);
  for (float v : {0.1f, -0.7f, 3.3e-5f, 1234.5f}) {
    _Float16 h = static_cast<_Float16>(v);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    EXPECT_EQ(half(DType::F16, v), unsigned(u)) << v;
  }
  float f = 0;
  encodeElement(DType::F32, 0.1, &f, 0);
  EXPECT_EQ(f, 0.1f);
}

//===----------------------------------------------------------------------===//
// Timing statistics
//===----------------------------------------------------------------------===//

TEST_F(TunerTest, Median) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3}), 3.0);
  EXPECT_EQ(median({5, 1, 3}), 3.0);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({1, 1, 100, 1, 1}), 1.0); // an outlier does not move it
}

TEST_F(TunerTest, RunCountRule) {
  TunerOptions o; // >= 50 runs and >= 30 ms; slow kernels stop at 2 s
  EXPECT_FALSE(enoughRuns(0, 0, o));
  EXPECT_FALSE(enoughRuns(49, 100, o));  // a 2 ms kernel: 50 runs first
  EXPECT_FALSE(enoughRuns(3000, 29, o)); // a 10 us kernel: 30 ms first
  EXPECT_TRUE(enoughRuns(50, 30, o));
  EXPECT_FALSE(enoughRuns(9, 5000, o)); // 10 runs even when slow
  EXPECT_TRUE(enoughRuns(10, 2000, o));
}

TEST_F(TunerTest, NextBatchAsksForWhatTheRuleStillNeeds) {
  TunerOptions o;
  EXPECT_EQ(nextBatch(0, 0, 2.0, o, 128), 50u);     // 50 runs of 2 ms
  EXPECT_EQ(nextBatch(0, 0, 0.01, o, 128), 128u);   // 3000 runs, capped
  EXPECT_EQ(nextBatch(40, 25, 0.1, o, 128), 50u);   // 5 ms more
  EXPECT_EQ(nextBatch(48, 100, 2.0, o, 128), 2u);   // 2 runs more
  EXPECT_EQ(nextBatch(50, 30, 1.0, o, 128), 1u);    // done: at least 1
  EXPECT_EQ(nextBatch(0, 0, 100.0, o, 128), 20u);   // slow: until 2 s
  EXPECT_EQ(nextBatch(5, 1900, 400.0, o, 128), 5u); // ...but 10 runs
}

TEST_F(TunerTest, RotationExceedsTwiceTheL2) {
  TunerOptions o;
  const size_t MB = size_t(1) << 20;
  EXPECT_EQ(rotationSets(384 * MB, 50 * MB, o), 1u); // 8192^3 is one set
  EXPECT_EQ(rotationSets(32 * MB, 50 * MB, o), 4u);  // > 100 MB
  EXPECT_EQ(rotationSets(32 * MB, 0, o), 2u);        // unknown L2: 64 MB
  EXPECT_EQ(rotationSets(768, 50 * MB, o), o.maxSets);
  o.rotateBytes = 256 * MB;
  EXPECT_EQ(rotationSets(32 * MB, 50 * MB, o), 8u);
}

TEST_F(TunerTest, GraphLaunchesWalkEverySet) {
  EXPECT_EQ(graphLaunches(5, 1), 20u);  // ~100 us of work
  EXPECT_EQ(graphLaunches(5, 3), 21u);  // a multiple of the sets
  EXPECT_EQ(graphLaunches(50, 1), 10u); // at least 10
  EXPECT_EQ(graphLaunches(0.01, 1), 1000u);
  EXPECT_EQ(graphLaunches(15, 256), 256u);
}

//===----------------------------------------------------------------------===//
// The reference's source
//===----------------------------------------------------------------------===//

TEST_F(TunerTest, ReferenceIsEmittedForTheDtypesAndLayout) {
  GemmProblem p = gemm(127, 4099, 1023);
  p.c = DType::F32;
  p.transA = true;
  KernelSource s = emitGemmReference(p, Target::SM90A);
  EXPECT_EQ(s.name, "kgen_gemm_reference_bf16_cf32_tt");
  EXPECT_EQ(gemmReferenceFillName(p), "kgen_gemm_reference_bf16_cf32_tt_fill");
  EXPECT_EQ(s.headers,
            (std::vector<std::string>{"kgen/common/hip_runtime_nvidia.h",
                                      "kgen/gemm/reference.h"}));
  for (const char *needle :
       {"#include \"kgen/gemm/reference.h\"", "kTypeA = kgen::reference::kBf16",
        "kTypeC = kgen::reference::kF32", "kTransA = true", "kTransB = true",
        "kgen_gemm_reference_bf16_cf32_tt(",
        "kgen_gemm_reference_bf16_cf32_tt_fill("})
    EXPECT_NE(s.source.find(needle), std::string::npos) << needle;
  // Shapes are run-time arguments: one reference serves every shape.
  EXPECT_EQ(emitGemmReference(gemm(1, 2, 3), Target::SM90A).source,
            emitGemmReference(gemm(4, 5, 6), Target::SM90A).source);
  EXPECT_EQ(emitGemmReference(p, Target::GFX90A).headers,
            (std::vector<std::string>{"kgen/gemm/reference.h"}));
  LaunchDims d = gemmReferenceLaunchDims(127, 4099);
  EXPECT_EQ(d.grid[0], 257u);
  EXPECT_EQ(d.grid[1], 8u);
  EXPECT_EQ(d.block[0], 256u);
}

TEST_F(TunerTest, ReferenceCompilesForEveryTarget) {
  for (Target t : {Target::SM80, Target::SM90A, Target::GFX90A}) {
    std::string why;
    std::unique_ptr<Compiler> cc = openCompiler(targetInfo(t).vendor, &why);
    if (!cc) {
      std::printf("[ SKIP     ] %s: %s\n", std::string(toString(t)).c_str(),
                  why.c_str());
      continue;
    }
    for (DType c : {DType::BF16, DType::F16, DType::F32}) {
      GemmProblem p = gemm(1, 1, 1);
      p.ab = c == DType::F16 ? DType::F16 : DType::BF16;
      p.c = c;
      KernelSource s = emitGemmReference(p, t);
      try {
        EXPECT_FALSE(cc->compile(s).empty());
      } catch (const Error &e) {
        ADD_FAILURE() << s.name << " for " << toString(t) << ": " << e.what();
      }
    }
  }
}

TEST_F(TunerTest, AttentionReferenceCompilesForNvidiaTargets) {
  std::string why;
  std::unique_ptr<Compiler> cc = openCompiler(Vendor::NVIDIA, &why);
  if (!cc)
    GTEST_SKIP() << "nvrtc not available: " << why;
  for (Target t : {Target::SM80, Target::SM90A}) {
    KernelSource s = attentionReferenceSource(t);
    EXPECT_EQ(s.name, "kgen_attn_reference");
    EXPECT_EQ(s.headers,
              (std::vector<std::string>{"kgen/common/hip_runtime_nvidia.h",
                                        "kgen/gemm/reference.h"}));
    try {
      EXPECT_FALSE(cc->compile(s).empty());
    } catch (const Error &e) {
      ADD_FAILURE() << s.name << " for " << toString(t) << ": " << e.what();
    }
  }
}

//===----------------------------------------------------------------------===//
// Without a GPU
//===----------------------------------------------------------------------===//

TEST_F(TunerTest, NoGpuIsAClearError) {
  RuntimeOptions o;
  o.target = Target::SM90A;
  Runtime rt(o);
  if (rt.backend())
    GTEST_SKIP() << "a GPU is present (TunerGpuTest covers it)";
  try {
    Tuner t(rt);
    ADD_FAILURE() << "Tuner without a GPU did not throw";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
  EXPECT_THROW(deviceKey(rt), Error);
}

} // namespace
