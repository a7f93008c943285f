//===- prelude.h - Target detection, storage types, conversions -*- C++ -*-===//
//
// Included first by every kernel template. The runtime compilers see no
// system headers (nvrtc has no <cstdint> or cuda_bf16.h here), so the fixed
// width integers, the 16-bit float storage types and their round-to-nearest-
// even conversions are defined here, per target.
//
//===----------------------------------------------------------------------===//

#pragma once

#include <hip/hip_runtime.h>

// hiprtc and hip-clang define the AMD macros; nvrtc and nvcc define
// __CUDACC__. AMD is tested first because the NVIDIA hip_runtime.h of kgen
// defines __HIP_PLATFORM_NVIDIA__ but never an AMD macro.
#if !defined(KGEN_AMD) && !defined(KGEN_NVIDIA)
#if defined(__HIP_PLATFORM_AMD__) || defined(__AMDGCN__) ||                    \
    defined(__HIPCC_RTC__)
#define KGEN_AMD 1
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KGEN_NVIDIA 1
#else
#error "kgen templates need nvrtc/nvcc (NVIDIA) or hiprtc/hip-clang (AMD)"
#endif
#endif
#ifndef KGEN_AMD
#define KGEN_AMD 0
#endif
#ifndef KGEN_NVIDIA
#define KGEN_NVIDIA 0
#endif

/// Inline PTX where the code is compiled for an NVIDIA GPU; the portable
/// forms below it serve AMD and host-side unit tests of the templates.
#if KGEN_NVIDIA && defined(__CUDA_ARCH__)
#define KGEN_PTX 1
#else
#define KGEN_PTX 0
#endif

/// Every template function is a device function that should vanish into its
/// caller; nvrtc's -default-device is not enough for hiprtc.
#define KGEN_DEVICE __device__ __forceinline__

namespace kgen {

/// Programmatic dependent launch (sm_90; no-ops elsewhere). A kernel that
/// feeds the next one on the stream calls allowNextGrid() early: once all
/// its blocks have, the next kernel, if launched with
/// LaunchDims::overlapsPrevious, may start its blocks as this one's free
/// their multiprocessors, and do work that needs nothing of this one
/// (loading its own inputs) while this one finishes. That kernel calls
/// waitForPreviousGrid() before it reads what this one writes: it returns
/// once the previous grid has completed and its memory operations are
/// visible (at once for a launch that did not overlap).
KGEN_DEVICE void allowNextGrid() {
#if KGEN_PTX && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
KGEN_DEVICE void waitForPreviousGrid() {
#if KGEN_PTX && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

using int8_t = signed char;
using uint8_t = unsigned char;
using int16_t = short;
using uint16_t = unsigned short;
using int32_t = int;
using uint32_t = unsigned int;
using int64_t = long long;
using uint64_t = unsigned long long;

/// Threads that execute one matrix instruction together (warp / wavefront).
/// gfx90a and gfx942 run MFMA in wave64 only.
inline constexpr int kWaveSize = KGEN_AMD ? 64 : 32;

/// Storage-only 16-bit floats: arithmetic happens in fp32, so these carry
/// bits and nothing else (trivial types, fine in unions and shared memory).
struct alignas(2) bf16 {
  uint16_t bits;
};
struct alignas(2) f16 {
  uint16_t bits;
};
/// The 8-bit floats of sm_90a's fp8 wgmma (GEMM and attention inputs; the
/// only conversion into them is attention's P, in attention_sm90.h).
struct e4m3 {
  uint8_t bits;
};
struct e5m2 {
  uint8_t bits;
};

#if !KGEN_PTX
/// Same-size reinterpretation (clang and gcc; the PTX paths use CUDA's
/// __uint_as_float instead, which every nvrtc version knows).
template <class To, class From> KGEN_DEVICE To bitCast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs equal sizes");
  return __builtin_bit_cast(To, x);
}
#endif

KGEN_DEVICE float toFloat(bf16 x) {
  // bf16 is the upper half of an fp32: exact on every target.
#if KGEN_PTX
  return __uint_as_float(static_cast<uint32_t>(x.bits) << 16);
#else
  return bitCast<float>(static_cast<uint32_t>(x.bits) << 16);
#endif
}

KGEN_DEVICE float toFloat(f16 x) {
#if KGEN_PTX
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#else
  return static_cast<float>(bitCast<_Float16>(x.bits));
#endif
}

KGEN_DEVICE bf16 toBf16(float f) {
#if KGEN_PTX
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); // sm_80+
  return bf16{h};
#else
  uint32_t u = bitCast<uint32_t>(f);
  // A NaN stays a quiet NaN: the rounding add below could carry it into inf.
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest, ties to even
  return bf16{static_cast<uint16_t>(u >> 16)};
#endif
}

KGEN_DEVICE f16 toF16(float f) {
#if KGEN_PTX
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f16{h};
#else
  return f16{bitCast<uint16_t>(static_cast<_Float16>(f))}; // IEEE RNE
#endif
}

/// Converts between fp32 (the accumulator) and an output type, so epilogues
/// are written once for TypeC in {bf16, f16, float}.
template <class T> struct Convert;
template <> struct Convert<float> {
  static KGEN_DEVICE float fromFloat(float x) { return x; }
  static KGEN_DEVICE float toFloat(float x) { return x; }
};
template <> struct Convert<bf16> {
  static KGEN_DEVICE bf16 fromFloat(float x) { return toBf16(x); }
  static KGEN_DEVICE float toFloat(bf16 x) { return kgen::toFloat(x); }
};
template <> struct Convert<f16> {
  static KGEN_DEVICE f16 fromFloat(float x) { return toF16(x); }
  static KGEN_DEVICE float toFloat(f16 x) { return kgen::toFloat(x); }
};

/// kBytes of raw data moved as one access (2, 4, 8 or 16 bytes); the
/// alignment lets the compiler emit a single vector load or store.
#if KGEN_AMD
// Vector types: clang keeps them in registers, where an aligned struct
// chosen through ?: would go through scratch memory.
template <int kBytes> struct BytesOf {
  typedef uint32_t type __attribute__((ext_vector_type(kBytes / 4)));
};
template <> struct BytesOf<4> { using type = uint32_t; };
template <> struct BytesOf<2> { using type = uint16_t; };
template <int kBytes> using Bytes = typename BytesOf<kBytes>::type;
#else
template <int kBytes> struct alignas(kBytes) Bytes {
  static_assert(kBytes % 4 == 0, "2-byte accesses use Bytes<2>");
  uint32_t words[kBytes / 4];
};
template <> struct alignas(2) Bytes<2> { uint16_t half; };
#endif

/// kN adjacent elements of type T moved as one access (kN * sizeof(T) bytes,
/// a power of two up to 16).
template <class T, int kN> struct alignas(kN * sizeof(T)) Vec { T x[kN]; };

template <class A, class B> struct IsSame {
  static constexpr bool value = false;
};
template <class A> struct IsSame<A, A> { static constexpr bool value = true; };

} // namespace kgen
