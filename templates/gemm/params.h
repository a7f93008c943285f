//===- params.h - The GEMM kernels' one argument ----------------*- C++ -*-===//
//
// Every GEMM kernel takes one Params by value. The struct is plain C++ with
// no includes, so the same header serves the kernel templates (nvrtc,
// hiprtc, the host emulator) and the host runtime that fills it
// (kgen::Runtime::launch): the layout the host writes is the layout the
// kernel reads, on x86-64, NVPTX and AMDGCN alike (8-byte pointers and
// long longs, 4-byte ints and floats, natural alignment).
//
// Operand b of batch z starts at b + z * strideB (elements), likewise for
// A, C, the bias and the residual; a stride of 0 shares the operand across
// batches (a weight matrix, a bias). Leading dimensions are in elements and
// already resolved (never 0 here).
//
//===----------------------------------------------------------------------===//

#pragma once

namespace kgen::gemm {

struct Params {
  const void *a; ///< A and B: the problem's input dtype
  const void *b;
  void *c;              ///< C: the output dtype
  const void *bias;     ///< C's dtype; length M or N; null without a bias
  const void *residual; ///< C's dtype, M x N; null without a residual
  long long lda, ldb, ldc, ldr;
  long long strideA, strideB, strideC, strideBias, strideResidual;
  /// Split-K only (Config::kSplitK > 1): fp32 partial tiles and one arrival
  /// counter per output tile, zero between launches (the last block of a
  /// tile resets its counter). Owned by the runtime, one per stream.
  void *workspace;
  unsigned *counters;
  int m, n, k; ///< the run-time extents (baked ones are ignored)
  int batch;   ///< the grid's z extent
  float alpha, beta;
  /// fp8 inputs: each input's per-tensor scale (one fp32 in device memory,
  /// read once a CTA after the previous kernel; null reads as 1). C =
  /// alpha * (*scaleA) * (*scaleB) * A B + ...; other inputs ignore them.
  const float *scaleA, *scaleB;
};

//===----------------------------------------------------------------------===//
// Repack (GemmConfig::repack): the copy kernel's argument and the host's plan
//===----------------------------------------------------------------------===//

/// One operand the copy kernel (templates/gemm/repack.h) moves: `rows` x
/// `extent` elements at src (row stride ld, batch stride `stride`) into
/// dst, `dstRows` x `dstLd`, everything past the source's rows and extent
/// zero. src null: the operand is not copied.
struct RepackOperand {
  const void *src;
  void *dst;
  long long ld, stride, rows, extent;
  long long dstRows, dstLd, dstStride;
  int batch;  ///< batches to copy (1 when the source is shared, stride 0)
  int blocks; ///< the grid's x blocks this operand takes (repackGrid)
};

struct RepackParams {
  RepackOperand op[2]; ///< A, B
};

/// Threads of a copy-kernel block, and the 16-byte chunks each moves a step
/// of its loop, all their loads issued before the first is used. 3: 68
/// registers a thread on sm_90a (nvcc 13), so 3 blocks a multiprocessor
/// keep 2304 chunks (36 KiB of source) in flight; 4 took 116 registers (2
/// blocks: 32 KiB), 2 took 54 (4 blocks: 32 KiB).
constexpr int kRepackThreads = 256;
constexpr int kRepackUnroll = 3;
/// The copy kernel's blocks a multiprocessor (the runtime's maxBlocks for
/// repackGrid): the 3 that are resident at once, so that one wave strides
/// over the chunks with no tail of a second. H100, bench/gemm.py untuned,
/// two rounds against 16 (127x4099x1023: 706 blocks, 1.78 waves):
/// 127x4099x1023 nt 16.4-16.5 -> 15.9-16.0 us, nn 17.6 -> 17.2-17.3;
/// 300x4096x1023 nt 18.9-19.1 -> 18.5-18.8; 1000x1000x1001 unchanged
/// (13.1-13.2, 16.2-16.3). An unroll of 4 or 6 ran as fast or slower.
constexpr int kRepackBlocksPerUnit = 3;

/// Whether the main loop cannot read this 2-byte operand directly with
/// 16-byte vectors: a pointer, row stride, row length or batch stride off
/// 8 elements, or K not a multiple of 8 (the loop then runs K rounded up,
/// so both operands need their zero tail).
inline bool repackNeeded(const void *ptr, long long ld, long long extent,
                         long long stride, long long k) {
  return ((unsigned long long)ptr % 16) != 0 || ld % 8 != 0 ||
         extent % 8 != 0 || stride % 8 != 0 || k % 8 != 0;
}

/// The plan of a repack launch for 2-byte A and B: fills `rp` for the
/// operands flagged, rewrites p's a, b, lda, ldb, strideA, strideB and k
/// (rounded up to 8) to the padded copies in `workspace` (A at its start,
/// B 256-byte aligned after it), and returns the workspace bytes. With a
/// null workspace it only returns the bytes.
///
/// A 'N' (M x K) and B 'T' (N x K) keep their rows and pad K to kp; A 'T'
/// (K x M) and B 'N' (K x N) get kp rows (the last kp - K zero) of their
/// row length rounded up to 8. A shared operand (stride 0) is copied once.
inline long long planRepack(Params &p, RepackParams &rp, bool transA,
                            bool transB, bool repackA, bool repackB,
                            void *workspace) {
  const long long kp = (p.k + 7) / 8 * 8;
  const bool both = kp != p.k;
  const bool doA = repackA || both, doB = repackB || both;
  long long bytes = 0;
  rp = RepackParams{};
  for (int i = 0; i < 2; ++i) {
    const bool isA = i == 0;
    if (!(isA ? doA : doB))
      continue;
    const bool kRows = isA ? transA : !transB; // K is the row index
    const long long outer = isA ? p.m : p.n;
    RepackOperand &o = rp.op[i];
    o.src = isA ? p.a : p.b;
    o.ld = isA ? p.lda : p.ldb;
    o.stride = isA ? p.strideA : p.strideB;
    o.rows = kRows ? p.k : outer;
    o.extent = kRows ? outer : p.k;
    o.dstRows = kRows ? kp : outer;
    o.dstLd = kRows ? (outer + 7) / 8 * 8 : kp;
    o.batch = o.stride == 0 ? 1 : p.batch;
    o.dstStride = o.stride == 0 ? 0 : o.dstRows * o.dstLd;
    bytes = (bytes + 255) / 256 * 256;
    if (workspace) {
      o.dst = (char *)workspace + bytes;
      if (isA) {
        p.a = o.dst;
        p.lda = o.dstLd;
        p.strideA = o.dstStride;
      } else {
        p.b = o.dst;
        p.ldb = o.dstLd;
        p.strideB = o.dstStride;
      }
    }
    bytes += o.batch * o.dstRows * o.dstLd * 2;
  }
  if (workspace)
    p.k = int(kp);
  return bytes;
}

/// The copy kernel's grid: x holds the copied operands' blocks one after
/// the other (A's first; op[i].blocks each, at most maxBlocks, striding over
/// the operand's 16-byte chunks kRepackThreads * kRepackUnroll at a time),
/// z the batch. Returns the blocks along x: 0 when nothing is copied (the
/// launch can be skipped; grid[0] is 1 then).
inline long long repackGrid(RepackParams &rp, long long maxBlocks,
                            unsigned grid[3]) {
  long long total = 0, batch = 1;
  for (RepackOperand &o : rp.op) {
    o.blocks = 0;
    if (!o.src)
      continue;
    const long long chunks = o.dstRows * (o.dstLd / 8);
    const long long span = (long long)kRepackThreads * kRepackUnroll;
    long long blocks = (chunks + span - 1) / span;
    blocks = blocks < maxBlocks ? blocks : maxBlocks;
    o.blocks = int(blocks > 0 ? blocks : 1);
    total += o.blocks;
    batch = o.batch > batch ? o.batch : batch;
  }
  grid[0] = unsigned(total > 0 ? total : 1);
  grid[1] = 1;
  grid[2] = unsigned(batch);
  return total;
}

} // namespace kgen::gemm
