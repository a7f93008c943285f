//===- Args.cpp - Command-line parsing for the kgen CLI -------------------===//

#include "Args.h"

#include "kgen/Codegen/Json.h"
#include "kgen/Error.h"
#ifdef KGEN_HAVE_MLIR
#include "kgen/IR/MlirFile.h"
#endif

#include <fstream>
#include <sstream>

namespace kgen::cli {

const char *kProblemHelp = R"(Problem (flags, or --problem FILE):
  --problem FILE     .json (one problem object or an array of them) or .mlir
                     (every kgen.gemm op; needs a build with MLIR)
  --m M --n N --k K  GEMM shape (defaults 1)
  --dtype T          A/B dtype: bf16 | f16 | f32 | e4m3 | e5m2 (f32 needs
                     --tf32; fp8 needs sm_90a and layout nt; default bf16)
  --tf32             f32 A/B through TF32 tensor cores (inputs rounded to a
                     10-bit mantissa; NVIDIA only)
  --c-dtype T        C dtype: bf16 | f16 | f32 (default: the input dtype;
                     bf16 for fp8 inputs, which write bf16 or f16)
  --layout L         nn | nt | tn | tt: A then B, 'n' = stored as op(X),
                     't' = stored transposed (default nt: C = A * W^T)
  --static DIMS      compile-time dimensions, e.g. n,k (default) or m,n,k
  --align A,B,C      promised alignment in elements (default 8,8,8; fp8
                     16,16,8)
  --bias-along m|n   fused bias, one value per row (m) or column (n)
  --act A            fused activation: relu | gelu_tanh | gelu_erf | silu
  --residual         fused residual add (an M x N matrix of C's dtype)
  --batch B          strided batches (default 1; a run-time value)
)";

const char *kConfigHelp =
    R"(Config (optional; default: the dispatcher's choice). --config, --block,
--warps, --stages, --smem and --pad spell a config, the options not given at
their plain defaults; --loop, --cluster, --split-k, --repack and --swap-ab
alone take the dispatcher's choice among the configs with them:
  --config FILE      .json config ({"block":[128,128,32],"warps":[2,2],...}),
                     read by the same rule ({"loop":"gemv"} picks), as
                     is a "config" in a --problem file (these replace it)
  --block MxNxK      block tile, e.g. 128x128x32
  --warps MxN        warp grid, e.g. 2x2
  --stages S         pipeline stages (2..8; wgmma loop 2..16)
  --loop tiled|wgmma main loop: tiled (every target) or wgmma (sm_90a: TMA,
                     warp-specialized; --block Mx{64..256}x64 --warps Cx1
                     with C consumer warpgroups; implies --smem swizzled)
  --loop gemv        small M (NVIDIA, A 'N'): B streamed through a per-lane
                     cp.async ring into mma.sync; --block MxNx32 with M
                     rows of A (8..64) and N = warps * 16 * row tiles,
                     --warps 1xW, --stages = ring slots of k-chunks, 1..16
                     (split-K: "split_k" in --config)
  --cluster N        wgmma loop: CTAs per cluster, 1 or 2 (pairs share B,
                     or A when the tile is taller than wide, by multicast)
  --split-k S        S blocks share each tile's k-slices, the last adding
                     the partial sums (through a runtime workspace);
                     wgmma loop: S units a tile on the persistent grid,
                     k-slices interleaved so the CTAs stay in lockstep;
                     "split_k" in --config
  --swap-ab          wgmma loop: C^T = B^T A^T, wgmma's m64
                     slices along N (--block Mx64x64 a consumer) and its n
                     along M, so M fits the problem's ("swap_ab": true in
                     --config)
  --repack           tiled and wgmma loops: a copy kernel first pads A and/or
                     B rows that are not 16-byte aligned (K zero-padded to a
                     multiple of 8) into a runtime workspace, so the loop
                     reads 16-byte vectors ("repack": true in --config)
  --smem padded|swizzled   shared-memory layout (default padded)
  --pad P            padding elements per row when padded (default 8)
)";

Args::Args(int argc, char **argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), val;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      val = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      // A value follows unless this is a known bare flag.
      static const char *bare[] = {
          "json", "inline", "help", "all", "candidates", "verbose", "quiet",
          "force", "misses",
          // attention's feature flags
          "causal", "varlen", "alibi", "bias", "lse", "preload-v", "initial",
          "final", "residual", "pack-gqa", "tf32", "persistent", "repack",
          "swap-ab"};
      bool isBare = false;
      for (const char *b : bare)
        isBare |= name == b;
      if (!isBare)
        val = argv[++i];
    }
    opts_.emplace(name, val);
  }
}

bool Args::flag(const std::string &name) {
  used_[name] = true;
  return opts_.count(name) != 0;
}

std::optional<std::string> Args::value(const std::string &name) {
  used_[name] = true;
  auto it = opts_.find(name);
  if (it == opts_.end())
    return std::nullopt;
  if (it->second.empty())
    throw Error("option --" + name + " needs a value");
  return it->second;
}

std::vector<std::string> Args::values(const std::string &name) {
  used_[name] = true;
  std::vector<std::string> out;
  auto [lo, hi] = opts_.equal_range(name);
  for (auto it = lo; it != hi; ++it)
    out.push_back(it->second);
  return out;
}

void Args::finish(const std::string &command) const {
  for (auto &[name, val] : opts_)
    if (!used_.count(name))
      throw Error("unknown option --" + name + " for 'kgen " + command +
                  "' (see kgen " + command + " --help)");
}

namespace {

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);)
    if (!part.empty())
      out.push_back(part);
  return out;
}

int64_t toInt(const std::string &opt, const std::string &s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size())
      throw std::invalid_argument(s);
    return v;
  } catch (const std::exception &) {
    throw Error("option --" + opt + ": '" + s + "' is not an integer");
  }
}

std::vector<int64_t> toInts(const std::string &opt, const std::string &s,
                            char sep, size_t n) {
  std::vector<int64_t> out;
  for (const std::string &part : split(s, sep))
    out.push_back(toInt(opt, part));
  if (out.size() != n)
    throw Error("option --" + opt + ": '" + s + "' must have " +
                std::to_string(n) + " values separated by '" + sep + "'");
  return out;
}

DType toDType(const std::string &opt, const std::string &s) {
  if (auto d = parseDType(s))
    return *d;
  throw Error("option --" + opt + ": unknown dtype '" + s +
              "' (bf16, f16, f32)");
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

std::string configText(const GemmConfig &c) {
  return std::string(c.loop == GemmLoop::Wgmma  ? "wgmma "
                     : c.loop == GemmLoop::Gemv ? "gemv "
                                                : "") +
         std::to_string(c.blockM) + "x" + std::to_string(c.blockN) + "x" +
         std::to_string(c.blockK) + " w" + std::to_string(c.warpsM) + "x" +
         std::to_string(c.warpsN) + " s" + std::to_string(c.stages) +
         (c.smem == SmemLayout::Swizzled ? " swz" : "") +
         (c.cluster > 1 ? " c" + std::to_string(c.cluster) : "") +
         (c.splitK > 1 ? " sk" + std::to_string(c.splitK) : "") +
         (c.streamK ? " streamk" : "") + (c.repack ? " repack" : "") +
         (c.swapAB ? " swap" : "");
}

std::vector<ProblemSpec> problemsFromArgs(Args &args) {
  std::vector<ProblemSpec> out;
  if (auto file = args.value("problem")) {
    if (endsWith(*file, ".mlir")) {
#ifdef KGEN_HAVE_MLIR
      std::string err;
      std::vector<MlirGemm> ops;
      if (!readGemmsFromMlirFile(*file, ops, err))
        throw Error(err);
      for (MlirGemm &g : ops)
        out.push_back({g.symbol, g.problem, spelledConfig(g.config), g.target});
      if (out.empty())
        throw Error(*file + " holds no kgen.gemm op");
      return out;
#else
      throw Error("cannot read " + *file +
                  ": this kgen was built without MLIR (-DKGEN_ENABLE_MLIR=OFF);"
                  " describe the problem in JSON or with flags");
#endif
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(readFile(*file));
    } catch (const nlohmann::json::parse_error &e) {
      throw Error(*file + ": malformed JSON: " + e.what());
    }
    auto one = [&](const nlohmann::json &o, size_t i) {
      try {
        nlohmann::json pj = o;
        PartialConfig<GemmConfig> cfg;
        std::string label = *file;
        if (o.is_object() && o.contains("config")) {
          cfg = partialConfigFromJson<GemmConfig>(
              o.at("config"), gemmConfigFromJson, kGemmTileFields);
          pj.erase("config");
        }
        if (o.is_object() && o.contains("name")) {
          label = o.at("name").get<std::string>();
          pj.erase("name");
        } else if (j.is_array()) {
          label += "[" + std::to_string(i) + "]";
        }
        out.push_back({label, gemmProblemFromJson(pj), cfg, std::nullopt});
      } catch (const Error &e) {
        throw Error(*file + ": " + e.what());
      } catch (const nlohmann::json::exception &e) {
        throw Error(*file + ": " + e.what());
      }
    };
    if (j.is_array())
      for (size_t i = 0; i < j.size(); ++i)
        one(j[i], i);
    else
      one(j, 0);
    for (const char *f : {"m", "n", "k", "dtype", "c-dtype", "layout", "static",
                          "align", "bias-along", "act", "batch", "tf32"})
      if (args.value(f))
        throw Error(std::string("--") + f +
                    " cannot be combined with --problem");
    return out;
  }
  GemmProblem p;
  if (auto v = args.value("m"))
    p.m = toInt("m", *v);
  if (auto v = args.value("n"))
    p.n = toInt("n", *v);
  if (auto v = args.value("k"))
    p.k = toInt("k", *v);
  if (auto v = args.value("dtype"))
    p.ab = toDType("dtype", *v);
  p.c = defaultOutputDType(p.ab);
  p.alignA = p.alignB = defaultAlign(p.ab);
  if (auto v = args.value("c-dtype"))
    p.c = toDType("c-dtype", *v);
  p.transB = true;
  if (auto v = args.value("layout")) {
    if (v->size() != 2 || ((*v)[0] != 'n' && (*v)[0] != 't') ||
        ((*v)[1] != 'n' && (*v)[1] != 't'))
      throw Error("option --layout: '" + *v + "' must be nn, nt, tn or tt");
    p.transA = (*v)[0] == 't';
    p.transB = (*v)[1] == 't';
  }
  if (auto v = args.value("static")) {
    p.staticM = p.staticN = p.staticK = false;
    for (const std::string &d : split(*v, ',')) {
      if (d == "m")
        p.staticM = true;
      else if (d == "n")
        p.staticN = true;
      else if (d == "k")
        p.staticK = true;
      else if (d != "none")
        throw Error("option --static: '" + d + "' is not m, n, k or none");
    }
  }
  if (auto v = args.value("align")) {
    auto a = toInts("align", *v, ',', 3);
    p.alignA = int(a[0]);
    p.alignB = int(a[1]);
    p.alignC = int(a[2]);
  }
  if (auto v = args.value("bias-along")) {
    auto b = parseBiasKind(*v);
    if (!b)
      throw Error("option --bias-along: '" + *v + "' must be m, n or none");
    p.bias = *b;
  }
  if (auto v = args.value("act")) {
    auto a = parseActivation(*v);
    if (!a)
      throw Error("option --act: '" + *v +
                  "' must be relu, gelu_tanh, gelu_erf, silu or none");
    p.act = *a;
  }
  p.residual = args.flag("residual");
  p.tf32 = args.flag("tf32");
  if (auto v = args.value("batch"))
    p.batch = toInt("batch", *v);
  if (auto e = checkProblem(p))
    throw Error(*e);
  out.push_back({"gemm", p, {}, std::nullopt});
  return out;
}

PartialConfig<GemmConfig> configFromArgs(Args &args) {
  PartialConfig<GemmConfig> f;
  if (auto file = args.value("config")) {
    try {
      f = partialConfigFromJson<GemmConfig>(
          nlohmann::json::parse(readFile(*file)), gemmConfigFromJson,
          kGemmTileFields);
    } catch (const nlohmann::json::exception &e) {
      throw Error(*file + ": malformed JSON: " + e.what());
    }
  }
  std::optional<GemmConfig> &c = f.spelled;
  auto ensure = [&]() -> GemmConfig & {
    if (!c)
      c = GemmConfig{};
    return *c;
  };
  // Tile options.
  if (auto v = args.value("block")) {
    auto b = toInts("block", *v, 'x', 3);
    ensure().blockM = int(b[0]);
    c->blockN = int(b[1]);
    c->blockK = int(b[2]);
    f.tile = true;
  }
  if (auto v = args.value("warps")) {
    auto w = toInts("warps", *v, 'x', 2);
    ensure().warpsM = int(w[0]);
    c->warpsN = int(w[1]);
    f.tile = true;
  }
  if (auto v = args.value("stages")) {
    ensure().stages = int(toInt("stages", *v));
    f.tile = true;
  }
  if (auto v = args.value("smem")) {
    if (*v == "padded")
      ensure().smem = SmemLayout::Padded;
    else if (*v == "swizzled") {
      ensure().smem = SmemLayout::Swizzled;
      c->smemPad = 0;
    } else
      throw Error("option --smem: '" + *v + "' must be padded or swizzled");
    f.tile = true;
  }
  if (auto v = args.value("pad")) {
    ensure().smemPad = int(toInt("pad", *v));
    f.tile = true;
  }
  // Strategy options.
  std::optional<GemmLoop> loop;
  std::optional<int> cluster, splitK;
  if (auto v = args.value("loop")) {
    loop = parseGemmLoop(*v);
    if (!loop)
      throw Error("option --loop: '" + *v + "' must be tiled, wgmma or gemv");
    ensure().loop = *loop;
    if (swizzledByDefault(*loop) && !args.value("smem")) {
      c->smem = SmemLayout::Swizzled;
      c->smemPad = 0;
    }
  }
  if (auto v = args.value("cluster"))
    ensure().cluster = *(cluster = int(toInt("cluster", *v)));
  if (auto v = args.value("split-k"))
    ensure().splitK = *(splitK = int(toInt("split-k", *v)));
  const bool repack = args.flag("repack"), swap = args.flag("swap-ab");
  if (repack)
    ensure().repack = true;
  if (swap)
    ensure().swapAB = true;
  f.hasStrategy = [=, fromFile = f.hasStrategy](const GemmConfig &x) {
    return fromFile(x) && (!loop || x.loop == *loop) &&
           (!cluster || x.cluster == *cluster) &&
           (!splitK || x.splitK == *splitK) && (!repack || x.repack) &&
           (!swap || x.swapAB);
  };
  return f;
}

std::vector<Target> targetsFromArgs(Args &args, std::optional<Target> native) {
  std::vector<Target> out;
  for (const std::string &v : args.values("target"))
    for (const std::string &name : split(v, ',')) {
      if (name == "native") {
        if (!native)
          throw Error("--target native: no GPU was found on this machine; "
                      "name a target (sm_80, sm_90a, gfx90a, gfx942)");
        out.push_back(*native);
      } else if (auto t = parseTarget(name)) {
        out.push_back(*t);
      } else {
        throw Error("unknown target '" + name +
                    "' (sm_80, sm_90a, gfx90a, gfx942, native)");
      }
    }
  return out;
}

} // namespace kgen::cli
