//===- Presets.cpp - Built-in problem lists of the kgen CLI ---------------===//

#include "Presets.h"

#include "kgen/Error.h"

#include <array>

namespace kgen::cli {

std::vector<ProblemSpec> gemmBenchProblems() {
  std::vector<std::array<int64_t, 3>> shapes = {
      {8192, 8192, 8192}, {4096, 4096, 4096},  {2048, 2048, 2048},
      {1024, 1024, 1024}, {532, 2048, 2048},   {788, 2048, 2048},
      {532, 2048, 16384}, {4096, 14336, 4096}, {4096, 4096, 14336}};
  for (int64_t nk : {4096, 8192})
    for (int64_t m : {1, 16, 32, 64, 128, 256})
      shapes.push_back({m, nk, nk});
  shapes.push_back({127, 4099, 1023});
  // nt (B a weight stored N x K, BLAS's TN) first, then nn: bench/gemm.py
  // runs both.
  std::vector<ProblemSpec> out;
  for (bool transB : {true, false})
    for (auto [m, n, k] : shapes) {
      GemmProblem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.transB = transB;
      out.push_back({"gemm-bench." + std::to_string(m) + "x" +
                         std::to_string(n) + "x" + std::to_string(k) +
                         (transB ? "" : ".nn"),
                     p, std::nullopt, std::nullopt});
    }
  return out;
}

std::vector<ProblemSpec> llama3LayerProblems() {
  // Hidden 4096, 32 query and 8 KV heads of 128, MLP 14336; weights stored
  // N x K (layout nt), M taken at run time with 532 tokens as its hint.
  struct Row {
    const char *name;
    int64_t n, k;
  };
  const Row rows[] = {{"llama3-8b.qkv_proj", 6144, 4096},
                      {"llama3-8b.o_proj", 4096, 4096},
                      {"llama3-8b.gate_up_proj", 28672, 4096},
                      {"llama3-8b.down_proj", 4096, 14336}};
  std::vector<ProblemSpec> out;
  for (const Row &r : rows) {
    GemmProblem p;
    p.m = 532;
    p.n = r.n;
    p.k = r.k;
    p.transB = true;
    out.push_back({r.name, p, std::nullopt, std::nullopt});
  }
  return out;
}

std::vector<ProblemSpec> presetProblems(const std::string &name) {
  if (name == "gemm-bench")
    return gemmBenchProblems();
  if (name == "llama3-8b")
    return llama3LayerProblems();
  throw Error("unknown preset '" + name + "' (presets: llama3-8b, gemm-bench)");
}

} // namespace kgen::cli
