// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip %s | FileCheck %s
// RUN: kgen-translate --kgen-to-hip --kgen-inline-templates %s | FileCheck %s --check-prefix=INLINE
// RUN: kgen-opt %s | FileCheck %s --check-prefix=ROUND

// Split-K in lockstep on the same loop, for the long-K LLM shape: 5 x 8
// tiles of 128x256, 3 units each (120 CTAs), unit (tile, part) taking
// k-slices part, part + 3, ... so that the CTAs load the same slices at
// the same time.
// CHECK:      // config: wgmma loop, block 128x256x64, 1 producer + 2 consumer warpgroups, 4 stages, 128-byte swizzled shared memory, split-K 3 in lockstep
// CHECK:      // launch: persistent grid (min(tiles x 3, multiprocessors)), 384 threads, 214096 B dynamic shared memory; A and B through tensor maps
// CHECK-NEXT: // split-K in lockstep: unit (tile, part) takes k-slices part, part + 3, ...; units go out part-major and are added up through the workspace (kgen/gemm/fixup.h)
// CHECK:      static constexpr bool kStreamK = false; // CTAs share out the k-iterations
// CHECK-NEXT: static constexpr int kSplitK = 3; // units a tile, k-slices interleaved
// CHECK:      kgen_gemm_bf16_nt_mdyn_n2048_k16384_wgmma_b128x256x64_wg2_s4_v888_sk3(
// ROUND:      config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled, split_k = 3>
kgen.gemm @down {m = 532, n = 2048, k = 16384, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled, pad = 0, split_k = 3>}

// Stream-K on sm_90a's wgmma loop for a mid-size LLM shape: 5 x 16 tiles of
// 128x128 leave most of 132 SMs idle, so the persistent CTAs share out the
// 80 x 32 k-iterations in equal runs; tiles split between CTAs are added up
// through the workspace before the epilogue.
// CHECK:      // config: wgmma loop, block 128x128x64, 1 producer + 2 consumer warpgroups, 4 stages, 128-byte swizzled shared memory, stream-K
// CHECK:      // launch: persistent grid (min(tiles x k-slices, multiprocessors)), 384 threads, 148560 B dynamic shared memory; A and B through tensor maps
// CHECK-NEXT: // stream-K: each CTA takes an equal run of the tiles x k-slices iterations; tiles split between CTAs are added up through the workspace (kgen/gemm/fixup.h)
// CHECK:      #include "kgen/gemm/gemm_sm90.h"
// CHECK:      static constexpr int kCluster = 1; // CTAs sharing A or B by multicast
// CHECK-NEXT: static constexpr bool kStreamK = true; // CTAs share out the k-iterations
// CHECK:      kgen_gemm_bf16_nt_mdyn_n2048_k2048_wgmma_b128x128x64_wg2_s4_v888_streamk_biasn(
// ROUND:      config = #kgen.gemm_config<loop = wgmma, stream_k = 1, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled>
kgen.gemm @qkv {m = 532, n = 2048, k = 2048, ab = bf16, c = bf16, layout = "nt", bias = "n", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, stream_k = 1, block = [128, 128, 64], warps = [2, 1], stages = 4, smem = swizzled>}

// The schedule (kgen/gemm/schedule.h): equal runs, the owner of an
// iteration, a CTA's first or last partial slot.
// INLINE:     begin kgen/gemm/fixup.h
// INLINE:     KGEN_DEVICE bool fixupPartials(
// INLINE:     atomicAdd(p.counters + tile, 1u)
// INLINE:     p.counters[tile] = 0u;
// INLINE:     acc.set(e, (j == 0 ? 0.f : acc.get(e)) + partial[e * kThreads + t]);
// INLINE:     begin kgen/gemm/schedule.h
// INLINE:     return c >= ctas ? total : (long long)c * total / ctas;
// INLINE:     return int(((i + 1) * ctas - 1) / total);
// INLINE:     return 2 * c + (begin(c) >= (long long)tile * slices ? 0 : 1);
// Split-K in lockstep: unit u is part u / tiles of tile u % tiles, its
// k-slices interleaved.
// INLINE:     s.kCount = (slices - part + parts - 1) / parts;
// INLINE:     s.slot = part * tiles + tile;
// INLINE:     s.kStride = parts;
// The loop: the consumers add up split tiles behind a named barrier of
// their own; the producer loads each segment's k-slices.
// INLINE:     begin kgen/gemm/gemm_sm90.h
// INLINE:     sm90::namedBarrierSync<S::kConsumerThreads>(1);
// INLINE:     while (work.next(seg)) {
// INLINE:     last = fixup<S>(p, acc, work, seg, flag);
// INLINE:     while (work.next(seg)) {
// INLINE:     const int k0 = (seg.kBegin + kt * seg.kStride) * S::kBlockK;
