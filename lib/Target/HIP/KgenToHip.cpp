//===- KgenToHip.cpp - kgen ops to HIP source -----------------------------===//
//
// The translation prints what the codegen core emits and nothing else: the
// source a test inspects is the source the runtime compiles.
//
//===----------------------------------------------------------------------===//

#include "kgen/Target/HIP/KgenToHip.h"
#include "kgen/Codegen/Emitter.h"
#include "kgen/IR/Convert.h"
#include "kgen/Mlstm.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

namespace kgen {

LogicalResult translateToHip(Operation *op, llvm::raw_ostream &os,
                             bool inlineTemplates) {
  // Check every op before printing anything, so a failure prints no
  // partial output.
  SmallVector<KernelSource> kernels;
  bool ok = true;
  op->walk([&](ir::GemmOp gemm) {
    FailureOr<std::optional<Target>> target = ir::getGemmTarget(gemm);
    auto problem = ir::toProblem(gemm);
    if (failed(target) || failed(problem)) {
      ok = false;
      return;
    }
    if (!*target) {
      gemm.emitError() << "gemm: --kgen-to-hip needs a target; set `target` "
                          "or run kgen-opt "
                          "--kgen-verify-target=target=<name> first";
      ok = false;
      return;
    }
    std::optional<GemmConfig> config = problem->second;
    if (!config) {
      gemm.emitError() << "gemm: --kgen-to-hip needs a config; run kgen-opt "
                          "--kgen-select-config (or --kgen-expand-variants) "
                          "first";
      ok = false;
      return;
    }
    kernels.push_back(
        emitGemm(problem->first, *config, **target, inlineTemplates));
  });
  op->walk([&](ir::AttentionOp attn) {
    FailureOr<std::optional<Target>> target = ir::getAttentionTarget(attn);
    FailureOr<AttentionProblem> problem = ir::getAttentionProblem(attn);
    if (failed(target) || failed(problem)) {
      ok = false;
      return;
    }
    if (!*target) {
      attn.emitError() << "attention: --kgen-to-hip needs a target; set "
                          "`target`";
      ok = false;
      return;
    }
    // Without a config the dispatcher's heuristic choice is printed, as
    // the runtime would build it.
    std::optional<AttentionConfig> config = ir::getAttentionConfig(attn);
    kernels.push_back(emitAttention(
        *problem, config.value_or(defaultConfig(*problem, **target)), **target,
        inlineTemplates));
  });
  op->walk([&](ir::MlstmOp mlstm) {
    FailureOr<MlstmProblem> problem = mlstm.getProblem();
    FailureOr<std::optional<Target>> target = mlstm.getKgenTarget();
    if (failed(problem) || failed(target)) {
      ok = false;
      return;
    }
    if (!*target || !mlstm.getConfig()) {
      mlstm.emitError() << "mlstm: --kgen-to-hip needs a target and a "
                           "config; set `target` and `config` "
                           "(kgen mlstm candidates lists the configs)";
      ok = false;
      return;
    }
    MlstmConfig config = mlstm.getConfig()->getConfig();
    for (MlstmKernel k : mlstmKernels(config))
      kernels.push_back(
          emitMlstm(*problem, config, k, **target, inlineTemplates));
  });
  if (!ok)
    return failure();
  // One kernel prints exactly the core's source; several are separated by a
  // blank line.
  for (auto [i, kernel] : llvm::enumerate(kernels))
    os << (i ? "\n" : "") << kernel.source;
  return success();
}

void registerToHipTranslation() {
  static llvm::cl::opt<bool> inlineTemplates(
      "kgen-inline-templates",
      llvm::cl::desc("Paste the template headers into the generated source "
                     "(one self-contained file per kernel)"),
      llvm::cl::init(false));
  TranslateFromMLIRRegistration registration(
      "kgen-to-hip", "Print the HIP source of every kgen op",
      [](Operation *op, llvm::raw_ostream &os) {
        return translateToHip(op, os, inlineTemplates);
      },
      [](DialectRegistry &registry) { registry.insert<ir::KgenDialect>(); });
}

} // namespace kgen
