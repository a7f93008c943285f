//===- AttentionJson.cpp - Attention problems and configs as JSON ---------===//

#include "kgen/Codegen/AttentionJson.h"
#include "JsonFields.h"
#include "kgen/Error.h"

namespace kgen {

using nlohmann::json;

json toJson(const AttentionProblem &p) {
  return json{{"family", "attention"},
              {"batch", p.batch},
              {"heads", json::array({p.headsQ, p.headsKv})},
              {"seqlen", json::array({p.seqlenQ, p.seqlenK})},
              {"head_dim", json::array({p.headDimQk, p.headDimV})},
              {"dtype", toString(p.dtype)},
              {"layout", toString(p.layout)},
              {"causal", p.causal},
              {"window", json::array({p.windowLeft, p.windowRight})},
              {"varlen", p.varlen},
              {"alibi", p.alibi},
              {"bias", p.bias},
              {"lse", p.lse}};
}

json toJson(const AttentionConfig &c) {
  json j{{"block", json::array({c.blockM, c.blockN})},
         {"warps", c.warps},
         {"stages", c.stages},
         {"preload_v", c.preloadV},
         {"splits", c.splits},
         {"pack_gqa", c.packGqa}};
  if (c.loop != AttentionLoop::Tiled) // as GEMM's: only when not the default
    j["loop"] = std::string(toString(c.loop));
  if (c.persistent)
    j["persistent"] = true;
  return j;
}

namespace {
const JsonFields fields("attention");
} // namespace

AttentionProblem attentionProblemFromJson(const json &j) {
  fields.rejectUnknown(j,
                       {"family", "batch", "heads", "seqlen", "head_dim",
                        "dtype", "layout", "causal", "window", "varlen",
                        "alibi", "bias", "lse"},
                       "attention problem");
  if (j.contains("family") && j.at("family") != "attention")
    fields.fail("'family' = " + j.at("family").dump() +
                " is not \"attention\"");
  AttentionProblem p;
  p.batch = fields.getInt(j, "batch", p.batch);
  std::tie(p.headsQ, p.headsKv) =
      fields.getPair(j, "heads", {p.headsQ, p.headsKv});
  std::tie(p.seqlenQ, p.seqlenK) =
      fields.getPair(j, "seqlen", {p.seqlenQ, p.seqlenK});
  auto hd = fields.getPair(j, "head_dim", {p.headDimQk, p.headDimV});
  p.headDimQk = int(hd.first);
  p.headDimV = int(hd.second);
  if (j.contains("dtype")) {
    std::string s = fields.getString(j, "dtype");
    auto d = parseDType(s);
    if (!d)
      fields.fail("'dtype' = \"" + s +
                  "\" is not a dtype (bf16, f16; fp8 e4m3, e5m2)");
    p.dtype = *d;
  }
  if (j.contains("layout")) {
    std::string s = fields.getString(j, "layout");
    auto l = parseAttentionLayout(s);
    if (!l)
      fields.fail("'layout' = \"" + s + "\" must be \"bshd\" or \"bhsd\"");
    p.layout = *l;
  }
  p.causal = fields.getBool(j, "causal", p.causal);
  auto w = fields.getPair(j, "window", {p.windowLeft, p.windowRight});
  p.windowLeft = int(w.first);
  p.windowRight = int(w.second);
  p.varlen = fields.getBool(j, "varlen", p.varlen);
  p.alibi = fields.getBool(j, "alibi", p.alibi);
  p.bias = fields.getBool(j, "bias", p.bias);
  p.lse = fields.getBool(j, "lse", p.lse);
  return p;
}

AttentionConfig attentionConfigFromJson(const json &j) {
  fields.rejectUnknown(j,
                       {"loop", "block", "warps", "stages", "preload_v",
                        "splits", "pack_gqa", "persistent"},
                       "attention config");
  AttentionConfig c;
  if (j.contains("loop")) {
    std::string s = fields.getString(j, "loop");
    auto l = parseAttentionLoop(s);
    if (!l)
      fields.fail("'loop' = \"" + s + "\" must be \"tiled\" or \"wgmma\"");
    c.loop = *l;
  }
  auto b = fields.getPair(j, "block", {c.blockM, c.blockN});
  c.blockM = int(b.first);
  c.blockN = int(b.second);
  c.warps = int(fields.getInt(j, "warps", c.warps));
  c.stages = int(fields.getInt(j, "stages", c.stages));
  c.preloadV = fields.getBool(j, "preload_v", c.preloadV);
  c.splits = int(fields.getInt(j, "splits", c.splits));
  c.packGqa = fields.getBool(j, "pack_gqa", c.packGqa);
  c.persistent = fields.getBool(j, "persistent", c.persistent);
  return c;
}

} // namespace kgen
