// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip %s | FileCheck %s
// RUN: kgen-translate --kgen-to-hip --kgen-inline-templates %s | FileCheck %s --check-prefix=INLINE
// RUN: kgen-opt %s | FileCheck %s --check-prefix=ROUND

// The gemv loop for a decode shape: each lane streams its runs of B and A
// through its own slots of a cp.async ring of 4 k-chunks (3 in flight a
// warp), 8 blocks sharing each tile's k-chunks. Ring: 4 slots x (2 * 2 B
// runs + 16 / 8 A runs) x 128 threads x 16 B, then split-K's 16-byte flag.
// CHECK:      // config: gemv loop, block 16 rows of A x 128 columns of B, 4 warps of 2 row tiles, a cp.async ring of 4 k-chunks of 32 a warp, split-K 8
// CHECK:      // instructions: mma.sync m16n8k16 on C^T = B^T A^T, cp.async of 16 B into a per-lane shared-memory ring (.cg for B, .ca for A)
// CHECK:      // launch: grid (ceil(N/128), ceil(M/16), batch), 128 threads, 49168 B dynamic shared memory
// CHECK:      #include "kgen/gemm/gemv.h"
// CHECK:      static constexpr int kBlockM = 16, kBlockN = 128; // rows of A, columns of B
// CHECK:      static constexpr int kWarps = 4, kRowTiles = 2; // 16 columns a row tile
// CHECK:      static constexpr int kStages = 4; // ring slots of k-chunks of 32, stages - 1 in flight a warp
// CHECK:      static constexpr int kSmemBytes = 49168;
// CHECK:      static constexpr int kSplitK = 8;
// CHECK:      kgen_gemm_bf16_nt_mdyn_n4096_k4096_gemv_b16x128_w4_s4_v888_sk8_biasn(const kgen::gemm::Params p) {
// CHECK:      kgen::gemm::runGemv<Config>(p);
// ROUND:      config = #kgen.gemm_config<loop = gemv, block = [16, 128, 32], warps = [1, 4], stages = 4, smem = padded, split_k = 8>
kgen.gemm @decode {m = 16, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", bias = "n", target = "sm_90a", config = #kgen.gemm_config<loop = gemv, block = [16, 128, 32], warps = [1, 4], stages = 4, smem = padded, pad = 0, split_k = 8>}

// B stored K x N: 64 columns a lane group, k rows paired by byte permutes.
// CHECK:      kgen_gemm_f16_nn_mdyn_n8192_k8192_gemv_b32x128_w2_s1_v888
kgen.gemm @decode_nn {m = 32, n = 8192, k = 8192, ab = f16, c = f16, layout = "nn", target = "sm_80", config = #kgen.gemm_config<loop = gemv, block = [32, 128, 32], warps = [1, 2], stages = 1, smem = padded, pad = 0>}

// The template: the ring's cp.async (.cg; .ca for A), the permutations,
// mma.sync, the wait for the oldest chunk, split-K through gemm.h's fix-up.
// INLINE:     cp.async.cg.shared.global
// INLINE:     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// INLINE:     sm80::cpAsync<16, kL1>(sm80::smemAddress(dst), inside ? p : base, inside);
// INLINE:     return kBKMajor ? 16 * r + 2 * g : 64 * (r / 4) + 8 * g + 2 * (r % 4);
// INLINE:     fa[0] = lowHalves(rows[0].w[i], rows[1].w[i]);
// INLINE:     sm80::mma16816<T>(acc[r][j], fa, fb);
// INLINE:     sm80::cpAsyncWait<kStages - 1>();
// INLINE:     if (!splitKFixup<Config>(
