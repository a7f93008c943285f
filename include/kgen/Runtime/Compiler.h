//===- Compiler.h - hiprtc and nvrtc, opened with dlopen --------*- C++ -*-===//

#ifndef KGEN_RUNTIME_COMPILER_H
#define KGEN_RUNTIME_COMPILER_H

#include "kgen/Codegen/Emitter.h"

#include <memory>
#include <optional>
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
  /// The exact options used for `t` (part of the cache key); the same as
  /// compilerOptions(vendor(), t).
  virtual std::vector<std::string> options(Target t) const = 0;
  /// The library file it was opened from, as the loader found it.
  virtual std::string library() const = 0;
  /// Compile to a loadable binary (cubin / code object). On failure throws
  /// kgen::Error with the compiler log and the path the source was saved to.
  std::string compile(const KernelSource &src) {
    return compile(src, {}, nullptr);
  }
  /// The same with `extra` options after options(t) (e.g. nvrtc's
  /// "--ptxas-options=-v"), and the compiler's log of a success in `*log`
  /// when `log` is given. The cache never uses these: its key names
  /// options(t) alone.
  virtual std::string compile(const KernelSource &src,
                              const std::vector<std::string> &extra,
                              std::string *log) = 0;
};

/// The options kgen passes to `v`'s compiler for `t`. They depend on the
/// vendor and target only, so cache keys need no open compiler for them.
std::vector<std::string> compilerOptions(Vendor v, Target t);

/// A compiler's part of every cache key.
struct CompilerIdentity {
  std::string name, version;
};

/// The identity recorded in the memo file `memoPath` for vendor `v`, when the
/// library it was read from is still the same file (the path as loaded, its
/// target, size, mtime and inode) and the variables that choose the library
/// (KGEN_NVRTC/CUDA_HOME or KGEN_HIPRTC/ROCM_PATH, LD_LIBRARY_PATH) are
/// unchanged. Lets a process whose kernels are all cached skip opening
/// nvrtc/hiprtc (several ms); anything doubtful returns nothing.
std::optional<CompilerIdentity> recallCompilerIdentity(
    const std::string &memoPath, Vendor v);
/// Records `c`'s identity in `memoPath` (written atomically; failures are
/// ignored: the memo only saves time).
void rememberCompilerIdentity(const std::string &memoPath, const Compiler &c);

/// Opens the compiler library for `v` (dlopen). Returns null and sets
/// `whyNot` (which libraries were tried, the dlerror) when absent.
std::unique_ptr<Compiler> openCompiler(Vendor v, std::string *whyNot);

} // namespace kgen

#endif
