//===- KgenToHip.h - kgen ops to HIP source ---------------------*- C++ -*-===//

#ifndef KGEN_TARGET_HIP_KGENTOHIP_H
#define KGEN_TARGET_HIP_KGENTOHIP_H

#include "mlir/IR/Operation.h"
#include "llvm/Support/raw_ostream.h"

namespace kgen {

/// Prints the HIP source of every kgen op under `op`, in order, exactly as
/// the codegen core emits it (kgen::emitGemm). Every op needs a target and a
/// config; otherwise nothing is printed and each such op gets an error.
/// With `inlineTemplates`, the template headers are pasted into each source.
mlir::LogicalResult translateToHip(mlir::Operation *op, llvm::raw_ostream &os,
                                   bool inlineTemplates = false);

/// Registers `--kgen-to-hip` (and its `--kgen-inline-templates` option) with
/// mlir-translate's driver.
void registerToHipTranslation();

} // namespace kgen

#endif // KGEN_TARGET_HIP_KGENTOHIP_H
