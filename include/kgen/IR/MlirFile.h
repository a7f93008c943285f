//===- MlirFile.h - Read kgen problems from .mlir files ---------*- C++ -*-===//
//
// For callers that know nothing of MLIR (the kgen CLI): this header includes
// no MLIR or LLVM header, and the functions report errors as text (with the
// file, line and column of the op) instead of throwing. Implemented in the
// KgenMlirFile library, built when KGEN_ENABLE_MLIR is on.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_IR_MLIRFILE_H
#define KGEN_IR_MLIRFILE_H

#include "kgen/Attention.h"
#include "kgen/Mlstm.h"
#include "kgen/Problem.h"

#include <optional>
#include <string>
#include <vector>

namespace kgen {

/// One kgen.gemm op of a file.
struct MlirGemm {
  std::string symbol; ///< the op's symbol name, without '@'
  GemmProblem problem;
  std::optional<GemmConfig> config;
  std::optional<Target> target;
};

/// Parses and verifies `path` and appends every kgen.gemm op in it to `out`,
/// in order. On failure returns false with the diagnostics in `err`.
bool readGemmsFromMlirFile(const std::string &path, std::vector<MlirGemm> &out,
                           std::string &err);

/// The problem and config of the one kgen.gemm op in `path` (and its target,
/// when `target` is given). Fails when the file does not verify or holds
/// other than exactly one kgen.gemm op.
bool parseGemmFromMlirFile(const std::string &path, GemmProblem &problem,
                           std::optional<GemmConfig> &config, std::string &err,
                           std::optional<Target> *target = nullptr);

/// The kgen.attention and kgen.mlstm ops of a file (for `kgen tune` and
/// `kgen bundle`): symbol, problem and target of each, in order.
struct MlirAttention {
  std::string symbol;
  AttentionProblem problem;
  std::optional<Target> target;
};
struct MlirMlstm {
  std::string symbol;
  MlstmProblem problem;
  std::optional<Target> target;
};
/// Parses and verifies `path` and appends its kgen.attention and kgen.mlstm
/// ops. On failure returns false with the diagnostics in `err`.
bool readFamiliesFromMlirFile(const std::string &path,
                              std::vector<MlirAttention> &attention,
                              std::vector<MlirMlstm> &mlstm, std::string &err);

} // namespace kgen

#endif // KGEN_IR_MLIRFILE_H
