// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip -split-input-file %s | FileCheck %s

// Bounds checks exist only where a dimension can fail to divide the tile:
// a baked dimension that divides it has none, a ragged or run-time one has.

// 127 x 4099 x 1023, every dimension baked, none divides the 64x64x32 tile.
// Odd extents also force scalar global accesses.
// CHECK-LABEL: for sm_80
// CHECK:      static constexpr int kM = 127;
// CHECK-NEXT: static constexpr int kN = 4099;
// CHECK-NEXT: static constexpr int kK = 1023;
// CHECK:      static constexpr int kVecA = 1, kVecB = 1, kVecC = 1;
// CHECK-NEXT: static constexpr bool kCheckM = true, kCheckN = true, kCheckK = true;
// CHECK:      kgen_gemm_bf16_nn_m127_n4099_k1023_b64x64x32_w2x2_s3_pad8_v111(
kgen.gemm @ragged {m = 127, n = 4099, k = 1023, ab = bf16, c = bf16, layout = "nn", static_dims = ["m", "n", "k"], target = "sm_80", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// Every dimension baked and divisible: no bounds check at all.
// CHECK-LABEL: for sm_90a
// CHECK:      static constexpr int kM = 4096;
// CHECK-NEXT: static constexpr int kN = 2048;
// CHECK-NEXT: static constexpr int kK = 1024;
// CHECK:      static constexpr bool kCheckM = false, kCheckN = false, kCheckK = false;
// CHECK:      kgen_gemm_bf16_tt_m4096_n2048_k1024_b128x128x64_w2x2_s3_swz_v888(
kgen.gemm @divisible {m = 4096, n = 2048, k = 1024, ab = bf16, c = bf16, layout = "tt", static_dims = ["m", "n", "k"], target = "sm_90a", config = #kgen.gemm_config<block = [128, 128, 64], warps = [2, 2], stages = 3, smem = swizzled>}

// -----

// N baked but ragged (N = 4099), K baked and divisible; the alignment
// promised for B and C is lowered to what N allows.
// CHECK-LABEL: for gfx942
// CHECK:      static constexpr int kM = 0;
// CHECK-NEXT: static constexpr int kN = 4099;
// CHECK-NEXT: static constexpr int kK = 4096;
// CHECK:      static constexpr int kVecA = 8, kVecB = 1, kVecC = 1;
// CHECK-NEXT: static constexpr bool kCheckM = true, kCheckN = true, kCheckK = false;
// CHECK:      kgen_gemm_f16_nn_mdyn_n4099_k4096_b64x64x32_w2x2_s2_pad8_v811(
kgen.gemm @ragged_n {m = 1, n = 4099, k = 4096, ab = f16, c = f16, layout = "nn", target = "gfx942", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = padded, pad = 8>}

// -----

// Every dimension at run time: kM = kN = kK = 0, every check on, and the
// vector widths the alignment promises.
// CHECK-LABEL: for sm_90a
// CHECK:      static constexpr int kM = 0;
// CHECK-NEXT: static constexpr int kN = 0;
// CHECK-NEXT: static constexpr int kK = 0;
// CHECK:      static constexpr int kVecA = 4, kVecB = 2, kVecC = 8;
// CHECK-NEXT: static constexpr bool kCheckM = true, kCheckN = true, kCheckK = true;
// CHECK:      kgen_gemm_f16_nt_mdyn_ndyn_kdyn_b64x64x32_w2x2_s2_pad8_v428(
kgen.gemm @dynamic {m = 4096, n = 4096, k = 4096, ab = f16, c = f16, layout = "nt", static_dims = [], align = [4, 2, 8], target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = padded, pad = 8>}
