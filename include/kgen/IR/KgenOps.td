//===- KgenOps.td - kgen operations ------------------------*- tablegen -*-===//

#ifndef KGEN_IR_KGENOPS_TD
#define KGEN_IR_KGENOPS_TD

include "kgen/IR/KgenDialect.td"
include "kgen/IR/KgenAttrs.td"
include "mlir/IR/SymbolInterfaces.td"

def Kgen_GemmOp : Kgen_Op<"gemm", [Symbol]> {
  let summary = "Declares a GEMM kernel: C = alpha * op(A) * op(B) + beta * C";
  let description = [{
    One GEMM problem (kgen::GemmProblem) to generate a kernel for, named by a
    symbol. `op(A)` is M x K and `op(B)` is K x N; accumulation is fp32.

    Attributes:
    - `m`, `n`, `k`: the problem size (the baked value of each static
      dimension; for a run-time dimension, the size the model tunes for).
    - `ab`, `c`: element types of A and B (`bf16` or `f16`) and of C
      (`bf16`, `f16` or `f32`).
    - `layout`: `"nn"`, `"nt"`, `"tn"` or `"tt"`; the first letter says
      whether A is stored transposed (K x M), the second B (N x K). `"nt"` is
      a linear layer, y = x * W^T.
    - `static_dims` (optional, default `["n", "k"]`): the dimensions baked
      into the kernel as compile-time constants; the others are kernel
      arguments. M defaults to run time since the batch changes every step.
    - `align` (optional, default `[8, 8, 8]`): alignment in elements (1, 2, 4
      or 8) promised for A, B and C: pointers, leading dimensions and
      contiguous extents.
    - `target` (optional): `gfx90a`, `gfx942`, `sm_80` or `sm_90a`.
    - `config` (optional): a `#kgen.gemm_config`; `kgen-select-config` fills
      it in, `kgen-expand-variants` makes one op per candidate.
    - The fused epilogue, C = act(alpha * acc + beta * C + bias) + residual
      (templates/gemm/epilogue.h), all optional: `bias` (`"m"`: one value a
      row, `"n"`: one a column, C's dtype), `activation` (`"relu"`,
      `"gelu_tanh"`, `"gelu_erf"` or `"silu"`), `residual` (a unit
      attribute: an M x N matrix of C's dtype added last).
    - `batch` (optional, default 1): strided batches, the grid's z
      dimension; like M a run-time value (the kernel does not bake it).
    - `tf32` (a unit attribute): f32 inputs through TF32 tensor cores
      (inputs rounded to a 10-bit mantissa); required with `ab = f32`,
      NVIDIA targets only.

    The verifier checks the problem with `kgen::checkProblem`, and, when a
    target is set, with `kgen::checkProblemOnTarget` and the config with
    `kgen::checkConfig`.

    Example:

    ```mlir
    kgen.gemm @llama_qkv {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16,
                          layout = "nt", target = "sm_90a",
                          config = #kgen.gemm_config<block = [128, 128, 32],
                                     warps = [2, 2], stages = 3, smem = padded, pad = 8>}
    kgen.gemm @mlp_up {m = 532, n = 14336, k = 4096, ab = bf16, c = bf16,
                       layout = "nt", bias = "n", activation = "silu"}
    ```
  }];

  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$m, I64Attr:$n, I64Attr:$k,
    TypeAttr:$ab, TypeAttr:$c,
    StrAttr:$layout,
    OptionalAttr<StrArrayAttr>:$static_dims,
    OptionalAttr<I64ArrayAttr>:$align,
    OptionalAttr<StrAttr>:$target,
    OptionalAttr<Kgen_GemmConfigAttr>:$config,
    OptionalAttr<StrAttr>:$bias,
    OptionalAttr<StrAttr>:$activation,
    UnitAttr:$residual,
    OptionalAttr<I64Attr>:$batch,
    UnitAttr:$tf32
  );

  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Kgen_AttentionOp : Kgen_Op<"attention", [Symbol]> {
  let summary = "Declares a flash-attention forward kernel";
  let description = [{
    O = softmax(scale * Q K^T + bias) V for one kgen::AttentionProblem,
    named by a symbol. Head dims are baked into the kernel; batch, heads and
    sequence lengths are run-time values (the attributes are the sizes the
    model tunes for).

    Attributes: `batch`, `heads_q`, `heads_kv` (GQA/MQA: heads_q a multiple
    of heads_kv), `seqlen_q`, `seqlen_k`, `head_dim_qk`, `head_dim_v` (32,
    64, 96, 128, 192 or 256), `dtype` (Q, K and V: `bf16` or `f16`, or fp8
    `f8E4M3FN` / `f8E5M2` on sm_90a's wgmma loop with head dims 128 or 256
    and a V head dim of 128), optional `o_dtype` (O and the bias: `dtype`,
    `bf16` for fp8 inputs; kgen::attentionOutputDType, the only value
    taken), optional `layout` ("bshd" or "bhsd"), unit attributes `causal`
    (bottom-right aligned), `varlen`, `alibi`, `bias` and `lse`, optional
    `window = [left, right]` (-1: unbounded side), `target` and `config` (a
    `#kgen.attention_config`). The verifier runs kgen::checkProblem and,
    with a target, kgen::checkProblemOnTarget and kgen::checkConfig.

    Example:

    ```mlir
    kgen.attention @prefill {batch = 4, heads_q = 32, heads_kv = 8,
        seqlen_q = 4096, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128,
        dtype = bf16, causal, lse, target = "sm_90a",
        config = #kgen.attention_config<block = [128, 64], warps = 8,
                                        stages = 2, preload_v = 0, splits = 1>}
    kgen.attention @prefill_fp8 {batch = 4, heads_q = 32, heads_kv = 8,
        seqlen_q = 4096, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128,
        dtype = f8E4M3FN, o_dtype = bf16, causal, target = "sm_90a"}
    ```
  }];

  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$batch, I64Attr:$heads_q, I64Attr:$heads_kv,
    I64Attr:$seqlen_q, I64Attr:$seqlen_k,
    I64Attr:$head_dim_qk, I64Attr:$head_dim_v,
    TypeAttr:$dtype,
    OptionalAttr<TypeAttr>:$o_dtype,
    OptionalAttr<StrAttr>:$layout,
    UnitAttr:$causal,
    OptionalAttr<I64ArrayAttr>:$window,
    UnitAttr:$varlen, UnitAttr:$alibi, UnitAttr:$bias, UnitAttr:$lse,
    OptionalAttr<StrAttr>:$target,
    OptionalAttr<Kgen_AttentionConfigAttr>:$config
  );

  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def Kgen_MlstmOp : Kgen_Op<"mlstm", [Symbol]> {
  let summary = "Declares an mLSTM (xLSTM) forward";
  let description = [{
    One mLSTM problem (kgen::MlstmProblem) to generate kernels for, named by
    a symbol: q, k (B, NH, S, DQK), v (B, NH, S, DV), gate pre-activations
    i, f (B, NH, S) of one `dtype`; h (B, NH, S, DV) in that dtype; gate
    math and states (C, n, m) in fp32.

    Attributes:
    - `dqk`, `dv`: the head dims, baked (64 to 512, multiples of 16).
    - `dtype`: `bf16`, `f16` or `f32`.
    - `b`, `nh`, `s` (optional, default 1): run-time extents; the values are
      hints for the config choice.
    - `initial_state`, `final_state` (unit): initial states given, final
      states returned (they may alias: updated in place).
    - `eps` (optional, default 1e-6): added to the normalizer.
    - `target` (optional): `gfx90a`, `gfx942`, `sm_80` or `sm_90a`.
    - `config` (optional): a `#kgen.mlstm_config`.

    The verifier checks the problem with `kgen::checkProblem` and, when a
    target and a config are set, the config with `kgen::checkConfig`.
    `--kgen-to-hip` prints the source of every kernel of the variant.

    Example:

    ```mlir
    kgen.mlstm @xlstm7b {dqk = 256, dv = 512, dtype = bf16, b = 8, nh = 8,
                         s = 8192, target = "sm_90a",
                         config = #kgen.mlstm_config<variant = fused,
                                    chunk = 64, block_dv = 32, warps = 4>}
    ```
  }];

  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$dqk, I64Attr:$dv,
    TypeAttr:$dtype,
    OptionalAttr<I64Attr>:$b, OptionalAttr<I64Attr>:$nh,
    OptionalAttr<I64Attr>:$s,
    UnitAttr:$initial_state, UnitAttr:$final_state,
    OptionalAttr<F32Attr>:$eps,
    OptionalAttr<StrAttr>:$target,
    OptionalAttr<Kgen_MlstmConfigAttr>:$config
  );

  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The problem the op declares; fails, with an error at the op, on a
    /// dtype kgen does not know. Does not run kgen::checkProblem.
    ::mlir::FailureOr<::kgen::MlstmProblem> getProblem();
    /// The op's target (none without `target`); fails on an unknown name.
    ::mlir::FailureOr<std::optional<::kgen::Target>> getKgenTarget();
  }];
}

#endif // KGEN_IR_KGENOPS_TD
