//===- wgmma_sm90.h - Hopper atoms: TMA, mbarrier, wgmma, stmatrix -------===//
//
// The sm_90a instructions of the Hopper GEMM main loop, as inline PTX:
//
//   TMA      cp.async.bulk.tensor.2d/3d/4d global -> shared, completing on an
//            mbarrier with a byte count (the tensor map, built on the host
//            with cuTensorMapEncodeTiled, is a __grid_constant__ parameter),
//            and 3d shared -> global in bulk groups (the mLSTM kernel's h);
//   mbarrier init / arrive / arrive.expect_tx / try_wait.parity;
//   wgmma    mma_async m64nNk16 (fp8: k32), f32 accumulators in registers,
//            A and B read from shared memory through 64-bit matrix
//            descriptors (128-byte swizzle, the layout TMA writes with
//            SWIZZLE_128B), or A from registers (WgmmaRs): the templates
//            here, their atoms written into each kernel's file (below);
//            fence, commit and wait; fp8 A registers packed from fp32 by
//            cvt.rn.satfinite.{e4m3,e5m2}x2 (packFp8x4);
//   setmaxnreg, to move registers from the producer to the consumers.
//
// Descriptor layouts (PTX ISA "Shared Memory Matrix Layout", 16-byte units):
//   K-major, 128B swizzle: rows of 64 2-byte elements (128 B), 8-row groups
//     1024 B apart (SBO); a k16 step advances the start address by 32 B.
//   MN-major, 128B swizzle: rows of 64 M/N elements, one row per k; 8-k
//     groups 1024 B apart (SBO), 64-wide M/N blocks LBO apart; a k16 step
//     advances the start address by 2 groups (2048 B).
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"

namespace kgen::sm90 {

/// The opaque CUtensorMap (128 bytes, 64-byte aligned), passed by value.
struct alignas(64) TensorMap {
  unsigned long long words[16];
};

KGEN_DEVICE uint32_t smemAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier ---------------------------------------------------------------

KGEN_DEVICE void barrierInit(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
                   smemAddress(bar)),
               "r"(count));
}

/// Makes the initialized barriers visible to the async proxy (TMA).
KGEN_DEVICE void fenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

KGEN_DEVICE void barrierArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                   smemAddress(bar))
               : "memory");
}

/// Arrives and adds `bytes` to the transaction count the phase waits for.
KGEN_DEVICE void barrierArriveExpectTx(uint64_t *bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
          smemAddress(bar)),
      "r"(bytes)
      : "memory");
}

/// Waits until the phase of parity `phase` has completed.
KGEN_DEVICE void barrierWait(uint64_t *bar, uint32_t phase) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "WAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n"
               "}\n" ::"r"(smemAddress(bar)),
               "r"(phase)
               : "memory");
}

// ---- TMA --------------------------------------------------------------------

/// Loads the box at (c0 = inner coordinate, c1 = outer coordinate) of the
/// tensor map into shared memory; out-of-range elements arrive as zeros, and
/// the full box's bytes count toward the barrier's transaction.
KGEN_DEVICE void tmaLoad2d(void *dst, const TensorMap *map, uint64_t *bar,
                           int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
                   smemAddress(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smemAddress(bar)),
               "r"(c0), "r"(c1)
               : "memory");
}

/// As tmaLoad2d for a 3-d tensor map (c0 innermost): the mLSTM kernel
/// addresses q, k and v as (dim, token, head) so that a chunk's rows past
/// its head's sequence read as zeros.
KGEN_DEVICE void tmaLoad3d(void *dst, const TensorMap *map, uint64_t *bar,
                           int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
                   smemAddress(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smemAddress(bar)),
               "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

/// The reverse of tmaLoad3d: the box at `src` (written in the map's swizzle)
/// to global memory, in this thread's bulk group (bulkCommit). Elements
/// outside the tensor are not written (the mLSTM kernel's rows past a
/// head's sequence). The writers of `src` fence it for the async proxy
/// (fence.proxy.async) before the barrier that precedes this call.
KGEN_DEVICE void tmaStore3d(const TensorMap *map, const void *src, int c0,
                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group "
      "[%0, {%2, %3, %4}], [%1];\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(smemAddress(src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
/// Closes this thread's bulk group of TMA stores.
KGEN_DEVICE void bulkCommit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/// Waits until at most kPending of this thread's bulk groups still read
/// their shared memory (the source may then be rewritten).
template <int kPending> KGEN_DEVICE void bulkWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending)
               : "memory");
}

/// As tmaLoad2d for a 4-d tensor map (c0 innermost): the attention kernels
/// address Q, K and V as (dim, head, sequence, batch) through their strides.
KGEN_DEVICE void tmaLoad4d(void *dst, const TensorMap *map, uint64_t *bar,
                           int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(
                   smemAddress(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smemAddress(bar)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

/// As tmaLoad2d, multicast: the box lands at the same shared-memory offset in
/// every CTA of the cluster named in `ctaMask`, and completes bytes on the
/// barrier at the same offset in each.
KGEN_DEVICE void tmaLoad2dMulticast(void *dst, const TensorMap *map,
                                    uint64_t *bar, int c0, int c1,
                                    uint16_t ctaMask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], "
               "[%2], %5;\n" ::"r"(smemAddress(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smemAddress(bar)),
               "r"(c0), "r"(c1), "h"(ctaMask)
               : "memory");
}

// ---- clusters -----------------------------------------------------------------

KGEN_DEVICE uint32_t clusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

/// Every thread of every CTA in the cluster arrives, then waits: shared
/// memory and barriers of the others are then initialized (at the start)
/// or no longer touched by them (at the end). Not .aligned: the threads of
/// a warp may arrive from different branches (the producer's lane 0).
KGEN_DEVICE void clusterSync() {
  asm volatile("barrier.cluster.arrive.release;\n"
               "barrier.cluster.wait.acquire;\n" ::
                   : "memory");
}

/// Arrives on the barrier at the same offset in CTA `rank` of the cluster,
/// with mbarrier.arrive's default semantics (release at CTA scope), as
/// CUTLASS's ClusterBarrier::arrive(cta_id) does: the GEMM consumers use it
/// to give a stage back after wgmma.wait_group has completed their reads of
/// it, so nothing of theirs remains to order against the peer's refill.
/// `.release.cluster` made every such arrive a cluster-scope fence: on an
/// H200 it made pairs 2.3x slower than single CTAs at 128x128 tiles (530
/// vs 229 us at 4096^3), 1.4x at 128x256; without it they run at 230 and
/// 218 us (single CTAs 229 and 222).
KGEN_DEVICE void barrierArriveCluster(uint64_t *bar, uint32_t rank) {
  asm volatile("{\n"
               ".reg .b32 remote;\n"
               "mapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
               "}\n" ::"r"(smemAddress(bar)),
               "r"(rank)
               : "memory");
}

// ---- named barriers -----------------------------------------------------------

/// Waits at hardware barrier `id` (1..15; 0 is __syncthreads') until
/// kThreads threads, this warp's included, have arrived or synced there.
template <int kThreads> KGEN_DEVICE void namedBarrierSync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kThreads) : "memory");
}
/// Arrives at barrier `id` without waiting.
template <int kThreads> KGEN_DEVICE void namedBarrierArrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kThreads) : "memory");
}

// ---- registers ----------------------------------------------------------------

template <int kRegs> KGEN_DEVICE void setMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs> KGEN_DEVICE void setMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// ---- wgmma --------------------------------------------------------------------

/// A shared-memory matrix descriptor with 128-byte swizzle; offsets in bytes.
KGEN_DEVICE uint64_t matrixDescriptor(const void *smem, uint32_t lboBytes,
                                      uint32_t sboBytes) {
  uint64_t d = 0;
  d |= uint64_t((smemAddress(smem) & 0x3FFFF) >> 4);
  d |= uint64_t((lboBytes >> 4) & 0x3FFF) << 16;
  d |= uint64_t((sboBytes >> 4) & 0x3FFF) << 32;
  d |= uint64_t(1) << 62; // 128-byte swizzle
  return d;
}

/// The descriptor d of a matrix, moved by `bytes` (a multiple of 16): a
/// k-step's operand from its tile's start descriptor. One 32-bit add on the
/// address field, which cannot carry out of it (shared addresses are below
/// 256 KiB), where a new descriptor costs a mask, a shift and an or as well.
KGEN_DEVICE uint64_t descriptorAt(uint64_t d, int bytes) {
  const uint32_t lo = uint32_t(d) + uint32_t(bytes >> 4);
  return (d & 0xFFFFFFFF00000000ull) | lo;
}

/// Makes this thread's shared-memory writes (stores, stmatrix) visible to
/// the async proxy (wgmma, TMA stores) that reads them after the next
/// barrier or mbarrier arrival.
KGEN_DEVICE void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Stores four 8x8 matrices of 16-bit elements (stmatrix .x4): lane l gives
/// the address of row l % 8 of matrix l / 8 (16 contiguous bytes), and
/// register m holds this lane's pair of matrix m in the mma / wgmma
/// accumulator layout (row lane / 4, columns 2 (lane % 4) and the next).
KGEN_DEVICE void stmatrixX4(uint32_t addr, uint32_t r0, uint32_t r1,
                            uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, "
               "%4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

/// Orders register accesses to the accumulators before the wgmmas that use
/// them (wgmma.fence), and groups the issued wgmmas for waiting.
KGEN_DEVICE void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
KGEN_DEVICE void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/// Two fp32 values as two fp8 bytes, `lo` in the lower (cvt's pairs put
/// their first operand in the upper byte).
template <class T> KGEN_DEVICE uint32_t packFp8x2(float lo, float hi) {
  uint16_t r;
  if constexpr (IsSame<T, e4m3>::value)
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

/// Four fp32 values as four fp8 bytes, x0 in the lowest.
template <class T>
KGEN_DEVICE uint32_t packFp8x4(float x0, float x1, float x2, float x3) {
  return packFp8x2<T>(x0, x1) | packFp8x2<T>(x2, x3) << 16;
}

/// Waits until at most kPending committed groups are still running.
template <int kPending> KGEN_DEVICE void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
               : "memory");
}

/// Keeps the compiler from moving accumulator reads or writes across a
/// wgmma fence/wait (the instructions update them asynchronously).
template <int kN> KGEN_DEVICE void fenceAccumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

// The wgmma atoms. An atom names each of its kN / 2 accumulator registers
// in its asm statement, so every (type, kN) is its own spelled-out
// specialization: the emitter writes the ones a kernel uses into the
// kernel's own file, after this header (wgmmaAtom and wgmmaRsAtom in
// lib/Codegen/Emitter.cpp), from one generator for every width and dtype.

/// D(64 x kN, fp32) += A(64 x 16) * B(16 x kN), A and B in shared memory.
/// kTransB: B is N-major (MN-major descriptor) instead of K-major; kTransA
/// likewise for A (M-major: the mLSTM state update reads K^T from K's rows).
/// With scaleD == 0 the accumulators are overwritten (D = A * B).
template <class T, int kN, bool kTransB, bool kTransA = false> struct Wgmma;

/// D(64 x kN, fp32) += A(64 x 16) * B(16 x kN) with A in registers: four
/// 32-bit registers of two 16-bit values each, laid out as the m64nNk16
/// accumulator of a 64 x 16 tile (thread (warp w, lane l) holds rows
/// 16w + l/4 (+8), columns 2(l%4) (+1) (+8)), which is how attention feeds
/// its probabilities P to P V without a trip through shared memory. B is
/// read from shared memory as in Wgmma.
/// fp8 (m64nNk32): four fp8 values a register, B K-major only.
template <class T, int kN, bool kTransB> struct WgmmaRs;

} // namespace kgen::sm90
