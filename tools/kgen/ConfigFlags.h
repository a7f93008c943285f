//===- ConfigFlags.h - What a command's config options ask for --*- C++ -*-===//
//
// Config options come in two kinds. Tile options (a block, warps, stages, a
// shared-memory layout; mLSTM's chunk and DV block) or a config file spell a
// config: the fields they do not name keep their plain defaults, as in JSON.
// Strategy options alone (a loop, swapped tiles, repack, a cluster, split-K;
// attention's persistent grid, GQA packing, splits; mLSTM's variant and
// wgmma) ask for the dispatcher's choice among the configs with that
// strategy: the default config where it has it, else the best-ranked
// candidate that does. Where no candidate has it, the config as spelled is
// used, and checkConfig says what is wrong with it.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_TOOLS_CONFIGFLAGS_H
#define KGEN_TOOLS_CONFIGFLAGS_H

#include "kgen/Problem.h"

#include <functional>
#include <optional>
#include <vector>

namespace kgen::cli {

template <class Config> struct ConfigFlags {
  /// The config as the options spell it; empty when no option was given.
  std::optional<Config> spelled;
  /// Whether a tile option or a config file was given.
  bool tile = false;
  /// Whether a config has every strategy the options name.
  std::function<bool(const Config &)> hasStrategy = [](const Config &) {
    return true;
  };

  explicit operator bool() const { return spelled.has_value(); }

  /// The config to run: see the file's header. enumerateConfigs and
  /// defaultConfig are the problem's family's (found by its namespace).
  template <class Problem> Config pick(const Problem &p, Target t) const {
    if (!tile) {
      const Config d = defaultConfig(p, t);
      if (hasStrategy(d))
        return d;
    }
    return candidates(p, t).front();
  }

  /// `--candidates` with these options: every candidate with the strategy
  /// (best-ranked first), or the spelled config alone.
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

/// The hint an invalid spelled config's error ends with.
inline constexpr const char *kSpelledConfigHint =
    " (options not given keep their plain defaults; `--candidates` lists the "
    "valid configs)";

} // namespace kgen::cli

#endif
