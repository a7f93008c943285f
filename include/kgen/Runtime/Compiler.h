//===- Compiler.h - hiprtc and nvrtc, opened with dlopen --------*- C++ -*-===//

#ifndef KGEN_RUNTIME_COMPILER_H
#define KGEN_RUNTIME_COMPILER_H

#include "kgen/Codegen/Emitter.h"

#include <memory>
#include <string>
#include <vector>

namespace kgen {

/// A run-time compiler for one vendor. Template headers are handed to it as
/// in-memory headers (and, on NVIDIA, an in-memory hip/hip_runtime.h that
/// maps HIP's kernel language onto CUDA's).
class Compiler {
public:
  virtual ~Compiler() = default;
  virtual Vendor vendor() const = 0;
  virtual std::string name() const = 0;    ///< "nvrtc" or "hiprtc"
  virtual std::string version() const = 0; ///< e.g. "13.0"
  /// The exact options used for `t` (part of the cache key).
  virtual std::vector<std::string> options(Target t) const = 0;
  /// Compile to a loadable binary (cubin / code object). On failure throws
  /// kgen::Error with the compiler log and the path the source was saved to.
  virtual std::string compile(const KernelSource &src) = 0;
};

/// Opens the compiler library for `v` (dlopen). Returns null and sets
/// `whyNot` (which libraries were tried, the dlerror) when absent.
std::unique_ptr<Compiler> openCompiler(Vendor v, std::string *whyNot);

} // namespace kgen

#endif
