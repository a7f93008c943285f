//===- EmuGen.cpp - Generate the emulator test's kernels ------------------===//
//
// kgen-emu-gen OUTDIR: for every CASE of cases.def, checks the config
// (kgen::checkConfig), generates the kernel with kgen::emitGemm, and writes
//
//   OUTDIR/kNNN.hip    the generated source, byte for byte
//   OUTDIR/kNNN.cpp    a wrapper that includes it and adds a host launcher
//   OUTDIR/registry.inc  the table EmulatorTest.cpp runs: each kernel's
//                      problem, its runs and their launch geometry from
//                      kgen::gemmLaunchDims
//
// Files are rewritten only when their text changes, so an unchanged kernel
// is not recompiled.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Emitter.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Codegen/Templates.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace kgen;

namespace {

struct Case {
  Target target;
  DType ab, c;
  const char *layout;
  int64_t m, n, k; // 0: run time
  int alignA, alignB, alignC;
  int blockM, blockN, blockK, warpsM, warpsN, stages;
  const char *smem;
  const char *runs;
  const char *epilogue;
  int batch;
};

// clang-format off
const Case kCases[] = {
#define CASE(T, AB, C, L, M, N, K, AA, AB2, AC, BM, BN, BK, WM, WN, S, SM, R,  \
             EPI, BATCH)                                                       \
  {Target::T, DType::AB, DType::C, L, M, N, K, AA, AB2, AC,                    \
   BM, BN, BK, WM, WN, S, SM, R, EPI, BATCH},
#include "cases.def"
#undef CASE
};
// clang-format on

[[noreturn]] void die(int index, const std::string &msg) {
  std::fprintf(stderr, "kgen-emu-gen: cases.def, case %d: %s\n", index,
               msg.c_str());
  std::exit(1);
}

void writeIfChanged(const std::string &path, const std::string &text) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream old;
      old << in.rdbuf();
      if (old.str() == text)
        return;
    }
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) {
    std::fprintf(stderr, "kgen-emu-gen: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

const char *dtypeEnum(DType t) {
  switch (t) {
  case DType::BF16:
    return "kgen::DType::BF16";
  case DType::F16:
    return "kgen::DType::F16";
  case DType::F32:
    return "kgen::DType::F32";
  }
  return "?";
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kgen-emu-gen OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ostringstream decls, table;
  std::set<std::string> names;
  int index = 0;
  for (const Case &cs : kCases) {
    char id[16];
    std::snprintf(id, sizeof(id), "k%03d", index);

    GemmProblem p;
    p.ab = cs.ab;
    p.c = cs.c;
    p.transA = cs.layout[0] == 't';
    p.transB = cs.layout[1] == 't';
    p.staticM = cs.m != 0;
    p.staticN = cs.n != 0;
    p.staticK = cs.k != 0;
    p.m = cs.m ? cs.m : 1;
    p.n = cs.n ? cs.n : 1;
    p.k = cs.k ? cs.k : 1;
    p.alignA = cs.alignA;
    p.alignB = cs.alignB;
    p.alignC = cs.alignC;
    p.batch = cs.batch;
    p.tf32 = cs.ab == DType::F32; // f32 inputs run through TF32 only
    int splitK = 1;
    bool gemv = false, repack = false;
    {
      std::istringstream features(cs.epilogue);
      for (std::string f; features >> f;) {
        if (f == "biasm")
          p.bias = BiasKind::AlongM;
        else if (f == "biasn")
          p.bias = BiasKind::AlongN;
        else if (f == "res")
          p.residual = true;
        else if (f.rfind("sk", 0) == 0)
          splitK = std::stoi(f.substr(2));
        else if (f == "gemv")
          gemv = true;
        else if (f == "repack")
          repack = true;
        else if (auto act = parseActivation(f))
          p.act = *act;
        else
          die(index, "unknown epilogue feature " + f);
      }
    }
    GemmConfig c;
    c.blockM = cs.blockM;
    c.blockN = cs.blockN;
    c.blockK = cs.blockK;
    c.warpsM = cs.warpsM;
    c.warpsN = cs.warpsN;
    c.stages = cs.stages;
    const std::string smem = cs.smem;
    if (smem == "swz") {
      c.smem = SmemLayout::Swizzled;
      c.smemPad = 0;
    } else if (smem.rfind("pad", 0) == 0) {
      c.smem = SmemLayout::Padded;
      c.smemPad = std::stoi(smem.substr(3));
    } else {
      die(index, "smem must be padP or swz, not " + smem);
    }
    c.splitK = splitK;
    if (gemv)
      c.loop = GemmLoop::Gemv;
    c.repack = repack;
    if (auto err = checkConfig(p, c, cs.target))
      die(index, *err);

    const KernelSource ks = emitGemm(p, c, cs.target);
    const bool amd = targetInfo(cs.target).vendor == Vendor::AMD;
    if (!names.insert(ks.name).second)
      die(index, "kernel name " + ks.name +
                     " is used twice (names carry no target); change a field");

    // The emulated build replaces the atom headers (gemm.h names both and
    // includes one per vendor); every other header the kernel includes is
    // compiled from templates/ as it is.
    std::set<std::string> known = {
        "kgen/common/prelude.h",   "kgen/gemm/gemm.h",
        "kgen/gemm/epilogue.h",    "kgen/gemm/params.h",
        "kgen/gemm/fixup.h",       "kgen/common/mma_sm80.h",
        "kgen/common/mfma_cdna.h", "kgen/gemm/gemv.h",
        "kgen/gemm/repack.h",      "kgen/common/global_io.h"};
    if (!amd)
      known.insert(std::string(kHipRuntimeNvidia));
    for (const std::string &h : ks.headers)
      if (!known.count(h))
        die(index, "the kernel includes " + h +
                       ", which the emulator does not know: decide whether "
                       "it is real code (add it to the list in EmuGen.cpp) "
                       "or target atoms (emulate it under test/emu/include)");

    const GemmTraits tr = gemmTraits(p, c, cs.target);
    // A repack kernel's caller passes any rows (the copy kernel pads those
    // that need it): the test lays A and B out at the problem's promised
    // alignment (1: misaligned) instead of the main loop's vectors.
    const int callerVecA = repack ? std::min(cs.alignA, 8) : tr.vecA;
    const int callerVecB = repack ? std::min(cs.alignB, 8) : tr.vecB;
    std::ostringstream runs;
    int nRuns = 0;
    std::istringstream rs(cs.runs);
    for (std::string r; rs >> r;) {
      long long m, n, k;
      char x1, x2;
      std::istringstream one(r);
      if (!(one >> m >> x1 >> n >> x2 >> k) || x1 != 'x' || x2 != 'x' ||
          m < 1 || n < 1 || k < 1)
        die(index, "bad run " + r);
      if ((cs.m && m != cs.m) || (cs.n && n != cs.n) || (cs.k && k != cs.k))
        die(index, "run " + r + " does not match the baked extents");
      // The vector contract: each operand's contiguous extent is a multiple
      // of its vector width (the runtime would lower the width otherwise).
      const long long contA = p.transA ? m : k, contB = p.transB ? k : n;
      if (contA % callerVecA || contB % callerVecB || n % tr.vecC)
        die(index, "run " + r + " breaks the vector widths " +
                       std::to_string(tr.vecA) + std::to_string(tr.vecB) +
                       std::to_string(tr.vecC));
      if (++nRuns > 4)
        die(index, "at most 4 runs");
      GemmProblem q = p;
      q.m = m;
      q.n = n;
      q.k = k;
      const LaunchDims d = gemmLaunchDims(q, c, cs.target, m, 0, p.batch);
      const GemmWorkspace ws = gemmWorkspace(q, c, m, p.batch);
      runs << "{" << m << ", " << n << ", " << k << ", " << d.grid[0] << ", "
           << d.grid[1] << ", " << d.grid[2] << ", " << d.block[0] << ", "
           << d.smemBytes << ", " << ws.partialBytes << ", " << ws.counters
           << "}, ";
    }
    if (!nRuns)
      die(index, "no runs");

    writeIfChanged(dir + "/" + id + ".hip", ks.source);
    std::ostringstream w;
    w << "// Generated by kgen-emu-gen from test/emu/cases.def (case " << index
      << "): the kernel kgen::emitGemm wrote for " << toString(cs.target)
      << ",\n// included verbatim, and a host launcher for it.\n"
      << "#define " << (amd ? "EMU_AMD" : "EMU_NVIDIA") << " 1\n"
      << "#include \"GemmEmuDevice.h\"\n"
      << "#include \"" << id << ".hip\"\n"
      << "#include \"EmuLauncher.h\"\n"
      << "EMU_LAUNCHER(" << ks.name << ")\n";
    if (repack)
      w << "EMU_REPACK_LAUNCHER(" << ks.prologue << ")\n";
    writeIfChanged(dir + "/" + id + ".cpp", w.str());

    decls << "extern \"C\" bool " << ks.name
          << "_emu(const emu::Args &, const emu::Launch &, char *, size_t);\n";
    if (repack)
      decls << "extern \"C\" bool " << ks.prologue
            << "_emu(const kgen::gemm::RepackParams &, const emu::Launch &, "
               "char *, size_t);\n";
    table << "    {\"" << ks.name << "\", \"" << toString(cs.target) << "\", "
          << (amd ? "true" : "false") << ", " << dtypeEnum(p.ab) << ", "
          << dtypeEnum(p.c) << ", " << p.transA << ", " << p.transB << ", "
          << callerVecA << ", " << callerVecB << ", " << tr.vecC << ", "
          << targetInfo(cs.target).waveSize << ", " << c.warpsM * c.warpsN
          << ", " << c.stages << ", "
          << (c.smem == SmemLayout::Swizzled ? "true" : "false") << ", "
          << tr.checkM << ", " << tr.checkN << ", " << tr.checkK << ", "
          << int(p.bias) << ", " << int(p.act) << ", " << p.residual << ", "
          << p.batch << ", " << c.splitK << ", "
          << (c.loop == GemmLoop::Gemv ? "true" : "false") << ", " << nRuns
          << ", {" << runs.str() << "}, &" << ks.name << "_emu, "
          << (repack ? "&" + ks.prologue + "_emu" : std::string("nullptr"))
          << "},\n";
    ++index;
  }
  writeIfChanged(dir + "/registry.inc",
                 "// Generated by kgen-emu-gen from test/emu/cases.def.\n" +
                     decls.str() + "\nconst EmuKernel kKernels[] = {\n" +
                     table.str() + "};\n");
  return 0;
}
