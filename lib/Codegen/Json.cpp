//===- Json.cpp - Problems and configs to and from JSON -------------------===//

#include "kgen/Codegen/Json.h"
#include "JsonFields.h"
#include "kgen/Error.h"

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
  if (p.tf32)
    j["tf32"] = true;
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
  if (c.streamK)
    j["stream_k"] = true;
  if (c.repack)
    j["repack"] = true;
  if (c.swapAB)
    j["swap_ab"] = true;
  return j;
}

namespace {
const JsonFields fields("gemm");
} // namespace

GemmProblem gemmProblemFromJson(const json &j) {
  fields.rejectUnknown(j,
                       {"family", "m", "n", "k", "ab", "c", "layout", "static",
                        "align", "bias", "act", "residual", "batch", "tf32"},
                       "gemm problem");
  if (j.contains("family") && j.at("family") != "gemm")
    fields.fail("'family' = " + j.at("family").dump() + " is not \"gemm\"");
  GemmProblem p;
  for (const char *d : {"m", "n", "k"})
    if (!j.contains(d))
      fields.fail(std::string("missing '") + d + "'");
  p.m = fields.getInt(j, "m", 1);
  p.n = fields.getInt(j, "n", 1);
  p.k = fields.getInt(j, "k", 1);
  p.ab = fields.getDType(j, "ab", DType::BF16);
  p.c = fields.getDType(j, "c", defaultOutputDType(p.ab));
  p.alignA = p.alignB = defaultAlign(p.ab);
  if (j.contains("layout")) {
    std::string l = fields.getString(j, "layout");
    if (l.size() != 2 || (l[0] != 'n' && l[0] != 't') ||
        (l[1] != 'n' && l[1] != 't'))
      fields.fail("'layout' = \"" + l + "\" must be one of nn, nt, tn, tt");
    p.transA = l[0] == 't';
    p.transB = l[1] == 't';
  }
  if (j.contains("static")) {
    const json &s = j.at("static");
    if (!s.is_array())
      fields.fail("'static' must be an array of dimension names, got " +
                  s.dump());
    p.staticM = p.staticN = p.staticK = false;
    for (const json &d : s) {
      if (d == "m")
        p.staticM = true;
      else if (d == "n")
        p.staticN = true;
      else if (d == "k")
        p.staticK = true;
      else
        fields.fail("'static' holds " + d.dump() +
                    "; dimensions are \"m\", \"n\", \"k\"");
    }
  }
  if (j.contains("align")) {
    auto a = fields.getInts(j, "align", 3);
    p.alignA = int(a[0]);
    p.alignB = int(a[1]);
    p.alignC = int(a[2]);
  }
  if (j.contains("bias")) {
    std::string b = fields.getString(j, "bias");
    auto kind = parseBiasKind(b);
    if (!kind)
      fields.fail("'bias' = \"" + b + "\" must be \"none\", \"m\" or \"n\"");
    p.bias = *kind;
  }
  if (j.contains("act")) {
    std::string a = fields.getString(j, "act");
    auto act = parseActivation(a);
    if (!act)
      fields.fail("'act' = \"" + a +
                  "\" must be one of none, relu, gelu_tanh, gelu_erf, silu");
    p.act = *act;
  }
  if (j.contains("residual")) {
    const json &v = j.at("residual");
    if (!v.is_boolean())
      fields.fail("'residual' must be true or false, got " + v.dump());
    p.residual = v.get<bool>();
  }
  p.batch = fields.getInt(j, "batch", 1);
  if (j.contains("tf32")) {
    const json &v = j.at("tf32");
    if (!v.is_boolean())
      fields.fail("'tf32' must be true or false, got " + v.dump());
    p.tf32 = v.get<bool>();
  }
  return p;
}

GemmConfig gemmConfigFromJson(const json &j) {
  fields.rejectUnknown(j,
                       {"loop", "block", "warps", "stages", "smem", "pad",
                        "cluster", "split_k", "stream_k", "repack", "swap_ab"},
                       "gemm config");
  GemmConfig c;
  if (j.contains("loop")) {
    std::string s = fields.getString(j, "loop");
    std::optional<GemmLoop> l = parseGemmLoop(s);
    if (!l)
      fields.fail("'loop' = \"" + s +
                  "\" must be \"tiled\", \"wgmma\" or \"gemv\"");
    c.loop = *l;
  }
  if (j.contains("block")) {
    auto b = fields.getInts(j, "block", 3);
    c.blockM = int(b[0]);
    c.blockN = int(b[1]);
    c.blockK = int(b[2]);
  }
  if (j.contains("warps")) {
    auto w = fields.getInts(j, "warps", 2);
    c.warpsM = int(w[0]);
    c.warpsN = int(w[1]);
  }
  c.stages = int(fields.getInt(j, "stages", c.stages));
  if (swizzledByDefault(c.loop))
    c.smem = SmemLayout::Swizzled; // pad then defaults to 0 (below)
  if (j.contains("smem")) {
    std::string s = fields.getString(j, "smem");
    if (s == "padded")
      c.smem = SmemLayout::Padded;
    else if (s == "swizzled")
      c.smem = SmemLayout::Swizzled;
    else
      fields.fail("'smem' = \"" + s + "\" must be \"padded\" or \"swizzled\"");
  }
  c.smemPad =
      int(fields.getInt(j, "pad", c.smem == SmemLayout::Padded ? 8 : 0));
  c.cluster = int(fields.getInt(j, "cluster", 1));
  c.splitK = int(fields.getInt(j, "split_k", 1));
  c.streamK = fields.getBool(j, "stream_k", false);
  c.repack = fields.getBool(j, "repack", false);
  c.swapAB = fields.getBool(j, "swap_ab", false);
  return c;
}

} // namespace kgen
