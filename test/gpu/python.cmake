# The Python binding's GPU test (test/gpu/test_python.py): kgen.gemm through
# libkgen.so against torch. Included by test/CMakeLists.txt. It exits 77,
# which ctest reports as skipped, when torch or a CUDA GPU is missing.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME python_gpu
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_python.py)
  set_tests_properties(python_gpu PROPERTIES
    LABELS gpu
    SKIP_RETURN_CODE 77
    ENVIRONMENT "KGEN_LIB=$<TARGET_FILE:kgen_c>;KGEN_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/cache-python_gpu")
else()
  message(STATUS "python3 not found: the python_gpu test is not registered")
endif()
