// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics

// The diagnostics of kgen.mlstm: the codegen core's messages at the op.

// expected-error@+1 {{mlstm: dqk = 48 must be a multiple of 16 between 64 and 512}}
kgen.mlstm @bad_dqk {dqk = 48, dv = 64, dtype = bf16}

// -----

// expected-error@+1 {{mlstm: dtype 'i8' is not bf16, f16 or f32}}
kgen.mlstm @bad_dtype {dqk = 64, dv = 64, dtype = i8}

// -----

// expected-error@+1 {{config: chunk = 24 must be 16, 32, 64 or 128 for the fused variant}}
kgen.mlstm @bad_chunk {dqk = 64, dv = 64, dtype = bf16, target = "sm_90a", config = #kgen.mlstm_config<variant = fused, chunk = 24, block_dv = 64, warps = 4>}

// -----

// expected-error@+1 {{config: shared memory}}
kgen.mlstm @too_big {dqk = 512, dv = 512, dtype = bf16, target = "gfx90a", config = #kgen.mlstm_config<variant = fused, chunk = 128, block_dv = 512, warps = 4>}

// -----

// expected-error@+2 {{unknown mLSTM variant 'flash'; expected recurrent, fused, twophase or chunkpar}}
// expected-error@+1 {{failed to parse Kgen_MlstmConfigAttr parameter 'variant'}}
kgen.mlstm @bad_variant {dqk = 64, dv = 64, dtype = bf16, config = #kgen.mlstm_config<variant = flash, block_dv = 64, warps = 4>}
