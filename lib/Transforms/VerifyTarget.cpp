//===- VerifyTarget.cpp - Set and check the target of kgen ops ------------===//

#include "kgen/Codegen/Limits.h"
#include "kgen/IR/Convert.h"
#include "kgen/Transforms/Passes.h"

namespace kgen {
#define GEN_PASS_DEF_VERIFYTARGETPASS
#include "kgen/Transforms/Passes.h.inc"
} // namespace kgen

using namespace mlir;
using namespace kgen;

namespace {

struct VerifyTargetPass : kgen::impl::VerifyTargetPassBase<VerifyTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<Target> wanted;
    if (!target.empty()) {
      wanted = parseTarget(target);
      if (!wanted) {
        getOperation().emitError()
            << "kgen-verify-target: " << ir::unknownTargetMessage(target);
        return signalPassFailure();
      }
    }
    // Report every op that is invalid, not just the first.
    bool ok = true;
    getOperation().walk(
        [&](ir::GemmOp op) { ok &= succeeded(verify(op, wanted)); });
    if (!ok)
      signalPassFailure();
  }

  LogicalResult verify(ir::GemmOp op, std::optional<Target> wanted) {
    FailureOr<std::optional<Target>> own = ir::getGemmTarget(op);
    FailureOr<GemmProblem> problem = ir::getGemmProblem(op);
    if (failed(own) || failed(problem))
      return failure();
    if (*own && wanted && **own != *wanted)
      return op.emitError() << "gemm: target '" << toString(**own)
                            << "' conflicts with kgen-verify-target's target '"
                            << toString(*wanted) << "'";
    if (!*own && !wanted)
      return op.emitError() << "gemm: no target; set `target` on the op or "
                               "run kgen-verify-target{target=<name>}";
    Target t = wanted ? *wanted : **own;
    if (std::optional<std::string> error = checkProblemOnTarget(*problem, t))
      return op.emitError(*error);
    if (std::optional<GemmConfig> config = ir::getGemmConfig(op))
      if (std::optional<std::string> error = checkConfig(*problem, *config, t))
        return op.emitError(*error);
    op.setTargetAttr(StringAttr::get(op.getContext(), toString(t)));
    return success();
  }
};

} // namespace
