//===- Json.h - Problems and configs to and from JSON -----------*- C++ -*-===//
//
// JSON round-trip of problems and configs. This header is for code built with
// exceptions (runtime, CLI): parse errors throw kgen::Error with a message
// naming the field.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_CODEGEN_JSON_H
#define KGEN_CODEGEN_JSON_H

#include "kgen/Problem.h"

#include <nlohmann/json.hpp>

#include <array>
#include <string_view>

namespace kgen {

nlohmann::json toJson(const GemmProblem &p);
nlohmann::json toJson(const GemmConfig &c);

/// Throws kgen::Error naming the bad field; unknown fields are errors too.
GemmProblem gemmProblemFromJson(const nlohmann::json &j);
GemmConfig gemmConfigFromJson(const nlohmann::json &j);
/// The fields of a GEMM config that spell a tile (Codegen/PartialConfig.h);
/// the others name a strategy.
inline constexpr std::array<std::string_view, 5> kGemmTileFields{
    "block", "warps", "stages", "smem", "pad"};

} // namespace kgen

#endif
