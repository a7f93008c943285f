//===- Attention.cpp - Attention problems, traits and limits --------------===//
//
// Every rule templates/attention/attention.h relies on is checked here, once,
// with a message naming the field, its value and the fix; the emitter
// assumes a config that passed.
//
//===----------------------------------------------------------------------===//

#include "kgen/Attention.h"

#include <algorithm>

namespace kgen {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
bool isPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The rows of one MMA tile: mma.sync m16n8k16 on NVIDIA, MFMA 32x32x8 on
/// AMD (the template's S^T = K Q^T puts 32 queries in a wave's tile).
int atomRows(Target t) { return targetInfo(t).vendor == Vendor::AMD ? 32 : 16; }

/// fp32 registers per thread for O and S. The attention kernels keep more
/// live accumulators than the GEMM's 128: O is the whole head dim. 192 of
/// sm_80/90's 255 registers still leaves room for P, Q and addresses
/// (FlashAttention-2 runs D = 256 at 128 + 32).
int maxAttentionAccum(Target t) {
  return targetInfo(t).vendor == Vendor::AMD ? 256 : 192;
}
/// The rules of templates/attention/attention_sm90.h.
std::optional<std::string> checkWgmmaConfig(const AttentionProblem &p,
                                            const AttentionConfig &c,
                                            Target t) {
  const std::string tgt(toString(t));
  if (t != Target::SM90A)
    return "config: loop = wgmma needs sm_90a (TMA and wgmma), not " + tgt +
           "; use loop = tiled";
  if (p.varlen)
    return std::string("config: loop = wgmma does not take varlen problems "
                       "(its tensor maps address whole sequences); use "
                       "loop = tiled");
  if (c.packGqa && c.persistent)
    return std::string("config: loop = wgmma packs GQA heads on the "
                       "one-block-per-row-block grid only; use persistent = 0 "
                       "or pack_gqa = 0");
  if (c.packGqa && c.blockM % (p.headsQ / p.headsKv) != 0)
    return "config: loop = wgmma with pack_gqa loads Q as (dims, g heads, "
           "blockM / g queries): blockM = " +
           str(c.blockM) + " must be a multiple of g = headsQ / headsKv = " +
           str(p.headsQ / p.headsKv) + "; use pack_gqa = 0";
  if (c.preloadV)
    return std::string("config: loop = wgmma waits for V on its own barrier; "
                       "use preload_v = 0");
  for (auto [name, d] :
       {std::pair{"headDimQk", p.headDimQk}, {"headDimV", p.headDimV}})
    if (d % 64 != 0)
      return std::string("config: loop = wgmma needs head dims that are "
                         "multiples of 64 (128-byte swizzle rows); ") +
             name + " = " + str(d) + "; use loop = tiled";
  if (c.blockM != 64 && c.blockM != 128 && c.blockM != 192)
    return "config: loop = wgmma takes blockM = 64, 128 or 192 (one to three "
           "consumer warpgroups of 64 rows), not " +
           str(c.blockM);
  if (c.warps != c.blockM / 16)
    return "config: loop = wgmma has warps = blockM / 16 = " +
           str(c.blockM / 16) + " consumer warps, not " + str(c.warps);
  if (c.blockN != 64 && c.blockN != 128)
    return "config: loop = wgmma takes blockN = 64 or 128 (wgmma N), not " +
           str(c.blockN);
  if (isFp8(p.dtype) && c.blockN != 128)
    return "config: fp8 inputs take blockN = 128 (P V's k32 steps read V "
           "transposed, 128 keys to a 128-byte row), not " +
           str(c.blockN);
  // O, S and P (16-bit pairs: blockN / 4 registers; fp8 half that) within
  // the consumers' registers (240 each with one or two consumer warpgroups, 160
  // with three; see attention_sm90.h), with room for addresses and the row
  // statistics.
  const int regs =
      p.headDimV / 2 + c.blockN / 2 + c.blockN / (isFp8(p.dtype) ? 8 : 4);
  const int fit = c.blockM == 192 ? 128 : 176;
  if (regs > fit)
    return "config: loop = wgmma keeps O, S and P in " + str(regs) +
           " registers per thread (headDimV / 2 + blockN * 3 / 4), past the " +
           str(fit) + " that fit the consumers' " +
           (c.blockM == 192 ? "160" : "240") + "; lower blockN" +
           (c.blockM == 192 ? " or blockM" : "");
  return std::nullopt;
}

} // namespace

std::string_view toString(AttentionLayout l) {
  return l == AttentionLayout::BSHD ? "bshd" : "bhsd";
}

std::optional<AttentionLayout> parseAttentionLayout(std::string_view s) {
  if (s == "bshd")
    return AttentionLayout::BSHD;
  if (s == "bhsd")
    return AttentionLayout::BHSD;
  return std::nullopt;
}

std::string_view toString(AttentionLoop l) {
  return l == AttentionLoop::Wgmma ? "wgmma" : "tiled";
}

std::optional<AttentionLoop> parseAttentionLoop(std::string_view s) {
  if (s == "tiled")
    return AttentionLoop::Tiled;
  if (s == "wgmma")
    return AttentionLoop::Wgmma;
  return std::nullopt;
}

AttentionTraits attentionTraits(const AttentionProblem &p,
                                const AttentionConfig &c, Target t) {
  const TargetInfo &ti = targetInfo(t);
  AttentionTraits tr;
  if (c.loop == AttentionLoop::Wgmma) {
    // templates/attention/attention_sm90.h Shape: the consumer warps plus a
    // producer warpgroup; Q, then kStages of K and V, unpadded (swizzled),
    // after 1024 B of alignment slack, then 1 + 4 * stages mbarriers.
    tr.threads = (c.warps + 4) * 32;
    // The persistent grid's Q has an "empty" barrier as well, and two
    // 4-byte slots for the work tile's index (the dynamic schedule). fp8's
    // stages hold V as loaded beside V^T (transposeV), with a barrier
    // each, and a 4-byte stop flag each (two to an 8-byte slot).
    const bool fp8 = isFp8(p.dtype);
    const int64_t barriers =
        8 * (1 + 4 * int64_t(c.stages) + (c.persistent ? 2 : 0) +
             (fp8 ? c.stages + (c.stages + 1) / 2 : 0));
    int64_t smem = 1024 + int64_t(c.blockM) * p.headDimQk * sizeOf(p.dtype) +
                   int64_t(c.stages) * c.blockN *
                       (p.headDimQk + p.headDimV * (fp8 ? 2 : 1)) *
                       sizeOf(p.dtype) +
                   (barriers + 15) / 16 * 16;
    // Without split-KV, and where they fit, each consumer warp's 2 KB slab
    // for the stores of O follows (attention_sm90.h, storeStaged): 16-byte
    // stores of O, which a ring too deep for them goes without.
    const int64_t slabs = int64_t(c.warps) * 16 * 64 * 2; // O is 16-bit
    tr.stageO = c.splits == 1 && smem + slabs <= ti.maxSharedBytes;
    if (tr.stageO)
      smem += slabs;
    tr.smemBytes = int(std::min<int64_t>(smem, INT32_MAX));
    // O and S per consumer thread (a warpgroup's 64 rows over 128 threads).
    tr.accumPerThread = (p.headDimV + c.blockN) / 2;
    tr.masked = true;
    return tr;
  }
  tr.threads = c.warps * ti.waveSize;
  constexpr int kPad = 8; // templates/attention/attention.h kPad
  int64_t q = int64_t(c.blockM) * (p.headDimQk + kPad);
  int64_t kv = int64_t(c.blockN) * (p.headDimQk + kPad + p.headDimV + kPad);
  int64_t smem = (q + int64_t(c.stages) * kv) * sizeOf(p.dtype);
  tr.smemBytes = int(std::min<int64_t>(smem, INT32_MAX));
  // Per thread: the warp's rows times (Dv + blockN) fp32 values over the
  // lanes of the warp.
  int64_t warpRows = c.warps > 0 ? c.blockM / c.warps : 0;
  tr.accumPerThread =
      int(warpRows * (p.headDimV + c.blockN) / std::max(ti.waveSize, 1));
  // Sequence lengths are run-time values, so the last key tile may always
  // be ragged.
  tr.masked = true;
  return tr;
}

std::optional<std::string> checkProblem(const AttentionProblem &p) {
  auto positive = [](const char *name,
                     int64_t v) -> std::optional<std::string> {
    if (v < 1)
      return std::string("attention: ") + name + " = " + str(v) +
             " must be >= 1";
    if (v > INT32_MAX)
      return std::string("attention: ") + name + " = " + str(v) +
             " exceeds 2^31-1 (kernels index with 32-bit values)";
    return std::nullopt;
  };
  for (auto [name, v] : {std::pair<const char *, int64_t>{"batch", p.batch},
                         {"headsQ", p.headsQ},
                         {"headsKv", p.headsKv},
                         {"seqlenQ", p.seqlenQ},
                         {"seqlenK", p.seqlenK}})
    if (auto e = positive(name, v))
      return e;
  if (p.headsQ % p.headsKv != 0)
    return "attention: headsQ = " + str(p.headsQ) +
           " is not a multiple of headsKv = " + str(p.headsKv) +
           " (GQA maps query head h to KV head h / (headsQ / headsKv))";
  for (auto [name, d] :
       {std::pair{"headDimQk", p.headDimQk}, {"headDimV", p.headDimV}})
    if (d != 32 && d != 64 && d != 96 && d != 128 && d != 192 && d != 256)
      return std::string("attention: ") + name + " = " + str(d) +
             " is not one of 32, 64, 96, 128, 192, 256";
  if (p.dtype != DType::BF16 && p.dtype != DType::F16 && !isFp8(p.dtype))
    return "attention: dtype " + std::string(toString(p.dtype)) +
           " is not supported (Q, K, V and O are bf16 or f16, or Q, K and V "
           "e4m3 or e5m2 with a bf16 O; the softmax is fp32 inside)";
  if (isFp8(p.dtype)) {
    if (p.headDimQk != 128 && p.headDimQk != 256)
      return "attention: dtype " + std::string(toString(p.dtype)) +
             " needs headDimQk = 128 or 256 (whole 128-byte swizzle rows of "
             "fp8), not " +
             str(p.headDimQk);
    if (p.headDimV != 128)
      return "attention: dtype " + std::string(toString(p.dtype)) +
             " needs headDimV = 128 (V is read transposed, 128 keys a row, "
             "and O, S and P of wider heads do not fit the registers), "
             "not " +
             str(p.headDimV);
    if (p.varlen)
      return "attention: dtype " + std::string(toString(p.dtype)) +
             " runs on sm_90a's wgmma loop, which does not take varlen "
             "problems; use bf16 or f16";
  }
  for (auto [name, w] :
       {std::pair{"windowLeft", p.windowLeft}, {"windowRight", p.windowRight}})
    if (w < -1)
      return std::string("attention: ") + name + " = " + str(w) +
             " must be >= 0, or -1 for no bound on that side";
  return std::nullopt;
}

std::optional<std::string> checkProblemOnTarget(const AttentionProblem &p,
                                                Target t) {
  if (auto e = checkProblem(p))
    return e;
  if (isFp8(p.dtype) && t != Target::SM90A)
    return "attention: dtype " + std::string(toString(p.dtype)) +
           " needs sm_90a (fp8 wgmma), not " + std::string(toString(t));
  // Every target has bf16/f16 matrix instructions with fp32 sums.
  return std::nullopt;
}

std::optional<std::string> checkConfig(const AttentionProblem &p,
                                       const AttentionConfig &c, Target t) {
  if (auto e = checkProblemOnTarget(p, t))
    return e;
  const TargetInfo &ti = targetInfo(t);
  const std::string tgt(toString(t));
  const bool wgmma = c.loop == AttentionLoop::Wgmma;
  if (wgmma) {
    if (auto e = checkWgmmaConfig(p, c, t))
      return e;
  }
  if (isFp8(p.dtype) && !wgmma)
    return "config: dtype " + std::string(toString(p.dtype)) +
           " runs on loop = wgmma only (fp8 wgmma), not loop = tiled";
  if (c.persistent && !wgmma)
    return std::string("config: persistent = 1 needs loop = wgmma (the "
                       "tiled loop launches one block per row block)");
  if (c.persistent && c.splits > 1)
    return "config: persistent = 1 does not take split-KV (splits = " +
           str(c.splits) +
           "); its combine pass needs one block per split; use splits = 1 "
           "or persistent = 0";
  if (c.persistent &&
      (p.seqlenQ + c.blockM - 1) / c.blockM * p.headsQ * p.batch > INT32_MAX)
    return "config: persistent = 1 counts ceil(seqlenQ / blockM) * headsQ * "
           "batch work tiles in 32 bits, and this problem has more; use "
           "persistent = 0";
  for (auto [name, v] : {std::pair{"blockM", c.blockM},
                         {"blockN", c.blockN},
                         {"warps", c.warps}})
    if (!wgmma && !isPow2(v))
      return std::string("config: ") + name + " = " + str(v) +
             " must be a power of two >= 1";
  const bool amd = ti.vendor == Vendor::AMD;
  if (c.stages < (amd ? 1 : 2) || c.stages > 4)
    return "config: stages = " + str(c.stages) + " must be " +
           (amd ? "1, 2, 3 or 4 on " : "2, 3 or 4 on ") + tgt +
           " (K/V buffers; 2 is double buffering" +
           (amd ? ", 1 loads each tile between two barriers)"
                : "; the cp.async pipeline needs 2)");
  if (c.splits < 1 || c.splits > 128)
    return "config: splits = " + str(c.splits) + " must be between 1 and 128";
  if (c.packGqa && p.seqlenQ * (p.headsQ / p.headsKv) > INT32_MAX)
    return "config: pack_gqa puts seqlenQ * headsQ / headsKv = " +
           str(p.seqlenQ * (p.headsQ / p.headsKv)) +
           " rows in one head's grid, past 2^31-1; leave pack_gqa off";
  const int atom = atomRows(t);
  const char *atomName =
      ti.vendor == Vendor::AMD ? "MFMA 32x32x8" : "mma.sync m16n8k16";
  if (c.blockM % c.warps != 0 || (c.blockM / c.warps) % atom != 0)
    return "config: rows per warp = blockM / warps = " + str(c.blockM) + "/" +
           str(c.warps) + " is not a multiple of " + str(atom) + " (the " +
           atomName + " atom on " + tgt + "); raise blockM or lower warps";
  if (c.blockN % atom != 0)
    return "config: blockN = " + str(c.blockN) + " is not a multiple of " +
           str(atom) + " (the " + atomName + " atom on " + tgt + ")";
  AttentionTraits tr = attentionTraits(p, c, t);
  if (tr.threads > ti.maxThreadsPerBlock)
    return "config: " + str(tr.threads) + " threads per block (" +
           str(c.warps) + " warps of " + str(ti.waveSize) + ") exceed " + tgt +
           "'s " + str(ti.maxThreadsPerBlock) + "; lower warps";
  if (tr.smemBytes > ti.maxSharedBytes)
    return "config: shared memory " + str(tr.smemBytes) + " B exceeds " + tgt +
           "'s " + str(ti.maxSharedBytes) +
           " B per block; lower stages, blockN or blockM";
  if (tr.accumPerThread > maxAttentionAccum(t))
    return "config: " + str(tr.accumPerThread) +
           " fp32 registers per thread for O and S ((blockM / warps) * "
           "(headDimV + blockN) / wave) exceed the " +
           str(maxAttentionAccum(t)) + " kgen allows on " + tgt +
           "; use more warps, a smaller blockM or blockN";
  return std::nullopt;
}

size_t attentionWorkspaceBytes(const AttentionProblem &p,
                               const AttentionConfig &c, int64_t batch,
                               int64_t seqlenQ) {
  if (c.splits <= 1)
    return 0;
  size_t rows =
      size_t(c.splits) * size_t(batch) * size_t(p.headsQ) * size_t(seqlenQ);
  return rows * (size_t(p.headDimV) + 1) * sizeof(float);
}

std::optional<std::string> checkAttentionDescales(const AttentionProblem &p,
                                                  bool given) {
  if (!given || isFp8(p.dtype))
    return std::nullopt;
  return "attention: q_descale, k_descale and v_descale are the per-tensor "
         "factors of fp8 inputs (dtype e4m3 or e5m2), not of " +
         std::string(toString(p.dtype)) + " ones; pass null";
}

DType attentionOutputDType(const AttentionProblem &p) {
  return isFp8(p.dtype) ? DType::BF16 : p.dtype;
}

} // namespace kgen
