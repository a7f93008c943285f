//===- Presets.cpp - Built-in problem lists of the kgen CLI ---------------===//

#include "Presets.h"

#include "kgen/Attention.h"
#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Error.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <sstream>

#ifdef KGEN_HAVE_MLIR
#include "kgen/IR/MlirFile.h"
#endif

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
                     p,
                     {},
                     std::nullopt});
    }
  return out;
}

std::vector<ProblemSpec> gemmFp8BenchProblems() {
  std::vector<ProblemSpec> out;
  for (ProblemSpec s : gemmBenchProblems()) {
    GemmProblem &p = s.problem;
    if (!p.transB || p.k % 16 != 0) // fp8: layout nt, 16-byte rows
      continue;
    p.ab = DType::E4M3;
    p.c = DType::BF16;
    p.alignA = p.alignB = defaultAlign(p.ab);
    s.label = "gemm-fp8-bench" + s.label.substr(std::strlen("gemm-bench"));
    out.push_back(std::move(s));
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
    out.push_back({r.name, p, {}, std::nullopt});
  }
  return out;
}

std::vector<ProblemSpec> presetProblems(const std::string &name) {
  if (name == "gemm-bench")
    return gemmBenchProblems();
  if (name == "gemm-fp8-bench")
    return gemmFp8BenchProblems();
  if (name == "llama3-8b")
    return llama3LayerProblems();
  throw Error("unknown preset '" + name +
              "' (presets: llama3-8b, gemm-bench, gemm-fp8-bench, "
              "attention-bench, attention-fp8-bench, "
              "mlstm-bench)");
}

std::vector<AttentionSpec> attentionBenchProblems() {
  std::vector<AttentionSpec> out;
  auto add = [&](const std::string &group, int64_t b, int64_t hq, int64_t hkv,
                 int64_t sq, int64_t sk, int d, bool causal, DType t) {
    AttentionProblem p;
    p.batch = b;
    p.headsQ = hq;
    p.headsKv = hkv;
    p.seqlenQ = sq;
    p.seqlenK = sk;
    p.headDimQk = p.headDimV = d;
    p.causal = causal;
    p.dtype = t;
    out.push_back({"attention-bench." + group + ".b" + std::to_string(b) + "h" +
                       std::to_string(hq) + "x" + std::to_string(hkv) + "s" +
                       std::to_string(sq) + "x" + std::to_string(sk) + "d" +
                       std::to_string(d) + (causal ? ".causal" : ""),
                   p});
  };
  for (int64_t s : {512, 1024, 2048, 4096})
    add("seed", 4, 8, 8, s, s, 256, true, DType::F16);
  for (int d : {64, 128})
    for (int64_t s : {512, 1024, 4096, 16384})
      for (bool causal : {false, true})
        add("prefill", 16384 / s, 16, 16, s, s, d, causal, DType::BF16);
  for (int64_t b : {1, 16}) {
    for (int64_t sk : {4096, 32768})
      add("decode", b, 32, 8, 1, sk, 128, false, DType::BF16);
    for (int64_t hkv : {4, 1})
      add("decode", b, 32, hkv, 1, 4096, 128, false, DType::BF16);
  }
  return out;
}

std::vector<AttentionSpec> attentionFp8BenchProblems() {
  std::vector<AttentionSpec> out;
  for (AttentionSpec s : attentionBenchProblems()) {
    // The shapes fp8 attention takes (checkProblem's head-dim rule).
    s.problem.dtype = DType::E4M3;
    if (checkProblem(s.problem))
      continue;
    s.label =
        "attention-fp8-bench" + s.label.substr(std::strlen("attention-bench"));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<MlstmSpec> mlstmBenchProblems() {
  struct Shape {
    int64_t b, nh, s;
    int dqk, dv;
    bool states;
  };
  std::vector<Shape> shapes = {{8, 8, 8192, 256, 512, false},
                               {32, 8, 2048, 256, 512, false},
                               {1, 8, 8192, 256, 512, false},
                               {4, 16, 8192, 128, 256, false}};
  for (int d : {64, 128})
    for (int64_t b : {1, 2, 4})
      for (int64_t s : {2048, 4096})
        shapes.push_back({b, 8, s, d, d, false});
  for (int64_t b : {1, 16, 64})
    shapes.push_back({b, 8, 1, 256, 512, true});
  std::vector<MlstmSpec> out;
  for (const Shape &x : shapes) {
    MlstmProblem p;
    p.b = x.b;
    p.nh = x.nh;
    p.s = x.s;
    p.dqk = x.dqk;
    p.dv = x.dv;
    p.initialState = p.finalState = x.states;
    out.push_back({"mlstm-bench.b" + std::to_string(x.b) + "h" +
                       std::to_string(x.nh) + "s" + std::to_string(x.s) + "d" +
                       std::to_string(x.dqk) + "x" + std::to_string(x.dv) +
                       (x.states ? ".step" : ""),
                   p});
  }
  return out;
}

bool isFamilyPreset(const std::string &name) {
  return name == "attention-bench" || name == "attention-fp8-bench" ||
         name == "mlstm-bench";
}

} // namespace kgen::cli

namespace kgen::cli {

std::vector<AnySpec> anyPresetProblems(const std::string &name) {
  std::vector<AnySpec> out;
  if (name == "attention-bench" || name == "attention-fp8-bench")
    for (AttentionSpec &s : name == "attention-bench"
                                ? attentionBenchProblems()
                                : attentionFp8BenchProblems())
      out.push_back({s.label, s.problem, std::nullopt, {}});
  else if (name == "mlstm-bench")
    for (MlstmSpec &s : mlstmBenchProblems())
      out.push_back({s.label, s.problem, std::nullopt, {}});
  else
    for (ProblemSpec &s : presetProblems(name))
      out.push_back({s.label, s.problem, s.target, s.config});
  return out;
}

std::string shapeText(const AttentionProblem &p) {
  return "attention B" + std::to_string(p.batch) + " H" +
         std::to_string(p.headsQ) + "/" + std::to_string(p.headsKv) + " S" +
         std::to_string(p.seqlenQ) + "x" + std::to_string(p.seqlenK) + " D" +
         std::to_string(p.headDimQk) + "/" + std::to_string(p.headDimV) + " " +
         std::string(toString(p.dtype)) + (p.causal ? " causal" : "");
}

std::string shapeText(const MlstmProblem &p) {
  return "mlstm B" + std::to_string(p.b) + " NH" + std::to_string(p.nh) + " S" +
         std::to_string(p.s) + " D" + std::to_string(p.dqk) + "/" +
         std::to_string(p.dv) + " " + std::string(toString(p.dtype)) +
         (p.initialState || p.finalState ? " states" : "");
}

/// An attention or mLSTM config in one short line: "64x64 w4 s2 pv k2",
/// "twophase c64 d64 w4".
std::string familyConfigText(const nlohmann::json &c) {
  if (c.contains("variant")) {
    std::string s = c.value("variant", std::string("?"));
    if (c.contains("chunk") && c.at("chunk").get<int>() > 0)
      s += " c" + c.at("chunk").dump();
    for (auto [key, tag] : {std::pair{"blockDV", " d"}, {"warps", " w"}})
      if (c.contains(key))
        s += tag + c.at(key).dump();
    return s;
  }
  std::string s = c.at("block")[0].dump() + "x" + c.at("block")[1].dump() +
                  " w" + c.at("warps").dump() + " s" + c.at("stages").dump();
  if (c.contains("loop"))
    s = c.at("loop").get<std::string>() + " " + s;
  if (c.value("preload_v", false))
    s += " pv";
  if (c.value("splits", 1) > 1)
    s += " k" + c.at("splits").dump();
  if (c.value("pack_gqa", false))
    s += " gqa";
  if (c.value("persistent", false))
    s += " persistent";
  return s;
}

std::string familyShapeText(const nlohmann::json &problem) {
  if (problem.value("family", "") == "attention")
    return shapeText(attentionProblemFromJson(problem));
  return shapeText(mlstmProblemFromJson(problem));
}

std::optional<std::vector<AnySpec>> mixedProblemsFromArgs(Args &args) {
  std::optional<std::string> file = args.value("problem");
  auto endsWith = [&](const char *suffix) {
    const size_t n = std::strlen(suffix);
    return file && file->size() >= n &&
           file->compare(file->size() - n, n, suffix) == 0;
  };
  if (endsWith(".mlir")) {
#ifdef KGEN_HAVE_MLIR
    std::vector<MlirAttention> attention;
    std::vector<MlirMlstm> mlstm;
    std::string err;
    if (!readFamiliesFromMlirFile(*file, attention, mlstm, err))
      throw Error(err);
    if (attention.empty() && mlstm.empty())
      return std::nullopt;
    std::vector<MlirGemm> gemms;
    if (!readGemmsFromMlirFile(*file, gemms, err))
      throw Error(err);
    std::vector<AnySpec> out;
    for (MlirGemm &g : gemms)
      out.push_back({g.symbol, g.problem, g.target, spelledConfig(g.config)});
    for (MlirAttention &a : attention)
      out.push_back({a.symbol, a.problem, a.target, {}});
    for (MlirMlstm &m : mlstm)
      out.push_back({m.symbol, m.problem, m.target, {}});
    return out;
#else
    return std::nullopt; // problemsFromArgs says MLIR is off
#endif
  }
  if (!endsWith(".json"))
    return std::nullopt;
  std::ifstream in(*file, std::ios::binary);
  if (!in)
    throw Error("cannot read " + *file);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error &e) {
    throw Error(*file + ": malformed JSON: " + e.what());
  }
  auto isFamily = [](const nlohmann::json &o) {
    return o.is_object() && o.contains("family") && o.at("family") != "gemm";
  };
  if (!(j.is_array() ? std::any_of(j.begin(), j.end(), isFamily) : isFamily(j)))
    return std::nullopt;
  std::vector<AnySpec> out;
  auto one = [&](nlohmann::json o, size_t i) {
    std::string label = *file;
    if (o.is_object() && o.contains("name")) {
      label = o.at("name").get<std::string>();
      o.erase("name");
    } else if (j.is_array()) {
      label += "[" + std::to_string(i) + "]";
    }
    const std::string family =
        isFamily(o) ? o.at("family").get<std::string>() : "gemm";
    if (family == "attention") {
      out.push_back(
          {label, attentionProblemFromJson(o), std::nullopt, std::nullopt});
    } else if (family == "mlstm") {
      out.push_back(
          {label, mlstmProblemFromJson(o), std::nullopt, std::nullopt});
    } else {
      if (isFamily(o))
        throw Error("'family' = " + o.at("family").dump() +
                    " is not gemm, attention or mlstm");
      o.erase("family");
      out.push_back(
          {label, gemmProblemFromJson(o), std::nullopt, std::nullopt});
    }
  };
  try {
    if (j.is_array())
      for (size_t i = 0; i < j.size(); ++i)
        one(j[i], i);
    else
      one(j, 0);
  } catch (const Error &e) {
    throw Error(*file + ": " + e.what());
  } catch (const nlohmann::json::exception &e) {
    throw Error(*file + ": " + e.what());
  }
  return out;
}

} // namespace kgen::cli
