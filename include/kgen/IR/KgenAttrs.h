//===- KgenAttrs.h - kgen attributes ----------------------------*- C++ -*-===//

#ifndef KGEN_IR_KGENATTRS_H
#define KGEN_IR_KGENATTRS_H

#include "kgen/Problem.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

namespace kgen::ir {

/// `padded` or `swizzled`, the spelling of kgen::SmemLayout in attributes.
mlir::FailureOr<SmemLayout> parseSmemLayout(mlir::AsmParser &parser);
void printSmemLayout(mlir::AsmPrinter &printer, SmemLayout layout);

} // namespace kgen::ir

#define GET_ATTRDEF_CLASSES
#include "kgen/IR/KgenAttrs.h.inc"

#endif // KGEN_IR_KGENATTRS_H
