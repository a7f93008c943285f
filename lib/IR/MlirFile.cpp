//===- MlirFile.cpp - Read kgen problems from .mlir files -----------------===//

#include "kgen/IR/MlirFile.h"
#include "kgen/IR/Convert.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace kgen {

namespace {

/// Parses `path` as a module of kgen ops and hands it to `visit`, which
/// returns false when an op does not convert (its diagnostic is then among
/// the parse's). On failure `err` holds the diagnostics (or why the file
/// did not open) and false is returned.
bool visitKgenModule(const std::string &path, std::string &err,
                     llvm::function_ref<bool(mlir::ModuleOp)> visit) {
  mlir::DialectRegistry registry;
  registry.insert<ir::KgenDialect>();
  // The CLI reads one small file; no thread pool.
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  // The op's own line is in the message; its generic form would be noise.
  ctx.printOpOnDiagnostic(false);

  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      mlir::openInputFile(path, &openError);
  if (!buffer) {
    err = openError;
    return false;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, os);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr,
                                            mlir::ParserConfig(&ctx));
  const bool ok = module && visit(*module);
  if (!ok)
    err = llvm::StringRef(diagnostics).rtrim().str();
  return ok;
}

} // namespace

bool readGemmsFromMlirFile(const std::string &path, std::vector<MlirGemm> &out,
                           std::string &err) {
  return visitKgenModule(path, err, [&](mlir::ModuleOp module) {
    return !module
                ->walk([&](ir::GemmOp op) {
                  auto problem = ir::toProblem(op);
                  auto target = ir::getGemmTarget(op);
                  if (failed(problem) || failed(target))
                    return mlir::WalkResult::interrupt();
                  out.push_back({op.getSymName().str(), problem->first,
                                 problem->second, *target});
                  return mlir::WalkResult::advance();
                })
                .wasInterrupted();
  });
}

bool readFamiliesFromMlirFile(const std::string &path,
                              std::vector<MlirAttention> &attention,
                              std::vector<MlirMlstm> &mlstm, std::string &err) {
  return visitKgenModule(path, err, [&](mlir::ModuleOp module) {
    return !module
                ->walk([&](mlir::Operation *op) {
                  if (auto a = mlir::dyn_cast<ir::AttentionOp>(op)) {
                    auto problem = ir::getAttentionProblem(a);
                    auto target = ir::getAttentionTarget(a);
                    if (failed(problem) || failed(target))
                      return mlir::WalkResult::interrupt();
                    attention.push_back(
                        {a.getSymName().str(), *problem, *target});
                  } else if (auto m = mlir::dyn_cast<ir::MlstmOp>(op)) {
                    auto problem = m.getProblem();
                    auto target = m.getKgenTarget();
                    if (failed(problem) || failed(target))
                      return mlir::WalkResult::interrupt();
                    mlstm.push_back({m.getSymName().str(), *problem, *target});
                  }
                  return mlir::WalkResult::advance();
                })
                .wasInterrupted();
  });
}

bool parseGemmFromMlirFile(const std::string &path, GemmProblem &problem,
                           std::optional<GemmConfig> &config, std::string &err,
                           std::optional<Target> *target) {
  std::vector<MlirGemm> gemms;
  if (!readGemmsFromMlirFile(path, gemms, err))
    return false;
  if (gemms.size() != 1) {
    err = path + ": holds " + std::to_string(gemms.size()) +
          " kgen.gemm ops; expected exactly one";
    return false;
  }
  problem = gemms.front().problem;
  config = gemms.front().config;
  if (target)
    *target = gemms.front().target;
  return true;
}

} // namespace kgen
