//===- MlstmJson.cpp - mLSTM problems and configs to and from JSON --------===//

#include "JsonFields.h"
#include "kgen/Error.h"
#include "kgen/Mlstm.h"

#include <nlohmann/json.hpp>

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
  json j{{"variant", toString(c.variant)},
         {"chunk", c.chunk},
         {"blockDV", c.blockDV},
         {"warps", c.warps}};
  // Only where set: the configs before it keep their JSON (and DB keys).
  if (c.wgmma)
    j["wgmma"] = true;
  return j;
}

namespace {
const JsonFields fields("mlstm");
} // namespace

MlstmProblem mlstmProblemFromJson(const json &j) {
  fields.rejectUnknown(j,
                       {"family", "b", "nh", "s", "dqk", "dv", "dtype",
                        "initial", "final", "eps"},
                       "mlstm problem");
  if (j.contains("family") && j.at("family") != "mlstm")
    fields.fail("'family' = " + j.at("family").dump() + " is not \"mlstm\"");
  for (const char *d : {"dqk", "dv"})
    if (!j.contains(d))
      fields.fail(std::string("missing '") + d + "'");
  MlstmProblem p;
  p.b = fields.getInt(j, "b", 1);
  p.nh = fields.getInt(j, "nh", 1);
  p.s = fields.getInt(j, "s", 1);
  p.dqk = int(fields.getInt(j, "dqk", 64));
  p.dv = int(fields.getInt(j, "dv", 64));
  p.dtype = fields.getDType(j, "dtype", p.dtype);
  p.initialState = fields.getBool(j, "initial");
  p.finalState = fields.getBool(j, "final");
  if (j.contains("eps")) {
    const json &v = j.at("eps");
    if (!v.is_number())
      fields.fail("'eps' must be a number, got " + v.dump());
    p.eps = v.get<float>();
  }
  return p;
}

MlstmConfig mlstmConfigFromJson(const json &j) {
  fields.rejectUnknown(j, {"variant", "chunk", "blockDV", "warps", "wgmma"},
                       "mlstm config");
  MlstmConfig c;
  if (j.contains("variant")) {
    std::string s = fields.getString(j, "variant");
    auto v = parseMlstmVariant(s);
    if (!v)
      fields.fail("'variant' = \"" + s +
                  "\" must be \"recurrent\", \"fused\", \"twophase\" or "
                  "\"chunkpar\"");
    c.variant = *v;
  }
  c.chunk = int(fields.getInt(
      j, "chunk", c.variant == MlstmVariant::Recurrent ? 0 : c.chunk));
  c.blockDV = int(fields.getInt(j, "blockDV", c.blockDV));
  c.warps = int(fields.getInt(j, "warps", c.warps));
  c.wgmma = fields.getBool(j, "wgmma", c.wgmma);
  return c;
}

} // namespace kgen
