//===- KgenDialect.td - The kgen dialect -------------------*- tablegen -*-===//
//
// One dialect for every kernel family kgen generates. Its ops are
// declarations, not computations: a symbol and the attributes of one problem
// (and, once chosen, its tile configuration). The passes and the HIP
// translation map them onto kgen's plain C++ problem structs and call the
// codegen core, so the textual IR, the CLI and the runtime share one path.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_IR_KGENDIALECT_TD
#define KGEN_IR_KGENDIALECT_TD

include "mlir/IR/OpBase.td"

def Kgen_Dialect : Dialect {
  let name = "kgen";
  let summary = "Problems and tile configurations of kgen's GPU kernels";
  let description = [{
    The `kgen` dialect describes the kernels kgen generates. Each op declares
    one problem under a symbol name: its shapes, element types, layouts and
    which dimensions are compile-time constants, optionally the target it is
    generated for and the tile configuration it is generated with. There is
    no SSA data flow; a module is a list of kernels to generate.

    ```mlir
    kgen.gemm @llama_qkv {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16,
                          layout = "nt", target = "sm_90a"}
    ```

    Verifiers check every op with the same functions the CLI and the runtime
    use (`kgen::checkProblem`, `kgen::checkConfig`), so an op that verifies
    can be generated.
  }];
  let cppNamespace = "::kgen::ir";
  let useDefaultAttributePrinterParser = 1;
  // Keep every attribute in the op's dictionary so that the verifier, not the
  // parser, reports an attribute of the wrong kind.
  let usePropertiesForAttributes = 0;
}

class Kgen_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kgen_Dialect, mnemonic, traits>;

#endif // KGEN_IR_KGENDIALECT_TD
