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
// Each thread writes whole 16-byte chunks of the destination (8 elements).
// A chunk's source is 16 bytes at any even address: the thread reads the
// one or two 16-byte aligned blocks that cover it and shifts the bytes into
// place (a 2-byte-aligned row start is off a block by 0..14 bytes), so a
// chunk costs two 16-byte loads instead of eight 2-byte ones; consecutive
// threads read consecutive blocks (a warp's loads cover one contiguous
// 512-byte span, the second load's mostly from L1). A block is read only
// if it lies inside the source batch's bytes, from its first element to its
// last: the chunks at the very start and end of a batch whose blocks would
// reach past them read their elements one by one instead (nothing outside
// the caller's tensor is touched, as compute-sanitizer checks). Elements
// past a row's extent, and rows past the source's, are the zero padding.
//
// A thread moves kRepackUnroll chunks a step, kRepackThreads apart, with
// every load issued before the first is used (bytes in flight are what a
// copy's speed is made of). The grid's x holds A's blocks, then B's
// (repackGrid); each strides over its operand's chunks; z is the batch.
// Every global access goes through kgen/common/global_io.h.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/global_io.h"
#include "kgen/common/prelude.h"
#include "kgen/gemm/params.h"

namespace kgen::gemm {

/// One destination chunk between its loads and its store: the aligned
/// blocks' words (zero where not read), and in `info` its source elements
/// (bits 0-3: 8, fewer at a row's end, 0 past the rows), its first
/// element's byte offset in the first block (bits 4-7) and whether the
/// blocks were read (bit 8; else the elements are read one by one).
struct RepackChunk {
  uint32_t w[8];
  int info;
};

/// Steps a (row, column) position over a row of perRow chunks by dr rows
/// and dc < perRow columns.
KGEN_DEVICE void repackAdvance(long long &row, long long &col, long long dr,
                               long long dc, long long perRow) {
  row += dr;
  col += dc;
  if (col >= perRow) {
    col -= perRow;
    ++row;
  }
}

/// a where `mask` is set, else b: a blend of values, which a compiler
/// cannot turn into a choice between the addresses they came from (hiprtc
/// did, for ?: over array elements, and put the chunks in scratch).
KGEN_DEVICE uint32_t repackBlend(uint32_t mask, uint32_t a, uint32_t b) {
  return (a & mask) | (b & ~mask);
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
  const long long block = isA ? blockIdx.x : blockIdx.x - p.op[0].blocks;
  if (!o.src || int(blockIdx.z) >= o.batch)
    return;
  const uint16_t *src =
      static_cast<const uint16_t *>(o.src) + blockIdx.z * o.stride;
  uint16_t *dst = static_cast<uint16_t *>(o.dst) + blockIdx.z * o.dstStride;
  // The batch's bytes, first element to last: what a block may be read from.
  const char *bytes = reinterpret_cast<const char *>(src);
  const unsigned long long begin = reinterpret_cast<unsigned long long>(src);
  const unsigned long long end =
      begin + (unsigned long long)((o.rows - 1) * o.ld + o.extent) * 2;
  const long long perRow = o.dstLd / 8;
  const long long chunks = o.dstRows * perRow;
  const long long span = (long long)kRepackThreads * kRepackUnroll;
  const long long step = (long long)o.blocks * span;
  // Positions advance by fixed strides: divide once, not per chunk.
  const long long first = block * span + threadIdx.x;
  long long row = first / perRow, col = first % perRow;
  const long long dRow = kRepackThreads / perRow,
                  dCol = kRepackThreads % perRow;
  const long long sRow = step / perRow, sCol = step % perRow;
  for (long long i = first; i < chunks; i += step) {
    RepackChunk k[kRepackUnroll];
    long long r = row, c = col;
#pragma unroll
    for (int u = 0; u < kRepackUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        k[u].w[j] = 0;
      k[u].info = 0;
      if (r < o.rows) {
        const long long left = o.extent - c * 8;
        const int n = left < 8 ? int(left) : 8;
        const unsigned long long at =
            begin + (unsigned long long)(r * o.ld + c * 8) * 2;
        const unsigned long long lo = at & ~15ull;
        const bool two = at + 2 * n > lo + 16;
        const bool vec =
            (at & 1) == 0 && lo >= begin && lo + (two ? 32 : 16) <= end;
        k[u].info = n | int(at - lo) << 4 | int(vec) << 8;
        if (vec) {
          const Words4 b0 = loadGlobal16(bytes + (lo - begin));
          k[u].w[0] = b0.x;
          k[u].w[1] = b0.y;
          k[u].w[2] = b0.z;
          k[u].w[3] = b0.w;
          if (two) {
            const Words4 b1 = loadGlobal16(bytes + (lo + 16 - begin));
            k[u].w[4] = b1.x;
            k[u].w[5] = b1.y;
            k[u].w[6] = b1.z;
            k[u].w[7] = b1.w;
          }
        }
      }
      repackAdvance(r, c, dRow, dCol, perRow);
    }
    r = row;
    c = col;
#pragma unroll
    for (int u = 0; u < kRepackUnroll; ++u) {
      if (i + (long long)u * kRepackThreads < chunks) {
        uint32_t out[4];
        const int n = k[u].info & 15, m = k[u].info >> 4 & 15;
        if (k[u].info & 256) {
          // The 16 bytes from byte m (even) of the 32 read: by 8, 4, then
          // 2 bytes, each a blend (no indexing by m, so no scratch).
          const uint32_t by8 = 0u - uint32_t(m >> 3 & 1),
                         by4 = 0u - uint32_t(m >> 2 & 1),
                         by2 = 0u - uint32_t(m >> 1 & 1);
          uint32_t v[6];
#pragma unroll
          for (int j = 0; j < 6; ++j)
            v[j] = repackBlend(by8, k[u].w[j + 2], k[u].w[j]);
#pragma unroll
          for (int j = 0; j < 5; ++j)
            v[j] = repackBlend(by4, v[j + 1], v[j]);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            out[j] = repackBlend(by2, (v[j] >> 16) | (v[j + 1] << 16), v[j]);
            // Elements past the row's extent are the K padding.
            out[j] &=
                (2 * j < n ? 0xffffu : 0u) | (2 * j + 1 < n ? 0xffff0000u : 0u);
          }
        } else {
          // The batch's first or last chunks, or rows past the source's.
          const uint16_t *s = src + r * o.ld + c * 8;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const uint32_t lo = 2 * j < n ? loadGlobal2(s + 2 * j) : 0u;
            const uint32_t hi = 2 * j + 1 < n ? loadGlobal2(s + 2 * j + 1) : 0u;
            out[j] = lo | hi << 16;
          }
        }
        storeGlobal16(dst + r * o.dstLd + c * 8,
                      Words4{out[0], out[1], out[2], out[3]});
      }
      repackAdvance(r, c, dRow, dCol, perRow);
    }
    repackAdvance(row, col, sRow, sCol, perRow);
  }
}

} // namespace kgen::gemm
