//===- KgenOps.h - kgen operations ------------------------------*- C++ -*-===//

#ifndef KGEN_IR_KGENOPS_H
#define KGEN_IR_KGENOPS_H

#include "kgen/IR/KgenAttrs.h"
#include "kgen/IR/KgenDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#define GET_OP_CLASSES
#include "kgen/IR/KgenOps.h.inc"

#endif // KGEN_IR_KGENOPS_H
