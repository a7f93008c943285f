//===- kgen-opt.cpp - The kgen optimizer driver ---------------------------===//
//
// mlir-opt with the kgen dialect and passes, e.g.
//   kgen-opt --kgen-verify-target=target=sm_90a --kgen-select-config x.mlir
//
//===----------------------------------------------------------------------===//

#include "kgen/IR/KgenDialect.h"
#include "kgen/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  kgen::registerKgenPasses();
  mlir::DialectRegistry registry;
  registry.insert<kgen::ir::KgenDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kgen optimizer driver\n", registry));
}
