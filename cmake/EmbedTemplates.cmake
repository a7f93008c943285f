# Writes a C++ file that holds every header under templates/ as a string, so
# the runtime can hand them to hiprtc/nvrtc as in-memory headers.
# Inputs: TEMPLATE_DIR, OUTPUT.
file(GLOB_RECURSE headers RELATIVE "${TEMPLATE_DIR}" "${TEMPLATE_DIR}/*.h")
list(SORT headers)
set(body "")
foreach(h IN LISTS headers)
  file(READ "${TEMPLATE_DIR}/${h}" text)
  string(APPEND body "    {\"kgen/${h}\", R\"kgen_template(${text})kgen_template\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp"
"// Generated from templates/ by cmake/EmbedTemplates.cmake. Do not edit.
#include \"kgen/Codegen/Templates.h\"

namespace kgen {
const std::vector<TemplateHeader> &templateHeaders() {
  static const std::vector<TemplateHeader> headers = {
${body}  };
  return headers;
}
} // namespace kgen
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
