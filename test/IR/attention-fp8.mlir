// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// fp8 Q, K and V (f8E4M3FN, f8E5M2) run on sm_90a's wgmma loop with head
// dims 128 or 256 (V 128) and 128-key tiles, into a bf16 O (o_dtype states
// it); the rest is refused with the rule (kgen::checkProblem,
// checkProblemOnTarget, checkConfig).

// CHECK-LABEL: kgen.attention @e4m3
// CHECK-SAME:  #kgen.attention_config<loop = wgmma, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>
// CHECK-SAME:  dtype = f8E4M3FN
// CHECK-SAME:  o_dtype = bf16
kgen.attention @e4m3 {batch = 4, heads_q = 32, heads_kv = 8, seqlen_q = 4096, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FN, o_dtype = bf16, causal, target = "sm_90a", config = #kgen.attention_config<loop = wgmma, block = [128, 128], warps = 8, stages = 2, preload_v = 0, splits = 1>}
// Without o_dtype, config or target: the problem alone is checked.
// CHECK-LABEL: kgen.attention @e5m2
// CHECK-SAME:  dtype = f8E5M2
kgen.attention @e5m2 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 256, head_dim_v = 128, dtype = f8E5M2}
// bf16 inputs keep a bf16 O.
// CHECK-LABEL: kgen.attention @bf16
kgen.attention @bf16 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 64, head_dim_v = 64, dtype = bf16, o_dtype = bf16, target = "sm_80"}

// -----

// expected-error@+1 {{attention: o_dtype 'f16' does not match e4m3 inputs, whose O (and bias) is bf16 (fp8 is an input type only)}}
kgen.attention @oF16 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FN, o_dtype = f16}

// -----

// expected-error@+1 {{attention: o_dtype 'f8E4M3FN' does not match e4m3 inputs, whose O (and bias) is bf16}}
kgen.attention @oFp8 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FN, o_dtype = f8E4M3FN}

// -----

// expected-error@+1 {{attention: o_dtype 'bf16' does not match f16 inputs, whose O (and bias) is f16 (the inputs' type)}}
kgen.attention @mixed {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f16, o_dtype = bf16}

// -----

// expected-error@+1 {{attention: unknown dtype 'f8E4M3FNUZ'; expected bf16, f16, f8E4M3FN or f8E5M2}}
kgen.attention @fnuz {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FNUZ}

// -----

// expected-error@+1 {{attention: dtype e4m3 needs sm_90a (fp8 wgmma), not sm_80}}
kgen.attention @sm80 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FN, target = "sm_80"}

// -----

// expected-error@+1 {{attention: dtype e5m2 needs sm_90a (fp8 wgmma), not gfx942}}
kgen.attention @amd {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E5M2, target = "gfx942"}

// -----

// expected-error@+1 {{attention: dtype e4m3 needs headDimQk = 128 or 256}}
kgen.attention @d64 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 64, head_dim_v = 64, dtype = f8E4M3FN}

// -----

// expected-error@+1 {{attention: dtype e4m3 needs headDimV = 128}}
kgen.attention @dv256 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 256, head_dim_v = 256, dtype = f8E4M3FN}

// -----

// expected-error@+1 {{attention: dtype e4m3 runs on sm_90a's wgmma loop, which does not take varlen problems}}
kgen.attention @varlen {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FN, varlen}

// -----

// expected-error@+1 {{config: dtype e4m3 runs on loop = wgmma only (fp8 wgmma), not loop = tiled}}
kgen.attention @tiled {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E4M3FN, target = "sm_90a", config = #kgen.attention_config<block = [64, 64], warps = 4, stages = 2, preload_v = 0, splits = 1>}

// -----

// expected-error@+1 {{config: fp8 inputs take blockN = 128}}
kgen.attention @n64 {batch = 1, heads_q = 8, heads_kv = 8, seqlen_q = 1024, seqlen_k = 1024, head_dim_qk = 128, head_dim_v = 128, dtype = f8E5M2, target = "sm_90a", config = #kgen.attention_config<loop = wgmma, block = [128, 64], warps = 8, stages = 2, preload_v = 0, splits = 1>}
