//===- Presets.h - Built-in problem lists of the kgen CLI -------*- C++ -*-===//

#ifndef KGEN_TOOLS_PRESETS_H
#define KGEN_TOOLS_PRESETS_H

#include "Args.h"

#include <string>
#include <vector>

namespace kgen::cli {

/// "gemm-bench": the GEMM shapes kgen is benchmarked and tuned on, bf16,
/// layout nt, M at run time with the shape's M as its hint: the cubes
/// 8192, 4096, 2048 and 1024; 532x2048x2048, 788x2048x2048 and
/// 532x2048x16384; 4096x14336x4096 and 4096x4096x14336; M = 1, 16, 32, 64,
/// 128 and 256 with N = K = 4096 and with N = K = 8192; and the ragged
/// 127x4099x1023. Labels are "gemm-bench.MxNxK".
/// The GEMM shapes of the GEMM benchmark (bf16, nt).
std::vector<ProblemSpec> gemmBenchProblems();
/// The GEMMs of one Llama-3-8B decoder layer at 532 tokens (bf16, nt, M at
/// run time): the main job of `kgen run`.
std::vector<ProblemSpec> llama3LayerProblems();
/// A preset by name (llama3-8b, gemm-bench); throws kgen::Error otherwise.
std::vector<ProblemSpec> presetProblems(const std::string &name);

} // namespace kgen::cli

#endif // KGEN_TOOLS_PRESETS_H
