//===- Candidates.h - Every valid config, pruned by a model -----*- C++ -*-===//

#ifndef KGEN_CODEGEN_CANDIDATES_H
#define KGEN_CODEGEN_CANDIDATES_H

#include "kgen/Problem.h"

#include <vector>

namespace kgen {

/// Every config the target's limits allow for `p`, pruned by a simple model
/// (no tile much larger than the problem). Deterministic order, best guess
/// first.
std::vector<GemmConfig> enumerateConfigs(const GemmProblem &p, Target t);

/// The dispatcher's default choice without measurements: a heuristic over
/// the candidates (fill the machine, then prefer larger tiles).
GemmConfig defaultConfig(const GemmProblem &p, Target t);

} // namespace kgen

#endif
