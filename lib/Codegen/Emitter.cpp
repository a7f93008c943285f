//===- Emitter.cpp - The HIP emitter --------------------------------------===//
//
// A generated kernel is a short file: a comment saying what it computes, the
// includes, a Config struct with the shape constants and the tile config,
// and an extern "C" kernel that instantiates the family template. The file
// reads like something a person would write by hand.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Emitter.h"
#include "gemm/params.h"
#include "gemm/schedule.h"
#include "kgen/Codegen/Templates.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace kgen {

namespace {

const char *boolStr(bool b) { return b ? "true" : "false"; }

/// The enumerators of templates/gemm/epilogue.h.
const char *biasEnum(BiasKind b) {
  switch (b) {
  case BiasKind::None:
    return "kgen::gemm::kBiasNone";
  case BiasKind::AlongM:
    return "kgen::gemm::kBiasM";
  case BiasKind::AlongN:
    return "kgen::gemm::kBiasN";
  }
  return "?";
}

const char *activationEnum(Activation a) {
  switch (a) {
  case Activation::None:
    return "kgen::gemm::kActNone";
  case Activation::ReLU:
    return "kgen::gemm::kActReLU";
  case Activation::GeluTanh:
    return "kgen::gemm::kActGeluTanh";
  case Activation::GeluErf:
    return "kgen::gemm::kActGeluErf";
  case Activation::SiLU:
    return "kgen::gemm::kActSiLU";
  }
  return "?";
}

/// "relu(alpha * acc + beta * C + bias[n]) + R", for the file's comment.
std::string epilogueFormula(const GemmProblem &p) {
  std::string v = "alpha * acc + beta * C";
  if (p.bias == BiasKind::AlongM)
    v += " + bias[m]";
  else if (p.bias == BiasKind::AlongN)
    v += " + bias[n]";
  if (p.act != Activation::None)
    v = std::string(toString(p.act)) + "(" + v + ")";
  if (p.residual)
    v += " + R[m][n]";
  return v;
}

/// The template headers a family header includes, transitively, in the
/// order a preprocessor would first see them. Only `#include "kgen/..."`
/// lines count; the template texts are ours, so this simple scan is exact.
void collectIncludes(std::string_view header, std::vector<std::string> &out,
                     std::set<std::string> &seen) {
  if (!seen.insert(std::string(header)).second)
    return;
  std::string_view text = templateText(header);
  size_t pos = 0;
  while ((pos = text.find("#include \"kgen/", pos)) != std::string_view::npos) {
    size_t start = pos + 10, end = text.find('"', start);
    collectIncludes(text.substr(start, end - start), out, seen);
    pos = end;
  }
  out.push_back(std::string(header));
}

/// Paste the headers in dependency order, dropping their includes of each
/// other and of <hip/hip_runtime.h> (the file starts with it, or, on NVIDIA,
/// with our mapping header pasted in first).
std::string inlineHeaders(const std::vector<std::string> &headers) {
  std::ostringstream os;
  for (const std::string &h : headers) {
    os << "//===--- begin " << h << " ---===//\n";
    std::istringstream in{std::string(templateText(h))};
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("#include \"kgen/", 0) == 0 ||
          line.rfind("#include <hip/hip_runtime.h>", 0) == 0)
        continue;
      os << line << "\n";
    }
    os << "//===--- end " << h << " ---===//\n";
  }
  return os.str();
}

std::string configComment(const GemmConfig &c) {
  std::ostringstream os;
  if (c.loop == GemmLoop::Gemv) {
    os << "gemv loop, block " << c.blockM << " rows of A x " << c.blockN
       << " columns of B, " << c.warpsN << " warps of "
       << c.blockN / (16 * c.warpsN) << " row tiles, a cp.async ring of "
       << c.stages << " k-chunks of 32 a warp";
    if (c.splitK > 1)
      os << ", split-K " << c.splitK;
    return os.str();
  }
  if (c.loop == GemmLoop::Wgmma) {
    os << "wgmma loop, block " << c.blockM << "x" << c.blockN << "x" << c.blockK
       << ", 1 producer + " << c.warpsM << " consumer warpgroups, " << c.stages
       << " stages, 128-byte swizzled shared memory";
    if (c.cluster > 1)
      os << ", clusters of " << c.cluster
         << (c.pairSharesA() ? " (A multicast)" : " (B multicast)");
    if (c.streamK)
      os << ", stream-K";
    if (c.splitK > 1)
      os << ", split-K " << c.splitK << " in lockstep";
    if (c.swapAB)
      os << ", swapped (C^T = B^T A^T: wgmma m along N, n = " << c.blockM
         << " along M)";
    return os.str();
  }
  os << "block " << c.blockM << "x" << c.blockN << "x" << c.blockK << ", warps "
     << c.warpsM << "x" << c.warpsN << ", " << c.stages << " stages, "
     << (c.smem == SmemLayout::Swizzled
             ? std::string("swizzled")
             : "padded (+" + std::to_string(c.smemPad) + ")")
     << " shared memory";
  return os.str();
}

/// One wgmma atom (see wgmmaAtom): a specialization of Wgmma (A and B
/// through shared-memory descriptors) or, with aRegs, of WgmmaRs (A in four
/// 32-bit registers of two 16-bit or four fp8 values). The asm names its
/// acc = n / 2 accumulators %0 .. %acc-1, then its inputs in order: A's
/// descriptor or registers, B's descriptor, scaleD (as the predicate p),
/// and for 16-bit types the transpose immediates (tnspA is the
/// descriptor form's only).
std::string atomText(DType ab, int n, bool aRegs) {
  const int acc = n / 2;
  const bool fp8 = isFp8(ab);
  const std::string type(toString(ab));
  const int k = fp8 ? 32 : 16;
  const int a = acc, b = aRegs ? acc + 4 : acc + 1, scale = b + 1;
  std::ostringstream os;
  os << "\n// wgmma m64n" << n << "k" << k << " " << type;
  if (aRegs)
    os << " with A from registers (four 32-bit registers of "
       << (fp8 ? "four fp8 values; B K-major)" : "two 16-bit values)");
  else if (fp8)
    os << " (K-major operands only)";
  os << ": " << acc << " fp32 accumulators a thread.\n"
     << "namespace kgen::sm90 {\n";
  if (aRegs && fp8)
    os << "template <> struct WgmmaRs<" << type << ", " << n << ", false> {\n";
  else if (aRegs)
    os << "template <bool kTransB> struct WgmmaRs<" << type << ", " << n
       << ", kTransB> {\n";
  else
    os << "template <bool kTransB, bool kTransA> struct Wgmma<" << type << ", "
       << n << ", kTransB, kTransA> {\n";
  if (fp8 && !aRegs)
    os << "  static_assert(!kTransB && !kTransA, \"fp8 wgmma reads K-major "
          "operands\");\n";
  os << "  static KGEN_DEVICE void run(float (&d)[" << acc << "], "
     << (aRegs ? "const uint32_t (&a)[4],\n"
               : "uint64_t descA, uint64_t descB,\n")
     << "                              " << (aRegs ? "uint64_t descB, " : "")
     << "int scaleD) {\n"
     << "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" << scale
     << ", 0;\\n\"\n"
     << "                 \"wgmma.mma_async.sync.aligned.m64n" << n << "k" << k
     << ".f32." << type << "." << type << " {";
  for (int i = 0; i < acc; ++i)
    os << (i ? "," : "") << "%" << i;
  os << "}, ";
  if (aRegs)
    os << "{%" << a << ",%" << a + 1 << ",%" << a + 2 << ",%" << a + 3 << "}";
  else
    os << "%" << a;
  os << ", %" << b << ", p, 1, 1";
  if (!fp8 && aRegs)
    os << ", %" << scale + 1;
  else if (!fp8)
    os << ", %" << scale + 2 << ", %" << scale + 1;
  os << ";\\n}\\n\"\n                 :";
  for (int i = 0; i < acc; ++i)
    os << (i == 0       ? " "
           : i % 8 == 0 ? ",\n                   "
                        : ", ")
       << "\"+f\"(d[" << i << "])";
  if (aRegs)
    os << "\n                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), "
          "\"r\"(a[3]), \"l\"(descB),\n"
       << "                   \"r\"(scaleD)";
  else
    os << "\n                 : \"l\"(descA), \"l\"(descB), \"r\"(scaleD)";
  if (!fp8)
    os << (aRegs ? ", \"n\"(int(kTransB))"
                 : ", \"n\"(int(kTransB)), \"n\"(int(kTransA))");
  os << ");\n"
     << "  }\n"
     << "};\n"
     << "} // namespace kgen::sm90\n";
  return os.str();
}

} // namespace

/// wgmma's atoms, for every width and dtype a kernel uses: an atom names
/// each of its n / 2 fp32 accumulators in its asm statement, so each (dtype,
/// n) is a spelled-out specialization of wgmma_sm90.h's templates, written
/// into the kernel's own file after that header. 16-bit types: m64nNk16,
/// either operand K- or MN-major (the template's kTransB, kTransA); fp8:
/// m64nNk32, K-major operands only.
std::string wgmmaAtom(DType ab, int n) { return atomText(ab, n, false); }
std::string wgmmaRsAtom(DType ab, int n) { return atomText(ab, n, true); }

std::string deviceTypeName(DType t) {
  switch (t) {
  case DType::BF16:
    return "kgen::bf16";
  case DType::F16:
    return "kgen::f16";
  case DType::F32:
    return "float";
  case DType::E4M3:
    return "kgen::e4m3";
  case DType::E5M2:
    return "kgen::e5m2";
  }
  return "?";
}

std::vector<std::string> templateIncludes(std::string_view header) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  collectIncludes(header, out, seen);
  return out;
}

std::string inlineTemplateHeaders(const std::vector<std::string> &headers) {
  return inlineHeaders(headers);
}

std::string gemmKernelName(const GemmProblem &p, const GemmConfig &c,
                           Target t) {
  GemmTraits tr = gemmTraits(p, c, t);
  std::ostringstream os;
  os << "kgen_gemm_" << toString(p.ab);
  if (p.tf32)
    os << "_tf32";
  if (p.c != p.ab)
    os << "_c" << toString(p.c);
  os << "_" << p.layoutName();
  auto dim = [&](char name, bool isStatic, int64_t v) {
    os << "_" << name;
    if (isStatic)
      os << v;
    else
      os << "dyn";
  };
  dim('m', p.staticM, p.m);
  dim('n', p.staticN, p.n);
  dim('k', p.staticK, p.k);
  if (c.loop == GemmLoop::Gemv) {
    os << "_gemv_b" << c.blockM << "x" << c.blockN << "_w" << c.warpsN << "_s"
       << c.stages << "_v" << tr.vecA << tr.vecB << tr.vecC;
    if (c.splitK != 1)
      os << "_sk" << c.splitK;
  } else if (c.loop == GemmLoop::Wgmma) {
    os << "_wgmma_b" << c.blockM << "x" << c.blockN << "x" << c.blockK << "_wg"
       << c.warpsM << "_s" << c.stages;
    if (c.cluster > 1)
      os << "_c" << c.cluster;
    os << "_v" << tr.vecA << tr.vecB << tr.vecC;
    if (c.streamK)
      os << "_streamk";
    if (c.splitK != 1)
      os << "_sk" << c.splitK;
    if (c.swapAB)
      os << "_swap";
  } else {
    os << "_b" << c.blockM << "x" << c.blockN << "x" << c.blockK << "_w"
       << c.warpsM << "x" << c.warpsN << "_s" << c.stages;
    if (c.smem == SmemLayout::Swizzled)
      os << "_swz";
    else
      os << "_pad" << c.smemPad;
    os << "_v" << tr.vecA << tr.vecB << tr.vecC;
    if (c.splitK != 1)
      os << "_sk" << c.splitK;
  }
  if (c.repack)
    os << "_repack";
  // The epilogue's features (none: the plain alpha/beta store, unnamed).
  if (p.bias != BiasKind::None)
    os << "_bias" << toString(p.bias);
  if (p.act != Activation::None)
    os << "_" << toString(p.act);
  if (p.residual)
    os << "_res";
  return os.str();
}

KernelSource emitGemm(const GemmProblem &problem, const GemmConfig &c, Target t,
                      bool inlineTemplates) {
  // A repack config's main loop runs the padded problem (K rounded up to 8)
  // on the copies; the name and the comment keep the caller's problem.
  const GemmProblem p = c.repack ? repackedProblem(problem) : problem;
  GemmTraits tr = gemmTraits(problem, c, t);
  KernelSource ks;
  ks.name = gemmKernelName(problem, c, t);
  ks.target = t;
  ks.threads = tr.threads;
  ks.smemBytes = tr.smemBytes;
  // On NVIDIA, <hip/hip_runtime.h> is our own header mapping HIP's kernel
  // language onto CUDA's; it is part of what the kernel depends on.
  const bool nvidia = targetInfo(t).vendor == Vendor::NVIDIA;
  if (nvidia)
    ks.headers.push_back(std::string(kHipRuntimeNvidia));
  const bool wgmma = c.loop == GemmLoop::Wgmma;
  const bool gemv = c.loop == GemmLoop::Gemv;
  const char *familyHeader = wgmma  ? "kgen/gemm/gemm_sm90.h"
                             : gemv ? "kgen/gemm/gemv.h"
                                    : "kgen/gemm/gemm.h";
  std::set<std::string> seen;
  collectIncludes(familyHeader, ks.headers, seen);
  if (c.repack)
    collectIncludes("kgen/gemm/repack.h", ks.headers, seen);

  auto dimText = [](bool isStatic, int64_t v) {
    return isStatic ? std::to_string(v) : std::string("0");
  };
  auto dimComment = [](const char *n, bool isStatic, int64_t v) {
    return std::string(n) +
           (isStatic ? " = " + std::to_string(v) : " run-time");
  };
  std::string ta = deviceTypeName(p.ab), tc = deviceTypeName(p.c);

  std::ostringstream os;
  os << "// Generated by kgen " << kVersion << " for " << toString(t)
     << ": C = alpha * op(A) * op(B) + beta * C\n"
     << "// problem: " << toString(p.ab)
     << (p.tf32 ? " inputs through TF32" : " inputs") << ", " << toString(p.c)
     << " output, fp32 accumulation, layout " << p.layoutName() << " (A '"
     << (p.transA ? "T" : "N") << "', B '" << (p.transB ? "T" : "N") << "'), "
     << dimComment("M", p.staticM, p.m) << ", "
     << dimComment("N", p.staticN, p.n) << ", "
     << dimComment("K", problem.staticK, problem.k) << "\n"
     << "// config: " << configComment(c) << "\n"
     << "// instructions: "
     << (wgmma ? "TMA (cp.async.bulk.tensor), mbarrier, wgmma m64n" +
                     std::to_string(c.wgmmaN()) +
                     (isFp8(p.ab) ? "k32 ." + std::string(toString(p.ab)) +
                                        " (fp32 sums promoted every k-slice; "
                                        "C scaled by *scaleA * *scaleB)"
                                  : std::string("k16")) +
                     ", setmaxnreg (kgen/common/wgmma_sm90.h)"
         : gemv   ? "mma.sync m16n8k16 on C^T = B^T A^T, cp.async of "
                    "16 B into a per-lane shared-memory ring (.cg for B, .ca "
                    "for A) (kgen/common/mma_sm80.h)"
         : p.tf32 ? "mma.sync m16n8k8 .tf32 (cvt.rna.tf32.f32), shared "
                    "loads, cp.async (kgen/common/mma_sm80.h)"
         : nvidia
             ? "mma.sync m16n8k16, ldmatrix, cp.async (kgen/common/mma_sm80.h)"
             : "MFMA 32x32x8, wave64 (kgen/common/mfma_cdna.h)")
     << "\n";
  if (wgmma)
    os << "// launch: persistent grid (min("
       << (c.streamK      ? "tiles x k-slices"
           : c.splitK > 1 ? "tiles x " + std::to_string(c.splitK)
                          : std::string("tiles"))
       << ", multiprocessors)"
       << (c.cluster > 1 ? ", in clusters of " + std::to_string(c.cluster)
                         : std::string())
       << "), " << tr.threads << " threads, " << tr.smemBytes
       << " B dynamic shared memory; A and B through tensor maps\n";
  if (wgmma && c.streamK)
    os << "// stream-K: each CTA takes an equal run of the tiles x "
          "k-slices iterations; tiles split between CTAs are added up "
          "through the workspace (kgen/gemm/fixup.h)\n";
  else if (wgmma && c.splitK > 1)
    os << "// split-K in lockstep: unit (tile, part) takes k-slices part, "
          "part + "
       << c.splitK
       << ", ...; units go out part-major and are added up through the "
          "workspace (kgen/gemm/fixup.h)\n";
  else if (!wgmma)
    os << "// launch: grid (ceil(N/" << c.blockN << "), ceil(M/" << c.blockM
       << "), batch), " << tr.threads << " threads, " << tr.smemBytes
       << " B dynamic shared memory\n";
  if (p.hasEpilogue())
    os << "// epilogue: C = " << epilogueFormula(p) << "\n";
  if (c.repack) {
    // The padded row lengths: K rounded up for K-major operands, the stored
    // row (M or N) rounded up to 8 elements otherwise (kgen::gemm::
    // planRepack decides per call which operands need the copy).
    auto ld = [&](bool kMajor, const char *outer, bool outerStatic,
                  int64_t outerExtent) {
      if (kMajor)
        return std::to_string(p.k);
      return outerStatic ? std::to_string((outerExtent + 7) / 8 * 8)
                         : std::string(outer) + " rounded up to 8";
    };
    ks.prologue = ks.name + "_copy";
    os << "// repack: " << ks.prologue
       << " first copies A and/or B (those whose rows are not 16-byte "
          "aligned; both when K is not a multiple of 8) into the runtime's "
          "workspace, K "
       << problem.k << " -> " << p.k
       << " (zero tail), lda = " << ld(!p.transA, "M", p.staticM, p.m)
       << ", ldb = " << ld(p.transB, "N", p.staticN, p.n)
       << "; the main loop reads the copies\n";
  }
  if (inlineTemplates) {
    if (!nvidia)
      os << "#include <hip/hip_runtime.h>\n";
    os << inlineHeaders(ks.headers);
  } else {
    os << "#include <hip/hip_runtime.h>\n";
    os << "#include \"" << familyHeader << "\"\n";
    if (c.repack)
      os << "#include \"kgen/gemm/repack.h\"\n";
  }
  if (wgmma)
    os << wgmmaAtom(p.ab, c.wgmmaN());
  // A repack config's copy kernel, after the main one.
  auto copyKernel = [&] {
    if (!c.repack)
      return;
    os << "\n// Pads A and/or B into the workspace (kgen/gemm/repack.h); "
          "grid (A's blocks then B's, 1, batch).\n"
       << "extern \"C\" __global__ void __launch_bounds__("
       << gemm::kRepackThreads << ")\n"
       << ks.prologue << "(const kgen::gemm::RepackParams p) {\n"
       << "  kgen::gemm::repackOperands(p);\n"
       << "}\n";
  };
  // The Config lines the gemv and wgmma loops share (A is K-major there).
  auto configOpening = [&] {
    os << "\nnamespace {\n"
       << "struct Config {\n"
       << "  using TypeA = " << ta << ";\n"
       << "  using TypeB = " << ta << ";\n"
       << "  using TypeC = " << tc << ";\n"
       << "  static constexpr bool kTransA = false;\n"
       << "  static constexpr bool kTransB = " << boolStr(p.transB) << ";\n"
       << "  static constexpr int kM = " << dimText(p.staticM, p.m)
       << "; // 0: taken at run time\n"
       << "  static constexpr int kN = " << dimText(p.staticN, p.n) << ";\n"
       << "  static constexpr int kK = " << dimText(p.staticK, p.k) << ";\n";
  };
  if (gemv) {
    configOpening();
    os << "  static constexpr int kBlockM = " << c.blockM
       << ", kBlockN = " << c.blockN << "; // rows of A, columns of B\n"
       << "  static constexpr int kWarps = " << c.warpsN
       << ", kRowTiles = " << c.blockN / (16 * c.warpsN)
       << "; // 16 columns a row tile\n"
       << "  static constexpr int kStages = " << c.stages
       << "; // ring slots of k-chunks of 32, stages - 1 in flight a warp\n"
       << "  static constexpr int kVecA = " << tr.vecA
       << ", kVecB = " << tr.vecB << ", kVecC = " << tr.vecC << ";\n"
       << "  static constexpr bool kCheckM = " << boolStr(tr.checkM)
       << ", kCheckN = " << boolStr(tr.checkN)
       << ", kCheckK = " << boolStr(tr.checkK) << ";\n"
       << "  static constexpr int kThreads = " << tr.threads << ";\n"
       << "  static constexpr int kSmemBytes = " << tr.smemBytes << ";\n"
       << "  static constexpr int kBias = " << biasEnum(p.bias)
       << ", kActivation = " << activationEnum(p.act) << ";\n"
       << "  static constexpr bool kResidual = " << boolStr(p.residual) << ";\n"
       << "  static constexpr int kSplitK = " << c.splitK
       << "; // blocks sharing a tile's k-chunks\n"
       << "};\n"
       << "} // namespace\n\n"
       << "extern \"C\" __global__ void __launch_bounds__(" << tr.threads
       << ")\n"
       << ks.name << "(const kgen::gemm::Params p) {\n"
       << "  kgen::gemm::runGemv<Config>(p);\n"
       << "}\n";
    ks.source = os.str();
    if (inlineTemplates)
      ks.headers.clear();
    return ks;
  }
  if (wgmma) {
    configOpening();
    os << "  static constexpr int kBlockM = " << c.blockM
       << ", kBlockN = " << c.blockN << ", kBlockK = " << c.blockK << ";\n"
       << "  static constexpr int kConsumers = " << c.warpsM
       << "; // warpgroups, after the producer's\n"
       << "  static constexpr int kStages = " << c.stages << ";\n"
       << "  static constexpr int kCluster = " << c.cluster
       << "; // CTAs sharing A or B by multicast\n"
       << "  static constexpr bool kStreamK = " << boolStr(c.streamK)
       << "; // CTAs share out the k-iterations\n"
       << "  static constexpr int kSplitK = " << c.splitK
       << "; // units a tile, k-slices interleaved\n"
       << "  static constexpr bool kSwapAB = " << boolStr(c.swapAB)
       << "; // wgmma m along N, n along M\n"
       << "  static constexpr int kVecC = " << tr.vecC << ";\n"
       << "  static constexpr bool kCheckM = " << boolStr(tr.checkM)
       << ", kCheckN = " << boolStr(tr.checkN) << ";\n"
       << "  static constexpr int kBias = " << biasEnum(p.bias)
       << ", kActivation = " << activationEnum(p.act) << ";\n"
       << "  static constexpr bool kResidual = " << boolStr(p.residual) << ";\n"
       << "  static constexpr int kThreads = " << tr.threads << ";\n"
       << "  static constexpr int kSmemBytes = " << tr.smemBytes << ";\n"
       << "};\n"
       << "} // namespace\n\n"
       << "extern \"C\" __global__ void ";
    if (c.cluster > 1)
      os << "__cluster_dims__(" << c.cluster << ", 1, 1) ";
    os << "__launch_bounds__(" << tr.threads << ", 1)\n"
       << ks.name << "(\n"
       << "    const __grid_constant__ kgen::sm90::TensorMap mapA,\n"
       << "    const __grid_constant__ kgen::sm90::TensorMap mapB,\n"
       << "    const kgen::gemm::Params p) {\n"
       << "  // A and B are read through mapA and mapB (TMA), not p.a, p.b.\n"
       << "  kgen::gemm_sm90::run<Config>(mapA, mapB, p);\n"
       << "}\n";
    copyKernel();
    ks.source = os.str();
    if (inlineTemplates)
      ks.headers.clear();
    return ks;
  }
  os << "\nnamespace {\n"
     << "struct Config {\n"
     << "  using TypeA = " << ta << ";\n"
     << "  using TypeB = " << ta << ";\n"
     << "  using TypeC = " << tc << ";\n"
     << "  static constexpr bool kTransA = " << boolStr(p.transA) << ";\n"
     << "  static constexpr bool kTransB = " << boolStr(p.transB) << ";\n"
     << "  static constexpr int kM = " << dimText(p.staticM, p.m)
     << "; // 0: taken at run time\n"
     << "  static constexpr int kN = " << dimText(p.staticN, p.n) << ";\n"
     << "  static constexpr int kK = " << dimText(p.staticK, p.k) << ";\n"
     << "  static constexpr int kBlockM = " << c.blockM
     << ", kBlockN = " << c.blockN << ", kBlockK = " << c.blockK << ";\n"
     << "  static constexpr int kWarpsM = " << c.warpsM
     << ", kWarpsN = " << c.warpsN << ";\n"
     << "  static constexpr int kStages = " << c.stages << ";\n"
     << "  static constexpr bool kSwizzle = "
     << boolStr(c.smem == SmemLayout::Swizzled) << ";\n"
     << "  static constexpr int kSmemPad = "
     << (c.smem == SmemLayout::Padded ? c.smemPad : 0) << ";\n"
     << "  static constexpr int kVecA = " << tr.vecA << ", kVecB = " << tr.vecB
     << ", kVecC = " << tr.vecC << ";\n"
     << "  static constexpr bool kCheckM = " << boolStr(tr.checkM)
     << ", kCheckN = " << boolStr(tr.checkN)
     << ", kCheckK = " << boolStr(tr.checkK) << ";\n"
     << "  static constexpr int kThreads = " << tr.threads << ";\n"
     << "  static constexpr int kSmemBytes = " << tr.smemBytes << ";\n"
     << "  static constexpr int kBias = " << biasEnum(p.bias)
     << ", kActivation = " << activationEnum(p.act) << ";\n"
     << "  static constexpr bool kResidual = " << boolStr(p.residual) << ";\n"
     << "  static constexpr int kSplitK = " << c.splitK
     << "; // blocks sharing a tile's k-slices\n"
     << "};\n"
     << "} // namespace\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << tr.threads << ")\n"
     << ks.name << "(const kgen::gemm::Params p) {\n"
     << "  kgen::gemm::run<Config>(p);\n"
     << "}\n";
  copyKernel();
  ks.source = os.str();
  if (inlineTemplates)
    ks.headers.clear();
  return ks;
}

GemmWorkspace gemmWorkspace(const GemmProblem &p, const GemmConfig &c,
                            int64_t m, int64_t batch, int64_t ctas) {
  GemmWorkspace w;
  if (c.repack) {
    // Both operands copied, batched: the most a call can need.
    gemm::Params prm{};
    prm.a = prm.b = &prm; // any non-null pointer; only sizes are planned
    prm.m = int(m);
    prm.n = int(p.n);
    prm.k = int(p.k);
    prm.batch = int(batch);
    prm.strideA = prm.strideB = 1;
    gemm::RepackParams rp;
    w.repackBytes =
        gemm::planRepack(prm, rp, p.transA, p.transB, true, true, nullptr);
    GemmConfig inner = c;
    inner.repack = false;
    GemmWorkspace rest = gemmWorkspace(p, inner, m, batch, ctas);
    w.partialBytes = rest.partialBytes;
    w.counters = rest.counters;
    return w;
  }
  if (c.loop == GemmLoop::Wgmma && c.streamK) {
    // Two partial tiles per CTA (its first and last segments), a counter
    // per tile (templates/gemm/schedule.h).
    const int64_t tiles =
        ((m + c.blockM - 1) / c.blockM) * ((p.n + c.blockN - 1) / c.blockN);
    if (ctas <= 0)
      ctas = gemmLaunchDims(p, c, Target::SM90A, m).grid[0];
    w.counters = tiles;
    w.partialBytes = 2 * ctas * int64_t(c.blockM) * c.blockN * 4;
    return w;
  }
  // Split-K of the tiled and gemv loops: an fp32 tile a block.
  if (c.splitK <= 1)
    return w;
  const int64_t tiles = batch * ((m + c.blockM - 1) / c.blockM) *
                        ((p.n + c.blockN - 1) / c.blockN);
  w.counters = tiles;
  w.partialBytes = tiles * c.splitK * int64_t(c.blockM) * c.blockN * 4;
  return w;
}

LaunchDims gemmLaunchDims(const GemmProblem &p, const GemmConfig &c, Target t,
                          int64_t m, int computeUnits, int64_t batch) {
  GemmTraits tr = gemmTraits(p, c, t);
  LaunchDims d{};
  int64_t tilesN = (p.n + c.blockN - 1) / c.blockN;
  int64_t tilesM = (m + c.blockM - 1) / c.blockM;
  if (c.loop == GemmLoop::Wgmma) {
    // Persistent: one block per multiprocessor walks the tiles.
    // Clusters take kCluster adjacent tiles at a time (gemm_sm90.h's
    // pairTile: side by side when the pair shares A, else one above the
    // other).
    const int64_t cm = c.pairSharesA() ? 1 : c.cluster;
    const int64_t cn = c.pairSharesA() ? c.cluster : 1;
    int64_t units = (tilesM + cm - 1) / cm * ((tilesN + cn - 1) / cn);
    // Stream-K: as many CTAs as k-iterations at most; split-K: its units
    // (templates/gemm/schedule.h: a part per k-slice at most).
    const int slices = int((p.k + c.blockK - 1) / c.blockK);
    if (c.streamK)
      units *= std::max(slices, 1);
    else if (c.splitK > 1)
      units = gemm::SplitK(int(units), slices, c.splitK).units();
    int64_t slots = computeUnits > 0 ? computeUnits / c.cluster : units;
    d.grid[0] =
        unsigned(std::max<int64_t>(1, std::min(units, slots)) * c.cluster);
    d.grid[1] = 1;
    d.grid[2] = 1;
  } else {
    d.grid[0] = unsigned(tilesN);
    d.grid[1] = unsigned(tilesM);
    d.grid[2] = unsigned(batch * c.splitK);
  }
  d.block[0] = unsigned(tr.threads);
  d.block[1] = d.block[2] = 1;
  d.smemBytes = unsigned(tr.smemBytes);
  // Programmatic dependent launch: every GEMM loop calls
  // waitForPreviousGrid() before it touches memory, so its blocks may start,
  // and set up, while the kernel before it on the stream finishes (H100,
  // bench/gemm.py: 1024^3 7.6 -> 6.8 us, 532x2048x2048 11.7 -> 11.1).
  d.overlapsPrevious = t == Target::SM90A;
  return d;
}

} // namespace kgen
