// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics

// The diagnostics of kgen.attention come from the codegen core
// (kgen::checkProblem, kgen::checkConfig), attached to the op.

// expected-error@+1 {{attention: headsQ = 32 is not a multiple of headsKv = 5}}
kgen.attention @gqa {batch = 1, heads_q = 32, heads_kv = 5, seqlen_q = 128, seqlen_k = 128, head_dim_qk = 128, head_dim_v = 128, dtype = bf16}

// -----

// expected-error@+1 {{attention: headDimQk = 80 is not one of 32, 64, 96, 128, 192, 256}}
kgen.attention @dim {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 128, seqlen_k = 128, head_dim_qk = 80, head_dim_v = 128, dtype = bf16}

// -----

// expected-error@+1 {{attention: dtype f32 is not supported}}
kgen.attention @f32 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 128, seqlen_k = 128, head_dim_qk = 64, head_dim_v = 64, dtype = f32}

// -----

// expected-error@+1 {{attention: window has 3 values; expected [left, right]}}
kgen.attention @window {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 128, seqlen_k = 128, head_dim_qk = 64, head_dim_v = 64, dtype = bf16, window = [1, 2, 3]}

// -----

// expected-error@+1 {{config: rows per warp = blockM / warps = 64/4 is not a multiple of 32 (the MFMA 32x32x8 atom on gfx90a)}}
kgen.attention @mfma {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 128, seqlen_k = 128, head_dim_qk = 64, head_dim_v = 64, dtype = bf16, target = "gfx90a", config = #kgen.attention_config<block = [64, 64], warps = 4, stages = 2, preload_v = 0, splits = 1>}

// -----

// expected-error@+1 {{config: persistent = 1 does not take split-KV (splits = 4)}}
kgen.attention @persistentSplit {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16, target = "sm_90a", config = #kgen.attention_config<loop = wgmma, persistent = 1, block = [64, 64], warps = 4, stages = 2, preload_v = 0, splits = 4>}

// -----

// A valid op round-trips.
kgen.attention @ok {batch = 1, heads_q = 8, heads_kv = 1, seqlen_q = 1, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16, target = "sm_80", config = #kgen.attention_config<block = [16, 64], warps = 1, stages = 2, preload_v = 1, splits = 8>}
kgen.attention @packed {batch = 1, heads_q = 8, heads_kv = 1, seqlen_q = 1, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16, target = "sm_80", config = #kgen.attention_config<block = [16, 64], warps = 1, stages = 2, preload_v = 1, splits = 8, pack_gqa = 1>}
