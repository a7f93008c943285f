//===- Mlstm.h - The mLSTM (xLSTM) family: problem, config, codegen -*- C++
//-*-//
//
// The mLSTM forward (templates/mlstm/mlstm.h states the math): q, k
// (B, NH, S, DQK), v (B, NH, S, DV), gate pre-activations i, f (B, NH, S),
// all of one input dtype; h (B, NH, S, DV) in that dtype; optional initial
// and final states C (B, NH, DQK, DV), n (B, NH, DQK), m (B, NH) in fp32.
// DQK and DV are baked into the kernel; B, NH and S are taken at run time.
//
// Like Problem.h this part throws nothing (the MLIR layer calls it); the
// JSON functions at the end throw kgen::Error.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_MLSTM_H
#define KGEN_MLSTM_H

#include "kgen/Codegen/Emitter.h"
#include "kgen/Problem.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kgen {

struct MlstmProblem {
  int64_t b = 1, nh = 1, s = 1; ///< run time; the values are hints
  int dqk = 64, dv = 64;        ///< baked
  DType dtype = DType::BF16;    ///< q, k, v, i, f and h
  bool initialState = false;    ///< C, n, m given (else zeros)
  bool finalState = false;      ///< C, n, m of the last token returned
                                ///< (may alias the initial ones: in place)
  float eps = 1e-6f;

  bool operator==(const MlstmProblem &) const = default;
};

/// How the forward is computed (templates/mlstm/mlstm.h).
enum class MlstmVariant {
  Recurrent, ///< token by token; tiny S and the decoding step
  Fused,     ///< one kernel walking the chunks, states in shared memory
  TwoPhase,  ///< state recurrence kernel + parallel per-chunk outputs
  ChunkPar,  ///< per-chunk states in parallel + elementwise combine over the
             ///< chunks + the two-phase outputs kernel
};

std::string_view toString(MlstmVariant v);
std::optional<MlstmVariant> parseMlstmVariant(std::string_view s);

struct MlstmConfig {
  MlstmVariant variant = MlstmVariant::Fused;
  int chunk = 64;   ///< tokens per chunk (chunkwise variants)
  int blockDV = 64; ///< DV columns per block
  int warps = 4;    ///< warps (wavefronts) per block
  /// The fused kernel's products on wgmma (sm_90a; templates/mlstm/
  /// mlstm_sm90.h): chunk 64, blockDV 128, 12 warps (two warpgroups hold
  /// the state, one computes h), bf16 or f16, dqk a multiple of 64 up to
  /// 256. Otherwise mma.sync / MFMA or fp32 FMAs (mlstmUsesMma).
  bool wgmma = false;

  bool operator==(const MlstmConfig &) const = default;
};

/// The kernels a variant launches, in order.
enum class MlstmKernel {
  Recurrent,
  Fused,
  States,
  Outputs,
  ChunkStates, ///< chunk-parallel phase A: each chunk's own contribution
  Combine,     ///< chunk-parallel phase B: the recurrence over the chunks
  /// The wgmma fused kernel's gate pre-pass: every chunk's gate sums, then
  /// every chunk's per-token terms (from the m the sums before it give).
  GateSums,
  Gates, ///< the pre-pass's second kernel: the terms (ChunkTerms)
  /// The wgmma fused kernel's sequence split, first phase: every segment's
  /// own state in parallel (then Combine over the segments, then Fused on
  /// each segment; mlstmSegments).
  SegmentStates,
};
/// One of the gate pre-pass's two kernels (GateSums, Gates): one warp a
/// chunk, no shared memory, the plain Params.
inline bool isGatePrePass(MlstmKernel k) {
  return k == MlstmKernel::GateSums || k == MlstmKernel::Gates;
}
/// The kernels of config c, in launch order (a wgmma fused config's gate
/// pre-pass, GateSums and Gates, first; its SegmentStates and Combine run only
/// where mlstmSegments splits the sequence).
std::vector<MlstmKernel> mlstmKernels(const MlstmConfig &c);
/// How many segments a wgmma fused call splits the sequence into (1 for
/// every other config): while the heads x slices fill at most half of the
/// SMs and every segment keeps at least 4 chunks, twice as many. Each
/// segment's state comes from SegmentStates and Combine; then the fused
/// kernel walks the segments in parallel.
int mlstmSegments(const MlstmProblem &p, const MlstmConfig &c, int64_t b,
                  int64_t nh, int64_t s);
/// The kernel whose name stands for config c in the tuner's lists and the
/// reports: the fused one of a wgmma config, else the first.
MlstmKernel mlstmLeadKernel(const MlstmConfig &c);
std::string_view toString(MlstmKernel k);

struct MlstmTraits {
  int threads;   ///< per block
  int smemBytes; ///< dynamic shared memory per block
  int slices;    ///< DV / blockDV
  int rows;      ///< C rows per thread, 4 columns each (recurrent)
  /// Blocks per unit the kernel is compiled for (__launch_bounds__'s
  /// second argument on NVIDIA, whose units have 64K registers; 0: none).
  /// The recurrent kernel asks for as many as its C registers allow,
  /// 4 * rows + 32 a thread: left to itself ptxas took 78 registers at 512
  /// threads, one block a unit, and the decoding step took 181.7 us against
  /// 137.5 at 64 registers (H200, B = 64, d64 w16).
  int minBlocks;
};

/// Whether kernel k of config c does its matrix work on tensor cores
/// (mma.sync / MFMA; templates/mlstm/mlstm.h ChunkMma): the chunkwise
/// kernels with bf16/f16 inputs whose chunk, blockDV and dqk are multiples
/// of the 32x32 warp tile and whose 16-bit operand copies fit the target's
/// shared memory. Others (fp32 inputs among them) keep the fp32 FMA path.
bool mlstmUsesMma(const MlstmProblem &p, const MlstmConfig &c, MlstmKernel k,
                  Target t);
/// How many warps share each 32x32 tile of the tensor-core kernels'
/// products (split-k over the k-steps; ChunkMma::splitK): the scores, the
/// outputs (q^T C + P V) and the state update. The most that the block's
/// warps and the k-steps allow, halved (the product with the most partial
/// tiles first) until the partial sums' scratch fits the target's shared
/// memory. All 1 when kernel k does not use tensor cores.
struct MlstmSplitK {
  int scores, outputs, update;
};
MlstmSplitK mlstmSplitK(const MlstmProblem &p, const MlstmConfig &c,
                        MlstmKernel k, Target t);
/// Whether a tensor-core kernel keeps its fp32 state C out of shared
/// memory: the state update's warp tiles then stay in registers as its
/// accumulators across the chunks (no split-k of the update, at most four
/// 32x32 tiles per warp, two at 16 warps), and only C's 16-bit copy, the
/// outputs' operand, is in shared memory. The outputs kernel never needs the
/// fp32 C. False where mlstmUsesMma is.
bool mlstmStateInRegisters(const MlstmProblem &p, const MlstmConfig &c,
                           MlstmKernel k, Target t);

MlstmTraits mlstmTraits(const MlstmProblem &p, const MlstmConfig &c,
                        MlstmKernel k, Target t);

/// Messages name the field, its value and the rule (empty when valid).
std::optional<std::string> checkProblem(const MlstmProblem &p);
std::optional<std::string> checkConfig(const MlstmProblem &p,
                                       const MlstmConfig &c, Target t);

/// Every valid config, ranked by mlstmModelCost (cheapest first).
std::vector<MlstmConfig> enumerateConfigs(const MlstmProblem &p, Target t);
/// Relative run time of `c` (lower is better); see MlstmCandidates.cpp.
double mlstmModelCost(const MlstmProblem &p, const MlstmConfig &c, Target t);
/// The heuristic without measurements: the seed's batch-aware choice of the
/// variant (recurrent for tiny S; fused when heads x slices fill the GPU;
/// two-phase otherwise), then the model's best config of that variant.
MlstmConfig defaultConfig(const MlstmProblem &p, Target t);

/// e.g. kgen_mlstm_bf16_qk256_v512_fused_c64_d64_w4 (_wgmma on wgmma).
std::string mlstmKernelName(const MlstmProblem &p, const MlstmConfig &c,
                            MlstmKernel k);
KernelSource emitMlstm(const MlstmProblem &p, const MlstmConfig &c,
                       MlstmKernel k, Target t, bool inlineTemplates = false);
/// Grid for run-time B, NH, S.
LaunchDims mlstmLaunchDims(const MlstmProblem &p, const MlstmConfig &c,
                           MlstmKernel k, Target t, int64_t b, int64_t nh,
                           int64_t s);
/// Where the workspace's arrays (kgen::mlstm::Params) start, in bytes from
/// its beginning, and its size: the two-phase variant's fp32 wsC, wsN, wsM;
/// the chunk-parallel one's fp64 wsGM first, then the same three. All 0 for
/// the other variants.
struct MlstmWorkspaceLayout {
  size_t gm, c, n, m, bytes;
  size_t gates; ///< the chunk terms (wgmma fused; chunkTermsBytes each)
};
MlstmWorkspaceLayout mlstmWorkspaceLayout(const MlstmProblem &p,
                                          const MlstmConfig &c, int64_t b,
                                          int64_t nh, int64_t s);
/// mlstmWorkspaceLayout(...).bytes.
size_t mlstmWorkspaceBytes(const MlstmProblem &p, const MlstmConfig &c,
                           int64_t b, int64_t nh, int64_t s);
/// Chunkwise FLOPs of the forward (for TFLOP/s reports).
double mlstmFlops(const MlstmProblem &p, int chunk);

nlohmann::json toJson(const MlstmProblem &p);
nlohmann::json toJson(const MlstmConfig &c);
/// Throw kgen::Error naming the bad field; unknown fields are errors.
MlstmProblem mlstmProblemFromJson(const nlohmann::json &j);
MlstmConfig mlstmConfigFromJson(const nlohmann::json &j);
/// The fields of an mLSTM config that spell a tile (Codegen/PartialConfig.h);
/// the others (variant, wgmma) name a strategy.
inline constexpr std::array<std::string_view, 3> kMlstmTileFields{
    "chunk", "blockDV", "warps"};

} // namespace kgen

#endif // KGEN_MLSTM_H
