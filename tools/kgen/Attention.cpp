//===- Attention.cpp - kgen emit/compile --family attention ---------------===//
//
//   kgen emit --family attention --heads 32,8 --seqlen 1,4096 --head-dim 128
//             --causal --lse --target sm_90a
//   kgen compile --family attention --problem attn.json --candidates
//
// The attention problem's flags (or a JSON problem with "family":
// "attention"), an optional config, and the same emit / compile paths as
// GEMM: kgen::emitAttention and Runtime::compile.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/PartialConfig.h"
#include "kgen/kgen.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace kgen::cli {

const char *kAttentionHelp =
    R"(Attention problem (--family attention; flags, or --problem FILE.json):
  --problem FILE     .json attention problem ({"family": "attention", ...})
  --batch B          batch (default 1)
  --heads HQ[,HKV]   query heads and KV heads (GQA/MQA; default HQ)
  --seqlen SQ[,SK]   sequence lengths (run time; hints for the config)
  --head-dim D[,DV]  head dims of Q/K and of V: 32 64 96 128 192 256
  --dtype T          bf16 | f16 | e4m3 | e5m2 (default bf16; fp8 is Q, K
                     and V with a bf16 O: sm_90a's wgmma loop, head dims
                     128 or 256 (V 128), blockN 128, no varlen)
  --layout L         bshd | bhsd (the packed strides' default)
  --causal           causal mask, bottom-right aligned
  --window L,R       sliding window (-1: unbounded side)
  --varlen --alibi --bias --lse   features (cu_seqlens, ALiBi slopes,
                     additive bias matrix, log-sum-exp output)
Attention config (optional; default: the dispatcher's heuristic). --block,
--warps, --stages and --preload-v spell a config, the options not given at
their plain defaults; --loop, --persistent, --pack-gqa and --splits alone take
the dispatcher's choice among the configs with them:
  --loop L           tiled (FlashAttention-2 style, every target) | wgmma
                     (sm_90a: TMA producer + wgmma consumer warpgroups)
  --block MxN        query rows x keys per tile, e.g. 64x64
  --warps W  --stages S  --preload-v  --splits N
                     (wgmma: warps = blockM / 16 consumer warps, the default)
  --pack-gqa         one block serves all query heads of a KV head
  --persistent       (wgmma) one block per SM looping over work tiles
Other: --target T, --inline (emit), --candidates --json (compile)
)";

namespace {

std::vector<int64_t> ints(const std::string &opt, const std::string &s,
                          char sep) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(part, &used));
      if (used != part.size())
        throw std::invalid_argument(part);
    } catch (const std::exception &) {
      throw Error("option --" + opt + ": '" + s +
                  "' is not a list of integers");
    }
  }
  if (out.empty() || out.size() > 2)
    throw Error("option --" + opt + ": '" + s + "' takes 1 or 2 values");
  return out;
}

AttentionProblem attnProblemFromArgs(Args &args) {
  if (auto file = args.value("problem")) {
    std::ifstream in(*file);
    if (!in)
      throw Error("cannot read " + *file);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      return attentionProblemFromJson(nlohmann::json::parse(ss.str()));
    } catch (const nlohmann::json::parse_error &e) {
      throw Error(*file + ": malformed JSON: " + e.what());
    }
  }
  AttentionProblem p;
  if (auto v = args.value("batch"))
    p.batch = ints("batch", *v, ',').at(0);
  if (auto v = args.value("heads")) {
    auto h = ints("heads", *v, ',');
    p.headsQ = h[0];
    p.headsKv = h.size() > 1 ? h[1] : h[0];
  }
  if (auto v = args.value("seqlen")) {
    auto s = ints("seqlen", *v, ',');
    p.seqlenQ = s[0];
    p.seqlenK = s.size() > 1 ? s[1] : s[0];
  }
  if (auto v = args.value("head-dim")) {
    auto d = ints("head-dim", *v, ',');
    p.headDimQk = int(d[0]);
    p.headDimV = int(d.size() > 1 ? d[1] : d[0]);
  }
  if (auto v = args.value("dtype")) {
    auto d = parseDType(*v);
    if (!d)
      throw Error("option --dtype: unknown dtype '" + *v +
                  "' (bf16, f16, e4m3, e5m2)");
    p.dtype = *d;
  }
  if (auto v = args.value("layout")) {
    auto l = parseAttentionLayout(*v);
    if (!l)
      throw Error("option --layout: '" + *v + "' is not bshd or bhsd");
    p.layout = *l;
  }
  if (auto v = args.value("window")) {
    auto w = ints("window", *v, ',');
    if (w.size() != 2)
      throw Error("option --window takes LEFT,RIGHT");
    p.windowLeft = int(w[0]);
    p.windowRight = int(w[1]);
  }
  p.causal = args.flag("causal");
  p.varlen = args.flag("varlen");
  p.alibi = args.flag("alibi");
  p.bias = args.flag("bias");
  p.lse = args.flag("lse");
  if (auto e = checkProblem(p))
    throw Error(*e);
  return p;
}

/// The config options (kgen/Codegen/PartialConfig.h): --block, --warps,
/// --stages and --preload-v spell a config; --loop, --persistent, --pack-gqa
/// and --splits alone name a strategy.
PartialConfig<AttentionConfig> attnConfigFromArgs(Args &args) {
  PartialConfig<AttentionConfig> f;
  AttentionConfig c;
  bool any = false;
  if (auto v = args.value("block")) {
    auto b = ints("block", *v, 'x');
    if (b.size() != 2)
      throw Error("option --block takes MxN for attention, e.g. 64x64");
    c.blockM = int(b[0]);
    c.blockN = int(b[1]);
    any = f.tile = true;
  }
  if (auto v = args.value("warps")) {
    c.warps = int(ints("warps", *v, ',').at(0));
    any = f.tile = true;
  }
  if (auto v = args.value("stages")) {
    c.stages = int(ints("stages", *v, ',').at(0));
    any = f.tile = true;
  }
  if (args.flag("preload-v")) {
    c.preloadV = true;
    any = f.tile = true;
  }
  std::optional<int> splits;
  std::optional<AttentionLoop> loop;
  if (auto v = args.value("splits")) {
    c.splits = *(splits = int(ints("splits", *v, ',').at(0)));
    any = true;
  }
  const bool pack = args.flag("pack-gqa"), persistent = args.flag("persistent");
  if (pack)
    c.packGqa = true;
  if (persistent)
    c.persistent = true;
  any |= pack || persistent;
  if (auto v = args.value("loop")) {
    loop = parseAttentionLoop(*v);
    if (!loop)
      throw Error("option --loop: '" + *v + "' is not tiled or wgmma");
    c.loop = *loop;
    if (c.loop == AttentionLoop::Wgmma && !args.value("warps"))
      c.warps = c.blockM / 16; // the consumer warps
    any = true;
  }
  if (!any)
    return f;
  f.spelled = c;
  f.hasStrategy = [=](const AttentionConfig &x) {
    return (!loop || x.loop == *loop) && (!splits || x.splits == *splits) &&
           (!pack || x.packGqa) && (!persistent || x.persistent);
  };
  return f;
}

std::string attnConfigText(const AttentionConfig &c) {
  return std::string(c.loop == AttentionLoop::Wgmma ? "wgmma " : "") +
         std::to_string(c.blockM) + "x" + std::to_string(c.blockN) + " w" +
         std::to_string(c.warps) + " s" + std::to_string(c.stages) +
         (c.preloadV ? " pv" : "") +
         (c.splits > 1 ? " split" + std::to_string(c.splits) : "") +
         (c.packGqa ? " gqa" : "") + (c.persistent ? " persistent" : "");
}

} // namespace

bool wantsAttention(Args &args) {
  if (auto f = args.value("family")) {
    if (*f == "attention")
      return true;
    if (*f != "gemm")
      throw Error("option --family: '" + *f + "' is not gemm or attention");
  }
  return false;
}

int cmdAttention(Args &args, const std::string &verb) {
  if (args.flag("help")) {
    std::cout << kAttentionHelp;
    return 0;
  }
  const AttentionProblem p = attnProblemFromArgs(args);
  const PartialConfig<AttentionConfig> forced = attnConfigFromArgs(args);
  std::vector<Target> targets;
  for (const std::string &v : args.values("target")) {
    std::stringstream ss(v);
    for (std::string t; std::getline(ss, t, ',');) {
      auto tt = parseTarget(t);
      if (!tt)
        throw Error("option --target: unknown target '" + t +
                    "' (sm_80, sm_90a, gfx90a, gfx942)");
      targets.push_back(*tt);
    }
  }
  if (verb == "emit") {
    const bool inl = args.flag("inline");
    args.finish("emit");
    if (targets.size() > 1)
      throw Error("emit takes one target");
    const Target t = targets.empty() ? Target::SM90A : targets[0];
    const AttentionConfig c = forced.pick(p, t);
    if (auto e = checkConfig(p, c, t))
      throw Error(*e + (forced.tile ? kSpelledConfigHint : ""));
    std::cout << emitAttention(p, c, t, inl).source;
    return 0;
  }
  const bool candidates = args.flag("candidates");
  const bool asJson = args.flag("json");
  args.finish(verb);
  // fp8 problems are sm_90a's only: by default built for it alone.
  if (targets.empty() && isFp8(p.dtype))
    targets = {Target::SM90A};
  else if (targets.empty())
    targets = {Target::SM90A, Target::GFX90A};
  for (Target t : targets)
    if (auto e = checkProblemOnTarget(p, t))
      throw Error(*e);
  RuntimeOptions opts;
  opts.target = targets[0];
  Runtime rt(opts);
  nlohmann::json rows = nlohmann::json::array();
  int failures = 0;
  for (Target t : targets) {
    std::vector<AttentionConfig> cs;
    if (forced)
      cs = candidates ? forced.candidates(p, t)
                      : std::vector<AttentionConfig>{forced.pick(p, t)};
    else if (candidates)
      cs = enumerateConfigs(p, t);
    else
      cs = {defaultConfig(p, t)};
    for (const AttentionConfig &c : cs) {
      nlohmann::json row = {{"target", toString(t)}, {"config", toJson(c)}};
      try {
        std::shared_ptr<Kernel> k = rt.compile(p, c, t);
        row["kernel"] = k->source.name;
        row["cache_hit"] = k->cacheHit;
        row["compile_ms"] = k->compileMs;
        row["bytes"] = k->binary.size();
        if (!asJson)
          std::printf("%-7s %-16s %s %s (%zu B, %.0f ms)\n",
                      std::string(toString(t)).c_str(),
                      attnConfigText(c).c_str(), k->source.name.c_str(),
                      k->cacheHit ? "cache hit" : "compiled", k->binary.size(),
                      k->compileMs);
      } catch (const Error &e) {
        row["error"] = e.what();
        ++failures;
        if (!asJson)
          std::printf("%-7s %-16s FAILED: %s\n",
                      std::string(toString(t)).c_str(),
                      attnConfigText(c).c_str(), e.what());
      }
      rows.push_back(row);
    }
  }
  if (asJson)
    std::cout << nlohmann::json{{"problem", toJson(p)},
                                {"kernels", rows},
                                {"failed", failures}}
                     .dump(2)
              << "\n";
  return failures ? 1 : 0;
}

} // namespace kgen::cli
