//===- Limits.h - Is this config valid on this target? ----------*- C++ -*-===//

#ifndef KGEN_CODEGEN_LIMITS_H
#define KGEN_CODEGEN_LIMITS_H

#include "kgen/Problem.h"

#include <optional>
#include <string>

namespace kgen {

/// An empty optional when `c` can be generated for `p` on `t`; otherwise one
/// message that names the broken limit, the value, the limit and a fix, e.g.
/// "shared memory 245760 B exceeds sm_90a's 232448 B per block; lower
/// stages or blockK".
std::optional<std::string> checkConfig(const GemmProblem &p,
                                       const GemmConfig &c, Target t);

} // namespace kgen

#endif
