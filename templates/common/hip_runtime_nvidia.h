//===- hip_runtime_nvidia.h - HIP kernel language on nvrtc ------*- C++ -*-===//
//
// Handed to nvrtc under the name "hip/hip_runtime.h", so generated HIP source
// compiles unchanged for NVIDIA targets. nvrtc already knows the kernel
// language the templates use (__global__, __device__, __shared__,
// __launch_bounds__, __forceinline__, threadIdx/blockIdx, __syncthreads), so
// this header only names the platform and adds the few HIP spellings that
// have no CUDA twin. It includes nothing: nvrtc has no system headers.
//
//===----------------------------------------------------------------------===//

#pragma once

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#define KGEN_NVIDIA 1

// HIP's macro for a dynamically sized shared-memory array.
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];

// HIP's older thread-index spellings.
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
