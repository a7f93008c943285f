//===- kgen-translate.cpp - The kgen translation driver -------------------===//
//
// mlir-translate with --kgen-to-hip, e.g.
//   kgen-translate --kgen-to-hip x.mlir
//
//===----------------------------------------------------------------------===//

#include "kgen/Target/HIP/KgenToHip.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  kgen::registerToHipTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "kgen translation driver\n"));
}
