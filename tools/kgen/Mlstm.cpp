//===- Mlstm.cpp - `kgen mlstm`: the mLSTM family on the command line -----===//
//
//   kgen mlstm emit        print the HIP source of every kernel of a variant
//   kgen mlstm compile     compile them for one or more targets
//   kgen mlstm candidates  the ranked configs with the model's cost
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "kgen/Codegen/PartialConfig.h"
#include "kgen/kgen.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kgen::cli {

namespace {

const char *kMlstmHelp = R"(kgen mlstm: the mLSTM (xLSTM) forward

Usage: kgen mlstm emit|compile|candidates [options]
  emit        print the HIP source of each kernel of the variant
  compile     compile the kernels for every --target (through the cache)
  candidates  every valid config, cheapest first by the cost model;
              the heuristic's default marked (default)

Problem (flags, or --problem FILE.json with an optional "config" object):
  --dqk N --dv N     head dims, 64..512, multiples of 16 (baked)
  --dtype T          bf16 | f16 | f32 (q, k, v, gates, h)
  --b N --nh N --s N run-time extents (hints for the config choice)
  --initial --final  initial states given / final states returned
  --eps X            normalizer epsilon (default 1e-6)
Config (default: the heuristic for the problem and target). --chunk,
--block-dv and --warps spell a config, the options not given at their plain
defaults; --variant and --wgmma alone take the heuristic's choice among the
configs with them. A "config" in the problem file is read by the same rule
(its "chunk", "blockDV" and "warps" spell), the options on top of it:
  --variant V        recurrent | fused | twophase | chunkpar
  --chunk N --block-dv N --warps N
  --wgmma            the fused kernel on wgmma (sm_90a; chunk 64, block-dv
                     128, 12 warps, bf16/f16, dqk a multiple of 64 up to 256)
Target:
  --target T         sm_80 | sm_90a | gfx90a | gfx942 (repeatable for
                     compile; default sm_90a)
  --inline           emit: paste the template headers in
)";

int64_t toInt(const std::string &opt, const std::string &s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size())
      return v;
  } catch (const std::exception &) {
  }
  throw Error("option --" + opt + ": '" + s + "' is not an integer");
}

MlstmProblem problemFromArgs(Args &args, PartialConfig<MlstmConfig> &cfg) {
  MlstmProblem p;
  if (auto file = args.value("problem")) {
    std::ifstream in(*file);
    if (!in)
      throw Error("cannot read " + *file);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::parse_error &e) {
      throw Error(*file + ": malformed JSON: " + e.what());
    }
    try {
      if (j.is_object() && j.contains("config")) {
        cfg = partialConfigFromJson<MlstmConfig>(
            j.at("config"), mlstmConfigFromJson, kMlstmTileFields);
        j.erase("config");
      }
      return mlstmProblemFromJson(j);
    } catch (const Error &e) {
      throw Error(*file + ": " + e.what());
    }
  }
  auto i = [&](const char *name, auto &field) {
    if (auto v = args.value(name))
      field = decltype(+field)(toInt(name, *v));
  };
  i("dqk", p.dqk);
  i("dv", p.dv);
  i("b", p.b);
  i("nh", p.nh);
  i("s", p.s);
  if (auto v = args.value("dtype")) {
    auto d = parseDType(*v);
    if (!d)
      throw Error("option --dtype: '" + *v + "' is not bf16, f16 or f32");
    p.dtype = *d;
  }
  p.initialState = args.flag("initial");
  p.finalState = args.flag("final");
  if (auto v = args.value("eps")) {
    try {
      p.eps = std::stof(*v);
    } catch (const std::exception &) {
      throw Error("option --eps: '" + *v + "' is not a number");
    }
  }
  return p;
}

/// The config options (kgen/Codegen/PartialConfig.h) on top of the problem
/// file's "config" (read by the same rule): --chunk, --block-dv and --warps
/// spell a config; --variant and --wgmma alone name a strategy.
PartialConfig<MlstmConfig> configFromArgs(Args &args,
                                          PartialConfig<MlstmConfig> f) {
  auto variant = args.value("variant");
  auto chunk = args.value("chunk"), bdv = args.value("block-dv"),
       warps = args.value("warps");
  const bool wgmma = args.flag("wgmma");
  if (!variant && !chunk && !bdv && !warps && !wgmma)
    return f;
  f.tile |= chunk || bdv || warps;
  MlstmConfig c = f.spelled.value_or(MlstmConfig{});
  std::optional<MlstmVariant> v;
  if (variant) {
    v = parseMlstmVariant(*variant);
    if (!v)
      throw Error("option --variant: '" + *variant +
                  "' is not recurrent, fused, twophase or chunkpar");
    c.variant = *v;
    if (*v == MlstmVariant::Recurrent && !chunk)
      c.chunk = 0;
  }
  if (chunk)
    c.chunk = int(toInt("chunk", *chunk));
  if (bdv)
    c.blockDV = int(toInt("block-dv", *bdv));
  if (warps)
    c.warps = int(toInt("warps", *warps));
  if (wgmma)
    c.wgmma = true;
  f.spelled = c;
  f.hasStrategy = [=, file = f.hasStrategy](const MlstmConfig &x) {
    return file(x) && (!v || x.variant == *v) && (!wgmma || x.wgmma);
  };
  return f;
}

std::vector<Target> targets(Args &args) {
  std::vector<Target> out;
  for (const std::string &v : args.values("target")) {
    std::stringstream ss(v);
    for (std::string one; std::getline(ss, one, ',');) {
      auto t = parseTarget(one);
      if (!t)
        throw Error("option --target: '" + one +
                    "' is not sm_80, sm_90a, gfx90a or gfx942");
      out.push_back(*t);
    }
  }
  if (out.empty())
    out.push_back(Target::SM90A);
  return out;
}

} // namespace

int cmdMlstm(Args &args) {
  const std::vector<std::string> &pos = args.positional();
  if (args.flag("help") || pos.empty()) {
    std::cout << kMlstmHelp;
    return pos.empty() && !args.flag("help") ? 2 : 0;
  }
  const std::string sub = pos[0];
  PartialConfig<MlstmConfig> fileConfig;
  MlstmProblem p = problemFromArgs(args, fileConfig);
  const PartialConfig<MlstmConfig> cfg = configFromArgs(args, fileConfig);
  std::vector<Target> ts = targets(args);
  bool inl = args.flag("inline");
  args.finish("mlstm");
  if (auto e = checkProblem(p))
    throw Error(*e);

  if (sub == "candidates") {
    for (Target t : ts) {
      // The heuristic does not always take the model's first (defaultConfig).
      const MlstmConfig d = defaultConfig(p, t);
      for (const MlstmConfig &c : enumerateConfigs(p, t)) {
        std::printf(
            "%-7s %-9s chunk %3d blockDV %3d warps %2d%s  cost %.4g%s\n",
            std::string(toString(t)).c_str(),
            std::string(toString(c.variant)).c_str(), c.chunk, c.blockDV,
            c.warps, c.wgmma ? " wgmma" : "", mlstmModelCost(p, c, t),
            c == d ? "  (default)" : "");
      }
    }
    return 0;
  }
  if (sub == "emit") {
    if (ts.size() != 1)
      throw Error("mlstm emit takes one target");
    const Target t = ts[0];
    MlstmConfig c = cfg.pick(p, t);
    if (auto e = checkConfig(p, c, t))
      throw Error(*e + (cfg.tile ? kSpelledConfigHint : ""));
    for (MlstmKernel k : mlstmKernels(c))
      std::cout << emitMlstm(p, c, k, t, inl).source << "\n";
    return 0;
  }
  if (sub == "compile") {
    Runtime rt;
    for (Target t : ts) {
      MlstmConfig c = cfg.pick(p, t);
      auto plan = rt.compileMlstm(p, c, t);
      for (const auto &k : plan->kernels)
        std::printf("%-7s %s  %s  %zu B\n", std::string(toString(t)).c_str(),
                    k->source.name.c_str(), k->cacheHit ? "cached" : "compiled",
                    k->binary.size());
    }
    return 0;
  }
  throw Error("unknown mlstm subcommand '" + sub +
              "'; use emit, compile or candidates");
}

} // namespace kgen::cli
