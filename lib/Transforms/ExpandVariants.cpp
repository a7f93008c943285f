//===- ExpandVariants.cpp - One kgen op per candidate config --------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/IR/Convert.h"
#include "kgen/Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace kgen {
#define GEN_PASS_DEF_EXPANDVARIANTSPASS
#include "kgen/Transforms/Passes.h.inc"
} // namespace kgen

using namespace mlir;
using namespace kgen;

namespace {

struct ExpandVariantsPass
    : kgen::impl::ExpandVariantsPassBase<ExpandVariantsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<ir::GemmOp> ops;
    getOperation().walk([&](ir::GemmOp op) {
      if (!op.getConfigAttr())
        ops.push_back(op);
    });
    bool ok = true;
    for (ir::GemmOp op : ops)
      ok &= succeeded(expand(op));
    if (!ok)
      signalPassFailure();
  }

  LogicalResult expand(ir::GemmOp op) {
    FailureOr<std::optional<Target>> target = ir::getGemmTarget(op);
    FailureOr<GemmProblem> problem = ir::getGemmProblem(op);
    if (failed(target) || failed(problem))
      return failure();
    if (!*target)
      return op.emitError()
             << "gemm: kgen-expand-variants needs a target; set `target` or "
                "run kgen-verify-target{target=<name>} first";
    std::vector<GemmConfig> configs = enumerateConfigs(*problem, **target);
    if (configs.empty())
      return op.emitError()
             << "gemm: no valid config on " << toString(**target);
    if (maxVariants > 0 && configs.size() > maxVariants)
      configs.resize(maxVariants);

    Operation *symbolTable = SymbolTable::getNearestSymbolTable(op);
    SmallVector<std::string> names;
    for (size_t i = 0; i < configs.size(); ++i) {
      names.push_back((op.getSymName() + "_v" + Twine(i)).str());
      if (SymbolTable::lookupSymbolIn(symbolTable, names.back()))
        return op.emitError() << "gemm: cannot name variant @" << names.back()
                              << ": the symbol already exists";
    }
    OpBuilder builder(op);
    for (auto [name, config] : llvm::zip(names, configs)) {
      auto variant = cast<ir::GemmOp>(builder.clone(*op));
      variant.setSymName(name);
      variant.setConfigAttr(ir::GemmConfigAttr::get(op.getContext(), config));
    }
    op.erase();
    return success();
  }
};

} // namespace
