//===- KgenAttrs.td - kgen attributes ----------------------*- tablegen -*-===//

#ifndef KGEN_IR_KGENATTRS_TD
#define KGEN_IR_KGENATTRS_TD

include "kgen/IR/KgenDialect.td"
include "mlir/IR/AttrTypeBase.td"

/// kgen::SmemLayout, spelled `padded` or `swizzled`.
def Kgen_SmemLayoutParameter
    : AttrParameter<"::kgen::SmemLayout", "shared-memory row layout"> {
  let parser = "::kgen::ir::parseSmemLayout($_parser)";
  let printer = "::kgen::ir::printSmemLayout($_printer, $_self)";
}

/// kgen::GemmLoop, spelled `tiled` or `wgmma`; `tiled` when omitted.
def Kgen_GemmLoopParameter
    : AttrParameter<"::kgen::GemmLoop", "GEMM main loop"> {
  let parser = "::kgen::ir::parseGemmLoop($_parser)";
  let printer = "::kgen::ir::printGemmLoop($_printer, $_self)";
  let defaultValue = "::kgen::GemmLoop::Tiled";
}

/// kgen::AttentionLoop, spelled `tiled` or `wgmma`; `tiled` when omitted.
def Kgen_AttentionLoopParameter
    : AttrParameter<"::kgen::AttentionLoop", "attention main loop"> {
  let parser = "::kgen::ir::parseAttentionLoop($_parser)";
  let printer = "::kgen::ir::printAttentionLoop($_printer, $_self)";
  let defaultValue = "::kgen::AttentionLoop::Tiled";
}

def Kgen_GemmConfigAttr : AttrDef<Kgen_Dialect, "GemmConfig"> {
  let mnemonic = "gemm_config";
  let summary = "A GEMM tile configuration (kgen::GemmConfig)";
  let description = [{
    Everything that changes a generated GEMM kernel but not the function it
    computes: the block tile (`block = [blockM, blockN, blockK]`), the warp
    grid inside a block (`warps = [warpsM, warpsN]`; wavefronts of 64 on
    AMD), the depth of the shared-memory pipeline (`stages`), and how shared
    rows avoid bank conflicts: `smem = padded` with `pad` extra elements per
    row (0 when omitted), or `smem = swizzled` (XOR swizzle, no padding),
    and the main loop (`loop = tiled`, the default, or `loop = wgmma` on
    sm_90a: TMA loads by a producer warpgroup, wgmma in `warps = [C, 1]`
    consumer warpgroups, `block = [M, N, 64]`, `smem = swizzled`; with
    `cluster = 2`, CTA pairs share B, or A for tiles taller than wide,
    through TMA multicast), and split-K
    (`split_k = S`: S blocks share each tile's k-slices and the last adds
    their partial sums, on the wgmma loop as S units a tile of the
    persistent grid, k-slices interleaved; 1 when omitted; after `pad`, so
    `pad = 0, split_k = S` when there is no padding), stream-K
    (`stream_k = 1`, wgmma loop: the persistent CTAs share out the
    k-iterations of all tiles in equal runs; 0 when omitted). `loop = gemv`
    (NVIDIA, small M, A stored 'N') streams B through a per-lane cp.async
    ring in shared memory into mma.sync: `block = [rows of A (8..64), warpsN
    * 16 * row tiles, 32]`, `warps = [1, warpsN]`, `stages` = ring slots of
    k-chunks (stages - 1 in flight a warp), `split_k` as above; `smem` and
    `pad` do not apply. `repack = 1`
    (tiled and wgmma loops, bf16/f16; 0 when omitted) has the launch first
    copy A and/or B into padded rows with K zero-padded to a multiple of 8,
    for rows that are not 16-byte aligned (127x4099x1023). `swap_ab = 1`
    (wgmma loop; 0 when omitted) computes C^T = B^T A^T:
    wgmma's m64 slices run along N (`block = [M, 64 or 128 per consumer,
    64]`) and its n along M, so `M` (a multiple of 8 up to 256) can be fitted
    to the problem's M (532x2048x2048: `block = [136, 64, 64]`, 128 CTAs).

    Whether a configuration is valid depends on the problem and the target;
    `kgen.gemm` checks it with `kgen::checkConfig` once both are known.

    Example:

    ```mlir
    #kgen.gemm_config<block = [128, 128, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>
    #kgen.gemm_config<block = [64, 128, 64], warps = [2, 2], stages = 4, smem = swizzled>
    #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>
    #kgen.gemm_config<loop = wgmma, stream_k = 1, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled>
    #kgen.gemm_config<loop = wgmma, repack = 1, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled>
    #kgen.gemm_config<loop = wgmma, swap_ab = 1, block = [136, 64, 64], warps = [1, 1], stages = 8, smem = swizzled>
    ```
  }];
  let parameters = (ins
    "int":$blockM, "int":$blockN, "int":$blockK,
    "int":$warpsM, "int":$warpsN,
    "int":$stages,
    Kgen_SmemLayoutParameter:$smem,
    DefaultValuedParameter<"int", "0">:$pad,
    Kgen_GemmLoopParameter:$loop,
    DefaultValuedParameter<"int", "1">:$cluster,
    DefaultValuedParameter<"int", "1">:$splitK,
    DefaultValuedParameter<"int", "0">:$streamK,
    DefaultValuedParameter<"int", "0">:$repack,
    DefaultValuedParameter<"int", "0">:$swapAB
  );
  let assemblyFormat = [{
    `<` (`loop` `=` $loop^ `,` ` `)? (`cluster` `=` $cluster^ `,` ` `)? (`stream_k` `=` $streamK^ `,` ` `)? (`repack` `=` $repack^ `,` ` `)? (`swap_ab` `=` $swapAB^ `,` ` `)? `block` `=` `[` $blockM `,` $blockN `,` $blockK `]` `,`
    `warps` `=` `[` $warpsM `,` $warpsN `]` `,`
    `stages` `=` $stages `,`
    `smem` `=` $smem (`,` `pad` `=` $pad^)? (`,` `split_k` `=` $splitK^)? `>`
  }];
  let builders = [
    AttrBuilder<(ins "const ::kgen::GemmConfig &":$config), [{
      return $_get($_ctxt, config.blockM, config.blockN, config.blockK,
                   config.warpsM, config.warpsN, config.stages, config.smem,
                   config.smemPad, config.loop, config.cluster,
                   config.splitK, config.streamK ? 1 : 0,
                   config.repack ? 1 : 0, config.swapAB ? 1 : 0);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The plain C++ configuration this attribute spells.
    ::kgen::GemmConfig getConfig() const;
  }];
}

def Kgen_AttentionConfigAttr : AttrDef<Kgen_Dialect, "AttentionConfig"> {
  let mnemonic = "attention_config";
  let summary = "An attention tile configuration (kgen::AttentionConfig)";
  let description = [{
    The block tile (`block = [blockM, blockN]`: query rows and keys per
    step), the warps (wavefronts on AMD) that share the rows, the K/V
    shared-memory `stages`, whether V lands with K (`preload_v = 1`) or is
    waited for after the softmax (`0`), the split-KV count (`splits`, 1
    without flash decoding), and, optionally, `pack_gqa = 1`: one block
    serves every query head of a KV head. A leading `loop = wgmma` picks
    sm_90a's warp-specialized TMA + wgmma kernel (FlashAttention-3 style;
    `warps` then counts the consumer warps, blockM / 16); `loop = tiled`, the
    default, the FlashAttention-2 style kernel of every target. With the
    wgmma loop, `persistent = 1` (printed only when set) launches one block
    per multiprocessor, each looping over (row block, head, batch) work
    tiles. `kgen.attention` checks it against the problem and the target with
    `kgen::checkConfig`.

    Example:

    ```mlir
    #kgen.attention_config<block = [128, 64], warps = 8, stages = 2, preload_v = 0, splits = 1>
    #kgen.attention_config<loop = wgmma, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>
    #kgen.attention_config<loop = wgmma, persistent = 1, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>
    ```
  }];
  let parameters = (ins Kgen_AttentionLoopParameter:$loop, "int":$blockM, "int":$blockN, "int":$warps,
                        "int":$stages, "int":$preloadV, "int":$splits,
                        DefaultValuedParameter<"int", "0">:$packGqa,
                        DefaultValuedParameter<"int", "0">:$persistent);
  let assemblyFormat = [{
    `<` (`loop` `=` $loop^ `,` ` `)? (`persistent` `=` $persistent^ `,` ` `)? `block` `=` `[` $blockM `,` $blockN `]` `,` `warps` `=` $warps `,`
    `stages` `=` $stages `,` `preload_v` `=` $preloadV `,` `splits` `=` $splits
    (`,` `pack_gqa` `=` $packGqa^)? `>`
  }];
  let extraClassDeclaration = [{
    /// The plain C++ configuration this attribute spells.
    ::kgen::AttentionConfig getConfig() const;
  }];
}

/// kgen::MlstmVariant, spelled `recurrent`, `fused`, `twophase` or
/// `chunkpar`.
def Kgen_MlstmVariantParameter
    : AttrParameter<"::kgen::MlstmVariant", "mLSTM variant"> {
  let parser = "::kgen::ir::parseMlstmVariant($_parser)";
  let printer = "::kgen::ir::printMlstmVariant($_printer, $_self)";
}

def Kgen_MlstmConfigAttr : AttrDef<Kgen_Dialect, "MlstmConfig"> {
  let mnemonic = "mlstm_config";
  let summary = "An mLSTM kernel configuration (kgen::MlstmConfig)";
  let description = [{
    How an mLSTM forward is computed: the `variant` (`recurrent`: token by
    token; `fused`: one kernel walking the chunks; `twophase`: a state
    recurrence kernel, then every chunk's outputs in parallel; `chunkpar`:
    every chunk's own state contribution in parallel, an elementwise
    recurrence over the chunks, then the outputs as `twophase`), the `chunk`
    length of the chunkwise variants (omitted for `recurrent`), the DV
    columns per block (`block_dv`) the warps per block, and `wgmma` (the fused kernel on wgmma, sm_90a). `kgen.mlstm`
    checks it with `kgen::checkConfig` once the target is known.

    Example:

    ```mlir
    #kgen.mlstm_config<variant = fused, chunk = 64, block_dv = 64, warps = 4>
    #kgen.mlstm_config<variant = recurrent, block_dv = 32, warps = 8>
    ```
  }];
  let parameters = (ins
    Kgen_MlstmVariantParameter:$variant,
    DefaultValuedParameter<"int", "0">:$chunk,
    "int":$blockDV,
    "int":$warps,
    DefaultValuedParameter<"bool", "false">:$wgmma
  );
  let assemblyFormat = [{
    `<` `variant` `=` $variant `,` (`chunk` `=` $chunk^ `,`)?
    `block_dv` `=` $blockDV `,` `warps` `=` $warps (`,` `wgmma` `=` $wgmma^)? `>`
  }];
  let builders = [
    AttrBuilder<(ins "const ::kgen::MlstmConfig &":$config), [{
      return $_get($_ctxt, config.variant, config.chunk, config.blockDV,
                   config.warps, config.wgmma);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The plain C++ configuration this attribute spells.
    ::kgen::MlstmConfig getConfig() const;
  }];
}

#endif // KGEN_IR_KGENATTRS_TD
