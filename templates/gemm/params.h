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

/// Threads of a copy-kernel block, and the 16-byte destination chunks a
/// warp moves at a time (kRepackSegment / 32 a lane on NVIDIA, / 64 on
/// AMD), all their loads issued before the first is used. The host counts
/// kRepackWarps warps of 32 a block (AMD's waves of 64 make 4; the kernel's
/// stride loop covers every segment either way).
constexpr int kRepackThreads = 256;
constexpr int kRepackSegment = 128;
constexpr int kRepackWarps = kRepackThreads / 32;
/// The copy kernel's blocks a multiprocessor at most (the runtime's
/// maxBlocks for repackGrid): 127x4099x1023 nt takes 16 + 513 blocks, one
/// row a warp. H100 (84 registers a thread, 3 blocks resident), against
/// the previous kernel (a thread a chunk of any row, 3 blocks a
/// multiprocessor): ncu with warm L2 7.7-7.9 us against 8.3-8.9, and
/// bench/gemm.py untuned, two rounds: 127x4099x1023 nt 14.1-14.3 ->
/// 13.7-13.8 us, nn 15.6-15.7 -> 15.5; 300x4096x1023 nt 18.5-18.6 ->
/// 17.0-18.2, nn 18.3-18.5 -> 16.0-16.2; 1000x1000x1001 nt 13.0-13.1 ->
/// 12.4-12.5, nn 16.0-16.3 -> 15.6-15.7.
constexpr int kRepackBlocksPerUnit = 4;

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
/// the other (A's first; op[i].blocks each, one a kRepackWarps of the
/// operand's (row, segment) units, at most maxBlocks: the warps then
/// stride), z the batch. Returns the blocks along x: 0 when nothing is
/// copied (the launch can be skipped; grid[0] is 1 then).
inline long long repackGrid(RepackParams &rp, long long maxBlocks,
                            unsigned grid[3]) {
  long long total = 0, batch = 1;
  for (RepackOperand &o : rp.op) {
    o.blocks = 0;
    if (!o.src)
      continue;
    const long long segments =
        (o.dstLd / 8 + kRepackSegment - 1) / kRepackSegment;
    long long blocks = (o.dstRows * segments + kRepackWarps - 1) / kRepackWarps;
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
