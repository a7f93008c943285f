//===- KgenAttrs.h - kgen attributes ----------------------------*- C++ -*-===//

#ifndef KGEN_IR_KGENATTRS_H
#define KGEN_IR_KGENATTRS_H

#include "kgen/Attention.h"
#include "kgen/Mlstm.h"
#include "kgen/Problem.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

namespace kgen::ir {

/// `padded` or `swizzled`, the spelling of kgen::SmemLayout in attributes.
mlir::FailureOr<SmemLayout> parseSmemLayout(mlir::AsmParser &parser);
void printSmemLayout(mlir::AsmPrinter &printer, SmemLayout layout);
/// `tiled` or `wgmma`, the spelling of kgen::GemmLoop in attributes.
mlir::FailureOr<GemmLoop> parseGemmLoop(mlir::AsmParser &parser);
void printGemmLoop(mlir::AsmPrinter &printer, GemmLoop loop);

/// `tiled` or `wgmma`, the spelling of kgen::AttentionLoop in attributes.
mlir::FailureOr<AttentionLoop> parseAttentionLoop(mlir::AsmParser &parser);
void printAttentionLoop(mlir::AsmPrinter &printer, AttentionLoop loop);

/// `recurrent`, `fused`, `twophase` or `chunkpar`, the spelling of
/// kgen::MlstmVariant.
mlir::FailureOr<MlstmVariant> parseMlstmVariant(mlir::AsmParser &parser);
void printMlstmVariant(mlir::AsmPrinter &printer, MlstmVariant variant);

} // namespace kgen::ir

#define GET_ATTRDEF_CLASSES
#include "kgen/IR/KgenAttrs.h.inc"

#endif // KGEN_IR_KGENATTRS_H
