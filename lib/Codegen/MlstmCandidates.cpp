//===- MlstmCandidates.cpp - mLSTM configs, ranked by a cost model --------===//
//
// The space: the four variants x chunk 16..128 x blockDV 16..512 x 2, 4, 8
// or 16 warps (chunk-parallel only where chunkParallelPays). Every combination
// that passes checkConfig is ranked by the model below, and the best few of
// each variant are kept, so the dispatcher (and the compile test) always sees
// every variant the target allows; the fused kernel on wgmma is kept
// wherever it is valid.
//
// The model, in cycles of one GPU: a kernel runs its blocks in waves of
// (compute units x resident blocks per unit); a wave's time is its resident
// blocks' FMAs over the 128 fp32 lanes of a unit (or their threads, if
// fewer), plus a
// fixed latency per barrier-separated step (global loads, the barrier, the
// one-warp gate scan), plus its global traffic at the GPU's bandwidth
// share. The numbers are rough on purpose: they order configs, measurements
// decide.
//
// Tensor-core kernels (mlstmUsesMma) run their four products at a unit's
// 16-bit matrix rate instead -- assumed 1024 FMAs per cycle per SM with
// mma.sync on sm_90a (about half of wgmma's peak), 768 on sm_80 (A100's
// mma.sync in practice), 512 per CU for MFMA 32x32x8 on gfx90a -- over whole
// 32x32 tiles (the causal half of the scores skipped) and at that rate only
// with ~8 warps per unit in flight; the scalar rest (normalizer, the exp per
// score, the rounding of C and diag(w) V, n's update) stays on the fp32 lanes.
//
//===----------------------------------------------------------------------===//

#include "kgen/Mlstm.h"

#include "mlstm/params.h" // chunkTermsBytes

#include <algorithm>
#include <cmath>

namespace kgen {

namespace {

constexpr size_t kPerVariant = 4;
/// The chunk-parallel variant keeps more: the model has not yet been held
/// against its measurements, and its configs tie often (phase A and the
/// outputs kernel of 8 and 16 warps cost the same to it).
constexpr size_t kPerChunkPar = 6;

/// Global bytes per cycle of the whole GPU (HBM at ~1.7 GHz).
double bytesPerCycle(Target t) {
  return t == Target::SM80 ? 1200 : t == Target::GFX90A ? 950 : 2800;
}

constexpr double kStepLatency = 800; // cycles per barrier-separated step

/// The recurrent kernel at small S (the decoding step above all) moves the
/// state C once in and once out and does little else: its cost is that
/// traffic at the GPU's bandwidth, or at the share of it its blocks reach
/// when there are fewer blocks than units, against its arithmetic and
/// barrier-separated steps (2 a token) in waves. Rows of C are read in
/// kBlockDV * 4-byte runs; runs under 256 bytes lose DRAM efficiency
/// (H200 step, B = 64: 128-byte runs ~3% slower than 256-byte ones; B = 1:
/// 64-byte runs 22% slower than 128-byte ones).
double recurrentCycles(const MlstmProblem &p, const MlstmConfig &c,
                       const MlstmTraits &tr, Target t) {
  const double units = targetInfo(t).computeUnits;
  const double vb = c.blockDV, S = double(p.s);
  const double blocks = double(p.b) * p.nh * tr.slices;
  // Registers: as the kernel is compiled for (MlstmTraits::minBlocks).
  const double resident =
      std::max(1.0, std::min({double(std::max(tr.minBlocks, 1)),
                              std::floor(2048.0 / tr.threads),
                              std::floor(double(targetInfo(t).maxSharedBytes) /
                                         std::max(tr.smemBytes, 1))}));
  const double perUnit = std::ceil(blocks / units);
  const double waves = std::ceil(blocks / (units * resident));
  const double run = vb * 4;
  const double runFactor = run >= 256 ? 1 : run >= 128 ? 1.03 : 1.1;
  const double stateCopies = (p.initialState ? 1 : 0) + (p.finalState ? 1 : 0);
  const double bytes = blocks * (p.dqk * vb * 4 * stateCopies +
                                 S * (2 * p.dqk + vb) * sizeOf(p.dtype));
  // One block a unit: its load, math and store phases overlap no other
  // block's (H200 step, B = 64: one resident block 2-3% behind two).
  const double alone = resident < 2 ? 1.03 : 1;
  const double memory = bytes * runFactor * alone / bytesPerCycle(t) *
                        std::max(1.0, units / blocks);
  const double compute =
      perUnit * S * 3 * p.dqk * vb /
      std::min(128.0, tr.threads * std::min(resident, perUnit));
  return std::max(memory, compute + waves * 2 * S * kStepLatency);
}

double kernelCycles(const MlstmProblem &p, const MlstmConfig &c, MlstmKernel k,
                    Target t) {
  const MlstmTraits tr = mlstmTraits(p, c, k, t);
  if (k == MlstmKernel::Recurrent)
    return recurrentCycles(p, c, tr, t);
  const double L = c.chunk, dqk = p.dqk, vb = c.blockDV, dv = p.dv;
  const double S = double(p.s), bh = double(p.b) * p.nh;
  const double chunks = std::ceil(S / std::max(1, c.chunk));
  const double lanes = std::min(tr.threads, 128);
  const int resident = std::max(
      1, std::min(targetInfo(t).maxSharedBytes / std::max(tr.smemBytes, 1),
                  2048 / tr.threads));
  double blocks = bh * tr.slices, fmas = 0, steps = 0;
  double bytes = bh * S * (2 * dqk + dv) * sizeOf(p.dtype) * 2;
  // Per chunk and block: scores L*L/2*dqk, normalizer L*dqk, outputs
  // L*vb*dqk + L*L/2*vb; state update L*dqk*vb.
  const double outFmas =
      L * L / 2 * dqk + L * dqk + L * vb * dqk + L * L / 2 * vb;
  const double updFmas = L * dqk * vb + L * dqk;
  const double wsBytes = bh * chunks * (dqk * dv + dqk) * 4;
  double outFmasOverride = -1; // the scalar work of a tensor-core kernel
  // Tensor-core products per chunk and block, as FMAs.
  double mmaFmas = 0, mmaRate = 1;
  if (c.wgmma && k == MlstmKernel::Fused) {
    // mlstm_sm90.h: the output warpgroup's scores, Q C and P V, the state
    // warpgroups' update, at wgmma's rate (2048 FMAs a cycle per SM).
    mmaFmas = chunks * (L * L * dqk + L * vb * dqk + L * L * vb + dqk * vb * L);
    outFmasOverride = chunks * (L * dqk + 2 * L * L + 2 * L * vb + L * dqk);
    mmaRate = 2048;
  } else if (mlstmUsesMma(p, c, k, t)) {
    const double tiles = L / 32;
    const double scoresM = (tiles * (tiles + 1) / 2) * 32 * 32 * dqk;
    const double outM = L * vb * dqk + (tiles + 1) / 2 * L * vb * L;
    const double updM = dqk * vb * L;
    const double scalarOut = L * dqk + 8 * L * L + L * vb;
    const double scalarUpd = 2 * dqk * vb + 2 * L * vb + L * dqk;
    mmaRate = t == Target::SM90A ? 1024 : t == Target::SM80 ? 768 : 512;
    switch (k) {
    case MlstmKernel::Fused:
      mmaFmas = chunks * (scoresM + outM + updM);
      outFmasOverride = chunks * (scalarOut + scalarUpd);
      break;
    case MlstmKernel::States:
      mmaFmas = chunks * updM;
      outFmasOverride = chunks * scalarUpd;
      break;
    case MlstmKernel::ChunkStates:
      mmaFmas = updM;
      outFmasOverride = scalarUpd;
      break;
    case MlstmKernel::Outputs:
      mmaFmas = scoresM + outM;
      outFmasOverride = scalarOut + 2 * dqk * vb;
      break;
    default:
      break;
    }
  }
  switch (k) {
  case MlstmKernel::Recurrent: // recurrentCycles, above
    break;
  case MlstmKernel::Fused:
    fmas = chunks * (outFmas + updFmas);
    steps = 5 * chunks;
    break;
  case MlstmKernel::States:
    fmas = chunks * updFmas;
    steps = 2 * chunks;
    bytes = bh * S * (dqk + dv) * sizeOf(p.dtype) + wsBytes;
    break;
  case MlstmKernel::Outputs:
    blocks *= chunks;
    fmas = outFmas;
    steps = 4;
    bytes = bh * S * (2 * dqk + 2 * dv) * sizeOf(p.dtype) + wsBytes;
    break;
  case MlstmKernel::ChunkStates:
    blocks *= chunks;
    fmas = updFmas;
    steps = 3;
    bytes = bh * S * (dqk + dv) * sizeOf(p.dtype) + wsBytes;
    break;
  case MlstmKernel::SegmentStates: // costed through Fused (mlstmModelCost)
    return 0;
  case MlstmKernel::GateSums:
    // One warp per chunk: the gates in, two sums out, a short chain.
    blocks = bh * std::ceil(chunks / double(tr.threads / 32));
    steps = 2;
    bytes = bh * S * 2 * sizeOf(p.dtype);
    break;
  case MlstmKernel::Gates:
    // One warp per chunk: the gates and the sums before it in (a lane
    // composes chunks / 32), the terms out.
    blocks = bh * std::ceil(chunks / double(tr.threads / 32));
    steps = 3 + std::ceil(chunks / 32.0);
    bytes = bh * S * 2 * sizeOf(p.dtype) +
            bh * chunks * mlstm::chunkTermsBytes(c.chunk);
    break;
  case MlstmKernel::Combine:
    // One thread per element of C and n: a few FMAs and two exps per chunk;
    // the chunks' loads go out kBatch (8) at a time, so the chain is a load
    // latency per 8 chunks. Reads and rewrites the per-chunk states.
    blocks = bh * std::ceil((dqk * dv + dqk) / double(tr.threads));
    fmas = chunks * 8 * tr.threads;
    steps = 2 + std::ceil(chunks / 8);
    bytes = 2 * wsBytes;
    break;
  }
  if (outFmasOverride >= 0)
    fmas = outFmasOverride;
  const double waves =
      std::ceil(blocks / (targetInfo(t).computeUnits * resident));
  // A unit's resident blocks share its fp32 lanes and its matrix units;
  // their barrier latencies overlap.
  const double shared = std::min<double>(resident, blocks);
  // mma.sync / MFMA reach their rate with ~8 warps per unit in flight.
  const double mmaIssue = std::min(1.0, shared * c.warps / 8.0);
  // C in registers costs 32 a thread per tile a warp owns, on top of ~90
  // the kernel needs besides; past the per-thread budget it spills. Fits
  // what ptxas and the H200 showed: one tile on 16 warps and four on 8 run
  // without spills; two on 16 warps (the 7B heads' 128-column slices)
  // spill at the 128-register cap and ran 27% slower than on 8 warps.
  double spill = 1;
  if (k != MlstmKernel::Outputs && mlstmStateInRegisters(p, c, k, t)) {
    const double owned = std::ceil(dqk / 32 * (vb / 32) / c.warps);
    if (90 + 32 * owned > std::min(255.0, 65536.0 / tr.threads))
      spill = 1.3;
  }
  // The per-chunk kernels (a block per chunk and slice, one short pass
  // each) run about twice what the terms above say, relative to the rest:
  // ncu on the H200, 64/64 B=1 S=2048 chunkpar c128 d64 w16, measured
  // chunkStates and outputs at ~3x their cycles here and combine at ~1.5x.
  // Unscaled, the heuristic took c128 w16 on all six 64/64 small-head
  // shapes and lost 10-23% where c64 w4 won (many chunk blocks); scaled, it
  // picks the tuned winner on all twelve small-head shapes of the bench.
  const double perChunk =
      k == MlstmKernel::Outputs || k == MlstmKernel::ChunkStates ? 2 : 1;
  return perChunk * waves *
             (shared * fmas / std::min(128.0, shared * lanes) +
              shared * mmaFmas * spill / (mmaRate * mmaIssue) +
              steps * kStepLatency) +
         bytes / bytesPerCycle(t);
}

/// The chunk-parallel variant is offered where the two-phase states kernel
/// would walk a long chain of chunks in few blocks: at least 4 chunks, and
/// fewer heads x slices than the GPU has units (otherwise the heads alone
/// fill it, and the chunk-parallel form only adds a pass over the states).
bool chunkParallelPays(const MlstmProblem &p, const MlstmConfig &c, Target t) {
  if (c.chunk <= 0 || c.blockDV <= 0)
    return false;
  return p.s >= 4 * int64_t(c.chunk) &&
         p.b * p.nh * (p.dv / c.blockDV) < targetInfo(t).computeUnits;
}

/// The fused chunkwise kernel on wgmma (its one shape, MlstmConfig::wgmma).
MlstmConfig wgmmaFused() {
  return MlstmConfig{MlstmVariant::Fused, 64, 128, 12, true};
}

} // namespace

double mlstmModelCost(const MlstmProblem &p, const MlstmConfig &c, Target t) {
  if (c.wgmma) {
    // The pre-pass, then the fused walk; split (mlstmSegments), the walk
    // over segments x heads of S / segments tokens, the segment states as
    // ~0.6 of that (no scores, no Q C, no h), and combine over the
    // segments.
    const int segments = mlstmSegments(p, c, p.b, p.nh, p.s);
    const double gates = kernelCycles(p, c, MlstmKernel::GateSums, t) +
                         kernelCycles(p, c, MlstmKernel::Gates, t);
    if (segments == 1)
      return gates + kernelCycles(p, c, MlstmKernel::Fused, t);
    MlstmProblem part = p, units = p;
    part.b = p.b * segments;
    part.s = (p.s + segments - 1) / segments;
    units.s = int64_t(segments) * c.chunk;
    return gates + 1.6 * kernelCycles(part, c, MlstmKernel::Fused, t) +
           kernelCycles(units, c, MlstmKernel::Combine, t);
  }
  double cycles = 0;
  for (MlstmKernel k : mlstmKernels(c))
    cycles += kernelCycles(p, c, k, t);
  return cycles;
}

std::vector<MlstmConfig> enumerateConfigs(const MlstmProblem &p, Target t) {
  std::vector<MlstmConfig> out;
  for (MlstmVariant v : {MlstmVariant::Recurrent, MlstmVariant::Fused,
                         MlstmVariant::TwoPhase, MlstmVariant::ChunkPar}) {
    std::vector<std::pair<double, MlstmConfig>> ranked;
    const bool recurrent = v == MlstmVariant::Recurrent;
    for (int chunk : {16, 32, 64, 128}) {
      if (recurrent && chunk != 16)
        continue;
      for (int vb : {16, 32, 64, 128, 256, 512})
        // Most warps first, so that a tie (the model's mma issue rate
        // saturates at 8 warps) goes to the larger block: measured on an
        // H200, 16 warps won the 7B shapes and the small heads with few
        // chunk blocks, the 8-warp twins 9-19% slower there. Where 4 warps
        // win (many chunk blocks, 64/64 at B = 4) the per-chunk kernels'
        // cost in kernelCycles ranks them first, not a tie.
        for (int warps : {16, 8, 4, 2}) {
          MlstmConfig c{v, recurrent ? 0 : chunk, vb, warps};
          if (v == MlstmVariant::ChunkPar && !chunkParallelPays(p, c, t))
            continue;
          if (!checkConfig(p, c, t))
            ranked.push_back({mlstmModelCost(p, c, t), c});
        }
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](auto &a, auto &b) { return a.first < b.first; });
    const size_t keep =
        v == MlstmVariant::ChunkPar ? kPerChunkPar : kPerVariant;
    for (size_t i = 0; i < ranked.size() && i < keep; ++i)
      out.push_back(ranked[i].second);
    // The fused kernel on wgmma is always offered where valid: the model
    // ranks it too low (see defaultConfig).
    if (v == MlstmVariant::Fused && !checkConfig(p, wgmmaFused(), t))
      out.push_back(wgmmaFused());
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](const MlstmConfig &a, const MlstmConfig &b) {
                     return mlstmModelCost(p, a, t) < mlstmModelCost(p, b, t);
                   });
  return out;
}

MlstmConfig defaultConfig(const MlstmProblem &p, Target t) {
  // The seed's batch-aware selection: the recurrent kernel for tiny S; the
  // fused chunkwise kernel when the heads x 32-column slices (the narrowest
  // tensor-core slice) fill 90% of the GPU's units (H200, tuned: the 7B
  // heads at B = 1 ran fused c64 d32 in 1.27 ms against 1.93 for two-phase,
  // 128/128 at B = 4 fused c128 d32 19% ahead of chunk-parallel);
  // otherwise a form parallel over the chunks too: two-phase or,
  // where the enumerator offers it and the model ranks it cheaper,
  // chunk-parallel (the first of the two in the ranked list).
  MlstmVariant want;
  if (p.s <= 16)
    want = MlstmVariant::Recurrent;
  else if (10 * p.b * p.nh * (p.dv / 32) >= 9 * targetInfo(t).computeUnits)
    want = MlstmVariant::Fused;
  else
    want = MlstmVariant::TwoPhase;
  // The wgmma kernel where valid, and where the fused form is wanted or DQK
  // is at least 128. H100, KGEN_TUNE=off against it forced, same process
  // (bench/results): unsplit it won every shape where the fused form is
  // wanted, 1.4-1.8x where the model ranked an mma.sync fused config first
  // (7B heads B = 1 S = 8192: 864 against 1555 us; 128/256 NH 16 B = 1 and
  // 2; 128/128 B = 4), and it is the default at the 7B heads B = 8. With
  // the sequence of few heads split (mlstmSegments) it also beats the
  // chunk-parallel form at 128/128 B = 1 and 2 (40 and 47 us against 55
  // and 109), not at 64/128 B = 1 (36 against 34). The model's per-chunk
  // terms undercount both fused kernels' latency (2-3x), and differently,
  // so it is not the judge here.
  if ((want == MlstmVariant::Fused ||
       (want == MlstmVariant::TwoPhase && p.dqk >= 128)) &&
      !checkConfig(p, wgmmaFused(), t))
    return wgmmaFused();
  std::vector<MlstmConfig> cs = enumerateConfigs(p, t);
  for (const MlstmConfig &c : cs)
    if (c.variant == want ||
        (want == MlstmVariant::TwoPhase && c.variant == MlstmVariant::ChunkPar))
      return c;
  if (!cs.empty())
    return cs.front();
  // Every well-formed problem has valid recurrent configs (blockDV 16 with
  // 16 warps fits any DQK on every target); reaching here means the problem
  // is invalid, which callers check first.
  return MlstmConfig{MlstmVariant::Recurrent, 0, 16, 16};
}

} // namespace kgen
