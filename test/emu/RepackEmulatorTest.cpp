//===- RepackEmulatorTest.cpp - The repack copy kernel on host threads ----===//
//
// Runs the copy kernel of repack configs (templates/gemm/repack.h, compiled
// as it is, with its loads through the emulated kgen/common/global_io.h)
// on the emulated grid, against the plain copy it must equal: element (z,
// r, e) of the destination is the source's when r < rows and e < extent,
// zero otherwise, for every row of dstRows and element of dstLd; nothing
// else of the destination is written and the source stays as it was.
//
// The sources sit 0..7 elements past a 256-byte boundary, with odd and even
// leading dimensions, row lengths (K) from 1 to 4099 (1023 among them: issue
// 3's), 1 to 300 rows,
// batches with odd and even strides, and row padding (dstRows > rows, as K
// rows of A 'T' / B 'N' get). The emulated loads fail a launch that reads
// a byte outside a source tensor (its first element to its last), as
// compute-sanitizer would on a GPU, and count the 2-byte loads: those only
// read the elements within 32 bytes of a batch's first or last byte (the
// chunks whose aligned 16-byte blocks would reach past the tensor), so a
// copy that fell back to 2-byte loads elsewhere fails here.
//
//===----------------------------------------------------------------------===//

#define EMU_NVIDIA 1
#include "kgen/gemm/repack.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace {

/// One operand's source and destination, as the kernel's RepackOperand
/// describes them, `offset` elements past a 256-byte boundary.
struct OperandCase {
  long long rows, extent, ld, stride;
  int batch;
  long long dstRows;
  int offset;
};

struct Aligned {
  void operator()(unsigned char *p) const {
    ::operator delete(p, std::align_val_t(256));
  }
};
using Bytes = std::unique_ptr<unsigned char, Aligned>;

Bytes allocate(size_t bytes) {
  return Bytes(static_cast<unsigned char *>(
      ::operator new(bytes, std::align_val_t(256))));
}

/// A source element: never 0 (the padding) nor 0xffff (the fill).
uint16_t valueAt(int op, long long z, long long r, long long e) {
  return uint16_t((op * 40503u + z * 7919u + r * 131u + e * 7u) % 65000u + 1u);
}

struct Operand {
  OperandCase cs;
  long long dstLd, span, dstElems;
  size_t srcBytes, dstBytes;
  Bytes srcBuf, dstBuf;
  const uint16_t *src;
  uint16_t *dst;

  Operand(int op, const OperandCase &c) : cs(c) {
    dstLd = (c.extent + 7) / 8 * 8;
    // The tensor's elements, first to last (all batches).
    span = (c.batch - 1) * c.stride + (c.rows - 1) * c.ld + c.extent;
    srcBytes = size_t(256 + 2 * (c.offset + span) + 256);
    srcBuf = allocate(srcBytes);
    std::memset(srcBuf.get(), 0xff, srcBytes);
    src = reinterpret_cast<const uint16_t *>(srcBuf.get() + 256) + c.offset;
    for (long long z = 0; z < c.batch; ++z)
      for (long long r = 0; r < c.rows; ++r)
        for (long long e = 0; e < c.extent; ++e) {
          const uint16_t v = valueAt(op, z, r, e);
          std::memcpy(const_cast<uint16_t *>(src) + z * c.stride + r * c.ld + e,
                      &v, 2);
        }
    dstElems = c.batch * c.dstRows * dstLd;
    dstBytes = size_t(2 * dstElems + 256);
    dstBuf = allocate(dstBytes);
    std::memset(dstBuf.get(), 0xff, dstBytes);
    dst = reinterpret_cast<uint16_t *>(dstBuf.get());
  }

  kgen::gemm::RepackOperand plan() const {
    kgen::gemm::RepackOperand o{};
    o.src = src;
    o.dst = dst;
    o.ld = cs.ld;
    o.stride = cs.stride;
    o.rows = cs.rows;
    o.extent = cs.extent;
    o.dstRows = cs.dstRows;
    o.dstLd = dstLd;
    o.dstStride = cs.dstRows * dstLd;
    o.batch = cs.batch;
    return o;
  }

  emu::Buffer tensor() const { return {src, size_t(2 * span)}; }

  /// What differs from the plain copy (empty: nothing).
  std::string check(int op, const std::vector<unsigned char> &srcBefore) const {
    std::string out;
    long bad = 0;
    for (long long z = 0; z < cs.batch; ++z)
      for (long long r = 0; r < cs.dstRows; ++r)
        for (long long e = 0; e < dstLd; ++e) {
          const uint16_t want =
              r < cs.rows && e < cs.extent ? valueAt(op, z, r, e) : 0;
          uint16_t got;
          std::memcpy(&got, dst + (z * cs.dstRows + r) * dstLd + e, 2);
          if (got != want && bad++ < 3)
            out += "dst[" + std::to_string(z) + "][" + std::to_string(r) +
                   "][" + std::to_string(e) + "] = " + std::to_string(got) +
                   ", want " + std::to_string(want) + "\n";
        }
    if (bad)
      out += std::to_string(bad) + " elements wrong\n";
    for (size_t b = size_t(2 * dstElems); b < dstBytes; ++b)
      if (dstBuf.get()[b] != 0xff) {
        out +=
            "a write past the destination, at byte " + std::to_string(b) + "\n";
        break;
      }
    if (std::memcmp(srcBuf.get(), srcBefore.data(), srcBytes) != 0)
      out += "the source changed\n";
    return out;
  }
};

std::string describe(const OperandCase &c) {
  return std::to_string(c.batch) + " x " + std::to_string(c.rows) + " x " +
         std::to_string(c.extent) + " (ld " + std::to_string(c.ld) +
         ", stride " + std::to_string(c.stride) + ", dstRows " +
         std::to_string(c.dstRows) + ", offset " + std::to_string(c.offset) +
         ")";
}

/// Copies both operands in one launch of at most maxBlocks blocks an
/// operand; returns an empty string or what failed.
std::string copyBoth(const OperandCase &a, const OperandCase &b,
                     long long maxBlocks) {
  Operand ops[2] = {Operand(0, a), Operand(1, b)};
  std::vector<unsigned char> before[2];
  kgen::gemm::RepackParams rp{};
  emu::Launch l;
  for (int i = 0; i < 2; ++i) {
    before[i].assign(ops[i].srcBuf.get(),
                     ops[i].srcBuf.get() + ops[i].srcBytes);
    rp.op[i] = ops[i].plan();
    l.buffers[i] = ops[i].tensor();
  }
  if (kgen::gemm::repackGrid(rp, maxBlocks, l.grid) !=
      rp.op[0].blocks + rp.op[1].blocks)
    return "repackGrid's count disagrees with its blocks";
  l.threads = kgen::gemm::kRepackThreads;
  l.waveSize = 32;
  const long long loads2 = emu::globalLoads2.load();
  char message[2048] = "";
  if (!emu::launchRaw(
          l,
          [](const void *ctx) {
            kgen::gemm::repackOperands(
                *static_cast<const kgen::gemm::RepackParams *>(ctx));
          },
          &rp, message, sizeof(message)))
    return message;
  std::string out;
  for (int i = 0; i < 2; ++i) {
    const std::string e = ops[i].check(i, before[i]);
    if (!e.empty())
      out += std::string(i ? "B " : "A ") + describe(ops[i].cs) + ":\n" + e;
  }
  // 2-byte loads only within 32 bytes of a batch's ends (16 elements each).
  const long long narrow = emu::globalLoads2.load() - loads2;
  if (narrow > 32LL * (a.batch + b.batch))
    out += std::to_string(narrow) + " 2-byte loads, over the " +
           std::to_string(32LL * (a.batch + b.batch)) +
           " the ends of the batches need\n";
  return out;
}

TEST(RepackCopy, EqualsThePlainCopyAtEveryAlignment) {
  // Rows of 1, 2, 6, 128 and 513 chunks (one to five segments a row): the
  // warps' strides wrap the (row, segment) units in steps that do and do
  // not divide them.
  const long long extents[] = {1, 7, 8, 9, 45, 1023};
  const long long otherExtents[] = {4099, 1023, 16, 100, 3};
  const long long rowCounts[] = {1, 2, 3, 31, 300, 127};
  const long long ldPads[] = {0, 1, 5};    // odd and even ld for every extent
  const long long maxBlocks[] = {1, 2, 3}; // the grid-stride loop wraps
  int n = 0;
  for (long long extent : extents)
    for (long long pad : ldPads)
      for (int offset = 0; offset < 8; ++offset, ++n) {
        // A: this combination; B: another extent, offset and row count, so
        // that both operands' blocks share the grid in different shapes.
        OperandCase a, b;
        a.rows = rowCounts[n % 6];
        a.extent = extent;
        a.ld = extent + pad;
        a.batch = n % 3 == 2 ? 3 : 1;
        a.stride = a.rows * a.ld + (n % 2 ? 3 : 8);
        a.dstRows = n % 4 < 2 ? a.rows : (a.rows + 7) / 8 * 8;
        a.offset = offset;
        b.rows = rowCounts[(n + 3) % 4]; // up to 31 rows of up to 4099
        b.extent = otherExtents[n % 5];
        b.ld = b.extent + ldPads[(n + 1) % 3];
        b.batch = n % 5 == 1 ? 2 : 1;
        b.stride = b.rows * b.ld + 1;
        b.dstRows = n % 3 == 0 ? (b.rows + 7) / 8 * 8 : b.rows;
        b.offset = (offset + 5) % 8;
        const std::string e = copyBoth(a, b, maxBlocks[n % 3]);
        EXPECT_TRUE(e.empty())
            << "A " << describe(a) << ", B " << describe(b) << ", "
            << maxBlocks[n % 3] << " blocks an operand:\n"
            << e;
      }
}

TEST(RepackCopy, IssueThreeShapeReadsSixteenBytesAtATime) {
  // 127x4099x1023 nt's A, and a slice of its B: rows of 2046 bytes, each
  // starting at another offset in its 16-byte block. Every chunk but the
  // batch's first and last is read as aligned blocks.
  OperandCase a{127, 1023, 1023, 0, 1, 127, 0};
  OperandCase b{300, 1023, 1023, 0, 1, 300, 3};
  const long long loads16 = emu::globalLoads16.load();
  const std::string e = copyBoth(a, b, 1 << 20);
  EXPECT_TRUE(e.empty()) << e;
  // Two blocks a chunk whose 16 bytes straddle two (all rows here but one
  // in eight, which start aligned), one otherwise.
  const long long chunks = (127 + 300) * 128;
  EXPECT_GE(emu::globalLoads16.load() - loads16, chunks - 6);
  EXPECT_LE(emu::globalLoads16.load() - loads16, 2 * chunks);
}

TEST(RepackCopy, NothingToCopyLaunchesNothing) {
  kgen::gemm::RepackParams rp{};
  unsigned grid[3];
  EXPECT_EQ(kgen::gemm::repackGrid(rp, 100, grid), 0);
  EXPECT_EQ(grid[0], 1u);
  EXPECT_EQ(rp.op[0].blocks, 0);
  EXPECT_EQ(rp.op[1].blocks, 0);
}

} // namespace
