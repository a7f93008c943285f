//===- hip_runtime_nvidia.h - HIP kernel language on nvrtc ------*- C++ -*-===//
//
// Handed to nvrtc under the name "hip/hip_runtime.h", so generated HIP source
// compiles unchanged for NVIDIA targets. The part of the HIP kernel language
// the templates use is spelled as in CUDA, which nvrtc knows without any
// header: __global__, __device__, __shared__ (and extern __shared__ for the
// dynamic allocation), __launch_bounds__, __forceinline__, __restrict__,
// threadIdx/blockIdx/blockDim/gridDim, __syncthreads, warpSize. This header
// therefore only names the platform, as hip-clang does on AMD; it includes
// nothing, since nvrtc has no system headers. HIP spellings with no CUDA twin
// (e.g. the mask-less __shfl_xor) are not mapped: templates use neither.
//
//===----------------------------------------------------------------------===//

#pragma once

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#define KGEN_NVIDIA 1
