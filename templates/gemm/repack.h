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
// Each thread writes whole 16-byte chunks of the destination (8 elements)
// and reads their sources 2 bytes at a time: consecutive threads read
// consecutive 16-byte runs of a source row, so a warp's loads cover one
// contiguous 512-byte span whatever the row's alignment. The grid strides
// over the chunks (x), the operand (y: A, B) and the batch (z).
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"
#include "kgen/gemm/params.h"

namespace kgen::gemm {

/// Copies every operand of `p` (2-byte elements); kRepackThreads threads a
/// block.
KGEN_DEVICE void repackOperands(const RepackParams &p) {
  const RepackOperand &o = p.op[blockIdx.y];
  if (!o.src || int(blockIdx.z) >= o.batch)
    return;
  struct alignas(16) Chunk {
    uint32_t w[4];
  };
  const uint16_t *src =
      static_cast<const uint16_t *>(o.src) + blockIdx.z * o.stride;
  uint16_t *dst = static_cast<uint16_t *>(o.dst) + blockIdx.z * o.dstStride;
  const long long chunksPerRow = o.dstLd / 8;
  const long long chunks = o.dstRows * chunksPerRow;
  const long long step = (long long)gridDim.x * kRepackThreads;
  for (long long i = (long long)blockIdx.x * kRepackThreads + threadIdx.x;
       i < chunks; i += step) {
    const long long row = i / chunksPerRow, col = i % chunksPerRow * 8;
    const uint16_t *s = src + row * o.ld + col;
    // Elements past the source's extent or rows are the zero padding.
    const bool inRow = row < o.rows;
    const long long left = inRow ? o.extent - col : 0;
    Chunk c;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t lo = 2 * j < left ? s[2 * j] : 0u;
      const uint32_t hi = 2 * j + 1 < left ? s[2 * j + 1] : 0u;
      c.w[j] = lo | hi << 16;
    }
    *reinterpret_cast<Chunk *>(dst + row * o.dstLd + col) = c;
  }
}

} // namespace kgen::gemm
