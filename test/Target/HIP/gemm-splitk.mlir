// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip %s | FileCheck %s
// RUN: kgen-translate --kgen-to-hip --kgen-inline-templates %s | FileCheck %s --check-prefix=INLINE
// RUN: kgen-opt %s | FileCheck %s --check-prefix=ROUND

// Split-K for a decode shape: 4 blocks share each 16x64 tile's k-slices;
// the last to arrive adds the partial sums, then runs the epilogue.
// CHECK:      // launch: grid (ceil(N/64), ceil(M/16), batch), 64 threads
// CHECK:      static constexpr int kSplitK = 4; // blocks sharing a tile's k-slices
// CHECK:      kgen_gemm_bf16_nt_mdyn_n4096_k4096_b16x64x64_w1x2_s4_pad8_v888_sk4_biasn(const kgen::gemm::Params p) {
// ROUND:      config = #kgen.gemm_config<block = [16, 64, 64], warps = [1, 2], stages = 4, smem = padded, pad = 8, split_k = 4>
kgen.gemm @decode {m = 16, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", bias = "n", target = "sm_90a", config = #kgen.gemm_config<block = [16, 64, 64], warps = [1, 2], stages = 4, smem = padded, pad = 8, split_k = 4>}

// The fix-up in the template: publish, count arrivals, the last adds the
// partials in split order and resets its counter.
// The fix-up is the one stream-K uses too (kgen/gemm/fixup.h).
// INLINE:     KGEN_DEVICE bool fixupPartials(
// INLINE:     atomicAdd(p.counters + tile, 1u)
// INLINE:     p.counters[tile] = 0u;
// INLINE:     acc.set(e, (j == 0 ? 0.f : acc.get(e)) + partial[e * kThreads + t]);
// INLINE:     KGEN_DEVICE bool splitKFixup(
// INLINE:     return fixupPartials<kThreads>(p, mma, tile, split, kSplitK, slots,
// INLINE:     if (!splitKFixup<Config>(p, mma, tile, split,
