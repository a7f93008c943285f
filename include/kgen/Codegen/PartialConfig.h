//===- PartialConfig.h - A config given in part -----------------*- C++ -*-===//
//
// A config may be given in part: as the CLI's options, or as a JSON object
// (the C API's config_json, Python's config=, a --config file). Its fields
// come in two kinds. Tile fields (a block, warps, stages, a shared-memory
// layout; mLSTM's chunk and DV block) spell a config: the fields not given
// keep their plain defaults. Strategy fields alone (a loop, swapped tiles,
// repack, a cluster, split-K or stream-K; attention's persistent grid, GQA
// packing, splits; mLSTM's variant and wgmma) ask for the dispatcher's
// choice among the configs with that strategy: the default config where it
// has it, else the best-ranked candidate that does. Where no candidate has
// it, the config as spelled is used, and checkConfig says what is wrong with
// it. An empty JSON object asks for the default config.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_CODEGEN_PARTIALCONFIG_H
#define KGEN_CODEGEN_PARTIALCONFIG_H

#include "kgen/Problem.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kgen {

template <class Config> struct PartialConfig {
  /// The config as given, the other fields at their plain defaults; empty
  /// when nothing was given.
  std::optional<Config> spelled;
  /// Whether a tile field was given.
  bool tile = false;
  /// Whether a config has every strategy field given.
  std::function<bool(const Config &)> hasStrategy = [](const Config &) {
    return true;
  };

  explicit operator bool() const { return spelled.has_value(); }

  /// The config to run (the file's header; nothing given: the default).
  /// enumerateConfigs and defaultConfig are the problem's family's (found by
  /// its namespace).
  template <class Problem> Config pick(const Problem &p, Target t) const {
    if (!tile) {
      const Config d = defaultConfig(p, t);
      if (hasStrategy(d))
        return d;
    }
    return candidates(p, t).front();
  }

  /// Every candidate with the strategy (best-ranked first), or the spelled
  /// config alone (tile fields, or no candidate has the strategy).
  template <class Problem>
  std::vector<Config> candidates(const Problem &p, Target t) const {
    std::vector<Config> out;
    if (!tile)
      for (const Config &c : enumerateConfigs(p, t))
        if (hasStrategy(c))
          out.push_back(c);
    if (out.empty())
      out.push_back(*spelled);
    return out;
  }
};

/// A config given whole (an MLIR op's config attribute): it spells, and
/// nothing given is nothing.
template <class Config>
PartialConfig<Config> spelledConfig(const std::optional<Config> &c) {
  PartialConfig<Config> out;
  out.spelled = c;
  out.tile = c.has_value();
  return out;
}

/// The partial config a JSON object gives. `parse` is the family's
/// xConfigFromJson (plain defaults for the fields not given; it throws on
/// unknown fields and bad values), `tileKeys` the family's tile fields. A
/// config has the strategy when setting the given fields on it (through its
/// own toJson) changes nothing.
template <class Config, class Parse, class Keys>
PartialConfig<Config> partialConfigFromJson(const nlohmann::json &j,
                                            Parse parse, const Keys &tileKeys) {
  PartialConfig<Config> out;
  out.spelled = parse(j);
  for (std::string_view k : tileKeys)
    out.tile |= j.contains(std::string(k));
  out.hasStrategy = [j, parse](const Config &c) {
    nlohmann::json merged = toJson(c);
    for (const auto &[k, v] : j.items())
      merged[k] = v;
    return parse(merged) == c;
  };
  return out;
}

} // namespace kgen

#endif
