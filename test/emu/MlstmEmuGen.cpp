//===- MlstmEmuGen.cpp - Generate the mLSTM emulator test's kernels -------===//
//
// kgen-mlstm-emu-gen OUTDIR: for every plan below, checks the config
// (kgen::checkConfig), generates each of its kernels with kgen::emitMlstm
// (the gate plans: the wgmma fused kernel's pre-pass alone) and writes
//
//   OUTDIR/mNNN.hip           the generated source, byte for byte
//   OUTDIR/mNNN.cpp           a wrapper that includes it and adds a launcher
//   OUTDIR/mlstm_registry.inc the plans MlstmEmulatorTest.cpp runs
//
// Files are rewritten only when their text changes.
//
//===----------------------------------------------------------------------===//

#include "kgen/Mlstm.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace kgen;

namespace {

struct Plan {
  Target target;
  DType dtype;
  int dqk, dv;
  MlstmConfig config;
};

// Every variant on NVIDIA (wave 32) and AMD (wave 64; no atoms involved, so
// the emulator runs the AMD build of the same template code), each dtype,
// DQK = DV = 64 and unequal pairs, several slices per head, chunks of 16 to
// 64 (so S = 7, 64, 100 give one short chunk, exact chunks and a ragged
// last one).
const Plan kPlans[] = {
    {Target::SM90A, DType::BF16, 64, 64, {MlstmVariant::Recurrent, 0, 32, 4}},
    {Target::SM90A, DType::BF16, 64, 64, {MlstmVariant::Fused, 16, 32, 2}},
    {Target::SM90A, DType::BF16, 64, 64, {MlstmVariant::TwoPhase, 32, 64, 4}},
    {Target::SM80, DType::F16, 64, 128, {MlstmVariant::Recurrent, 0, 64, 4}},
    {Target::SM80, DType::F16, 64, 128, {MlstmVariant::Fused, 32, 64, 4}},
    {Target::SM80, DType::F32, 128, 64, {MlstmVariant::TwoPhase, 16, 32, 2}},
    {Target::SM90A, DType::F32, 128, 64, {MlstmVariant::Fused, 64, 16, 2}},
    {Target::GFX90A, DType::BF16, 64, 64, {MlstmVariant::Fused, 16, 64, 2}},
    {Target::GFX90A, DType::F32, 64, 128, {MlstmVariant::Recurrent, 0, 128, 2}},
    {Target::GFX90A, DType::F16, 128, 64, {MlstmVariant::TwoPhase, 16, 16, 1}},
    // Tensor cores (mlstmUsesMma): mma.sync + ldmatrix, MFMA on gfx90a; DQK/DV
    // 64/64, 128/128 and the xLSTM-7B head 256/512.
    {Target::SM90A, DType::BF16, 64, 64, {MlstmVariant::Fused, 32, 32, 4}},
    {Target::SM80, DType::F16, 128, 128, {MlstmVariant::TwoPhase, 64, 64, 4}},
    {Target::SM90A, DType::BF16, 128, 128, {MlstmVariant::Fused, 64, 64, 8}},
    {Target::SM90A, DType::BF16, 256, 512, {MlstmVariant::Fused, 64, 32, 8}},
    {Target::SM90A, DType::F16, 256, 512, {MlstmVariant::TwoPhase, 32, 64, 8}},
    // The 7B heads' tuned winner: C in registers at four tiles a warp, the
    // outputs without split-k (h stored in pairs).
    {Target::SM90A, DType::BF16, 256, 512, {MlstmVariant::Fused, 64, 128, 8}},
    {Target::GFX90A, DType::BF16, 64, 64, {MlstmVariant::Fused, 32, 32, 2}},
    {Target::GFX90A, DType::F16, 64, 64, {MlstmVariant::TwoPhase, 32, 32, 4}},
    // 16 warps: split-k 4 (scores), 8 (outputs) and 4 (update), and n's
    // update in 4 groups per entry.
    {Target::SM90A, DType::BF16, 128, 64, {MlstmVariant::TwoPhase, 64, 32, 16}},
    // Chunk-parallel (three kernels): tensor cores on every target (f16 on
    // sm_80, MFMA on gfx90a, 16 warps with split-k), and the
    // fp32 FMA path (f32, chunk 16: S = 100 walks 7 chunks).
    {Target::SM90A, DType::BF16, 64, 64, {MlstmVariant::ChunkPar, 32, 32, 4}},
    {Target::SM80, DType::F16, 64, 128, {MlstmVariant::ChunkPar, 32, 64, 8}},
    {Target::GFX90A, DType::BF16, 64, 64, {MlstmVariant::ChunkPar, 32, 32, 2}},
    {Target::SM80, DType::F32, 64, 64, {MlstmVariant::ChunkPar, 16, 32, 2}},
    {Target::SM90A, DType::BF16, 64, 64, {MlstmVariant::ChunkPar, 64, 32, 16}},
};

// The wgmma fused configs' gate pre-pass alone, its two kernels (its walks
// are sm_90a assembly): bf16 at the 7B heads, f16 at 128/128.
Plan wgmmaPlan(DType dtype, int dqk, int dv) {
  MlstmConfig c{MlstmVariant::Fused, 64, 128, 12};
  c.wgmma = true;
  return {Target::SM90A, dtype, dqk, dv, c};
}
const Plan kGatePlans[] = {wgmmaPlan(DType::BF16, 256, 512),
                           wgmmaPlan(DType::F16, 128, 128)};

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
    std::fprintf(stderr, "kgen-mlstm-emu-gen: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kgen-mlstm-emu-gen OUTDIR COUNT\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ostringstream decls, table, gateTable;
  std::set<std::string> names;
  int file = 0;
  // Writes kernel k of plan pl and its launcher; returns the launcher's
  // name, empty on an error (printed).
  auto write = [&](const Plan &pl, const MlstmProblem &p,
                   MlstmKernel k) -> std::string {
    const bool amd = targetInfo(pl.target).vendor == Vendor::AMD;
    KernelSource ks = emitMlstm(p, pl.config, k, pl.target);
    // Names carry no target, and the emulator links every kernel into
    // one executable: they must differ.
    const std::string &emuName = ks.name;
    if (!names.insert(emuName).second) {
      std::fprintf(stderr, "kgen-mlstm-emu-gen: kernel %s twice\n",
                   emuName.c_str());
      return "";
    }
    char id[16];
    std::snprintf(id, sizeof(id), "m%03d", file++);
    writeIfChanged(dir + "/" + id + ".hip", ks.source);
    std::ostringstream w;
    w << "// Generated by kgen-mlstm-emu-gen: the kernel kgen::emitMlstm "
         "wrote for "
      << toString(pl.target) << ", included verbatim, and a launcher.\n"
      << "#define " << (amd ? "EMU_AMD" : "EMU_NVIDIA") << " 1\n"
      << "#include \"MlstmEmuDevice.h\"\n"
      << "#include \"" << id << ".hip\"\n"
      << "#include \"MlstmEmuLauncher.h\"\n"
      << "MLSTM_EMU_LAUNCHER(" << ks.name << ", " << emuName << ")\n";
    writeIfChanged(dir + "/" + id + ".cpp", w.str());
    decls << "extern \"C\" bool " << emuName
          << "_emu(const kgen::mlstm::Params &, const emu::Launch &, char "
             "*, size_t);\n";
    return "&" + emuName + "_emu";
  };
  // Plan pl's problem; false (printed) where its config is invalid.
  auto problemOf = [](const Plan &pl, MlstmProblem &p) {
    p.dqk = pl.dqk;
    p.dv = pl.dv;
    p.dtype = pl.dtype;
    if (auto e = checkConfig(p, pl.config, pl.target)) {
      std::fprintf(stderr, "kgen-mlstm-emu-gen: plan %s %d/%d: %s\n",
                   toString(pl.config.variant).data(), pl.dqk, pl.dv,
                   e->c_str());
      return false;
    }
    return true;
  };
  for (const Plan &pl : kPlans) {
    MlstmProblem p;
    if (!problemOf(pl, p))
      return 1;
    std::ostringstream launchers;
    int n = 0;
    for (MlstmKernel k : mlstmKernels(pl.config)) {
      const std::string launcher = write(pl, p, k);
      if (launcher.empty())
        return 1;
      launchers << launcher << ", ";
      ++n;
    }
    for (; n < 3; ++n)
      launchers << "nullptr, ";
    table << "    {\"" << toString(pl.target) << " "
          << toString(pl.config.variant) << " " << toString(pl.dtype) << " "
          << pl.dqk << "/" << pl.dv << " c" << pl.config.chunk << " d"
          << pl.config.blockDV << " w" << pl.config.warps
          << (mlstmUsesMma(p, pl.config, mlstmKernels(pl.config).back(),
                           pl.target)
                  ? " mma"
                  : "")
          << "\", kgen::Target(" << int(pl.target) << "), kgen::DType("
          << int(pl.dtype) << "), " << pl.dqk << ", " << pl.dv
          << ", {kgen::MlstmVariant(" << int(pl.config.variant) << "), "
          << pl.config.chunk << ", " << pl.config.blockDV << ", "
          << pl.config.warps << "}, {" << launchers.str() << "}},\n";
  }
  for (const Plan &pl : kGatePlans) {
    MlstmProblem p;
    if (!problemOf(pl, p))
      return 1;
    const std::string sums = write(pl, p, MlstmKernel::GateSums),
                      terms = write(pl, p, MlstmKernel::Gates);
    if (sums.empty() || terms.empty())
      return 1;
    gateTable << "    {\"" << toString(pl.dtype) << " " << pl.dqk << "/"
              << pl.dv << "\", kgen::DType(" << int(pl.dtype) << "), " << pl.dqk
              << ", " << pl.dv << ", {" << sums << ", " << terms << "}},\n";
  }
  if (std::to_string(file) != argv[2]) {
    std::fprintf(stderr,
                 "kgen-mlstm-emu-gen: %d kernels, but mlstm_emu.cmake "
                 "expects %s; update its count\n",
                 file, argv[2]);
    return 1;
  }
  writeIfChanged(dir + "/mlstm_registry.inc",
                 "// Generated by kgen-mlstm-emu-gen.\n" + decls.str() +
                     "\nconst MlstmEmuPlan kPlans[] = {\n" + table.str() +
                     "};\n\nconst MlstmGatePlan kGatePlans[] = {\n" +
                     gateTable.str() + "};\n");
  return 0;
}
