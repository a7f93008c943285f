//===- Json.cpp - Problems and configs to and from JSON -------------------===//

#include "kgen/Codegen/Json.h"
#include "kgen/Error.h"

#include <set>

namespace kgen {

using nlohmann::json;

json toJson(const GemmProblem &p) {
  json dims = json::array();
  if (p.staticM)
    dims.push_back("m");
  if (p.staticN)
    dims.push_back("n");
  if (p.staticK)
    dims.push_back("k");
  json j{{"family", "gemm"},
         {"m", p.m},
         {"n", p.n},
         {"k", p.k},
         {"ab", toString(p.ab)},
         {"c", toString(p.c)},
         {"layout", p.layoutName()},
         {"static", dims},
         {"align", json::array({p.alignA, p.alignB, p.alignC})}};
  // Epilogue and batch fields only when set: plain problems keep the text
  // (and the tuning-DB and bundle files) they had before these existed.
  if (p.bias != BiasKind::None)
    j["bias"] = toString(p.bias);
  if (p.act != Activation::None)
    j["act"] = toString(p.act);
  if (p.residual)
    j["residual"] = true;
  if (p.batch != 1)
    j["batch"] = p.batch;
  return j;
}

json toJson(const GemmConfig &c) {
  json j{{"block", json::array({c.blockM, c.blockN, c.blockK})},
         {"warps", json::array({c.warpsM, c.warpsN})},
         {"stages", c.stages},
         {"smem", c.smem == SmemLayout::Padded ? "padded" : "swizzled"},
         {"pad", c.smemPad}};
  // The default loop is left out, so configs written before it existed
  // read back the same.
  if (c.loop != GemmLoop::Tiled)
    j["loop"] = toString(c.loop);
  if (c.cluster != 1)
    j["cluster"] = c.cluster;
  if (c.splitK != 1)
    j["split_k"] = c.splitK;
  return j;
}

namespace {

[[noreturn]] void fail(const std::string &what) {
  throw Error("invalid gemm JSON: " + what);
}

void rejectUnknown(const json &j, std::initializer_list<const char *> known,
                   const char *what) {
  if (!j.is_object())
    fail(std::string(what) + " must be a JSON object, got " + j.dump());
  std::set<std::string> ok(known.begin(), known.end());
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!ok.count(it.key()))
      fail(std::string("unknown field '") + it.key() + "' in " + what);
}

int64_t getInt(const json &j, const char *key, int64_t dflt) {
  if (!j.contains(key))
    return dflt;
  const json &v = j.at(key);
  if (!v.is_number_integer())
    fail(std::string("'") + key + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

std::vector<int64_t> getInts(const json &j, const char *key, size_t n) {
  const json &v = j.at(key);
  if (!v.is_array() || v.size() != n)
    fail(std::string("'") + key + "' must be an array of " + std::to_string(n) +
         " integers, got " + v.dump());
  std::vector<int64_t> out;
  for (const json &e : v) {
    if (!e.is_number_integer())
      fail(std::string("'") + key + "' must hold integers, got " + v.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::string getString(const json &j, const char *key) {
  const json &v = j.at(key);
  if (!v.is_string())
    fail(std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

DType getDType(const json &j, const char *key, DType dflt) {
  if (!j.contains(key))
    return dflt;
  std::string s = getString(j, key);
  if (auto d = parseDType(s))
    return *d;
  fail(std::string("'") + key + "' = \"" + s +
       "\" is not a dtype (bf16, f16, f32)");
}

} // namespace

GemmProblem gemmProblemFromJson(const json &j) {
  rejectUnknown(j,
                {"family", "m", "n", "k", "ab", "c", "layout", "static",
                 "align", "bias", "act", "residual", "batch"},
                "gemm problem");
  if (j.contains("family") && j.at("family") != "gemm")
    fail("'family' = " + j.at("family").dump() + " is not \"gemm\"");
  GemmProblem p;
  for (const char *d : {"m", "n", "k"})
    if (!j.contains(d))
      fail(std::string("missing '") + d + "'");
  p.m = getInt(j, "m", 1);
  p.n = getInt(j, "n", 1);
  p.k = getInt(j, "k", 1);
  p.ab = getDType(j, "ab", DType::BF16);
  p.c = getDType(j, "c", p.ab);
  if (j.contains("layout")) {
    std::string l = getString(j, "layout");
    if (l.size() != 2 || (l[0] != 'n' && l[0] != 't') ||
        (l[1] != 'n' && l[1] != 't'))
      fail("'layout' = \"" + l + "\" must be one of nn, nt, tn, tt");
    p.transA = l[0] == 't';
    p.transB = l[1] == 't';
  }
  if (j.contains("static")) {
    const json &s = j.at("static");
    if (!s.is_array())
      fail("'static' must be an array of dimension names, got " + s.dump());
    p.staticM = p.staticN = p.staticK = false;
    for (const json &d : s) {
      if (d == "m")
        p.staticM = true;
      else if (d == "n")
        p.staticN = true;
      else if (d == "k")
        p.staticK = true;
      else
        fail("'static' holds " + d.dump() +
             "; dimensions are \"m\", \"n\", \"k\"");
    }
  }
  if (j.contains("align")) {
    auto a = getInts(j, "align", 3);
    p.alignA = int(a[0]);
    p.alignB = int(a[1]);
    p.alignC = int(a[2]);
  }
  if (j.contains("bias")) {
    std::string b = getString(j, "bias");
    auto kind = parseBiasKind(b);
    if (!kind)
      fail("'bias' = \"" + b + "\" must be \"none\", \"m\" or \"n\"");
    p.bias = *kind;
  }
  if (j.contains("act")) {
    std::string a = getString(j, "act");
    auto act = parseActivation(a);
    if (!act)
      fail("'act' = \"" + a +
           "\" must be one of none, relu, gelu_tanh, gelu_erf, silu");
    p.act = *act;
  }
  if (j.contains("residual")) {
    const json &v = j.at("residual");
    if (!v.is_boolean())
      fail("'residual' must be true or false, got " + v.dump());
    p.residual = v.get<bool>();
  }
  p.batch = getInt(j, "batch", 1);
  return p;
}

GemmConfig gemmConfigFromJson(const json &j) {
  rejectUnknown(j,
                {"loop", "block", "warps", "stages", "smem", "pad", "cluster",
                 "split_k"},
                "gemm config");
  GemmConfig c;
  if (j.contains("loop")) {
    std::string s = getString(j, "loop");
    std::optional<GemmLoop> l = parseGemmLoop(s);
    if (!l)
      fail("'loop' = \"" + s + "\" must be \"tiled\" or \"wgmma\"");
    c.loop = *l;
  }
  if (j.contains("block")) {
    auto b = getInts(j, "block", 3);
    c.blockM = int(b[0]);
    c.blockN = int(b[1]);
    c.blockK = int(b[2]);
  }
  if (j.contains("warps")) {
    auto w = getInts(j, "warps", 2);
    c.warpsM = int(w[0]);
    c.warpsN = int(w[1]);
  }
  c.stages = int(getInt(j, "stages", c.stages));
  if (j.contains("smem")) {
    std::string s = getString(j, "smem");
    if (s == "padded")
      c.smem = SmemLayout::Padded;
    else if (s == "swizzled")
      c.smem = SmemLayout::Swizzled;
    else
      fail("'smem' = \"" + s + "\" must be \"padded\" or \"swizzled\"");
  }
  c.smemPad = int(getInt(j, "pad", c.smem == SmemLayout::Padded ? 8 : 0));
  c.cluster = int(getInt(j, "cluster", 1));
  c.splitK = int(getInt(j, "split_k", 1));
  return c;
}

} // namespace kgen
