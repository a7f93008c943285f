//===- hip_runtime.h - The HIP kernel language on the host (emulated) -----===//
//
// Stands in for <hip/hip_runtime.h> when the emulator test compiles a
// generated kernel with g++. It maps the part of the kernel language the
// kgen templates use onto host code: the qualifiers vanish, threadIdx and
// blockIdx are thread-local, __syncthreads is a barrier over the block's
// host threads (test/emu/EmuRuntime.h). The platform comes from the build:
// EMU_NVIDIA includes kgen's own NVIDIA header (what nvrtc sees as
// <hip/hip_runtime.h>), EMU_AMD defines __HIP_PLATFORM_AMD__ as hip-clang
// does; prelude.h then detects the vendor exactly as on the GPU compilers.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "EmuRuntime.h"

#include <math.h> // tanhf, erff, expf: what nvrtc and hiprtc provide

#if defined(EMU_NVIDIA) == defined(EMU_AMD)
#error "compile with exactly one of -DEMU_NVIDIA or -DEMU_AMD"
#endif

#if EMU_NVIDIA
#include "kgen/common/hip_runtime_nvidia.h"
#else
#define __HIP_PLATFORM_AMD__ 1
// clang's ext_vector_type(N) (prelude.h's Bytes<> on AMD, always over
// 32-bit words) as GCC's vector_size in bytes.
#define ext_vector_type(n) vector_size((n)*4)
#endif

#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)

extern thread_local emu::Dim3 threadIdx, blockIdx, gridDim;

inline void __syncthreads() { emu::syncThreads(); }
inline int __syncthreads_or(int p) { return emu::syncThreadsOr(p); }
