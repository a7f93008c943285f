# The mLSTM emulator test: generated mLSTM kernels (MlstmEmuGen.cpp lists the
# plans) run on host threads like the GEMM ones (emu.cmake, included first:
# this reuses its template link and EmuRuntime.cpp).
set(kgen_mlstm_emu_count 45) # kernels the plans generate (two per two-phase, three per chunk-parallel, the gate plans' pre-pass)
set(kgen_mlstm_outputs ${KGEN_EMU_GEN}/mlstm_registry.inc)
set(kgen_mlstm_kernels)
math(EXPR kgen_mlstm_last "${kgen_mlstm_emu_count} - 1")
foreach(i RANGE ${kgen_mlstm_last})
  string(LENGTH "${i}" len)
  if(len EQUAL 1)
    set(id m00${i})
  else()
    set(id m0${i})
  endif()
  list(APPEND kgen_mlstm_outputs ${KGEN_EMU_GEN}/${id}.hip ${KGEN_EMU_GEN}/${id}.cpp)
  list(APPEND kgen_mlstm_kernels ${KGEN_EMU_GEN}/${id}.cpp)
endforeach()

add_executable(kgen-mlstm-emu-gen ${KGEN_EMU_SRC}/MlstmEmuGen.cpp)
target_link_libraries(kgen-mlstm-emu-gen PRIVATE kgen_codegen)
add_custom_command(
  OUTPUT ${kgen_mlstm_outputs}
  COMMAND kgen-mlstm-emu-gen ${KGEN_EMU_GEN} ${kgen_mlstm_emu_count}
  DEPENDS kgen-mlstm-emu-gen
  COMMENT "Generating the mLSTM emulator test's kernels")

add_executable(MlstmEmulatorTest
  ${KGEN_EMU_SRC}/MlstmEmulatorTest.cpp
  ${KGEN_EMU_SRC}/EmuRuntime.cpp
  ${kgen_mlstm_kernels})
set_source_files_properties(${kgen_mlstm_kernels} PROPERTIES COMPILE_OPTIONS -Wno-unknown-pragmas)
target_include_directories(MlstmEmulatorTest PRIVATE
  ${KGEN_EMU_SRC} ${KGEN_EMU_SRC}/include ${KGEN_EMU_GEN}/templates ${KGEN_EMU_GEN})
target_link_libraries(MlstmEmulatorTest PRIVATE kgen_codegen GTest::gtest GTest::gtest_main Threads::Threads)
add_test(NAME MlstmEmulatorTest COMMAND MlstmEmulatorTest)
set_tests_properties(MlstmEmulatorTest PROPERTIES LABELS unit TIMEOUT 1800)
