//===- repack.h - Copy misaligned GEMM operands into padded rows -*- C++
//-*-===//
//
// The copy kernel a repack config (GemmConfig::repack) runs before its main
// loop. An operand whose rows are not 16-byte aligned (127x4099x1023: rows
// of 1023 bf16 are 2046 bytes) would force the main loop to 2-byte loads
// (no cp.async 16 B, no TMA); one pass here writes it into the runtime's
// workspace with rows padded to a multiple of 8 elements and K padded with
// zeros to a multiple of 8 (kgen::gemm::planRepack in params.h says where),
// so the padded products add exact zeros and the main loop reads 16-byte
// vectors.
//
// A warp (a wave on AMD) copies one segment of a row at a time: up to
// kRepackSegment 16-byte chunks of the destination (8 elements each), lane
// l the chunks l, l + kWaveSize, ... A row starts at one byte offset in its
// 16-byte block, the same for all its chunks, so the warp reads the
// aligned blocks that cover the row (chunk c's 16 bytes lie in blocks c and
// c + 1; the second load mostly hits L1, its neighbour lane having read
// it) and shifts each chunk's bytes by that one offset: a branch the whole
// warp takes alike, then one funnel shift a word. Every load of a segment
// is issued before the first is used (bytes in flight are what a copy's
// speed is made of). The previous copy kernel gave each thread chunks of
// any row, with per-chunk 64-bit positions, bounds and a blend network for
// the offset: 8.3-8.9 us with warm L2 for 127x4099x1023 (ncu, H100), this
// one 7.7-7.9 (params.h, kRepackBlocksPerUnit).
//
// A block is read only if it lies inside the source batch's bytes, from
// its first element to its last: a chunk whose block would reach past them
// (at the very start or end of a batch) reads its elements one by one
// instead, so nothing outside the caller's tensor is touched (as
// compute-sanitizer checks). Elements past a row's extent, and rows past
// the source's, are the zero padding.
//
// The grid's x holds A's blocks, then B's (repackGrid); each block's warps
// stride over their operand's (row, segment) units; z is the batch. Every
// global access goes through kgen/common/global_io.h.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/global_io.h"
#include "kgen/common/prelude.h"
#include "kgen/gemm/params.h"

namespace kgen::gemm {

/// Steps a (row, segment) position over rows of perRow segments by dr rows
/// and dc < perRow segments.
KGEN_DEVICE void repackAdvance(long long &row, int &seg, long long dr, int dc,
                               int perRow) {
  row += dr;
  seg += dc;
  if (seg >= perRow) {
    seg -= perRow;
    ++row;
  }
}

/// The 16 bytes at byte 4 * Q + sh / 8 of the 32 in w (sh 0 or 16): four
/// funnel shifts of adjacent words.
template <int Q>
KGEN_DEVICE Words4 repackWindow(const uint32_t (&w)[8], int sh) {
  uint32_t o[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    o[j] = uint32_t(((unsigned long long)w[j + Q + 1] << 32 | w[j + Q]) >> sh);
  return Words4{o[0], o[1], o[2], o[3]};
}

/// The mask of word j's elements (2j, 2j + 1) below n.
KGEN_DEVICE uint32_t repackKeep(int j, int n) {
  return (2 * j < n ? 0xffffu : 0u) | (2 * j + 1 < n ? 0xffff0000u : 0u);
}

/// Copies every operand of `p` (2-byte elements); kRepackThreads threads a
/// block, the grid of repackGrid.
KGEN_DEVICE void repackOperands(const RepackParams &p) {
  // The main loop may launch at once (programmatic dependent launch):
  // it sets up its barriers while the copy runs, and waits for the copy's
  // completion before anything else (gemm_sm90.h, gemm.h).
  allowNextGrid();
  const bool isA = int(blockIdx.x) < p.op[0].blocks;
  const RepackOperand &o = p.op[isA ? 0 : 1];
  const int block = isA ? int(blockIdx.x) : int(blockIdx.x) - p.op[0].blocks;
  if (!o.src || int(blockIdx.z) >= o.batch)
    return;
  constexpr int kWarps = kRepackThreads / kWaveSize;
  constexpr int kPerLane = kRepackSegment / kWaveSize;
  const int lane = int(threadIdx.x) % kWaveSize;
  const uint16_t *src =
      static_cast<const uint16_t *>(o.src) + blockIdx.z * o.stride;
  uint16_t *dst = static_cast<uint16_t *>(o.dst) + blockIdx.z * o.dstStride;
  // The batch's bytes, first element to last: what a block may be read from.
  const unsigned long long begin = reinterpret_cast<unsigned long long>(src);
  const unsigned long long end =
      begin + (unsigned long long)((o.rows - 1) * o.ld + o.extent) * 2;
  const int extent = int(o.extent), chunks = int(o.dstLd / 8);
  const int segments = (chunks + kRepackSegment - 1) / kRepackSegment;
  // This warp's first unit, and the fixed step to its next.
  const long long first = (long long)block * kWarps + threadIdx.x / kWaveSize;
  const long long step = (long long)o.blocks * kWarps;
  long long row = first / segments;
  int seg = int(first % segments);
  const long long dRow = step / segments;
  const int dSeg = int(step % segments);
  for (; row < o.dstRows; repackAdvance(row, seg, dRow, dSeg, segments)) {
    uint16_t *out = dst + row * o.dstLd;
    const int c0 = seg * kRepackSegment + lane;
    if (row >= o.rows) {
#pragma unroll
      for (int u = 0; u < kPerLane; ++u)
        if (c0 + u * kWaveSize < chunks)
          storeGlobal16(out + 8 * (c0 + u * kWaveSize), Words4{0, 0, 0, 0});
      continue;
    }
    const uint16_t *in = src + row * o.ld;
    const unsigned long long at = reinterpret_cast<unsigned long long>(in);
    const char *lo = reinterpret_cast<const char *>(at & ~15ull);
    const int off = int(at & 15); // even: 2-byte elements
    // Blocks [firstBlock, endBlock) of the row lie inside the batch's bytes.
    const int firstBlock = (at & ~15ull) < begin ? 1 : 0;
    const unsigned long long inside = (end - (at & ~15ull)) / 16;
    const int endBlock =
        inside < (unsigned long long)chunks + 1 ? int(inside) : chunks + 1;
    uint32_t w[kPerLane][8];
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int c = c0 + u * kWaveSize;
      const int left = extent - 8 * c;
      const int n = left < 0 ? 0 : left < 8 ? left : 8;
      Words4 b0{0, 0, 0, 0}, b1{0, 0, 0, 0};
      if (n > 0 && c >= firstBlock && c < endBlock)
        b0 = loadGlobal16(lo + 16 * c);
      if (off + 2 * n > 16 && c + 1 < endBlock)
        b1 = loadGlobal16(lo + 16 * (c + 1));
      w[u][0] = b0.x, w[u][1] = b0.y, w[u][2] = b0.z, w[u][3] = b0.w;
      w[u][4] = b1.x, w[u][5] = b1.y, w[u][6] = b1.z, w[u][7] = b1.w;
    }
    const int sh = (off & 2) * 8;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int c = c0 + u * kWaveSize;
      if (c >= chunks)
        continue;
      const int left = extent - 8 * c;
      const int n = left < 0 ? 0 : left < 8 ? left : 8;
      Words4 v{0, 0, 0, 0};
      if (n > 0 &&
          (c < firstBlock || (off + 2 * n > 16 ? c + 1 : c) >= endBlock)) {
        // A batch's first or last chunk: its elements one by one.
        uint32_t e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t a = 2 * j < n ? loadGlobal2(in + 8 * c + 2 * j) : 0u;
          const uint32_t b =
              2 * j + 1 < n ? loadGlobal2(in + 8 * c + 2 * j + 1) : 0u;
          e[j] = a | b << 16;
        }
        v = Words4{e[0], e[1], e[2], e[3]};
      } else if (n > 0) {
        // Bytes off.. of the 32 read: the warp's offset, a uniform branch.
        switch (off >> 2) {
        case 0:
          v = repackWindow<0>(w[u], sh);
          break;
        case 1:
          v = repackWindow<1>(w[u], sh);
          break;
        case 2:
          v = repackWindow<2>(w[u], sh);
          break;
        default:
          v = repackWindow<3>(w[u], sh);
          break;
        }
        if (n < 8) {
          // Elements past the row's extent are the K padding.
          v.x &= repackKeep(0, n);
          v.y &= repackKeep(1, n);
          v.z &= repackKeep(2, n);
          v.w &= repackKeep(3, n);
        }
      }
      storeGlobal16(out + 8 * c, v);
    }
  }
}

} // namespace kgen::gemm
