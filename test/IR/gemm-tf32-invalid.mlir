// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics

// f32 inputs run only through TF32, asked for with `tf32`; the flag needs
// f32 inputs and an NVIDIA target, and the tiled loop with padded rows.

// expected-error@+1 {{gemm: input dtype f32 needs tf32 = true}}
kgen.gemm @exact {m = 64, n = 256, k = 256, ab = f32, c = f32, layout = "nt"}

// -----

// expected-error@+1 {{gemm: tf32 = true needs input dtype f32, not bf16}}
kgen.gemm @bf16 {m = 64, n = 256, k = 256, ab = bf16, c = bf16, layout = "nt", tf32}

// -----

// expected-error@+1 {{gemm: tf32 on gfx90a: gfx90a has no TF32 (xf32) matrix instruction}}
kgen.gemm @amd {m = 64, n = 256, k = 256, ab = f32, c = f32, layout = "nt", tf32, target = "gfx90a"}

// -----

// expected-error@+1 {{gemm: tf32 on gfx942: gfx942's xf32 MFMA is not implemented in kgen}}
kgen.gemm @mi300 {m = 64, n = 256, k = 256, ab = f32, c = f32, layout = "nt", tf32, target = "gfx942"}

// -----

// expected-error@+1 {{config: tf32 runs on loop = tiled (mma.sync m16n8k8 .tf32); loop = wgmma takes bf16/f16 inputs}}
kgen.gemm @wgmma {m = 128, n = 256, k = 256, ab = f32, c = f32, layout = "nt", tf32, target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled, pad = 0>}

// -----

// expected-error@+1 {{config: smem = swizzled with tf32}}
kgen.gemm @swizzled {m = 128, n = 256, k = 256, ab = f32, c = f32, layout = "nt", tf32, target = "sm_80", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = swizzled, pad = 0>}
