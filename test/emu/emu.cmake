# The emulator test (test/emu): generated GEMM kernels, NVIDIA and AMD, run
# on host threads with the target atoms emulated; no GPU. Included from
# test/CMakeLists.txt. See EmulatorTest.cpp for what is real and what is
# emulated.
#
#   kgen-emu-gen  runs kgen::emitGemm over cases.def at build time and writes
#                 one translation unit per kernel (the generated source,
#                 verbatim, plus a host launcher) and the test's table;
#   EmulatorTest  compiles those with g++ against the real templates/, with
#                 test/emu/include first on the include path so that
#                 <hip/hip_runtime.h> and the two atom headers are the
#                 emulated ones (every other "kgen/..." header comes from
#                 templates/ through the link below).
set(KGEN_EMU_SRC ${CMAKE_CURRENT_LIST_DIR})
set(KGEN_EMU_GEN ${CMAKE_CURRENT_BINARY_DIR}/emu)

# "kgen/<path>" names templates/<path>, as for nvrtc and hiprtc. Another
# tree can be put there to check that the test catches a broken template
# (mutation testing on a scratch copy); the generator still emits the same
# sources, which include the headers by name.
set(KGEN_EMU_TEMPLATES ${PROJECT_SOURCE_DIR}/templates CACHE PATH
    "The templates/ tree the emulator test compiles the kernels against")
file(MAKE_DIRECTORY ${KGEN_EMU_GEN}/templates)
file(CREATE_LINK ${KGEN_EMU_TEMPLATES} ${KGEN_EMU_GEN}/templates/kgen SYMBOLIC)

add_executable(kgen-emu-gen ${KGEN_EMU_SRC}/EmuGen.cpp)
target_link_libraries(kgen-emu-gen PRIVATE kgen_codegen)
target_include_directories(kgen-emu-gen PRIVATE ${KGEN_EMU_SRC})

# One kernel per CASE line; the count decides the generated file names.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KGEN_EMU_SRC}/cases.def)
file(STRINGS ${KGEN_EMU_SRC}/cases.def kgen_emu_cases REGEX "^CASE\\(")
list(LENGTH kgen_emu_cases kgen_emu_count)
math(EXPR kgen_emu_last "${kgen_emu_count} - 1")
set(kgen_emu_outputs ${KGEN_EMU_GEN}/registry.inc)
set(kgen_emu_kernels)
foreach(i RANGE ${kgen_emu_last})
  string(LENGTH "${i}" len)
  if(len EQUAL 1)
    set(id k00${i})
  elseif(len EQUAL 2)
    set(id k0${i})
  else()
    set(id k${i})
  endif()
  list(APPEND kgen_emu_outputs ${KGEN_EMU_GEN}/${id}.hip ${KGEN_EMU_GEN}/${id}.cpp)
  list(APPEND kgen_emu_kernels ${KGEN_EMU_GEN}/${id}.cpp)
endforeach()
add_custom_command(
  OUTPUT ${kgen_emu_outputs}
  COMMAND kgen-emu-gen ${KGEN_EMU_GEN}
  DEPENDS kgen-emu-gen ${KGEN_EMU_SRC}/cases.def
  COMMENT "Generating the emulator test's ${kgen_emu_count} kernels")

# NVIDIA and AMD kernels share the executable: the functions both compile
# from the templates are the same on the host (the prelude's portable
# conversions, SmemTile), each kernel's Config is TU-local, and what differs
# by vendor (kWaveSize, Bytes<>) never becomes a symbol.
add_executable(EmulatorTest
  ${KGEN_EMU_SRC}/EmulatorTest.cpp
  ${KGEN_EMU_SRC}/StreamKFixupTest.cpp
  ${KGEN_EMU_SRC}/RepackEmulatorTest.cpp
  ${KGEN_EMU_SRC}/EmuRuntime.cpp
  ${kgen_emu_kernels})
# g++ does not know the templates' `#pragma unroll` (nvrtc's and clang's).
set_source_files_properties(${kgen_emu_kernels} ${KGEN_EMU_SRC}/RepackEmulatorTest.cpp
  PROPERTIES COMPILE_OPTIONS -Wno-unknown-pragmas)
# Order matters: the emulated headers shadow their templates/ namesakes.
target_include_directories(EmulatorTest PRIVATE
  ${KGEN_EMU_SRC} ${KGEN_EMU_SRC}/include ${KGEN_EMU_GEN}/templates ${KGEN_EMU_GEN})
target_link_libraries(EmulatorTest PRIVATE kgen_codegen GTest::gtest GTest::gtest_main Threads::Threads)
add_test(NAME EmulatorTest COMMAND EmulatorTest)
set_tests_properties(EmulatorTest PROPERTIES LABELS unit TIMEOUT 600)
include(${CMAKE_CURRENT_LIST_DIR}/attention.cmake)
