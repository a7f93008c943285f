//===- GemmGpuTest.cpp - GEMM results on the GPU against a reference ------===//
//
// Every case fills A, B (and C) with fixed-seed uniform values in [-1, 1],
// runs the plain reference kernel (templates/gemm/reference.h, emitted for
// the case's dtypes and layout, the one the tuner checks candidates
// against), then kgen, and compares on the host:
//
//   ref    op(A)*op(B) accumulated in double from the exact bf16/f16 inputs
//          (products of 16-bit floats are exact; the double sum is exact to
//          ~1e-16), then alpha*ref + beta*C in double;
//   naive  the same loop in fp32, k in order, rounded to C's dtype: what a
//          straightforward same-dtype implementation gets.
//
// The rule (DESIGN.md, as FlashAttention's tests): max|ours - ref| <=
// 2 * max|naive - ref|, with one floor. When the naive error is zero or
// tiny (K = 1, where every product is exact; or few elements, none of which
// happened to round far), twice it would demand that a correct kernel
// summing in another order never rounds an element differently; so the
// bound is never below half an ulp of C's dtype at max|ref|, the rounding
// error a kernel storing C in that dtype may make on its largest element.
// It is not a tolerance added on top: with many elements the naive error
// is already about that large, and the printed ratio ours/naive shows the
// margin for every case.
//
// C starts as NaN when beta == 0 (kernels must not read it, and every
// element must be written); padding between rows and guard elements around
// C must come back unchanged. Without a GPU every test is skipped.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Emitter.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Codegen/Reference.h"
#include "kgen/Runtime/Tuner.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

using namespace kgen;

namespace {

/// Element i of a downloaded buffer of `t` values.
double decode(DType t, const std::vector<char> &buf, size_t i) {
  return decodeElement(t, buf.data(), i);
}

//===----------------------------------------------------------------------===//
// Cases
//===----------------------------------------------------------------------===//

const DType kInputTypes[] = {DType::BF16, DType::F16};
const DType kOutputTypes[] = {DType::BF16, DType::F16, DType::F32};
const char *const kLayouts[] = {"nn", "nt", "tn", "tt"};

struct Case {
  int64_t m = 1, n = 1,
          k = 1;             ///< m: the problem's M (a hint when M is dynamic)
  std::string layout = "nn"; ///< "nt": A 'N', B 'T'
  DType ab = DType::BF16, c = DType::BF16;
  float alpha = 1, beta = 0;
  int64_t pad[3] = {0, 0, 0}; ///< leading dimension = packed + pad (A, B, C)
  int off[3] = {0, 0, 0};     ///< elements each pointer is moved by
  bool staticM = false, staticN = true, staticK = true;
  int64_t callM = -1; ///< the run-time M when it differs from m
  /// An explicit variant (Runtime::compile + launch) instead of
  /// Runtime::gemm's choice.
  std::optional<GemmConfig> config;
  /// The fused epilogue and strided batches (batches lie one after the
  /// other, each operand's ld * rows apart; the bias and the residual have
  /// C's dtype).
  BiasKind bias = BiasKind::None;
  Activation act = Activation::None;
  bool residual = false;
  int64_t batch = 1;
  bool tf32 = false; ///< f32 inputs through TF32 (ab = F32)
  /// A's and B's allocations end at their last element (no guard), so that
  /// compute-sanitizer sees any read past them (repack's copy kernel).
  bool tight = false;
  /// fp8 inputs: the per-tensor scales passed (GemmArgs::scaleA, scaleB,
  /// from device memory); 0 passes none (read as 1).
  float scaleA = 0, scaleB = 0;

  int64_t runM() const { return callM >= 0 ? callM : m; }

  GemmProblem problem() const {
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.ab = ab;
    p.c = c;
    p.transA = layout[0] == 't';
    p.transB = layout[1] == 't';
    p.staticM = staticM;
    p.staticN = staticN;
    p.staticK = staticK;
    p.bias = bias;
    p.act = act;
    p.residual = residual;
    p.batch = batch;
    p.tf32 = tf32;
    p.alignA = p.alignB = defaultAlign(ab);
    return p;
  }

  std::string describe() const {
    std::ostringstream os;
    os << m << "x" << n << "x" << k << " " << layout << " " << toString(ab)
       << (tf32 ? "(tf32)" : "") << "->" << toString(c);
    if (callM >= 0)
      os << " (M = " << callM << " at run time)";
    os << " static=" << (staticM ? "m" : "") << (staticN ? "n" : "")
       << (staticK ? "k" : "") << (!staticM && !staticN && !staticK ? "-" : "");
    if (alpha != 1 || beta != 0)
      os << " alpha=" << alpha << " beta=" << beta;
    if (scaleA != 0 || scaleB != 0)
      os << " scales=" << scaleA << "," << scaleB;
    if (pad[0] || pad[1] || pad[2])
      os << " ld+(" << pad[0] << "," << pad[1] << "," << pad[2] << ")";
    if (off[0] || off[1] || off[2])
      os << " ptr+(" << off[0] << "," << off[1] << "," << off[2] << ")";
    if (bias != BiasKind::None)
      os << " bias " << toString(bias);
    if (act != Activation::None)
      os << " " << toString(act);
    if (residual)
      os << " +residual";
    if (batch != 1)
      os << " batch " << batch;
    if (config)
      os << " config "
         << (config->loop == GemmLoop::Wgmma  ? "wgmma "
             : config->loop == GemmLoop::Gemv ? "gemv "
                                              : "")
         << config->blockM << "x" << config->blockN << "x" << config->blockK
         << " w" << config->warpsM << "x" << config->warpsN << " s"
         << config->stages
         << (config->smem == SmemLayout::Swizzled ? " swizzled" : " padded")
         << (config->cluster > 1 ? " cluster " + std::to_string(config->cluster)
                                 : std::string())
         << (config->splitK > 1 ? " splitK " + std::to_string(config->splitK)
                                : std::string())
         << (config->repack ? " repack" : "")
         << (config->swapAB ? " swapAB" : "")
         << (config->streamK ? " streamK" : "");
    return os.str();
  }
};

Case make(int64_t m, int64_t n, int64_t k, const char *layout, DType ab,
          DType c) {
  Case x;
  x.m = m;
  x.n = n;
  x.k = k;
  x.layout = layout;
  x.ab = ab;
  x.c = c;
  return x;
}

/// Where a stored operand lies in its buffer.
struct Operand {
  int64_t rows, extent, ld, off, elems;
  int elem;
  int64_t stride; ///< elements between batches (rows * ld)
};

constexpr int64_t kGuard = 64; ///< elements after the matrix, never written

/// A, B and C of a case: rows x extent (contiguous) with ld and offset.
std::array<Operand, 3> operands(const Case &c) {
  const int64_t M = c.runM(), N = c.n, K = c.k;
  const bool ta = c.layout[0] == 't', tb = c.layout[1] == 't';
  int64_t rows[3] = {ta ? K : M, tb ? N : K, M};
  int64_t extent[3] = {ta ? M : K, tb ? K : N, N};
  int elem[3] = {sizeOf(c.ab), sizeOf(c.ab), sizeOf(c.c)};
  std::array<Operand, 3> out;
  for (int i = 0; i < 3; ++i) {
    int64_t ld = extent[i] + c.pad[i];
    out[i] = {rows[i],
              extent[i],
              ld,
              c.off[i],
              c.off[i] + (c.batch - 1) * rows[i] * ld + (rows[i] - 1) * ld +
                  extent[i] + (c.tight && i < 2 ? 0 : kGuard),
              elem[i],
              rows[i] * ld};
  }
  return out;
}

/// Elements of the bias (all batches, packed) and of the residual (M x N
/// packed a batch, batches packed).
int64_t biasElems(const Case &c) {
  return c.bias == BiasKind::None
             ? 0
             : c.batch * (c.bias == BiasKind::AlongM ? c.runM() : c.n);
}
int64_t residualElems(const Case &c) {
  return c.residual ? c.batch * c.runM() * c.n : 0;
}

/// The call's arguments for buffers at `base` (real or, for planning, fake
/// pointers with the same alignment). Leading dimensions are passed as 0
/// ("packed") when they are packed and Runtime::gemm runs, to cover that.
GemmArgs argsFor(const Case &c, const std::array<Operand, 3> &ops,
                 char *const base[5]) {
  GemmArgs a;
  const void *p[3];
  int64_t ld[3];
  for (int i = 0; i < 3; ++i) {
    p[i] = base[i] + ops[i].off * ops[i].elem;
    ld[i] = c.pad[i] == 0 && !c.config ? 0 : ops[i].ld;
  }
  a.a = p[0];
  a.b = p[1];
  a.c = const_cast<void *>(p[2]);
  a.m = c.runM();
  a.lda = ld[0];
  a.ldb = ld[1];
  a.ldc = ld[2];
  a.alpha = c.alpha;
  a.beta = c.beta;
  if (c.bias != BiasKind::None)
    a.bias = base[3];
  if (c.residual)
    a.residual = base[4]; // packed: ldr and its stride left to the default
  if (c.batch != 1) {
    a.batch = c.batch;
    a.strideA = ops[0].stride;
    a.strideB = ops[1].stride;
    a.strideC = ops[2].stride;
  }
  return a;
}

GemmArgs fakeArgs(const Case &c) {
  // 256-byte aligned, as device allocations are.
  char *base[5] = {reinterpret_cast<char *>(uintptr_t(1) << 32),
                   reinterpret_cast<char *>(uintptr_t(2) << 32),
                   reinterpret_cast<char *>(uintptr_t(3) << 32),
                   reinterpret_cast<char *>(uintptr_t(4) << 32),
                   reinterpret_cast<char *>(uintptr_t(5) << 32)};
  return argsFor(c, operands(c), base);
}

/// The problem an explicit variant is compiled for: the case's, with the
/// alignments its arguments allow (Runtime::launch refuses a kernel that
/// promises more), M kept as the hint when dynamic.
GemmProblem variantProblem(const Case &c) {
  GemmProblem r = Runtime::resolve(c.problem(), fakeArgs(c));
  if (!c.staticM)
    r.m = c.m;
  return r;
}

/// The kernel a case runs. For Runtime::gemm this mirrors its choice in
/// lib/Runtime/Runtime.cpp (the problem resolved against the arguments,
/// keyed on the problem's M when M is dynamic, defaultConfig for the
/// call's M); it is used only to compile ahead in parallel and to name the
/// kernel in messages, so a mismatch costs time, never correctness.
std::pair<GemmProblem, GemmConfig> plannedKernel(const Case &c, Target t) {
  if (c.config)
    return {variantProblem(c), *c.config};
  GemmProblem r = Runtime::resolve(c.problem(), fakeArgs(c));
  GemmProblem keyed = r;
  if (!c.staticM)
    keyed.m = c.m;
  return {keyed, defaultConfig(r, t)};
}

/// Every layout x input x output dtype on the mid sizes; every layout x
/// input dtype, outputs taking turns, on the edges and ragged shapes.
std::vector<Case> sweepCases() {
  std::vector<Case> out;
  for (auto [m, n, k] : {std::array<int64_t, 3>{127, 4099, 1023},
                         std::array<int64_t, 3>{532, 2048, 2048}})
    for (const char *l : kLayouts)
      for (DType ab : kInputTypes)
        for (DType c : kOutputTypes)
          out.push_back(make(m, n, k, l, ab, c));
  int turn = 0;
  for (auto [m, n, k] :
       {std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{17, 33, 65},
        std::array<int64_t, 3>{255, 129, 257},
        std::array<int64_t, 3>{1, 4096, 4096}})
    for (const char *l : kLayouts)
      for (DType ab : kInputTypes)
        out.push_back(make(m, n, k, l, ab, kOutputTypes[turn++ % 3]));
  return out;
}

std::vector<Case> largeCases() {
  return {make(4096, 4096, 4096, "nt", DType::BF16, DType::BF16),
          make(4096, 4096, 4096, "tn", DType::F16, DType::F32)};
}

std::vector<Case> alphaBetaCases() {
  auto ab = [](Case c, float alpha, float beta) {
    c.alpha = alpha;
    c.beta = beta;
    return c;
  };
  return {
      ab(make(127, 4099, 1023, "nt", DType::BF16, DType::BF16), 0.5f, -1.25f),
      ab(make(255, 129, 257, "tn", DType::F16, DType::F32), -2.0f, 0.5f),
      ab(make(532, 2048, 2048, "nn", DType::BF16, DType::F16), 1.0f, 1.0f),
      ab(make(17, 33, 65, "tt", DType::F16, DType::BF16), 0.0f, 3.0f),
      ab(make(1, 1, 1, "nt", DType::BF16, DType::F32), 0.75f, 0.25f)};
}

std::vector<Case> leadingDimCases() {
  auto pad = [](Case c, int64_t a, int64_t b, int64_t cc, float beta = 0) {
    c.pad[0] = a;
    c.pad[1] = b;
    c.pad[2] = cc;
    c.beta = beta;
    return c;
  };
  return {
      pad(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), 8, 8, 8),
      pad(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), 3, 5, 1),
      pad(make(255, 129, 257, "nn", DType::F16, DType::F32), 2, 4, 6),
      pad(make(1, 4096, 4096, "tt", DType::BF16, DType::F16), 16, 1, 0),
      pad(make(532, 2048, 2048, "tt", DType::F16, DType::BF16), 8, 8, 8, 0.5f)};
}

std::vector<Case> offsetCases() {
  auto off = [](Case c, int a, int b, int cc, float beta = 0) {
    c.off[0] = a;
    c.off[1] = b;
    c.off[2] = cc;
    c.beta = beta;
    return c;
  };
  return {
      off(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), 1, 0, 0),
      off(make(532, 2048, 2048, "tn", DType::F16, DType::F32), 0, 1, 0),
      off(make(127, 4099, 1023, "nn", DType::BF16, DType::F16), 0, 0, 1, 0.5f),
      off(make(255, 129, 257, "tt", DType::F16, DType::BF16), 1, 1, 1)};
}

/// The fused epilogue: every feature on ragged and divisible shapes, every
/// C dtype, with and without reading C.
std::vector<Case> epilogueCases() {
  auto epi = [](Case c, BiasKind b, Activation a, bool r, float beta = 0) {
    c.bias = b;
    c.act = a;
    c.residual = r;
    c.beta = beta;
    return c;
  };
  using B = BiasKind;
  using A = Activation;
  return {
      epi(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), B::AlongN,
          A::None, false),
      epi(make(127, 4099, 1023, "nt", DType::BF16, DType::BF16), B::AlongN,
          A::GeluTanh, false),
      epi(make(127, 4099, 1023, "nn", DType::F16, DType::F32), B::AlongM,
          A::ReLU, true, 0.5f),
      epi(make(532, 2048, 2048, "tn", DType::BF16, DType::F16), B::None,
          A::GeluErf, true),
      epi(make(255, 129, 257, "tt", DType::F16, DType::BF16), B::AlongN,
          A::SiLU, true, -1.0f),
      epi(make(1, 4096, 4096, "nt", DType::BF16, DType::BF16), B::AlongN,
          A::SiLU, false),
      epi(make(17, 33, 65, "nt", DType::BF16, DType::F32), B::AlongM,
          A::GeluTanh, true),
      epi(make(256, 256, 512, "nt", DType::F16, DType::F16), B::AlongN,
          A::GeluErf, true, 1.0f),
  };
}

/// Strided batches, alone and with an epilogue, on the z grid dimension.
std::vector<Case> batchedCases() {
  auto batched = [](Case c, int64_t n, BiasKind b = BiasKind::None,
                    Activation a = Activation::None, bool r = false) {
    c.batch = n;
    c.bias = b;
    c.act = a;
    c.residual = r;
    return c;
  };
  Case padded = make(127, 4099, 1023, "nn", DType::F16, DType::F32);
  padded.pad[0] = 8;
  padded.pad[2] = 3;
  padded.beta = 0.5f;
  return {
      batched(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), 4),
      batched(make(17, 33, 65, "tn", DType::F16, DType::BF16), 7),
      batched(padded, 3),
      batched(make(255, 129, 257, "tt", DType::BF16, DType::F16), 5,
              BiasKind::AlongN, Activation::GeluTanh, true),
      batched(make(64, 4096, 4096, "nt", DType::BF16, DType::BF16), 8,
              BiasKind::AlongM, Activation::SiLU, false),
  };
}

/// Appends `c` once for each candidate config the enumerator yields for it
/// that `keep` accepts, run as an explicit variant.
template <class Keep>
void addCandidates(std::vector<Case> &out, Case c, Target t, Keep keep) {
  for (const GemmConfig &cfg : enumerateConfigs(variantProblem(c), t))
    if (keep(cfg)) {
      c.config = cfg;
      out.push_back(c);
    }
}

/// Split-K and the small-M (decode) shapes it serves: every split-K
/// candidate the enumerator yields for them, run as explicit variants (the
/// workspace comes from the runtime), plus one with an epilogue and batches.
std::vector<Case> splitKCases(Target t) {
  std::vector<Case> out;
  auto add = [&](Case c) {
    addCandidates(out, c, t,
                  [](const GemmConfig &cfg) { return cfg.splitK > 1; });
  };
  add(make(1, 4096, 4096, "nt", DType::BF16, DType::BF16));
  add(make(16, 4096, 4096, "nn", DType::BF16, DType::BF16));
  add(make(64, 8192, 8192, "nt", DType::F16, DType::F32));
  add(make(127, 4099, 1023, "nt", DType::BF16, DType::BF16));
  add(make(532, 2048, 2048, "tn", DType::BF16, DType::F16));
  Case fused = make(32, 4096, 4096, "nt", DType::BF16, DType::BF16);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::SiLU;
  fused.residual = true;
  fused.batch = 3;
  fused.beta = 0.5f;
  add(fused);
  return out;
}

/// The wgmma loop's split tiles (sm_90a only), stream-K or split-K in
/// lockstep (`keep` picks which): every such candidate the enumerator yields
/// for the mid shapes they are for, run as explicit variants (the workspace
/// comes from the runtime), then the fused epilogue with beta and a bias, a
/// ragged K (TMA zero-fills the last k-slice), an f32 C (promoted sums), and
/// a dynamic M called with other Ms (other tile counts on the same grid).
template <class Keep> std::vector<Case> splitTileCases(Target t, Keep keep) {
  std::vector<Case> out;
  if (t != Target::SM90A)
    return out;
  auto add = [&](Case c) { addCandidates(out, c, t, keep); };
  add(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16));
  add(make(532, 2048, 2048, "nn", DType::BF16, DType::BF16));
  add(make(788, 2048, 2048, "nt", DType::BF16, DType::BF16));
  add(make(532, 2048, 16384, "nt", DType::BF16, DType::BF16));
  add(make(1024, 1024, 1024, "nn", DType::F16, DType::F16));
  // 127x4099x1023 with rows padded to 16 bytes (TMA's rule) and K taken at
  // run time: a ragged M, N and last k-slice.
  Case ragged = make(127, 4099, 1023, "nt", DType::BF16, DType::BF16);
  ragged.pad[0] = 1;
  ragged.pad[1] = 1;
  ragged.staticK = false;
  add(ragged);
  Case f32 = make(532, 2048, 2048, "nn", DType::BF16, DType::F32);
  add(f32);
  Case fused = make(532, 2048, 2048, "nt", DType::BF16, DType::BF16);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::GeluTanh;
  fused.residual = true;
  fused.beta = 0.5f;
  fused.alpha = 0.75f;
  add(fused);
  Case fusedM = make(788, 2048, 2048, "nn", DType::F16, DType::F32);
  fusedM.bias = BiasKind::AlongM;
  fusedM.beta = -1.0f;
  add(fusedM);
  Case otherM = make(532, 2048, 2048, "nt", DType::BF16, DType::BF16);
  for (int64_t m : {1, 77, 1000, 3000}) {
    otherM.callM = m;
    add(otherM);
  }
  return out;
}

/// Stream-K: splitTileCases' stream-K candidates, and small shapes where
/// many CTAs share each tile (the compute-sanitizer cases:
/// KGEN_GPU_TEST_MAX_MNK keeps only these).
std::vector<Case> streamKCases(Target t) {
  auto keep = [](const GemmConfig &cfg) { return cfg.streamK; };
  std::vector<Case> out = splitTileCases(t, keep);
  if (t != Target::SM90A)
    return out;
  auto add = [&](Case c) { addCandidates(out, c, t, keep); };
  // Small: 4 tiles of 16 k-slices on 64 CTAs (one iteration each, 16
  // contributors a tile), 1 tile on 4, and 3 tiles of 3 slices on 9.
  add(make(200, 256, 1024, "nt", DType::BF16, DType::BF16));
  Case smallBeta = make(64, 128, 256, "nn", DType::F16, DType::F16);
  smallBeta.beta = 0.5f;
  smallBeta.bias = BiasKind::AlongN;
  add(smallBeta);
  add(make(130, 192, 192, "nt", DType::BF16, DType::F32));
  return out;
}

/// Split-K in lockstep: splitTileCases' candidates (their default among
/// them at 532x2048x16384), the default of 532x2048x16384 called with other
/// Ms, and small explicit configs (the compute-sanitizer cases): 4 tiles of
/// 16 k-slices in 8 parts of 2 slices, 1 tile of 4 slices in 3 parts (2, 1
/// and 1 slices), and 3 slices asked for in 5 parts (3 run).
std::vector<Case> lockstepCases(Target t) {
  std::vector<Case> out =
      splitTileCases(t, [](const GemmConfig &cfg) { return cfg.splitK > 1; });
  if (t != Target::SM90A)
    return out;
  Case longK = make(532, 2048, 16384, "nt", DType::BF16, DType::BF16);
  longK.config = defaultConfig(variantProblem(longK), t);
  for (int64_t m : {1, 300, 3000}) {
    longK.callM = m;
    out.push_back(longK);
  }
  auto split = [](int bm, int bn, int parts) {
    GemmConfig c;
    c.loop = GemmLoop::Wgmma;
    c.blockM = bm;
    c.blockN = bn;
    c.blockK = 64;
    c.warpsM = bm / 64;
    c.warpsN = 1;
    c.stages = 4;
    c.smem = SmemLayout::Swizzled;
    c.smemPad = 0;
    c.splitK = parts;
    return c;
  };
  Case small = make(200, 256, 1024, "nt", DType::BF16, DType::BF16);
  small.config = split(128, 128, 8);
  out.push_back(small);
  Case smallBeta = make(64, 128, 256, "nn", DType::F16, DType::F16);
  smallBeta.beta = 0.5f;
  smallBeta.bias = BiasKind::AlongN;
  smallBeta.config = split(64, 128, 3);
  out.push_back(smallBeta);
  Case clamped = make(130, 192, 192, "nt", DType::BF16, DType::F32);
  clamped.config = split(128, 64, 5);
  out.push_back(clamped);
  return out;
}

/// Swapped wgmma tiles (C^T = B^T A^T, n fitted along M), with B stored
/// N x K (K-major slices) and K x N (M-major slices): splitTileCases'
/// swapped candidates (the mid shapes, a ragged 127x4099x1023 with K at run
/// time, the fused epilogue, dynamic M from 1 to 3000), and those of 1024^3
/// in f16, an f32 C (promoted sums), the epilogue with a bias along M, and
/// small M; the ragged shape and dynamic M again with B stored K x N.
std::vector<Case> swapCases(Target t) {
  auto keep = [](const GemmConfig &cfg) { return cfg.swapAB; };
  std::vector<Case> out = splitTileCases(t, keep);
  if (t != Target::SM90A)
    return out;
  auto add = [&](Case c) { addCandidates(out, c, t, keep); };
  add(make(1024, 1024, 1024, "nt", DType::F16, DType::F16));
  add(make(532, 2048, 2048, "nt", DType::BF16, DType::F32));
  Case fusedM = make(788, 2048, 2048, "nt", DType::F16, DType::F32);
  fusedM.bias = BiasKind::AlongM;
  fusedM.act = Activation::ReLU;
  fusedM.beta = -1.0f;
  add(fusedM);
  add(make(64, 4096, 4096, "nt", DType::BF16, DType::BF16));
  add(make(64, 4096, 4096, "nn", DType::BF16, DType::BF16));
  Case raggedNN = make(127, 4099, 1023, "nn", DType::BF16, DType::BF16);
  raggedNN.pad[0] = 1; // 1024: 16-byte rows (TMA's rule)
  raggedNN.pad[1] = 5; // 4104
  raggedNN.staticK = false;
  add(raggedNN);
  Case otherMNN = make(532, 2048, 2048, "nn", DType::BF16, DType::BF16);
  for (int64_t m : {1, 77, 3000}) {
    otherMNN.callM = m;
    add(otherMNN);
  }
  // Small enough for the sanitizers (KGEN_GPU_TEST_MAX_MNK=2^27): 200 rows
  // in 2 tiles of 104, and 130 rows in 2 of 72 (both ragged) with an f32 C
  // and a ring that wraps.
  auto swapped = [](int bm, int stages) {
    GemmConfig c;
    c.loop = GemmLoop::Wgmma;
    c.blockM = bm;
    c.blockN = 64;
    c.blockK = 64;
    c.warpsM = c.warpsN = 1;
    c.stages = stages;
    c.smem = SmemLayout::Swizzled;
    c.smemPad = 0;
    c.swapAB = true;
    return c;
  };
  Case small = make(200, 256, 1024, "nt", DType::BF16, DType::BF16);
  small.config = swapped(104, 4);
  out.push_back(small);
  Case smallF32 = make(130, 192, 192, "nt", DType::F16, DType::F32);
  smallF32.config = swapped(72, 2);
  smallF32.beta = 0.5f;
  out.push_back(smallF32);
  // The same with B stored K x N, and two consumers (128 columns a tile).
  for (Case c : {small, smallF32}) {
    c.layout = "nn";
    out.push_back(c);
  }
  Case twoConsumers = make(200, 256, 1024, "nn", DType::BF16, DType::BF16);
  twoConsumers.config = swapped(104, 4);
  twoConsumers.config->blockN = 128;
  twoConsumers.config->warpsM = 2;
  twoConsumers.bias = BiasKind::AlongN;
  twoConsumers.act = Activation::SiLU;
  out.push_back(twoConsumers);
  return out;
}

/// Small M on sm_90a: every wgmma candidate of a fitted width or a ring
/// deeper than 6 stages (64x32 at 12 and 16, 64x64 at 8 and 12, 128x32,
/// pairs sharing A) the enumerator yields for 32, 64 and 128 x 4096 x 4096
/// and 64 x 8192 x 8192 (f16 in, f32 out: promoted sums), then the default
/// 64x32 at 16 stages with the fused epilogue, and called with other Ms
/// (1000 rows: 16 x 128 tiles, each CTA's ring running on across its
/// tiles).
std::vector<Case> smallMFittedCases(Target t) {
  std::vector<Case> out;
  if (t != Target::SM90A)
    return out;
  auto add = [&](Case c) {
    addCandidates(out, c, t, [](const GemmConfig &cfg) {
      return cfg.loop == GemmLoop::Wgmma && (cfg.blockN % 64 || cfg.stages > 6);
    });
  };
  add(make(32, 4096, 4096, "nt", DType::BF16, DType::BF16));
  add(make(64, 4096, 4096, "nt", DType::BF16, DType::BF16));
  add(make(128, 4096, 4096, "nt", DType::BF16, DType::BF16));
  add(make(64, 8192, 8192, "nt", DType::F16, DType::F32));
  add(make(64, 4096, 4096, "nn", DType::BF16, DType::BF16));
  Case fused = make(64, 4096, 4096, "nt", DType::BF16, DType::BF16);
  fused.config = defaultConfig(variantProblem(fused), t);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::GeluErf;
  fused.residual = true;
  fused.alpha = 0.75f;
  fused.beta = 0.5f;
  out.push_back(fused);
  Case otherM = make(64, 4096, 4096, "nt", DType::BF16, DType::BF16);
  otherM.config = defaultConfig(variantProblem(otherM), t);
  for (int64_t m : {1, 100, 1000}) {
    otherM.callM = m;
    out.push_back(otherM);
  }
  // Small enough for racecheck (KGEN_GPU_TEST_MAX_MNK=2^27): 16 tiles of
  // 32 k-slices, the 16-stage ring wrapping twice a tile; B stored K x N
  // through 64x64 at 12 stages, a ragged M.
  Case small = make(64, 512, 2048, "nt", DType::BF16, DType::BF16);
  small.config = otherM.config;
  out.push_back(small);
  Case smallNN = make(100, 256, 1024, "nn", DType::F16, DType::F16);
  smallNN.config = defaultConfig(
      variantProblem(make(64, 4096, 4096, "nn", DType::F16, DType::F16)), t);
  out.push_back(smallNN);
  return out;
}

/// Repack (a copy kernel pads misaligned A and/or B into the runtime's
/// workspace, K zero-padded to 8, then the wgmma or tiled loop reads the
/// copies): every repack candidate the enumerator yields for issue 3's
/// 127x4099x1023 in three layouts (wgmma on sm_90a, tiled, split-K), the
/// fused epilogue with beta (C, bias and residual stay the caller's), only B
/// misaligned (A's rows of 1024 are read in place), pointers one element
/// off, pointers 3 and 5 elements off in allocations that end at A's and
/// B's last element (the copy's aligned 16-byte reads must stop short of
/// them: run under compute-sanitizer), a strided batch (tiled loop), and the
/// tiny shapes 1x1x1 and 33x17x9.
std::vector<Case> repackCases(Target t) {
  std::vector<Case> out;
  auto add = [&](Case c) {
    addCandidates(out, c, t, [](const GemmConfig &cfg) { return cfg.repack; });
  };
  add(make(127, 4099, 1023, "nt", DType::BF16, DType::BF16));
  add(make(127, 4099, 1023, "nn", DType::BF16, DType::BF16));
  add(make(127, 4099, 1023, "tt", DType::F16, DType::F32));
  Case fused = make(127, 4099, 1023, "nt", DType::BF16, DType::BF16);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::GeluTanh;
  fused.residual = true;
  fused.beta = 0.5f;
  add(fused);
  add(make(256, 4099, 1024, "nn", DType::BF16, DType::BF16));
  Case off = make(127, 4099, 1023, "nt", DType::BF16, DType::BF16);
  off.off[0] = 1;
  off.off[1] = 1;
  off.staticK = false;
  add(off);
  for (const char *layout : {"nt", "nn"}) {
    Case tight = make(127, 4099, 1023, layout, DType::BF16, DType::BF16);
    tight.off[0] = 3;
    tight.off[1] = 5;
    tight.staticK = false;
    tight.tight = true;
    add(tight);
  }
  Case batched = make(127, 259, 1023, "tn", DType::F16, DType::BF16);
  batched.batch = 3;
  batched.bias = BiasKind::AlongM;
  add(batched);
  for (const char *layout : {"nt", "nn"}) {
    add(make(1, 1, 1, layout, DType::BF16, DType::BF16));
    add(make(33, 17, 9, layout, DType::F16, DType::F16));
  }
  // The enumerator offers only 64x64 wgmma tiles for the tiny shapes: run a
  // 64x128 one too.
  if (t == Target::SM90A) {
    GemmConfig wg;
    wg.loop = GemmLoop::Wgmma;
    wg.blockM = 64;
    wg.blockN = 128;
    wg.blockK = 64;
    wg.warpsM = 1;
    wg.warpsN = 1;
    wg.stages = 4;
    wg.smem = SmemLayout::Swizzled;
    wg.smemPad = 0;
    wg.repack = true;
    for (const char *layout : {"nt", "nn"})
      for (Case c : {make(1, 1, 1, layout, DType::BF16, DType::BF16),
                     make(33, 17, 9, layout, DType::F16, DType::F16)}) {
        c.config = wg;
        out.push_back(c);
      }
  }
  return out;
}

/// f32 inputs through TF32 (tiled loop, mma.sync m16n8k8 .tf32): every
/// layout with an f32 and a bf16 C on a ragged shape, a large one, alpha and
/// beta, the epilogue with batches, and every candidate config of two shapes
/// (split-K among them for the small M). The reference's naive loop rounds
/// its inputs to TF32 as the kernels do (templates/gemm/reference.h).
std::vector<Case> tf32Cases(Target t) {
  auto tf = [](int64_t m, int64_t n, int64_t k, const char *layout, DType c) {
    Case x = make(m, n, k, layout, DType::F32, c);
    x.tf32 = true;
    return x;
  };
  std::vector<Case> out;
  for (const char *layout : kLayouts)
    for (DType c : {DType::F32, DType::BF16})
      out.push_back(tf(127, 4099, 1023, layout, c));
  out.push_back(tf(2048, 2048, 2048, "nt", DType::F32));
  Case ab = tf(255, 129, 257, "tn", DType::F32);
  ab.alpha = -2.0f;
  ab.beta = 0.5f;
  out.push_back(ab);
  Case fused = tf(127, 4099, 1023, "nn", DType::F32);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::GeluErf;
  fused.residual = true;
  fused.batch = 3;
  out.push_back(fused);
  for (Case c : {tf(532, 2048, 2048, "nt", DType::F32),
                 tf(16, 4096, 4096, "nn", DType::F32)})
    for (const GemmConfig &cfg : enumerateConfigs(variantProblem(c), t)) {
      c.config = cfg;
      out.push_back(c);
    }
  return out;
}

/// fp8 inputs (sm_90a's wgmma loop, layout nt): e4m3 and e5m2 into bf16 and
/// f16 (an f32 C is refused), with and without per-tensor scales; ragged M and
/// N, K not a multiple of the 128-element k-slice (TMA's zero fill), M = 1;
/// alpha and beta, the fused epilogue; every candidate config of an LLM shape
/// (fitted widths, pairs, stream-K, split-K in lockstep) and of a small-M
/// one; and Runtime::gemm's own choice at 4096^3.
std::vector<Case> fp8Cases(Target t) {
  std::vector<Case> out;
  if (t != Target::SM90A)
    return out;
  auto f8 = [](int64_t m, int64_t n, int64_t k, DType ab, DType c) {
    return make(m, n, k, "nt", ab, c);
  };
  for (DType ab : {DType::E4M3, DType::E5M2}) {
    for (DType c : {DType::BF16, DType::F16}) {
      out.push_back(f8(256, 512, 1024, ab, c));
      Case scaled = f8(127, 4099, 1040, ab, c);
      scaled.scaleA = 0.37f;
      scaled.scaleB = 2.9f;
      out.push_back(scaled);
    }
    Case one = f8(1, 4096, 4096, ab, DType::BF16);
    one.scaleB = 0.0625f;
    out.push_back(one);
    Case ab2 = f8(255, 384, 528, ab, DType::F16);
    ab2.alpha = -2.0f;
    ab2.beta = 0.5f;
    ab2.scaleA = 1.5f;
    out.push_back(ab2);
    Case fused = f8(300, 1000, 2048, ab, DType::BF16);
    fused.bias = BiasKind::AlongN;
    fused.act = Activation::GeluTanh;
    fused.residual = true;
    fused.scaleA = 0.5f;
    fused.scaleB = 0.25f;
    out.push_back(fused);
  }
  out.push_back(f8(4096, 4096, 4096, DType::E4M3, DType::BF16));
  for (Case c : {f8(532, 2048, 2048, DType::E4M3, DType::BF16),
                 f8(64, 4096, 4096, DType::E5M2, DType::F16)}) {
    c.scaleA = 0.75f;
    c.scaleB = 1.25f;
    for (const GemmConfig &cfg : enumerateConfigs(variantProblem(c), t)) {
      c.config = cfg;
      out.push_back(c);
    }
  }
  return out;
}

/// The gemv loop (small M): every gemv candidate on the decode shapes, nt
/// and nn, ragged M/N/K (vectors lowered to 1 and 2), the epilogue with
/// batches, an f32 C, rings of 1 to 16 slots, and Runtime::gemm's own
/// choice.
std::vector<Case> gemvCases(Target t) {
  std::vector<Case> out;
  auto add = [&](Case c) {
    size_t before = out.size();
    addCandidates(out, c, t, [](const GemmConfig &cfg) {
      return cfg.loop == GemmLoop::Gemv;
    });
    EXPECT_GT(out.size(), before) << "no gemv candidate for " << c.describe();
  };
  for (int64_t m : {1, 16, 32, 64})
    for (const char *layout : {"nt", "nn"})
      add(make(m, 4096, 4096, layout, DType::BF16, DType::BF16));
  add(make(64, 8192, 8192, "nt", DType::F16, DType::F32));
  add(make(37, 4099, 1023, "nt", DType::BF16, DType::BF16));
  add(make(5, 4098, 1022, "nn", DType::F16, DType::F16));
  Case fused = make(32, 4096, 4096, "nt", DType::BF16, DType::BF16);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::SiLU;
  fused.residual = true;
  fused.batch = 3;
  fused.beta = 0.5f;
  add(fused);
  Case fusedM = make(13, 2048, 4096, "nn", DType::F16, DType::F32);
  fusedM.bias = BiasKind::AlongM;
  fusedM.act = Activation::GeluTanh;
  add(fusedM);
  // Rings the enumerator may not rank first: 1 slot, 16 slots wrapping
  // with split-K, M = 64 with B 'N', a deep ring on ragged shapes (vectors
  // of 1: through registers), and an odd depth.
  auto ring = [&](Case c, int blockM, int warps, int rowTiles, int stages,
                  int split) {
    GemmConfig g;
    g.loop = GemmLoop::Gemv;
    g.blockM = blockM;
    g.blockN = warps * 16 * rowTiles;
    g.blockK = 32;
    g.warpsM = 1;
    g.warpsN = warps;
    g.stages = stages;
    g.smemPad = 0;
    g.splitK = split;
    EXPECT_FALSE(checkConfig(variantProblem(c), g, t)) << c.describe();
    c.config = g;
    out.push_back(c);
  };
  ring(make(1, 4096, 4096, "nt", DType::BF16, DType::BF16), 8, 4, 1, 1, 8);
  ring(make(1, 4096, 4096, "nt", DType::BF16, DType::BF16), 8, 4, 1, 16, 8);
  ring(make(64, 4096, 4096, "nn", DType::BF16, DType::BF16), 64, 4, 4, 2, 4);
  ring(make(40, 4099, 1023, "nt", DType::F16, DType::F32), 40, 2, 2, 12, 2);
  ring(make(3, 8192, 8192, "nn", DType::F16, DType::F16), 8, 4, 4, 5, 1);
  // The dispatcher's choice, M at run time under another M than the hint.
  out.push_back(make(16, 4096, 4096, "nt", DType::BF16, DType::BF16));
  Case callM = make(64, 4096, 4096, "nn", DType::BF16, DType::BF16);
  callM.callM = 9;
  out.push_back(callM);
  return out;
}

/// Which dimensions are compile-time constants, and a dynamic M called with
/// an M other than the problem's hint.
std::vector<Case> staticDimCases() {
  auto dims = [](Case c, bool m, bool n, bool k, int64_t callM = -1) {
    c.staticM = m;
    c.staticN = n;
    c.staticK = k;
    c.callM = callM;
    return c;
  };
  return {
      dims(make(256, 256, 512, "nt", DType::BF16, DType::BF16), true, true,
           true),
      dims(make(127, 4099, 1023, "nn", DType::F16, DType::F32), true, true,
           true),
      dims(make(532, 2048, 2048, "tt", DType::BF16, DType::F32), false, false,
           false),
      dims(make(17, 33, 65, "tn", DType::F16, DType::F16), false, false, false),
      dims(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), false, true,
           true, 77),
      dims(make(532, 4099, 1023, "tn", DType::F16, DType::BF16), false, true,
           true, 1000)};
}

/// Explicit variants: every candidate config for two mid shapes, the first,
/// a middle and the last candidate for others.
std::vector<Case> explicitCases(Target t) {
  std::vector<Case> out;
  auto add = [&](Case c, bool all) {
    std::vector<GemmConfig> configs = enumerateConfigs(variantProblem(c), t);
    for (size_t i = 0; i < configs.size(); ++i)
      if (all || i == 0 || i == configs.size() / 2 || i + 1 == configs.size()) {
        c.config = configs[i];
        out.push_back(c);
      }
  };
  add(make(532, 2048, 2048, "nt", DType::BF16, DType::BF16), true);
  add(make(127, 4099, 1023, "tn", DType::F16, DType::F32), true);
  add(make(255, 129, 257, "nn", DType::BF16, DType::F16), false);
  add(make(17, 33, 65, "tt", DType::F16, DType::BF16), false);
  add(make(1, 4096, 4096, "nt", DType::BF16, DType::BF16), false);
  Case all = make(256, 256, 512, "nt", DType::BF16, DType::BF16);
  all.staticM = true; // every dimension divides the tile: no bounds checks
  add(all, false);
  Case other = make(532, 2048, 2048, "tn", DType::BF16, DType::F32);
  other.callM = 1000; // compiled for the hint 532, run with another M
  add(other, false);
  if (t == Target::SM90A) {
    // CTA pairs sharing B by multicast, each way B is stored; an odd number
    // of tile rows leaves the pair's second tile past M, with (532) and
    // without (384, M baked: no bounds checks) a ragged last tile.
    GemmConfig pair;
    pair.loop = GemmLoop::Wgmma;
    pair.blockM = 128;
    pair.blockN = 256;
    pair.blockK = 64;
    pair.warpsM = 2;
    pair.warpsN = 1;
    pair.stages = 4;
    pair.smem = SmemLayout::Swizzled;
    pair.smemPad = 0;
    pair.cluster = 2;
    for (const char *layout : {"nt", "nn"}) {
      Case c = make(532, 2048, 2048, layout, DType::BF16, DType::BF16);
      c.config = pair;
      out.push_back(c);
      Case baked = make(384, 512, 512, layout, DType::F16, DType::F16);
      baked.staticM = true;
      baked.config = pair;
      out.push_back(baked);
    }
    // The persistent walk at sizes racecheck gets through (M*N*K < 2^27):
    // 272 tiles on 132 multiprocessors, so each CTA runs two or three and
    // reuses its ring, barriers and store slab across tiles; one consumer
    // warpgroup (64x64, K 96: a ragged second k-step) and two (128x64, K
    // 48: one partial k-step a tile).
    for (int consumers : {1, 2}) {
      Case walk = consumers == 1
                      ? make(1024, 1088, 96, "nt", DType::BF16, DType::BF16)
                      : make(2048, 1088, 48, "nn", DType::F16, DType::F16);
      walk.config = pair;
      walk.config->blockM = 64 * consumers;
      walk.config->blockN = 64;
      walk.config->warpsM = consumers;
      walk.config->cluster = 1;
      out.push_back(walk);
    }
    Case f32 = make(532, 2048, 2048, "nn", DType::BF16, DType::F32);
    f32.config = pair;
    f32.config->blockN = 128; // the promoted sums need the registers
    out.push_back(f32);
    // The shared fused epilogue behind the wgmma loop, single CTAs.
    Case fused = make(532, 2048, 2048, "nn", DType::BF16, DType::F32);
    fused.bias = BiasKind::AlongM;
    fused.act = Activation::ReLU;
    fused.residual = true;
    fused.beta = 0.5f;
    fused.config = pair;
    fused.config->blockN = 128;
    fused.config->cluster = 1;
    out.push_back(fused);
    Case fusedN = make(384, 512, 512, "nt", DType::F16, DType::F16);
    fusedN.staticM = true;
    fusedN.bias = BiasKind::AlongN;
    fusedN.act = Activation::GeluTanh;
    fusedN.config = pair;
    fusedN.config->cluster = 1;
    out.push_back(fusedN);
    // Tiles fitted to the multiprocessors (B stored N x K; a wgmma n outside
    // the header's four, its atom written into the kernel file): f16 into
    // an f32 C (the promoted sums) through the fused epilogue, and a pair
    // of them, which shares A (each CTA loads 64 of the 128 A rows and
    // multicasts them); 25 tiles across, so the last pair's second tile
    // lies past N. Then a pair sharing A with B stored K x N.
    Case fitted = make(788, 2048, 2048, "nt", DType::F16, DType::F32);
    fitted.bias = BiasKind::AlongN;
    fitted.act = Activation::SiLU;
    fitted.beta = 0.5f;
    fitted.config = pair;
    fitted.config->blockN = 120;
    fitted.config->cluster = 1;
    out.push_back(fitted);
    Case fittedPair = make(532, 1960, 2048, "nt", DType::BF16, DType::BF16);
    fittedPair.config = pair;
    fittedPair.config->blockN = 80;
    out.push_back(fittedPair);
    Case sharesA = make(532, 1984, 512, "nn", DType::F16, DType::F16);
    sharesA.config = pair;
    sharesA.config->blockN = 64;
    out.push_back(sharesA);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The GPU, the helpers and the ahead-of-time compile
//===----------------------------------------------------------------------===//

struct Gpu {
  std::unique_ptr<Runtime> rt;
  std::string whyNot; ///< set when there is no GPU
  /// Any reference module: they all hold the same fill kernel.
  std::unique_ptr<GemmReference> filler;
  /// The reference of each dtype x layout, by its kernel name.
  std::map<std::string, std::unique_ptr<GemmReference>> references;

  static Gpu &get() {
    static Gpu g;
    return g;
  }

  /// The reference for a case's dtypes and layout (built on first use).
  const GemmReference &reference(const GemmProblem &p) {
    std::unique_ptr<GemmReference> &r = references[gemmReferenceName(p)];
    if (!r)
      r = std::make_unique<GemmReference>(*rt, p);
    return *r;
  }

  /// Compiles the kernels `cases` will run, and their references, in
  /// parallel threads before they run (a cold cache would otherwise spend
  /// most of the test compiling one kernel at a time). Errors are left for
  /// the case to report.
  void prewarm(const std::vector<Case> &cases) {
    Target t = rt->target();
    std::vector<std::pair<GemmProblem, GemmConfig>> jobs;
    std::vector<GemmProblem> refJobs;
    std::set<std::string> names;
    for (const Case &c : cases) {
      std::string ref = gemmReferenceName(c.problem());
      if (!references.count(ref) && names.insert(ref).second)
        refJobs.push_back(c.problem());
      try {
        auto job = plannedKernel(c, t);
        if (names.insert(gemmKernelName(job.first, job.second, t)).second)
          jobs.push_back(job);
      } catch (const Error &) {
      }
    }
    std::vector<std::unique_ptr<GemmReference>> built(refJobs.size());
    unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    auto t0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0}, nextRef{0};
    std::atomic<int> hits{0}, failed{0};
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i)
      pool.emplace_back([&] {
        for (size_t j; (j = nextRef++) < refJobs.size();) {
          try {
            built[j] = std::make_unique<GemmReference>(*rt, refJobs[j]);
          } catch (const std::exception &) {
          }
        }
        for (size_t j; (j = next++) < jobs.size();) {
          try {
            hits += rt->compile(jobs[j].first, jobs[j].second)->cacheHit;
          } catch (const std::exception &) {
            ++failed;
          }
        }
      });
    for (std::thread &th : pool)
      th.join();
    for (std::unique_ptr<GemmReference> &r : built)
      if (r)
        references[r->name()] = std::move(r);
    std::printf(
        "[ gpu      ] %zu kernels and %zu references for %zu cases ready in "
        "%.1f s (%d kernels from the disk cache, %d failed to build; %u "
        "threads)\n",
        jobs.size(), refJobs.size(), cases.size(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count(),
        hits.load(), failed.load(), threads);
  }

private:
  Gpu() {
    rt = std::make_unique<Runtime>();
    if (!rt->backend()) {
      openBackend(std::nullopt, &whyNot);
      return;
    }
    std::printf("[ gpu      ] %s (%s), kgen target %s\n",
                rt->backend()->deviceName().c_str(),
                rt->backend()->archName().c_str(),
                std::string(toString(rt->target())).c_str());
    // Also opens the compiler before prewarm's threads share it.
    filler = std::make_unique<GemmReference>(*rt, GemmProblem{});
  }
};

/// A device buffer freed on scope exit.
struct Buffer {
  Backend *be;
  char *p;
  size_t bytes;
  Buffer(Backend *be, size_t bytes)
      : be(be), p(static_cast<char *>(be->alloc(bytes))), bytes(bytes) {}
  ~Buffer() {
    try {
      be->free(p);
    } catch (...) {
    }
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  std::vector<char> download() const {
    std::vector<char> h(bytes);
    be->copyToHost(h.data(), p, bytes);
    return h;
  }
};

/// What one case's result looks like next to the reference.
struct Verdict {
  double errOurs = 0, errNaive = 0, maxRef = 0;
  double floor = 0;    ///< half an ulp of C's dtype at maxRef
  int64_t bad = 0;     ///< elements of C that are NaN or inf
  int64_t touched = 0; ///< elements outside C (padding, guards) changed
  int64_t worst = -1, firstBad = -1; ///< i * N + j
  int64_t firstTouched = -1;         ///< buffer element
  double bound() const { return std::max(2 * errNaive, floor); }
  bool pass() const { return bad == 0 && touched == 0 && errOurs <= bound(); }
};

/// `x` rounded to `t` (to nearest, ties to even), as a double.
double roundTo(DType t, double x) {
  const float f = float(x);
  if (t == DType::F32)
    return f;
  if (t == DType::F16)
    return double(static_cast<_Float16>(f));
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return f;
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

/// The epilogue on the host, after the reference: exactly (in double, from
/// the reference's double result) and as a same-dtype unfused
/// implementation would (from the naive result, already rounded to C's
/// dtype, then bias, activation and residual in fp32, rounded to C's dtype
/// again: what torch's separate ops get).
struct HostEpilogue {
  DType c;
  BiasKind bias = BiasKind::None;
  Activation act = Activation::None;
  bool residual = false;
  int64_t M = 0, N = 0;
  std::vector<char> biasH, resH; ///< C's dtype, as uploaded

  double biasAt(int64_t z, int64_t i, int64_t j) const {
    if (bias == BiasKind::None)
      return 0;
    return bias == BiasKind::AlongM ? decode(c, biasH, z * M + i)
                                    : decode(c, biasH, z * N + j);
  }
  double resAt(int64_t z, int64_t i, int64_t j) const {
    return residual ? decode(c, resH, (z * M + i) * N + j) : 0;
  }
  static double actExact(Activation a, double x) {
    switch (a) {
    case Activation::None:
      return x;
    case Activation::ReLU:
      return x > 0 ? x : 0;
    case Activation::GeluTanh:
      return 0.5 * x *
             (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::GeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::SiLU:
      return x / (1 + std::exp(-x));
    }
    return x;
  }
  static float actF32(Activation a, float x) {
    switch (a) {
    case Activation::None:
      return x;
    case Activation::ReLU:
      return x > 0 ? x : 0.f;
    case Activation::GeluTanh:
      return 0.5f * x *
             (1.f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    case Activation::GeluErf:
      return 0.5f * x * (1.f + std::erf(x * 0.70710678f));
    case Activation::SiLU:
      return x / (1.f + std::exp(-x));
    }
    return x;
  }
  double exact(int64_t z, int64_t i, int64_t j, double ref) const {
    return actExact(act, ref + biasAt(z, i, j)) + resAt(z, i, j);
  }
  double naive(int64_t z, int64_t i, int64_t j, double nv) const {
    if (bias == BiasKind::None && act == Activation::None && !residual)
      return nv;
    float x = float(nv);
    if (bias != BiasKind::None)
      x = float(roundTo(c, x + float(biasAt(z, i, j))));
    if (act != Activation::None)
      x = float(roundTo(c, actF32(act, x)));
    if (residual)
      x = float(roundTo(c, x + float(resAt(z, i, j))));
    return x;
  }
};

/// Compares C after the call (`after`, the whole buffer, laid out as `oc`,
/// `batch` matrices) with the reference (double, M x N packed a batch) and
/// the naive result (C's dtype, packed), both through the epilogue `epi`;
/// `before` is the buffer before the call.
Verdict compare(DType ct, int64_t M, int64_t N, int64_t batch,
                const Operand &oc, const std::vector<char> &before,
                const std::vector<char> &after, const std::vector<char> &refH,
                const std::vector<char> &naiveH, const HostEpilogue &epi) {
  Verdict v;
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        const int64_t idx = (z * M + i) * N + j;
        double r;
        std::memcpy(&r, refH.data() + 8 * idx, 8);
        r = epi.exact(z, i, j, r);
        double ours = decode(ct, after, oc.off + z * oc.stride + i * oc.ld + j);
        double nv = epi.naive(z, i, j, decode(ct, naiveH, idx));
        v.maxRef = std::max(v.maxRef, std::fabs(r));
        v.errNaive = std::max(v.errNaive, std::fabs(nv - r));
        if (!std::isfinite(ours)) {
          if (v.bad++ == 0)
            v.firstBad = idx;
          continue;
        }
        if (v.worst < 0 || std::fabs(ours - r) > v.errOurs) {
          v.errOurs = std::max(v.errOurs, std::fabs(ours - r));
          v.worst = idx;
        }
      }
  // Padding between rows and batches, and the guards before and after C.
  for (int64_t e = 0; e < oc.elems; ++e) {
    int64_t rel = e - oc.off;
    int64_t inBatch = rel >= 0 ? rel % oc.stride : -1;
    bool outside = rel < 0 || rel / oc.stride >= batch ||
                   inBatch >= (M - 1) * oc.ld + N || inBatch % oc.ld >= N;
    if (outside && std::memcmp(before.data() + e * oc.elem,
                               after.data() + e * oc.elem, oc.elem) != 0)
      if (v.touched++ == 0)
        v.firstTouched = e;
  }
  v.floor = halfUlp(ct, v.maxRef);
  return v;
}

/// The largest ours/naive error ratio seen per output dtype, printed at the
/// end: how much margin the rule leaves (fp32 outputs are where the
/// accumulation order and the tensor cores' rounding show).
std::map<std::string, std::pair<double, std::string>> &worstRatios() {
  static std::map<std::string, std::pair<double, std::string>> m;
  return m;
}

class PrintWorstRatios : public ::testing::Environment {
  void TearDown() override {
    for (auto &[dtype, r] : worstRatios())
      std::printf("[ summary  ] C %s: largest ours/naive error ratio %.2f "
                  "(%s)\n",
                  dtype.c_str(), r.first, r.second.c_str());
  }
};
const auto *kPrintWorstRatios =
    ::testing::AddGlobalTestEnvironment(new PrintWorstRatios);

void launchFill(Gpu &g, void *p, int64_t n, DType t, uint64_t seed,
                bool poison) {
  g.filler->fill(p, n, t, seed, poison);
}

uint64_t seedOf(const std::string &s) { // FNV-1a: a fresh stream per case
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : s)
    h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  return h;
}

/// Runs one case and compares. Returns false when the GPU is unusable
/// afterwards (a kernel fault poisons the context), so callers stop.
bool runCase(const Case &c) {
  Gpu &g = Gpu::get();
  Backend *be = g.rt->backend();
  const Target t = g.rt->target();
  const std::string what = c.describe();
  auto [plannedP, plannedC] = plannedKernel(c, t);
  const std::string kernel = gemmKernelName(plannedP, plannedC, t);

  std::array<Operand, 3> ops = operands(c);
  Buffer A(be, ops[0].elems * ops[0].elem), B(be, ops[1].elems * ops[1].elem),
      C(be, ops[2].elems * ops[2].elem);
  const int64_t M = c.runM(), N = c.n, nb = c.batch;
  Buffer ref(be, nb * M * N * sizeof(double)),
      naive(be, nb * M * N * sizeOf(c.c));
  // At least one element each, so that the pointers are valid even unused.
  Buffer biasB(be, std::max<int64_t>(biasElems(c), 1) * sizeOf(c.c)),
      resB(be, std::max<int64_t>(residualElems(c), 1) * sizeOf(c.c));
  char *base[5] = {A.p, B.p, C.p, biasB.p, resB.p};
  GemmArgs args = argsFor(c, ops, base);
  Buffer scales(be, 2 * sizeof(float));
  if (c.scaleA != 0 || c.scaleB != 0) {
    const float s[2] = {c.scaleA, c.scaleB};
    be->copyToDevice(scales.p, s, sizeof s);
    if (c.scaleA != 0)
      args.scaleA = reinterpret_cast<const float *>(scales.p);
    if (c.scaleB != 0)
      args.scaleB = reinterpret_cast<const float *>(scales.p) + 1;
  }

  uint64_t seed = seedOf(what);
  launchFill(g, A.p, ops[0].elems, c.ab, seed + 1, false);
  launchFill(g, B.p, ops[1].elems, c.ab, seed + 2, false);
  launchFill(g, C.p, ops[2].elems, c.c, seed + 3, c.beta == 0);
  if (biasElems(c))
    launchFill(g, biasB.p, biasElems(c), c.c, seed + 4, false);
  if (residualElems(c))
    launchFill(g, resB.p, residualElems(c), c.c, seed + 5, false);

  // The plain reference, one batch at a time; the epilogue follows on the
  // host (HostEpilogue).
  GemmProblem plain = mainLoopProblem(c.problem());
  for (int64_t z = 0; z < nb; ++z) {
    GemmArgs r = args; // the call's pointers, M, alpha and beta
    r.a = static_cast<const char *>(args.a) + z * ops[0].stride * ops[0].elem;
    r.b = static_cast<const char *>(args.b) + z * ops[1].stride * ops[1].elem;
    r.c = static_cast<char *>(args.c) + z * ops[2].stride * ops[2].elem;
    r.lda = ops[0].ld;
    r.ldb = ops[1].ld;
    r.ldc = ops[2].ld;
    g.reference(plain).run(plain, r,
                           reinterpret_cast<double *>(ref.p) + z * M * N,
                           naive.p + z * M * N * sizeOf(c.c));
  }
  be->synchronize();
  std::vector<char> before = C.download();
  HostEpilogue epi{c.c, c.bias, c.act, c.residual, M, N, {}, {}};
  if (biasElems(c))
    epi.biasH = biasB.download();
  if (residualElems(c))
    epi.resH = resB.download();

  std::string ran = kernel;
  try {
    if (c.config) {
      std::shared_ptr<Kernel> k = g.rt->compile(plannedP, *c.config);
      ran = k->source.name;
      g.rt->launch(*k, args);
    } else {
      g.rt->gemm(c.problem(), args);
    }
  } catch (const Error &e) {
    ADD_FAILURE() << what << " (kernel " << ran << "): " << e.what();
    return true;
  }
  try {
    be->synchronize();
  } catch (const Error &e) {
    ADD_FAILURE() << what << " (kernel " << ran
                  << "): the kernel failed on the device: " << e.what();
    return false;
  }
  std::vector<char> after = C.download(), refH = ref.download(),
                    naiveH = naive.download();

  const Operand &oc = ops[2];
  Verdict v = compare(c.c, M, N, nb, oc, before, after, refH, naiveH, epi);
  const double ratio = v.errNaive > 0 ? v.errOurs / v.errNaive : 0.0;
  std::printf("[ case     ] %-62s err %.3g naive %.3g ratio %.2f\n",
              what.c_str(), v.errOurs, v.errNaive, ratio);
  auto &worst = worstRatios()[std::string(toString(c.c))];
  if (ratio > worst.first)
    worst = {ratio, what};
  auto at = [&](int64_t idx) {
    std::ostringstream os;
    int64_t z = idx / (M * N), i = idx / N % M, j = idx % N;
    double r;
    std::memcpy(&r, refH.data() + 8 * idx, 8);
    os << "C[" << z << "][" << i << "][" << j
       << "] = " << decode(c.c, after, oc.off + z * oc.stride + i * oc.ld + j)
       << ", reference " << epi.exact(z, i, j, r) << ", naive "
       << epi.naive(z, i, j, decode(c.c, naiveH, idx));
    return os.str();
  };
  EXPECT_EQ(v.bad, 0) << what << " (kernel " << ran << "): " << v.bad
                      << " elements of C are NaN or inf (unwritten, or read "
                         "while beta == 0); first: "
                      << at(v.firstBad);
  EXPECT_EQ(v.touched, 0) << what << " (kernel " << ran << "): " << v.touched
                          << " elements outside C (padding or guard) "
                             "changed; first at buffer element "
                          << v.firstTouched;
  EXPECT_LE(v.errOurs, v.bound())
      << what << " (kernel " << ran << "): max|ours - ref| = " << v.errOurs
      << " exceeds 2 * max|naive - ref| = " << 2 * v.errNaive
      << " (half-ulp floor " << v.floor << ", max|ref| " << v.maxRef
      << "); worst " << (v.worst >= 0 ? at(v.worst) : std::string("-"));
  return true;
}

class GemmGpu : public ::testing::Test {
protected:
  void SetUp() override {
    Gpu &g = Gpu::get();
    if (!g.rt->backend())
      GTEST_SKIP() << "no GPU: " << g.whyNot;
  }

  /// KGEN_GPU_TEST_MAX_MNK (e.g. 2^28) keeps only cases with M*N*K up to
  /// it: compute-sanitizer's racecheck is too slow for the large shapes,
  /// and the small ones run the same code paths (every layout, dtype,
  /// config, ragged edge and multi-slice K loop).
  void runAll(std::vector<Case> cases) {
    const char *limit = std::getenv("KGEN_GPU_TEST_MAX_MNK");
    if (limit && *limit) {
      const double max = std::strtod(limit, nullptr);
      size_t before = cases.size();
      cases.erase(std::remove_if(cases.begin(), cases.end(),
                                 [&](const Case &c) {
                                   double m = c.callM > 0 ? c.callM : c.m;
                                   return double(c.batch) * m * double(c.n) *
                                              double(c.k) >
                                          max;
                                 }),
                  cases.end());
      std::printf(
          "[ gpu      ] %zu of %zu cases within KGEN_GPU_TEST_MAX_MNK=%s\n",
          cases.size(), before, limit);
    }
    Gpu::get().prewarm(cases);
    for (const Case &c : cases)
      if (!runCase(c))
        FAIL() << "stopping: the GPU context is unusable after a fault";
  }
};

} // namespace

TEST_F(GemmGpu, EveryLayoutAndDtype) { runAll(sweepCases()); }

TEST_F(GemmGpu, Large) { runAll(largeCases()); }

TEST_F(GemmGpu, AlphaBetaReadC) { runAll(alphaBetaCases()); }

TEST_F(GemmGpu, LeadingDimsLargerThanPacked) { runAll(leadingDimCases()); }

TEST_F(GemmGpu, PointersOffsetByOneElement) { runAll(offsetCases()); }

TEST_F(GemmGpu, StaticAndRunTimeDims) { runAll(staticDimCases()); }

TEST_F(GemmGpu, FusedEpilogues) { runAll(epilogueCases()); }

TEST_F(GemmGpu, StridedBatches) { runAll(batchedCases()); }

TEST_F(GemmGpu, SplitKAndSmallM) {
  std::vector<Case> cases = splitKCases(Gpu::get().rt->target());
  ASSERT_GE(cases.size(), 6u) << "the enumerator yields too few split-K "
                                 "variants for the small-M shapes";
  runAll(cases);
}

TEST_F(GemmGpu, StreamK) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "stream-K is the wgmma loop's (sm_90a); this GPU is "
                 << toString(t);
  std::vector<Case> cases = streamKCases(t);
  ASSERT_GE(cases.size(), 12u) << "the enumerator yields too few stream-K "
                                  "variants for the mid shapes";
  runAll(cases);
}

TEST_F(GemmGpu, WgmmaSplitKInLockstep) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "the wgmma loop is sm_90a's; this GPU is " << toString(t);
  std::vector<Case> cases = lockstepCases(t);
  ASSERT_GE(cases.size(), 8u) << "the enumerator yields too few lockstep "
                                 "split-K variants for the mid shapes";
  runAll(cases);
}

TEST_F(GemmGpu, WgmmaSwapAB) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "the wgmma loop is sm_90a's; this GPU is " << toString(t);
  std::vector<Case> cases = swapCases(t);
  ASSERT_GE(cases.size(), 16u) << "the enumerator yields too few swapped "
                                  "wgmma variants";
  runAll(cases);
}

TEST_F(GemmGpu, SmallMFittedTilesAndDeepRings) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "the wgmma loop is sm_90a's; this GPU is " << toString(t);
  std::vector<Case> cases = smallMFittedCases(t);
  ASSERT_GE(cases.size(), 12u);
  runAll(cases);
}

TEST_F(GemmGpu, GemvSmallM) {
  std::vector<Case> cases = gemvCases(Gpu::get().rt->target());
  ASSERT_GE(cases.size(), 30u);
  runAll(cases);
}

TEST_F(GemmGpu, Tf32) {
  std::vector<Case> cases = tf32Cases(Gpu::get().rt->target());
  ASSERT_GE(cases.size(), 20u);
  runAll(cases);
}

TEST_F(GemmGpu, Fp8) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "fp8 runs on sm_90a's wgmma; this GPU is " << toString(t);
  std::vector<Case> cases = fp8Cases(t);
  ASSERT_GE(cases.size(), 30u);
  runAll(cases);
}

TEST_F(GemmGpu, Repack) {
  std::vector<Case> cases = repackCases(Gpu::get().rt->target());
  ASSERT_GE(cases.size(), 16u) << "the enumerator yields too few repack "
                                  "variants for the misaligned shapes";
  runAll(cases);
}

TEST_F(GemmGpu, ExplicitConfigs) {
  std::vector<Case> cases = explicitCases(Gpu::get().rt->target());
  ASSERT_GE(cases.size(), 12u);
  runAll(cases);
}

/// Invalid calls throw kgen::Error with a message naming the argument, and
/// nothing runs: C (NaN) is untouched afterwards.
TEST_F(GemmGpu, InvalidArgumentsThrowAndLaunchNothing) {
  Gpu &g = Gpu::get();
  Backend *be = g.rt->backend();
  const int64_t S = 64;
  Buffer A(be, S * S * 2 + 16), B(be, S * S * 2 + 16), C(be, S * S * 2 + 16);
  launchFill(g, A.p, S * S, DType::BF16, 11, false);
  launchFill(g, B.p, S * S, DType::BF16, 12, false);
  launchFill(g, C.p, S * S + 8, DType::BF16, 0, true);
  be->synchronize();
  std::vector<char> before = C.download();

  GemmProblem p;
  p.m = p.n = p.k = S;
  p.transB = true;
  auto call = [&](GemmProblem prob, GemmArgs a) { g.rt->gemm(prob, a); };
  auto args = [&] {
    GemmArgs a;
    a.a = A.p;
    a.b = B.p;
    a.c = C.p;
    a.m = S;
    return a;
  };
  auto expectError = [&](const char *what, const std::function<void()> &f,
                         const char *needle) {
    try {
      f();
      ADD_FAILURE() << what << ": no kgen::Error thrown";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << what << ": the message lacks '" << needle << "': " << e.what();
    }
  };

  GemmArgs a = args();
  a.lda = S / 2;
  expectError(
      "lda < K", [&] { call(p, a); }, "lda");
  a = args();
  a.ldb = 3;
  expectError(
      "ldb < K", [&] { call(p, a); }, "ldb");
  a = args();
  a.ldc = S - 1;
  expectError(
      "ldc < N", [&] { call(p, a); }, "ldc");
  a = args();
  a.m = 0;
  expectError(
      "m = 0", [&] { call(p, a); }, "m = 0");
  GemmProblem zero = p;
  zero.n = 0;
  expectError(
      "n = 0", [&] { call(zero, args()); }, "n = 0");
  zero = p;
  zero.k = 0;
  expectError(
      "k = 0", [&] { call(zero, args()); }, "k = 0");
  a = args();
  a.a = nullptr;
  expectError(
      "null A", [&] { call(p, a); }, "null");
  a = args();
  a.b = nullptr;
  expectError(
      "null B", [&] { call(p, a); }, "null");
  a = args();
  a.c = nullptr;
  expectError(
      "null C", [&] { call(p, a); }, "null");
  a = args();
  a.a = A.p + 1; // not even element-aligned
  expectError(
      "odd address", [&] { call(p, a); }, "aligned");
  GemmProblem baked = p;
  baked.staticM = true;
  a = args();
  a.m = S / 2;
  expectError(
      "static M mismatch", [&] { call(baked, a); }, "bakes M");
  GemmProblem f32 = p;
  f32.ab = DType::F32;
  expectError(
      "f32 inputs without tf32", [&] { call(f32, args()); }, "tf32 = true");

  // A variant built for 8-element vectors refuses a pointer that is not.
  std::shared_ptr<Kernel> k;
  try {
    k = g.rt->compile(p, defaultConfig(p, g.rt->target()));
  } catch (const Error &e) {
    FAIL() << "compiling 64x64x64 nt bf16: " << e.what();
  }
  a = args();
  a.a = A.p + 2;
  expectError(
      "misaligned launch", [&] { g.rt->launch(*k, a); }, "align");

  be->synchronize();
  EXPECT_TRUE(C.download() == before)
      << "C changed: a call that threw launched a kernel";
}
