// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip %s | FileCheck %s
// RUN: kgen-translate --kgen-to-hip --kgen-inline-templates %s | FileCheck %s --check-prefix=INLINE
// RUN: kgen-opt %s | FileCheck %s --check-prefix=ROUND

// Issue 3's 127x4099x1023: rows of 1023 bf16 are 2046 bytes, so neither TMA
// nor cp.async 16 B can read A or B in place. With repack, a copy kernel in
// the same source pads them into the runtime's workspace (K 1023 -> 1024,
// zero tail) and the wgmma loop reads the copies through TMA: the main
// loop's K is 1024 and its vectors are 8 elements wide.
// CHECK:      // problem: bf16 inputs, bf16 output, fp32 accumulation, layout nt (A 'N', B 'T'), M run-time, N = 4099, K = 1023
// CHECK:      // repack: kgen_gemm_bf16_nt_mdyn_n4099_k1023_wgmma_b128x128x64_wg2_s4_v881_repack_copy first copies A and/or B {{.*}}, K 1023 -> 1024 (zero tail), lda = 1024, ldb = 1024; the main loop reads the copies
// CHECK:      #include "kgen/gemm/gemm_sm90.h"
// CHECK-NEXT: #include "kgen/gemm/repack.h"
// CHECK:      static constexpr int kK = 1024;
// CHECK:      kgen_gemm_bf16_nt_mdyn_n4099_k1023_wgmma_b128x128x64_wg2_s4_v881_repack(
// CHECK:      extern "C" __global__ void __launch_bounds__(256)
// CHECK-NEXT: kgen_gemm_bf16_nt_mdyn_n4099_k1023_wgmma_b128x128x64_wg2_s4_v881_repack_copy(const kgen::gemm::RepackParams p) {
// CHECK-NEXT:   kgen::gemm::repackOperands(p);
// ROUND:      config = #kgen.gemm_config<loop = wgmma, repack = 1, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled>
kgen.gemm @ragged {m = 127, n = 4099, k = 1023, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, repack = 1, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled>}

// nn on the tiled loop: B is K x N, so its copy has 1024 rows (the last
// zero) of N = 4099 rounded up to 4104; a 16-byte vector at the end of a
// row reads the copy's zero padding.
// CHECK:      // repack: kgen_gemm_bf16_nn_mdyn_n4099_k1023_b64x64x32_w2x2_s3_pad8_v881_repack_copy {{.*}} K 1023 -> 1024 (zero tail), lda = 1024, ldb = 4104;
// CHECK:      #include "kgen/gemm/gemm.h"
// CHECK-NEXT: #include "kgen/gemm/repack.h"
// CHECK:      static constexpr int kK = 1024;
// CHECK:      static constexpr int kVecA = 8, kVecB = 8, kVecC = 1;
// CHECK:      kgen_gemm_bf16_nn_mdyn_n4099_k1023_b64x64x32_w2x2_s3_pad8_v881_repack(const kgen::gemm::Params p) {
// CHECK:      kgen_gemm_bf16_nn_mdyn_n4099_k1023_b64x64x32_w2x2_s3_pad8_v881_repack_copy(const kgen::gemm::RepackParams p) {
// ROUND:      config = #kgen.gemm_config<repack = 1, block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>
kgen.gemm @ragged_nn {m = 127, n = 4099, k = 1023, ab = bf16, c = bf16, layout = "nn", target = "sm_90a", config = #kgen.gemm_config<repack = 1, block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// The copy kernel: a warp copies a segment of a row at a time, reading the
// aligned 16-byte blocks that cover it (its elements one by one at a
// batch's ends) and shifting them by the row's one byte offset; zeros past
// the source's extent and rows; every access through
// kgen/common/global_io.h.
// INLINE:     begin kgen/common/global_io.h
// INLINE:     KGEN_DEVICE Words4 loadGlobal16(const void *p) {
// INLINE:     begin kgen/gemm/repack.h
// INLINE:     KGEN_DEVICE void repackOperands(const RepackParams &p) {
// INLINE:     b0 = loadGlobal16(lo + 16 * c);
// INLINE:     b1 = loadGlobal16(lo + 16 * (c + 1));
// INLINE:     switch (off >> 2) {
// INLINE:     v = repackWindow<1>(w[u], sh);
// INLINE:     storeGlobal16(out + 8 * c, v);
