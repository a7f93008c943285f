//===- Problem.h - Problems, configurations and targets ---------*- C++ -*-===//
//
// The plain C++ description of what kgen generates: a problem (shapes,
// dtypes, layouts, which dimensions are compile-time constants), a tile
// configuration, and a target. Nothing here depends on LLVM, MLIR or a GPU
// runtime, and nothing here throws: the MLIR front end (built without
// exceptions) calls these functions too.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_PROBLEM_H
#define KGEN_PROBLEM_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kgen {

/// kgen's version; part of every cache key and tuning-DB key.
inline constexpr std::string_view kVersion = "0.1.0";

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// E4M3 and E5M2 are the 8-bit floats of sm_90a's fp8 wgmma (OCP FP8: e4m3
/// has no infinity, its largest finite value is 448; e5m2 is IEEE-like), GEMM
/// inputs only.
enum class DType { F16, BF16, F32, E4M3, E5M2 };

std::string_view toString(DType t); ///< f16, bf16, f32, e4m3, e5m2
std::optional<DType> parseDType(std::string_view s);
int sizeOf(DType t);
inline bool isFp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

//===----------------------------------------------------------------------===//
// Targets
//===----------------------------------------------------------------------===//

enum class Vendor { AMD, NVIDIA };

/// Targets carry the vendors' own names. `native` is resolved by the runtime.
enum class Target { GFX90A, GFX942, SM80, SM90A };
inline constexpr Target kAllTargets[] = {Target::GFX90A, Target::GFX942,
                                         Target::SM80, Target::SM90A};

std::string_view toString(Target t);
std::optional<Target> parseTarget(std::string_view s);

/// What the limits of a target are; the numbers config validity is checked
/// against.
struct TargetInfo {
  Target target;
  Vendor vendor;
  int waveSize;           ///< threads per warp / wavefront
  int maxThreadsPerBlock; ///< launch limit
  int maxSharedBytes;     ///< shared memory (LDS) one block may use
  int maxRegsPerThread;   ///< architectural register limit per thread
  int maxAccumRegs;       ///< fp32 accumulators per thread we allow
  int globalAlignBytes;   ///< widest global access (bytes)
  /// Multiprocessors (compute units) of the target's flagship part (H100/
  /// H200, A100, MI250X GCD, MI300X): what cost models assume without a GPU.
  int computeUnits;
};

const TargetInfo &targetInfo(Target t);

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// The activation a GEMM epilogue applies (after bias, before the residual).
enum class Activation { None, ReLU, GeluTanh, GeluErf, SiLU };
std::string_view toString(Activation a); ///< none, relu, gelu_tanh, ...
std::optional<Activation> parseActivation(std::string_view s);

/// Which way a bias vector runs: one value per row of C (length M) or per
/// column (length N, as a linear layer's bias).
enum class BiasKind { None, AlongM, AlongN };
std::string_view toString(BiasKind b); ///< none, m, n
std::optional<BiasKind> parseBiasKind(std::string_view s);

/// C = alpha * op(A) * op(B) + beta * C, with op(A) of shape M x K and op(B)
/// of shape K x N. Storage conventions (all row-major in memory; a layout
/// letter says whether the operand is stored as its op() or transposed):
///   A 'N': M x K, K contiguous, lda >= K      A 'T': K x M, M contiguous, lda
///   >= M B 'N': K x N, N contiguous, ldb >= N      B 'T': N x K, K contiguous,
///   ldb >= K C    : M x N, N contiguous, ldc >= N
/// So "NT" (A 'N', B 'T') is y = x * W^T with W stored N x K, as in a linear
/// layer. A and B share one input dtype; accumulation is always fp32.
///
/// fp8 inputs (e4m3, e5m2; sm_90a's wgmma loop): layout nt only (fp8 wgmma
/// reads both operands K-major), C bf16 or f16 (the tensor cores' fp8 sums
/// keep fewer bits than an f32 C would promise), and rows of 16 bytes
/// (alignA = alignB = 16). Each input has a per-tensor fp32 scale (GemmArgs::
/// scaleA, scaleB, device pointers): C = alpha * scaleA * scaleB * A B + ...
struct GemmProblem {
  int64_t m = 1, n = 1, k = 1;
  DType ab = DType::BF16; ///< dtype of A and B
  DType c = DType::BF16;  ///< dtype of C
  bool transA = false;    ///< A stored as K x M ('T')
  bool transB = false;    ///< B stored as N x K ('T')
  /// Which dimensions are compile-time constants. Default: N and K baked,
  /// M taken at run time (batch size changes every serving step).
  bool staticM = false, staticN = true, staticK = true;
  /// Alignment in elements (1, 2, 4, 8 or 16) that pointers, leading
  /// dimensions and the contiguous extent of each operand are promised to
  /// have; vectors are at most 16 bytes, so 8 is the widest promise that
  /// matters for 2-byte types and 16 for fp8 (whose problems must promise
  /// it: TMA). The runtime lowers these to what the actual arguments allow.
  int alignA = 8, alignB = 8, alignC = 8;

  /// The fused epilogue, fixed at compile time (templates/gemm/epilogue.h):
  ///   C = act(alpha * acc + beta * C + bias) + residual
  /// bias and residual have C's dtype; the residual is an M x N matrix with
  /// its own pointer and leading dimension (GemmArgs).
  BiasKind bias = BiasKind::None;
  Activation act = Activation::None;
  bool residual = false;
  /// Strided-batched GEMM: `batch` problems, the z dimension of the grid;
  /// operand b of batch i starts at ptr + i * stride (GemmArgs). Like M, a
  /// run-time value: one kernel serves every batch count.
  int64_t batch = 1;
  /// f32 A and B through TF32 tensor cores (inputs rounded to a 10-bit
  /// mantissa, fp32 accumulation): an explicit opt-in, since the result is
  /// not an fp32 GEMM. Required for ab = F32, refused otherwise; NVIDIA's
  /// tiled loop only (mma.sync m16n8k8 .tf32).
  bool tf32 = false;

  std::string layoutName() const; ///< "nn", "nt", "tn" or "tt"
  /// True when the epilogue does more than alpha/beta and the cast.
  bool hasEpilogue() const {
    return bias != BiasKind::None || act != Activation::None || residual;
  }
  bool operator==(const GemmProblem &) const = default;
};

/// What a problem of `ab` inputs takes where C's dtype and the alignments
/// are not given (JSON, the CLI, Python): C of the inputs' dtype and 8
/// elements, but bf16 and 16 elements for fp8 (an input type only, read in
/// 16-byte rows).
inline DType defaultOutputDType(DType ab) {
  return isFp8(ab) ? DType::BF16 : ab;
}
inline int defaultAlign(DType ab) { return isFp8(ab) ? 16 : 8; }

/// The problem without its epilogue features and with one batch: the one
/// whose main loop, and so whose best tile config, `p` shares. The tuner
/// measures this one; the dispatcher falls back to its record.
GemmProblem mainLoopProblem(const GemmProblem &p);

/// How shared memory rows are laid out to avoid bank conflicts.
enum class SmemLayout { Padded, Swizzled };

/// The main loop a GEMM kernel is built around.
enum class GemmLoop {
  /// templates/gemm/gemm.h: every thread loads tiles into a shared-memory
  /// ring (cp.async on NVIDIA) and runs mma.sync (NVIDIA) or MFMA (AMD).
  Tiled,
  /// templates/gemm/gemm_sm90.h (sm_90a only): a producer warpgroup loads
  /// tiles with TMA, consumer warpgroups run wgmma; persistent grid.
  Wgmma,
  /// templates/gemm/gemv.h (NVIDIA, small M): every lane streams its runs
  /// of B through a private cp.async ring in shared memory into mma.sync,
  /// split-K over blocks. Config fields: blockM = rows of A a block covers
  /// (a multiple of 8, <= 64), blockN = warpsN * rowTiles * 16 columns,
  /// blockK = 32 (a k-chunk), warpsM = 1, stages = ring slots of k-chunks
  /// (stages - 1 in flight per warp), splitK; smem and pad do not apply.
  Gemv,
};

std::string_view toString(GemmLoop l);
std::optional<GemmLoop> parseGemmLoop(std::string_view s);

/// The shared-memory layout a config of `loop` has when it names none (the
/// CLI's options and a JSON config alike): the wgmma loop reads what TMA
/// writes, 128-byte swizzled rows (pad 0); the others the padded default.
inline bool swizzledByDefault(GemmLoop loop) { return loop == GemmLoop::Wgmma; }

/// A tile configuration: everything that changes the generated kernel but
/// not the function it computes.
struct GemmConfig {
  GemmLoop loop = GemmLoop::Tiled;
  int blockM = 128, blockN = 128, blockK = 32;
  /// Warp (wavefront) grid inside a block. With GemmLoop::Wgmma, warpsM
  /// counts the consumer warpgroups (each owns blockM / warpsM rows) and
  /// warpsN is 1.
  int warpsM = 2, warpsN = 2;
  int stages = 3;             ///< shared-memory pipeline depth (>= 2)
  /// GemmLoop::Wgmma: CTAs per cluster (1 or 2). A pair shares the larger
  /// of its two slices through TMA multicast: tiles at least as wide as
  /// tall go one above the other and share B, taller ones (128x80) side by
  /// side and share A (pairSharesA).
  int cluster = 1;
  SmemLayout smem = SmemLayout::Padded;
  int smemPad = 8; ///< elements added to every shared row when Padded
  /// Split-K (tiled loop): kSplitK blocks share each output tile's k-slices
  /// and the last to finish adds their fp32 partial sums (through a
  /// workspace the runtime owns, one per stream) before the epilogue. For
  /// shapes whose tiles leave multiprocessors idle: small M (decode), or
  /// few tiles with a long K.
  int splitK = 1;
  /// Stream-K (wgmma loop): the persistent CTAs share out the k-iterations
  /// of all tiles in equal runs instead of taking whole tiles; a tile split
  /// between CTAs is added up through the same workspace and fix-up as
  /// split-K. For shapes with fewer tiles than multiprocessors.
  bool streamK = false;
  /// Repack (tiled and wgmma loops, 2-byte inputs): for A or B rows that are
  /// not 16-byte aligned (or K not a multiple of 8), the launch first runs a
  /// copy kernel (templates/gemm/repack.h) that writes the operand into a
  /// runtime-owned workspace with rows padded to a multiple of 8 elements
  /// and K padded with zeros to a multiple of 8; the main loop then reads
  /// the padded copies with 16-byte vectors (cp.async 16 B, TMA). C, the
  /// bias and the residual stay the caller's.
  bool repack = false;
  /// Wgmma loop: C^T = B^T A^T, wgmma's m64 slices along N (blockN /
  /// warpsM = 64 or 128 a consumer; B's slices K-major when stored N x K,
  /// M-major when K x N) and its n along M (blockM, a multiple of 8): M
  /// fitted by the n.
  bool swapAB = false;

  bool operator==(const GemmConfig &) const = default;

  /// The wgmma loop's instruction shape: m along the rows its consumers
  /// split (M, or N when swapped), n the other way (N, or M when swapped).
  int wgmmaM() const { return swapAB ? blockN : blockM; }
  int wgmmaN() const { return swapAB ? blockM : blockN; }

  /// A pair of taller-than-wide tiles shares A (see cluster).
  bool pairSharesA() const { return cluster > 1 && blockM > blockN; }
};

/// The four operands' vector widths and the bounds checks a variant needs;
/// derived from problem + config, shared by the emitter and the limits.
struct GemmTraits {
  int vecA, vecB, vecC;        ///< elements per global access
  bool checkM, checkN, checkK; ///< can this dimension be ragged?
  int threads;                 ///< threads per block
  int smemBytes;               ///< dynamic shared memory per block
  int accumPerThread;          ///< fp32 accumulators per thread
};

GemmTraits gemmTraits(const GemmProblem &p, const GemmConfig &c, Target t);

/// Whether the wgmma loop keeps promoted fp32 sums beside its accumulators
/// (templates/gemm/gemm_sm90.h, kPromote): an f32 C, or fp8 inputs. Their
/// two sets of accumulators bound the tiles (Limits) and pick them
/// (Candidates).
inline bool promotesSums(const GemmProblem &p) {
  return p.c == DType::F32 || isFp8(p.ab);
}

/// The problem the main loop of a repack config (GemmConfig::repack) runs:
/// K rounded up to a multiple of 8 (the copies' zero tail) and A and B
/// promised 8-element aligned. C, the epilogue and M, N are `p`'s.
GemmProblem repackedProblem(const GemmProblem &p);

/// An empty optional when the problem is well formed; otherwise a message
/// that names the field, its value and the rule it breaks.
std::optional<std::string> checkProblem(const GemmProblem &p);
std::optional<std::string> checkProblemOnTarget(const GemmProblem &p, Target t);

} // namespace kgen

#endif // KGEN_PROBLEM_H
