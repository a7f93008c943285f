//===- Attention.h - The flash-attention forward family ---------*- C++ -*-===//
//
// O = softmax(scale * Q K^T + bias, masked) V, per batch and query head, in
// the plain C++ terms of Problem.h: a problem (what the kernel computes and
// which features it carries), a tile configuration, and the functions of
// the pipeline (checks, limits, candidates, emitter, launch geometry).
//
// Head dims are baked into the kernel; batch, heads and sequence lengths are
// run-time values (the problem's are hints for the model). Element (b, s,
// h, d) of Q, K, V and O lives at base + b*strideBatch + s*strideSeq +
// h*strideHead + d, so BSHD and BHSD are two stride choices of one kernel
// (`layout` only names the packed default). With varlen, sequences are
// packed one after another (strideBatch unused) and cu_seqlens give the
// offsets, as in FlashAttention's varlen API.
//
// Nothing here throws, so the MLIR front end can call it too.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_ATTENTION_H
#define KGEN_ATTENTION_H

#include "kgen/Codegen/Emitter.h"
#include "kgen/Problem.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kgen {

/// The packed layout the strides default to: [batch, seq, head, dim] or
/// [batch, head, seq, dim].
enum class AttentionLayout { BSHD, BHSD };

std::string_view toString(AttentionLayout l);
std::optional<AttentionLayout> parseAttentionLayout(std::string_view s);

struct AttentionProblem {
  int64_t batch = 1;
  int64_t headsQ = 1, headsKv = 1;  ///< MHA: equal; GQA: headsQ % headsKv == 0
  int64_t seqlenQ = 1, seqlenK = 1; ///< hints; taken at run time
  int headDimQk = 128, headDimV = 128;
  /// Q, K, V and O (and the bias); softmax in fp32. fp8 (e4m3, e5m2) is
  /// Q, K and V only, on sm_90a's wgmma loop: O and the bias are then bf16
  /// (attentionOutputDType), scores are scaled by the per-tensor descale
  /// factors of Q and K and O by V's (AttentionArgs), and P enters P V in
  /// the inputs' fp8 type, as FlashAttention-3's fp8 forward.
  DType dtype = DType::BF16;
  AttentionLayout layout = AttentionLayout::BSHD;
  /// Key j is visible to query i iff j <= i + seqlenK - seqlenQ (bottom-right
  /// aligned, as FlashAttention 2.1+).
  bool causal = false;
  /// Sliding window around the same diagonal: visible iff
  /// i + Sk - Sq - windowLeft <= j <= i + Sk - Sq + windowRight; -1 means
  /// unbounded on that side.
  int windowLeft = -1, windowRight = -1;
  bool varlen = false; ///< cu_seqlens_q / cu_seqlens_k (batch + 1 int32 each)
  bool alibi = false;  ///< bias -slope[h] * |i + Sk - Sq - j|, slopes fp32
  bool bias = false;   ///< additive [batch, headsQ, Sq, Sk] matrix (strides)
  bool lse = false;    ///< also write the log-sum-exp (natural log, fp32)

  bool operator==(const AttentionProblem &) const = default;
};

/// The type of O and of the bias: the inputs' dtype, bf16 for fp8 inputs.
DType attentionOutputDType(const AttentionProblem &p);

/// The main loop: `tiled` is FlashAttention-2 style on every target
/// (mma.sync / MFMA, cp.async or LDS copies); `wgmma` is sm_90a's
/// warp-specialized kernel (FlashAttention-3 style: TMA loads by a producer
/// warp, wgmma in consumer warpgroups, P fed to P V from registers).
enum class AttentionLoop { Tiled, Wgmma };

std::string_view toString(AttentionLoop l);
std::optional<AttentionLoop> parseAttentionLoop(std::string_view s);

struct AttentionConfig {
  AttentionLoop loop = AttentionLoop::Tiled;
  int blockM = 64; ///< query rows per block
  int blockN = 64; ///< keys per step
  /// Each warp owns blockM / warps query rows. With the wgmma loop these
  /// are the consumer warps (blockM / 16: one warpgroup per 64 rows); the
  /// producer warpgroup comes on top.
  int warps = 4;
  int stages = 2; ///< K/V shared-memory buffers (2 = double buffering)
  /// V's tile lands with K's, before QK^T (true: one wait per step), or is
  /// waited for after the softmax, so its copy overlaps QK^T (false). The
  /// wgmma loop always waits for V separately (false).
  bool preloadV = false;
  /// Split-KV (flash decoding): the keys of a row are cut into this many
  /// ranges, each block writes fp32 partials, a combine kernel merges them.
  int splits = 1;
  /// GQA packing: one block serves all g = headsQ / headsKv query heads of
  /// a KV head, the (query row, head) pairs laid out along the tile's M
  /// dimension (packed row R is query row R / g of head hk * g + R % g), so
  /// each K/V tile is loaded once per KV head instead of once per query
  /// head. For decode (Sq * g rows in place of Sq) it also fills the tile.
  bool packGqa = false;
  /// Persistent grid (wgmma loop only, no split-KV): min(work tiles, SMs)
  /// blocks, each looping over (row block, head, batch) work tiles in
  /// order (causal's longest row blocks first): round-robin, or where
  /// attentionDynamicSchedule says, the next tile no block has claimed; the
  /// producer
  /// loading the next tile's Q, K and V while the consumers finish the
  /// current one and store it.
  bool persistent = false;

  bool operator==(const AttentionConfig &) const = default;
};

/// Derived from problem + config; shared by the emitter, the limits and
/// the runtime.
struct AttentionTraits {
  int threads;
  int smemBytes;
  int accumPerThread; ///< fp32 registers of O and S per thread
  bool masked;        ///< some tile may need an element mask
  /// wgmma loop: O goes out through per-warp shared-memory slabs (16-byte
  /// stores); without split-KV, where shared memory has room for them.
  bool stageO = false;
};

AttentionTraits attentionTraits(const AttentionProblem &p,
                                const AttentionConfig &c, Target t);

/// An empty optional when the problem is well formed; otherwise a message
/// naming the field, its value and the rule.
std::optional<std::string> checkProblem(const AttentionProblem &p);
std::optional<std::string> checkProblemOnTarget(const AttentionProblem &p,
                                                Target t);
/// ... when `c` can be generated for `p` on `t`.
std::optional<std::string> checkConfig(const AttentionProblem &p,
                                       const AttentionConfig &c, Target t);

/// Every valid config, ranked by the cost model in AttentionCandidates.cpp,
/// best guess first.
std::vector<AttentionConfig> enumerateConfigs(const AttentionProblem &p,
                                              Target t);
/// The heuristic default (the best-ranked candidate).
AttentionConfig defaultConfig(const AttentionProblem &p, Target t);

/// e.g. kgen_attn_bf16_h8x2_d128x128_causal_lse_b64x64_w4_s2_pv_k1.
std::string attentionKernelName(const AttentionProblem &p,
                                const AttentionConfig &c, Target t);
/// The combine kernel of a split-KV variant lives in the same module.
std::string attentionCombineName(const AttentionProblem &p,
                                 const AttentionConfig &c, Target t);

KernelSource emitAttention(const AttentionProblem &p, const AttentionConfig &c,
                           Target t, bool inlineTemplates = false);

/// Grid (ceil(Sq / blockM), headsQ * splits, batch) for the main kernel;
/// with packGqa (ceil(Sq * g / blockM), headsKv * splits, batch); with
/// persistent (min(work tiles, computeUnits), 1, 1), computeUnits being the
/// device's multiprocessors (0: the target's nominal count). One block per
/// multiprocessor: the wgmma loop's warpgroups take its whole register file.
LaunchDims attentionLaunchDims(const AttentionProblem &p,
                               const AttentionConfig &c, Target t,
                               int64_t batch, int64_t seqlenQ,
                               int computeUnits = 0);
/// The persistent grid's work tiles: ceil(Sq / blockM) * headsQ * batch.
int64_t attentionWorkTiles(const AttentionProblem &p, const AttentionConfig &c,
                           int64_t batch, int64_t seqlenQ);

/// Whether the persistent grid claims its work tiles through a counter
/// (attention::Params::tileCounter) rather than walking a static schedule:
/// where tiles differ in length (causal) and are long enough for the claim
/// not to show. Measured on an H200 (AttentionCandidates.cpp).
bool attentionDynamicSchedule(const AttentionProblem &p);
/// One block of headDimV threads (rounded to a warp) per (row, head, batch).
LaunchDims attentionCombineLaunchDims(const AttentionProblem &p,
                                      const AttentionConfig &c, Target t,
                                      int64_t batch, int64_t seqlenQ);

/// Whether a call may pass descale factors: only with fp8 inputs (given:
/// any of q/k/v's is non-null). The runtime and the C API both ask.
std::optional<std::string> checkAttentionDescales(const AttentionProblem &p,
                                                  bool given);

/// The workspace a launch needs (0 for most): with split-KV the fp32
/// partials, O [splits, batch, headsQ, seqlenQ, headDimV] and LSE [splits,
/// batch, headsQ, seqlenQ].
size_t attentionWorkspaceBytes(const AttentionProblem &p,
                               const AttentionConfig &c, int64_t batch,
                               int64_t seqlenQ);

} // namespace kgen

#endif // KGEN_ATTENTION_H
