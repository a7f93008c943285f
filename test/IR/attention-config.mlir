// REQUIRES: mlir
// RUN: kgen-opt %s | kgen-opt | FileCheck %s

// #kgen.attention_config round-trips; pack_gqa is printed only when set.

// CHECK-LABEL: kgen.attention @packed
// CHECK-SAME:  #kgen.attention_config<block = [32, 64], warps = 2, stages = 3, preload_v = 0, splits = 32, pack_gqa = 1>
kgen.attention @packed {batch = 1, heads_q = 32, heads_kv = 8, seqlen_q = 1, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16, target = "sm_80", config = #kgen.attention_config<block = [32, 64], warps = 2, stages = 3, preload_v = 0, splits = 32, pack_gqa = 1>}

// CHECK-LABEL: kgen.attention @plain
// CHECK-SAME:  #kgen.attention_config<block = [64, 64], warps = 4, stages = 2, preload_v = 0, splits = 1>,
kgen.attention @plain {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 128, seqlen_k = 128, head_dim_qk = 64, head_dim_v = 64, dtype = bf16, target = "sm_80", config = #kgen.attention_config<block = [64, 64], warps = 4, stages = 2, preload_v = 0, splits = 1, pack_gqa = 0>}

// `loop = wgmma` is printed first, and only when it is not the default.
// CHECK-LABEL: kgen.attention @fa3
// CHECK-SAME:  #kgen.attention_config<loop = wgmma, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>
kgen.attention @fa3 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 4096, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16, target = "sm_90a", config = #kgen.attention_config<loop = wgmma, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>}

// `persistent = 1` follows the loop, printed only when set.
// CHECK-LABEL: kgen.attention @persistent
// CHECK-SAME:  #kgen.attention_config<loop = wgmma, persistent = 1, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>
kgen.attention @persistent {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 4096, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16, causal, target = "sm_90a", config = #kgen.attention_config<loop = wgmma, persistent = 1, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>}
