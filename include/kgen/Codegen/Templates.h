//===- Templates.h - Kernel templates embedded at build time ----*- C++ -*-===//

#ifndef KGEN_CODEGEN_TEMPLATES_H
#define KGEN_CODEGEN_TEMPLATES_H

#include <string_view>
#include <vector>

namespace kgen {

/// One header under templates/, as the include name the generated source
/// uses (e.g. "kgen/gemm/gemm.h") and its text.
struct TemplateHeader {
  std::string_view includeName;
  std::string_view text;
};

/// The header that maps HIP's kernel language onto CUDA's; nvrtc sees it as
/// <hip/hip_runtime.h>.
inline constexpr std::string_view kHipRuntimeNvidia =
    "kgen/common/hip_runtime_nvidia.h";

/// All embedded template headers (templates/ copied in at build time).
const std::vector<TemplateHeader> &templateHeaders();

/// The text of one header, or empty when unknown.
std::string_view templateText(std::string_view includeName);

} // namespace kgen

#endif
