// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics --kgen-select-config | FileCheck %s

// The config is kgen::defaultConfig's choice for the op's target: the first
// of the candidates the model ranks (on sm_90a, the wgmma loop where the
// layout and alignment allow it).

// CHECK-LABEL: kgen.gemm @llama_qkv
// CHECK-SAME: target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}
kgen.gemm @llama_qkv {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a"}

// -----

// Small problems still get a config (the smallest tiles).
// CHECK-LABEL: kgen.gemm @tiny
// CHECK-SAME: target = "sm_80", config = #kgen.gemm_config<
kgen.gemm @tiny {m = 1, n = 1, k = 1, ab = f16, c = f32, layout = "tt", target = "sm_80"}

// -----

// CHECK-LABEL: kgen.gemm @decode
// CHECK-SAME: target = "gfx90a", config = #kgen.gemm_config<
kgen.gemm @decode {m = 1, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a"}

// -----

// An op with a config keeps it.
// CHECK-LABEL: kgen.gemm @chosen
// CHECK-SAME: config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = swizzled>}
kgen.gemm @chosen {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = swizzled>}

// -----

// Which config is best depends on the target: without one, kgen-verify-target
// must run first (see Target/HIP/pipeline.mlir).
// expected-error@+1 {{gemm: kgen-select-config needs a target; set `target` or run kgen-verify-target{target=<name>} first}}
kgen.gemm @untargeted {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt"}

// -----

// A layout the wgmma loop does not take (A stored K x M) gets the tiled loop
// on sm_90a.
// CHECK-LABEL: kgen.gemm @a_transposed
// CHECK-SAME: target = "sm_90a", config = #kgen.gemm_config<block =
kgen.gemm @a_transposed {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "tn", target = "sm_90a"}
