//===- Problem.cpp - Problems, targets and their derived traits -----------===//

#include "kgen/Problem.h"

#include <algorithm>

namespace kgen {

std::string_view toString(DType t) {
  switch (t) {
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "f32";
  case DType::E4M3:
    return "e4m3";
  case DType::E5M2:
    return "e5m2";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view s) {
  if (s == "f16" || s == "fp16" || s == "half")
    return DType::F16;
  if (s == "bf16")
    return DType::BF16;
  if (s == "f32" || s == "fp32" || s == "float")
    return DType::F32;
  // torch's names too (float8_e4m3fn, float8_e5m2).
  if (s == "e4m3" || s == "fp8_e4m3" || s == "float8_e4m3fn")
    return DType::E4M3;
  if (s == "e5m2" || s == "fp8_e5m2" || s == "float8_e5m2")
    return DType::E5M2;
  return std::nullopt;
}

int sizeOf(DType t) { return t == DType::F32 ? 4 : isFp8(t) ? 1 : 2; }

std::string_view toString(Target t) {
  switch (t) {
  case Target::GFX90A:
    return "gfx90a";
  case Target::GFX942:
    return "gfx942";
  case Target::SM80:
    return "sm_80";
  case Target::SM90A:
    return "sm_90a";
  }
  return "?";
}

std::optional<Target> parseTarget(std::string_view s) {
  for (Target t : kAllTargets)
    if (s == toString(t))
      return t;
  return std::nullopt;
}

const TargetInfo &targetInfo(Target t) {
  // Shared memory: the opt-in per-block maximum (sm_80: 163 KiB, sm_90a:
  // 227 KiB, CDNA: 64 KiB LDS). Accumulators: sm_80/90 have 255 registers a
  // thread, so more than 128 fp32 accumulators leaves too few for addresses
  // and fragments; CDNA keeps accumulators in 256 AGPRs.
  static const TargetInfo infos[] = {
      {Target::GFX90A, Vendor::AMD, 64, 1024, 65536, 512, 256, 16, 110},
      {Target::GFX942, Vendor::AMD, 64, 1024, 65536, 512, 256, 16, 304},
      {Target::SM80, Vendor::NVIDIA, 32, 1024, 166912, 255, 128, 16, 108},
      {Target::SM90A, Vendor::NVIDIA, 32, 1024, 232448, 255, 128, 16, 132},
  };
  return infos[static_cast<int>(t)];
}

std::string_view toString(GemmLoop l) {
  return l == GemmLoop::Wgmma  ? "wgmma"
         : l == GemmLoop::Gemv ? "gemv"
                               : "tiled";
}

std::optional<GemmLoop> parseGemmLoop(std::string_view s) {
  if (s == "tiled")
    return GemmLoop::Tiled;
  if (s == "wgmma")
    return GemmLoop::Wgmma;
  if (s == "gemv")
    return GemmLoop::Gemv;
  return std::nullopt;
}

std::string_view toString(Activation a) {
  switch (a) {
  case Activation::None:
    return "none";
  case Activation::ReLU:
    return "relu";
  case Activation::GeluTanh:
    return "gelu_tanh";
  case Activation::GeluErf:
    return "gelu_erf";
  case Activation::SiLU:
    return "silu";
  }
  return "?";
}

std::optional<Activation> parseActivation(std::string_view s) {
  for (Activation a : {Activation::None, Activation::ReLU, Activation::GeluTanh,
                       Activation::GeluErf, Activation::SiLU})
    if (s == toString(a))
      return a;
  return std::nullopt;
}

std::string_view toString(BiasKind b) {
  switch (b) {
  case BiasKind::None:
    return "none";
  case BiasKind::AlongM:
    return "m";
  case BiasKind::AlongN:
    return "n";
  }
  return "?";
}

std::optional<BiasKind> parseBiasKind(std::string_view s) {
  for (BiasKind b : {BiasKind::None, BiasKind::AlongM, BiasKind::AlongN})
    if (s == toString(b))
      return b;
  return std::nullopt;
}

std::string GemmProblem::layoutName() const {
  return std::string(transA ? "t" : "n") + (transB ? "t" : "n");
}

GemmProblem mainLoopProblem(const GemmProblem &p) {
  GemmProblem q = p;
  q.bias = BiasKind::None;
  q.act = Activation::None;
  q.residual = false;
  q.batch = 1;
  return q;
}

/// The largest of 16, 8, 4, 2, 1 that is <= `align` and divides `extent`
/// (when the extent is a compile-time constant; a run-time extent keeps
/// `align`, and the runtime lowers it per call).
static int vectorWidth(int align, bool extentStatic, int64_t extent) {
  int v = std::min(align, 16);
  while (v > 1 && ((v & (v - 1)) != 0 || (extentStatic && extent % v != 0)))
    --v;
  return std::max(v, 1);
}

GemmProblem repackedProblem(const GemmProblem &p) {
  GemmProblem q = p;
  q.k = (p.k + 7) / 8 * 8;
  q.alignA = q.alignB = 8;
  return q;
}

GemmTraits gemmTraits(const GemmProblem &p, const GemmConfig &c, Target t) {
  if (c.repack) {
    // The main loop reads the padded copies: 16-byte vectors whatever the
    // caller's rows, since a vector straddling the end of a row reads the
    // copy's zero padding (kept inside its padded row).
    GemmConfig inner = c;
    inner.repack = false;
    GemmTraits tr = gemmTraits(repackedProblem(p), inner, t);
    tr.vecA = tr.vecB = 16 / sizeOf(p.ab);
    return tr;
  }
  const TargetInfo &ti = targetInfo(t);
  GemmTraits tr;
  // The contiguous extent of each stored matrix.
  // A and B move in vectors of at most 16 bytes (cp.async's widest): 4 f32.
  const int alignA = std::min(p.alignA, 16 / sizeOf(p.ab));
  const int alignB = std::min(p.alignB, 16 / sizeOf(p.ab));
  tr.vecA = p.transA ? vectorWidth(alignA, p.staticM, p.m)
                     : vectorWidth(alignA, p.staticK, p.k);
  tr.vecB = p.transB ? vectorWidth(alignB, p.staticK, p.k)
                     : vectorWidth(alignB, p.staticN, p.n);
  tr.vecC = vectorWidth(p.alignC, p.staticN, p.n);
  tr.checkM = !p.staticM || p.m % c.blockM != 0;
  tr.checkN = !p.staticN || p.n % c.blockN != 0;
  tr.checkK = !p.staticK || p.k % c.blockK != 0;
  if (c.loop == GemmLoop::Wgmma) {
    // A producer warpgroup and warpsM consumer warpgroups; stages of
    // 128-byte swizzled rows (blockK = 64 two-byte elements) for A and B,
    // a full and an empty barrier per stage, 1 KiB to align the ring to
    // the swizzle period, the fix-up's flag, and the epilogue's staging: 16
    // rows of 32 fp32 per consumer warp (gemm_sm90.h, storeTile).
    tr.threads = 128 * (c.warpsM + 1);
    int64_t smem =
        int64_t(c.stages) * (c.blockM + c.blockN) * c.blockK * sizeOf(p.ab) +
        16 * c.stages + 1024 + (c.streamK || c.splitK > 1 ? 16 : 0) +
        int64_t(c.warpsM) * 4 * 16 * 32 * 4;
    tr.smemBytes = int(std::min<int64_t>(smem, INT32_MAX));
    tr.accumPerThread =
        c.wgmmaM() / std::max(c.warpsM, 1) / 64 * c.wgmmaN() / 2;
    return tr;
  }
  if (c.loop == GemmLoop::Gemv) {
    // Warps side by side along N; shared memory holds the ring (stages
    // k-chunks, a 16-byte run of each thread for every two B columns of a
    // row tile and every 8 rows of A) and split-K's arrival flag.
    tr.threads = c.warpsN * ti.waveSize;
    tr.checkK = !p.staticK || p.k % 32 != 0;
    const int64_t runs =
        2 * int64_t(c.blockN) / (16 * std::max(c.warpsN, 1)) + c.blockM / 8;
    const int64_t smem =
        int64_t(c.stages) * runs * tr.threads * 16 + (c.splitK > 1 ? 16 : 0);
    tr.smemBytes = int(std::min<int64_t>(smem, INT32_MAX));
    tr.accumPerThread =
        tr.threads > 0 ? int(int64_t(c.blockM) * c.blockN / tr.threads) : 0;
    return tr;
  }
  tr.threads = c.warpsM * c.warpsN * ti.waveSize;
  int pad = c.smem == SmemLayout::Padded ? c.smemPad : 0;
  int64_t tileA = p.transA ? int64_t(c.blockK) * (c.blockM + pad)
                           : int64_t(c.blockM) * (c.blockK + pad);
  int64_t tileB = p.transB ? int64_t(c.blockN) * (c.blockK + pad)
                           : int64_t(c.blockK) * (c.blockN + pad);
  int64_t smem = int64_t(c.stages) * (tileA + tileB) * sizeOf(p.ab);
  tr.smemBytes = int(std::min<int64_t>(smem, INT32_MAX));
  tr.accumPerThread =
      tr.threads > 0 ? int(int64_t(c.blockM) * c.blockN / tr.threads) : 0;
  return tr;
}

std::optional<std::string> checkProblem(const GemmProblem &p) {
  auto dim = [](const char *name, int64_t v) -> std::optional<std::string> {
    if (v < 1)
      return std::string("gemm: ") + name + " = " + std::to_string(v) +
             " must be >= 1";
    if (v > INT32_MAX)
      return std::string("gemm: ") + name + " = " + std::to_string(v) +
             " exceeds 2^31-1 (kernels index with 32-bit dimensions)";
    return std::nullopt;
  };
  if (auto e = dim("m", p.m))
    return e;
  if (auto e = dim("n", p.n))
    return e;
  if (auto e = dim("k", p.k))
    return e;
  if (p.ab == DType::F32 && !p.tf32)
    return std::string(
        "gemm: input dtype f32 needs tf32 = true (TF32 tensor cores: inputs "
        "rounded to a 10-bit mantissa, fp32 accumulation); kgen has no exact "
        "fp32 GEMM: set tf32, or convert the inputs to bf16/f16");
  if (p.tf32 && p.ab != DType::F32)
    return "gemm: tf32 = true needs input dtype f32, not " +
           std::string(toString(p.ab));
  if (p.batch < 1 || p.batch > 65535)
    return "gemm: batch = " + std::to_string(p.batch) +
           " must be between 1 and 65535 (batches are the grid's z "
           "dimension)";
  for (auto [name, a] : {std::pair{"alignA", p.alignA},
                         {"alignB", p.alignB},
                         {"alignC", p.alignC}})
    if (a != 1 && a != 2 && a != 4 && a != 8 && a != 16)
      return std::string("gemm: ") + name + " = " + std::to_string(a) +
             " must be 1, 2, 4, 8 or 16 elements";
  if (isFp8(p.c))
    return "gemm: C's dtype " + std::string(toString(p.c)) +
           " is an input type only; fp8 inputs write bf16 or f16";
  if (isFp8(p.ab)) {
    // The tensor cores add fp8 products with fewer bits than fp32: on an
    // H100, C's error was ~2^-12 of |C| at K = 1040 even with every
    // 128-element k-slice's sum promoted to fp32. That is inside a bf16 or
    // f16 C's rounding, but 1000-3000 times a plain fp32 loop's error in an
    // f32 C (GemmGpuTest, d70dc8d).
    if (p.c == DType::F32)
      return "gemm: " + std::string(toString(p.ab)) +
             " inputs write bf16 or f16, not f32: fp8 wgmma sums its "
             "products with fewer bits than fp32, so an f32 C would not be "
             "as accurate as its type promises";
    // fp8 wgmma (the one fp8 main loop) reads both operands K-major.
    if (p.transA || !p.transB)
      return "gemm: " + std::string(toString(p.ab)) +
             " inputs need layout nt "
             "(A stored M x K, B stored N x K: fp8 wgmma reads both K-major), "
             "not " +
             p.layoutName() + "; store B transposed";
    if (p.alignA < 16 || p.alignB < 16)
      return "gemm: " + std::string(toString(p.ab)) +
             " inputs are read by TMA in 16-byte rows: set alignA = alignB = "
             "16 (pointers, leading dimensions and K multiples of 16), not " +
             std::to_string(p.alignA) + " and " + std::to_string(p.alignB);
  }
  return std::nullopt;
}

std::optional<std::string> checkProblemOnTarget(const GemmProblem &p,
                                                Target t) {
  if (auto e = checkProblem(p))
    return e;
  // Every target takes bf16/f16 inputs with fp32 accumulation; TF32 is
  // NVIDIA's (mma.sync .tf32). gfx90a has no xf32 MFMA; gfx942 has one
  // (v_mfma_f32_32x32x4_xf32) that kgen does not use yet.
  if (isFp8(p.ab) && t != Target::SM90A)
    return "gemm: " + std::string(toString(p.ab)) +
           " inputs run on sm_90a's "
           "fp8 wgmma only, not on " +
           std::string(toString(t));
  if (p.tf32 && targetInfo(t).vendor == Vendor::AMD)
    return "gemm: tf32 on " + std::string(toString(t)) +
           (t == Target::GFX90A
                ? ": gfx90a has no TF32 (xf32) matrix instruction"
                : ": gfx942's xf32 MFMA is not implemented in kgen") +
           "; convert the inputs to bf16/f16, or run on sm_80/sm_90a";
  return std::nullopt;
}

} // namespace kgen
