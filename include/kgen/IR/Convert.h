//===- Convert.h - kgen ops <-> kgen's problem structs ----------*- C++ -*-===//
//
// The one place that knows how a kgen.gemm op spells a kgen::GemmProblem,
// a kgen::GemmConfig and a kgen::Target. The verifier, the passes, the HIP
// translation and the .mlir reader of the CLI all go through it.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_IR_CONVERT_H
#define KGEN_IR_CONVERT_H

#include "kgen/IR/KgenOps.h"
#include "kgen/Attention.h"
#include "kgen/Problem.h"

#include "mlir/IR/Builders.h"

#include <optional>
#include <string>
#include <utility>

namespace kgen::ir {

/// The problem `op` declares. Fails, with an error at `op`, when an
/// attribute has no meaning in a GemmProblem (an element type other than
/// bf16/f16/f32, an unknown layout or static dimension, the wrong number of
/// alignments). Does not run kgen::checkProblem.
mlir::FailureOr<GemmProblem> getGemmProblem(GemmOp op);

/// The op's target, or none when it has no `target`; fails, with an error at
/// `op`, on a name that is not a kgen target.
mlir::FailureOr<std::optional<Target>> getGemmTarget(GemmOp op);

/// The op's tile configuration, if it has one.
std::optional<GemmConfig> getGemmConfig(GemmOp op);

/// Problem and configuration together.
mlir::FailureOr<std::pair<GemmProblem, std::optional<GemmConfig>>>
toProblem(GemmOp op);

/// A kgen.gemm op declaring `p` (with `static_dims` and `align` only where
/// they differ from the defaults), optionally with a target and a config.
GemmOp buildGemmOp(mlir::OpBuilder &builder, mlir::Location loc,
                   llvm::StringRef name, const GemmProblem &p,
                   std::optional<Target> target = std::nullopt,
                   std::optional<GemmConfig> config = std::nullopt);

/// The attention problem, target and config a kgen.attention op declares;
/// fails with an error at `op` on attributes with no meaning there.
mlir::FailureOr<AttentionProblem> getAttentionProblem(AttentionOp op);
mlir::FailureOr<std::optional<Target>> getAttentionTarget(AttentionOp op);
std::optional<AttentionConfig> getAttentionConfig(AttentionOp op);

/// The MLIR element type of a kgen dtype, and back (none for other types).
mlir::Type toMlirType(mlir::MLIRContext *ctx, DType t);
std::optional<DType> toDType(mlir::Type t);

/// The message for a target name kgen does not know, listing the ones it
/// does.
std::string unknownTargetMessage(llvm::StringRef name);

} // namespace kgen::ir

#endif // KGEN_IR_CONVERT_H
