//===- AttentionJson.h - Attention problems and configs as JSON -*- C++ -*-===//
//
// For code built with exceptions (runtime, CLI): parse errors throw
// kgen::Error naming the field; unknown fields are errors too.
//
//   {"family": "attention", "batch": 2, "heads": [32, 8], "seqlen": [1, 4096],
//    "head_dim": [128, 128], "dtype": "bf16", "layout": "bshd",
//    "causal": true, "window": [-1, -1], "varlen": false, "alibi": false,
//    "bias": false, "lse": true}
//   {"block": [64, 64], "warps": 4, "stages": 2, "preload_v": false,
//    "splits": 1}
//   {"loop": "wgmma", "block": [128, 128], "warps": 8, "stages": 2,
//    "persistent": true}   ("loop" and "persistent" only when not default)
//
// "dtype" is Q's, K's and V's: bf16 or f16 (O's too), or e4m3 / e5m2 (also
// torch's float8_e4m3fn / float8_e5m2) with a bf16 O (attentionOutputDType).
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_CODEGEN_ATTENTIONJSON_H
#define KGEN_CODEGEN_ATTENTIONJSON_H

#include "kgen/Attention.h"

#include <nlohmann/json.hpp>

#include <array>
#include <string_view>

namespace kgen {

nlohmann::json toJson(const AttentionProblem &p);
nlohmann::json toJson(const AttentionConfig &c);

AttentionProblem attentionProblemFromJson(const nlohmann::json &j);
AttentionConfig attentionConfigFromJson(const nlohmann::json &j);
/// The fields of an attention config that spell a tile
/// (Codegen/PartialConfig.h); the others name a strategy.
inline constexpr std::array<std::string_view, 4> kAttentionTileFields{
    "block", "warps", "stages", "preload_v"};

} // namespace kgen

#endif
