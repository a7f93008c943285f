//===- main.cpp - The kgen command ----------------------------------------===//
//
//   kgen run      the main job: the GEMMs of one Llama-3-8B layer, generated
//                 and compiled for the local GPU (or sm_90a and gfx90a)
//   kgen emit     print the HIP source of one problem
//   kgen compile  compile problems (through the cache)
//   kgen cache    list | stats | verify | clear
//   kgen info     backends, devices, compiler versions
//
//===----------------------------------------------------------------------===//

#include "Args.h"
#include "Commands.h"
#include "Presets.h"

#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/kgen.h"

#include <cstdio>
#include <iostream>

using namespace kgen;
using namespace kgen::cli;
using nlohmann::json;

namespace {

const char *kUsage = R"(kgen: specialized GPU kernels for one exact problem

Usage: kgen <command> [options]

Commands:
  run       generate and compile the built-in model shapes (GEMMs of one
            Llama-3-8B layer) for the local GPU, or sm_90a and gfx90a
  emit      print the generated HIP source of a problem
  compile   compile problems for one or more targets, through the cache
  tune      measure every candidate of problems on this GPU and write the
            winners to the tuning DB (resumable)
  bundle    compile problems ahead of time into a bundle directory that a
            host program loads with no compiler (KGEN_BUNDLE)
  cache     inspect the kernel cache: list | stats | verify | clear
  mlstm     the mLSTM (xLSTM) forward: emit | compile | candidates
  info      GPU runtimes, devices and compiler versions

emit and compile take --family attention for flash attention problems
('kgen emit --family attention --help').

Run 'kgen <command> --help' for a command's options.
Environment: KGEN_CACHE_DIR, KGEN_CACHE_READONLY, KGEN_CACHE_MAX_BYTES,
KGEN_BACKEND (cuda|hip|none), KGEN_DEVICE, KGEN_NVRTC, KGEN_HIPRTC, KGEN_LOG,
KGEN_BUNDLE, KGEN_BUNDLE_MISS (jit|error), KGEN_TUNE (off|offline|online),
KGEN_TUNING_DB.
)";

const char *kTargetHelp = R"(Target:
  --target T         sm_80 | sm_90a | gfx90a | gfx942 | native; repeat or
                     use commas for several
)";

std::string shapeText(const GemmProblem &p) {
  return std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
         std::to_string(p.k) + " " + std::string(toString(p.ab)) + " " +
         p.layoutName();
}

bool wantHelp(Args &args, const char *text) {
  if (!args.flag("help"))
    return false;
  std::cout << text;
  return true;
}

/// Default targets: the local GPU's, else the two the project checks.
std::vector<Target> defaultTargets(Runtime &rt) {
  if (rt.backend())
    return {rt.backend()->target()};
  return {Target::SM90A, Target::GFX90A};
}

/// Compile every (problem, target) pair and print a table (or JSON).
int compileAll(Runtime &rt, const std::vector<ProblemSpec> &specs,
               const std::vector<Target> &targets,
               const PartialConfig<GemmConfig> &forced, bool candidates,
               bool asJson) {
  json rows = json::array();
  int failures = 0, hits = 0, built = 0;
  double totalMs = 0;
  struct Job {
    const ProblemSpec *spec;
    Target target;
    GemmConfig config;
  };
  std::vector<Job> jobs;
  for (const ProblemSpec &s : specs)
    for (Target t : s.target ? std::vector<Target>{*s.target} : targets) {
      if (auto e = checkProblemOnTarget(s.problem, t))
        throw Error(s.label + ": " + *e);
      // The options' config, else the problem file's (nothing: the
      // candidates, or the default).
      const PartialConfig<GemmConfig> &given = forced ? forced : s.config;
      if (candidates && !given)
        for (const GemmConfig &c : enumerateConfigs(s.problem, t))
          jobs.push_back({&s, t, c});
      else if (candidates)
        for (const GemmConfig &c : given.candidates(s.problem, t))
          jobs.push_back({&s, t, c});
      else
        jobs.push_back({&s, t, given.pick(s.problem, t)});
    }
  size_t i = 0;
  for (const Job &j : jobs) {
    ++i;
    // Progress on stderr: compiles take a second or more each.
    std::fprintf(stderr, "[%zu/%zu] %s %s %s ...\n", i, jobs.size(),
                 j.spec->label.c_str(), std::string(toString(j.target)).c_str(),
                 configText(j.config).c_str());
    json row = {{"problem", j.spec->label},
                {"shape", shapeText(j.spec->problem)},
                {"target", toString(j.target)},
                {"config", toJson(j.config)}};
    try {
      std::shared_ptr<Kernel> k =
          rt.compile(j.spec->problem, j.config, j.target);
      row["kernel"] = k->source.name;
      row["cache_hit"] = k->cacheHit;
      row["compile_ms"] = k->compileMs;
      row["bytes"] = k->binary.size();
      row["key"] = k->cacheKey;
      row["loaded"] = k->function != nullptr;
      hits += k->cacheHit;
      built += !k->cacheHit;
      totalMs += k->compileMs;
    } catch (const Error &e) {
      row["error"] = e.what();
      ++failures;
    }
    rows.push_back(row);
  }
  if (asJson) {
    std::cout << json{{"kernels", rows},       {"compiled", built},
                      {"cache_hits", hits},    {"failed", failures},
                      {"compile_ms", totalMs}, {"cache_dir", rt.cache().root()}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%-24s %-24s %-7s %-20s %-5s %10s  %s\n", "problem", "shape",
                "target", "config", "cache", "compile ms", "kernel");
    for (const json &r : rows) {
      std::string cfg = configText(gemmConfigFromJson(r["config"]));
      if (r.contains("error")) {
        std::printf("%-24s %-24s %-7s %-20s %-5s %10s  %s\n",
                    r["problem"].get<std::string>().c_str(),
                    r["shape"].get<std::string>().c_str(),
                    r["target"].get<std::string>().c_str(), cfg.c_str(), "FAIL",
                    "-", "(see below)");
        continue;
      }
      std::printf("%-24s %-24s %-7s %-20s %-5s %10.1f  %s\n",
                  r["problem"].get<std::string>().c_str(),
                  r["shape"].get<std::string>().c_str(),
                  r["target"].get<std::string>().c_str(), cfg.c_str(),
                  r["cache_hit"].get<bool>() ? "hit" : "miss",
                  r["compile_ms"].get<double>(),
                  r["kernel"].get<std::string>().c_str());
    }
    std::printf(
        "\n%d compiled, %d cache hits, %d failed; %.0f ms compiling; "
        "cache: %s\n",
        built, hits, failures, totalMs,
        rt.cache().memoryOnly()
            ? ("memory only (" + rt.cache().whyMemoryOnly() + ")").c_str()
            : rt.cache().root().c_str());
    for (const json &r : rows)
      if (r.contains("error"))
        std::fprintf(stderr, "error: %s (%s): %s\n",
                     r["problem"].get<std::string>().c_str(),
                     r["target"].get<std::string>().c_str(),
                     r["error"].get<std::string>().c_str());
  }
  return failures ? 1 : 0;
}

int cmdRun(Args &args) {
  static const std::string help = std::string(R"(kgen run: the main job

Generates and compiles the GEMMs of one Llama-3-8B layer (qkv, o, gate_up,
down projections; 532 tokens, bf16, weights N x K, M at run time) with the
dispatcher's default config, for the local GPU or, with none, for sm_90a and
gfx90a. Prints what was built, cache hits and compile times. A second run is
all cache hits.

Usage: kgen run [--target T] [--candidates] [--json] [problem options]
  --candidates       compile every candidate config, not just the default
  --json             print JSON instead of a table
)") + kTargetHelp + "\nWith problem options, runs those problems instead.\n" +
                                  kProblemHelp;
  if (wantHelp(args, help.c_str()))
    return 0;
  Runtime rt;
  bool asJson = args.flag("json"), candidates = args.flag("candidates");
  std::vector<Target> targets =
      targetsFromArgs(args, rt.backend() ? std::optional(rt.backend()->target())
                                         : std::nullopt);
  bool custom = false;
  for (const char *f : {"problem", "m", "n", "k", "dtype", "c-dtype", "layout",
                        "static", "align"})
    custom |= args.flag(f);
  std::vector<ProblemSpec> specs =
      custom ? problemsFromArgs(args) : llama3LayerProblems();
  const PartialConfig<GemmConfig> cfg = configFromArgs(args);
  args.finish("run");
  if (targets.empty())
    targets = defaultTargets(rt);
  if (!asJson) {
    if (rt.backend())
      std::printf("GPU: %s (%s, %d compute units) -> target %s\n",
                  rt.backend()->deviceName().c_str(),
                  rt.backend()->archName().c_str(),
                  rt.backend()->computeUnits(),
                  std::string(toString(rt.backend()->target())).c_str());
    else
      std::printf("No GPU found: compiling only.\n");
    std::printf("Targets:");
    for (Target t : targets)
      std::printf(" %s", std::string(toString(t)).c_str());
    std::printf("\n\n");
  }
  return compileAll(rt, specs, targets, cfg, candidates, asJson);
}

int cmdEmit(Args &args) {
  static const std::string help =
      std::string(R"(kgen emit: print the generated HIP source

Usage: kgen emit [problem options] [config options] [--target T] [--inline]
  --inline           paste the template headers in: one self-contained file
  --json             print {name, target, source, headers, threads, smem}
The default target is the local GPU's, else sm_90a.
)") + kTargetHelp +
      kProblemHelp + kConfigHelp;
  if (wantHelp(args, help.c_str()))
    return 0;
  bool inl = args.flag("inline"), asJson = args.flag("json");
  std::vector<ProblemSpec> specs = problemsFromArgs(args);
  const PartialConfig<GemmConfig> cfg = configFromArgs(args);
  std::vector<Target> targets = targetsFromArgs(args, std::nullopt);
  args.finish("emit");
  if (specs.size() != 1)
    throw Error("emit takes one problem; " + std::to_string(specs.size()) +
                " given (use kgen compile for many)");
  const ProblemSpec &s = specs[0];
  if (targets.size() > 1)
    throw Error("emit takes one target");
  Target t = !targets.empty() ? targets[0] : s.target.value_or(Target::SM90A);
  const PartialConfig<GemmConfig> &given = cfg ? cfg : s.config;
  GemmConfig c = given.pick(s.problem, t);
  if (auto e = checkConfig(s.problem, c, t))
    throw Error(*e + (given.tile ? kSpelledConfigHint : ""));
  KernelSource ks = emitGemm(s.problem, c, t, inl);
  if (asJson) {
    std::cout << json{{"name", ks.name},       {"target", toString(t)},
                      {"source", ks.source},   {"headers", ks.headers},
                      {"threads", ks.threads}, {"smem_bytes", ks.smemBytes},
                      {"config", toJson(c)}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << ks.source;
  }
  return 0;
}

int cmdCompile(Args &args) {
  static const std::string help =
      std::string(R"(kgen compile: compile problems through the cache

Usage: kgen compile [problem options] [config options] [--target T]...
  --candidates       compile every candidate config of each problem
  --json             print JSON
Default targets: the local GPU's, else sm_90a and gfx90a.
)") + kTargetHelp +
      kProblemHelp + kConfigHelp;
  if (wantHelp(args, help.c_str()))
    return 0;
  Runtime rt;
  bool asJson = args.flag("json"), candidates = args.flag("candidates");
  std::vector<ProblemSpec> specs = problemsFromArgs(args);
  const PartialConfig<GemmConfig> cfg = configFromArgs(args);
  std::vector<Target> targets =
      targetsFromArgs(args, rt.backend() ? std::optional(rt.backend()->target())
                                         : std::nullopt);
  args.finish("compile");
  if (targets.empty())
    targets = defaultTargets(rt);
  return compileAll(rt, specs, targets, cfg, candidates, asJson);
}

int cmdCache(Args &args) {
  static const char *help = R"(kgen cache: inspect the kernel cache

Usage: kgen cache list|stats|verify|clear [--json]
  list     every entry: target, kernel, size, last use
  stats    entries, bytes, the cap, the directories
  verify   check every entry's size and checksum; exit 1 if any is bad
  clear    delete the writable cache (read-only directories are kept)
Directory: $KGEN_CACHE_DIR, else $XDG_CACHE_HOME/kgen, else ~/.cache/kgen.
)";
  if (wantHelp(args, help))
    return 0;
  bool asJson = args.flag("json");
  args.finish("cache");
  if (args.positional().size() != 1)
    throw Error("kgen cache needs one of list, stats, verify, clear");
  const std::string &sub = args.positional()[0];
  DiskCache cache;
  auto entryJson = [](const CacheEntry &e) {
    json j = {{"target", e.target},     {"key", e.key},
              {"name", e.name},         {"bytes", e.bytes},
              {"path", e.path},         {"last_use", e.lastUse},
              {"read_only", e.readOnly}};
    if (e.problem)
      j["problem"] = *e.problem;
    return j;
  };
  if (sub == "list" || sub == "verify") {
    bool verify = sub == "verify";
    std::vector<CacheEntry> entries = verify ? cache.verify() : cache.list();
    int bad = 0;
    json arr = json::array();
    for (const CacheEntry &e : entries) {
      bad += e.problem.has_value();
      arr.push_back(entryJson(e));
    }
    if (asJson) {
      std::cout << json{{"entries", arr}, {"bad", bad}}.dump(2) << "\n";
    } else {
      for (const CacheEntry &e : entries)
        std::printf("%-7s %10llu B  %s%s%s\n", e.target.c_str(),
                    (unsigned long long)e.bytes, e.name.c_str(),
                    e.readOnly ? "  (read-only)" : "",
                    e.problem ? ("  BAD: " + *e.problem).c_str() : "");
      std::printf("%zu entries", entries.size());
      if (verify)
        std::printf(", %d bad", bad);
      std::printf("\n");
    }
    return bad ? 1 : 0;
  }
  if (sub == "stats") {
    std::vector<CacheEntry> entries = cache.list();
    uint64_t total = cache.totalBytes();
    CacheOptions o = CacheOptions::fromEnv();
    json j = {{"dir", cache.root()},       {"memory_only", cache.memoryOnly()},
              {"entries", entries.size()}, {"bytes", total},
              {"max_bytes", o.maxBytes},   {"read_only_dirs", o.readOnlyDirs}};
    if (asJson)
      std::cout << j.dump(2) << "\n";
    else
      std::printf("dir: %s\nentries: %zu\nbytes: %llu of %llu\n",
                  cache.memoryOnly() ? "(memory only)" : cache.root().c_str(),
                  entries.size(), (unsigned long long)total,
                  (unsigned long long)o.maxBytes);
    return 0;
  }
  if (sub == "clear") {
    cache.clear();
    if (!asJson)
      std::printf("cleared %s\n", cache.root().c_str());
    else
      std::cout << json{{"cleared", cache.root()}}.dump() << "\n";
    return 0;
  }
  throw Error("unknown cache command '" + sub +
              "' (list, stats, verify, clear)");
}

int cmdInfo(Args &args) {
  static const char *help = R"(kgen info: GPU runtimes, devices, compilers

Usage: kgen info [--json]
)";
  if (wantHelp(args, help))
    return 0;
  bool asJson = args.flag("json");
  args.finish("info");
  json j = {{"kgen", kVersion}};
  std::string why;
  std::unique_ptr<Backend> b = openBackend(std::nullopt, &why);
  if (b)
    j["device"] = {{"vendor", b->vendor() == Vendor::AMD ? "amd" : "nvidia"},
                   {"index", b->deviceOrdinal()},
                   {"name", b->deviceName()},
                   {"arch", b->archName()},
                   {"target", toString(b->target())},
                   {"compute_units", b->computeUnits()},
                   {"driver", b->driverVersion()}};
  else
    j["device"] = {{"error", why}};
  for (Vendor v : {Vendor::NVIDIA, Vendor::AMD}) {
    std::string whyNot;
    std::unique_ptr<Compiler> c = openCompiler(v, &whyNot);
    const char *key = v == Vendor::AMD ? "hiprtc" : "nvrtc";
    if (c)
      j[key] = {{"version", c->version()}};
    else
      j[key] = {{"error", whyNot}};
  }
  DiskCache cache;
  j["cache"] = cache.memoryOnly() ? "(memory only) " + cache.whyMemoryOnly()
                                  : cache.root();
  if (asJson) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("kgen %s\n", std::string(kVersion).c_str());
  if (b)
    std::printf("device %d: %s (%s, %d compute units, driver %s) -> target "
                "%s\n",
                b->deviceOrdinal(), b->deviceName().c_str(),
                b->archName().c_str(), b->computeUnits(),
                b->driverVersion().c_str(),
                std::string(toString(b->target())).c_str());
  else
    std::printf("device: none (%s)\n", why.c_str());
  for (const char *key : {"nvrtc", "hiprtc"}) {
    const json &c = j[key];
    if (c.contains("version"))
      std::printf("%s: %s\n", key, c["version"].get<std::string>().c_str());
    else
      std::printf("%s: unavailable (%s)\n", key,
                  c["error"].get<std::string>().c_str());
  }
  std::printf("cache: %s\n", j["cache"].get<std::string>().c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::printf("kgen %s\n", std::string(kVersion).c_str());
    return 0;
  }
  std::string cmd = argv[1];
  try {
    Args args(argc, argv, 2);
    if ((cmd == "emit" || cmd == "compile") && wantsAttention(args))
      return cmdAttention(args, cmd);
    if (cmd == "run")
      return cmdRun(args);
    if (cmd == "emit")
      return cmdEmit(args);
    if (cmd == "compile")
      return cmdCompile(args);
    if (cmd == "bundle")
      return cmdBundle(args);
    if (cmd == "tune")
      return cmdTune(args);
    if (cmd == "cache")
      return cmdCache(args);
    if (cmd == "mlstm")
      return cmdMlstm(args);
    if (cmd == "info")
      return cmdInfo(args);
    // Attention is a family of emit and compile, not a command of its own.
    if (cmd == "attention" || cmd == "attn")
      std::fprintf(stderr,
                   "kgen: unknown command '%s'; attention problems go through "
                   "'kgen emit --family attention' and 'kgen compile --family "
                   "attention' ('kgen emit --family attention --help')\n",
                   cmd.c_str());
    else
      std::fprintf(stderr, "kgen: unknown command '%s'\n\n%s", cmd.c_str(),
                   kUsage);
    return 2;
  } catch (const Error &e) {
    std::fprintf(stderr, "kgen %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kgen %s: internal error: %s\n", cmd.c_str(),
                 e.what());
    return 3;
  }
}
