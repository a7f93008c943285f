//===- Limits.cpp - Config validity per target ----------------------------===//
//
// Every rule the GEMM template relies on is checked here, once, with a
// message that says what to change. The emitter assumes a config that passed.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Limits.h"

#include <climits>
#include <string>

namespace kgen {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
bool isPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The rules of templates/gemm/gemm_sm90.h: TMA boxes of 128-byte swizzled
/// rows (64 2-byte or 128 fp8 elements), wgmma m64nN with N <= 256, one or two
/// m64 slices per consumer warpgroup.
std::optional<std::string> checkWgmmaConfig(const GemmProblem &p,
                                            const GemmConfig &c, Target t) {
  const TargetInfo &ti = targetInfo(t);
  std::string tgt(toString(t));
  if (t != Target::SM90A)
    return "config: loop = wgmma needs sm_90a (wgmma, TMA); " + tgt +
           " uses loop = tiled";
  // TMA's tensor maps here are 2-D: batches are the tiled loop's for now.
  if (p.batch != 1)
    return "config: loop = wgmma runs one matrix (its tensor maps are 2-D); "
           "batch = " +
           str(p.batch) + " needs loop = tiled";
  if (p.transA)
    return std::string("config: loop = wgmma reads A K-major; layout ") +
           p.layoutName() + " stores A as K x M ('T'); use loop = tiled";
  if (c.blockK * sizeOf(p.ab) != 128)
    return "config: blockK = " + str(c.blockK) + " with loop = wgmma and " +
           std::string(toString(p.ab)) + " inputs must be " +
           str(128 / sizeOf(p.ab)) + " (one 128-byte swizzled row per k-slice)";
  if (isFp8(p.ab) && c.swapAB)
    return std::string("config: swapAB with fp8 inputs is not built (the "
                       "swapped tiles are bf16/f16's); use swapAB = false");
  if (c.warpsM != 1 && c.warpsM != 2)
    return "config: warpsM = " + str(c.warpsM) +
           " with loop = wgmma counts consumer warpgroups and must be 1 or 2";
  if (c.warpsN != 1)
    return "config: warpsN = " + str(c.warpsN) +
           " with loop = wgmma must be 1 (consumer warpgroups split M)";
  if (c.swapAB && (c.cluster != 1 || c.streamK || c.splitK > 1 ||
                   c.blockM % 8 != 0 || c.blockM > 256 ||
                   (c.blockN / c.warpsM != 64 && c.blockN / c.warpsM != 128)))
    return "config: swapAB needs single CTAs on whole tiles (no cluster, "
           "split-K or stream-K), blockM a multiple of 8 up to 256 (wgmma n) "
           "and blockN / warpsM = 64 or 128";
  int rows = c.wgmmaM() / c.warpsM;
  if (c.blockM % c.warpsM != 0 || (rows != 64 && rows != 128))
    return "config: blockM / warpsM = " + str(c.blockM) + "/" +
           str(c.warpsM) +
           " must be 64 or 128 (each consumer warpgroup runs one or two "
           "wgmma m64 slices)";
  // B stored N x K (K-major) comes in one box of blockN rows, so any
  // wgmma n (a multiple of 8) fits; B stored K x N comes in 64-column boxes.
  if (!c.swapAB &&
      (p.transB ? c.blockN % 8 != 0 || c.blockN < 16 || c.blockN > 256
                : c.blockN % 64 != 0 || c.blockN > 256))
    return "config: blockN = " + str(c.blockN) + " with loop = wgmma must be " +
           (p.transB ? "a multiple of 8 from 16 to 256 (wgmma n)"
                     : "64, 128, 192 or 256 when B is stored K x N "
                       "(64-column TMA boxes)");
  // Narrow tiles stream B through deep rings (64x32: 16 stages of 12 KB).
  if (c.stages < 2 || c.stages > 16)
    return "config: stages = " + str(c.stages) + " must be between 2 and 16";
  if (c.cluster != 1 && c.cluster != 2)
    return "config: cluster = " + str(c.cluster) + " must be 1 or 2";
  // A pair of taller-than-wide tiles splits A (blockM / 2 rows each, always
  // whole swizzle groups); the others split B.
  const bool splitB = c.cluster == 2 && !c.pairSharesA();
  if (splitB && p.transB && c.blockN % 16 != 0)
    return "config: cluster = 2 with tiles at least as wide as tall splits "
           "the B slice between the pair in 8-row swizzle groups; blockN = " +
           str(c.blockN) + " must be a multiple of 16";
  if (splitB && !p.transB && c.blockN % 128 != 0)
    return "config: cluster = 2 with B stored K x N splits the B slice into "
           "64-column boxes between the pair; blockN = " +
           str(c.blockN) + " must be 128 or 256";
  if (c.smem != SmemLayout::Swizzled || c.smemPad != 0)
    return std::string("config: loop = wgmma uses the 128-byte swizzle TMA "
                       "writes; set smem = swizzled, pad = 0");
  // TMA needs 16-byte aligned base addresses and row strides: 16-byte
  // vectors of A and B (which also needs the baked row lengths to divide).
  GemmTraits tr = gemmTraits(p, c, t);
  const int full = 16 / sizeOf(p.ab);
  if (tr.vecA < full || tr.vecB < full)
    return "config: loop = wgmma loads A and B with TMA, which needs 16-byte "
           "aligned pointers and rows (" +
           str(full) + "-element vectors); this problem allows vectors of " +
           str(tr.vecA) + " (A) and " + str(tr.vecB) + " (B) elements; use " +
           (isFp8(p.ab) ? "aligned fp8 operands" : "loop = tiled");
  if (tr.smemBytes > ti.maxSharedBytes)
    return "config: shared memory " + str(tr.smemBytes) + " B exceeds " + tgt +
           "'s " + str(ti.maxSharedBytes) +
           " B per block; lower stages or the block tile";
  if (tr.accumPerThread > 128)
    return "config: " + str(tr.accumPerThread) +
           " fp32 accumulators per consumer thread exceed 128; lower blockN "
           "or use two consumer warpgroups";
  // An fp32 C and fp8 inputs keep a second, promoted set of accumulators
  // (gemm_sm90.h, kPromote): 2 x 104 of the consumers' 232 registers
  // compile without spills (ptxas, sm_90a: 128x208 tiles; 2 x 112 spill).
  if (promotesSums(p) && tr.accumPerThread > 104)
    return "config: " + str(tr.accumPerThread) +
           " fp32 accumulators per consumer thread, doubled for " +
           (isFp8(p.ab) ? "fp8 inputs" : "an f32 C") +
           " (promoted sums), exceed the consumers' registers (at most 104 "
           "a set); use blockM / warpsM * blockN <= 13312 (e.g. block "
           "128x208, warps 2x1)";
  return std::nullopt;
}

/// The rules of templates/gemm/gemv.h: mma.sync atoms of 16 columns of B by
/// 8 rows of A, 32-wide k-chunks read 16 bytes a lane, B 'N' paired 64
/// columns at a time, everything in registers.
std::optional<std::string> checkGemvConfig(const GemmProblem &p,
                                           const GemmConfig &c, Target t) {
  const TargetInfo &ti = targetInfo(t);
  if (ti.vendor != Vendor::NVIDIA)
    return "config: loop = gemv runs on mma.sync (NVIDIA); on " +
           std::string(toString(t)) +
           " small M uses loop = tiled with split-K (no MFMA gemv yet)";
  if (p.transA)
    return "config: loop = gemv reads A K-major; layout " + p.layoutName() +
           " stores A as K x M ('T'); use loop = tiled";
  if (c.cluster != 1)
    return "config: cluster = " + str(c.cluster) +
           " needs loop = wgmma (clusters share B through TMA multicast)";
  if (c.blockM < 8 || c.blockM > 64 || c.blockM % 8 != 0)
    return "config: blockM = " + str(c.blockM) +
           " with loop = gemv must be a multiple of 8 up to 64 (rows of A a "
           "block covers, 8 per mma column tile)";
  if (c.blockK != 32)
    return "config: blockK = " + str(c.blockK) +
           " with loop = gemv must be 32 (a k-chunk: 16 bytes a lane)";
  if (c.warpsM != 1)
    return "config: warpsM = " + str(c.warpsM) +
           " with loop = gemv must be 1 (warps split N only)";
  if (c.warpsN < 1 || c.warpsN > 16)
    return "config: warpsN = " + str(c.warpsN) +
           " with loop = gemv must be between 1 and 16";
  if (c.blockN % (16 * c.warpsN) != 0)
    return "config: blockN = " + str(c.blockN) +
           " with loop = gemv must be warpsN * 16 * (row tiles a warp), "
           "warpsN = " +
           str(c.warpsN);
  const int rowTiles = c.blockN / (16 * c.warpsN);
  if (!p.transB && rowTiles % 4 != 0)
    return "config: blockN / (16 * warpsN) = " + str(rowTiles) +
           " row tiles a warp with B stored K x N ('N') must be a multiple "
           "of 4 (lanes pair 64 columns at a time); raise blockN";
  if (c.stages < 1 || c.stages > 16)
    return "config: stages = " + str(c.stages) +
           " with loop = gemv counts the k-chunks of the shared-memory ring "
           "(stages - 1 in flight a warp), 1 to 16";
  if (c.splitK < 1 || c.splitK > 16)
    return "config: splitK = " + str(c.splitK) +
           " must be between 1 and 16 (blocks sharing one tile's k-chunks)";
  if (int64_t(c.splitK) * p.batch > 65535)
    return "config: splitK * batch = " + str(int64_t(c.splitK) * p.batch) +
           " blocks along the grid's z exceed 65535; lower splitK";
  // Registers: one chunk read back from the ring (two 16-byte runs of B a
  // row tile, one of A an 8-row tile, 4 words each) and the accumulators.
  const int colTiles = c.blockM / 8;
  const int regs = (2 * rowTiles + colTiles) * 4 + rowTiles * colTiles * 4;
  // 200 of the 255 a thread may have, the rest for addresses: B 'N' at
  // M = 64 needs 192 (4 row tiles x 8 column tiles of accumulators).
  if (regs > 200)
    return "config: loop = gemv would hold " + str(regs) +
           " registers of one chunk and accumulators a thread ((2 * row "
           "tiles + blockM / 8) * 4 + row tiles * blockM / 8 * 4) over 200; "
           "lower blockN / warpsN or blockM";
  const GemmTraits tr = gemmTraits(p, c, t);
  if (tr.smemBytes > ti.maxSharedBytes)
    return "config: loop = gemv's ring of " + str(c.stages) +
           " k-chunks takes " + str(tr.smemBytes) +
           " B of shared memory, over " + std::string(toString(t)) + "'s " +
           str(ti.maxSharedBytes) +
           " B per block; lower stages, warpsN, blockN or blockM";
  return std::nullopt;
}

} // namespace

std::optional<std::string> checkConfig(const GemmProblem &p,
                                       const GemmConfig &c, Target t) {
  if (auto e = checkProblemOnTarget(p, t))
    return e;
  const TargetInfo &ti = targetInfo(t);
  std::string tgt(toString(t));
  const bool amd = ti.vendor == Vendor::AMD;
  if (p.tf32 && c.loop != GemmLoop::Tiled)
    return "config: tf32 runs on loop = tiled (mma.sync m16n8k8 .tf32); "
           "loop = " +
           std::string(toString(c.loop)) + " takes bf16/f16 inputs";
  if (c.repack) {
    // The copy kernel moves 2-byte elements in 16-byte chunks
    // (templates/gemm/repack.h) for the loops that read shared-memory tiles.
    if (c.loop == GemmLoop::Gemv)
      return std::string("config: repack with loop = gemv; the gemv loop "
                         "reads B straight from global memory (use loop = "
                         "tiled or wgmma)");
    if (sizeOf(p.ab) != 2)
      return "config: repack copies 2-byte elements (bf16, f16); " +
             std::string(toString(p.ab)) + " inputs (tf32) do not repack";
    if (p.k + 7 > INT_MAX)
      return "config: repack pads K = " + str(p.k) +
             " to a multiple of 8, past the kernels' 32-bit extents";
  }
  if (isFp8(p.ab) && c.loop != GemmLoop::Wgmma)
    return "config: " + std::string(toString(p.ab)) +
           " inputs run on loop = wgmma only (fp8 wgmma, sm_90a), not loop = " +
           std::string(toString(c.loop));
  // Swapped tiles and stream-K are the wgmma loop's (wgmma's n along M, its
  // persistent grid); the other loops would ignore the field.
  if (c.swapAB && c.loop != GemmLoop::Wgmma)
    return "config: swapAB needs loop = wgmma (wgmma's n along M); loop = " +
           std::string(toString(c.loop)) + " does not swap (use swapAB = false)";
  if (c.streamK && c.loop != GemmLoop::Wgmma)
    return "config: streamK needs loop = wgmma (the persistent grid); loop = " +
           std::string(toString(c.loop)) +
           (c.loop == GemmLoop::Tiled ? " has split-K" : " does not share tiles");
  if (c.loop == GemmLoop::Gemv)
    return checkGemvConfig(p, c, t);
  if (c.splitK < 1 || c.splitK > 16)
    return "config: splitK = " + str(c.splitK) +
           " must be between 1 and 16 (blocks sharing one tile's k-slices)";
  if (c.loop == GemmLoop::Wgmma) {
    if (c.splitK > 1 && c.streamK)
      return "config: splitK = " + str(c.splitK) +
             " with streamK; a tile's k-slices go out by one schedule (use "
             "splitK = 1 or streamK = false)";
    if ((c.streamK || c.splitK > 1) && c.cluster != 1)
      return std::string("config: ") +
             (c.streamK ? "streamK" : "splitK = " + str(c.splitK)) +
             " with cluster = " + str(c.cluster) +
             "; split tiles run on single CTAs (use cluster = 1)";
    return checkWgmmaConfig(p, c, t);
  }
  if (c.cluster != 1)
    return "config: cluster = " + str(c.cluster) +
           " needs loop = wgmma (clusters share B through TMA multicast)";
  if (int64_t(c.splitK) * p.batch > 65535)
    return "config: splitK * batch = " + str(int64_t(c.splitK) * p.batch) +
           " blocks along the grid's z exceed 65535; lower splitK";

  for (auto [name, v] : {std::pair{"blockM", c.blockM},
                         {"blockN", c.blockN},
                         {"blockK", c.blockK},
                         {"warpsM", c.warpsM},
                         {"warpsN", c.warpsN}})
    if (v < 1 || !isPow2(v))
      return std::string("config: ") + name + " = " + str(v) +
             " must be a power of two >= 1";
  if (c.stages < 2 || c.stages > 8)
    return "config: stages = " + str(c.stages) +
           " must be between 2 and 8 (the pipeline double-buffers at least)";
  if (c.smem == SmemLayout::Padded && (c.smemPad < 0 || c.smemPad % 8 != 0))
    return "config: smemPad = " + str(c.smemPad) +
           " must be a non-negative multiple of 8 elements (16-byte rows "
           "keep vector stores aligned)";
  // The swizzle moves 16-byte chunks of 8 two-byte elements.
  if (p.tf32 && c.smem == SmemLayout::Swizzled)
    return std::string("config: smem = swizzled with tf32; the swizzle is "
                       "written for 2-byte elements (use smem = padded)");
  if (c.smem == SmemLayout::Swizzled && c.smemPad != 0)
    return "config: smemPad = " + str(c.smemPad) +
           " with smem = swizzled; a swizzled layout takes no padding (set "
           "pad to 0)";

  // The MMA atom: mma.sync m16n8k16 (a warp tile of 16x16 per ldmatrix.x4
  // pair) on NVIDIA, MFMA 32x32x8 on AMD; blockK steps by 16 on both.
  const int atom = amd ? 32 : 16;
  int warpTileM = c.blockM / c.warpsM, warpTileN = c.blockN / c.warpsN;
  if (c.blockM % c.warpsM != 0 || warpTileM % atom != 0)
    return "config: warp tile M = blockM / warpsM = " + str(c.blockM) + "/" +
           str(c.warpsM) + " is not a multiple of " + str(atom) + " (the " +
           (amd ? "MFMA 32x32x8" : "mma.sync m16n8k16") + " atom on " + tgt +
           "); raise blockM or lower warpsM";
  if (c.blockN % c.warpsN != 0 || warpTileN % atom != 0)
    return "config: warp tile N = blockN / warpsN = " + str(c.blockN) + "/" +
           str(c.warpsN) + " is not a multiple of " + str(atom) + " (the " +
           (amd ? "MFMA 32x32x8" : "mma.sync m16n8k16") + " atom on " + tgt +
           "); raise blockN or lower warpsN";
  if (c.blockK % 16 != 0)
    return "config: blockK = " + str(c.blockK) +
           " must be a multiple of 16 (the K step of the MMA atom)";

  GemmTraits tr = gemmTraits(p, c, t);
  if (tr.threads > ti.maxThreadsPerBlock)
    return "config: " + str(tr.threads) + " threads per block (warps " +
           str(c.warpsM) + "x" + str(c.warpsN) + " of " + str(ti.waveSize) +
           ") exceed " + tgt + "'s " + str(ti.maxThreadsPerBlock) +
           "; lower warpsM or warpsN";
  if (tr.smemBytes > ti.maxSharedBytes)
    return "config: shared memory " + str(tr.smemBytes) + " B exceeds " + tgt +
           "'s " + str(ti.maxSharedBytes) +
           " B per block; lower stages, blockK or the block tile";
  if (tr.accumPerThread > ti.maxAccumRegs)
    return "config: " + str(tr.accumPerThread) +
           " fp32 accumulators per thread (blockM*blockN/threads) exceed the " +
           str(ti.maxAccumRegs) + " registers kgen allows on " + tgt +
           "; use more warps or a smaller block tile";

  // Every thread copies the same number of whole vectors per tile.
  int64_t vecsA = int64_t(c.blockM) * c.blockK / tr.vecA;
  int64_t vecsB = int64_t(c.blockN) * c.blockK / tr.vecB;
  if (vecsA % tr.threads != 0 || vecsB % tr.threads != 0)
    return "config: the " + str(c.blockM) + "x" + str(c.blockK) + " A tile (" +
           str(vecsA) + " vectors of " + str(tr.vecA) + ") and the " +
           str(c.blockN) + "x" + str(c.blockK) + " B tile (" + str(vecsB) +
           " vectors of " + str(tr.vecB) + ") must each be a multiple of the " +
           str(tr.threads) + " threads; use fewer warps or a larger tile";

  // A swizzled layout needs each tile's contiguous shared-memory row to be a
  // power of two of 16-byte chunks, at least two: power-of-two blocks with
  // blockK >= 16 and 2-byte elements always give that.
  return std::nullopt;
}

} // namespace kgen
