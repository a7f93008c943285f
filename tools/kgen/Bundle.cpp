//===- Bundle.cpp - kgen bundle: kernels compiled ahead of time -----------===//
//
// Picks the variant the dispatcher would run for each problem and target
// (given config, else the tuning DB's record, else the heuristic), compiles
// it through kgen::Runtime (so the cache serves repeats), and writes the
// bundle a host program loads with KGEN_BUNDLE and no compiler.
//
//===----------------------------------------------------------------------===//

#include "Args.h"
#include "Commands.h"
#include "Presets.h"

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Runtime/Bundle.h"
#include "kgen/Runtime/TuningDB.h"
#include "kgen/kgen.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

namespace kgen::cli {

using nlohmann::json;

namespace {

const char *kHelp = R"(kgen bundle: compile kernels ahead of time into a bundle

Usage: kgen bundle (--problem FILE | --preset NAME | shape flags) --out DIR
                   [--target T[,T]] [--db PATH] [--device NAME] [--json]

Compiles the variant the dispatcher would choose for every problem and target
and writes DIR: manifest.json, the binaries (DIR/<target>/<kernel>.bin) and
tuning.json (the tuning-DB records used, if any). A host program loads it
read-only with no compiler and compiles nothing at run time:
  KGEN_BUNDLE=DIR[:DIR2...]   bundles to read, first match wins
  KGEN_BUNDLE_MISS=jit|error  a problem not bundled: compile it (default) or
                              throw kgen::Error naming it

  --out DIR          the bundle; created, or replaced in one step when it
                     holds a bundle. Any other non-empty directory is refused.
  --preset NAME      a built-in problem list: llama3-8b (the GEMMs of one
                     Llama-3-8B layer, as kgen run), gemm-bench (the shapes
                     kgen is benchmarked and tuned on; gemm-fp8-bench in
                     e4m3), attention-bench (attention-fp8-bench in e4m3)
                     or mlstm-bench (the shapes of bench/attention.py and
                     bench/mlstm.py; see kgen tune --help)
  --problem FILE     a .json list may mix families ("family": "attention" or
                     "mlstm"); their entries carry the family's problem and
                     config JSON, one entry per kernel (a two-phase mLSTM
                     plan has two), and the runtime takes the bundled config
                     for the call's problem (exact, else its sequence-length
                     bucket) before the tuning DB
  --target T         sm_80 | sm_90a | gfx90a | gfx942 | native; repeat or use
                     commas. Default: the local GPU's, else sm_90a and gfx90a
                     (a default target whose compiler is missing is skipped)
  --db PATH          tuning DB to take configs from (default: $KGEN_TUNING_DB,
                     else <cache>/tuning.json when it exists): a record of the
                     problem (exact, else its M bucket) measured with this
                     kgen and compiler version; else the dispatcher's
                     heuristic
  --device NAME      use the DB records of this device (default: the local
                     GPU's when it is of the target, else any device of it)
  --json             print the bundle's entries as JSON

Problems are stored as the runtime resolves a call with aligned, packed
arguments: alignments lowered to what the baked extents allow. A call whose
data allow less alignment is a miss (see KGEN_BUNDLE_MISS); bundle such calls
with --align. Kernels with M at run time serve every M.
Config options force one config for every problem.

)";

std::string shapeText(const GemmProblem &p) {
  std::string s = (p.staticM ? std::to_string(p.m) : "M") + "x" +
                  std::to_string(p.n) + "x" + std::to_string(p.k) + " " +
                  std::string(toString(p.ab)) + " " + p.layoutName();
  if (p.alignA != 8 || p.alignB != 8 || p.alignC != 8)
    s += " a" + std::to_string(p.alignA) + std::to_string(p.alignB) +
         std::to_string(p.alignC);
  return s;
}

/// The tuning DB's device keys whose records may give configs for `t`:
/// measured with this kgen and this compiler version on a device of `t`;
/// `device` (or else the local GPU, when it is of `t`) narrows them to one
/// device. Sorted, so the choice among several devices is reproducible.
std::vector<DeviceKey> usableKeys(const TuningDB &db, Target t,
                                  const Compiler &cc, Backend *local,
                                  const std::optional<std::string> &device) {
  std::vector<DeviceKey> keys;
  json all = db.toJson(); // kept: the loop below refers into it
  for (const json &d : all.at("devices")) {
    DeviceKey k = deviceKeyFromJson(d.at("device"));
    if (k.target != t || k.kgenVersion != kVersion || k.compiler != cc.name() ||
        k.compilerVersion != cc.version())
      continue;
    if (device ? k.device != *device
               : local && local->target() == t &&
                     (k.device != local->deviceName() ||
                      k.arch != local->archName() ||
                      k.computeUnits != local->computeUnits()))
      continue;
    keys.push_back(k);
  }
  return keys;
}

/// One kernel to build.
struct Job {
  const ProblemSpec *spec;
  Target target;
  GemmProblem problem; ///< bundledProblem(spec->problem)
  GemmConfig config;
  std::string configFrom;
  std::optional<std::pair<DeviceKey, TuningRecord>> record;
};

} // namespace

int cmdBundle(Args &args) {
  if (args.flag("help")) {
    std::cout << kHelp << kProblemHelp << kConfigHelp;
    return 0;
  }
  std::optional<std::string> out = args.value("out");
  std::optional<std::string> preset = args.value("preset");
  std::optional<std::string> dbArg = args.value("db");
  std::optional<std::string> device = args.value("device");
  bool asJson = args.flag("json");
  // The bundler compiles; it must not read bundles (the one being rebuilt may
  // be named by KGEN_BUNDLE and be stale, which the runtime refuses).
  ::unsetenv("KGEN_BUNDLE");
  ::unsetenv("KGEN_BUNDLE_MISS");
  Runtime rt;
  Backend *local = rt.backend();
  std::vector<ProblemSpec> specs;
  std::vector<AnySpec> familySpecs; ///< attention and mLSTM problems
  if (preset) {
    for (const char *f : {"problem", "m", "n", "k", "dtype", "c-dtype",
                          "layout", "static", "align"})
      if (args.flag(f))
        throw Error(std::string("--") + f +
                    " cannot be combined with --preset");
    if (isFamilyPreset(*preset))
      familySpecs = anyPresetProblems(*preset);
    else
      specs = presetProblems(*preset);
  } else if (auto mixed = mixedProblemsFromArgs(args)) {
    for (AnySpec &a : *mixed)
      if (auto *g = std::get_if<GemmProblem>(&a.problem))
        specs.push_back({a.label, *g, a.config, a.target});
      else
        familySpecs.push_back(std::move(a));
  } else {
    specs = problemsFromArgs(args);
  }
  const PartialConfig<GemmConfig> forced = configFromArgs(args);
  std::vector<Target> targets = targetsFromArgs(
      args, local ? std::optional(local->target()) : std::nullopt);
  args.finish("bundle");
  if (!out)
    throw Error("kgen bundle needs --out DIR, the bundle directory to write");
  bool defaultTargets = targets.empty();
  if (defaultTargets)
    targets = local ? std::vector<Target>{local->target()}
                    : std::vector<Target>{Target::SM90A, Target::GFX90A};

  // The tuning DB: an explicit one must load; the default one is used when
  // it exists, and ignored with a warning when broken (as the runtime does).
  std::optional<TuningDB> db;
  if (dbArg) {
    if (!std::filesystem::exists(*dbArg))
      throw Error("--db " + *dbArg + ": no such file");
    db = TuningDB::load(*dbArg);
  } else if (std::string path = defaultTuningDbPath();
             !path.empty() && std::filesystem::exists(path)) {
    try {
      db = TuningDB::load(path);
    } catch (const Error &e) {
      std::fprintf(stderr, "kgen bundle: tuning DB ignored: %s\n", e.what());
    }
  }

  // Checks --out before any compile time is spent.
  BundleWriter writer(*out);

  // Plan: one job per (problem, target), the config chosen as the
  // dispatcher would.
  std::vector<Job> jobs;
  std::vector<std::string> skipped, errors;
  std::map<Target, std::vector<DeviceKey>> keys; ///< targets with a compiler
  // A problem that names its target (.mlir) is built for that one only, and
  // that target is explicit: its compiler must be there.
  std::set<Target> explicitTargets;
  for (const ProblemSpec &s : specs)
    if (s.target)
      explicitTargets.insert(*s.target);
  for (const AnySpec &s : familySpecs)
    if (s.target)
      explicitTargets.insert(*s.target);
  std::set<Target> needed(explicitTargets);
  needed.insert(targets.begin(), targets.end());
  for (Target t : needed) {
    try {
      Compiler &cc = rt.compiler(targetInfo(t).vendor);
      keys[t] =
          db ? usableKeys(*db, t, cc, local, device) : std::vector<DeviceKey>{};
    } catch (const Error &e) {
      if (!defaultTargets || explicitTargets.count(t))
        throw;
      skipped.push_back(std::string(toString(t)) + " (" + e.what() + ")");
      std::fprintf(stderr, "kgen bundle: skipping default target %s: %s\n",
                   std::string(toString(t)).c_str(), e.what());
    }
  }
  for (const ProblemSpec &s : specs) {
    GemmProblem p = bundledProblem(s.problem);
    for (Target t : s.target ? std::vector<Target>{*s.target} : targets) {
      if (!keys.count(t))
        continue; // a default target without its compiler
      if (auto e = checkProblemOnTarget(p, t)) {
        errors.push_back(s.label + " (" + std::string(toString(t)) +
                         "): " + *e);
        continue;
      }
      Job j{&s, t, p, {}, "", std::nullopt};
      if (forced || s.config) {
        j.config = (forced ? forced : s.config).pick(p, t);
        j.configFrom = "given";
      } else {
        for (const DeviceKey &k : keys[t]) {
          TuningDB::Match m = db->lookup(k, p);
          if (!m.record || checkConfig(p, m.record->config, t))
            continue;
          j.config = m.record->config;
          j.configFrom = (m.kind == TuningDB::Match::Exact
                              ? std::string("tuning-db")
                              : "tuning-db M-bucket " +
                                    std::to_string(m.bucketProblem.m)) +
                         " (" + k.device + ")";
          j.record = {k, *m.record};
          break;
        }
        if (!j.record) {
          j.config = defaultConfig(p, t);
          j.configFrom = "heuristic";
        }
      }
      jobs.push_back(j);
    }
  }

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  TuningDB used;
  bool anyRecord = false;
  int built = 0, hits = 0;

  // Attention and mLSTM: the config as the dispatcher would choose it (the
  // DB's exact or bucket record, else the heuristic); every kernel of the
  // variant becomes an entry (two for a two-phase mLSTM plan).
  if (!familySpecs.empty() && forced)
    throw Error("config options force GEMM configs; attention and mLSTM "
                "problems take theirs from the tuning DB or the heuristic");
  for (const AnySpec &s : familySpecs) {
    for (Target t : s.target ? std::vector<Target>{*s.target} : targets) {
      if (!keys.count(t))
        continue;
      const std::string tt(toString(t));
      try {
        json problem, config;
        std::string from = "heuristic";
        std::optional<std::pair<DeviceKey, FamilyRecord>> record;
        auto fromDb = [&](const auto &p, auto parseConfig) {
          for (const DeviceKey &k : keys[t]) {
            TuningDB::FamilyMatch m = db->lookup(k, p);
            if (!m.record || checkConfig(p, parseConfig(m.record->config), t))
              continue;
            from = std::string(m.kind == TuningDB::Match::Exact
                                   ? "tuning-db"
                                   : "tuning-db bucket") +
                   " (" + k.device + ")";
            record = {k, *m.record};
            return m.record->config;
          }
          return json();
        };
        std::vector<std::shared_ptr<Kernel>> kernels;
        std::string family;
        if (auto *a = std::get_if<AttentionProblem>(&s.problem)) {
          if (auto e = checkProblemOnTarget(*a, t))
            throw Error(*e);
          family = "attention";
          problem = tuningProblemJson(*a);
          config = fromDb(*a, attentionConfigFromJson);
          if (config.is_null())
            config = toJson(defaultConfig(*a, t));
          kernels.push_back(rt.compile(*a, attentionConfigFromJson(config), t));
        } else {
          const MlstmProblem &m = std::get<MlstmProblem>(s.problem);
          if (auto e = checkProblem(m))
            throw Error(*e);
          family = "mlstm";
          problem = tuningProblemJson(m);
          config = fromDb(m, mlstmConfigFromJson);
          if (config.is_null())
            config = toJson(defaultConfig(m, t));
          kernels = rt.compileMlstm(m, mlstmConfigFromJson(config), t)->kernels;
        }
        std::fprintf(stderr, "%s %s %s: %zu kernel(s), config from %s\n",
                     s.label.c_str(), tt.c_str(), config.dump().c_str(),
                     kernels.size(), from.c_str());
        Compiler &cc = rt.compiler(targetInfo(t).vendor);
        for (const std::shared_ptr<Kernel> &k : kernels) {
          BundleEntry e;
          e.target = t;
          e.family = family;
          e.familyProblem = problem;
          e.familyConfig = config;
          e.kernel = k->source.name;
          e.compiler = cc.name();
          e.compilerVersion = cc.version();
          e.sourceSha256 = sourceDigest(k->source);
          e.cacheKey = k->cacheKey;
          e.name = s.label;
          e.configFrom = from;
          e = writer.add(e, k->binary);
          nlohmann::ordered_json row = toJson(e);
          row["cache_hit"] = k->cacheHit;
          row["compile_ms"] = k->compileMs;
          rows.push_back(row);
          built += !k->cacheHit;
          hits += k->cacheHit;
        }
        if (record) {
          used.record(record->first, record->second);
          anyRecord = true;
        }
      } catch (const Error &e) {
        errors.push_back(s.label + " (" + tt + "): " + e.what());
      }
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job &j = jobs[i];
    std::string t = std::string(toString(j.target));
    std::fprintf(stderr, "[%zu/%zu] %s %s %s ...\n", i + 1, jobs.size(),
                 j.spec->label.c_str(), t.c_str(),
                 configText(j.config).c_str());
    try {
      std::shared_ptr<Kernel> k = rt.compile(j.problem, j.config, j.target);
      Compiler &cc = rt.compiler(targetInfo(j.target).vendor);
      BundleEntry e;
      e.target = j.target;
      e.problem = j.problem;
      e.config = j.config;
      e.kernel = k->source.name;
      e.compiler = cc.name();
      e.compilerVersion = cc.version();
      e.sourceSha256 = sourceDigest(k->source);
      e.cacheKey = k->cacheKey;
      e.name = j.spec->label;
      e.configFrom = j.configFrom;
      e = writer.add(e, k->binary);
      nlohmann::ordered_json row = toJson(e);
      row["cache_hit"] = k->cacheHit;
      row["compile_ms"] = k->compileMs;
      rows.push_back(row);
      built += !k->cacheHit;
      hits += k->cacheHit;
      if (j.record) {
        used.record(j.record->first, j.record->second);
        anyRecord = true;
      }
    } catch (const Error &e) {
      errors.push_back(j.spec->label + " (" + t + "): " + e.what());
    }
  }
  if (!errors.empty()) {
    for (const std::string &e : errors)
      std::fprintf(stderr, "error: %s\n", e.c_str());
    std::fprintf(stderr,
                 "kgen bundle: %zu error(s); nothing was written to %s\n",
                 errors.size(), out->c_str());
    return 1;
  }
  if (jobs.empty() && familySpecs.empty())
    throw Error("nothing to bundle: no target has a compiler here" +
                std::string(skipped.empty() ? "" : " (skipped: ") +
                (skipped.empty() ? "" : skipped.front() + ")"));
  if (anyRecord)
    writer.setTuning(used);
  writer.commit();

  uint64_t bytes = 0;
  for (const BundleEntry &e : writer.entries())
    bytes += e.bytes;
  std::string dir = std::filesystem::absolute(*out).lexically_normal().string();
  if (asJson) {
    nlohmann::ordered_json j;
    j["bundle"] = dir;
    j["schema"] = kBundleSchema;
    j["kgen_version"] = kVersion;
    j["entries"] = rows;
    j["compiled"] = built;
    j["cache_hits"] = hits;
    j["bytes"] = bytes;
    j["skipped_targets"] = skipped;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%-24s %-26s %-7s %-18s %-22s %-5s %8s  %s\n", "problem", "shape",
              "target", "config", "config from", "cache", "bytes", "kernel");
  for (const nlohmann::ordered_json &r : rows) {
    const bool family = r.contains("family");
    std::string shape, config;
    if (family) {
      shape = familyShapeText(json::parse(r["problem"].dump()));
      config = familyConfigText(json::parse(r["config"].dump()));
    } else {
      shape = shapeText(gemmProblemFromJson(r["problem"]));
      config = configText(gemmConfigFromJson(r["config"]));
    }
    std::printf("%-24s %-26s %-7s %-18s %-22s %-5s %8llu  %s\n",
                r.value("name", "").c_str(), shape.c_str(),
                r["target"].get<std::string>().c_str(), config.c_str(),
                r.value("config_from", "").c_str(),
                r["cache_hit"].get<bool>() ? "hit" : "miss",
                (unsigned long long)r["bytes"].get<uint64_t>(),
                r["kernel"].get<std::string>().c_str());
  }
  std::printf("\nwrote %s: %zu kernels, %llu bytes (%d compiled, %d cache "
              "hits)\n",
              dir.c_str(), writer.entries().size(), (unsigned long long)bytes,
              built, hits);
  for (const std::string &s : skipped)
    std::printf("skipped target %s\n", s.c_str());
  std::printf("use it: KGEN_BUNDLE=%s (KGEN_BUNDLE_MISS=error to forbid "
              "compiling at run time)\n",
              dir.c_str());
  return 0;
}

} // namespace kgen::cli
