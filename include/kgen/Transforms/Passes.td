//===- Passes.td - kgen passes -----------------------------*- tablegen -*-===//

#ifndef KGEN_TRANSFORMS_PASSES_TD
#define KGEN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyTargetPass : Pass<"kgen-verify-target", "::mlir::ModuleOp"> {
  let summary = "Set the target of every kgen op and check it is valid there";
  let description = [{
    With `target=<name>`, gives every op without a `target` that target and
    rejects an op that names another one; without the option, every op must
    name its own. Then checks each op's problem and config on its target
    (`kgen::checkProblemOnTarget`, `kgen::checkConfig`) and reports the limit
    broken at the op.

    ```
    kgen-opt --kgen-verify-target=target=sm_90a kernels.mlir
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Target to generate for: gfx90a, gfx942, sm_80 or sm_90a">
  ];
  let dependentDialects = ["::kgen::ir::KgenDialect"];
}

def SelectConfigPass : Pass<"kgen-select-config", "::mlir::ModuleOp"> {
  let summary = "Give every kgen op without a config the default config";
  let description = [{
    Fills in `config` on each op that has none with `kgen::defaultConfig`,
    the dispatcher's choice without measurements, for the op's `target`
    (run kgen-verify-target first to set one). Ops with a config are kept.
  }];
  let dependentDialects = ["::kgen::ir::KgenDialect"];
}

def ExpandVariantsPass : Pass<"kgen-expand-variants", "::mlir::ModuleOp"> {
  let summary = "Replace every kgen op without a config by one op per candidate";
  let description = [{
    Replaces each op without a `config` by the candidates
    `kgen::enumerateConfigs` gives for its `target`, best guess first: op
    `@name` becomes `@name_v0`, `@name_v1`, ... each with one config. This
    is the set of variants the tuner times. Ops with a config are kept.
  }];
  let options = [
    Option<"maxVariants", "max-variants", "unsigned", /*default=*/"0",
           "Keep at most this many variants per op (0: all candidates)">
  ];
  let dependentDialects = ["::kgen::ir::KgenDialect"];
}

#endif // KGEN_TRANSFORMS_PASSES_TD
