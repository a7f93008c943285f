//===- Presets.h - Built-in problem lists of the kgen CLI -------*- C++ -*-===//

#ifndef KGEN_TOOLS_PRESETS_H
#define KGEN_TOOLS_PRESETS_H

#include "Args.h"

#include "kgen/Attention.h"
#include "kgen/Mlstm.h"
#include "kgen/Runtime/Tuner.h"

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
/// "gemm-fp8-bench": the same shapes in e4m3 into bf16 (nt; all but
/// 127x4099x1023, whose K is off fp8's 16-byte rows), as bench/gemm.py
/// --dtype e4m3 runs them. Labels are "gemm-fp8-bench.MxNxK".
std::vector<ProblemSpec> gemmFp8BenchProblems();
/// The GEMMs of one Llama-3-8B decoder layer at 532 tokens (bf16, nt, M at
/// run time): the main job of `kgen run`.
std::vector<ProblemSpec> llama3LayerProblems();
/// A preset by name (llama3-8b, gemm-bench, gemm-fp8-bench); throws
/// kgen::Error otherwise.
std::vector<ProblemSpec> presetProblems(const std::string &name);

/// An attention or mLSTM problem of a preset, with its label.
struct AttentionSpec {
  std::string label;
  AttentionProblem problem;
};
struct MlstmSpec {
  std::string label;
  MlstmProblem problem;
};
/// "attention-bench": the shapes of bench/attention.py as kgen.attention
/// passes them (BSHD, no LSE): the seed's causal f16 D=256 B=4 H=8 at
/// S = 512..4096; prefill bf16 H=16, D = 64 and 128, S = 512, 1024, 4096,
/// 16384 with B = 16384 / S, causal and not; decode bf16 Sq = 1, Hq = 32,
/// D = 128, B = 1 and 16: Hkv = 8 with Sk = 4096 and 32768, Hkv = 4 and 1
/// with Sk = 4096. Labels "attention-bench.<group>...".
std::vector<AttentionSpec> attentionBenchProblems();
/// "attention-fp8-bench": those of them fp8 attention takes (D 128, Dv 128:
/// the prefill D=128 and decode shapes) in e4m3 into a bf16 O, as
/// bench/attention.py --dtype e4m3 runs them. Labels
/// "attention-fp8-bench.<group>...".
std::vector<AttentionSpec> attentionFp8BenchProblems();
/// "mlstm-bench": the shapes of bench/mlstm.py (bf16): (B, NH, S, DQK, DV)
/// = (8, 8, 8192, 256, 512), (32, 8, 2048, 256, 512), (1, 8, 8192, 256,
/// 512), (4, 16, 8192, 128, 256); DQK = DV = 64 and 128 with B = 1, 2, 4,
/// S = 2048 and 4096, NH = 8; and the decoding step S = 1, B = 1, 16, 64,
/// NH = 8, DQK = 256, DV = 512 with states in and out.
std::vector<MlstmSpec> mlstmBenchProblems();
/// Whether `name` is one of the three presets above.
bool isFamilyPreset(const std::string &name);

/// A problem of any family, with its label and (from .mlir) target.
struct AnySpec {
  std::string label;
  AnyProblem problem;
  std::optional<Target> target;
  PartialConfig<GemmConfig> config; ///< a GEMM's, from .mlir
};
/// One short line for tables: "attention B4 H32/8 S1x4096 D128/128 bf16",
/// "mlstm B1 NH8 S8192 D256/512 bf16".
std::string shapeText(const AttentionProblem &p);
std::string shapeText(const MlstmProblem &p);
/// The same from a problem's JSON (its "family" says which).
std::string familyShapeText(const nlohmann::json &problem);
/// An attention or mLSTM config's JSON in one short line: "64x64 w4 s2 pv
/// k2 gqa", "twophase c64 d64 w4".
std::string familyConfigText(const nlohmann::json &config);

/// Any preset by name, as AnySpecs.
std::vector<AnySpec> anyPresetProblems(const std::string &name);
/// The problems of `--problem FILE` when FILE names attention or mLSTM
/// problems: a .json list with objects of "family": "attention" or "mlstm"
/// (an optional "name" for tables; the others are GEMM problems as
/// problemsFromArgs reads them, without "config"), or a .mlir file with
/// kgen.attention / kgen.mlstm ops (with MLIR; its kgen.gemm ops come
/// along). Empty when there is no --problem or it names no such problem:
/// problemsFromArgs reads it then.
std::optional<std::vector<AnySpec>> mixedProblemsFromArgs(Args &args);

} // namespace kgen::cli

#endif // KGEN_TOOLS_PRESETS_H
