//===- MlstmProblem.cpp - mLSTM problems, traits and limits ---------------===//
//
// Every rule templates/mlstm/mlstm.h relies on is checked here, once, with a
// message that names the field, its value and the fix; the emitter assumes
// a config that passed.
//
//===----------------------------------------------------------------------===//

#include "kgen/Mlstm.h"

#include "mlstm/params.h" // chunkTermsBytes: the workspace's chunk terms

#include <algorithm>
#include <cmath>

namespace kgen {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
bool isPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
} // namespace

std::string_view toString(MlstmVariant v) {
  switch (v) {
  case MlstmVariant::Recurrent:
    return "recurrent";
  case MlstmVariant::Fused:
    return "fused";
  case MlstmVariant::TwoPhase:
    return "twophase";
  case MlstmVariant::ChunkPar:
    return "chunkpar";
  }
  return "?";
}

std::optional<MlstmVariant> parseMlstmVariant(std::string_view s) {
  for (MlstmVariant v : {MlstmVariant::Recurrent, MlstmVariant::Fused,
                         MlstmVariant::TwoPhase, MlstmVariant::ChunkPar})
    if (s == toString(v))
      return v;
  return std::nullopt;
}

std::string_view toString(MlstmKernel k) {
  switch (k) {
  case MlstmKernel::Recurrent:
    return "recurrent";
  case MlstmKernel::Fused:
    return "fused";
  case MlstmKernel::States:
    return "states";
  case MlstmKernel::Outputs:
    return "outputs";
  case MlstmKernel::ChunkStates:
    return "chunkstates";
  case MlstmKernel::Combine:
    return "combine";
  case MlstmKernel::GateSums:
    return "gatesums";
  case MlstmKernel::Gates:
    return "gates";
  case MlstmKernel::SegmentStates:
    return "segstates";
  }
  return "?";
}

std::vector<MlstmKernel> mlstmKernels(const MlstmConfig &c) {
  switch (c.variant) {
  case MlstmVariant::Recurrent:
    return {MlstmKernel::Recurrent};
  case MlstmVariant::Fused:
    if (c.wgmma)
      return {MlstmKernel::GateSums, MlstmKernel::Gates,
              MlstmKernel::SegmentStates, MlstmKernel::Combine,
              MlstmKernel::Fused};
    return {MlstmKernel::Fused};
  case MlstmVariant::TwoPhase:
    return {MlstmKernel::States, MlstmKernel::Outputs};
  case MlstmVariant::ChunkPar:
    return {MlstmKernel::ChunkStates, MlstmKernel::Combine,
            MlstmKernel::Outputs};
  }
  return {};
}

MlstmKernel mlstmLeadKernel(const MlstmConfig &c) {
  return c.wgmma ? MlstmKernel::Fused : mlstmKernels(c).front();
}

int mlstmSegments(const MlstmProblem &p, const MlstmConfig &c, int64_t b,
                  int64_t nh, int64_t s) {
  if (c.variant != MlstmVariant::Fused || !c.wgmma || c.chunk <= 0 ||
      c.blockDV <= 0)
    return 1;
  // H100, the 7B heads at B = 1 (32 blocks): one walk of 128 chunks against
  // four of 32 (bench/results). wgmma configs run on sm_90a only.
  const int64_t units = targetInfo(Target::SM90A).computeUnits;
  const int64_t blocks = b * nh * (p.dv / c.blockDV);
  const int64_t chunks = (s + c.chunk - 1) / c.chunk;
  int segments = 1;
  while (2 * blocks * segments <= units && chunks >= 8 * int64_t(segments))
    segments *= 2;
  return segments;
}

namespace {
/// The warp tiles of the three products (ChunkMma<>::kTiles*): the scores'
/// causal tiles, the outputs', the state update's; and their k-steps of 16.
struct MmaTiles {
  int64_t tiles[3], steps[3];
};
MmaTiles mmaTiles(const MlstmProblem &p, const MlstmConfig &c) {
  const int64_t tl = c.chunk / 32, tv = c.blockDV / 32;
  return {{tl * (tl + 1) / 2, tl * tv, p.dqk / 32 * tv},
          {p.dqk / 16, p.dqk / 16, c.chunk / 16}};
}

/// Scratch tiles of a product's partial sums (ChunkMma<>::partials).
int64_t partials(int64_t tiles, int64_t split) {
  return split > 1 ? tiles * split : 0;
}

/// Whether kernel k keeps C in registers (mlstmStateInRegisters), given
/// the update's split.
bool stateInRegisters(const MlstmProblem &p, const MlstmConfig &c,
                      MlstmKernel k, int64_t updateSplit) {
  if (k == MlstmKernel::Outputs)
    return true;
  // A tile is 32 accumulator registers per lane: at most 4 per warp, and
  // 2 at 16 warps (128 registers a thread at 512 threads; the 7B heads'
  // 128-column fused kernel spills a little there already).
  const int64_t tiles = mmaTiles(p, c).tiles[2];
  const int64_t perWarp = std::min<int64_t>(4, 32 / std::max(1, c.warps));
  return updateSplit == 1 && tiles <= perWarp * int64_t(c.warps);
}

/// Must match ChunkMma<>::kBytes: the fp32 front (Chunk's, without Q, K,
/// V, and without C where it is in registers), then the 16-bit operands
/// with rows padded by 8 elements; P (scores, outputs) and diag(w) V
/// (update) share one region; then the split-k scratch, 4 KiB per 32x32
/// fp32 partial tile.
int64_t mmaSmemBytes(const MlstmProblem &p, const MlstmConfig &c, MlstmKernel k,
                     const int64_t (&split)[3]) {
  const int64_t L = c.chunk;
  const int64_t floats =
      (stateInRegisters(p, c, k, split[2]) ? 0 : int64_t(p.dqk) * c.blockDV) +
      p.dqk + L * L + 8 * L + 8;
  const int64_t rq = p.dqk + 8, rv = c.blockDV + 8, rl = L + 8;
  const MmaTiles mt = mmaTiles(p, c);
  int64_t scratchTiles = 0;
  for (int x = 0; x < 3; ++x)
    scratchTiles = std::max(scratchTiles, partials(mt.tiles[x], split[x]));
  return (4 * floats + 15) / 16 * 16 +
         2 * (2 * L * rq + L * rv + std::max(L * rl, L * rv) + p.dqk * rv) +
         4096 * scratchTiles;
}

bool mmaShapes(const MlstmProblem &p, const MlstmConfig &c, MlstmKernel k) {
  return k != MlstmKernel::Recurrent && k != MlstmKernel::Combine &&
         p.dtype != DType::F32 && c.chunk % 32 == 0 && c.chunk > 0 &&
         c.blockDV % 32 == 0 && c.blockDV > 0 && p.dqk % 32 == 0;
}

/// The splits (scores, outputs, update) before the shared-memory check.
void widestSplits(const MlstmProblem &p, const MlstmConfig &c,
                  int64_t (&split)[3]) {
  const MmaTiles mt = mmaTiles(p, c);
  for (int x = 0; x < 3; ++x) {
    split[x] = 1;
    while (2 * split[x] * mt.tiles[x] <= c.warps && 2 * split[x] <= mt.steps[x])
      split[x] *= 2;
  }
}

/// Halves the split with the most partial tiles until the layout fits;
/// false when even no split does not.
bool fitSplits(const MlstmProblem &p, const MlstmConfig &c, MlstmKernel k,
               Target t, int64_t (&split)[3]) {
  widestSplits(p, c, split);
  const MmaTiles mt = mmaTiles(p, c);
  while (mmaSmemBytes(p, c, k, split) > targetInfo(t).maxSharedBytes) {
    int worst = -1;
    for (int x = 0; x < 3; ++x)
      if (split[x] > 1 &&
          (worst < 0 || partials(mt.tiles[x], split[x]) >
                            partials(mt.tiles[worst], split[worst])))
        worst = x;
    if (worst < 0)
      return false;
    split[worst] /= 2;
  }
  return true;
}
} // namespace

/// Must match ChunkWgmma<>::kBytes: up to 1008 bytes of slack to a
/// 1024-byte boundary, Q and K (L x dqk; K with 8 rows more a 64-dim
/// block: n), V twice and diag(w) V (L x 128), C's 16-bit copy (dqk x 128),
/// h's staging (L x 128), w's parts (8 x L), all 16-bit; then Chunk's
/// fp32 front without C.
int64_t wgmmaSmemBytes(const MlstmProblem &p, const MlstmConfig &c) {
  const int64_t L = c.chunk;
  // Chunk's fp32 front, its P region holding ChunkWgmma's scratch.
  const int64_t floats = p.dqk + mlstm::wgmmaScratchFloats(int(L)) + 8 * L + 8;
  return 1024 +
         2 * (2 * L * p.dqk + 8 * p.dqk + 4 * L * c.blockDV +
              p.dqk * c.blockDV + 8 * L) +
         (4 * floats + 15) / 16 * 16;
}

MlstmSplitK mlstmSplitK(const MlstmProblem &p, const MlstmConfig &c,
                        MlstmKernel k, Target t) {
  int64_t split[3];
  if (c.wgmma || !mmaShapes(p, c, k) || !fitSplits(p, c, k, t, split))
    return {1, 1, 1};
  return {int(split[0]), int(split[1]), int(split[2])};
}

bool mlstmStateInRegisters(const MlstmProblem &p, const MlstmConfig &c,
                           MlstmKernel k, Target t) {
  if (c.wgmma) // its walks keep C in the update's accumulators
    return k == MlstmKernel::Fused || k == MlstmKernel::SegmentStates;
  int64_t split[3];
  return mmaShapes(p, c, k) && fitSplits(p, c, k, t, split) &&
         stateInRegisters(p, c, k, split[2]);
}

bool mlstmUsesMma(const MlstmProblem &p, const MlstmConfig &c, MlstmKernel k,
                  Target t) {
  if (c.wgmma) // its walks on wgmma; the pre-pass and combine on fp32
    return k == MlstmKernel::Fused || k == MlstmKernel::SegmentStates;
  int64_t split[3];
  return mmaShapes(p, c, k) && fitSplits(p, c, k, t, split);
}

MlstmTraits mlstmTraits(const MlstmProblem &p, const MlstmConfig &c,
                        MlstmKernel k, Target t) {
  MlstmTraits tr{};
  tr.threads = c.warps * targetInfo(t).waveSize;
  tr.slices = c.blockDV > 0 ? p.dv / c.blockDV : 0;
  if (k == MlstmKernel::Recurrent) {
    // Must match the static_assert in recurrent<>.
    // Threads take 4 columns each; n and q, k in shared memory.
    int groups = c.blockDV >= 4 ? tr.threads / (c.blockDV / 4) : 0;
    tr.rows = groups > 0 ? p.dqk / groups : 0;
    // Column partials per 32-lane group (or row group, 32+ column groups).
    const int lanes32 = (tr.threads + 31) / 32;
    const int parts = c.blockDV / 4 < 32 ? lanes32 : groups;
    const int zpart = (lanes32 + 3) / 4 * 4;
    tr.smemBytes =
        4 * (3 * p.dqk + c.blockDV + 2 * (parts * c.blockDV + zpart));
    if (tr.rows > 0)
      tr.minBlocks = std::max(1, 65536 / (tr.threads * (4 * tr.rows + 32)));
  } else if (isGatePrePass(k)) {
    // Must match gateSums<> and gateTerms<>: one warp a chunk, 4 chunks a
    // block, no shared memory.
    tr.threads = 4 * targetInfo(t).waveSize;
    tr.smemBytes = 0;
    tr.rows = 0;
  } else if (k == MlstmKernel::Combine) {
    // Must match combine<>: 256 threads whatever the config's warps (it is
    // elementwise; more, smaller blocks spread one head over more units),
    // no shared memory.
    tr.threads = 256;
    tr.smemBytes = 0;
    tr.rows = 0;
  } else {
    // Must match Chunk<>::kBytes.
    int64_t L = c.chunk;
    // P is fp64 for fp32 inputs (Chunk<>::Acc).
    int64_t accWords = p.dtype == DType::F32 ? 2 : 1;
    int64_t floats =
        int64_t(p.dqk) * c.blockDV + p.dqk + L * L * accWords + 8 * L + 8;
    // Q and K rows padded by one 32-bit word (Chunk<>::kRow).
    int64_t row = p.dqk + 4 / sizeOf(p.dtype);
    int64_t bytes =
        4 * floats + int64_t(sizeOf(p.dtype)) * (2 * L * row + L * c.blockDV);
    tr.smemBytes = int(std::min<int64_t>((bytes + 15) / 16 * 16, INT32_MAX));
    if (c.wgmma) {
      tr.smemBytes = int(wgmmaSmemBytes(p, c));
    } else if (mlstmUsesMma(p, c, k, t)) {
      const MlstmSplitK sk = mlstmSplitK(p, c, k, t);
      const int64_t split[3] = {sk.scores, sk.outputs, sk.update};
      tr.smemBytes = int(mmaSmemBytes(p, c, k, split));
    }
    tr.rows = 0;
  }
  return tr;
}

std::optional<std::string> checkProblem(const MlstmProblem &p) {
  for (auto [name, v] : {std::pair{"dqk", p.dqk}, {"dv", p.dv}})
    if (v < 64 || v > 512 || v % 16 != 0)
      return std::string("mlstm: ") + name + " = " + str(v) +
             " must be a multiple of 16 between 64 and 512";
  for (auto [name, v] : {std::pair{"b", p.b}, {"nh", p.nh}, {"s", p.s}}) {
    if (v < 1)
      return std::string("mlstm: ") + name + " = " + str(v) + " must be >= 1";
    if (v > INT32_MAX)
      return std::string("mlstm: ") + name + " = " + str(v) +
             " exceeds 2^31-1 (kernels index with 32-bit extents)";
  }
  if (p.b * p.nh > 65535)
    return "mlstm: b * nh = " + str(p.b * p.nh) +
           " exceeds 65535 (one grid row per head); split the batch";
  if (!std::isfinite(p.eps) || p.eps < 0)
    return "mlstm: eps = " + std::to_string(p.eps) + " must be finite and >= 0";
  if (isFp8(p.dtype))
    return "mlstm: dtype " + std::string(toString(p.dtype)) +
           " is not supported (q, k, v and the gates are bf16, f16 or f32)";
  return std::nullopt;
}

std::optional<std::string> checkConfig(const MlstmProblem &p,
                                       const MlstmConfig &c, Target t) {
  if (auto e = checkProblem(p))
    return e;
  const TargetInfo &ti = targetInfo(t);
  const std::string tgt(toString(t));
  if (!isPow2(c.blockDV) || c.blockDV < 8 || c.blockDV > p.dv ||
      p.dv % c.blockDV != 0)
    return "config: blockDV = " + str(c.blockDV) +
           " must be a power of two >= 8 that divides dv = " + str(p.dv);
  // The wgmma kernel's warps are fixed (checked below).
  if (!c.wgmma && (!isPow2(c.warps) || c.warps > 16))
    return "config: warps = " + str(c.warps) +
           " must be a power of two between 1 and 16";
  if (c.variant != MlstmVariant::Recurrent &&
      (!isPow2(c.chunk) || c.chunk < 16 || c.chunk > 128))
    return "config: chunk = " + str(c.chunk) +
           " must be 16, 32, 64 or 128 for the " +
           std::string(toString(c.variant)) + " variant";
  if (c.wgmma) {
    if (t != Target::SM90A)
      return "config: wgmma = true needs sm_90a, not " + tgt;
    if (c.variant != MlstmVariant::Fused)
      return "config: wgmma = true is a fused kernel; variant = " +
             std::string(toString(c.variant)) + " has none";
    if (p.dtype == DType::F32)
      return "config: wgmma = true takes bf16 or f16 inputs, not f32";
    if (c.chunk != 64 || c.blockDV != 128 || c.warps != 12)
      return "config: wgmma = true runs chunk 64, blockDV 128 and 12 warps "
             "(two state warpgroups and an output one), not chunk " +
             str(c.chunk) + ", blockDV " + str(c.blockDV) + ", warps " +
             str(c.warps);
    if (p.dqk % 64 != 0 || p.dqk > 256)
      return "config: wgmma = true needs dqk a multiple of 64 up to 256 (C's "
             "64-row tiles in two state warpgroups' registers), not " +
             str(p.dqk);
  }
  for (MlstmKernel k : mlstmKernels(c)) {
    MlstmTraits tr = mlstmTraits(p, c, k, t);
    if (tr.threads > ti.maxThreadsPerBlock)
      return "config: " + str(tr.threads) + " threads per block exceed " + tgt +
             "'s " + str(ti.maxThreadsPerBlock) + "; lower warps";
    if (k == MlstmKernel::Recurrent) {
      const int cols = c.blockDV / 4;
      if (tr.threads % cols != 0 || tr.threads / cols > p.dqk ||
          p.dqk % (tr.threads / cols) != 0)
        return "config: the recurrent kernel tiles the " + str(p.dqk) + "x" +
               str(c.blockDV) + " C slice with " + str(tr.threads) +
               " threads of 4 columns each: threads must be a multiple of "
               "blockDV / 4 and dqk a multiple of threads / (blockDV / 4); "
               "change warps or blockDV";
      if (4 * tr.rows > ti.maxAccumRegs)
        return "config: " + str(4 * tr.rows) +
               " fp32 state registers per thread (4 columns of dqk * "
               "blockDV / threads / 4 rows) exceed the " +
               str(ti.maxAccumRegs) + " kgen allows on " + tgt +
               "; use more warps or a smaller blockDV";
    }
    if (tr.smemBytes > ti.maxSharedBytes)
      return "config: shared memory " + str(tr.smemBytes) + " B of the " +
             std::string(toString(k)) + " kernel exceeds " + tgt + "'s " +
             str(ti.maxSharedBytes) + " B per block; lower chunk or blockDV";
  }
  return std::nullopt;
}

MlstmWorkspaceLayout mlstmWorkspaceLayout(const MlstmProblem &p,
                                          const MlstmConfig &c, int64_t b,
                                          int64_t nh, int64_t s) {
  MlstmWorkspaceLayout l{};
  const bool wgmmaFused = c.variant == MlstmVariant::Fused && c.wgmma;
  if (!wgmmaFused && c.variant != MlstmVariant::TwoPhase &&
      c.variant != MlstmVariant::ChunkPar)
    return l;
  size_t per = size_t(b * nh * ((s + c.chunk - 1) / c.chunk));
  size_t at = 0; // where the states start
  if (wgmmaFused) {
    // The chunk terms, then, where the sequence is split, the states of
    // the segments as the chunk-parallel variant's of the chunks.
    l.gates = 0;
    l.bytes = per * size_t(mlstm::chunkTermsBytes(c.chunk));
    const int segments = mlstmSegments(p, c, b, nh, s);
    if (segments == 1)
      return l;
    at = l.bytes; // a multiple of 16 (chunkTermsBytes)
    per = size_t(b * nh * segments);
  }
  // The fp64 pairs first: the fp32 arrays after them stay 16-byte aligned.
  l.gm = at;
  l.c = at + (c.variant == MlstmVariant::ChunkPar || wgmmaFused
                  ? per * 2 * sizeof(double)
                  : 0);
  l.n = l.c + per * size_t(p.dqk) * p.dv * sizeof(float);
  l.m = l.n + per * size_t(p.dqk) * sizeof(float);
  l.bytes = l.m + per * sizeof(float);
  return l;
}

size_t mlstmWorkspaceBytes(const MlstmProblem &p, const MlstmConfig &c,
                           int64_t b, int64_t nh, int64_t s) {
  return mlstmWorkspaceLayout(p, c, b, nh, s).bytes;
}

double mlstmFlops(const MlstmProblem &p, int chunk) {
  // Per token of the chunkwise form: q k^T and P v over a full chunk
  // (2 L (DQK + DV)), q^T C and the state update k v^T (4 DQK DV).
  double perToken = 2.0 * chunk * (p.dqk + p.dv) + 4.0 * p.dqk * p.dv;
  return double(p.b) * p.nh * p.s * perToken;
}

} // namespace kgen
