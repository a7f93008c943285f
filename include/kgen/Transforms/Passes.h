//===- Passes.h - kgen passes -----------------------------------*- C++ -*-===//

#ifndef KGEN_TRANSFORMS_PASSES_H
#define KGEN_TRANSFORMS_PASSES_H

#include "kgen/IR/KgenDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace kgen {

#define GEN_PASS_DECL
#include "kgen/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kgen/Transforms/Passes.h.inc"

} // namespace kgen

#endif // KGEN_TRANSFORMS_PASSES_H
