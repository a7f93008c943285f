// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics --kgen-verify-target=target=sm_90a | FileCheck %s
// RUN: not kgen-opt %s -split-input-file --kgen-verify-target=target=gfx90a 2>&1 | FileCheck %s --check-prefix=GFX90A
// RUN: not kgen-opt %s -split-input-file --kgen-verify-target 2>&1 | FileCheck %s --check-prefix=NO-TARGET
// RUN: not kgen-opt %s --kgen-verify-target=target=sm_75 2>&1 | FileCheck %s --check-prefix=BAD-OPTION

// BAD-OPTION: error: kgen-verify-target: unknown target 'sm_75'; expected gfx90a, gfx942, sm_80 or sm_90a

// An op without a target gets the pass's.
// CHECK-LABEL: kgen.gemm @untargeted
// CHECK-SAME: layout = "nt", target = "sm_90a"}
// NO-TARGET: error: gemm: no target; set `target` on the op or run kgen-verify-target{target=<name>}
// NO-TARGET-NEXT: kgen.gemm @untargeted
kgen.gemm @untargeted {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt"}

// -----

// An op that already names the target is kept.
// CHECK-LABEL: kgen.gemm @same_target
// CHECK-SAME: target = "sm_90a"}
kgen.gemm @same_target {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a"}

// -----

// 110592 B of shared memory: fine on sm_90a, too much for gfx90a's 64 KiB LDS.
// CHECK-LABEL: kgen.gemm @fits_sm90a
// CHECK-SAME: target = "sm_90a", config = #kgen.gemm_config<block = [128, 128, 64], warps = [2, 2], stages = 3, smem = padded, pad = 8>}
// GFX90A: error: config: shared memory 110592 B exceeds gfx90a's 65536 B per block; lower stages, blockK or the block tile
// GFX90A-NEXT: kgen.gemm @fits_sm90a
kgen.gemm @fits_sm90a {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", config = #kgen.gemm_config<block = [128, 128, 64], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// An op with another target is an error, not silently retargeted.
// expected-error@+1 {{gemm: target 'gfx90a' conflicts with kgen-verify-target's target 'sm_90a'}}
kgen.gemm @other_target {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a"}

// -----

// Without a target the verifier cannot check the config; the pass does.
// expected-error@+1 {{config: shared memory 294912 B exceeds sm_90a's 232448 B per block; lower stages, blockK or the block tile}}
kgen.gemm @too_big {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", config = #kgen.gemm_config<block = [256, 256, 64], warps = [4, 4], stages = 4, smem = padded, pad = 8>}

// -----

// A warp tile of 16 suits mma.sync on sm_90a but not MFMA on gfx90a.
// CHECK-LABEL: kgen.gemm @small_warp_tile
// CHECK-SAME: target = "sm_90a"
// GFX90A: error: config: warp tile M = blockM / warpsM = 32/2 is not a multiple of 32 (the MFMA 32x32x8 atom on gfx90a); raise blockM or lower warpsM
// GFX90A-NEXT: kgen.gemm @small_warp_tile
kgen.gemm @small_warp_tile {m = 32, n = 4096, k = 4096, ab = f16, c = f16, layout = "nn", config = #kgen.gemm_config<block = [32, 128, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}
