# Debian's LLVM/MLIR 19. Every MLIR target links libMLIR.so (never the static
# component libraries) and follows LLVM's rules (no exceptions, no RTTI).
if(NOT MLIR_DIR)
  set(MLIR_DIR /usr/lib/llvm-19/lib/cmake/mlir)
endif()
find_package(MLIR REQUIRED CONFIG PATHS ${MLIR_DIR} NO_DEFAULT_PATH)
list(APPEND CMAKE_MODULE_PATH ${MLIR_CMAKE_DIR} ${LLVM_CMAKE_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)

# Flags for the MLIR-side targets only (the runtime keeps exceptions on).
function(kgen_mlir_target target)
  target_include_directories(${target} SYSTEM PUBLIC ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
  target_compile_options(${target} PRIVATE -fno-exceptions -fno-rtti)
  target_compile_definitions(${target} PUBLIC ${LLVM_DEFINITIONS_LIST})
  target_link_libraries(${target} PUBLIC MLIR LLVM)
endfunction()
