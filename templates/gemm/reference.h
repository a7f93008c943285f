//===- reference.h - A plain GEMM reference and a random fill ---*- C++ -*-===//
//
// What kgen's kernels are checked against, by the tuner before a candidate
// may win and by the GPU tests. For every element of C it computes
//
//   ref    op(A)*op(B) accumulated in double from the exact 16-bit inputs
//          (products of 16-bit floats are exact; the double sum is exact to
//          ~1e-16), then alpha*ref + beta*C in double;
//   naive  the same loop in fp32, k in order, one fma a step, rounded to
//          C's dtype: what a straightforward same-dtype implementation gets;
//          with kTf32 (f32 inputs through TF32) from the inputs rounded to
//          TF32 as the kernels round them, while ref keeps the exact fp32
//          inputs (their products are exact in double too).
//
// The tolerance rule built on these is in kgen/Codegen/Reference.h.
//
// Written out here on purpose, sharing no code with kgen/common/prelude.h
// or the GEMM template: a reference must not inherit a bug from the
// kernels' conversions. One thread per element of C, 16x16 tiles through
// shared memory, launched as 256 threads. The generated file fixes the
// dtypes and the layout through Config (see emitGemmReference):
//
//   kTypeA (A and B) and kTypeC   kgen::reference::kBf16 / kF16 / kF32, and
//                                 for A and B kE4m3 / kE5m2 (fp8: their
//                                 products are exact in fp32 too)
//   kTransA, kTransB              stored transposed ('T')
//   kTf32                         f32 inputs through TF32 (the naive loop
//                                 rounds them first)
//
//===----------------------------------------------------------------------===//

#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__AMDGCN__) ||                    \
    defined(__HIPCC_RTC__)
#define KGEN_REFERENCE_AMD 1
#else
#define KGEN_REFERENCE_AMD 0
#endif

namespace kgen::reference {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

enum Type { kBf16 = 0, kF16 = 1, kF32 = 2, kE4m3 = 3, kE5m2 = 4 };

/// An fp8 format: exponent and mantissa bits, bias.
struct Fp8Format {
  int man, bias;
};
__device__ inline Fp8Format fp8Format(int type) {
  return type == kE4m3 ? Fp8Format{3, 7} : Fp8Format{2, 15};
}

__device__ inline float fromBits(u32 u) { return __builtin_bit_cast(float, u); }

/// Exact: every f16 is an fp32.
__device__ inline float decodeF16(u16 h) {
  u32 sign = u32(h >> 15) << 31, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) { // subnormal: man * 2^-24
    float v = float(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31)
    return fromBits(sign | 0x7f800000u | (man << 13));
  return fromBits(sign | ((exp + 112u) << 23) | (man << 13));
}

/// cvt.rna.tf32.f32: to a 10-bit mantissa, to nearest, ties away from
/// zero (the carry of a round-up may step the exponent, as it should);
/// inf and NaN pass unchanged.
__device__ inline float roundTf32(float x) {
  const u32 u = __builtin_bit_cast(u32, x);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return x;
  return fromBits((u + 0x1000u) & 0xffffe000u);
}

/// Exact: every fp8 value is an fp32. e4m3 (OCP "fn"): no infinity, S.1111.111
/// is NaN; e5m2: IEEE-like (exponent 31 is inf or NaN).
__device__ inline float decodeFp8(unsigned char x, int type) {
  const Fp8Format f = fp8Format(type);
  const int expBits = 7 - f.man;
  const u32 sign = u32(x >> 7) << 31;
  const int exp = (x >> f.man) & ((1 << expBits) - 1),
            man = x & ((1 << f.man) - 1);
  if (type == kE4m3 && exp == 15 && man == 7)
    return fromBits(0x7fc00000u);
  if (type == kE5m2 && exp == 31)
    return fromBits(sign | (man ? 0x7fc00000u : 0x7f800000u));
  if (exp == 0) { // subnormal: man * 2^(1 - bias - man bits)
    float v = float(man) * fromBits(u32(127 + 1 - f.bias - f.man) << 23);
    return sign ? -v : v;
  }
  return fromBits(sign | (u32(exp - f.bias + 127) << 23) |
                  (u32(man) << (23 - f.man)));
}

/// |v| < 2 rounded to nearest even fp8 of `type` (the fill's range; both
/// formats hold it without overflow).
__device__ inline unsigned char roundFp8(float v, int type) {
  const Fp8Format f = fp8Format(type);
  const u32 u = __builtin_bit_cast(u32, v);
  const u32 sign = (u >> 31) << 7;
  const float a = fromBits(u & 0x7fffffffu);
  if (a == 0.0f)
    return (unsigned char)sign;
  const int emin = 1 - f.bias; // the smallest normal exponent
  int e = int((u >> 23) & 0xffu) - 127;
  if (e < emin)
    e = emin; // subnormals share emin's spacing
  // a / 2^(e - man) in [0, 2^(man + 1)): an integer after rounding
  // (rintf: ties to even), exact since both are powers of two apart.
  const float quantum = fromBits(u32(e - f.man + 127) << 23);
  u32 q = u32(rintf(a / quantum));
  if (q >> (f.man + 1)) { // rounded up into the next binade
    q >>= 1;
    ++e;
  }
  // q < 2^man only when subnormal (e == emin, exponent field 0).
  const u32 field = q >> f.man ? u32(e + f.bias) : 0u;
  return (unsigned char)(sign | (field << f.man) | (q & ((1u << f.man) - 1)));
}

__device__ inline float load(const void *p, long long i, int type) {
  if (type == kF32)
    return ((const float *)p)[i];
  if (type == kE4m3 || type == kE5m2)
    return decodeFp8(((const unsigned char *)p)[i], type);
  u16 h = ((const u16 *)p)[i];
  return type == kBf16 ? fromBits(u32(h) << 16) : decodeF16(h);
}

/// fp32 -> bf16, round to nearest even.
__device__ inline u16 roundBf16(float f) {
#if KGEN_REFERENCE_AMD
  u32 u = __builtin_bit_cast(u32, f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return u16((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return u16(u >> 16);
#else
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
}

/// fp32 -> f16, round to nearest even.
__device__ inline u16 roundF16(float f) {
#if KGEN_REFERENCE_AMD
  return __builtin_bit_cast(u16, (_Float16)f);
#else
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
}

__device__ inline void store(void *p, long long i, int type, float v) {
  if (type == kE4m3 || type == kE5m2)
    ((unsigned char *)p)[i] = roundFp8(v, type);
  else if (type == kF32)
    ((float *)p)[i] = v;
  else
    ((u16 *)p)[i] = type == kBf16 ? roundBf16(v) : roundF16(v);
}

/// splitmix64's finalizer: element i of a fill is a pure function of
/// (seed, i), so fills are reproducible and need no generator state.
__device__ inline u64 mix(u64 z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// p[0, n) = uniform values in [-1, 1) rounded to `type`, or, with
/// `poison`, a quiet NaN of `type`. Any grid; a grid-stride loop.
__device__ inline void fill(void *p, long long n, int type, u64 seed,
                            int poison) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    if (poison) {
      if (type == kE4m3 || type == kE5m2)
        ((unsigned char *)p)[i] = 0x7f; // NaN in both
      else if (type == kF32)
        ((u32 *)p)[i] = 0x7fc00000u;
      else
        ((u16 *)p)[i] = type == kBf16 ? 0x7fc0 : 0x7e00;
      continue;
    }
    u64 r = mix(seed + 0x9e3779b97f4a7c15ull * (u64)(i + 1));
    float u = float(r >> 40) * 5.9604644775390625e-08f; // [0, 1), step 2^-24
    store(p, i, type, 2.0f * u - 1.0f);                 // exact, then rounded
  }
}

/// ref and naive (both m x n, packed) for one call; C is read only when
/// beta != 0 (it holds NaN otherwise). Each thread walks k in order, so
/// `naive` is the plain fp32 loop. scaleA and scaleB (fp8 inputs' per-tensor
/// scales, one fp32 each; null: 1) multiply the sum before alpha, as the
/// kernels apply them.
template <class Config>
__device__ inline void
gemm(const void *a, const void *b, const void *c, int m, int n, int k,
     long long lda, long long ldb, long long ldc, float alpha, float beta,
     double *ref, void *naive, const float *scaleA, const float *scaleB) {
  constexpr int typeA = Config::kTypeA, typeC = Config::kTypeC;
  constexpr bool transA = Config::kTransA, transB = Config::kTransB;
  __shared__ float sa[16][17], sb[16][17];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 16;
  double acc = 0;
  float accf = 0;
  for (int k0 = 0; k0 < k; k0 += 16) {
    // sa[r][s] = op(A)[row0 + r][k0 + s], sb[s][q] = op(B)[k0 + s][col0 + q]
    int i = row0 + ty, kk = k0 + tx;
    sa[ty][tx] = i < m && kk < k ? load(a,
                                        transA ? (long long)kk * lda + i
                                               : (long long)i * lda + kk,
                                        typeA)
                                 : 0.0f;
    kk = k0 + ty;
    int j = col0 + tx;
    sb[ty][tx] = kk < k && j < n ? load(b,
                                        transB ? (long long)j * ldb + kk
                                               : (long long)kk * ldb + j,
                                        typeA)
                                 : 0.0f;
    __syncthreads();
    const int steps = k - k0 < 16 ? k - k0 : 16;
    for (int s = 0; s < steps; ++s) {
      float x = sa[ty][s], y = sb[s][tx];
      acc += (double)x * (double)y; // the product is exact
      if (Config::kTf32) {
        x = roundTf32(x);
        y = roundTf32(y);
      }
      accf = fmaf(x, y, accf); // exact product too: one rounding a step
    }
    __syncthreads();
  }
  const int i = row0 + ty, j = col0 + tx;
  if (i >= m || j >= n)
    return;
  // C holds NaN when beta == 0: it must not be read.
  float cf = beta != 0.0f ? load(c, (long long)i * ldc + j, typeC) : 0.0f;
  const float fa = scaleA ? *scaleA : 1.0f, fb = scaleB ? *scaleB : 1.0f;
  ref[(long long)i * n + j] = (double)alpha * ((double)fa * fb * acc) +
                              (double)beta * (double)cf;
  store(naive, (long long)i * n + j, typeC,
        alpha * ((fa * fb) * accf) + beta * cf);
}

} // namespace kgen::reference
