// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip %s | FileCheck %s
// RUN: kgen-opt %s | FileCheck %s --check-prefix=ROUND

// Swapped wgmma tiles: C^T = B^T A^T, so the tile height (136 rows of M) is
// wgmma's n and 532 rows take 4 tiles; with 64 columns of N a tile, 4 x 32 =
// 128 CTAs. The kernel file carries the m64n136k16 atom.
// CHECK:      // config: wgmma loop, block 136x64x64, 1 producer + 1 consumer warpgroups, 8 stages, 128-byte swizzled shared memory, swapped (C^T = B^T A^T: wgmma m along N, n = 136 along M)
// CHECK:      "wgmma.mma_async.sync.aligned.m64n136k16.f32.bf16.bf16 {%0,%1,
// CHECK:      static constexpr bool kSwapAB = true; // wgmma m along N, n along M
// CHECK:      kgen_gemm_bf16_nt_mdyn_n2048_k2048_wgmma_b136x64x64_wg1_s8_v888_swap(
// ROUND:      config = #kgen.gemm_config<loop = wgmma, swap_ab = 1, block = [136, 64, 64], warps = [1, 1], stages = 8, smem = swizzled>
kgen.gemm @proj {m = 532, n = 2048, k = 2048, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, swap_ab = 1, block = [136, 64, 64], warps = [1, 1], stages = 8, smem = swizzled>}
