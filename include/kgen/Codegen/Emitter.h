//===- Emitter.h - HIP source for a problem and a config --------*- C++ -*-===//

#ifndef KGEN_CODEGEN_EMITTER_H
#define KGEN_CODEGEN_EMITTER_H

#include "kgen/Problem.h"

#include <string>
#include <string_view>
#include <vector>

namespace kgen {

/// One generated kernel: a short HIP file that includes the family template
/// and instantiates it, plus the names of the template headers it needs.
struct KernelSource {
  std::string name;   ///< stable kernel (and file) name
  std::string source; ///< the generated HIP translation unit
  Target target;
  std::vector<std::string> headers; ///< template headers it includes
  int threads = 0;                  ///< block size
  int smemBytes = 0;                ///< dynamic shared memory
  /// A second kernel of the same source the launch runs first (a repack
  /// config's copy kernel, templates/gemm/repack.h); empty: none.
  std::string prologue;
};

/// Launch geometry of a GEMM kernel for a run-time M.
struct LaunchDims {
  unsigned grid[3];
  unsigned block[3];
  unsigned smemBytes;
  /// Programmatic dependent launch (sm_90): the kernel may start while the
  /// kernel before it on the stream is still running, once every block of
  /// that one has called allowNextGrid() (templates/common/prelude.h). Set
  /// only for a kernel that calls waitForPreviousGrid() before it touches
  /// anything the previous kernel reads or writes. Ignored on AMD.
  bool overlapsPrevious = false;
};

/// The stable, descriptive kernel name, e.g.
/// kgen_gemm_bf16_nt_mdyn_n2048_k2048_b128x128x32_w2x2_s3_pad8_v888.
std::string gemmKernelName(const GemmProblem &p, const GemmConfig &c, Target t);

/// Generate the kernel. The config must have passed checkConfig.
/// With `inlineTemplates`, the template headers are pasted in so the result
/// is one self-contained file (`kgen emit --inline`).
KernelSource emitGemm(const GemmProblem &p, const GemmConfig &c, Target t,
                      bool inlineTemplates = false);

/// The kernel-language type of a dtype: kgen::bf16, kgen::f16 or float.
std::string deviceTypeName(DType t);

/// The template headers `header` includes, transitively, in the order a
/// preprocessor first sees them, `header` last (what KernelSource lists).
std::vector<std::string> templateIncludes(std::string_view header);
/// The headers pasted into one text, their includes of each other dropped
/// (`kgen emit --inline`).
std::string inlineTemplateHeaders(const std::vector<std::string> &headers);

/// The wgmma atoms a kernel file carries after its headers: the
/// specialization of kgen/common/wgmma_sm90.h's Wgmma (A and B from shared
/// memory) or WgmmaRs (A from registers) for one dtype and n (a multiple of
/// 8 up to 256); m64nNk16 for 16-bit types, m64nNk32 for fp8.
std::string wgmmaAtom(DType ab, int n);
std::string wgmmaRsAtom(DType ab, int n);

/// `computeUnits` sizes persistent grids (GemmLoop::Wgmma: one block per
/// multiprocessor); 0 means one block per tile. The tiled loop's grid is
/// (ceil(N/blockN), ceil(m/blockM), batch); its one kernel argument is a
/// kgen::gemm::Params (templates/gemm/params.h). On sm_90a the launch
/// overlaps the kernel before it (overlapsPrevious: every loop waits for it).
LaunchDims gemmLaunchDims(const GemmProblem &p, const GemmConfig &c, Target t,
                          int64_t m, int computeUnits = 0, int64_t batch = 1);

/// Split-K's scratch for one launch (GemmConfig::splitK > 1): fp32 partial
/// tiles, then one 32-bit arrival counter per output tile, which must be
/// zero before the launch and are zero again after it. Zero bytes without
/// split-K. kgen::Runtime owns it (one buffer per stream, grown on demand).
/// Stream-K (GemmConfig::streamK) needs two partial tiles per CTA of the
/// persistent grid: `ctas` is its size (gemmLaunchDims' grid[0]; 0: one
/// CTA per k-iteration, the most there can be).
///
/// A repack config (GemmConfig::repack) also needs room for the padded
/// copies of A and B (repackBytes, kgen::gemm::planRepack): counted here
/// for both operands, batched, so that a call whose pointers need fewer
/// copies never has to grow it.
struct GemmWorkspace {
  int64_t partialBytes = 0;
  int64_t counters = 0;
  int64_t repackBytes = 0;
  int64_t bytes() const { return partialBytes + 4 * counters + repackBytes; }
};
GemmWorkspace gemmWorkspace(const GemmProblem &p, const GemmConfig &c,
                            int64_t m, int64_t batch = 1, int64_t ctas = 0);

} // namespace kgen

#endif
