//===- SelectConfig.cpp - Give kgen ops their default config --------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/IR/Convert.h"
#include "kgen/Transforms/Passes.h"

namespace kgen {
#define GEN_PASS_DEF_SELECTCONFIGPASS
#include "kgen/Transforms/Passes.h.inc"
} // namespace kgen

using namespace mlir;
using namespace kgen;

namespace {

struct SelectConfigPass : kgen::impl::SelectConfigPassBase<SelectConfigPass> {
  using Base::Base;

  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](ir::GemmOp op) {
      if (!op.getConfigAttr())
        ok &= succeeded(select(op));
    });
    if (!ok)
      signalPassFailure();
  }

  static LogicalResult select(ir::GemmOp op) {
    FailureOr<std::optional<Target>> target = ir::getGemmTarget(op);
    FailureOr<GemmProblem> problem = ir::getGemmProblem(op);
    if (failed(target) || failed(problem))
      return failure();
    if (!*target)
      return op.emitError()
             << "gemm: kgen-select-config needs a target; set `target` or "
                "run kgen-verify-target{target=<name>} first";
    GemmConfig config = defaultConfig(*problem, **target);
    // defaultConfig only falls back to an unchecked config when nothing is
    // valid; say so rather than write an op that does not verify.
    if (std::optional<std::string> error =
            checkConfig(*problem, config, **target))
      return op.emitError() << "gemm: no valid config on " << toString(**target)
                            << ": " << *error;
    op.setConfigAttr(ir::GemmConfigAttr::get(op.getContext(), config));
    return success();
  }
};

} // namespace
