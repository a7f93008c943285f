//===- Tune.cpp - kgen tune: measure the candidates, write the tuning DB --===//
//
// The loop is kgen::tuneAndRecord: one problem at a time, the DB saved after
// each, so Ctrl-C or a kill loses at most the problem in progress and the
// same command resumes (kgen::pendingProblems skips what has a record).
// Results go to stdout; the progress bar, one line redrawn in place, to
// stderr.
//
//===----------------------------------------------------------------------===//

#include "Args.h"
#include "Commands.h"
#include "Presets.h"

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Runtime/Tuner.h"
#include "kgen/kgen.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

namespace kgen::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char *kTuneHelp =
    R"(kgen tune: measure every candidate kernel, keep the fastest

Usage: kgen tune [--preset NAME]... [problem options] [--misses] [--db PATH]
                 [--force] [--csv PATH] [--json]
  --preset NAME      a built-in problem list (repeatable):
                       gemm-bench  the GEMM benchmark shapes (bf16, nt):
                                   cubes 8192..1024, 532/788 x 2048 x 2048,
                                   532x2048x16384, 4096x14336x4096,
                                   4096x4096x14336, M = 1..256 with N = K =
                                   4096 and 8192, 127x4099x1023
                       gemm-fp8-bench  the same in e4m3 into bf16 (nt;
                                   not 127x4099x1023), as bench/gemm.py
                                   --dtype e4m3
                       llama3-8b   the GEMMs of one Llama-3-8B layer
                       attention-bench  the shapes of bench/attention.py
                                   (seed causal f16 D=256; prefill bf16
                                   D=64/128, S=512..16384; decode Sq=1,
                                   GQA 32:8/4/1, Sk=4096/32768)
                       attention-fp8-bench  those with D=128 in e4m3
                                   into bf16, as bench/attention.py
                                   --dtype e4m3
                       mlstm-bench the shapes of bench/mlstm.py (xLSTM-7B
                                   heads, small heads, the decoding step)
  --problem FILE     as below; a .json list may mix families: an object
                     with "family": "attention" (kgen/Codegen/AttentionJson.h)
                     or "family": "mlstm" (kgen/Mlstm.h) is such a problem,
                     with an optional "name" for the tables
  --csv PATH         after tuning, export this GPU's records as CSV: GEMM
                     to PATH (M,N,K,kernel,time_us,tflops,gb_s), attention
                     to PATH.attention.csv (batch,heads_q,heads_kv,seqlen_q,
                     seqlen_k,head_dim_qk,head_dim_v,kernel,time_us,tflops,
                     gb_s), mLSTM to PATH.mlstm.csv (B,NH,S,DQK,DV,kernel,
                     time_us,tflops,gb_s)
  --db PATH          the tuning DB to update (default: $KGEN_TUNING_DB, else
                     tuning.json in the kernel cache directory)
  --misses           also tune the problems programs ran without a record
                     (noted in the DB under the default KGEN_TUNE=offline)
  --force            retune problems the DB already has a record for
  --json             print the results as JSON (the progress bar stays on
                     stderr)

For each problem, every candidate config is compiled (in parallel on all
cores, through the kernel cache), checked on random inputs against a plain
reference (one that fails is reported and excluded) and timed on the GPU, one
at a time: warm-up, inputs rotated past the L2, the median over >= 50 runs
and >= 30 ms, kernels under 5 ms replayed as a graph of back-to-back launches
(as a model runs them: each launch overlaps the one before it). Each
problem's winner is written to the DB before the next starts: an interrupted
run (Ctrl-C, a kill) loses at most the problem in progress, and the same
command resumes, skipping problems with a record. The dispatcher
(kgen::Runtime::gemm, ::attention, ::mlstm) reads the DB at $KGEN_TUNING_DB
or the default path.
Attention candidates are checked against a plain fp32 reference kernel with
an explicit mask, mLSTM candidates on the host against the fp64 recurrent
form (on a call of at most 2 heads and 300 tokens); an mLSTM time is the
whole call (both kernels of a two-phase plan), a split-KV attention time
includes its combine kernel.

Exit status: 0 done; 1 an error (no GPU, bad options, a problem where no
candidate passed); 130 interrupted (SIGINT), 143 terminated (SIGTERM).

)";

//===----------------------------------------------------------------------===//
// Signals: the first SIGINT/SIGTERM asks the tuner to stop; a second one
// (the default action, restored by SA_RESETHAND) ends the process at once.
//===----------------------------------------------------------------------===//

std::atomic<int> gSignal{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "set from a signal handler");

void onStopSignal(int sig) { gSignal.store(sig); }

class StopSignals {
public:
  StopSignals() {
    gSignal = 0;
    struct sigaction sa = {};
    sa.sa_handler = onStopSignal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART; // compiles in flight go on
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &oldInt_);
    ::sigaction(SIGTERM, &sa, &oldTerm_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &oldInt_, nullptr);
    ::sigaction(SIGTERM, &oldTerm_, nullptr);
  }
  static int received() { return gSignal.load(); }

private:
  struct sigaction oldInt_ = {}, oldTerm_ = {};
};

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

std::string shapeText(const GemmProblem &p) {
  std::string s = std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
                  std::to_string(p.k) + " " + std::string(toString(p.ab));
  if (p.c != p.ab)
    s += "->" + std::string(toString(p.c));
  return s + " " + p.layoutName() + (p.staticM ? "" : " (M at run time)");
}

std::string shapeText(const AnyProblem &p) {
  if (auto *g = std::get_if<GemmProblem>(&p))
    return shapeText(*g);
  if (auto *a = std::get_if<AttentionProblem>(&p))
    return cli::shapeText(*a);
  return cli::shapeText(std::get<MlstmProblem>(p));
}

std::string candidateText(const CandidateResult &c) {
  return c.familyConfig.is_null() ? configText(c.config)
                                  : familyConfigText(c.familyConfig);
}

std::string firstLine(const std::string &s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl) + " ...";
}

std::string duration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof(buf), "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof(buf), "%dh%02dm", int(s) / 3600,
                  int(s) % 3600 / 60);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

//===----------------------------------------------------------------------===//
// The progress bar
//===----------------------------------------------------------------------===//

/// One line on stderr, redrawn at most ten times a second on a terminal;
/// elsewhere (a log file) a line every 30 s.
class ProgressBar {
public:
  ProgressBar(size_t problems, size_t candidates)
      : tty_(::isatty(2)), problems_(problems), total_(candidates),
        start_(Clock::now()) {}

  void startProblem(size_t ordinal, const std::string &what) {
    ordinal_ = ordinal;
    what_ = what;
    current_ = {};
    draw(true);
  }
  void update(const TuneProgress &p) {
    current_ = p;
    draw(false);
  }
  void finishProblem(size_t candidates) {
    done_ += candidates;
    current_ = {};
  }
  /// Erases the line so results printed on stdout do not mix with it.
  void clear() {
    if (tty_ && shown_) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
      shown_ = false;
    }
  }

private:
  void draw(bool force) {
    auto now = Clock::now();
    double since = std::chrono::duration<double>(now - last_).count();
    if (!force && since < (tty_ ? 0.1 : 30))
      return;
    if (!tty_ && force)
      return; // results say when a problem ends; a log needs no more
    last_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    size_t done = done_ + current_.timed + current_.failed;
    std::string eta = "--";
    if (done > 0 && total_ > done)
      eta = duration(elapsed / double(done) * double(total_ - done));
    char line[512];
    std::snprintf(line, sizeof(line),
                  "[%zu/%zu] %s: compiled %zu/%zu, checked %zu, timed %zu, "
                  "failed %zu | %zu/%zu candidates, %s, ETA %s",
                  ordinal_, problems_, what_.c_str(), current_.compiled,
                  current_.candidates, current_.checked, current_.timed,
                  current_.failed, std::min(done, total_), total_,
                  duration(elapsed).c_str(), eta.c_str());
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s", line);
    else
      std::fprintf(stderr, "%s\n", line);
    std::fflush(stderr);
    shown_ = true;
  }

  bool tty_;
  size_t problems_, total_, done_ = 0, ordinal_ = 0;
  std::string what_;
  TuneProgress current_;
  Clock::time_point start_, last_;
  bool shown_ = false;
};

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

json candidateJson(const CandidateResult &c) {
  json j = {
      {"config", c.familyConfig.is_null() ? toJson(c.config) : c.familyConfig},
      {"kernel", c.kernel},
      {"status", toString(c.status)},
      {"heuristic", c.heuristic}};
  if (c.ok()) {
    j["time_us"] = c.us;
    j["tflops"] = c.tflops;
    j["gb_s"] = c.gbs;
    j["runs"] = c.runs;
    j["timed_ms"] = c.timedMs;
    j["graph"] = c.graph;
    if (c.graph)
      j["launches_per_graph"] = c.perGraph;
  } else {
    j["error"] = c.error;
  }
  if (c.checked)
    j["check"] = {{"max_err", c.check.errOurs},
                  {"naive_err", c.check.errNaive},
                  {"bound", c.check.bound()},
                  {"non_finite", c.check.nonFinite}};
  return j;
}

json resultJson(const std::string &label, const TuneResult &r, bool stored) {
  const bool family = r.family.has_value();
  json j = {
      {"label", label},
      {"problem", family ? r.familyProblem : toJson(r.problem)},
      {"target", toString(r.target)},
      {"stored", stored},
      {"seconds", r.seconds},
      {"input_sets", r.sets},
      {"heuristic_config", family ? r.familyHeuristic : toJson(r.heuristic)},
      {"notes", r.notes}};
  if (family)
    j["family"] = toString(*r.family);
  json cands = json::array();
  for (const CandidateResult &c : r.candidates)
    cands.push_back(candidateJson(c));
  j["candidates"] = cands;
  if (const Measurement *w = r.measurement()) {
    j["winner"] = {{"config", r.record ? toJson(r.record->config)
                                       : r.familyRecord->config},
                   {"kernel", w->kernel},
                   {"time_us", w->timeUs},
                   {"tflops", w->tflops},
                   {"gb_s", w->gbs},
                   {"runner_up_us", w->runnerUpUs},
                   {"heuristic_us", w->heuristicUs}};
    j["margin_runner_up_pct"] = marginPercent(w->timeUs, w->runnerUpUs);
    j["margin_heuristic_pct"] = marginPercent(w->timeUs, w->heuristicUs);
  } else {
    j["winner"] = nullptr;
  }
  return j;
}

void printResult(size_t ordinal, size_t count, const std::string &label,
                 const AnyProblem &problem, const TuneResult &r, bool stored,
                 const TuningDB &db, const DeviceKey &key) {
  const bool family = r.family.has_value();
  std::printf("[%zu/%zu] %s  %s  (%zu candidates, %.1f s)\n", ordinal, count,
              label.c_str(),
              (family ? shapeText(problem) : shapeText(r.problem)).c_str(),
              r.candidates.size(), r.seconds);
  const std::string heuristicText =
      family ? familyConfigText(r.familyHeuristic) : configText(r.heuristic);
  if (const CandidateResult *w = r.winner()) {
    std::printf("  winner     %-22s %10.2f us %8.1f TFLOP/s %8.1f GB/s  %s\n",
                candidateText(*w).c_str(), w->us, w->tflops, w->gbs,
                w->kernel.c_str());
    if (const CandidateResult *u = r.runnerUp())
      std::printf("  runner-up  %-22s %10.2f us  winner by %.1f%%\n",
                  candidateText(*u).c_str(), u->us,
                  marginPercent(w->us, u->us));
    else
      std::printf("  runner-up  none passed\n");
    const CandidateResult *h = r.heuristicResult();
    if (h == w)
      std::printf("  heuristic  %-22s the winner\n", heuristicText.c_str());
    else if (h && h->ok())
      std::printf("  heuristic  %-22s %10.2f us  winner by %.1f%%\n",
                  candidateText(*h).c_str(), h->us,
                  marginPercent(w->us, h->us));
    else
      std::printf("  heuristic  %-22s not measured (%s)\n",
                  heuristicText.c_str(),
                  h ? toString(h->status) : "not a candidate");
  } else {
    std::printf("  no candidate passed: nothing recorded\n");
  }
  for (const CandidateResult &c : r.candidates)
    if (!c.ok())
      std::printf("  excluded   %-22s %s: %s\n", candidateText(c).c_str(),
                  toString(c.status), firstLine(c.error).c_str());
  for (const std::string &n : r.notes)
    std::printf("  note: %s\n", n.c_str());
  if (r.record && !stored) {
    TuningDB::Match m = db.lookup(key, r.problem);
    std::printf("  kept the DB's faster record (%s, %.2f us)\n",
                m.record ? configText(m.record->config).c_str() : "?",
                m.record ? m.record->timeUs : 0.0);
  }
  if (r.familyRecord && !stored) {
    TuningDB::FamilyMatch m = std::visit(
        [&](const auto &q) -> TuningDB::FamilyMatch {
          if constexpr (std::is_same_v<std::decay_t<decltype(q)>, GemmProblem>)
            return {};
          else
            return db.lookup(key, q);
        },
        problem);
    std::printf("  kept the DB's faster record (%s, %.2f us)\n",
                m.record ? familyConfigText(m.record->config).c_str() : "?",
                m.record ? m.record->timeUs : 0.0);
  }
  std::fflush(stdout);
}

/// The winners of the run, one line a problem, with their margins.
void printSummary(const std::vector<std::pair<std::string, TuneResult>> &rows) {
  if (rows.empty())
    return;
  std::printf("\n%-32s %-22s %10s %9s %9s %9s\n", "problem", "winner", "us",
              "TFLOP/s", "vs 2nd", "vs heur.");
  for (const auto &[label, r] : rows) {
    const Measurement *w = r.measurement();
    if (!w) {
      std::printf("%-32s %-22s\n", label.c_str(), "(none passed)");
      continue;
    }
    // One row shape for every family: time, rate, margins.
    const double us = w->timeUs, tflops = w->tflops;
    const double second = w->runnerUpUs, heur = w->heuristicUs;
    const std::string config = r.record
                                   ? configText(r.record->config)
                                   : familyConfigText(r.familyRecord->config);
    auto pct = [&](double other) {
      return other > 0 ? "+" + fixed(marginPercent(us, other), 1) + "%"
                       : std::string("-");
    };
    std::printf("%-32s %-22s %10.2f %9.1f %9s %9s\n", label.c_str(),
                config.c_str(), us, tflops, pct(second).c_str(),
                pct(heur).c_str());
  }
}

std::optional<std::string> checkOnTarget(const AnyProblem &p, Target t) {
  if (auto *g = std::get_if<GemmProblem>(&p))
    return checkProblemOnTarget(*g, t);
  if (auto *a = std::get_if<AttentionProblem>(&p))
    return checkProblemOnTarget(*a, t);
  return checkProblem(std::get<MlstmProblem>(p));
}

size_t candidateCount(const AnyProblem &p, Target t) {
  if (auto *g = std::get_if<GemmProblem>(&p))
    return enumerateConfigs(tuningProblem(*g), t).size();
  if (auto *a = std::get_if<AttentionProblem>(&p))
    return enumerateConfigs(*a, t).size();
  return enumerateConfigs(std::get<MlstmProblem>(p), t).size();
}

void writeCsv(const std::string &path,
              const std::function<void(std::ostream &)> &f) {
  std::ofstream out(path, std::ios::trunc);
  if (!out)
    throw Error("cannot write " + path);
  f(out);
  if (!out.flush())
    throw Error("cannot write " + path);
}

} // namespace

int cmdTune(Args &args) {
  if (args.flag("help")) {
    std::cout << kTuneHelp << kProblemHelp;
    return 0;
  }
  const bool asJson = args.flag("json"), force = args.flag("force");
  const bool misses = args.flag("misses");
  std::optional<std::string> dbArg = args.value("db");
  std::optional<std::string> csvArg = args.value("csv");
  std::vector<AnySpec> specs;
  for (const std::string &name : args.values("preset")) {
    if (name.empty())
      throw Error("option --preset needs a name (gemm-bench, gemm-fp8-bench, "
                  "llama3-8b, attention-bench, attention-fp8-bench, "
                  "mlstm-bench)");
    for (AnySpec &s : anyPresetProblems(name))
      specs.push_back(std::move(s));
  }
  bool custom = false;
  for (const char *f : {"problem", "m", "n", "k", "dtype", "c-dtype", "layout",
                        "static", "align"})
    custom |= args.flag(f);
  if (auto mixed = mixedProblemsFromArgs(args)) {
    for (AnySpec &s : *mixed)
      specs.push_back(std::move(s));
  } else if (custom) {
    for (ProblemSpec &s : problemsFromArgs(args))
      specs.push_back({s.label, s.problem, s.target, s.config});
  }
  args.finish("tune");
  if (!args.positional().empty())
    throw Error("unexpected argument '" + args.positional()[0] +
                "' (see kgen tune --help)");
  if (specs.empty() && !misses)
    throw Error("nothing to tune: name problems with --preset gemm-bench, "
                "--problem FILE, --m/--n/--k or --misses");
  const std::string dbPath = dbArg ? *dbArg : defaultTuningDbPath();
  if (dbPath.empty())
    throw Error("no place for the tuning DB: pass --db PATH, or set "
                "KGEN_TUNING_DB or KGEN_CACHE_DIR");

  Runtime rt;
  if (!rt.backend()) {
    std::string why;
    openBackend(std::nullopt, &why);
    throw Error("tuning measures kernels on a GPU: " + why +
                "; run kgen tune on the machine the kernels will run on");
  }
  const Target target = rt.target();
  const DeviceKey key = deviceKey(rt);
  TuningDB db = TuningDB::load(dbPath);
  // Problems programs ran without a record (KGEN_TUNE=offline notes them).
  if (misses) {
    for (const GemmProblem &p : db.misses(key))
      specs.push_back({"miss." + std::to_string(p.m) + "x" +
                           std::to_string(p.n) + "x" + std::to_string(p.k),
                       p, std::nullopt, std::nullopt});
    for (const json &p : db.familyMisses(key, TuneFamily::Attention)) {
      AttentionProblem a = attentionProblemFromJson(p);
      specs.push_back({"miss." + shapeText(a), a, std::nullopt, {}});
    }
    for (const json &p : db.familyMisses(key, TuneFamily::Mlstm)) {
      MlstmProblem m = mlstmProblemFromJson(p);
      specs.push_back({"miss." + shapeText(m), m, std::nullopt, {}});
    }
  }
  if (specs.empty())
    throw Error("nothing to tune: the DB " + dbPath +
                " notes no misses for this GPU");

  std::vector<AnyProblem> problems;
  for (const AnySpec &s : specs) {
    if (s.target && *s.target != target)
      throw Error(s.label + " is for " + std::string(toString(*s.target)) +
                  ", but this GPU is " + std::string(toString(target)) +
                  ": tune it on such a GPU");
    if (auto e = checkOnTarget(s.problem, target))
      throw Error(s.label + ": " + *e);
    problems.push_back(s.problem);
  }
  const std::vector<size_t> pending =
      pendingAnyProblems(db, key, problems, force);
  size_t candidates = 0;
  for (size_t i : pending)
    candidates += candidateCount(problems[i], target);

  FILE *info = asJson ? stderr : stdout;
  std::fprintf(info, "GPU: %s (%s, %d compute units, %zu MB L2) -> %s, %s %s\n",
               key.device.c_str(), key.arch.c_str(), key.computeUnits,
               rt.backend()->l2Bytes() >> 20,
               std::string(toString(target)).c_str(), key.compiler.c_str(),
               key.compilerVersion.c_str());
  std::fprintf(info, "DB: %s\n", dbPath.c_str());
  const size_t distinct = pendingAnyProblems(db, key, problems, true).size();
  std::fprintf(info,
               "%zu problems (%zu distinct): %zu to tune (%zu candidates), "
               "%zu with a record already%s\n\n",
               problems.size(), distinct, pending.size(), candidates,
               distinct - pending.size(),
               distinct == pending.size() ? ""
                                          : " (skipped; --force retunes them)");
  std::fflush(info);

  json results = json::array();
  std::vector<std::pair<std::string, TuneResult>> summary;
  size_t ordinal = 0, noWinner = 0, stored = 0;
  StopSignals signals;
  ProgressBar bar(pending.size(), candidates);
  TunerOptions opts;
  opts.stopRequested = [] { return StopSignals::received() != 0; };
  opts.progress = [&](const TuneProgress &p) { bar.update(p); };
  Tuner tuner(rt, opts);
  try {
    tuneAndRecord(
        pending, db, key, dbPath,
        [&](size_t i) {
          ++ordinal;
          bar.startProblem(ordinal, specs[i].label);
          // The next problem compiles while this one is timed.
          auto at = std::find(pending.begin(), pending.end(), i);
          if (at + 1 != pending.end())
            tuner.prefetch(problems[*(at + 1)]);
          return tuner.tune(problems[i]);
        },
        [&](size_t i, const TuneResult &r, bool kept) {
          bar.finishProblem(r.candidates.size());
          bar.clear();
          noWinner += !r.record && !r.familyRecord;
          stored += kept;
          if (asJson) {
            results.push_back(resultJson(specs[i].label, r, kept));
          } else {
            printResult(ordinal, pending.size(), specs[i].label, problems[i], r,
                        kept, db, key);
            summary.push_back({specs[i].label, r});
          }
        });
  } catch (const TuneInterrupted &) {
    bar.clear();
    int sig = StopSignals::received();
    printSummary(summary);
    if (asJson)
      std::cout << json{{"db", dbPath},
                        {"results", results},
                        {"interrupted", true}}
                       .dump(2)
                << "\n";
    std::fprintf(stderr,
                 "kgen tune: %s: %zu of %zu problems done and saved in %s; "
                 "the problem in progress was dropped. Run the same command "
                 "again to resume.\n",
                 sig == SIGTERM ? "terminated" : "interrupted", ordinal - 1,
                 pending.size(), dbPath.c_str());
    return 128 + (sig ? sig : SIGINT);
  } catch (...) {
    bar.clear();
    throw;
  }
  bar.clear();
  if (asJson)
    std::cout << json{{"db", dbPath},
                      {"results", results},
                      {"interrupted", false}}
                     .dump(2)
              << "\n";
  else {
    printSummary(summary);
    std::printf("\n%zu problems tuned, %zu records written to %s\n",
                pending.size(), stored, dbPath.c_str());
  }
  if (csvArg) {
    writeCsv(*csvArg, [&](std::ostream &os) { db.exportCsv(os, key); });
    writeCsv(*csvArg + ".attention.csv", [&](std::ostream &os) {
      db.exportCsv(os, key, TuneFamily::Attention);
    });
    writeCsv(*csvArg + ".mlstm.csv", [&](std::ostream &os) {
      db.exportCsv(os, key, TuneFamily::Mlstm);
    });
  }
  if (noWinner) {
    std::fprintf(stderr,
                 "kgen tune: error: %zu problem(s) had no candidate that "
                 "passed the check; see above\n",
                 noWinner);
    return 1;
  }
  return 0;
}

} // namespace kgen::cli
