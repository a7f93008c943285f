//===- Templates.cpp - Lookup of the embedded template headers ------------===//

#include "kgen/Codegen/Templates.h"

namespace kgen {

std::string_view templateText(std::string_view includeName) {
  for (const TemplateHeader &h : templateHeaders())
    if (h.includeName == includeName)
      return h.text;
  return {};
}

} // namespace kgen
