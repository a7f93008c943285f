//===- Args.h - Command-line parsing for the kgen CLI -----------*- C++ -*-===//

#ifndef KGEN_TOOLS_ARGS_H
#define KGEN_TOOLS_ARGS_H

#include "kgen/Codegen/PartialConfig.h"
#include "kgen/Problem.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kgen::cli {

/// `--name value`, `--name=value` and bare `--flag`; everything else is a
/// positional argument. Unknown options are reported by `finish()`.
class Args {
public:
  Args(int argc, char **argv, int first);
  bool flag(const std::string &name);
  std::optional<std::string> value(const std::string &name);
  std::vector<std::string> values(const std::string &name); ///< repeatable
  const std::vector<std::string> &positional() const { return positional_; }
  /// Throws kgen::Error naming any option nobody asked for.
  void finish(const std::string &command) const;

private:
  std::multimap<std::string, std::string> opts_;
  std::vector<std::string> positional_;
  std::map<std::string, bool> used_;
};

/// One problem, with the config and target it may carry (from .mlir).
struct ProblemSpec {
  std::string label; ///< symbol or file name, for tables
  GemmProblem problem;
  /// A "config" in a problem file, by the partial-config rule (.json), or
  /// an op's config attribute (.mlir: spelled); empty when none.
  PartialConfig<GemmConfig> config;
  std::optional<Target> target;
};

/// Problems from `--problem FILE` (.json: one object or an array; .mlir:
/// every kgen.gemm op) or from the shape flags (--m --n --k --dtype
/// --c-dtype --layout --static --align).
std::vector<ProblemSpec> problemsFromArgs(Args &args);
/// The config options (kgen/Codegen/PartialConfig.h): --block, --warps,
/// --stages, --smem and --pad spell a config; --loop, --cluster, --split-k,
/// --repack and --swap-ab alone name a strategy; a --config FILE.json is read
/// by the same rule, the options on top of it. Empty when none is given.
PartialConfig<GemmConfig> configFromArgs(Args &args);
/// --target T (repeatable, comma lists allowed, `native`); empty when none.
std::vector<Target> targetsFromArgs(Args &args, std::optional<Target> native);

/// A config in one short line for tables: "128x128x32 w2x2 s3 swz".
std::string configText(const GemmConfig &c);

/// The hint an invalid spelled config's error ends with.
inline constexpr const char *kSpelledConfigHint =
    " (options not given keep their plain defaults; `--candidates` lists the "
    "valid configs)";

/// The help text of the options above, for every subcommand's --help.
extern const char *kProblemHelp;
extern const char *kConfigHelp;

} // namespace kgen::cli

#endif
