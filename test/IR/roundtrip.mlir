// REQUIRES: mlir
// RUN: kgen-opt %s | kgen-opt | FileCheck %s
// RUN: kgen-opt -mlir-print-op-generic %s | kgen-opt | FileCheck %s

// Attributes print in a fixed order (shape, types, layout, then where and
// how), whatever order they were written in.

// CHECK-LABEL: kgen.gemm @llama_qkv
// CHECK-SAME: {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a"}
kgen.gemm @llama_qkv {target = "sm_90a", layout = "nt", c = bf16, ab = bf16, k = 4096, n = 6144, m = 532}

// CHECK-LABEL: kgen.gemm @no_target
// CHECK-SAME: {m = 1, n = 1, k = 1, ab = f16, c = f32, layout = "tt"}
kgen.gemm @no_target {m = 1, n = 1, k = 1, ab = f16, c = f32, layout = "tt"}

// CHECK-LABEL: kgen.gemm @everything
// CHECK-SAME: {m = 127, n = 4099, k = 1023, ab = bf16, c = f32, layout = "tn",
// CHECK-SAME: static_dims = ["m", "n", "k"], align = [8, 4, 1], target = "gfx90a",
// CHECK-SAME: config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = padded, pad = 8>}
kgen.gemm @everything {m = 127, n = 4099, k = 1023, ab = bf16, c = f32, layout = "tn", static_dims = ["m", "n", "k"], align = [8, 4, 1], target = "gfx90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = padded, pad = 8>}

// All dimensions taken at run time.
// CHECK-LABEL: kgen.gemm @all_dynamic
// CHECK-SAME: static_dims = []
kgen.gemm @all_dynamic {m = 4096, n = 4096, k = 4096, ab = f16, c = f16, layout = "nn", static_dims = []}

// A swizzled config prints no pad; a pad of 0 is the default.
// CHECK-LABEL: kgen.gemm @swizzled
// CHECK-SAME: config = #kgen.gemm_config<block = [128, 128, 64], warps = [2, 2], stages = 4, smem = swizzled>}
kgen.gemm @swizzled {m = 2048, n = 2048, k = 2048, ab = bf16, c = bf16, layout = "nt", target = "sm_80", config = #kgen.gemm_config<block = [128, 128, 64], warps = [2, 2], stages = 4, smem = swizzled, pad = 0>}

// A config without a target is kept as written; it is checked once a target
// is known.
// CHECK-LABEL: kgen.gemm @config_no_target
// CHECK-SAME: config = #kgen.gemm_config<block = [128, 256, 32], warps = [2, 4], stages = 3, smem = padded>}
kgen.gemm @config_no_target {m = 532, n = 2048, k = 2048, ab = bf16, c = bf16, layout = "nt", config = #kgen.gemm_config<block = [128, 256, 32], warps = [2, 4], stages = 3, smem = padded>}

// Attributes kgen does not know are kept, after the known ones.
// CHECK-LABEL: kgen.gemm @extra
// CHECK-SAME: target = "gfx942", note = "from llama-3-8b"}
kgen.gemm @extra {note = "from llama-3-8b", m = 16, n = 1024, k = 1024, ab = bf16, c = bf16, layout = "nt", target = "gfx942"}

// The wgmma loop and clusters print first, and only when not the default.
// CHECK-LABEL: kgen.gemm @wgmma_pair
// CHECK-SAME: config = #kgen.gemm_config<loop = wgmma, cluster = 2, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}
kgen.gemm @wgmma_pair {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, cluster = 2, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}

// The fused epilogue and batches print after the problem's core.
// CHECK-LABEL: kgen.gemm @epilogue
// CHECK-SAME: {m = 532, n = 2048, k = 2048, ab = bf16, c = bf16, layout = "nt", bias = "n", activation = "gelu_erf", residual, batch = 8, target = "sm_90a"}
kgen.gemm @epilogue {batch = 8, residual, activation = "gelu_erf", bias = "n", target = "sm_90a", layout = "nt", c = bf16, ab = bf16, k = 2048, n = 2048, m = 532}
