//===- KgenDialect.h - The kgen dialect -------------------------*- C++ -*-===//

#ifndef KGEN_IR_KGENDIALECT_H
#define KGEN_IR_KGENDIALECT_H

#include "mlir/IR/Dialect.h"

#include "kgen/IR/KgenDialect.h.inc"

#endif // KGEN_IR_KGENDIALECT_H
