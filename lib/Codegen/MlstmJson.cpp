//===- MlstmJson.cpp - mLSTM problems and configs to and from JSON --------===//

#include "kgen/Error.h"
#include "kgen/Mlstm.h"

#include <nlohmann/json.hpp>

#include <set>

namespace kgen {

using nlohmann::json;

json toJson(const MlstmProblem &p) {
  return json{{"family", "mlstm"},
              {"b", p.b},
              {"nh", p.nh},
              {"s", p.s},
              {"dqk", p.dqk},
              {"dv", p.dv},
              {"dtype", toString(p.dtype)},
              {"initial", p.initialState},
              {"final", p.finalState},
              {"eps", p.eps}};
}

json toJson(const MlstmConfig &c) {
  return json{{"variant", toString(c.variant)},
              {"chunk", c.chunk},
              {"blockDV", c.blockDV},
              {"warps", c.warps}};
}

namespace {

[[noreturn]] void fail(const std::string &what) {
  throw Error("invalid mlstm JSON: " + what);
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

bool getBool(const json &j, const char *key) {
  if (!j.contains(key))
    return false;
  const json &v = j.at(key);
  if (!v.is_boolean())
    fail(std::string("'") + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string getString(const json &j, const char *key) {
  const json &v = j.at(key);
  if (!v.is_string())
    fail(std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

} // namespace

MlstmProblem mlstmProblemFromJson(const json &j) {
  rejectUnknown(j,
                {"family", "b", "nh", "s", "dqk", "dv", "dtype", "initial",
                 "final", "eps"},
                "mlstm problem");
  if (j.contains("family") && j.at("family") != "mlstm")
    fail("'family' = " + j.at("family").dump() + " is not \"mlstm\"");
  for (const char *d : {"dqk", "dv"})
    if (!j.contains(d))
      fail(std::string("missing '") + d + "'");
  MlstmProblem p;
  p.b = getInt(j, "b", 1);
  p.nh = getInt(j, "nh", 1);
  p.s = getInt(j, "s", 1);
  p.dqk = int(getInt(j, "dqk", 64));
  p.dv = int(getInt(j, "dv", 64));
  if (j.contains("dtype")) {
    std::string s = getString(j, "dtype");
    auto d = parseDType(s);
    if (!d)
      fail("'dtype' = \"" + s + "\" is not a dtype (bf16, f16, f32)");
    p.dtype = *d;
  }
  p.initialState = getBool(j, "initial");
  p.finalState = getBool(j, "final");
  if (j.contains("eps")) {
    const json &v = j.at("eps");
    if (!v.is_number())
      fail("'eps' must be a number, got " + v.dump());
    p.eps = v.get<float>();
  }
  return p;
}

MlstmConfig mlstmConfigFromJson(const json &j) {
  rejectUnknown(j, {"variant", "chunk", "blockDV", "warps"}, "mlstm config");
  MlstmConfig c;
  if (j.contains("variant")) {
    std::string s = getString(j, "variant");
    auto v = parseMlstmVariant(s);
    if (!v)
      fail("'variant' = \"" + s +
           "\" must be \"recurrent\", \"fused\" or \"twophase\"");
    c.variant = *v;
  }
  c.chunk = int(
      getInt(j, "chunk", c.variant == MlstmVariant::Recurrent ? 0 : c.chunk));
  c.blockDV = int(getInt(j, "blockDV", c.blockDV));
  c.warps = int(getInt(j, "warps", c.warps));
  return c;
}

} // namespace kgen
