//===- Commands.h - kgen subcommands defined outside main.cpp ---*- C++ -*-===//

#ifndef KGEN_TOOLS_COMMANDS_H
#define KGEN_TOOLS_COMMANDS_H

#include "Args.h"

#include <string>
#include <vector>

namespace kgen::cli {

/// The problems of a built-in preset; throws kgen::Error naming the presets
/// for an unknown name. "llama3-8b": the GEMMs of one Llama-3-8B decoder
/// layer (qkv, o, gate_up, down; 532 tokens, bf16, weights N x K, M at run
/// time), the job of `kgen run`; "gemm-bench": gemmBenchProblems().
/// `kgen bundle`: compile the chosen variants of a problem list for one or
/// more targets into a bundle directory (tools/kgen/Bundle.cpp).
int cmdBundle(Args &args);

/// `kgen tune`: check and time every candidate of each problem on the GPU
/// and write the winners to the tuning DB, resumably (tools/kgen/Tune.cpp).
int cmdTune(Args &args);

/// Whether --family asks for attention (default: gemm); throws on others.
bool wantsAttention(Args &args);
/// `kgen emit|compile --family attention ...` (tools/kgen/Attention.cpp).
int cmdAttention(Args &args, const std::string &verb);
/// `kgen mlstm emit|compile|candidates`: the mLSTM family
/// (tools/kgen/Mlstm.cpp).
int cmdMlstm(Args &args);

} // namespace kgen::cli

#endif // KGEN_TOOLS_COMMANDS_H
