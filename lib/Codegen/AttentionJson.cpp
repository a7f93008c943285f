//===- AttentionJson.cpp - Attention problems and configs as JSON ---------===//

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Error.h"

#include <set>

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
  return json{{"block", json::array({c.blockM, c.blockN})},
              {"warps", c.warps},
              {"stages", c.stages},
              {"preload_v", c.preloadV},
              {"splits", c.splits},
              {"pack_gqa", c.packGqa}};
}

namespace {

[[noreturn]] void fail(const std::string &what) {
  throw Error("invalid attention JSON: " + what);
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

bool getBool(const json &j, const char *key, bool dflt) {
  if (!j.contains(key))
    return dflt;
  const json &v = j.at(key);
  if (!v.is_boolean())
    fail(std::string("'") + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

/// A pair [a, b]; a single integer n stands for [n, n].
std::pair<int64_t, int64_t> getPair(const json &j, const char *key,
                                    std::pair<int64_t, int64_t> dflt) {
  if (!j.contains(key))
    return dflt;
  const json &v = j.at(key);
  if (v.is_number_integer())
    return {v.get<int64_t>(), v.get<int64_t>()};
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() ||
      !v[1].is_number_integer())
    fail(std::string("'") + key +
         "' must be an integer or an array of 2 integers, got " + v.dump());
  return {v[0].get<int64_t>(), v[1].get<int64_t>()};
}

std::string getString(const json &j, const char *key) {
  const json &v = j.at(key);
  if (!v.is_string())
    fail(std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

} // namespace

AttentionProblem attentionProblemFromJson(const json &j) {
  rejectUnknown(j,
                {"family", "batch", "heads", "seqlen", "head_dim", "dtype",
                 "layout", "causal", "window", "varlen", "alibi", "bias",
                 "lse"},
                "attention problem");
  if (j.contains("family") && j.at("family") != "attention")
    fail("'family' = " + j.at("family").dump() + " is not \"attention\"");
  AttentionProblem p;
  p.batch = getInt(j, "batch", p.batch);
  std::tie(p.headsQ, p.headsKv) = getPair(j, "heads", {p.headsQ, p.headsKv});
  std::tie(p.seqlenQ, p.seqlenK) = getPair(j, "seqlen", {p.seqlenQ, p.seqlenK});
  auto hd = getPair(j, "head_dim", {p.headDimQk, p.headDimV});
  p.headDimQk = int(hd.first);
  p.headDimV = int(hd.second);
  if (j.contains("dtype")) {
    std::string s = getString(j, "dtype");
    auto d = parseDType(s);
    if (!d)
      fail("'dtype' = \"" + s + "\" is not a dtype (bf16, f16)");
    p.dtype = *d;
  }
  if (j.contains("layout")) {
    std::string s = getString(j, "layout");
    auto l = parseAttentionLayout(s);
    if (!l)
      fail("'layout' = \"" + s + "\" must be \"bshd\" or \"bhsd\"");
    p.layout = *l;
  }
  p.causal = getBool(j, "causal", p.causal);
  auto w = getPair(j, "window", {p.windowLeft, p.windowRight});
  p.windowLeft = int(w.first);
  p.windowRight = int(w.second);
  p.varlen = getBool(j, "varlen", p.varlen);
  p.alibi = getBool(j, "alibi", p.alibi);
  p.bias = getBool(j, "bias", p.bias);
  p.lse = getBool(j, "lse", p.lse);
  return p;
}

AttentionConfig attentionConfigFromJson(const json &j) {
  rejectUnknown(j,
                {"block", "warps", "stages", "preload_v", "splits", "pack_gqa"},
                "attention config");
  AttentionConfig c;
  auto b = getPair(j, "block", {c.blockM, c.blockN});
  c.blockM = int(b.first);
  c.blockN = int(b.second);
  c.warps = int(getInt(j, "warps", c.warps));
  c.stages = int(getInt(j, "stages", c.stages));
  c.preloadV = getBool(j, "preload_v", c.preloadV);
  c.splits = int(getInt(j, "splits", c.splits));
  c.packGqa = getBool(j, "pack_gqa", c.packGqa);
  return c;
}

} // namespace kgen
